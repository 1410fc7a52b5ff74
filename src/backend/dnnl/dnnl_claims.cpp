#include "backend/dnnl/dnnl_claims.h"

#include "backend/dnnl/dnnl_decode.h"
#include "backend/dnnl/dnnl_decode_util.h"
#include "backend/dnnl/dnnl_function_lowering.h"
#include "backend/dnnl/dnnl_patterns.h"

namespace partita::dnnl_backend {

OpClass classify(const ir::Node& n) {
  if (isContribGelu(n)) return OpClass::kEltwise;
  if (!n.domain.empty() && n.domain != "ai.onnx") return OpClass::kNone;
  const std::string& op = n.op_type;
  if (op == "Conv" || op == "ConvTranspose") return OpClass::kConv;
  if (op == "QLinearConv") return OpClass::kQConv;
  if (op == "QLinearMatMul" || op == "MatMulInteger") return OpClass::kQMatMul;
  if (op == "DynamicQuantizeLinear") return OpClass::kDynamicQuantize;
  if (op == "MaxPool" || op == "AveragePool" || op == "GlobalAveragePool" || op == "GlobalMaxPool")
    return OpClass::kPool;
  if (op == "MatMul" || op == "Gemm") return OpClass::kMatMul;
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Max" || op == "Min")
    return OpClass::kBinary;
  if (op == "Softmax" || op == "LogSoftmax") return OpClass::kSoftmax;
  if (op == "LayerNormalization") return OpClass::kLayerNorm;
  if (op == "BatchNormalization") return OpClass::kBatchNorm;
  if (op == "Concat") return OpClass::kConcat;
  if (op == "Resize" || op == "Upsample") return OpClass::kResample;
  if (op == "PRelu") return OpClass::kPrelu;
  if (op == "Transpose" || op == "Slice") return OpClass::kMove;
  if (op == "ReduceMean" || op == "ReduceSum" || op == "ReduceMax" || op == "ReduceMin" ||
      op == "ReduceProd" || op == "ReduceL1" || op == "ReduceL2" || op == "ReduceSumSquare")
    return OpClass::kReduce;
  if (op == "Flatten" || op == "Reshape" || op == "Squeeze" || op == "Unsqueeze" || op == "Identity" ||
      op == "Dropout")
    return OpClass::kView;
  if (op == "LSTM" || op == "GRU" || op == "RNN") return OpClass::kRecurrent;
  if (op == "Erf") return OpClass::kEltwise;  // only inside a Gelu (matchGelu)
  // a quantize-dequantize pair (matchFakeQuant), or alone between int8 and float32
  if (op == "QuantizeLinear" || op == "DequantizeLinear") return OpClass::kEltwise;
  static const char* const kEltwise[] = {"Relu",      "LeakyRelu", "Elu",   "Selu", "Sigmoid", "HardSigmoid",
                                         "HardSwish", "Tanh",      "Abs",   "Sqrt", "Exp",     "Softplus",
                                         "Neg",       "Clip",      "Round", "Pow",    "Gelu",    "Mish"};
  for (const char* e : kEltwise)
    if (op == e) return OpClass::kEltwise;
  return OpClass::kNone;
}

namespace {

bool supportsAt(const ir::Graph& g, const ir::Node& n, std::string* why, int depth) {
  // Constant data would have been folded; the lowering expects computed data inputs
  // (binary ops and Concat take constant operands of any kind).
  const OpClass cls = classify(n);
  if (cls != OpClass::kBinary && cls != OpClass::kConcat && cls != OpClass::kNone && n.hasInput(0) &&
      isConstant(g, n.inputs[0]))
    return noBool(why, "constant data input");
  switch (cls) {
    case OpClass::kNone:
      return noBool(why, "op not handled by the dnnl backend");
    case OpClass::kConv:
      return decodeConv(g, n, why).has_value();
    case OpClass::kDynamicQuantize:
      return matchDynamicQuantize(g, ir::NodeId(&n - g.nodes.data()), why).has_value();
    case OpClass::kQConv: {
      std::optional<QConvSpec> q = decodeQLinearConv(g, n, why);
      return q && qconvImplemented(*q, why);
    }
    case OpClass::kQMatMul: {
      std::optional<QMatMulSpec> q = decodeQMatMul(g, n, why);
      return q && qmatmulImplemented(*q, why);
    }
    case OpClass::kPool:
      return decodePool(g, n, why).has_value();
    case OpClass::kMatMul:
      return decodeMatMul(g, n, why).has_value();
    case OpClass::kEltwise: {
      if (n.op_type == "DequantizeLinear") {
        ir::NodeId q = n.hasInput(0) ? g.value(n.inputs[0]).producer : ir::kNoNode;
        std::optional<FakeQuantMatch> m = q == ir::kNoNode ? std::nullopt : matchFakeQuant(g, q);
        if (m && &g.nodes[size_t(m->dequantize)] == &n) return true;
        if (q != ir::kNoNode && g.nodes[size_t(q)].op_type == "DynamicQuantizeLinear") {
          std::optional<DynamicQuantizeMatch> d = matchDynamicQuantize(g, q, why);
          return d && &g.nodes[size_t(d->dequantize)] == &n;
        }
        return decodeQuantize(g, n, why).has_value();
      }
      if (n.op_type == "QuantizeLinear") {
        if (n.hasInput(0) && decodeEltwise(g, n, nullptr)) return true;  // the pair
        return decodeQuantize(g, n, why).has_value();
      }
      if (n.op_type != "Erf") return decodeEltwise(g, n, why).has_value();
      ir::NodeId div = n.inputs.empty() ? ir::kNoNode : g.value(n.inputs[0]).producer;
      std::optional<GeluMatch> m;
      if (div != ir::kNoNode)
        m = matchGelu(g, g.nodes[size_t(div)].inputs.empty() ? ir::kNoValue : g.nodes[size_t(div)].inputs[0]);
      if (!m || &g.nodes[size_t(m->erf)] != &n) return noBool(why, "Erf outside a Gelu pattern");
      return true;
    }
    case OpClass::kBinary:
      return decodeBinary(g, n, why).has_value();
    case OpClass::kSoftmax:
      return decodeSoftmax(g, n, why).has_value();
    case OpClass::kLayerNorm:
      return decodeLayerNorm(g, n, why).has_value();
    case OpClass::kBatchNorm:
      return decodeBatchNorm(g, n, why).has_value();
    case OpClass::kConcat:
      return decodeConcat(g, n, why).has_value();
    case OpClass::kPrelu:
      return decodePrelu(g, n, why);
    case OpClass::kMove:
      return decodeMove(g, n, why).has_value();
    case OpClass::kReduce:
      return decodeReduce(g, n, why).has_value();
    case OpClass::kResample:
      return decodeResize(g, n, why).has_value();
    case OpClass::kRecurrent:
      return decodeRecurrent(g, n, why).has_value();
    case OpClass::kView: {
      // A view alone is a copy; it is worth taking only next to a computation that
      // oneDNN runs (then it costs nothing inside the region).
      if (!decodeView(g, n, why)) return false;
      ir::NodeId p = g.value(n.inputs[0]).producer;
      if (p == ir::kNoNode || depth > 8 || !supportsAt(g, g.nodes[size_t(p)], nullptr, depth + 1))
        return noBool(why, "a view whose input does not come from a oneDNN op");
      return true;
    }
  }
  return false;
}

}  // namespace

bool supportsNode(const ir::Graph& g, const ir::Node& n, std::string* why) {
  return supportsAt(g, n, why, 0);
}

bool supportsPolymorphicNode(const ir::Graph& g, const ir::Graph& rep, ir::NodeId node, std::string* why) {
  const ir::Node& n = g.nodes[size_t(node)];
  if (!n.hasInput(0)) return noBool(why, "input 0 missing");
  // int8 steps are lowered for fixed shapes only.
  // int8 values are lowered for fixed shapes only (a quantize-dequantize pair is float).
  const ir::DType in = g.typeOf(n.inputs[0]).dtype;
  const bool standalone_quantize = n.op_type == "QuantizeLinear" && !decodeEltwise(rep, rep.nodes[size_t(node)], nullptr);
  bool paired_dequantize = false;
  if (n.op_type == "DequantizeLinear" && g.value(n.inputs[0]).producer != ir::kNoNode) {
    const ir::NodeId producer = rep.value(n.inputs[0]).producer;
    std::optional<FakeQuantMatch> m = matchFakeQuant(rep, producer);
    std::optional<DynamicQuantizeMatch> d = matchDynamicQuantize(rep, producer, nullptr);
    paired_dequantize = (m && m->dequantize == node) || (d && d->dequantize == node);
  }
  if (((in == ir::DType::kUInt8 || in == ir::DType::kInt8) && !paired_dequantize) || standalone_quantize)
    return noBool(why, "int8 values are taken at fixed shapes only");
  for (const auto& [name, a] : n.attrs.all())
    if (a.kind == ir::Attribute::Kind::kTensor) return noBool(why, "a tensor attribute with symbolic dims");
  // Channels, reduction and normalized dims need not be known here: the constant
  // weights, statistics or scales fix them, and the host's inference checks the inputs
  // against them at every run-time shape. A MatMul of two computed operands (attention's
  // scores and context) is lowered again at each run-time shape like the rest, with its
  // batch dims broadcast as they are then.
  if (classify(n) == OpClass::kMatMul && !n.hasInput(1)) return noBool(why, "a second operand missing");
  return supportsNode(rep, rep.nodes[size_t(node)], why);
}

}  // namespace partita::dnnl_backend
