// Unary elementwise ops: math functions, activations, predicates and Clip. Each op is
// a functor over one element, instantiated for the dtypes it accepts.
#include "backend/host/elementwise_unary.h"

#include <cmath>
#include <limits>
#include <type_traits>

#include "backend/host/elementwise_broadcast.h"
#include "backend/host/elementwise_cast.h"
#include "backend/host/elementwise_dispatch.h"
#include "backend/host/elementwise_math.h"
#include "backend/host/op_util.h"

namespace partita::host::elementwise {

namespace {

using ir::DType;
using ir::Tensor;

void inferUnary(InferContext& c) {
  checkArity(c, 1, 1);
  sameAsInput(c);
}
void inferClip(InferContext& c) {
  checkArity(c, 1, 3);
  sameAsInput(c);
}
void inferPredicate(InferContext& c) {
  checkArity(c, 1, 1);
  sameAsInput(c);
  c.outputs[0].dtype = DType::kBool;
}

// Unary functors. Each has `Set` (the dtypes it takes), `kCost`, and may read its
// attributes in a constructor from the node's AttributeMap.

template <class T>
T wrapNeg(T x) {
  if constexpr (std::is_integral_v<T>)
    return T(Wide<T>(0) - Wide<T>(x));
  else
    return -x;
}

struct AbsOp {
  static constexpr unsigned Set = kNumeric;
  static constexpr int64_t kCost = kCheap;
  template <class T>
  T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>)
      return std::fabs(x);
    else if constexpr (std::is_signed_v<T>)
      return x < 0 ? wrapNeg(x) : x;
    else
      return x;
  }
};
struct NegOp {
  static constexpr unsigned Set = kFloats | kSigned;
  static constexpr int64_t kCost = kCheap;
  template <class T>
  T operator()(T x) const {
    return wrapNeg(x);
  }
};
struct SignOp {
  static constexpr unsigned Set = kNumeric;
  static constexpr int64_t kCost = kCheap;
  template <class T>
  T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>)
      return x > 0 ? T(1) : (x < 0 ? T(-1) : x);  // keeps NaN and 0
    else
      return x > 0 ? T(1) : (x < 0 ? T(-1) : T(0));
  }
};
struct ReluOp {
  static constexpr unsigned Set = kFloats | kSigned;
  static constexpr int64_t kCost = kCheap;
  template <class T>
  T operator()(T x) const {
    return x < T(0) ? T(0) : x;
  }
};
struct ReciprocalOp {
  static constexpr unsigned Set = kFloats;
  static constexpr int64_t kCost = kMedium;
  template <class T>
  T operator()(T x) const {
    return T(1) / x;
  }
};
// Floor and Ceil through round-to-nearest, which vectorises (std::floor does not
// without -fno-trapping-math).
struct FloorOp {
  static constexpr unsigned Set = kFloats;
  static constexpr int64_t kCost = kCheap;
  template <class T>
  T operator()(T x) const {
    T r = std::nearbyint(x);
    return r > x ? r - T(1) : r;
  }
};
struct CeilOp {
  static constexpr unsigned Set = kFloats;
  static constexpr int64_t kCost = kCheap;
  template <class T>
  T operator()(T x) const {
    T r = std::nearbyint(x);
    return r < x ? r + T(1) : r;
  }
};
// Round half to even: the default rounding mode.
struct RoundOp {
  static constexpr unsigned Set = kFloats;
  static constexpr int64_t kCost = kCheap;
  template <class T>
  T operator()(T x) const {
    return std::nearbyint(x);
  }
};

#define PARTITA_FLOAT_UNARY(NAME, COST, EXPR) \
  struct NAME {                               \
    static constexpr unsigned Set = kFloats;  \
    static constexpr int64_t kCost = COST;    \
    template <class T>                        \
    T operator()(T x) const {                 \
      return EXPR;                            \
    }                                         \
  };
