// Host elementwise ops: binary and variadic ops with numpy broadcasting, PRelu, Where,
// Cast/CastLike, Identity and inference-mode Dropout; the unary ops live in
// elementwise_unary.cpp.
//
// Kernels are written once as small functors over C++ element types and instantiated
// per dtype; the loops live in elementwise_broadcast.h. float16/bfloat16 tensors run
// through the float32 kernels (elementwise_cast.h).
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>

#include "kernels/elementwise_broadcast.h"
#include "kernels/elementwise_cast.h"
#include "kernels/elementwise_dispatch.h"
#include "kernels/elementwise_functors.h"
#include "kernels/elementwise_unary.h"
#include "kernels/op_registry.h"
#include "kernels/op_util.h"
#include "partita/error.h"

namespace partita::kernels {

namespace {

using ir::DType;
using ir::Tensor;
using namespace elementwise;

struct ShiftLeftOp {
  template <class T>
  T operator()(T a, T b) const {
    using U = Wide<T>;
    return uint64_t(b) >= sizeof(T) * 8 ? T(0) : T(U(a) << U(b));
  }
};
struct ShiftRightOp {
  template <class T>
  T operator()(T a, T b) const {
    using U = Wide<T>;
    return uint64_t(b) >= sizeof(T) * 8 ? T(0) : T(U(a) >> U(b));
  }
};
struct EqualOp {
  template <class T>
  bool operator()(T a, T b) const {
    return a == b;
  }
};
struct LessOp {
  template <class T>
  bool operator()(T a, T b) const {
    return a < b;
  }
};
struct GreaterOp {
  template <class T>
  bool operator()(T a, T b) const {
    return a > b;
  }
};
struct LessOrEqualOp {
  template <class T>
  bool operator()(T a, T b) const {
    return a <= b;
  }
};
struct GreaterOrEqualOp {
  template <class T>
  bool operator()(T a, T b) const {
    return a >= b;
  }
};
// Boolean tensors are read as bytes so a stray non-0/1 byte is still well defined.
struct AndOp {
  bool operator()(uint8_t a, uint8_t b) const { return (a != 0) & (b != 0); }
};
struct OrOp {
  bool operator()(uint8_t a, uint8_t b) const { return (a != 0) | (b != 0); }
};
struct XorOp {
  bool operator()(uint8_t a, uint8_t b) const { return (a != 0) != (b != 0); }
};
// BitwiseAnd/Or/Xor (opset 18), on the integer types.
struct BitAndOp {
  template <class T>
  T operator()(T a, T b) const { return T(a & b); }
};
struct BitOrOp {
  template <class T>
  T operator()(T a, T b) const { return T(a | b); }
};
struct BitXorOp {
  template <class T>
  T operator()(T a, T b) const { return T(a ^ b); }
};

// Integer power by squaring; wraps on overflow like numpy. Negative exponents give
// 0 unless the base is +-1 (numpy raises).
template <class T, class E>
T intPow(T base, E exp) {
  if constexpr (std::is_signed_v<E>) {
    if (exp < 0) {
      if (base == T(1)) return T(1);
      if constexpr (std::is_signed_v<T>)
        if (base == T(-1)) return (exp % 2 == 0) ? T(1) : T(-1);
      return T(0);
    }
  }
  using U = Wide<T>;
  U result = 1, b = U(base);
  for (uint64_t e = uint64_t(exp); e != 0; e >>= 1) {
    if (e & 1) result = U(result * b);
    b = U(b * b);
  }
  return T(result);
}

struct PowOp {
  template <class T, class E>
  T operator()(T a, E b) const {
    if constexpr (std::is_integral_v<T> && std::is_integral_v<E>) {
      return intPow(a, b);
    } else if constexpr (std::is_same_v<T, float> && std::is_same_v<E, float>) {
      return std::pow(a, b);
    } else if constexpr (std::is_floating_point_v<T>) {
      return T(std::pow(double(a), double(b)));
    } else {
      // Integer base, float exponent: numpy computes in floating point, ONNX casts back.
      const double r = std::pow(double(a), double(b));
      if (!(r == r) || r >= 9.2233720368547758e18 || r < -9.2233720368547758e18) return T(0);
      return T(int64_t(r));
    }
  }
};

// ---------------------------------------------------------------------------------
// Inference

void inferBroadcastAs(InferContext& c, DType out_dtype, bool same_dtype) {
  ir::TensorType t = c.input(0);
  for (size_t i = 1; i < c.numInputs(); ++i) {
    if (!c.hasInput(i)) c.fail("input " + std::to_string(i) + " is missing");
    const ir::TensorType& next = c.input(i);
    if (same_dtype && t.dtype != next.dtype && t.dtype != DType::kUndefined)
      c.fail("inputs have different dtypes " + std::string(ir::dtypeName(t.dtype)) + " and " +
             std::string(ir::dtypeName(next.dtype)));
    ir::TensorType merged;
    if (!broadcastTypes(t, next, merged))
      c.fail("shapes " + t.str() + " and " + next.str() + " do not broadcast");
    t = merged;
  }
  t.dtype = out_dtype == DType::kUndefined ? c.input(0).dtype : out_dtype;
  c.outputs[0] = t;
}

constexpr size_t kManyInputs = size_t(1) << 30;

void inferSameDTypeBinary(InferContext& c) {
  checkArity(c, 2, 2);
  inferBroadcastAs(c, DType::kUndefined, true);
}
void inferVariadic(InferContext& c) {
  checkArity(c, 1, kManyInputs);
  inferBroadcastAs(c, DType::kUndefined, true);
}
void inferPow(InferContext& c) {
  checkArity(c, 2, 2);
  inferBroadcastAs(c, DType::kUndefined, false);
}
void inferPredicateBinary(InferContext& c) {
  checkArity(c, 2, 2);
  inferBroadcastAs(c, DType::kBool, true);
}

// PRelu broadcasts slope to X (numpy rules). A 1-D slope of X's channel count is
// accepted as per-channel even when numpy rules would not align it (older models).
bool perChannelSlope(const std::vector<ir::Dim>& x, const std::vector<ir::Dim>& slope) {
  return x.size() >= 2 && slope.size() == 1 && x[1].isKnown() && slope[0] == x[1];
}

void inferPRelu(InferContext& c) {
  checkArity(c, 2, 2);
  const ir::TensorType& x = c.input(0);
  const ir::TensorType& slope = c.input(1);
  ir::TensorType merged;
  const bool fits = broadcastTypes(x, slope, merged) && (!x.has_rank || merged.rank() == x.rank());
  if (!fits && !(x.has_rank && slope.has_rank && perChannelSlope(x.dims, slope.dims)))
    c.fail("slope " + slope.str() + " does not broadcast to X " + x.str());
  c.outputs[0] = x;
}

void inferWhere(InferContext& c) {
  checkArity(c, 3, 3);
  if (c.input(0).dtype != DType::kBool && c.input(0).dtype != DType::kUndefined)
    c.fail("condition must be bool, got " + std::string(ir::dtypeName(c.input(0).dtype)));
  if (c.input(1).dtype != c.input(2).dtype)
    c.fail("X and Y have different dtypes " + std::string(ir::dtypeName(c.input(1).dtype)) + " and " +
           std::string(ir::dtypeName(c.input(2).dtype)));
  inferBroadcastAs(c, c.input(1).dtype, false);
}

DType castTarget(const InferContext& c) {
  const ir::Attribute* to = c.attrs().find("to");
  if (!to) c.fail("missing attribute 'to'");
  DType t = ir::dtypeFromOnnx(to->i);
  if (t == DType::kUndefined) {
    if (to->i == kOnnxString)
      throw Error(ErrorCode::kUnsupported,
                  "Cast node '" + c.node.name + "': casting to string is not supported");
    c.fail("unsupported target type " + std::to_string(to->i));
  }
  return t;
}

void inferCast(InferContext& c) {
  checkArity(c, 1, 1);
  c.outputs[0] = c.input(0);
  c.outputs[0].dtype = castTarget(c);
}

void inferCastLike(InferContext& c) {
  checkArity(c, 2, 2);
  c.outputs[0] = c.input(0);
  c.outputs[0].dtype = c.input(1).dtype;
}

void inferIdentity(InferContext& c) {
  checkArity(c, 1, 1);
  sameAsInput(c);
}

void inferDropout(InferContext& c) {
  checkArity(c, 1, 3);
  c.outputs[0] = c.input(0);
  if (c.outputs.size() > 1) {
    c.outputs[1] = c.input(0);
    // The mask is bool from opset 10; before, it had the input's type.
    if (c.opset() >= 10) c.outputs[1].dtype = DType::kBool;
  }
}

// ---------------------------------------------------------------------------------
// Kernels

// Binary ops whose inputs share a dtype from `Set`; the output is T, or bool for
// predicates.
template <class Op, unsigned Set, bool kPredicate = false>
void runBinary(KernelContext& c) {
  if (isHalfLike(c.inputs[0].dtype)) return runThroughFloat(c, runBinary<Op, Set, kPredicate>);
  const Tensor& a = c.inputs[0];
  const Tensor& b = c.inputs[1];
  requireSameDType(c, a, b);
  visit<Set>(c, a.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using O = std::conditional_t<kPredicate, bool, T>;
    const int64_t cost = std::is_same_v<Op, DivOp> || std::is_same_v<Op, FmodOp> ? kMedium : kCheap;
    broadcastMap<O, T, T>(c, c.outputs[0], {&a, &b}, cost, Op{});
  });
}

template <class Op>
void runLogical(KernelContext& c) {
  const Tensor& a = c.inputs[0];
  const Tensor& b = c.inputs[1];
  if (a.dtype != DType::kBool || b.dtype != DType::kBool)
    unsupportedDType(c, a.dtype == DType::kBool ? b.dtype : a.dtype);
  broadcastMap<bool, uint8_t, uint8_t>(c, c.outputs[0], {&a, &b}, kCheap, Op{});
}

void runMod(KernelContext& c) {
  // fmod=0 on floats is invalid per ONNX; numpy's floor-mod is the natural reading.
  if (c.attrs().getInt("fmod", 0) != 0) return runBinary<FmodOp, kNumeric>(c);
  runBinary<FloorModOp, kNumeric>(c);
}

void runBitShift(KernelContext& c) {
  const std::string direction = c.attrs().getString("direction", "");
  if (direction == "LEFT") return runBinary<ShiftLeftOp, kIntegers>(c);
  if (direction == "RIGHT") return runBinary<ShiftRightOp, kIntegers>(c);
  c.fail("direction must be LEFT or RIGHT, got '" + direction + "'");
}

void runPow(KernelContext& c) {
  if (isHalfLike(c.inputs[0].dtype) || isHalfLike(c.inputs[1].dtype)) return runThroughFloat(c, runPow);
  const Tensor& a = c.inputs[0];
  Tensor b = c.inputs[1];
  // An exponent of another type than the base is widened to int64 or double: the same
  // values with far fewer kernel instantiations.
  ir::OwnedTensor widened;
  if (b.dtype != a.dtype) {
    const bool integral = ir::isInteger(b.dtype) || b.dtype == DType::kBool;
    widened = ir::OwnedTensor(integral ? DType::kInt64 : DType::kFloat64, b.shape);
    castElements(b, widened.view());
    b = widened.view();
  }
  visit<kNumeric>(c, a.dtype, [&](auto base) {
    using T = typename decltype(base)::type;
    if (b.dtype == a.dtype)
      broadcastMap<T, T, T>(c, c.outputs[0], {&a, &b}, kExpensive, PowOp{});
    else if (b.dtype == DType::kInt64)
      broadcastMap<T, T, int64_t>(c, c.outputs[0], {&a, &b}, kExpensive, PowOp{});
    else
      broadcastMap<T, T, double>(c, c.outputs[0], {&a, &b}, kExpensive, PowOp{});
  });
}

// Max, Min, Sum, Mean: fold the inputs pairwise into the output.
template <class Op, unsigned Set>
void runVariadic(KernelContext& c) {
  if (isHalfLike(c.outputs[0].dtype)) return runThroughFloat(c, runVariadic<Op, Set>);
  const Tensor& out = c.outputs[0];
  if (c.inputs.empty()) c.fail("expects at least one input");
  visit<Set>(c, out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    for (const Tensor& in : c.inputs) requireSameDType(c, in, out);
    if (c.inputs.size() == 1) {
      broadcastMap<T, T>(c, out, {&c.inputs[0]}, kCheap, [](T x) { return x; });
      return;
    }
    broadcastMap<T, T, T>(c, out, {&c.inputs[0], &c.inputs[1]}, kCheap, Op{});
    for (size_t i = 2; i < c.inputs.size(); ++i)
      broadcastMap<T, T, T>(c, out, {&out, &c.inputs[i]}, kCheap, Op{});
  });
}

