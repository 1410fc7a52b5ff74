#include "backend/ewise/ewise_backend.h"

#include <limits>
#include <map>
#include <optional>

#include "backend/constant_uses.h"
#include "backend/ewise/ewise_program.h"
#include "backend/graph_constants.h"
#include "ir/type.h"
#include "partita/error.h"

namespace partita::backend {

namespace {

using ewise::Op;

struct OpInfo {
  Op op;
  float alpha, beta;  // defaults of the op's attributes
};

// ONNX op type -> instruction. Max and Min take exactly two inputs here.
const std::map<std::string, OpInfo>& opTable() {
  static const std::map<std::string, OpInfo> table = {
      {"Add", {Op::kAdd, 0, 0}},
      {"Sub", {Op::kSub, 0, 0}},
      {"Mul", {Op::kMul, 0, 0}},
      {"Div", {Op::kDiv, 0, 0}},
      {"Max", {Op::kMax, 0, 0}},
      {"Min", {Op::kMin, 0, 0}},
      {"Relu", {Op::kRelu, 0, 0}},
      {"LeakyRelu", {Op::kLeakyRelu, 0.01f, 0}},
      {"ThresholdedRelu", {Op::kThresholdedRelu, 1.0f, 0}},
      {"Elu", {Op::kElu, 1.0f, 0}},
      {"Selu", {Op::kSelu, 1.67326319217681884765625f, 1.05070102214813232421875f}},
      {"Celu", {Op::kCelu, 1.0f, 0}},
      {"Sigmoid", {Op::kSigmoid, 0, 0}},
      {"HardSigmoid", {Op::kHardSigmoid, 0.2f, 0.5f}},
      {"HardSwish", {Op::kHardSwish, 0, 0}},
      {"Softplus", {Op::kSoftplus, 0, 0}},
      {"Softsign", {Op::kSoftsign, 0, 0}},
      {"Tanh", {Op::kTanh, 0, 0}},
      {"Exp", {Op::kExp, 0, 0}},
      {"Log", {Op::kLog, 0, 0}},
      {"Sqrt", {Op::kSqrt, 0, 0}},
      {"Neg", {Op::kNeg, 0, 0}},
      {"Abs", {Op::kAbs, 0, 0}},
      {"Reciprocal", {Op::kReciprocal, 0, 0}},
      {"Erf", {Op::kErf, 0, 0}},
      {"Floor", {Op::kFloor, 0, 0}},
      {"Ceil", {Op::kCeil, 0, 0}},
      {"Round", {Op::kRound, 0, 0}},
      {"Clip", {Op::kClip, std::numeric_limits<float>::lowest(), std::numeric_limits<float>::max()}},
  };
  return table;
}

// The node's Clip bounds, or nullopt when they are not compile-time scalars.
std::optional<std::pair<float, float>> clipBounds(const ir::Graph& g, const ir::Node& n) {
  float lo = std::numeric_limits<float>::lowest(), hi = std::numeric_limits<float>::max();
  if (n.opset < 11) {
    if (n.attrs.has("min")) lo = n.attrs.getFloat("min", lo);
    if (n.attrs.has("max")) hi = n.attrs.getFloat("max", hi);
    return std::pair(lo, hi);
  }
  for (size_t i = 1; i < n.inputs.size(); ++i) {
    if (n.inputs[i] == ir::kNoValue) continue;
    std::optional<float> v = constantScalar(g, n.inputs[i]);
    if (!v) return std::nullopt;
    (i == 1 ? lo : hi) = *v;
  }
  return std::pair(lo, hi);
}

bool supportsNode(const ir::Graph& g, const ir::Node& n) {
  if (!n.domain.empty() && n.domain != "ai.onnx") return false;
  auto it = opTable().find(n.op_type);
  if (it == opTable().end()) return false;
  const Op op = it->second.op;
  if (n.outputs.size() != 1 || n.outputs[0] == ir::kNoValue) return false;
  const ir::TensorType& out = g.typeOf(n.outputs[0]);
  if (out.dtype != ir::DType::kFloat32 || !out.isStatic() || out.numel() <= 0) return false;
  const std::vector<int64_t> shape = out.staticShape();

  const size_t operands = ewise::isBinary(op) ? 2 : 1;
  if (op == Op::kClip) {
    if (n.inputs.size() > 3 || !clipBounds(g, n)) return false;
  } else if (n.inputs.size() != operands) {
    return false;
  }
  bool reads_value = false;
  for (size_t i = 0; i < operands; ++i) {
    ir::ValueId v = n.inputs[i];
    if (v == ir::kNoValue) return false;
    const ir::TensorType& t = g.typeOf(v);
    if (t.dtype != ir::DType::kFloat32 || !t.isStatic()) return false;
    if (isConstant(g, v)) {
      // A constant operand broadcasts into the output (the host reads it the same way).
      if (!constantOf(g, v).layout.empty() || !ir::broadcastsInto(t.staticShape(), shape)) return false;
    } else {
      // Every value a region streams has the region's one shape.
      if (t.staticShape() != shape) return false;
      reads_value = true;
    }
  }
  return reads_value;
}

// The shape of a function as the blob stores it: kRunTimeDim where `t` has a dim that
// is not known.
std::vector<int64_t> functionShape(const ir::TensorType& t) {
  std::vector<int64_t> shape;
  for (const ir::Dim& d : t.dims) shape.push_back(d.isKnown() ? d.value : ewise::kRunTimeDim);
  return shape;
}

// Whether two values are sure to have one shape whatever the inputs' shapes: each dim
// known and equal, or the same named symbol; `anonymous` also accepts two unnamed
// unknown dims (inference copies them along a chain, e.g. from a unary op's input to
// its output).
bool sameShape(const ir::TensorType& a, const ir::TensorType& b, bool anonymous) {
  if (!a.has_rank || !b.has_rank || a.rank() != b.rank()) return false;
  for (size_t d = 0; d < a.rank(); ++d) {
    const ir::Dim &x = a.dims[d], &y = b.dims[d];
    if (x.isKnown() != y.isKnown()) return false;
    if (x.isKnown() ? x.value != y.value : (x.symbol != y.symbol || (x.symbol.empty() && !anonymous)))
      return false;
  }
  return true;
}

// A node some of whose values have symbolic dims: the static rules where they can be
// checked, and what must hold at every run-time shape. A non-constant operand has the
// output's dims exactly (two run-time operands: known or the same named symbol, so that
// they cannot broadcast at run time), and a constant broadcasts into them with a 1
// wherever the output's dim is symbolic.
bool supportsPolymorphicNode(const ir::Graph& g, const ir::Graph& rep, const ir::Node& n) {
  if (!n.domain.empty() && n.domain != "ai.onnx") return false;
  auto it = opTable().find(n.op_type);
  if (it == opTable().end()) return false;
  const Op op = it->second.op;
  if (n.outputs.size() != 1 || n.outputs[0] == ir::kNoValue) return false;
  const ir::TensorType& out = g.typeOf(n.outputs[0]);
  if (out.dtype != ir::DType::kFloat32 || !out.has_rank || rep.typeOf(n.outputs[0]).numel() <= 0) return false;
  const size_t operands = ewise::isBinary(op) ? 2 : 1;
  if (op == Op::kClip) {
    if (n.inputs.size() > 3 || !clipBounds(g, n)) return false;
  } else if (n.inputs.size() != operands) {
    return false;
  }
  size_t values = 0;
  for (size_t i = 0; i < operands; ++i) values += n.inputs[i] != ir::kNoValue && !isConstant(g, n.inputs[i]);
  bool reads_value = false;
  for (size_t i = 0; i < operands; ++i) {
    ir::ValueId v = n.inputs[i];
    if (v == ir::kNoValue) return false;
    const ir::TensorType& t = g.typeOf(v);
    if (t.dtype != ir::DType::kFloat32) return false;
    if (isConstant(g, v)) {
      const ir::Constant& c = constantOf(g, v);
      if (!c.layout.empty() || c.shape.size() > out.rank()) return false;
      for (size_t d = 0; d < c.shape.size(); ++d) {
        const ir::Dim& o = out.dims[out.rank() - c.shape.size() + d];
        if (c.shape[d] != 1 && (!o.isKnown() || o.value != c.shape[d])) return false;
      }
    } else {
      if (!sameShape(t, out, values == 1)) return false;
      reads_value = true;
    }
  }
  return reads_value;
}

// Builds one module from the regions.
class Compiler {
 public:
  Compiler(const ir::Graph& g, ConstantSink& sink) : g_(g), uses_(sink) {}

