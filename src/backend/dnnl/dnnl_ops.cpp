#include "backend/dnnl/dnnl_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/graph_constants.h"
#include "kernels/nn_window.h"
#include "kernels/op_util.h"
#include "kernels/shape_common.h"
#include "kernels/shape_slice.h"
#include "partita/error.h"

namespace partita::dnnl_backend {

namespace {

using backend::constantOf;
using backend::constantScalar;
using backend::isConstant;
using dnnl::algorithm;

constexpr size_t kMaxRank = DNNL_MAX_NDIMS;

std::nullopt_t no(std::string* why, const std::string& msg) {
  if (why) *why = msg;
  return std::nullopt;
}
bool noBool(std::string* why, const std::string& msg) {
  if (why) *why = msg;
  return false;
}

const ir::TensorType& typeOf(const ir::Graph& g, ir::ValueId v) { return g.typeOf(v); }

// A statically shaped float32 tensor of rank <= 12 with at least one element.
bool isDenseF32(const ir::Graph& g, ir::ValueId v, std::string* why, const char* what) {
  const ir::TensorType& t = typeOf(g, v);
  if (t.dtype != ir::DType::kFloat32) return noBool(why, std::string(what) + " is not float32");
  if (!t.isStatic()) return noBool(why, std::string(what) + " has no static shape");
  if (t.rank() > kMaxRank) return noBool(why, std::string(what) + " has rank above 12");
  if (t.numel() <= 0) return noBool(why, std::string(what) + " is empty");
  return true;
}

std::vector<int64_t> shapeOf(const ir::Graph& g, ir::ValueId v) { return typeOf(g, v).staticShape(); }

// Only output 0 is produced; any other output must be omitted.
bool onlyFirstOutput(const ir::Node& n, std::string* why) {
  if (n.outputs.empty() || n.outputs[0] == ir::kNoValue) return noBool(why, "no output");
  for (size_t i = 1; i < n.outputs.size(); ++i)
    if (n.outputs[i] != ir::kNoValue) return noBool(why, "optional output " + std::to_string(i) + " is used");
  return true;
}

// Input 0 and output 0 dense float32, other outputs omitted.
bool unaryShape(const ir::Graph& g, const ir::Node& n, std::string* why) {
  if (!n.hasInput(0)) return noBool(why, "input 0 missing");
  return onlyFirstOutput(n, why) && isDenseF32(g, n.inputs[0], why, "input") &&
         isDenseF32(g, n.outputs[0], why, "output");
}

// Runs one of the host's readers of ONNX semantics (kernels/nn_window.h,
// kernels/shape_slice.h, kernels::normalizeAxis), which throw on a node the host
// refuses: nullopt then, with the host's message in `why`. The host's inference has
// read the same node before, so in a compiled graph this is a safety net.
template <typename F>
auto hostOr(std::string* why, F&& f) -> std::optional<decltype(f())> {
  try {
    return f();
  } catch (const Error& e) {
    return no(why, e.what());
  }
}

// What the host's templated readers call to refuse a node (the `fail` of their
// InferContext or KernelContext): an Error naming the node, which hostOr catches.
struct NodeRefusal {
  const ir::Node& node;
  [[noreturn]] void fail(const std::string& msg) const { kernels::failNode(node, msg); }
};

// `axis` (negative counts from the back) in [0, rank), as the host normalises it.
std::optional<int64_t> normalizedAxis(int64_t axis, int64_t rank, std::string* why) {
  return hostOr(why, [&] { return kernels::normalizeAxis(axis, rank, "axis"); });
}

// Resolves the padding of a forward (Conv, pooling) window for input sizes `in` as
// the host does, and checks that the host's output sizes are `out` (the node's type).
bool resolveForwardWindow(const ir::Node& n, kernels::Window& w, const std::vector<int64_t>& in,
                          const std::vector<int64_t>& out, std::string* why) {
  auto host_out = hostOr(why, [&] { return kernels::resolveWindow(n, w, in); });
  if (!host_out) return false;
  if (*host_out != out) return noBool(why, "output size does not match the window");
  return true;
}

// The end pads to give oneDNN for a resolved forward window. oneDNN has no ceil_mode:
// it produces floor((in + pad_l + pad_r - ek) / s) + 1 outputs. Where the host's
// ceil_mode gives one more (a last window that starts inside the input and runs past
// the end padding), the end is padded by the overrun so oneDNN's formula yields the
// same size; `extended` says whether any axis needed that.
std::vector<int64_t> oneDnnEndPads(const kernels::Window& w, const std::vector<int64_t>& in,
                                   const std::vector<int64_t>& out, bool& extended) {
  std::vector<int64_t> pad_r = w.pad_end;
  extended = false;
  for (size_t i = 0; i < in.size(); ++i) {
    const int64_t overrun =
        (out[i] - 1) * w.strides[i] + w.effectiveKernel(i) - (in[i] + w.pad_begin[i] + w.pad_end[i]);
    if (overrun <= 0) continue;
    pad_r[i] += overrun;
    extended = true;
  }
  return pad_r;
}

std::vector<int64_t> dnnlDilates(const std::vector<int64_t>& d) {
  std::vector<int64_t> out;
  for (int64_t x : d) out.push_back(x - 1);
  return out;
}

}  // namespace

std::vector<int64_t> padLeft(const std::vector<int64_t>& shape, size_t rank) {
  std::vector<int64_t> out(rank > shape.size() ? rank - shape.size() : 0, 1);
  out.insert(out.end(), shape.begin(), shape.end());
  return out;
}

OpClass classify(const ir::Node& n) {
  if (!n.domain.empty() && n.domain != "ai.onnx") return OpClass::kNone;
  const std::string& op = n.op_type;
  if (op == "Conv" || op == "ConvTranspose") return OpClass::kConv;
  if (op == "MaxPool" || op == "AveragePool" || op == "GlobalAveragePool" || op == "GlobalMaxPool")
    return OpClass::kPool;
  if (op == "MatMul" || op == "Gemm") return OpClass::kMatMul;
  if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Max" || op == "Min")
    return OpClass::kBinary;
  if (op == "Softmax" || op == "LogSoftmax") return OpClass::kSoftmax;
  if (op == "LayerNormalization") return OpClass::kLayerNorm;
  if (op == "BatchNormalization") return OpClass::kBatchNorm;
  if (op == "Concat") return OpClass::kConcat;
  if (op == "PRelu") return OpClass::kPrelu;
  if (op == "Transpose" || op == "Slice") return OpClass::kMove;
  if (op == "ReduceMean" || op == "ReduceSum" || op == "ReduceMax" || op == "ReduceMin" ||
      op == "ReduceProd" || op == "ReduceL1" || op == "ReduceL2" || op == "ReduceSumSquare")
    return OpClass::kReduce;
  if (op == "Flatten" || op == "Reshape" || op == "Squeeze" || op == "Unsqueeze" || op == "Identity" ||
      op == "Dropout")
    return OpClass::kView;
  if (op == "Erf") return OpClass::kEltwise;  // only inside a Gelu (matchGelu)
  static const char* const kEltwise[] = {"Relu",      "LeakyRelu", "Elu",   "Selu", "Sigmoid", "HardSigmoid",
                                         "HardSwish", "Tanh",      "Abs",   "Sqrt", "Exp",     "Softplus",
                                         "Neg",       "Clip",      "Round", "Pow"};
  for (const char* e : kEltwise)
    if (op == e) return OpClass::kEltwise;
  return OpClass::kNone;
}

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

bool isScalarNear(const ir::Graph& g, ir::ValueId v, double want) {
  std::optional<float> c = constantScalar(g, v);
  return c && std::abs(double(*c) - want) <= 1e-6 * want;
}

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
        isScalarNear(g, n.inputs[1], 1.4142135623730951)) {
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

std::optional<std::vector<EltwiseOp>> decodeEltwise(const ir::Graph& g, const ir::Node& n, std::string* why) {
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

std::optional<ConvSpec> decodeConv(const ir::Graph& g, const ir::Node& n, std::string* why) {
  ConvSpec s;
  s.transposed = n.op_type == "ConvTranspose";
  if (!onlyFirstOutput(n, why) || !n.hasInput(0) || !n.hasInput(1) || n.inputs.size() > 3)
    return no(why, "bad inputs");
  if (!isDenseF32(g, n.inputs[0], why, "input") || !isDenseF32(g, n.outputs[0], why, "output"))
    return std::nullopt;
  if (!isConstant(g, n.inputs[1]) || !isDenseF32(g, n.inputs[1], why, "weights"))
    return no(why, "weights are not a float32 constant");
  s.has_bias = n.hasInput(2);
  if (s.has_bias && (!isConstant(g, n.inputs[2]) || !isDenseF32(g, n.inputs[2], why, "bias")))
    return no(why, "bias is not a float32 constant");
  if (!constantOf(g, n.inputs[1]).layout.empty())
    return no(why, "weights have a packed layout");
  s.in_shape = shapeOf(g, n.inputs[0]);
  s.weight_shape = shapeOf(g, n.inputs[1]);
  s.out_shape = shapeOf(g, n.outputs[0]);
  const size_t rank = s.in_shape.size();
  if (rank < 3 || rank > 5) return no(why, "only 1-D, 2-D and 3-D convolutions");
  if (s.weight_shape.size() != rank || s.out_shape.size() != rank) return no(why, "rank mismatch");
  const size_t sp = rank - 2;
  s.groups = n.attrs.getInt("group", 1);
  if (s.groups < 1) return no(why, "bad group");
  std::vector<int64_t> wk(s.weight_shape.begin() + 2, s.weight_shape.end());
  auto w = hostOr(why, [&] { return kernels::readWindow(n, sp, wk); });
  if (!w) return std::nullopt;
  if (w->kernel != wk) return no(why, "kernel_shape disagrees with the weights");
  int64_t c_in = s.in_shape[1], c_out = s.out_shape[1];
  if (!s.transposed) {
    if (c_in % s.groups || c_out % s.groups || s.weight_shape[1] * s.groups != c_in ||
        s.weight_shape[0] != c_out)
      return no(why, "channel counts do not match the weights and groups");
  } else {
    if (c_in % s.groups || s.weight_shape[0] != c_in || s.weight_shape[1] * s.groups != c_out)
      return no(why, "channel counts do not match the weights and groups");
  }
  if (s.has_bias && shapeOf(g, n.inputs[2]) != std::vector<int64_t>{c_out}) return no(why, "bias shape");
  std::vector<int64_t> in(s.in_shape.begin() + 2, s.in_shape.end()),
      out(s.out_shape.begin() + 2, s.out_shape.end());
  s.strides = w->strides;
  s.dilates = dnnlDilates(w->dilations);
  if (!s.transposed) {
    if (!resolveForwardWindow(n, *w, in, out, why)) return std::nullopt;
    bool extended = false;  // exact either way: a convolution's padding adds zeros
    s.pad_l = w->pad_begin;
    s.pad_r = oneDnnEndPads(*w, in, out, extended);
    return s;
  }
  auto out_pad = hostOr(why, [&] { return kernels::readOutputPadding(n, sp); });
  if (!out_pad) return std::nullopt;
  auto host_out = hostOr(why, [&] { return kernels::resolveTransposedWindow(n, *w, in); });
  if (!host_out) return std::nullopt;
  if (*host_out != out) return no(why, "output size does not match the window");
  s.pad_l = w->pad_begin;
  s.pad_r.assign(sp, 0);
  for (size_t i = 0; i < sp; ++i) {
    if (w->pad_begin[i] < 0 || w->pad_end[i] < 0)
      return no(why, "output_shape larger than the transposed convolution produces");
    // oneDNN's deconvolution produces stride*(in-1) + eff - begin - end; output_padding
    // extends the end, which is exact while it only removes end padding.
    s.pad_r[i] = w->pad_end[i] - (*out_pad)[i];
    if (s.pad_r[i] < 0) return no(why, "output padding beyond the padded end");
  }
  return s;
}

std::optional<PoolSpec> decodePool(const ir::Graph& g, const ir::Node& n, std::string* why) {
  if (!unaryShape(g, n, why)) return std::nullopt;
  std::vector<int64_t> x = shapeOf(g, n.inputs[0]), y = shapeOf(g, n.outputs[0]);
  if (x.size() < 3 || x.size() > 5 || y.size() != x.size()) return no(why, "only 1-D, 2-D and 3-D pooling");
  const size_t sp = x.size() - 2;
  std::vector<int64_t> in(x.begin() + 2, x.end()), out(y.begin() + 2, y.end());
  PoolSpec s;
  const std::string& op = n.op_type;
  if (op == "GlobalAveragePool" || op == "GlobalMaxPool") {
    s.alg = op == "GlobalMaxPool" ? algorithm::pooling_max : algorithm::pooling_avg_exclude_padding;
    s.kernel = in;
    s.strides.assign(sp, 1);
    s.dilates.assign(sp, 0);
    s.pad_l.assign(sp, 0);
    s.pad_r.assign(sp, 0);
    for (int64_t d : out)
      if (d != 1) return no(why, "global pooling output is not 1");
    return s;
  }
  if (!n.attrs.has("kernel_shape")) return no(why, "kernel_shape missing");
  auto w = hostOr(why, [&] { return kernels::readWindow(n, sp, {}); });
  if (!w || !resolveForwardWindow(n, *w, in, out, why)) return std::nullopt;
  bool include_pad = false;
  if (op == "MaxPool") {
    s.alg = algorithm::pooling_max;
  } else {
    include_pad = n.attrs.getInt("count_include_pad", 0) != 0;
    s.alg = include_pad ? algorithm::pooling_avg_include_padding : algorithm::pooling_avg_exclude_padding;
  }
  s.kernel = w->kernel;
  s.strides = w->strides;
  s.dilates = dnnlDilates(w->dilations);
  s.pad_l = w->pad_begin;
  bool extended = false;
  s.pad_r = oneDnnEndPads(*w, in, out, extended);
  // The extra end padding is exact only where padding is not counted.
  if (extended && include_pad) return no(why, "ceil_mode average pooling that counts pads");
  return s;
}

std::optional<MatMulSpec> decodeMatMul(const ir::Graph& g, const ir::Node& n, std::string* why) {
  MatMulSpec s;
  s.is_gemm = n.op_type == "Gemm";
  if (!onlyFirstOutput(n, why) || !n.hasInput(0) || !n.hasInput(1)) return no(why, "bad inputs");
  if (!isDenseF32(g, n.inputs[0], why, "A") || !isDenseF32(g, n.inputs[1], why, "B") ||
      !isDenseF32(g, n.outputs[0], why, "output"))
    return std::nullopt;
  for (size_t i = 0; i < 2; ++i)
    if (isConstant(g, n.inputs[i]) && !constantOf(g, n.inputs[i]).layout.empty())
      return no(why, "operand has a packed layout");
  std::vector<int64_t> a = shapeOf(g, n.inputs[0]), b = shapeOf(g, n.inputs[1]), y = shapeOf(g, n.outputs[0]);
  if (s.is_gemm) {
    if (n.inputs.size() > 3) return no(why, "bad inputs");
    if (a.size() != 2 || b.size() != 2) return no(why, "Gemm operands must be 2-D");
    s.trans_a = n.attrs.getInt("transA", 0) != 0;
    s.trans_b = n.attrs.getInt("transB", 0) != 0;
    s.alpha = n.attrs.getFloat("alpha", 1.0f);
    s.beta = n.attrs.getFloat("beta", 1.0f);
    int64_t m = s.trans_a ? a[1] : a[0], k = s.trans_a ? a[0] : a[1];
    int64_t kb = s.trans_b ? b[1] : b[0], nn = s.trans_b ? b[0] : b[1];
    if (k != kb || y != std::vector<int64_t>{m, nn}) return no(why, "Gemm shapes do not agree");
    s.a_dims = {m, k};
    s.b_dims = {k, nn};
    s.dst_dims = {m, nn};
    if (s.alpha != 1.0f && !isConstant(g, n.inputs[1])) return no(why, "Gemm alpha with a non-constant B");
    if (n.hasInput(2)) {
      ir::ValueId c = n.inputs[2];
      if (!isDenseF32(g, c, why, "C")) return std::nullopt;
      std::vector<int64_t> cs = shapeOf(g, c);
      if (!ir::broadcastsInto(cs, y)) return no(why, "C does not broadcast to the output");
      if (isConstant(g, c) && !constantOf(g, c).layout.empty())
        return no(why, "C has a packed layout");
      if (!isConstant(g, c) && padLeft(cs, 2) != y && s.beta != 1.0f)
        return no(why, "non-constant broadcast C with beta != 1");
    }
    return s;
  }
  if (n.inputs.size() != 2) return no(why, "bad inputs");
  // numpy matmul: 1-D operands get a unit dimension that the output drops.
  std::vector<int64_t> a2 = a.size() == 1 ? std::vector<int64_t>{1, a[0]} : a;
  std::vector<int64_t> b2 = b.size() == 1 ? std::vector<int64_t>{b[0], 1} : b;
  size_t rank = std::max(a2.size(), b2.size());
  if (rank > kMaxRank) return no(why, "rank above 12");
  a2 = padLeft(a2, rank);
  b2 = padLeft(b2, rank);
  if (a2[rank - 1] != b2[rank - 2]) return no(why, "MatMul inner dimensions differ");
  std::vector<int64_t> d(rank);
  for (size_t i = 0; i + 2 < rank; ++i) {
    if (a2[i] != b2[i] && a2[i] != 1 && b2[i] != 1) return no(why, "batch dimensions do not broadcast");
    d[i] = std::max(a2[i], b2[i]);
  }
  d[rank - 2] = a2[rank - 2];
  d[rank - 1] = b2[rank - 1];
  if (ir::shapeNumel(d) != ir::shapeNumel(y)) return no(why, "output shape");
  s.a_dims = a2;
  s.b_dims = b2;
  s.dst_dims = d;
  return s;
}

std::optional<SoftmaxSpec> decodeSoftmax(const ir::Graph& g, const ir::Node& n, std::string* why) {
  if (!unaryShape(g, n, why)) return std::nullopt;
  SoftmaxSpec s;
  s.log = n.op_type == "LogSoftmax";
  std::vector<int64_t> x = shapeOf(g, n.inputs[0]);
  int64_t rank = int64_t(x.size());
  if (rank == 0) return no(why, "scalar input");
  std::optional<int64_t> axis = normalizedAxis(n.attrs.getInt("axis", n.opset < 13 ? 1 : -1), rank, why);
  if (!axis) return std::nullopt;
  if (n.opset < 13) {
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < rank; ++i) (i < *axis ? outer : inner) *= x[size_t(i)];
    s.dims = {outer, inner};
    s.axis = 1;
  } else {
    s.dims = x;
    s.axis = *axis;
  }
  return s;
}

std::optional<NormSpec> decodeLayerNorm(const ir::Graph& g, const ir::Node& n, std::string* why) {
  if (!onlyFirstOutput(n, why)) return std::nullopt;
  if (!n.hasInput(0) || !n.hasInput(1) || n.inputs.size() > 3) return no(why, "bad inputs");
  if (!isDenseF32(g, n.inputs[0], why, "input") || !isDenseF32(g, n.outputs[0], why, "output"))
    return std::nullopt;
  std::vector<int64_t> x = shapeOf(g, n.inputs[0]);
  int64_t rank = int64_t(x.size());
  std::optional<int64_t> axis = normalizedAxis(n.attrs.getInt("axis", -1), rank, why);
  if (!axis) return std::nullopt;
  if (n.attrs.getInt("stash_type", 1) != 1) return no(why, "stash_type other than float");
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < rank; ++i) (i < *axis ? outer : inner) *= x[size_t(i)];
  for (size_t i = 1; i < n.inputs.size(); ++i) {
    if (!n.hasInput(i)) continue;
    if (!isConstant(g, n.inputs[i]) || !isDenseF32(g, n.inputs[i], why, "scale/bias"))
      return no(why, "scale and bias must be float32 constants");
    if (ir::shapeNumel(shapeOf(g, n.inputs[i])) != inner)
      return no(why, "scale/bias broadcast over the normalized dims");
    if (!constantOf(g, n.inputs[i]).layout.empty()) return no(why, "packed layout");
  }
  NormSpec s;
  s.epsilon = n.attrs.getFloat("epsilon", 1e-5f);
  s.dims = {outer, inner};
  return s;
}

