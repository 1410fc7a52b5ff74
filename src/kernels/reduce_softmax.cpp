// Softmax, LogSoftmax and Hardmax. Before opset 13 the input is coerced to 2-D at `axis`
// (default 1) and each row of the flattened trailing block is normalised; from 13 the
// op normalises along the single `axis` (default -1). Rows along a contiguous last axis
// (the transformer case) take a vectorised path parallel over rows.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/reduce_common.h"

namespace partita::kernels {

namespace {

using namespace reduce;

enum class SoftKind { kSoftmax, kLogSoftmax, kHardmax };

constexpr int64_t kParallelWork = 1 << 14;

inline float expOf(float v) { return expFast(v); }
inline double expOf(double v) { return std::exp(v); }

// The [outer, n, inner] view the op normalises over, for a known shape.
AxisSplit softmaxSplit(const ir::Node& node, const std::vector<int64_t>& shape) {
  const int64_t rank = int64_t(shape.size());
  if (node.opset < 13) {
    int64_t axis = node.attrs.getInt("axis", 1);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis > rank)
      throw Error(ErrorCode::kInvalidModel, node.op_type + " node '" + node.name + "': axis " +
                                                std::to_string(node.attrs.getInt("axis", 1)) +
                                                " is out of range for rank " + std::to_string(rank));
    AxisSplit s;
    for (int64_t i = 0; i < rank; ++i) (i < axis ? s.outer : s.n) *= shape[size_t(i)];
    return s;
  }
  if (rank == 0) return AxisSplit{};
  int64_t axis =
      normalizeAxis(node.attrs.getInt("axis", -1), rank, node.op_type + " node '" + node.name + "'");
  return splitAt(shape, axis);
}

void inferSoftmax(InferContext& c) {
  sameAsInput(c);
  const ir::TensorType& x = c.input(0);
  if (!x.has_rank) return;
  std::vector<int64_t> ones(x.rank(), 1);  // only the axis is checked here
  try {
    softmaxSplit(c.node, ones);
  } catch (const Error& e) {
    throw Error(ErrorCode::kInvalidModel, e.what());
  }
}

// Contiguous rows of length n.
template <typename T, SoftKind kKind>
void softmaxRows(const T* x, T* y, int64_t rows, int64_t n) {
  using C = typename Elem<T>::Compute;
  constexpr bool kDirect = std::is_same_v<T, C>;  // write exps into y, no scratch
#pragma omp parallel if (rows * n > kParallelWork && rows > 1)
  {
    std::vector<C> scratch(kDirect ? 0 : size_t(n));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = x + r * n;
      T* yr = y + r * n;
      if constexpr (kKind == SoftKind::kHardmax) {
        int64_t best = 0;
        C bv = Elem<T>::load(xr[0]);
        for (int64_t j = 1; j < n; ++j) {
          C v = Elem<T>::load(xr[j]);
          if (v > bv) {
            bv = v;
            best = j;
          }
        }
        for (int64_t j = 0; j < n; ++j) yr[j] = Elem<T>::store(C(j == best ? 1 : 0));
        continue;
      }
      C m = -std::numeric_limits<C>::infinity();
#pragma omp simd reduction(max : m)
      for (int64_t j = 0; j < n; ++j) m = std::max(m, C(Elem<T>::load(xr[j])));
      C s = 0;
      if constexpr (kKind == SoftKind::kSoftmax) {
        C* e = kDirect ? reinterpret_cast<C*>(yr) : scratch.data();
#pragma omp simd reduction(+ : s)
        for (int64_t j = 0; j < n; ++j) {
          C v = expOf(C(Elem<T>::load(xr[j])) - m);
          e[j] = v;
          s += v;
        }
        const C inv = C(1) / s;
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) yr[j] = Elem<T>::store(e[j] * inv);
      } else {
#pragma omp simd reduction(+ : s)
        for (int64_t j = 0; j < n; ++j) s += expOf(C(Elem<T>::load(xr[j])) - m);
        const C log_s = std::log(s);
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) yr[j] = Elem<T>::store((C(Elem<T>::load(xr[j])) - m) - log_s);
      }
    }
  }
}

