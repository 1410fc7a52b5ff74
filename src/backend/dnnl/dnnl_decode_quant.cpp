// Decoding the int8 ops oneDNN computes with its int8 primitives: QLinearConv (an int8
// convolution with output scales and zero points) and a standalone per-tensor
// QuantizeLinear / DequantizeLinear (a reorder with an output scale and a zero point).
#include <cmath>

#include "backend/dnnl/dnnl_decode.h"
#include "backend/dnnl/dnnl_decode_util.h"
#include "kernels/op_util.h"

namespace partita::dnnl_backend {

namespace {

using dt = dnnl::memory::data_type;

std::optional<dt> int8Type(ir::DType t) {
  if (t == ir::DType::kUInt8) return dt::u8;
  if (t == ir::DType::kInt8) return dt::s8;
  return std::nullopt;
}

// A statically shaped uint8/int8 tensor of rank <= 12 with at least one element.
std::optional<dt> denseInt8(const ir::Graph& g, ir::ValueId v, std::string* why, const char* what) {
  const ir::TensorType& t = g.typeOf(v);
  std::optional<dt> type = int8Type(t.dtype);
  if (!type) return no(why, std::string(what) + " is not uint8 or int8");
  if (!t.isStatic() || t.rank() > kMaxRank || t.numel() <= 0)
    return no(why, std::string(what) + " has no static shape of rank <= 12 with elements");
  return type;
}

// Constant float32 scales, finite and nonzero: one, or `count` (when count > 0).
std::optional<std::vector<float>> constantScales(const ir::Graph& g, ir::ValueId v, int64_t count, std::string* why,
                                                 const char* what) {
  if (v == ir::kNoValue || !isConstant(g, v)) return no(why, std::string(what) + " is not a constant");
  const ir::Constant& c = constantOf(g, v);
  if (c.dtype != ir::DType::kFloat32 || !c.layout.empty()) return no(why, std::string(what) + " is not float32");
  const int64_t n = c.view().numel();
  if (n != 1 && (count <= 0 || n != count || c.shape.size() != 1))
    return no(why, std::string(what) + " is neither one value nor one per output channel");
  std::vector<float> out;
  for (int64_t i = 0; i < n; ++i) {
    const float s = float(kernels::readScalar(c.view(), i));
    if (!std::isfinite(s) || s == 0) return no(why, std::string(what) + " is zero or not finite");
    out.push_back(s);
  }
  return out;
}

// A constant scalar zero point of type `type` (absent: 0).
std::optional<int32_t> constantZeroPoint(const ir::Graph& g, ir::ValueId v, ir::DType type, std::string* why,
                                         const char* what) {
  if (v == ir::kNoValue) return 0;
  if (!isConstant(g, v)) return no(why, std::string(what) + " is not a constant");
  const ir::Constant& c = constantOf(g, v);
  if (c.dtype != type || c.view().numel() != 1 || !c.layout.empty())
    return no(why, std::string(what) + " is not one value of the quantized type");
  return int32_t(kernels::readScalar(c.view(), 0));
}

}  // namespace

std::optional<QConvSpec> decodeQLinearConv(const ir::Graph& g, const ir::Node& n, std::string* why) {
  if (!onlyFirstOutput(n, why) || n.inputs.size() < 8 || n.inputs.size() > 9) return no(why, "bad inputs");
  for (size_t i = 0; i < 8; ++i)
    if (!n.hasInput(i)) return no(why, "input " + std::to_string(i) + " missing");
  QConvSpec s;
  std::optional<dt> src = denseInt8(g, n.inputs[0], why, "x");
  std::optional<dt> dst = src ? denseInt8(g, n.outputs[0], why, "y") : std::nullopt;
  if (!src || !dst) return std::nullopt;
  s.src_type = *src;
  s.dst_type = *dst;
  const ir::ValueId w = n.inputs[3];
  if (!isConstant(g, w) || constantOf(g, w).dtype != ir::DType::kInt8 || !constantOf(g, w).layout.empty())
    return no(why, "weights are not an int8 constant (oneDNN takes s8 weights only)");
  const std::vector<int64_t> w_shape = shapeOf(g, w);
  if (w_shape.empty()) return no(why, "weights are a scalar");
  auto xs = constantScales(g, n.inputs[1], 0, why, "x_scale");
  auto ws = xs ? constantScales(g, n.inputs[4], w_shape[0], why, "w_scale") : std::nullopt;
  auto ys = ws ? constantScales(g, n.inputs[6], 0, why, "y_scale") : std::nullopt;
  if (!ys) return std::nullopt;
  auto xz = constantZeroPoint(g, n.inputs[2], g.typeOf(n.inputs[0]).dtype, why, "x_zero_point");
  auto yz = xz ? constantZeroPoint(g, n.inputs[7], g.typeOf(n.outputs[0]).dtype, why, "y_zero_point") : std::nullopt;
  if (!yz) return std::nullopt;
  // oneDNN's int8 convolutions take weights without a zero point.
  if (!isConstant(g, n.inputs[5]) || constantOf(g, n.inputs[5]).dtype != ir::DType::kInt8)
    return no(why, "w_zero_point is not an int8 constant");
  const ir::Tensor wz = constantOf(g, n.inputs[5]).view();
  for (int64_t i = 0; i < wz.numel(); ++i)
    if (kernels::readScalar(wz, i) != 0) return no(why, "w_zero_point is not zero");
  ir::ValueId bias = n.hasInput(8) ? n.inputs[8] : ir::kNoValue;
  if (bias != ir::kNoValue &&
      (!isConstant(g, bias) || constantOf(g, bias).dtype != ir::DType::kInt32 || !constantOf(g, bias).layout.empty()))
    return no(why, "B is not an int32 constant");
  std::optional<ConvSpec> conv = decodeConvWindow(g, n, n.inputs[0], w, bias, why);
  if (!conv) return std::nullopt;
  s.conv = std::move(*conv);
  s.src_zero_point = *xz;
  s.dst_zero_point = *yz;
  s.x_scale = (*xs)[0];
  s.y_scale = (*ys)[0];
  s.w_scales = *ws;
  s.weights = w;
  s.bias = bias;
  return s;
}

std::optional<QMatMulSpec> decodeQMatMul(const ir::Graph& g, const ir::Node& n, std::string* why) {
  const bool qlinear = n.op_type == "QLinearMatMul";
  const size_t count = qlinear ? 8 : 2;
  if (!onlyFirstOutput(n, why) || n.inputs.size() < count || n.inputs.size() > (qlinear ? 8u : 4u))
    return no(why, "bad inputs");
  const size_t a_at = 0, b_at = qlinear ? 3 : 1;
  const size_t a_zero_at = qlinear ? 2 : 2, b_zero_at = qlinear ? 5 : 3;
  if (!n.hasInput(a_at) || !n.hasInput(b_at)) return no(why, "inputs missing");
  if (qlinear)
    for (size_t i = 0; i < count; ++i)
      if (!n.hasInput(i)) return no(why, "input " + std::to_string(i) + " missing");
  QMatMulSpec s;
  std::optional<dt> src = denseInt8(g, n.inputs[a_at], why, "A");
  if (!src) return std::nullopt;
  s.src_type = *src;
  if (qlinear) {
    std::optional<dt> dst = denseInt8(g, n.outputs[0], why, "Y");
    if (!dst) return std::nullopt;
    s.dst_type = *dst;
  } else {
    if (g.typeOf(n.outputs[0]).dtype != ir::DType::kInt32) return no(why, "Y is not int32");
    s.dst_type = dt::s32;
  }
  const std::vector<int64_t> a = shapeOf(g, n.inputs[a_at]);
  const ir::ValueId b = n.inputs[b_at];
  if (!isConstant(g, b) || constantOf(g, b).dtype != ir::DType::kInt8 || !constantOf(g, b).layout.empty())
    return no(why, "B is not an int8 constant (oneDNN takes s8 weights only)");
  const std::vector<int64_t> bs = shapeOf(g, b);
  if (a.size() < 2 || bs.size() != 2 || a.back() != bs[0])
    return no(why, "not A [.., M, K] times a constant B [K, N]");
  s.k = bs[0];
  s.n = bs[1];
  s.rows = ir::shapeNumel(a) / s.k;
  s.weights = b;
  // B's zero point: absent or all zero (oneDNN's int8 matmul takes s8 weights as they are).
  if (n.hasInput(b_zero_at)) {
    if (!isConstant(g, n.inputs[b_zero_at]) || constantOf(g, n.inputs[b_zero_at]).dtype != ir::DType::kInt8)
      return no(why, "B's zero point is not an int8 constant");
    const ir::Tensor z = constantOf(g, n.inputs[b_zero_at]).view();
    for (int64_t i = 0; i < z.numel(); ++i)
      if (kernels::readScalar(z, i) != 0) return no(why, "B's zero point is not zero");
  }
  auto az = constantZeroPoint(g, n.hasInput(a_zero_at) ? n.inputs[a_zero_at] : ir::kNoValue,
                              g.typeOf(n.inputs[a_at]).dtype, why, "A's zero point");
  if (!az) return std::nullopt;
  s.src_zero_point = *az;
  if (!qlinear) return s;
  auto as = constantScales(g, n.inputs[1], 0, why, "a_scale");
  auto bsc = as ? constantScales(g, n.inputs[4], s.n, why, "b_scale") : std::nullopt;
  auto ys = bsc ? constantScales(g, n.inputs[6], 0, why, "y_scale") : std::nullopt;
  auto yz = ys ? constantZeroPoint(g, n.inputs[7], g.typeOf(n.outputs[0]).dtype, why, "y_zero_point") : std::nullopt;
  if (!yz) return std::nullopt;
  for (float b_scale : *bsc) s.output_scales.push_back((*as)[0] * b_scale / (*ys)[0]);
  s.dst_zero_point = *yz;
  return s;
}

std::optional<QMatMulSpec> asMatrixProduct(const QConvSpec& q) {
  const ConvSpec& c = q.conv;
  if (c.transposed || c.groups != 1 || c.in_shape.size() < 3) return std::nullopt;
  for (size_t d = 2; d < c.in_shape.size(); ++d)
    if (c.in_shape[d] != 1 || c.weight_shape[d] != 1 || c.out_shape[d] != 1) return std::nullopt;
  for (size_t d = 0; d < c.pad_l.size(); ++d)
    if (c.pad_l[d] != 0 || c.pad_r[d] != 0) return std::nullopt;
  QMatMulSpec s;
  s.rows = c.in_shape[0];
  s.k = c.in_shape[1];
  s.n = c.out_shape[1];
  s.src_type = q.src_type;
  s.dst_type = q.dst_type;
  s.src_zero_point = q.src_zero_point;
  s.dst_zero_point = q.dst_zero_point;
  for (float ws : q.w_scales) s.output_scales.push_back(q.x_scale * ws / q.y_scale);
  s.weights = q.weights;
  s.bias = q.bias;
  s.weights_nk = true;
  return s;
}

std::optional<QuantizeSpec> decodeQuantize(const ir::Graph& g, const ir::Node& n, std::string* why) {
  if (!onlyFirstOutput(n, why) || !n.hasInput(0) || !n.hasInput(1) || n.inputs.size() > 3)
    return no(why, "bad inputs");
  if (n.attrs.has("block_size") && n.attrs.getInt("block_size", 0) != 0) return no(why, "blocked quantization");
  QuantizeSpec s;
  s.quantize = n.op_type == "QuantizeLinear";
  const ir::ValueId int_value = s.quantize ? n.outputs[0] : n.inputs[0];
  const ir::ValueId float_value = s.quantize ? n.inputs[0] : n.outputs[0];
  std::optional<dt> type = denseInt8(g, int_value, why, s.quantize ? "y" : "x");
  if (!type || !isDenseF32(g, float_value, why, s.quantize ? "x" : "y")) return std::nullopt;
  s.int_type = *type;
  auto scale = constantScales(g, n.inputs[1], 0, why, "scale");
  if (!scale) return std::nullopt;
  auto zero = constantZeroPoint(g, n.hasInput(2) ? n.inputs[2] : ir::kNoValue, g.typeOf(int_value).dtype, why,
                                "zero point");
  if (!zero) return std::nullopt;
  s.scale = s.quantize ? 1.0f / (*scale)[0] : (*scale)[0];
  s.zero_point = *zero;
  return s;
}

std::optional<DynamicQuantizeMatch> matchDynamicQuantize(const ir::Graph& g, ir::NodeId node, std::string* why) {
  const ir::Node& d = g.nodes[size_t(node)];
  if (d.op_type != "DynamicQuantizeLinear" || !d.domain.empty() || !d.hasInput(0) || d.outputs.size() != 3 ||
      !d.hasOutput(0) || !d.hasOutput(2))
    return no(why, "not a DynamicQuantizeLinear with its outputs");
  if (!isDenseF32(g, d.inputs[0], why, "x")) return std::nullopt;
  if (!g.typeOf(d.inputs[0]).isStatic()) return no(why, "x has no static shape");
  // The one reader of y and of its zero point: DequantizeLinear(y, 1, zero point).
  std::optional<ir::NodeId> reader;
  int y_uses = 0, z_uses = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (size_t k = 0; k < g.nodes[i].inputs.size(); ++k) {
      const ir::ValueId in = g.nodes[i].inputs[k];
      if (in == d.outputs[0]) ++y_uses, reader = ir::NodeId(i);
      if (in == d.outputs[2]) ++z_uses;
    }
  for (ir::ValueId out : g.outputs)
    if (out == d.outputs[0] || out == d.outputs[2]) return no(why, "y or its zero point is a graph output");
  if (y_uses != 1 || z_uses != 1) return no(why, "y or its zero point has other readers");
  const ir::Node& dq = g.nodes[size_t(*reader)];
  if (dq.op_type != "DequantizeLinear" || !dq.domain.empty() || dq.inputs.size() != 3 || dq.inputs[0] != d.outputs[0] ||
      dq.inputs[2] != d.outputs[2] || !dq.hasOutput(0) || !isDenseF32(g, dq.outputs[0], why, "DequantizeLinear's output"))
    return no(why, "y is not read by DequantizeLinear(y, 1, zero point)");
  auto one = constantScales(g, dq.inputs[1], 0, why, "scale");
  if (!one || (*one)[0] != 1.0f) return no(why, "the DequantizeLinear's scale is not 1");
  return DynamicQuantizeMatch{node, *reader};
}

}  // namespace partita::dnnl_backend