void runMean(KernelContext& c) {
  if (isHalfLike(c.outputs[0].dtype)) return runThroughFloat(c, runMean);
  runVariadic<AddOp, kFloats>(c);
  const Tensor& out = c.outputs[0];
  visit<kFloats>(c, out.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T count = T(c.inputs.size());
    unaryMap<T, T>(out, out, kMedium, [count](T x) { return x / count; });
  });
}

void runPRelu(KernelContext& c) {
  if (isHalfLike(c.inputs[0].dtype)) return runThroughFloat(c, runPRelu);
  const Tensor& x = c.inputs[0];
  Tensor slope = c.inputs[1];
  requireSameDType(c, x, slope);
  std::optional<BroadcastPlan<1>> fits = planBroadcast<1>(x.shape, {&slope.shape});
  if (!fits && x.rank() >= 2 && slope.rank() == 1 && slope.shape[0] == x.shape[1]) {
    slope.shape.assign(x.rank() - 1, 1);  // per-channel: [C] -> [C, 1, ..., 1]
    slope.shape[0] = x.shape[1];
  }
  visit<kFloats | kSigned | kUnsigned>(c, x.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    broadcastMap<T, T, T>(c, c.outputs[0], {&x, &slope}, kCheap,
                          [](T v, T s) { return v < T(0) ? s * v : v; });
  });
}

