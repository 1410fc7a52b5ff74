// Ops that scan along an axis or over the whole tensor: CumSum, TopK and NonZero.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <type_traits>

#include "kernels/reduce_common.h"

namespace partita::kernels {

namespace {

using namespace reduce;

constexpr int64_t kParallelWork = 1 << 15;

template <typename C>
bool isNan(C v) {
  if constexpr (std::is_floating_point_v<C>) return std::isnan(v);
  return false;
}

// Reads a scalar (or one-element) integer input such as CumSum's axis or TopK's K.
int64_t readSingleInt(const ir::Tensor& t, const std::string& what) {
  if (t.numel() != 1)
    throw Error(ErrorCode::kInvalidModel,
                what + " must hold exactly one value, got shape " + ir::shapeStr(t.shape));
  return readInts(t)[0];
}

// ---- CumSum(x, axis) with `exclusive` and `reverse` ----

void inferCumSum(InferContext& c) {
  sameAsInput(c);
  const ir::TensorType& x = c.input(0);
  if (!x.has_rank || !c.value(1)) return;
  try {
    normalizeAxis(readSingleInt(*c.value(1), "axis"), int64_t(x.rank()), "axis");
  } catch (const Error& e) {
    c.fail(e.what());
  }
}

template <typename T>
void cumSumTyped(const ir::Tensor& x, ir::Tensor& y, const AxisSplit& s, bool exclusive, bool reverse) {
  using C = typename Elem<T>::Compute;
  const T* in = x.as<T>();
  T* out = y.as<T>();
#pragma omp parallel if (s.outer * s.n * s.inner > kParallelWork && s.outer > 1)
  {
    std::vector<C> acc(static_cast<size_t>(s.inner));
#pragma omp for schedule(static)
    for (int64_t o = 0; o < s.outer; ++o) {
      std::fill(acc.begin(), acc.end(), C(0));
      for (int64_t step = 0; step < s.n; ++step) {
        int64_t j = reverse ? s.n - 1 - step : step;
        const T* xr = in + (o * s.n + j) * s.inner;
        T* yr = out + (o * s.n + j) * s.inner;
        for (int64_t i = 0; i < s.inner; ++i) {
          C v = Elem<T>::load(xr[i]);
          if (exclusive) {
            yr[i] = Elem<T>::store(acc[size_t(i)]);
            acc[size_t(i)] += v;
          } else {
            acc[size_t(i)] += v;
            yr[i] = Elem<T>::store(acc[size_t(i)]);
          }
        }
      }
    }
  }
}

void runCumSum(KernelContext& c) {
  const ir::Tensor& x = c.inputs[0];
  if (!c.hasInput(1)) c.fail("the axis input is required");
  int64_t axis = 0;
  try {
    axis = x.rank() == 0 ? 0 : normalizeAxis(readSingleInt(c.inputs[1], "axis"), int64_t(x.rank()), "axis");
  } catch (const Error& e) {
    c.fail(e.what());
  }
  AxisSplit s = splitAt(x.shape, axis);
  bool exclusive = c.attrs().getInt("exclusive", 0) != 0;
  bool reverse = c.attrs().getInt("reverse", 0) != 0;
  PARTITA_DISPATCH_NUMERIC(x.dtype, c.node.op_type, cumSumTyped<T>(x, c.outputs[0], s, exclusive, reverse));
}

// ---- TopK(X, K) -> (Values, Indices) ----

// K from the attribute (opset < 10) or the input; -1 when not known yet.
int64_t topkK(const ir::Node& node, const ir::Tensor* k_value) {
  if (node.opset < 10) return node.attrs.getInt("k", -1);
  if (!k_value) return -1;
  return readSingleInt(*k_value, "K");
}

void inferTopK(InferContext& c) {
  const ir::TensorType& x = c.input(0);
  c.outputs[0] = ir::TensorType::unranked(x.dtype);
  if (c.outputs.size() > 1) c.outputs[1] = ir::TensorType::unranked(ir::DType::kInt64);
  if (!x.has_rank) return;
  int64_t axis = 0, k = -1;
  try {
    axis = normalizeAxis(c.attrs().getInt("axis", -1), int64_t(x.rank()), "axis");
    k = topkK(c.node, c.value(1));
  } catch (const Error& e) {
    c.fail(e.what());
  }
  ir::TensorType out = x;
  const ir::Dim& d = x.dims[size_t(axis)];
  if (k >= 0 && d.isKnown() && k > d.value)
    c.fail("K = " + std::to_string(k) + " exceeds the axis' size " + std::to_string(d.value));
  if (k < -1 || (c.opset() < 10 && k < 0)) c.fail("K must be non-negative");
  out.dims[size_t(axis)] = k >= 0 ? ir::Dim::known(k) : ir::Dim{};
  c.outputs[0] = out;
  if (c.outputs.size() > 1) {
    out.dtype = ir::DType::kInt64;
    c.outputs[1] = out;
  }
}

template <typename T>
void topkTyped(const ir::Tensor& x, ir::Tensor& values, ir::Tensor& indices, const AxisSplit& s, int64_t k,
               bool largest) {
  using C = typename Elem<T>::Compute;
  const T* in = x.as<T>();
  T* vout = values.defined() ? values.as<T>() : nullptr;
  int64_t* iout = indices.defined() ? indices.as<int64_t>() : nullptr;
  const int64_t slices = s.outer * s.inner;
#pragma omp parallel if (slices * s.n > kParallelWork && slices > 1)
  {
    std::vector<C> col(static_cast<size_t>(s.n));
    std::vector<int64_t> order(static_cast<size_t>(s.n));
    // Strict weak order: the better element first, NaN counted as the largest, ties
    // broken by the lower index.
    auto before = [&](int64_t a, int64_t b) {
      C va = col[size_t(a)], vb = col[size_t(b)];
      bool na = isNan(va), nb = isNan(vb);
      if (na || nb) {
        if (na && nb) return a < b;
        return largest ? na : nb;
      }
      if (va != vb) return largest ? va > vb : va < vb;
      return a < b;
    };
#pragma omp for schedule(static)
    for (int64_t sl = 0; sl < slices; ++sl) {
      const int64_t o = sl / s.inner, i = sl % s.inner;
      const T* src = in + o * s.n * s.inner + i;
      for (int64_t j = 0; j < s.n; ++j) col[size_t(j)] = Elem<T>::load(src[j * s.inner]);
      std::iota(order.begin(), order.end(), int64_t(0));
      std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
      const int64_t base = o * k * s.inner + i;
      for (int64_t j = 0; j < k; ++j) {
        if (vout) vout[base + j * s.inner] = Elem<T>::store(col[size_t(order[size_t(j)])]);
        if (iout) iout[base + j * s.inner] = order[size_t(j)];
      }
    }
  }
}

void runTopK(KernelContext& c) {
  const ir::Tensor& x = c.inputs[0];
  int64_t axis = 0, k = 0;
  try {
    axis = normalizeAxis(c.attrs().getInt("axis", -1), int64_t(x.rank()), "axis");
    k = topkK(c.node, c.hasInput(1) ? &c.inputs[1] : nullptr);
  } catch (const Error& e) {
    c.fail(e.what());
  }
  AxisSplit s = splitAt(x.shape, axis);
  if (k < 0 || k > s.n)
    c.fail("K = " + std::to_string(k) + " is out of range for an axis of size " + std::to_string(s.n));
  bool largest = c.attrs().getInt("largest", 1) != 0;
  ir::Tensor none;
  ir::Tensor& values = c.outputs.empty() ? none : c.outputs[0];
  ir::Tensor& indices = c.outputs.size() > 1 ? c.outputs[1] : none;
  if (k == 0 || s.outer * s.inner == 0) return;
  PARTITA_DISPATCH_NUMERIC(x.dtype, c.node.op_type, topkTyped<T>(x, values, indices, s, k, largest));
}

// ---- NonZero(X) -> int64 [rank, count] ----

template <typename T>
int64_t countNonZero(const ir::Tensor& x) {
  const T* p = x.as<T>();
  int64_t count = 0;
  for (int64_t i = 0, n = x.numel(); i < n; ++i) count += Elem<T>::load(p[i]) != 0;
  return count;
}

int64_t nonZeroCount(const ir::Tensor& x) {
  if (x.dtype == ir::DType::kBool) return countNonZero<uint8_t>(x);
  int64_t count = 0;
  PARTITA_DISPATCH_NUMERIC(x.dtype, "NonZero", count = countNonZero<T>(x));
  return count;
}

void inferNonZero(InferContext& c) {
  const ir::TensorType& x = c.input(0);
  if (!x.has_rank) {
    c.outputs[0] = ir::TensorType{ir::DType::kInt64, true, {ir::Dim{}, ir::Dim{}}};
    return;
  }
  ir::Dim count{};
  if (const ir::Tensor* v = c.value(0)) count = ir::Dim::known(nonZeroCount(*v));
  c.outputs[0] = ir::TensorType{ir::DType::kInt64, true, {ir::Dim::known(int64_t(x.rank())), count}};
}

template <typename T>
void nonZeroTyped(const ir::Tensor& x, ir::Tensor& y) {
  const T* p = x.as<T>();
  const int64_t rank = int64_t(x.rank()), n = x.numel(), count = y.rank() == 2 ? y.shape[1] : 0;
  int64_t* out = y.as<int64_t>();
  std::vector<int64_t> idx(size_t(rank), 0);
  int64_t col = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (Elem<T>::load(p[i]) != 0) {
      if (col >= count) break;
      for (int64_t d = 0; d < rank; ++d) out[d * count + col] = idx[size_t(d)];
      ++col;
    }
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++idx[size_t(d)] < x.shape[size_t(d)]) break;
      idx[size_t(d)] = 0;
    }
  }
}

void runNonZero(KernelContext& c) {
  const ir::Tensor& x = c.inputs[0];
  ir::Tensor& y = c.outputs[0];
  if (y.rank() != 2 || y.shape[0] != int64_t(x.rank()) || y.shape[1] != nonZeroCount(x))
    c.fail("output shape " + ir::shapeStr(y.shape) + " does not match the input's non-zero count");
  if (x.dtype == ir::DType::kBool) {
    nonZeroTyped<uint8_t>(x, y);
    return;
  }
  PARTITA_DISPATCH_NUMERIC(x.dtype, c.node.op_type, nonZeroTyped<T>(x, y));
}

}  // namespace

void registerScanOps(OpRegistry& r) {
  r.add("CumSum", {inferCumSum, runCumSum});
  r.add("TopK", {inferTopK, runTopK});
  r.add("NonZero", {inferNonZero, runNonZero});
}

}  // namespace partita::kernels