  ewise::Function compileRegion(const Region& region) {
    ewise::Function fn;
    const ir::Node& first = g_.nodes[size_t(region.nodes.at(0))];
    const ir::TensorType& type = g_.typeOf(first.outputs[0]);
    fn.shape = functionShape(type);
    std::map<ir::ValueId, uint32_t> reg;
    for (ir::ValueId v : region.inputs) {
      if (!sameShape(g_.typeOf(v), type, true))
        throw Error(ErrorCode::kInternal, "ewise: region input '" + g_.value(v).name + "' has another shape");
      reg[v] = fn.num_registers++;
    }
    fn.num_inputs = fn.num_registers;
    std::map<ir::ConstId, uint32_t> slot_of;
    auto operand = [&](ir::ValueId v) -> ewise::Operand {
      if (!isConstant(g_, v)) {
        auto r = reg.find(v);
        if (r == reg.end()) throw Error(ErrorCode::kInternal, "ewise: value '" + g_.value(v).name + "' has no register");
        return {ewise::OperandKind::kRegister, r->second};
      }
      const ir::ConstId id = g_.value(v).constant;
      auto [it, added] = slot_of.emplace(id, uint32_t(fn.constants.size()));
      if (added) fn.constants.push_back(slot(id, fn.shape));
      return {ewise::OperandKind::kConstant, it->second};
    };

    for (ir::NodeId id : region.nodes) {
      const ir::Node& n = g_.nodes[size_t(id)];
      const OpInfo& info = opTable().at(n.op_type);
      if (!sameShape(g_.typeOf(n.outputs[0]), type, true))
        throw Error(ErrorCode::kInternal, "ewise: node '" + n.name + "' has another shape than its region");
      ewise::Instr in;
      in.op = info.op;
      in.alpha = info.alpha;
      in.beta = info.beta;
      in.a = operand(n.inputs[0]);
      if (ewise::isBinary(in.op)) in.b = operand(n.inputs[1]);
      switch (in.op) {
        case Op::kLeakyRelu:
        case Op::kThresholdedRelu:
        case Op::kElu:
        case Op::kCelu:
          in.alpha = n.attrs.getFloat("alpha", info.alpha);
          break;
        case Op::kSelu:
          in.alpha = n.attrs.getFloat("alpha", info.alpha);
          in.beta = n.attrs.getFloat("gamma", info.beta);
          break;
        case Op::kHardSigmoid:
          in.alpha = n.attrs.getFloat("alpha", info.alpha);
          in.beta = n.attrs.getFloat("beta", info.beta);
          break;
        case Op::kClip: {
          auto bounds = clipBounds(g_, n);
          if (!bounds) throw Error(ErrorCode::kInternal, "ewise: Clip '" + n.name + "' lost its constant bounds");
          std::tie(in.alpha, in.beta) = *bounds;
          // The bounds become immediates of the program: embedded.
          for (size_t i = 1; i < n.inputs.size(); ++i)
            if (n.inputs[i] != ir::kNoValue) uses_.absorb(g_.value(n.inputs[i]).constant);
          break;
        }
        default:
          break;
      }
      in.dst = fn.num_registers++;
      reg[n.outputs[0]] = in.dst;
      fn.code.push_back(in);
    }
    for (ir::ValueId v : region.outputs) fn.outputs.push_back(reg.at(v));
    return fn;
  }

