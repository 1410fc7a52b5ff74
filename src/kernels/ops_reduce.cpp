// Reductions over axes: ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare,
// ArgMax/ArgMin and MeanVarianceNormalization. The other reduction-style ops live in
// reduce_*.cpp and are registered from here.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/op_registry.h"
#include "kernels/op_util.h"
#include "kernels/reduce_common.h"

namespace partita::kernels {

namespace {

using namespace reduce;

enum class ReduceKind { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

// ReduceSum takes its axes as an input from opset 13, the others from opset 18.
bool axesFromInput(ReduceKind kind, int opset) {
  return opset >= 18 || (kind == ReduceKind::kSum && opset >= 13);
}

// The reduction's axes as the node states them: `known` false when they come from an
// input whose value is not known yet. An empty list means "all axes" unless
// noop_with_empty_axes is set.
struct AxesSpec {
  bool known = true;
  std::vector<int64_t> axes;
  bool noop_when_empty = false;
};

AxesSpec axesSpec(ReduceKind kind, const ir::Node& node, bool has_axes_input, const ir::Tensor* axes_value) {
  AxesSpec s;
  s.noop_when_empty = node.attrs.getInt("noop_with_empty_axes", 0) != 0;
  if (!axesFromInput(kind, node.opset)) {
    s.axes = node.attrs.getInts("axes");
    return s;
  }
  if (!has_axes_input) return s;
  if (!axes_value) {
    s.known = false;
    return s;
  }
  s.axes = readInts(*axes_value);
  return s;
}

// Which dimensions are reduced: those named by `axes`, or every one when it is empty.
std::vector<bool> reducedMask(const std::vector<int64_t>& axes, int64_t rank, const std::string& what) {
  std::vector<bool> mask(size_t(rank), axes.empty());
  for (int64_t a : axes) mask[size_t(normalizeAxis(a, rank, what))] = true;
  return mask;
}

template <ReduceKind kKind>
void inferReduce(InferContext& c) {
  const ir::TensorType& x = c.input(0);
  bool keep = c.attrs().getInt("keepdims", 1) != 0;
  AxesSpec spec = axesSpec(kKind, c.node, c.hasInput(1), c.value(1));
  c.outputs[0] = ir::TensorType::unranked(x.dtype);
  if (!x.has_rank) return;
  if (!spec.known) {
    if (keep) {
      c.outputs[0] = x;
      for (ir::Dim& d : c.outputs[0].dims)
        if (!(d.isKnown() && d.value == 1)) d = ir::Dim{};
    }
    return;
  }
  if (spec.axes.empty() && spec.noop_when_empty) {
    c.outputs[0] = x;
    return;
  }
  std::vector<bool> mask;
  try {
    mask = reducedMask(spec.axes, int64_t(x.rank()), "axes");
  } catch (const Error& e) {
    c.fail(e.what());
  }
  ir::TensorType out{x.dtype, true, {}};
  for (size_t i = 0; i < x.rank(); ++i) {
    if (!mask[i])
      out.dims.push_back(x.dims[i]);
    else if (keep)
      out.dims.push_back(ir::Dim::known(1));
  }
  c.outputs[0] = std::move(out);
}

// The input's dims collapsed into alternating kept / reduced groups (size-1 dims
// dropped, neighbours of the same kind merged), so that the kernel can pick a
// contiguous loop for the common layouts.
struct ReducePlan {
  std::vector<int64_t> dims;
  std::vector<bool> reduced;
  int64_t out_numel = 1;
  int64_t count = 1;  // elements reduced into each output
};

ReducePlan planReduce(const std::vector<int64_t>& shape, const std::vector<bool>& mask) {
  ReducePlan p;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (mask[i])
      p.count *= shape[i];
    else
      p.out_numel *= shape[i];
    if (shape[i] == 1) continue;
    if (!p.dims.empty() && p.reduced.back() == mask[i]) {
      p.dims.back() *= shape[i];
    } else {
      p.dims.push_back(shape[i]);
      p.reduced.push_back(mask[i]);
    }
  }
  return p;
}

// Accumulator type: the element's compute type for floats; for integers int64 for sums
// and products, double for the ops that take roots and logs, the type itself for max/min.
template <typename T, ReduceKind kKind>
using AccOf = std::conditional_t<
    std::is_floating_point_v<typename Elem<T>::Compute>, typename Elem<T>::Compute,
    std::conditional_t<kKind == ReduceKind::kMax || kKind == ReduceKind::kMin, T,
                       std::conditional_t<kKind == ReduceKind::kL2 || kKind == ReduceKind::kLogSum ||
                                              kKind == ReduceKind::kLogSumExp,
                                          double, int64_t>>>;

template <typename A>
bool isNan(A v) {
  if constexpr (std::is_floating_point_v<A>) return std::isnan(v);
  return false;
}

// One reduction: init, map (element -> accumulator, given the output index),
// combine, finish (accumulator -> element).
template <typename T, ReduceKind kKind>
struct Reducer {
  using Acc = AccOf<T, kKind>;
  const Acc* shift = nullptr;  // per-output max for LogSumExp