std::optional<NormSpec> decodeBatchNorm(const ir::Graph& g, const ir::Node& n, std::string* why) {
  if (!onlyFirstOutput(n, why) || n.inputs.size() != 5) return no(why, "bad inputs or training outputs");
  if (!isDenseF32(g, n.inputs[0], why, "input") || !isDenseF32(g, n.outputs[0], why, "output"))
    return std::nullopt;
  if (n.attrs.getInt("training_mode", 0) != 0) return no(why, "training mode");
  if (n.opset < 9 && n.attrs.getInt("spatial", 1) != 1) return no(why, "spatial=0");
  std::vector<int64_t> x = shapeOf(g, n.inputs[0]);
  if (x.size() < 2 || x.size() > 5) return no(why, "rank");
  for (size_t i = 1; i < 5; ++i) {
    if (!n.hasInput(i) || !isConstant(g, n.inputs[i]) || !isDenseF32(g, n.inputs[i], why, "parameter"))
      return no(why, "parameters must be float32 constants");
    if (shapeOf(g, n.inputs[i]) != std::vector<int64_t>{x[1]}) return no(why, "parameter shape");
    if (!constantOf(g, n.inputs[i]).layout.empty()) return no(why, "packed layout");
  }
  NormSpec s;
  s.epsilon = n.attrs.getFloat("epsilon", 1e-5f);
  s.dims = x;
  return s;
}

