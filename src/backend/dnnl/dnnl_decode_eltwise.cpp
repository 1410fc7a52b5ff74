// Decoding the elementwise ops: activations into one or more oneDNN eltwise ops,
// two-input arithmetic into oneDNN binary (which broadcasts only its second source),
// PRelu with a constant slope.
#include "backend/dnnl/dnnl_decode.h"

#include <cmath>
#include <limits>

#include "backend/dnnl/dnnl_decode_util.h"
#include "backend/dnnl/dnnl_patterns.h"

namespace partita::dnnl_backend {

using dnnl::algorithm;

std::vector<EltwiseOp> fakeQuantOps(const FakeQuantMatch& m) {
  return {{algorithm::eltwise_linear, 1.0f / m.scale, 0.0f},
          {algorithm::eltwise_round, 0.0f, 0.0f},
          {algorithm::eltwise_clip, m.lo, m.hi},
          {algorithm::eltwise_linear, m.scale, 0.0f}};
}

std::optional<std::vector<EltwiseOp>> decodeEltwise(const ir::Graph& g, const ir::Node& n, std::string* why) {
  if (n.op_type == "QuantizeLinear" && n.domain.empty()) {
    std::optional<FakeQuantMatch> m = matchFakeQuant(g, ir::NodeId(&n - g.nodes.data()));
    if (!m) return no(why, "QuantizeLinear outside a per-tensor quantize-dequantize pair");
    return fakeQuantOps(*m);  // computes the pair: the DequantizeLinear goes with it
  }
  if (n.op_type == "DequantizeLinear") return no(why, "DequantizeLinear outside a quantize-dequantize pair");
  if (!unaryShape(g, n, why)) return std::nullopt;
  if (n.op_type == "Erf") return no(why, "Erf outside a Gelu pattern");
  const std::string& op = n.op_type;
  const ir::AttributeMap& a = n.attrs;
  auto one = [](algorithm alg, float alpha = 0, float beta = 0) {
    return std::vector<EltwiseOp>{{alg, alpha, beta}};
  };
  if (op == "Pow" || op == "Clip") {
    for (size_t i = 1; i < n.inputs.size(); ++i)
      if (n.inputs[i] != ir::kNoValue && !constantScalar(g, n.inputs[i]))
        return no(why, op + " needs constant float32 scalar operands");
  } else if (n.inputs.size() > 1) {
    return no(why, "unexpected extra inputs");
  }
  if (isContribGelu(n)) return one(algorithm::eltwise_gelu_erf);
  if (op == "Gelu") {  // opset 20
    const std::string approx = a.getString("approximate", "none");
    if (approx == "none") return one(algorithm::eltwise_gelu_erf);
    if (approx == "tanh") return one(algorithm::eltwise_gelu_tanh);
    return no(why, "Gelu approximate '" + approx + "'");
  }
  if (op == "Mish") return one(algorithm::eltwise_mish);  // opset 18
  if (op == "Relu") return one(algorithm::eltwise_relu);
  if (op == "LeakyRelu") return one(algorithm::eltwise_relu, a.getFloat("alpha", 0.01f));
  if (op == "Elu") return one(algorithm::eltwise_elu, a.getFloat("alpha", 1.0f));
  if (op == "Selu")
    return std::vector<EltwiseOp>{
        {algorithm::eltwise_elu, a.getFloat("alpha", 1.67326319217681884765625f), 0},
        {algorithm::eltwise_linear, a.getFloat("gamma", 1.05070102214813232421875f), 0}};
  if (op == "Sigmoid") return one(algorithm::eltwise_logistic);
  if (op == "HardSigmoid")
    return std::vector<EltwiseOp>{
        {algorithm::eltwise_linear, a.getFloat("alpha", 0.2f), a.getFloat("beta", 0.5f)},
        {algorithm::eltwise_clip, 0.0f, 1.0f}};
  if (op == "HardSwish") return one(algorithm::eltwise_hardswish);
  if (op == "Tanh") return one(algorithm::eltwise_tanh);
  if (op == "Abs") return one(algorithm::eltwise_abs);
  if (op == "Sqrt") return one(algorithm::eltwise_sqrt);
  if (op == "Exp") return one(algorithm::eltwise_exp);
  // Log stays on the host: oneDNN's polynomial gives log(1) = 1.4e-6, outside ONNX's
  // absolute tolerance (1e-7) around zero.
  if (op == "Softplus") return one(algorithm::eltwise_soft_relu);
  if (op == "Neg") return one(algorithm::eltwise_linear, -1.0f, 0.0f);
  if (op == "Round") return one(algorithm::eltwise_round);
  if (op == "Clip") {
    float lo = -std::numeric_limits<float>::infinity(), hi = std::numeric_limits<float>::infinity();
    if (n.opset < 11) {
      lo = a.getFloat("min", lo);
      hi = a.getFloat("max", hi);
    } else {
      if (n.hasInput(1)) lo = *constantScalar(g, n.inputs[1]);
      if (n.hasInput(2)) hi = *constantScalar(g, n.inputs[2]);
    }
    if (std::isnan(lo) || std::isnan(hi) || lo > hi) return no(why, "Clip with min > max or NaN bounds");
    return one(algorithm::eltwise_clip, lo, hi);
  }
  if (op == "Pow") {
    if (!n.hasInput(1)) return no(why, "Pow without exponent");
    float p = *constantScalar(g, n.inputs[1]);
    // oneDNN computes pow through exp/log for non-integer exponents: defined for x >= 0 only,
    // which is also where ONNX (numpy) gives non-NaN results; integer exponents are exact.
    if (p != 2.0f && p != 3.0f && p != 1.0f && p != 0.5f)
      return no(why, "Pow exponent other than 0.5, 1, 2, 3");
    return one(algorithm::eltwise_pow, 1.0f, p);
  }
  return no(why, "not an eltwise op");
}

std::optional<dnnl::algorithm> decodeBinary(const ir::Graph& g, const ir::Node& n, std::string* why) {
  const std::string& op = n.op_type;
  algorithm alg;
  bool commutative = true;
  if (op == "Add") {
    alg = algorithm::binary_add;
  } else if (op == "Sub") {
    alg = algorithm::binary_sub;
    commutative = false;
  } else if (op == "Mul") {
    alg = algorithm::binary_mul;
  } else if (op == "Div") {
    alg = algorithm::binary_div;
    commutative = false;
  } else if (op == "Max") {
    alg = algorithm::binary_max;
  } else if (op == "Min") {
    alg = algorithm::binary_min;
  } else {
    return no(why, "not a binary op");
  }
  if (n.inputs.size() != 2 || !n.hasInput(0) || !n.hasInput(1))
    return no(why, op + " with other than two inputs");
  if (!onlyFirstOutput(n, why) || !isDenseF32(g, n.inputs[0], why, "input 0") ||
      !isDenseF32(g, n.inputs[1], why, "input 1") || !isDenseF32(g, n.outputs[0], why, "output"))
    return std::nullopt;
  std::vector<int64_t> a = shapeOf(g, n.inputs[0]), b = shapeOf(g, n.inputs[1]), y = shapeOf(g, n.outputs[0]);
  // oneDNN broadcasts only its second source: the first must have the output's shape.
  bool a_full = padLeft(a, y.size()) == y, b_full = padLeft(b, y.size()) == y;
  if (!(a_full && ir::broadcastsInto(b, y)) && !(commutative && b_full && ir::broadcastsInto(a, y)))
    return no(why, "the first operand of " + op + " is broadcast");
  return alg;
}

bool decodePrelu(const ir::Graph& g, const ir::Node& n, std::string* why) {
  if (!onlyFirstOutput(n, why) || n.inputs.size() != 2 || !n.hasInput(1)) return noBool(why, "bad inputs");
  if (!isDenseF32(g, n.inputs[0], why, "input") || !isDenseF32(g, n.outputs[0], why, "output")) return false;
  if (!isConstant(g, n.inputs[1]) || !isDenseF32(g, n.inputs[1], why, "slope"))
    return noBool(why, "slope not constant");
  if (!constantOf(g, n.inputs[1]).layout.empty()) return noBool(why, "packed layout");
  if (!ir::broadcastsInto(shapeOf(g, n.inputs[1]), shapeOf(g, n.inputs[0])))
    return noBool(why, "slope does not broadcast");
  return true;
}
}  // namespace partita::dnnl_backend
