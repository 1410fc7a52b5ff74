#include "backend/dnnl/dnnl_patterns.h"

#include <algorithm>
#include <cmath>

#include "backend/dnnl/dnnl_decode.h"
#include "backend/dnnl/dnnl_decode_util.h"

namespace partita::dnnl_backend {

namespace {

// Nodes reading `v`, and whether `v` is a graph output.
std::vector<ir::NodeId> readersOf(const ir::Graph& g, ir::ValueId v, bool& is_output) {
  is_output = std::find(g.outputs.begin(), g.outputs.end(), v) != g.outputs.end();
  std::vector<ir::NodeId> out;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (ir::ValueId in : g.nodes[i].inputs)
      if (in == v) {
        out.push_back(ir::NodeId(i));
        break;
      }
  return out;
}

// The single node reading `v` once (and nothing else reading it), if it is `op`.
std::optional<ir::NodeId> soleReader(const ir::Graph& g, ir::ValueId v, const char* op) {
  bool is_output = false;
  std::vector<ir::NodeId> r = readersOf(g, v, is_output);
  if (is_output || r.size() != 1) return std::nullopt;
  const ir::Node& n = g.nodes[size_t(r[0])];
  if (n.op_type != op || !n.domain.empty() || int(std::count(n.inputs.begin(), n.inputs.end(), v)) != 1)
    return std::nullopt;
  return r[0];
}

// The operand of binary node `n` other than `v`.
ir::ValueId otherOperand(const ir::Node& n, ir::ValueId v) {
  if (n.inputs.size() != 2) return ir::kNoValue;
  return n.inputs[0] == v ? n.inputs[1] : n.inputs[1] == v ? n.inputs[0] : ir::kNoValue;
}

bool isScalarNear(const ir::Graph& g, ir::ValueId v, double want, double tolerance = 1e-6) {
  std::optional<float> c = constantScalar(g, v);
  return c && std::abs(double(*c) - want) <= tolerance * want;
}

// sqrt(2) as a float16 model stores it (1.4140625, what scripts/make_float16.py and
// float16 converters write) is off by 1.1e-4 relative: GELU computed with the exact
// constant differs from the model's by at most 3e-5 of |x|, below float16's own
// resolution (2^-11), so such a Div still reads as GELU's.
constexpr double kFloat16Rounding = 1.0 / 2048;

}  // namespace

std::optional<GeluMatch> matchGelu(const ir::Graph& g, ir::ValueId x) {
  if (x == ir::kNoValue) return std::nullopt;
  const ir::TensorType& t = g.typeOf(x);
  if (t.dtype != ir::DType::kFloat32 || !t.isStatic() || t.numel() <= 0 || g.value(x).isConstant())
    return std::nullopt;
  bool is_output = false;
  std::vector<ir::NodeId> readers = readersOf(g, x, is_output);
  if (is_output || readers.size() != 2) return std::nullopt;
  GeluMatch m;
  m.x = x;
  bool found_div = false;
  for (ir::NodeId r : readers) {
    const ir::Node& n = g.nodes[size_t(r)];
    if (n.op_type == "Div" && n.domain.empty() && n.inputs.size() == 2 && n.inputs[0] == x &&
        isScalarNear(g, n.inputs[1], 1.4142135623730951, kFloat16Rounding)) {
      m.div = r;
      found_div = true;
    }
  }
  if (!found_div) return std::nullopt;
  auto erf = soleReader(g, g.nodes[size_t(m.div)].outputs[0], "Erf");
  if (!erf) return std::nullopt;
  m.erf = *erf;
  ir::ValueId e = g.nodes[size_t(m.erf)].outputs[0];
  auto add = soleReader(g, e, "Add");
  if (!add || !isScalarNear(g, otherOperand(g.nodes[size_t(*add)], e), 1.0)) return std::nullopt;
  m.add = *add;
  ir::ValueId a = g.nodes[size_t(m.add)].outputs[0];
  auto mul = soleReader(g, a, "Mul");
  if (!mul || otherOperand(g.nodes[size_t(*mul)], a) != x) return std::nullopt;
  m.mul = *mul;
  if (std::find(readers.begin(), readers.end(), m.mul) == readers.end()) return std::nullopt;
  ir::ValueId p = g.nodes[size_t(m.mul)].outputs[0];
  auto half = soleReader(g, p, "Mul");
  if (!half || !isScalarNear(g, otherOperand(g.nodes[size_t(*half)], p), 0.5)) return std::nullopt;
  m.half = *half;
  m.y = g.nodes[size_t(m.half)].outputs[0];
  for (ir::NodeId id : {m.div, m.erf, m.add, m.mul, m.half}) {
    const ir::Node& n = g.nodes[size_t(id)];
    if (n.outputs.size() != 1 || g.typeOf(n.outputs[0]) != t) return std::nullopt;
  }
  return m;
}

std::optional<LayerNormMatch> matchLayerNorm(const ir::Graph& g, ir::NodeId mean) {
  const ir::Node& rm = g.nodes[size_t(mean)];
  if (rm.op_type != "ReduceMean" || !rm.domain.empty() || rm.inputs.size() != 1 || rm.outputs.size() != 1)
    return std::nullopt;
  const ir::ValueId x = rm.inputs[0];
  const ir::TensorType& t = g.typeOf(x);
  if (t.dtype != ir::DType::kFloat32 || !t.isStatic() || t.numel() <= 0 || t.rank() < 1) return std::nullopt;
  const int64_t rank = int64_t(t.rank());
  auto lastAxisMean = [&](const ir::Node& n) {
    std::vector<int64_t> axes = n.attrs.getInts("axes", {});
    return axes.size() == 1 && (axes[0] == -1 || axes[0] == rank - 1) && n.attrs.getInt("keepdims", 1) == 1;
  };
  if (!lastAxisMean(rm)) return std::nullopt;
  LayerNormMatch m;
  m.x = x;
  m.nodes.push_back(mean);
  auto next = [&](ir::ValueId v, const char* op) -> std::optional<ir::NodeId> {
    auto r = soleReader(g, v, op);
    if (r) m.nodes.push_back(*r);
    return r;
  };
  // d = x - m: Sub reads m once and x as its first operand.
  auto sub = next(rm.outputs[0], "Sub");
  if (!sub || g.nodes[size_t(*sub)].inputs[0] != x) return std::nullopt;
  const ir::ValueId d = g.nodes[size_t(*sub)].outputs[0];
  bool is_output = false;
  std::vector<ir::NodeId> d_readers = readersOf(g, d, is_output);
  if (is_output || d_readers.size() != 2) return std::nullopt;
  ir::NodeId pow = ir::kNoNode, div = ir::kNoNode;
  for (ir::NodeId r : d_readers) {
    const ir::Node& n = g.nodes[size_t(r)];
    if (n.op_type == "Pow" && n.inputs.size() == 2 && n.inputs[0] == d && isScalarNear(g, n.inputs[1], 2.0))
      pow = r;
    if (n.op_type == "Div" && n.inputs.size() == 2 && n.inputs[0] == d) div = r;
  }
  if (pow == ir::kNoNode || div == ir::kNoNode) return std::nullopt;
  m.nodes.push_back(pow);
  auto var = next(g.nodes[size_t(pow)].outputs[0], "ReduceMean");
  if (!var || !lastAxisMean(g.nodes[size_t(*var)])) return std::nullopt;
  const ir::ValueId v = g.nodes[size_t(*var)].outputs[0];
  auto add_eps = next(v, "Add");
  if (!add_eps) return std::nullopt;
  std::optional<float> eps = constantScalar(g, otherOperand(g.nodes[size_t(*add_eps)], v));
  if (!eps || !(*eps >= 0)) return std::nullopt;
  m.epsilon = *eps;
  auto sqrt = next(g.nodes[size_t(*add_eps)].outputs[0], "Sqrt");
  if (!sqrt) return std::nullopt;
  auto div2 = soleReader(g, g.nodes[size_t(*sqrt)].outputs[0], "Div");
  if (!div2 || *div2 != div || g.nodes[size_t(div)].inputs[1] != g.nodes[size_t(*sqrt)].outputs[0])
    return std::nullopt;
  m.nodes.push_back(div);
  const ir::ValueId n = g.nodes[size_t(div)].outputs[0];
  auto mul = next(n, "Mul");
  if (!mul) return std::nullopt;
  m.gamma = otherOperand(g.nodes[size_t(*mul)], n);
  auto add = next(g.nodes[size_t(*mul)].outputs[0], "Add");
  if (!add) return std::nullopt;
  m.beta = otherOperand(g.nodes[size_t(*add)], g.nodes[size_t(*mul)].outputs[0]);
  m.y = g.nodes[size_t(*add)].outputs[0];
  m.inner = t.staticShape().back();
  m.outer = t.numel() / m.inner;
  for (ir::ValueId p : {m.gamma, m.beta}) {
    if (p == ir::kNoValue || !isConstant(g, p)) return std::nullopt;
    const ir::Constant& c = constantOf(g, p);
    if (c.dtype != ir::DType::kFloat32 || !c.layout.empty() || ir::shapeNumel(c.shape) != m.inner ||
        padLeft(c.shape, size_t(rank)) != padLeft({m.inner}, size_t(rank)))
      return std::nullopt;
  }
  if (g.typeOf(m.y) != t) return std::nullopt;
  return m;
}

namespace {

// A per-tensor zero point: a constant uint8/int8 scalar (or omitted: uint8 0).
std::optional<std::pair<ir::DType, int>> zeroPoint(const ir::Graph& g, const ir::Node& n) {
  if (!n.hasInput(2)) return std::make_pair(ir::DType::kUInt8, 0);
  if (!isConstant(g, n.inputs[2])) return std::nullopt;
  const ir::Constant& c = constantOf(g, n.inputs[2]);
  if (ir::shapeNumel(c.shape) != 1 || !c.layout.empty()) return std::nullopt;
  if (c.dtype == ir::DType::kUInt8) return std::make_pair(c.dtype, int(*reinterpret_cast<const uint8_t*>(c.bytes.data)));
  if (c.dtype == ir::DType::kInt8) return std::make_pair(c.dtype, int(*reinterpret_cast<const int8_t*>(c.bytes.data)));
  return std::nullopt;
}

}  // namespace

std::optional<FakeQuantMatch> matchFakeQuant(const ir::Graph& g, ir::NodeId quantize) {
  const ir::Node& q = g.nodes[size_t(quantize)];
  if (q.op_type != "QuantizeLinear" || !q.domain.empty() || q.inputs.size() < 2 || !q.hasInput(0) ||
      !q.hasOutput(0) || q.outputs.size() != 1)
    return std::nullopt;
  if (q.opset >= 21 && (q.attrs.getInt("block_size", 0) != 0 || q.attrs.getInt("output_dtype", 0) != 0))
    return std::nullopt;
  const ir::TensorType& xt = g.typeOf(q.inputs[0]);
  if (xt.dtype != ir::DType::kFloat32 || !xt.isStatic() || xt.numel() <= 0 || g.value(q.inputs[0]).isConstant())
    return std::nullopt;
  std::optional<ir::NodeId> dq_id = soleReader(g, q.outputs[0], "DequantizeLinear");
  if (!dq_id) return std::nullopt;
  const ir::Node& dq = g.nodes[size_t(*dq_id)];
  if (dq.inputs.size() < 2 || dq.inputs[0] != q.outputs[0] || !dq.hasOutput(0) || dq.outputs.size() != 1 ||
      g.typeOf(dq.outputs[0]).dtype != ir::DType::kFloat32)
    return std::nullopt;
  if (dq.opset >= 21 && dq.attrs.getInt("block_size", 0) != 0) return std::nullopt;
  std::optional<float> s = constantScalar(g, q.inputs[1]), ds = constantScalar(g, dq.inputs[1]);
  if (!s || !ds || *s != *ds || *s == 0 || !std::isfinite(*s) || !std::isfinite(1.0f / *s)) return std::nullopt;
  auto z = zeroPoint(g, q), dz = zeroPoint(g, dq);
  if (!z || !dz || *z != *dz) return std::nullopt;
  const bool u8 = z->first == ir::DType::kUInt8;
  FakeQuantMatch m;
  m.quantize = quantize;
  m.dequantize = *dq_id;
  m.x = q.inputs[0];
  m.y = dq.outputs[0];
  m.scale = *s;
  m.lo = float((u8 ? 0 : -128) - z->second);
  m.hi = float((u8 ? 255 : 127) - z->second);
  return m;
}

}  // namespace partita::dnnl_backend