std::optional<int64_t> decodeConcat(const ir::Graph& g, const ir::Node& n, std::string* why) {
  if (!onlyFirstOutput(n, why) || n.inputs.size() < 2) return no(why, "fewer than two inputs");
  if (!isDenseF32(g, n.outputs[0], why, "output")) return std::nullopt;
  std::vector<int64_t> y = shapeOf(g, n.outputs[0]);
  int64_t rank = int64_t(y.size());
  if (rank < 1) return no(why, "scalar");
  std::optional<int64_t> axis = normalizedAxis(n.attrs.getInt("axis", rank == 1 ? 0 : 1), rank, why);
  if (!axis) return std::nullopt;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    if (!n.hasInput(i) || !isDenseF32(g, n.inputs[i], why, "input"))
      return no(why, "inputs must be non-empty float32");
    if (shapeOf(g, n.inputs[i]).size() != size_t(rank)) return no(why, "rank mismatch");
    if (isConstant(g, n.inputs[i]) && !constantOf(g, n.inputs[i]).layout.empty())
      return no(why, "packed layout");
  }
  return axis;
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

bool decodeView(const ir::Graph& g, const ir::Node& n, std::string* why) {
  if (!unaryShape(g, n, why)) return false;
  if (ir::shapeNumel(shapeOf(g, n.inputs[0])) != ir::shapeNumel(shapeOf(g, n.outputs[0])))
    return noBool(why, "element count changes");
  const std::string& op = n.op_type;
  if (op == "Dropout") {
    // Inference: an identity unless training_mode is a constant true.
    if (n.attrs.getInt("is_test", 1) == 0 && n.opset < 7) return noBool(why, "training Dropout");
    if (n.hasInput(2)) {
      ir::ValueId t = n.inputs[2];
      if (!isConstant(g, t)) return noBool(why, "training_mode not constant");
      const ir::Constant& c = constantOf(g, t);
      if (c.nbytes() < 1 || c.bytes.data[0] != std::byte{0}) return noBool(why, "training Dropout");
    }
    return true;
  }
  // Shape / axes operands must be constants: their value is already in the output type.
  for (size_t i = 1; i < n.inputs.size(); ++i)
    if (n.hasInput(i) && !isConstant(g, n.inputs[i])) return noBool(why, "non-constant shape operand");
  return true;
}

