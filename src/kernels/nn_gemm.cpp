#include "kernels/nn_gemm.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <mutex>

#include "kernels/op_util.h"

namespace partita::kernels {

namespace {

// Every BLAS call here is single-threaded: the kernels split the work themselves.
// OpenBLAS's OpenMP build implements openblas_set_num_threads with
// omp_set_num_threads, which would also pin the caller's later OpenMP regions (and
// oneDNN's) to one thread: the OpenMP setting is restored right away.
void pinBlasToOneThread() {
  static std::once_flag once;
  std::call_once(once, [] {
    const int omp_threads = omp_get_max_threads();
    openblas_set_num_threads(1);
    omp_set_num_threads(omp_threads);
  });
}

void blas(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m), int(n),
              int(k), alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
}

void blas(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
          const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(m), int(n),
              int(k), alpha, a, int(lda), b, int(ldb), beta, c, int(ldc));
}

// Handles the degenerate shapes BLAS rejects or mishandles (k == 0 must still scale C).
template <typename T>
bool trivial(int64_t m, int64_t n, int64_t k, T beta, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return true;
  if (k > 0) return false;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
  return true;
}

template <typename T>
void serial(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
            int64_t ldb, T beta, T* c, int64_t ldc) {
  if (trivial(m, n, k, beta, c, ldc)) return;
  pinBlasToOneThread();
  blas(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

template <typename T>
void parallel(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda, const T* b,
              int64_t ldb, T beta, T* c, int64_t ldc) {
  if (trivial(m, n, k, beta, c, ldc)) return;
  pinBlasToOneThread();
  const int threads = splitThreads();
  // Below ~2 MFLOP a second thread costs more than it saves.
  if (threads <= 1 || m * n * k < (int64_t(1) << 20)) {
    blas(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  // Split the larger side of C; each part is one BLAS call on one thread.
  const bool split_rows = m >= n;
  const int64_t extent = split_rows ? m : n;
  const int64_t align = split_rows ? 4 : 16;
  int64_t chunk = (extent + threads - 1) / threads;
  chunk = (chunk + align - 1) / align * align;
  const int parts = int((extent + chunk - 1) / chunk);
#pragma omp parallel for num_threads(std::min(threads, omp_get_max_threads())) schedule(static, 1)
  for (int p = 0; p < parts; ++p) {
    const int64_t lo = p * chunk, len = std::min(chunk, extent - lo);
    if (split_rows) {
      const T* ap = ta ? a + lo : a + lo * lda;
      blas(ta, tb, len, n, k, alpha, ap, lda, b, ldb, beta, c + lo * ldc, ldc);
    } else {
      const T* bp = tb ? b + lo * ldb : b + lo;
      blas(ta, tb, m, len, k, alpha, a, lda, bp, ldb, beta, c + lo, ldc);
    }
  }
}

}  // namespace

void gemmSerial(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  serial(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void gemmSerial(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a, int64_t lda,
                const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  serial(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void gemmParallel(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                  const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  parallel(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void gemmParallel(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                  int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  parallel(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace partita::kernels
