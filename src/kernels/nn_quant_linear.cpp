// QuantizeLinear, DequantizeLinear (opsets 10-21: per tensor, per axis, blocked) and
// DynamicQuantizeLinear.
//
//   QuantizeLinear     y = saturate(round_half_even(x / scale) + zero_point)
//   DequantizeLinear   y = (x - zero_point) * scale
//   DynamicQuantizeLinear  scale = (max(0, max x) - min(0, min x)) / 255 (1 when the
//                      range is empty; held within [FLT_MIN, FLT_MAX], as the dnnl
//                      module's kernel holds it, where a range of subnormals would
//                      round it to 0 or one past FLT_MAX to infinity), zero_point =
//                      saturate(round(-min / scale)), y = QuantizeLinear(x, scale,
//                      zero_point) into uint8
//
// The scale decides the granularity: one value (a scalar or a 1-element tensor) is per
// tensor; a 1-D tensor of x.shape[axis] values is per axis; with `block_size` (opset
// 21) a tensor of x's rank whose `axis` dimension is ceil(x.shape[axis] / block_size)
// and whose other dimensions are x's gives one scale per block along `axis`. The zero
// point, when given, has the scale's shape and the quantized type. Quantized types:
// int8, uint8, int16, uint16 (and int32 as DequantizeLinear's input, zero point 0).
// Floats: float32, float16, bfloat16 (x, scale and DequantizeLinear's output), computed
// in float32 as ONNX Runtime does.
//
// A scale of zero, NaN or infinity is an error naming the node and the index (at
// compile time when the scale is a constant), as are scale / zero point shapes that do
// not fit x and a zero point of another type than the quantized one.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/nn_ops.h"
#include "kernels/op_util.h"