PARTITA_FLOAT_UNARY(ExpOp, kMedium, expOf(x))
PARTITA_FLOAT_UNARY(LogOp, kExpensive, std::log(x))
PARTITA_FLOAT_UNARY(SqrtOp, kMedium, std::sqrt(x))
PARTITA_FLOAT_UNARY(SinOp, kExpensive, std::sin(x))
PARTITA_FLOAT_UNARY(CosOp, kExpensive, std::cos(x))
PARTITA_FLOAT_UNARY(TanOp, kExpensive, std::tan(x))
PARTITA_FLOAT_UNARY(AsinOp, kExpensive, std::asin(x))
PARTITA_FLOAT_UNARY(AcosOp, kExpensive, std::acos(x))
PARTITA_FLOAT_UNARY(AtanOp, kExpensive, std::atan(x))
PARTITA_FLOAT_UNARY(SinhOp, kExpensive, std::sinh(x))
PARTITA_FLOAT_UNARY(CoshOp, kExpensive, std::cosh(x))
PARTITA_FLOAT_UNARY(AsinhOp, kExpensive, std::asinh(x))
PARTITA_FLOAT_UNARY(AcoshOp, kExpensive, std::acosh(x))
PARTITA_FLOAT_UNARY(AtanhOp, kExpensive, std::atanh(x))
PARTITA_FLOAT_UNARY(ErfOp, kMedium, erfOf(x))
PARTITA_FLOAT_UNARY(TanhOp, kMedium, tanhOf(x))
PARTITA_FLOAT_UNARY(SigmoidOp, kMedium, T(1) / (T(1) + expOf(-x)))
PARTITA_FLOAT_UNARY(SoftsignOp, kMedium, x / (T(1) + std::fabs(x)))
// log(1 + e^x) without overflow for large x.
PARTITA_FLOAT_UNARY(SoftplusOp, kExpensive, x > T(0) ? x + std::log1p(expOf(-x)) : std::log1p(expOf(x)))
#undef PARTITA_FLOAT_UNARY

struct LeakyReluOp {
  static constexpr unsigned Set = kFloats;
  static constexpr int64_t kCost = kCheap;
  float alpha;
  explicit LeakyReluOp(const ir::AttributeMap& a) : alpha(a.getFloat("alpha", 0.01f)) {}
  template <class T>
  T operator()(T x) const {
    return x < T(0) ? T(alpha) * x : x;
  }
};
struct ThresholdedReluOp {
  static constexpr unsigned Set = kFloats;
  static constexpr int64_t kCost = kCheap;
  float alpha;
  explicit ThresholdedReluOp(const ir::AttributeMap& a) : alpha(a.getFloat("alpha", 1.0f)) {}
  template <class T>
  T operator()(T x) const {
    return x > T(alpha) ? x : T(0);
  }
};
struct EluOp {
  static constexpr unsigned Set = kFloats;
  static constexpr int64_t kCost = kMedium;
  float alpha;
  explicit EluOp(const ir::AttributeMap& a) : alpha(a.getFloat("alpha", 1.0f)) {}
  template <class T>
  T operator()(T x) const {
    return x < T(0) ? T(alpha) * expm1Of(x) : x;
  }
};
struct SeluOp {
  static constexpr unsigned Set = kFloats;
  static constexpr int64_t kCost = kMedium;
  float alpha, gamma;
  explicit SeluOp(const ir::AttributeMap& a)
      : alpha(a.getFloat("alpha", 1.67326319217681884765625f)),
        gamma(a.getFloat("gamma", 1.05070102214813232421875f)) {}
  template <class T>
  T operator()(T x) const {
    return x > T(0) ? T(gamma) * x : T(gamma) * T(alpha) * expm1Of(x);
  }
};
struct CeluOp {
  static constexpr unsigned Set = kFloats;
  static constexpr int64_t kCost = kMedium;
  float alpha;
  explicit CeluOp(const ir::AttributeMap& a) : alpha(a.getFloat("alpha", 1.0f)) {}
  template <class T>
  T operator()(T x) const {
    return x > T(0) ? x : T(alpha) * expm1Of(x / T(alpha));
  }
};
struct HardSigmoidOp {
  static constexpr unsigned Set = kFloats;
  static constexpr int64_t kCost = kCheap;
  float alpha, beta;
  explicit HardSigmoidOp(const ir::AttributeMap& a)
      : alpha(a.getFloat("alpha", 0.2f)), beta(a.getFloat("beta", 0.5f)) {}
  template <class T>
  T operator()(T x) const {
    T y = T(alpha) * x + T(beta);
    y = y < T(0) ? T(0) : y;
    return y > T(1) ? T(1) : y;
  }
};
struct HardSwishOp {
  static constexpr unsigned Set = kFloats;
  static constexpr int64_t kCost = kCheap;
  template <class T>
  T operator()(T x) const {
    T y = x * T(1.0 / 6) + T(0.5);
    y = y < T(0) ? T(0) : y;
    return x * (y > T(1) ? T(1) : y);
  }
};
struct ShrinkOp {
  static constexpr unsigned Set = kNumeric;
  static constexpr int64_t kCost = kCheap;
  float lambd, bias;
  explicit ShrinkOp(const ir::AttributeMap& a)
      : lambd(a.getFloat("lambd", 0.5f)), bias(a.getFloat("bias", 0.0f)) {}
  template <class T>
  T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>) {
      if (x < T(-lambd)) return x + T(bias);
      if (x > T(lambd)) return x - T(bias);
      return T(0);
    } else {
      const double v = double(x);
      if (v < -double(lambd)) return T(v + double(bias));
      if (v > double(lambd)) return T(v - double(bias));
      return T(0);
    }
  }
};