  backend::ModuleImage finish(std::vector<ewise::Function> functions) {
    program_.functions = std::move(functions);
    // The blob's data size is a multiple of the alignment: pad the end too.
    program_.data = uses_.takeEmbedded(/*padded_end=*/true);
    backend::ModuleImage image;
    image.kind = ewise::kModuleKind;
    image.blob = ewise::writeProgram(program_);
    image.uses = uses_.uses();
    return image;
  }

 private:
  ewise::ConstSlot slot(ir::ConstId id, const std::vector<int64_t>& shape) {
    const ir::Constant& c = g_.constants.get(id);
    ewise::ConstSlot s;
    s.id = id;
    s.shape.assign(shape.size() - c.shape.size(), 1);
    s.shape.insert(s.shape.end(), c.shape.begin(), c.shape.end());
    s.embedded = ir::shapeNumel(c.shape) <= ewise::kMaxEmbeddedElements;
    // Embedded once per module however many functions read it; a constant some
    // function borrows is declared a borrow (ConstantUses' policy).
    if (s.embedded)
      s.offset = uses_.embedConstant(c);
    else
      uses_.borrow(id);
    return s;
  }

  const ir::Graph& g_;
  ewise::Program program_;
  ConstantUses uses_;
};

class EwiseBackend final : public Backend {
 public:
  std::string_view name() const override { return "ewise"; }

  bool supports(const ir::Graph& g, ir::NodeId node) const override { return supportsNode(g, g.nodes[size_t(node)]); }

  bool supportsPolymorphic(const ir::Graph& g, const ir::Graph& rep, ir::NodeId node) const override {
    return supportsPolymorphicNode(g, rep, g.nodes[size_t(node)]);
  }

  std::vector<std::string> patterns() const override {
    return {"any chain or tree of Add|Sub|Mul|Div|Max|Min|<activation>|<math function>|Clip over one shape, "
            "with constant operands broadcast into it (one pass over memory)"};
  }

  ModuleImage compile(const ir::Graph& g, const std::vector<Region>& regions, ConstantSink& sink) override {
    Compiler c(g, sink);
    std::vector<ewise::Function> functions;
    for (const Region& r : regions) functions.push_back(c.compileRegion(r));
    return c.finish(std::move(functions));
  }
};

}  // namespace

std::unique_ptr<Backend> makeEwiseBackend() { return std::make_unique<EwiseBackend>(); }

}  // namespace partita::backend