namespace partita::kernels {

namespace {

bool isQuantized(ir::DType t) {
  return t == ir::DType::kInt8 || t == ir::DType::kUInt8 || t == ir::DType::kInt16 || t == ir::DType::kUInt16;
}
bool isFloatLike(ir::DType t) {
  return t == ir::DType::kFloat32 || t == ir::DType::kFloat16 || t == ir::DType::kBFloat16;
}
std::string name(ir::DType t) { return std::string(ir::dtypeName(t)); }

// ONNX's TensorProto numbers of the types output_dtype may name.
ir::DType quantTypeFromOnnx(int64_t onnx) {
  ir::DType t = ir::dtypeFromOnnx(onnx);
  return isQuantized(t) ? t : ir::DType::kUndefined;
}

// How scale and zero point map onto x: per tensor, per axis or per block along axis.
struct Granularity {
  enum Kind { kTensor, kAxis, kBlock } kind = kTensor;
  int64_t axis = 0, block = 0;
};

// Checks a scale (or zero point) type against x's and returns the granularity.
template <class Ctx>
Granularity granularity(const Ctx& c, const std::vector<int64_t>* x_shape, size_t x_rank, bool x_ranked,
                        const ir::TensorType& s, const char* what) {
  Granularity g;
  const int64_t block = c.opset() >= 21 ? c.attrs().getInt("block_size", 0) : 0;
  if (block < 0) c.fail("block_size must not be negative, got " + std::to_string(block));
  if (!s.has_rank) return g;
  const bool one = s.isStatic() && s.numel() == 1 && s.rank() <= 1;
  if (block == 0 && (s.rank() == 0 || one)) return g;
  if (c.opset() < 13) c.fail(std::string(what) + " must be a scalar before opset 13, got " + s.str());
  if (!x_ranked) {
    g.kind = block ? Granularity::kBlock : Granularity::kAxis;
    return g;
  }
  g.axis = normalizeAxis(c.attrs().getInt("axis", 1), int64_t(x_rank), "axis");
  if (block == 0) {
    g.kind = Granularity::kAxis;
    if (s.rank() != 1) c.fail(std::string(what) + " must be a scalar or 1-D (one value per axis), got " + s.str());
    if (x_shape && s.dims[0].isKnown() && s.dims[0].value != (*x_shape)[size_t(g.axis)])
      c.fail(std::string(what) + " has " + std::to_string(s.dims[0].value) + " values but x has " +
             std::to_string((*x_shape)[size_t(g.axis)]) + " along axis " + std::to_string(g.axis));
    return g;
  }
  g.kind = Granularity::kBlock;
  g.block = block;
  if (s.rank() != x_rank)
    c.fail(std::string(what) + " must have x's rank " + std::to_string(x_rank) + " for block_size " +
           std::to_string(block) + ", got " + s.str());
  if (x_shape)
    for (size_t d = 0; d < x_rank; ++d) {
      const int64_t xd = (*x_shape)[d];
      const int64_t want = int64_t(d) == g.axis ? (xd + block - 1) / block : xd;
      if (s.dims[d].isKnown() && s.dims[d].value != want)
        c.fail(std::string(what) + " " + s.str() + " does not fit x " + ir::shapeStr(*x_shape) + " with block_size " +
               std::to_string(block) + " along axis " + std::to_string(g.axis) + " (dimension " +
               std::to_string(d) + " should be " + std::to_string(want) + ")");
    }
  return g;
}

// Scales must be finite and nonzero; `index` names the first bad one.
template <class Ctx>
void checkScales(const Ctx& c, const ir::Tensor& s, const char* what) {
  const int64_t n = s.numel();
  for (int64_t i = 0; i < n; ++i) {
    const double v = readScalar(s, i);
    if (v == 0 || !std::isfinite(v))
      c.fail(std::string(what) + (n > 1 ? "[" + std::to_string(i) + "]" : std::string()) + " is " +
             (v == 0 ? std::string("zero") : std::isnan(v) ? std::string("NaN") : std::string("infinite")) +
             "; a quantization scale must be a finite nonzero number");
  }
}

// The checks both ops share at inference: scale and zero point types and shapes.
// `qtype` is the quantized type (x for DequantizeLinear, y for QuantizeLinear).
void inferParams(InferContext& c, const ir::TensorType& x, ir::DType qtype, const char* scale_name,
                 const char* zero_name) {
  const ir::TensorType& s = c.input(1);
  if (!isFloatLike(s.dtype) && s.dtype != ir::DType::kUndefined)
    c.fail(std::string(scale_name) + " must be float32, float16 or bfloat16, got " + name(s.dtype));
  std::vector<int64_t> shape;
  const bool static_x = x.has_rank && x.isStatic();
  if (static_x) shape = x.staticShape();
  granularity(c, static_x ? &shape : nullptr, x.has_rank ? x.rank() : 0, x.has_rank, s, scale_name);
  if (c.value(1)) checkScales(c, *c.value(1), scale_name);
  if (!c.hasInput(2)) return;
  const ir::TensorType& z = c.input(2);
  if (z.dtype != qtype && qtype != ir::DType::kUndefined && z.dtype != ir::DType::kUndefined)
    c.fail(std::string(zero_name) + " is " + name(z.dtype) + " but the quantized type is " + name(qtype));
  if (s.has_rank && z.has_rank && s.isStatic() && z.isStatic() && s.staticShape() != z.staticShape() &&
      !(s.numel() == 1 && z.numel() == 1))
    c.fail(std::string(zero_name) + " " + z.str() + " must have the shape of " + scale_name + " " + s.str());
}

void inferQuantize(InferContext& c) {
  const ir::TensorType& x = c.input(0);
  if (!isFloatLike(x.dtype) && x.dtype != ir::DType::kInt32 && x.dtype != ir::DType::kUndefined)
    c.fail("x must be float32, float16, bfloat16 or int32, got " + name(x.dtype));
  ir::DType out = ir::DType::kUInt8;
  const int64_t output_dtype = c.opset() >= 21 ? c.attrs().getInt("output_dtype", 0) : 0;
  if (output_dtype != 0) {
    out = quantTypeFromOnnx(output_dtype);
    if (out == ir::DType::kUndefined)
      c.fail("output_dtype " + std::to_string(output_dtype) + " is not int8, uint8, int16 or uint16");
  }
  if (c.hasInput(2)) {
    const ir::DType z = c.input(2).dtype;
    if (z != ir::DType::kUndefined && !isQuantized(z))
      c.fail("y_zero_point must be int8, uint8, int16 or uint16, got " + name(z));
    if (output_dtype != 0 && z != out && z != ir::DType::kUndefined)
      c.fail("y_zero_point is " + name(z) + " but output_dtype says " + name(out));
    if (z != ir::DType::kUndefined) out = z;
  }
  inferParams(c, x, out, "y_scale", "y_zero_point");
  c.outputs[0] = x;
  c.outputs[0].dtype = out;
}

void inferDequantize(InferContext& c) {
  const ir::TensorType& x = c.input(0);
  if (!isQuantized(x.dtype) && x.dtype != ir::DType::kInt32 && x.dtype != ir::DType::kUndefined)
    c.fail("x must be int8, uint8, int16, uint16 or int32, got " + name(x.dtype));
  inferParams(c, x, x.dtype, "x_scale", "x_zero_point");
  if (x.dtype == ir::DType::kInt32 && c.value(2))
    for (int64_t i = 0; i < c.value(2)->numel(); ++i)
      if (readScalar(*c.value(2), i) != 0) c.fail("x_zero_point must be 0 for int32 x");
  c.outputs[0] = x;
  c.outputs[0].dtype = c.input(1).dtype == ir::DType::kUndefined ? ir::DType::kFloat32 : c.input(1).dtype;
}

// ---- run time ------------------------------------------------------------------------

// x's elements as [outer, dim, inner] around the axis, and where each finds its scale.
struct Layout {
  int64_t outer = 1, dim = 1, inner = 1;
  Granularity g;
  int64_t blocks = 1;  // per block: scale dimension along the axis
  int64_t scaleIndex(int64_t o, int64_t a, int64_t i) const {
    switch (g.kind) {
      case Granularity::kTensor:
        return 0;
      case Granularity::kAxis:
        return a;
      case Granularity::kBlock:
        return (o * blocks + a / g.block) * inner + i;
    }
    return 0;
  }
};

Layout layoutOf(KernelContext& c, const ir::Tensor& x, const ir::Tensor& scale, const char* what) {
  Layout l;
  ir::TensorType st = ir::TensorType::of(scale.dtype, scale.shape);
  l.g = granularity(c, &x.shape, x.rank(), true, st, what);
  if (l.g.kind == Granularity::kTensor) {
    if (scale.numel() != 1) c.fail(std::string(what) + " must have one value, got " + ir::shapeStr(scale.shape));
    l.dim = x.numel();
    return l;
  }
  const size_t axis = size_t(l.g.axis);
  for (size_t d = 0; d < axis; ++d) l.outer *= x.shape[d];
  l.dim = x.shape[axis];
  for (size_t d = axis + 1; d < x.rank(); ++d) l.inner *= x.shape[d];
  if (l.g.kind == Granularity::kBlock) l.blocks = scale.shape[axis];
  return l;
}

// A float-like tensor's values as float32 (a view when it is float32 already).
const float* asFloats(const ir::Tensor& t, std::vector<float>& storage) {
  if (t.dtype == ir::DType::kFloat32) return t.as<const float>();
  storage.resize(size_t(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) storage[size_t(i)] = float(readScalar(t, i));
  return storage.data();
}

template <class Q>
void quantizeTyped(const Layout& l, const float* x, const float* scale, const Q* zero, Q* y, int threads) {
  constexpr float lo = float(std::numeric_limits<Q>::min()), hi = float(std::numeric_limits<Q>::max());
  const int64_t rows = l.outer * l.dim;
#pragma omp parallel for num_threads(threads) if (rows * l.inner > (1 << 15)) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t o = r / l.dim, a = r % l.dim;
    const float* xr = x + r * l.inner;
    Q* yr = y + r * l.inner;
    if (l.g.kind != Granularity::kBlock) {
      const int64_t s = l.scaleIndex(o, a, 0);
      const float sc = scale[s], z = zero ? float(zero[s]) : 0.f;
      for (int64_t i = 0; i < l.inner; ++i) yr[i] = Q(std::clamp(std::nearbyint(xr[i] / sc) + z, lo, hi));
    } else {
      for (int64_t i = 0; i < l.inner; ++i) {
        const int64_t s = l.scaleIndex(o, a, i);
        yr[i] = Q(std::clamp(std::nearbyint(xr[i] / scale[s]) + (zero ? float(zero[s]) : 0.f), lo, hi));
      }
    }
  }
}

template <class Q>
void dequantizeTyped(const Layout& l, const Q* x, const float* scale, const Q* zero, float* y, int threads) {
  const int64_t rows = l.outer * l.dim;
#pragma omp parallel for num_threads(threads) if (rows * l.inner > (1 << 15)) schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t o = r / l.dim, a = r % l.dim;
    const Q* xr = x + r * l.inner;
    float* yr = y + r * l.inner;
    for (int64_t i = 0; i < l.inner; ++i) {
      const int64_t s = l.g.kind == Granularity::kBlock ? l.scaleIndex(o, a, i) : l.scaleIndex(o, a, 0);
      const int64_t z = zero ? int64_t(zero[s]) : 0;
      yr[i] = float(int64_t(xr[i]) - z) * scale[s];
    }
  }
}

// Writes float32 results into a float-like output (rounding to nearest even).
void storeFloats(const std::vector<float>& v, const ir::Tensor& y) {
  if (y.dtype == ir::DType::kFloat16)
    for (size_t i = 0; i < v.size(); ++i) y.as<uint16_t>()[i] = ir::floatToHalf(v[i]);
  else
    for (size_t i = 0; i < v.size(); ++i) y.as<uint16_t>()[i] = ir::floatToBfloat16(v[i]);
}

void checkZeroPoint(KernelContext& c, const ir::Tensor& scale, const char* what) {
  const ir::Tensor& z = c.inputs[2];
  if (z.numel() != scale.numel())
    c.fail(std::string(what) + " has " + std::to_string(z.numel()) + " values but the scale has " +
           std::to_string(scale.numel()));
}

void runQuantize(KernelContext& c) {
  const ir::Tensor& x = c.inputs[0];
  const ir::Tensor& scale = c.inputs[1];
  const ir::Tensor& y = c.outputs[0];
  checkScales(c, scale, "y_scale");
  Layout l = layoutOf(c, x, scale, "y_scale");
  const bool has_zero = c.hasInput(2);
  if (has_zero) checkZeroPoint(c, scale, "y_zero_point");
  std::vector<float> xs, ss;
  const float* xf;
  if (x.dtype == ir::DType::kInt32) {
    xs.resize(size_t(x.numel()));
    for (int64_t i = 0; i < x.numel(); ++i) xs[size_t(i)] = float(x.as<const int32_t>()[i]);
    xf = xs.data();
  } else {
    xf = asFloats(x, xs);
  }
  const float* sf = asFloats(scale, ss);
  switch (y.dtype) {
    case ir::DType::kUInt8:
      return quantizeTyped(l, xf, sf, has_zero ? c.inputs[2].as<const uint8_t>() : nullptr, y.as<uint8_t>(),
                           c.threads);
    case ir::DType::kInt8:
      return quantizeTyped(l, xf, sf, has_zero ? c.inputs[2].as<const int8_t>() : nullptr, y.as<int8_t>(),
                           c.threads);
    case ir::DType::kUInt16:
      return quantizeTyped(l, xf, sf, has_zero ? c.inputs[2].as<const uint16_t>() : nullptr, y.as<uint16_t>(),
                           c.threads);
    case ir::DType::kInt16:
      return quantizeTyped(l, xf, sf, has_zero ? c.inputs[2].as<const int16_t>() : nullptr, y.as<int16_t>(),
                           c.threads);
    default:
      c.fail("cannot quantize into " + name(y.dtype));
  }
}

void runDequantize(KernelContext& c) {
  const ir::Tensor& x = c.inputs[0];
  const ir::Tensor& scale = c.inputs[1];
  const ir::Tensor& y = c.outputs[0];
  checkScales(c, scale, "x_scale");
  Layout l = layoutOf(c, x, scale, "x_scale");
  const bool has_zero = c.hasInput(2);
  if (has_zero) checkZeroPoint(c, scale, "x_zero_point");
  std::vector<float> ss, out;
  const float* sf = asFloats(scale, ss);
  float* yf = y.as<float>();
  if (y.dtype != ir::DType::kFloat32) {
    out.resize(size_t(y.numel()));
    yf = out.data();
  }
  switch (x.dtype) {
    case ir::DType::kUInt8:
      dequantizeTyped(l, x.as<const uint8_t>(), sf, has_zero ? c.inputs[2].as<const uint8_t>() : nullptr, yf,
                      c.threads);
      break;
    case ir::DType::kInt8:
      dequantizeTyped(l, x.as<const int8_t>(), sf, has_zero ? c.inputs[2].as<const int8_t>() : nullptr, yf,
                      c.threads);
      break;
    case ir::DType::kUInt16:
      dequantizeTyped(l, x.as<const uint16_t>(), sf, has_zero ? c.inputs[2].as<const uint16_t>() : nullptr, yf,
                      c.threads);
      break;
    case ir::DType::kInt16:
      dequantizeTyped(l, x.as<const int16_t>(), sf, has_zero ? c.inputs[2].as<const int16_t>() : nullptr, yf,
                      c.threads);
      break;
    case ir::DType::kInt32:
      if (has_zero)
        for (int64_t i = 0; i < c.inputs[2].numel(); ++i)
          if (c.inputs[2].as<const int32_t>()[i] != 0) c.fail("x_zero_point must be 0 for int32 x");
      dequantizeTyped(l, x.as<const int32_t>(), sf, static_cast<const int32_t*>(nullptr), yf, c.threads);
      break;
    default:
      c.fail("cannot dequantize " + name(x.dtype));
  }
  if (!out.empty()) storeFloats(out, y);
}

// ---- DynamicQuantizeLinear -----------------------------------------------------------

void inferDynamicQuantize(InferContext& c) {
  const ir::TensorType& x = c.input(0);
  if (x.dtype != ir::DType::kFloat32 && x.dtype != ir::DType::kUndefined)
    c.fail("x must be float32, got " + name(x.dtype));
  c.outputs[0] = x;
  c.outputs[0].dtype = ir::DType::kUInt8;
  if (c.outputs.size() > 1) c.outputs[1] = ir::TensorType::of(ir::DType::kFloat32, {});
  if (c.outputs.size() > 2) c.outputs[2] = ir::TensorType::of(ir::DType::kUInt8, {});
}

void runDynamicQuantize(KernelContext& c) {
  const ir::Tensor& x = c.inputs[0];
  // (Inference lets an input of undefined type through: a run checks what it got.)
  if (x.dtype != ir::DType::kFloat32) c.fail("x must be float32, got " + name(x.dtype));
  const float* xf = x.as<const float>();
  const int64_t n = x.numel();
  float lo = 0, hi = 0;
  bool nan = false;
#pragma omp parallel for num_threads(c.threads) if (n > (1 << 16)) reduction(min : lo) reduction(max : hi) \
    reduction(|| : nan)
  for (int64_t i = 0; i < n; ++i) {
    lo = std::min(lo, xf[i]);
    hi = std::max(hi, xf[i]);
    nan = nan || xf[i] != xf[i];
  }
  if (nan) c.fail("x holds NaN; its range gives no scale");
  if (!std::isfinite(lo) || !std::isfinite(hi)) c.fail("x holds an infinity; its range gives no scale");
  // (A range of subnormals made the scale 0 and -lo / scale NaN, whose conversion to
  // uint8 is undefined: found by the artifact fuzzer.)
  const float scale =
      hi == lo ? 1.f : std::clamp((hi - lo) / 255.f, std::numeric_limits<float>::min(), std::numeric_limits<float>::max());
  const uint8_t zero = uint8_t(std::clamp(std::nearbyint(0.f - lo / scale), 0.f, 255.f));
  Layout l;
  l.dim = n;
  quantizeTyped<uint8_t>(l, xf, &scale, &zero, c.outputs[0].as<uint8_t>(), c.threads);
  if (c.outputs.size() > 1 && c.outputs[1].defined()) c.outputs[1].as<float>()[0] = scale;
  if (c.outputs.size() > 2 && c.outputs[2].defined()) c.outputs[2].as<uint8_t>()[0] = zero;
}

}  // namespace

void registerQuantLinearOps(OpRegistry& r) {
  r.add("QuantizeLinear", {inferQuantize, runQuantize, 21});
  r.add("DequantizeLinear", {inferDequantize, runDequantize, 21});
  r.add("DynamicQuantizeLinear", {inferDynamicQuantize, runDynamicQuantize});
}

}  // namespace partita::kernels