// Blocks of [n, inner]: normalise each of the `inner` columns, vectorised across them.
template <typename T, SoftKind kKind>
void softmaxStrided(const T* x, T* y, const AxisSplit& s) {
  using C = typename Elem<T>::Compute;
  const int64_t n = s.n, inner = s.inner;
#pragma omp parallel if (s.outer * n * inner > kParallelWork && s.outer > 1)
  {
    std::vector<C> mx(static_cast<size_t>(inner)), sum(static_cast<size_t>(inner));
    std::vector<C> e(static_cast<size_t>(n * inner));
    std::vector<int64_t> arg(static_cast<size_t>(inner));
#pragma omp for schedule(static)
    for (int64_t o = 0; o < s.outer; ++o) {
      const T* xb = x + o * n * inner;
      T* yb = y + o * n * inner;
      for (int64_t i = 0; i < inner; ++i) {
        mx[size_t(i)] = Elem<T>::load(xb[i]);
        arg[size_t(i)] = 0;
        sum[size_t(i)] = 0;
      }
      if constexpr (kKind == SoftKind::kHardmax) {
        for (int64_t j = 1; j < n; ++j)
          for (int64_t i = 0; i < inner; ++i) {
            C v = Elem<T>::load(xb[j * inner + i]);
            if (v > mx[size_t(i)]) {
              mx[size_t(i)] = v;
              arg[size_t(i)] = j;
            }
          }
        for (int64_t j = 0; j < n; ++j)
          for (int64_t i = 0; i < inner; ++i)
            yb[j * inner + i] = Elem<T>::store(C(arg[size_t(i)] == j ? 1 : 0));
        continue;
      }
      for (int64_t j = 1; j < n; ++j) {
        const T* xr = xb + j * inner;
#pragma omp simd
        for (int64_t i = 0; i < inner; ++i) mx[size_t(i)] = std::max(mx[size_t(i)], C(Elem<T>::load(xr[i])));
      }
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < inner; ++i) {
          C v = expOf(C(Elem<T>::load(xb[j * inner + i])) - mx[size_t(i)]);
          e[size_t(j * inner + i)] = v;
          sum[size_t(i)] += v;
        }
      if constexpr (kKind == SoftKind::kSoftmax) {
        for (int64_t i = 0; i < inner; ++i) sum[size_t(i)] = C(1) / sum[size_t(i)];
        for (int64_t j = 0; j < n; ++j)
          for (int64_t i = 0; i < inner; ++i)
            yb[j * inner + i] = Elem<T>::store(e[size_t(j * inner + i)] * sum[size_t(i)]);
      } else {
        for (int64_t i = 0; i < inner; ++i) sum[size_t(i)] = std::log(sum[size_t(i)]);
        for (int64_t j = 0; j < n; ++j)
          for (int64_t i = 0; i < inner; ++i)
            yb[j * inner + i] =
                Elem<T>::store((C(Elem<T>::load(xb[j * inner + i])) - mx[size_t(i)]) - sum[size_t(i)]);
      }
    }
  }
}

template <SoftKind kKind>
void runSoftmax(KernelContext& c) {
  const ir::Tensor& x = c.inputs[0];
  AxisSplit s;
  try {
    s = softmaxSplit(c.node, x.shape);
  } catch (const Error& e) {
    c.fail(e.what());
  }
  if (x.numel() == 0) return;
  PARTITA_DISPATCH_FLOATS(x.dtype, c.node.op_type, {
    const T* in = x.as<T>();
    T* out = c.outputs[0].as<T>();
    if (s.inner == 1)
      softmaxRows<T, kKind>(in, out, s.outer, s.n);
    else
      softmaxStrided<T, kKind>(in, out, s);
  });
}

}  // namespace

void registerSoftmaxOps(OpRegistry& r) {
  r.add("Softmax", {inferSoftmax, runSoftmax<SoftKind::kSoftmax>});
  r.add("LogSoftmax", {inferSoftmax, runSoftmax<SoftKind::kLogSoftmax>});
  r.add("Hardmax", {inferSoftmax, runSoftmax<SoftKind::kHardmax>});
}

}  // namespace partita::kernels