  static Acc init() {
    if constexpr (kKind == ReduceKind::kProd) return Acc(1);
    if constexpr (kKind == ReduceKind::kMax) {
      if constexpr (std::numeric_limits<Acc>::has_infinity) return -std::numeric_limits<Acc>::infinity();
      return std::numeric_limits<Acc>::lowest();
    }
    if constexpr (kKind == ReduceKind::kMin) {
      if constexpr (std::numeric_limits<Acc>::has_infinity) return std::numeric_limits<Acc>::infinity();
      return std::numeric_limits<Acc>::max();
    }
    return Acc(0);
  }
  Acc map(T v, int64_t o) const {
    Acc x = Acc(Elem<T>::load(v));
    if constexpr (kKind == ReduceKind::kL1) {
      if constexpr (std::is_signed_v<Acc>) return x < 0 ? Acc(-x) : x;
      return x;
    }
    if constexpr (kKind == ReduceKind::kL2 || kKind == ReduceKind::kSumSquare) return x * x;
    if constexpr (kKind == ReduceKind::kLogSumExp) return std::exp(x - shift[o]);
    return x;
  }
  static Acc combine(Acc a, Acc b) {
    if constexpr (kKind == ReduceKind::kMax) return (b > a || isNan(b)) ? b : a;
    if constexpr (kKind == ReduceKind::kMin) return (b < a || isNan(b)) ? b : a;
    if constexpr (kKind == ReduceKind::kProd) return a * b;
    return a + b;
  }
  T finish(Acc a, int64_t count, int64_t o) const {
    using C = typename Elem<T>::Compute;
    if constexpr (kKind == ReduceKind::kMean) {
      if constexpr (std::is_floating_point_v<Acc>) return Elem<T>::store(C(a / Acc(count)));
      return Elem<T>::store(C(count ? a / Acc(count) : 0));
    }
    if constexpr (kKind == ReduceKind::kL2) return Elem<T>::store(C(std::sqrt(a)));
    if constexpr (kKind == ReduceKind::kLogSum) return Elem<T>::store(C(std::log(a)));
    if constexpr (kKind == ReduceKind::kLogSumExp) return Elem<T>::store(C(std::log(a) + shift[o]));
    return Elem<T>::store(C(a));
  }
};

constexpr int64_t kParallelWork = 1 << 15;

// Calls f(input index, output index) for every input element, in input order.
template <typename F>
void forEachElement(const ReducePlan& p, F&& f) {
  size_t rank = p.dims.size();
  std::vector<int64_t> out_strides(rank, 0);
  int64_t s = 1;
  for (size_t i = rank; i-- > 0;) {
    if (p.reduced[i]) continue;
    out_strides[i] = s;
    s *= p.dims[i];
  }
  int64_t total = 1;
  for (int64_t d : p.dims) total *= d;
  std::vector<int64_t> idx(rank, 0);
  int64_t o = 0;
  for (int64_t i = 0; i < total; ++i) {
    f(i, o);
    for (size_t d = rank; d-- > 0;) {
      o += out_strides[d];
      if (++idx[d] < p.dims[d]) break;
      o -= out_strides[d] * p.dims[d];
      idx[d] = 0;
    }
  }
}

template <typename T, typename R>
void reduceWith(const R& red, const T* x, T* y, const ReducePlan& p) {
  using Acc = typename R::Acc;
  const size_t groups = p.dims.size();
  if (p.out_numel == 0) return;
  if (p.count == 0) {
    for (int64_t o = 0; o < p.out_numel; ++o) y[o] = red.finish(R::init(), 0, o);
    return;
  }
  if (p.count == 1) {  // nothing to reduce: map and finish each element
#pragma omp parallel for if (p.out_numel > kParallelWork) schedule(static)
    for (int64_t o = 0; o < p.out_numel; ++o)
      y[o] = red.finish(R::combine(R::init(), red.map(x[o], o)), 1, o);
    return;
  }
  // [outer kept, n reduced]: contiguous rows, 8 partial accumulators per row.
  if ((groups <= 2 && p.reduced.back() && (groups == 1 || !p.reduced[0]))) {
    const int64_t rows = p.out_numel, n = p.count;
#pragma omp parallel for if (rows * n > kParallelWork && rows > 1) schedule(static)
    for (int64_t o = 0; o < rows; ++o) {
      const T* row = x + o * n;
      Acc part[8];
      for (auto& a : part) a = R::init();
      int64_t j = 0;
      for (; j + 8 <= n; j += 8)
        for (int k = 0; k < 8; ++k) part[k] = R::combine(part[k], red.map(row[j + k], o));
      Acc acc = R::init();
      for (; j < n; ++j) acc = R::combine(acc, red.map(row[j], o));
      for (auto& a : part) acc = R::combine(acc, a);
      y[o] = red.finish(acc, n, o);
    }
    return;
  }
  // [outer kept, n reduced, inner kept] (outer possibly absent): accumulate whole rows.
  if (groups >= 2 && groups <= 3 && !p.reduced.back() && p.reduced[groups - 2] &&
      (groups == 2 || !p.reduced[0])) {
    const int64_t inner = p.dims[groups - 1], n = p.dims[groups - 2];
    const int64_t outer = groups == 3 ? p.dims[0] : 1;
#pragma omp parallel if (outer * n * inner > kParallelWork)
    {
      std::vector<Acc> acc(static_cast<size_t>(inner));
#pragma omp for schedule(static)
      for (int64_t o = 0; o < outer; ++o) {
        const T* block = x + o * n * inner;
        const int64_t base = o * inner;
        std::fill(acc.begin(), acc.end(), R::init());
        for (int64_t r = 0; r < n; ++r) {
          const T* row = block + r * inner;
          for (int64_t i = 0; i < inner; ++i)
            acc[size_t(i)] = R::combine(acc[size_t(i)], red.map(row[i], base + i));
        }
        for (int64_t i = 0; i < inner; ++i) y[base + i] = red.finish(acc[size_t(i)], n, base + i);
      }
    }
    return;
  }
  // Anything else: one pass in input order into an accumulator per output.
  std::vector<Acc> acc(size_t(p.out_numel), R::init());
  forEachElement(
      p, [&](int64_t i, int64_t o) { acc[size_t(o)] = R::combine(acc[size_t(o)], red.map(x[i], o)); });
  for (int64_t o = 0; o < p.out_numel; ++o) y[o] = red.finish(acc[size_t(o)], p.count, o);
}

template <typename T, ReduceKind kKind>
void reduceTyped(const ir::Tensor& x, ir::Tensor& y, const ReducePlan& p) {
  const T* in = x.as<T>();
  T* out = y.as<T>();
  if constexpr (kKind == ReduceKind::kLogSumExp) {
    // Shift by the per-output max so exp cannot overflow.
    using Acc = AccOf<T, kKind>;
    std::vector<T> maxes(static_cast<size_t>(p.out_numel));
    reduceWith(Reducer<T, ReduceKind::kMax>{}, in, maxes.data(), p);
    std::vector<Acc> shift(static_cast<size_t>(p.out_numel));
    for (size_t o = 0; o < shift.size(); ++o) {
      Acc m = Acc(Elem<T>::load(maxes[o]));
      shift[o] = std::isfinite(double(m)) ? m : Acc(0);
    }
    Reducer<T, kKind> red;
    red.shift = shift.data();
    reduceWith(red, in, out, p);
  } else {
    reduceWith(Reducer<T, kKind>{}, in, out, p);
  }
}

template <ReduceKind kKind>
void runReduce(KernelContext& c) {
  const ir::Tensor& x = c.inputs[0];
  ir::Tensor& y = c.outputs[0];
  AxesSpec spec = axesSpec(kKind, c.node, c.hasInput(1), c.hasInput(1) ? &c.inputs[1] : nullptr);
  if (spec.axes.empty() && spec.noop_when_empty) {
    if (x.nbytes())
      std::copy_n(static_cast<const std::byte*>(x.data), x.nbytes(), static_cast<std::byte*>(y.data));
    return;
  }
  std::vector<bool> mask;
  try {
    mask = reducedMask(spec.axes, int64_t(x.rank()), "axes");
  } catch (const Error& e) {
    c.fail(e.what());
  }
  ReducePlan p = planReduce(x.shape, mask);
  if (p.out_numel != y.numel())
    c.fail("output has " + std::to_string(y.numel()) + " elements, expected " + std::to_string(p.out_numel));
  if constexpr (kKind == ReduceKind::kMax || kKind == ReduceKind::kMin) {
    if (x.dtype == ir::DType::kBool) {
      reduceTyped<uint8_t, kKind>(x, y, p);
      return;
    }
  }
  PARTITA_DISPATCH_NUMERIC(x.dtype, c.node.op_type, reduceTyped<T, kKind>(x, y, p));
}

// ---- ArgMax / ArgMin ----

void inferArg(InferContext& c) {
  const ir::TensorType& x = c.input(0);
  c.outputs[0] = ir::TensorType::unranked(ir::DType::kInt64);
  if (!x.has_rank) return;
  int64_t axis = 0;
  try {
    axis = normalizeAxis(c.attrs().getInt("axis", 0), int64_t(x.rank()), "axis");
  } catch (const Error& e) {
    c.fail(e.what());
  }
  ir::TensorType out{ir::DType::kInt64, true, {}};
  bool keep = c.attrs().getInt("keepdims", 1) != 0;
  for (size_t i = 0; i < x.rank(); ++i) {
    if (int64_t(i) != axis)
      out.dims.push_back(x.dims[i]);
    else if (keep)
      out.dims.push_back(ir::Dim::known(1));
  }
  c.outputs[0] = std::move(out);
}

template <typename T, bool kMax>
void argTyped(const ir::Tensor& x, ir::Tensor& y, const AxisSplit& s, bool last) {
  using C = typename Elem<T>::Compute;
  const T* in = x.as<T>();
  int64_t* out = y.as<int64_t>();
  // Is `v` a new best over `b`? Strictly better, or equal when the last index is wanted.
  auto better = [last](C v, C b) { return kMax ? (v > b || (last && v == b)) : (v < b || (last && v == b)); };
#pragma omp parallel if (s.outer * s.n * s.inner > kParallelWork)
  {
    std::vector<C> best(static_cast<size_t>(s.inner));
#pragma omp for schedule(static)
    for (int64_t o = 0; o < s.outer; ++o) {
      const T* block = in + o * s.n * s.inner;
      int64_t* idx = out + o * s.inner;
      if (s.inner == 1) {
        C b = Elem<T>::load(block[0]);
        int64_t bi = 0;
        for (int64_t j = 1; j < s.n; ++j) {
          C v = Elem<T>::load(block[j]);
          if (better(v, b)) {
            b = v;
            bi = j;
          }
        }
        idx[0] = bi;
        continue;
      }
      for (int64_t i = 0; i < s.inner; ++i) {
        best[size_t(i)] = Elem<T>::load(block[i]);
        idx[i] = 0;
      }
      for (int64_t j = 1; j < s.n; ++j) {
        const T* row = block + j * s.inner;
        for (int64_t i = 0; i < s.inner; ++i) {
          C v = Elem<T>::load(row[i]);
          if (better(v, best[size_t(i)])) {
            best[size_t(i)] = v;
            idx[i] = j;
          }
        }
      }
    }
  }
}

template <bool kMax>
void runArg(KernelContext& c) {
  const ir::Tensor& x = c.inputs[0];
  int64_t axis = 0;
  try {
    axis = normalizeAxis(c.attrs().getInt("axis", 0), int64_t(x.rank()), "axis");
  } catch (const Error& e) {
    c.fail(e.what());
  }
  AxisSplit s = splitAt(x.shape, axis);
  if (s.n == 0) {
    if (s.outer * s.inner != 0)
      c.fail("cannot take the arg" + std::string(kMax ? "max" : "min") + " of an empty axis");
    return;
  }
  bool last = c.attrs().getInt("select_last_index", 0) != 0;
  if (x.dtype == ir::DType::kBool) {
    argTyped<uint8_t, kMax>(x, c.outputs[0], s, last);
    return;
  }
  PARTITA_DISPATCH_NUMERIC(x.dtype, c.node.op_type, (argTyped<T, kMax>(x, c.outputs[0], s, last)));
}

// ---- MeanVarianceNormalization: (x - mean) / (sqrt(var) + 1e-9) over `axes` ----

void inferSame(InferContext& c) { sameAsInput(c); }

template <typename T>
void mvnTyped(const ir::Tensor& x, ir::Tensor& y, const ReducePlan& p) {
  using C = typename Elem<T>::Compute;
  const T* in = x.as<T>();
  T* out = y.as<T>();
  std::vector<C> sum(size_t(p.out_numel), C(0)), sq(size_t(p.out_numel), C(0));
  forEachElement(p, [&](int64_t i, int64_t o) { sum[size_t(o)] += Elem<T>::load(in[i]); });
  for (C& m : sum) m /= C(p.count);
  forEachElement(p, [&](int64_t i, int64_t o) {
    C d = Elem<T>::load(in[i]) - sum[size_t(o)];
    sq[size_t(o)] += d * d;
  });
  for (C& v : sq) v = C(1) / (std::sqrt(v / C(p.count)) + C(1e-9));
  forEachElement(p, [&](int64_t i, int64_t o) {
    out[i] = Elem<T>::store((Elem<T>::load(in[i]) - sum[size_t(o)]) * sq[size_t(o)]);
  });
}

void runMvn(KernelContext& c) {
  const ir::Tensor& x = c.inputs[0];
  std::vector<bool> mask;
  try {
    mask = reducedMask(c.attrs().getInts("axes", {0, 2, 3}), int64_t(x.rank()), "axes");
  } catch (const Error& e) {
    c.fail(e.what());
  }
  ReducePlan p = planReduce(x.shape, mask);
  if (x.numel() == 0) return;
  PARTITA_DISPATCH_FLOATS(x.dtype, c.node.op_type, mvnTyped<T>(x, c.outputs[0], p));
}

}  // namespace

void registerReductionOps(OpRegistry& r) {
  r.add("ReduceSum", {inferReduce<ReduceKind::kSum>, runReduce<ReduceKind::kSum>});  // last changed at 13
  r.add("ReduceMean", {inferReduce<ReduceKind::kMean>, runReduce<ReduceKind::kMean>, 18});
  r.add("ReduceMax", {inferReduce<ReduceKind::kMax>, runReduce<ReduceKind::kMax>, 20});
  r.add("ReduceMin", {inferReduce<ReduceKind::kMin>, runReduce<ReduceKind::kMin>, 20});
  r.add("ReduceProd", {inferReduce<ReduceKind::kProd>, runReduce<ReduceKind::kProd>, 18});
  r.add("ReduceL1", {inferReduce<ReduceKind::kL1>, runReduce<ReduceKind::kL1>, 18});
  r.add("ReduceL2", {inferReduce<ReduceKind::kL2>, runReduce<ReduceKind::kL2>, 18});
  r.add("ReduceLogSum", {inferReduce<ReduceKind::kLogSum>, runReduce<ReduceKind::kLogSum>, 18});
  r.add("ReduceLogSumExp", {inferReduce<ReduceKind::kLogSumExp>, runReduce<ReduceKind::kLogSumExp>, 18});
  r.add("ReduceSumSquare", {inferReduce<ReduceKind::kSumSquare>, runReduce<ReduceKind::kSumSquare>, 18});
  r.add("ArgMax", {inferArg, runArg<true>});
  r.add("ArgMin", {inferArg, runArg<false>});
  r.add("MeanVarianceNormalization", {inferSame, runMvn});
}

void registerReduceOps(OpRegistry& r) {
  registerReductionOps(r);
  registerSoftmaxOps(r);
  registerScanOps(r);
  registerMatrixOps(r);
  registerEinsumOp(r);
  registerDetOp(r);
}

}  // namespace partita::kernels