template <class Op>
Op makeOp(const ir::AttributeMap& attrs) {
  if constexpr (std::is_constructible_v<Op, const ir::AttributeMap&>)
    return Op(attrs);
  else
    return Op{};
}

template <class Op>
void runUnary(KernelContext& c) {
  if (isHalfLike(c.inputs[0].dtype)) return runThroughFloat(c, runUnary<Op>);
  const Op op = makeOp<Op>(c.attrs());
  const Tensor& x = c.inputs[0];
  const Tensor& y = c.outputs[0];
  visit<Op::Set>(c, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    unaryMap<T, T>(x, y, Op::kCost, [&op](T v) { return op(v); });
  });
}

void runIsNaN(KernelContext& c) {
  if (isHalfLike(c.inputs[0].dtype)) return runThroughFloat(c, runIsNaN);
  visit<kFloats>(c, c.inputs[0].dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    unaryMap<bool, T>(c.inputs[0], c.outputs[0], kCheap, [](T v) { return v != v; });
  });
}

void runIsInf(KernelContext& c) {
  if (isHalfLike(c.inputs[0].dtype)) return runThroughFloat(c, runIsInf);
  const bool positive = c.attrs().getInt("detect_positive", 1) != 0;
  const bool negative = c.attrs().getInt("detect_negative", 1) != 0;
  visit<kFloats>(c, c.inputs[0].dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    constexpr T kInf = std::numeric_limits<T>::infinity();
    unaryMap<bool, T>(c.inputs[0], c.outputs[0], kCheap,
                      [=](T v) { return (positive && v == kInf) || (negative && v == -kInf); });
  });
}

void runNot(KernelContext& c) {
  if (c.inputs[0].dtype != DType::kBool) unsupportedDType(c, c.inputs[0].dtype);
  unaryMap<bool, uint8_t>(c.inputs[0], c.outputs[0], kCheap, [](uint8_t v) { return v == 0; });
}

// Reads element 0 of a one-element bound tensor (Clip's min/max) as T.
template <class T>
T readBound(const KernelContext& c, size_t input) {
  const Tensor& t = c.inputs[input];
  if (t.numel() != 1) c.fail("min/max must hold one element, got shape " + ir::shapeStr(t.shape));
  if (t.dtype != c.inputs[0].dtype)
    c.fail("min/max dtype " + std::string(ir::dtypeName(t.dtype)) + " differs from the input's");
  return t.as<const T>()[0];
}