void runWhere(KernelContext& c) {
  const Tensor& cond = c.inputs[0];
  const Tensor& x = c.inputs[1];
  const Tensor& y = c.inputs[2];
  if (cond.dtype != DType::kBool) c.fail("condition must be bool");
  requireSameDType(c, x, y);
  // Where only moves elements: dispatch on the element size, not the type.
  auto select = [&](auto tag) {
    using U = typename decltype(tag)::type;
    broadcastMap<U, uint8_t, U, U>(c, c.outputs[0], {&cond, &x, &y}, kCheap,
                                   [](uint8_t k, U a, U b) { return k ? a : b; });
  };
  switch (ir::dtypeSize(x.dtype)) {
    case 1:
      return select(Tag<uint8_t>{});
    case 2:
      return select(Tag<uint16_t>{});
    case 4:
      return select(Tag<uint32_t>{});
    case 8:
      return select(Tag<uint64_t>{});
    default:
      unsupportedDType(c, x.dtype);
  }
}

void copyInto(const Tensor& src, const Tensor& dst) {
  if (src.data != dst.data && src.nbytes()) std::memcpy(dst.data, src.data, src.nbytes());
}

void runCast(KernelContext& c) { castElements(c.inputs[0], c.outputs[0]); }
void runIdentity(KernelContext& c) { copyInto(c.inputs[0], c.outputs[0]); }

