// Unary elementwise ops: math functions, activations, predicates and Clip. Each op is
// a functor over one element, instantiated for the dtypes it accepts.
#include "kernels/elementwise_unary.h"

#include <cmath>
#include <limits>
#include <type_traits>

#include "kernels/elementwise_broadcast.h"
#include "kernels/elementwise_cast.h"
#include "kernels/elementwise_dispatch.h"
#include "kernels/elementwise_functors.h"
#include "kernels/elementwise_math.h"
#include "kernels/op_util.h"

namespace partita::kernels::elementwise {

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
void inferGelu(InferContext& c) {
  checkArity(c, 1, 1);
  std::string m = c.attrs().getString("approximate", "none");
  if (m != "none" && m != "tanh") c.fail("unknown approximate '" + m + "' (none or tanh)");
  sameAsInput(c);
}
void inferPredicate(InferContext& c) {
  checkArity(c, 1, 1);
  sameAsInput(c);
  c.outputs[0].dtype = DType::kBool;
}

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
    unaryMap<T, T>(x, c.outputs[0], kCheap, ClipOp<T>{lo, hi});
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
  r.add("Mish", {inferUnary, runUnary<MishOp>, 18});
  r.add("Gelu", {inferGelu, runUnary<GeluOp>, 20});
  r.add("BitwiseNot", {inferUnary, runUnary<BitNotOp>, 18});
  r.add("LeakyRelu", {inferUnary, runUnary<LeakyReluOp>});
  r.add("ThresholdedRelu", {inferUnary, runUnary<ThresholdedReluOp>});
  r.add("Elu", {inferUnary, runUnary<EluOp>});
  r.add("Selu", {inferUnary, runUnary<SeluOp>});
  r.add("Celu", {inferUnary, runUnary<CeluOp>});
  r.add("HardSigmoid", {inferUnary, runUnary<HardSigmoidOp>});
  r.add("HardSwish", {inferUnary, runUnary<HardSwishOp>});
  r.add("Shrink", {inferUnary, runUnary<ShrinkOp>});
  r.add("IsNaN", {inferPredicate, runIsNaN, 20});
  r.add("IsInf", {inferPredicate, runIsInf, 20});
  r.add("Not", {inferPredicate, runNot});
  r.add("Clip", {inferClip, runClip});
  // ONNX Runtime's contrib Gelu (0.5 x (1 + erf(x / sqrt 2)), found in models its
  // optimizer saved) is infer-only: the dnnl backend runs it as one gelu_erf; the host
  // runs PyTorch's five-node export of the same function instead.
  r.add("Gelu", {inferUnary, nullptr}, "com.microsoft");
}

}  // namespace partita::kernels::elementwise