namespace {

// A constant int32/int64 tensor's values (Slice's starts, ReduceSum's axes), read as
// the host reads them.
std::optional<std::vector<int64_t>> constantInts(const ir::Graph& g, ir::ValueId v) {
  if (!isConstant(g, v)) return std::nullopt;
  const ir::Constant& c = constantOf(g, v);
  if (!c.layout.empty() || (c.dtype != ir::DType::kInt64 && c.dtype != ir::DType::kInt32)) return std::nullopt;
  return kernels::readInts(c.view());
}

}  // namespace

std::optional<MoveSpec> decodeMove(const ir::Graph& g, const ir::Node& n, std::string* why) {
  if (!onlyFirstOutput(n, why) || !n.hasInput(0)) return no(why, "bad inputs");
  if (!isDenseF32(g, n.inputs[0], why, "input") || !isDenseF32(g, n.outputs[0], why, "output"))
    return std::nullopt;
  std::vector<int64_t> x = shapeOf(g, n.inputs[0]), y = shapeOf(g, n.outputs[0]);
  const size_t rank = x.size();
  if (rank == 0 || y.size() != rank) return no(why, "rank");
  std::vector<int64_t> in_strides = kernels::stridesOf(x);
  MoveSpec s;
  s.dims = y;
  if (n.op_type == "Transpose") {
    if (n.inputs.size() != 1) return no(why, "bad inputs");
    std::vector<int64_t> perm = kernels::shape::transposePerm(n.attrs, rank);
    if (perm.size() != rank) return no(why, "perm rank");
    std::vector<bool> seen(rank, false);
    for (size_t i = 0; i < rank; ++i) {
      if (perm[i] < 0 || perm[i] >= int64_t(rank) || seen[size_t(perm[i])]) return no(why, "bad perm");
      seen[size_t(perm[i])] = true;
      if (y[i] != x[size_t(perm[i])]) return no(why, "output shape");
      s.strides.push_back(in_strides[size_t(perm[i])]);
    }
    return s;
  }
  // Slice: unit steps only, so the output is a window of the input.
  std::optional<kernels::shape::SliceParams> params = kernels::shape::readSliceParams(
      n, [&](size_t i) { return constantInts(g, n.inputs[i]); });
  if (!params) return no(why, "non-constant slice parameters");
  auto plan = hostOr(why, [&] { return kernels::shape::planSlice(NodeRefusal{n}, *params, x); });
  if (!plan) return std::nullopt;
  for (size_t i = 0; i < rank; ++i) {
    if ((*plan)[i].step != 1) return no(why, "slice step other than 1");
    if ((*plan)[i].len != y[i]) return no(why, "output shape");
    s.offset += (*plan)[i].start * in_strides[i];
  }
  s.strides = in_strides;
  return s;
}