void runClip(KernelContext& c) {
  if (isHalfLike(c.inputs[0].dtype)) return runThroughFloat(c, runClip);
  const Tensor& x = c.inputs[0];
  visit<kNumeric>(c, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
    if (c.opset() < 11) {
      if (c.attrs().has("min")) lo = T(c.attrs().getFloat("min", 0));
      if (c.attrs().has("max")) hi = T(c.attrs().getFloat("max", 0));
    } else {
      if (c.hasInput(1)) lo = readBound<T>(c, 1);
      if (c.hasInput(2)) hi = readBound<T>(c, 2);
    }
    // min > max clips everything to max, as ONNX specifies.
    unaryMap<T, T>(x, c.outputs[0], kCheap, [lo, hi](T v) {
      T r = v < lo ? lo : v;
      return r > hi ? hi : r;
    });
  });
}

}  // namespace

void registerUnaryOps(OpRegistry& r) {
  r.add("Abs", {inferUnary, runUnary<AbsOp>});
  r.add("Neg", {inferUnary, runUnary<NegOp>});
  r.add("Sign", {inferUnary, runUnary<SignOp>});
  r.add("Relu", {inferUnary, runUnary<ReluOp>});
  r.add("Reciprocal", {inferUnary, runUnary<ReciprocalOp>});
  r.add("Floor", {inferUnary, runUnary<FloorOp>});
  r.add("Ceil", {inferUnary, runUnary<CeilOp>});
  r.add("Round", {inferUnary, runUnary<RoundOp>});
  r.add("Exp", {inferUnary, runUnary<ExpOp>});
  r.add("Log", {inferUnary, runUnary<LogOp>});
  r.add("Sqrt", {inferUnary, runUnary<SqrtOp>});
  r.add("Sin", {inferUnary, runUnary<SinOp>});
  r.add("Cos", {inferUnary, runUnary<CosOp>});
  r.add("Tan", {inferUnary, runUnary<TanOp>});
  r.add("Asin", {inferUnary, runUnary<AsinOp>});
  r.add("Acos", {inferUnary, runUnary<AcosOp>});
  r.add("Atan", {inferUnary, runUnary<AtanOp>});
  r.add("Sinh", {inferUnary, runUnary<SinhOp>});
  r.add("Cosh", {inferUnary, runUnary<CoshOp>});
  r.add("Asinh", {inferUnary, runUnary<AsinhOp>});
  r.add("Acosh", {inferUnary, runUnary<AcoshOp>});
  r.add("Atanh", {inferUnary, runUnary<AtanhOp>});
  r.add("Erf", {inferUnary, runUnary<ErfOp>});
  r.add("Tanh", {inferUnary, runUnary<TanhOp>});
  r.add("Sigmoid", {inferUnary, runUnary<SigmoidOp>});
  r.add("Softsign", {inferUnary, runUnary<SoftsignOp>});
  r.add("Softplus", {inferUnary, runUnary<SoftplusOp>});
  r.add("LeakyRelu", {inferUnary, runUnary<LeakyReluOp>});
  r.add("ThresholdedRelu", {inferUnary, runUnary<ThresholdedReluOp>});
  r.add("Elu", {inferUnary, runUnary<EluOp>});
  r.add("Selu", {inferUnary, runUnary<SeluOp>});
  r.add("Celu", {inferUnary, runUnary<CeluOp>});
  r.add("HardSigmoid", {inferUnary, runUnary<HardSigmoidOp>});
  r.add("HardSwish", {inferUnary, runUnary<HardSwishOp>});
  r.add("Shrink", {inferUnary, runUnary<ShrinkOp>});
  r.add("IsNaN", {inferPredicate, runIsNaN});
  r.add("IsInf", {inferPredicate, runIsInf});
  r.add("Not", {inferPredicate, runNot});
  r.add("Clip", {inferClip, runClip});
}

}  // namespace partita::host::elementwise
