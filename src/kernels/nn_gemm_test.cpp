// The host GEMM: single-threaded BLAS calls from many OpenMP threads at once are
// right and repeatable, and pinning BLAS to one thread leaves the caller's OpenMP
// thread count (which oneDNN reads) alone.
#include "kernels/nn_gemm.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace partita::kernels {
namespace {

std::vector<float> ramp(size_t n, float step) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = float(int(i % 97) - 48) * step;
  return v;
}

// Many threads calling the serial GEMM at once (as the conv and matmul kernels do):
// every call is right, and every round gives the same bits. (OpenBLAS's OpenMP build
// takes another code path inside a parallel region than outside, so the bits may
// differ from a call made outside one; each kernel call site is always one or the
// other.)
TEST(HostGemm, ConcurrentSerialCallsAreRightAndRepeatable) {
  constexpr int64_t m = 64, n = 96, k = 200;
  constexpr int kCalls = 16;
  const std::vector<float> a = ramp(m * k, 0.01f), b = ramp(k * n, 0.02f);
  std::vector<double> ref(m * n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) sum += double(a[size_t(i * k + p)]) * b[size_t(p * n + j)];
      ref[size_t(i * n + j)] = sum;
    }
  std::vector<std::vector<float>> first;
  for (int round = 0; round < 6; ++round) {
    std::vector<std::vector<float>> got(kCalls, std::vector<float>(m * n));
#pragma omp parallel for num_threads(4) schedule(dynamic, 1)
    for (int i = 0; i < kCalls; ++i)
      gemmSerial(false, false, m, n, k, 1.0f, a.data(), k, b.data(), n, 0.0f, got[size_t(i)].data(), n);
    for (int i = 0; i < kCalls; ++i) {
      double worst = 0;
      for (size_t e = 0; e < ref.size(); ++e)
        worst = std::max(worst, std::abs(got[size_t(i)][e] - ref[e]) / (1e-3 + std::abs(ref[e])));
      EXPECT_LT(worst, 1e-4) << "call " << i << ", round " << round;
    }
    if (round == 0) first = got;
    for (int i = 0; i < kCalls; ++i)
      ASSERT_EQ(std::memcmp(got[size_t(i)].data(), first[0].data(), first[0].size() * sizeof(float)), 0)
          << "call " << i << ", round " << round;
  }
}

TEST(HostGemm, LeavesTheOpenMPThreadCountAlone) {
  const int before = omp_get_max_threads();
  omp_set_num_threads(3);
  std::vector<float> a = ramp(16, 1), b = ramp(16, 1), c(16);
  gemmParallel(false, false, 4, 4, 4, 1.0f, a.data(), 4, b.data(), 4, 0.0f, c.data(), 4);
  gemmSerial(false, false, 4, 4, 4, 1.0f, a.data(), 4, b.data(), 4, 0.0f, c.data(), 4);
  EXPECT_EQ(omp_get_max_threads(), 3);
  omp_set_num_threads(before);
}

}  // namespace
}  // namespace partita::kernels