std::optional<ReduceSpec> decodeReduce(const ir::Graph& g, const ir::Node& n, std::string* why) {
  if (!onlyFirstOutput(n, why) || !n.hasInput(0)) return no(why, "bad inputs");
  if (!isDenseF32(g, n.inputs[0], why, "input") || !isDenseF32(g, n.outputs[0], why, "output"))
    return std::nullopt;
  const std::string& op = n.op_type;
  ReduceSpec s;
  if (op == "ReduceMean") s.alg = algorithm::reduction_mean;
  if (op == "ReduceSum") s.alg = algorithm::reduction_sum;
  if (op == "ReduceMax") s.alg = algorithm::reduction_max;
  if (op == "ReduceMin") s.alg = algorithm::reduction_min;
  if (op == "ReduceProd") s.alg = algorithm::reduction_mul;
  if (op == "ReduceL1" || op == "ReduceL2") s.alg = algorithm::reduction_norm_lp_sum;
  if (op == "ReduceSumSquare") s.alg = algorithm::reduction_norm_lp_power_p_sum;
  s.p = op == "ReduceL1" ? 1.0f : 2.0f;
  std::vector<int64_t> x = shapeOf(g, n.inputs[0]);
  const int64_t rank = int64_t(x.size());
  std::vector<int64_t> axes;
  if (op == "ReduceSum" && n.opset >= 13) {
    if (n.hasInput(1)) {
      auto a = constantInts(g, n.inputs[1]);
      if (!a) return no(why, "non-constant axes");
      axes = *a;
    }
    if (axes.empty() && n.attrs.getInt("noop_with_empty_axes", 0) != 0)
      return no(why, "noop_with_empty_axes");
  } else {
    if (n.inputs.size() > 1) return no(why, "bad inputs");
    axes = n.attrs.getInts("axes", {});
  }
  std::vector<bool> reduced(size_t(rank), axes.empty());
  for (int64_t a : axes) {
    std::optional<int64_t> axis = normalizedAxis(a, rank, why);
    if (!axis) return std::nullopt;
    reduced[size_t(*axis)] = true;
  }
  s.src_dims = x.empty() ? std::vector<int64_t>{1} : x;
  s.dst_dims = s.src_dims;
  for (size_t i = 0; i < x.size(); ++i)
    if (reduced[i]) s.dst_dims[i] = 1;
  if (s.src_dims == s.dst_dims) return no(why, "nothing to reduce");
  if (ir::shapeNumel(s.dst_dims) != ir::shapeNumel(shapeOf(g, n.outputs[0]))) return no(why, "output shape");
  return s;
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
    case OpClass::kPool:
      return decodePool(g, n, why).has_value();
    case OpClass::kMatMul:
      return decodeMatMul(g, n, why).has_value();
    case OpClass::kEltwise: {
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

}  // namespace partita::dnnl_backend