void runDropout(KernelContext& c) {
  bool training = false;
  double ratio = 0.5;
  if (c.opset() >= 12) {
    if (c.hasInput(2)) training = readScalar(c.inputs[2]) != 0;
    if (c.hasInput(1)) ratio = readScalar(c.inputs[1]);
  } else {
    ratio = c.attrs().getFloat("ratio", 0.5f);
  }
  // Training mode draws a random mask; only the degenerate ratio 0 is deterministic.
  if (training && ratio != 0)
    throw Error(ErrorCode::kUnsupported,
                "Dropout node '" + c.node.name + "': training mode with a nonzero ratio is not supported");
  copyInto(c.inputs[0], c.outputs[0]);
  if (c.outputs.size() > 1 && c.outputs[1].defined()) {
    const Tensor& mask = c.outputs[1];
    bool one = true;
    castElements(Tensor{DType::kBool, {}, &one}, Tensor{mask.dtype, {}, mask.data});  // the first element
    const size_t elem = ir::dtypeSize(mask.dtype);
    auto* bytes = static_cast<std::byte*>(mask.data);
    for (int64_t i = 1; i < mask.numel(); ++i) std::memcpy(bytes + size_t(i) * elem, bytes, elem);
  }
}

}  // namespace

void registerElementwiseOps(OpRegistry& r) {
  registerUnaryOps(r);
  r.add("Add", {inferSameDTypeBinary, runBinary<AddOp, kNumeric>});
  r.add("Sub", {inferSameDTypeBinary, runBinary<SubOp, kNumeric>});
  r.add("Mul", {inferSameDTypeBinary, runBinary<MulOp, kNumeric>});
  r.add("Div", {inferSameDTypeBinary, runBinary<DivOp, kNumeric>});
  r.add("Mod", {inferSameDTypeBinary, runMod});
  r.add("Pow", {inferPow, runPow});
  r.add("BitShift", {inferSameDTypeBinary, runBitShift});
  r.add("And", {inferPredicateBinary, runLogical<AndOp>});
  r.add("Or", {inferPredicateBinary, runLogical<OrOp>});
  r.add("Xor", {inferPredicateBinary, runLogical<XorOp>});
  r.add("BitwiseAnd", {inferSameDTypeBinary, runBinary<BitAndOp, kIntegers>, 18});
  r.add("BitwiseOr", {inferSameDTypeBinary, runBinary<BitOrOp, kIntegers>, 18});
  r.add("BitwiseXor", {inferSameDTypeBinary, runBinary<BitXorOp, kIntegers>, 18});
  r.add("Equal", {inferPredicateBinary, runBinary<EqualOp, kAll, true>, 19});
  r.add("Less", {inferPredicateBinary, runBinary<LessOp, kNumeric, true>});
  r.add("Greater", {inferPredicateBinary, runBinary<GreaterOp, kNumeric, true>});
  r.add("LessOrEqual", {inferPredicateBinary, runBinary<LessOrEqualOp, kNumeric, true>});
  r.add("GreaterOrEqual", {inferPredicateBinary, runBinary<GreaterOrEqualOp, kNumeric, true>});

  r.add("Max", {inferVariadic, runVariadic<MaxOp, kNumeric>});
  r.add("Min", {inferVariadic, runVariadic<MinOp, kNumeric>});
  r.add("Sum", {inferVariadic, runVariadic<AddOp, kNumeric>});
  r.add("Mean", {inferVariadic, runMean});

  r.add("PRelu", {inferPRelu, runPRelu});

  r.add("Where", {inferWhere, runWhere});
  r.add("Cast", {inferCast, runCast, 21});
  r.add("CastLike", {inferCastLike, runCast, 21});
  OpDef identity{inferIdentity, runIdentity, 21};
  identity.run_values = runIdentityValue;  // a sequence or optional (opsets 14 and 16)
  r.add("Identity", identity);
  r.add("Dropout", {inferDropout, runDropout});
}

}  // namespace partita::kernels
