// Row-major GEMM for the host kernels, over OpenBLAS.
//
// OpenBLAS (the OpenMP build, linked statically; see CMakeLists.txt) is pinned to one
// thread the first time any of these runs: kernels parallelise with OpenMP themselves
// and split GEMMs between threads, so only one thread pool exists. The serial forms
// may be called from inside an OpenMP parallel region, concurrently; the parallel
// forms must be called outside one.
// Thread-safe.
#pragma once

#include <cstdint>

namespace partita::kernels {

// C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C, on the calling thread only.
void gemmSerial(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void gemmSerial(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

// The same product, split by rows or columns of C over the kernel threads when large.
void gemmParallel(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                  int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc);
void gemmParallel(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                  int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc);

// Integer GEMM with the same layout conventions (plain loops; no BLAS for integers).
template <typename T>
void gemmIntegral(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
                  int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    T* crow = c + i * ldc;
    for (int64_t j = 0; j < n; ++j) crow[j] = beta == T(0) ? T(0) : T(beta * crow[j]);
    for (int64_t p = 0; p < k; ++p) {
      T av = trans_a ? a[p * lda + i] : a[i * lda + p];
      if (av == T(0)) continue;
      av = T(alpha * av);
      if (trans_b) {
        for (int64_t j = 0; j < n; ++j) crow[j] = T(crow[j] + av * b[j * ldb + p]);
      } else {
        const T* brow = b + p * ldb;
        for (int64_t j = 0; j < n; ++j) crow[j] = T(crow[j] + av * brow[j]);
      }
    }
  }
}

}  // namespace partita::kernels
