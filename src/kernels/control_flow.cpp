// Inference of If, Loop and Scan from their subgraphs' recorded types (control_flow.h).
#include "kernels/control_flow.h"

#include <algorithm>

#include "kernels/op_registry.h"
#include "kernels/op_util.h"
#include "partita/error.h"

namespace partita::kernels {

namespace {

[[noreturn]] void fail(const ir::Node& node, const std::string& msg) {
  throw Error(ErrorCode::kInvalidModel, node.op_type + " node '" + node.name + "': " + msg);
}

const ir::Graph& subgraph(const ir::Node& node, const char* attr) {
  const ir::Attribute* a = node.attrs.find(attr);
  if (!a) fail(node, std::string("has no attribute '") + attr + "'");
  if (a->kind != ir::Attribute::Kind::kGraph || !a->graph)
    fail(node, std::string("attribute '") + attr + "' must be a graph");
  return *a->graph;
}

size_t formalInputs(const ir::Graph& g) { return g.inputs.size() - g.captures; }

// A value that must hold exactly one element (a condition, a trip count).
void checkOneElement(const ir::Node& node, const ir::TensorType& t, ir::DType dtype, const std::string& what) {
  if (t.dtype == ir::DType::kUndefined) return;
  if (t.dtype != dtype)
    fail(node, what + " must be " + std::string(ir::dtypeName(dtype)) + " but is " + t.str());
  if (!t.has_rank) return;
  for (const ir::Dim& d : t.dims)
    if (d.isKnown() && d.value != 1)
      fail(node, what + " must be a scalar (one element) but is " + t.str());
}

void checkSameDType(const ir::Node& node, const ir::TensorType& a, const ir::TensorType& b, const std::string& what) {
  if (a.dtype != ir::DType::kUndefined && b.dtype != ir::DType::kUndefined && a.dtype != b.dtype)
    fail(node, what + ": " + a.str() + " and " + b.str() + " differ in element type");
  if (!kindsFit(a, b) && !kindsFit(b, a))
    fail(node, what + ": " + a.kindStr() + " and " + b.kindStr() + " are different kinds of value");
}

// A value of one of Scan's inputs or outputs: Scan carries tensors only.
void checkTensor(const ir::Node& node, const ir::TensorType& t, const std::string& what) {
  if (!t.isTensor()) fail(node, what + " is " + t.kindStr() + "; " + node.op_type + " carries tensors only");
}

ir::TensorType withDType(ir::TensorType t, ir::DType dtype) {
  if (t.dtype == ir::DType::kUndefined) t.dtype = dtype;
  return t;
}

// `t` with a dimension of `size` (kUnknown when < 0) inserted at `axis`.
ir::TensorType insertDim(const ir::Node& node, const ir::TensorType& t, int64_t axis, int64_t size,
                         const std::string& what) {
  if (!t.has_rank) return ir::TensorType::unranked(t.dtype);
  ir::TensorType r = t;
  int64_t a = axis < 0 ? axis + int64_t(t.rank()) + 1 : axis;
  if (a < 0 || a > int64_t(t.rank()))
    fail(node, what + " axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(t.rank() + 1));
  r.dims.insert(r.dims.begin() + a, size >= 0 ? ir::Dim::known(size) : ir::Dim{});
  return r;
}

void inferIf(InferContext& c) {
  const ir::Node& node = c.node;
  const ir::Graph& then_g = subgraph(node, "then_branch");
  const ir::Graph& else_g = subgraph(node, "else_branch");
  if (node.numFormalInputs() != 1) c.fail("takes 1 input (the condition), not " + std::to_string(node.numFormalInputs()));
  if (formalInputs(then_g) != 0 || formalInputs(else_g) != 0) c.fail("branches take no inputs");
  checkOneElement(node, c.input(0), ir::DType::kBool, "the condition");
  checkCaptures(node, c.inputs, then_g, "then_branch");
  checkCaptures(node, c.inputs, else_g, "else_branch");
  if (then_g.outputs.size() != node.outputs.size() || else_g.outputs.size() != node.outputs.size())
    c.fail("has " + std::to_string(node.outputs.size()) + " outputs but its branches make " +
           std::to_string(then_g.outputs.size()) + " (then_branch) and " + std::to_string(else_g.outputs.size()) +
           " (else_branch)");
  const ir::Tensor* cond = c.value(0);
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    const ir::TensorType& t = then_g.typeOf(then_g.outputs[o]);
    const ir::TensorType& e = else_g.typeOf(else_g.outputs[o]);
    if ((t.dtype != ir::DType::kUndefined && e.dtype != ir::DType::kUndefined && t.dtype != e.dtype) ||
        (!kindsFit(t, e) && !kindsFit(e, t)))
      c.fail("output " + std::to_string(o) + " is " + t.str() + " in then_branch but " + e.str() +
             " in else_branch: the branches must make the same element types");
    if (cond && cond->numel() == 1)
      c.outputs[o] = *cond->as<bool>() ? withDType(t, e.dtype) : withDType(e, t.dtype);
    else
      c.outputs[o] = withDType(mergeTypes(t, e), t.dtype == ir::DType::kUndefined ? e.dtype : t.dtype);
  }
}

void inferLoop(InferContext& c) {
  const ir::Node& node = c.node;
  const LoopLayout l = loopLayout(node);
  const ir::Graph& body = *l.body;
  if (c.hasInput(0)) checkOneElement(node, c.input(0), ir::DType::kInt64, "the trip count M");
  if (c.hasInput(1)) checkOneElement(node, c.input(1), ir::DType::kBool, "the condition");
  checkOneElement(node, body.typeOf(body.inputs[0]), ir::DType::kInt64, "body input 0 (the iteration number)");
  checkOneElement(node, body.typeOf(body.inputs[1]), ir::DType::kBool, "body input 1 (the condition)");
  checkOneElement(node, body.typeOf(body.outputs[0]), ir::DType::kBool, "body output 0 (the condition)");
  checkCaptures(node, c.inputs, body, "body");
  for (size_t i = 0; i < l.num_carried; ++i) {
    const ir::TensorType& init = c.input(2 + i);
    const ir::TensorType& in = body.typeOf(body.inputs[2 + i]);
    const ir::TensorType& out = body.typeOf(body.outputs[1 + i]);
    const std::string what = "loop-carried value " + std::to_string(i);
    checkSameDType(node, init, in, what + " (initial value and body input)");
    checkSameDType(node, init, out, what + " (initial value and body output)");
    // The value after 0 iterations is the initial one, after more the body's.
    c.outputs[i] = withDType(mergeTypes(init, out), init.dtype == ir::DType::kUndefined ? out.dtype : init.dtype);
  }
  for (size_t k = 0; k < l.num_scan; ++k) {
    const ir::TensorType& out = body.typeOf(body.outputs[1 + l.num_carried + k]);
    checkTensor(node, out, "scan output " + std::to_string(k));
    c.outputs[l.num_carried + k] = insertDim(node, out, 0, -1, "scan output");
  }
}

void inferScan(InferContext& c) {
  const ir::Node& node = c.node;
  const ScanLayout l = scanLayout(node);
  const ir::Graph& body = *l.body;
  checkCaptures(node, c.inputs, body, "body");
  const size_t lead = l.batched ? 1 : 0;  // a batch dimension before everything (opset 8)
  if (l.batched && c.hasInput(0)) {
    const ir::TensorType& lens = c.input(0);
    if (lens.dtype != ir::DType::kInt32 && lens.dtype != ir::DType::kInt64)
      c.fail("sequence_lens must be an int32/int64 tensor but is " + lens.str());
  }
  // The batch size (opset 8) and the sequence length, where the inputs say.
  int64_t batch = -1, seq = -1;
  for (size_t i = 0; i < l.first_state + l.num_states + l.num_scan_inputs; ++i)
    if (c.hasInput(i)) checkTensor(node, c.input(i), "input " + std::to_string(i));
  for (size_t o = 0; o < body.outputs.size(); ++o)
    checkTensor(node, body.typeOf(body.outputs[o]), "body output " + std::to_string(o));
  for (size_t j = 0; j < l.num_scan_inputs; ++j) {
    const ir::TensorType& t = c.input(l.first_state + l.num_states + j);
    const ir::TensorType& elem = body.typeOf(body.inputs[l.num_states + j]);
    checkSameDType(node, t, elem, "scan input " + std::to_string(j) + " and its body input");
    if (!t.has_rank) continue;
    const int64_t rank = int64_t(t.rank());
    if (rank < int64_t(lead) + 1) c.fail("scan input " + std::to_string(j) + " is " + t.str() + ", which has no scan axis");
    const int64_t axis =
        l.batched ? 1 : normalizeAxis(l.input_axes[j], rank, node.op_type + " node '" + node.name + "' scan_input_axes");
    const ir::Dim& d = t.dims[size_t(axis)];
    if (d.isKnown()) {
      if (seq >= 0 && seq != d.value)
        c.fail("scan inputs have different sequence lengths (" + std::to_string(seq) + " and " +
               std::to_string(d.value) + ")");
      seq = d.value;
    }
    if (l.batched && t.dims[0].isKnown()) batch = t.dims[0].value;
  }
  for (size_t i = 0; i < l.num_states; ++i) {
    const ir::TensorType& init = c.input(l.first_state + i);
    const ir::TensorType& in = body.typeOf(body.inputs[i]);
    const ir::TensorType& out = body.typeOf(body.outputs[i]);
    const std::string what = "state " + std::to_string(i);
    checkSameDType(node, init, in, what + " (initial value and body input)");
    checkSameDType(node, init, out, what + " (initial value and body output)");
    ir::TensorType t = l.batched ? insertDim(node, out, 0, batch, "state") : out;
    c.outputs[i] = withDType(mergeTypes(init, t), init.dtype == ir::DType::kUndefined ? out.dtype : init.dtype);
  }
  for (size_t k = 0; k < l.num_scan_outputs; ++k) {
    const ir::TensorType& out = body.typeOf(body.outputs[l.num_states + k]);
    ir::TensorType t = l.batched ? insertDim(node, insertDim(node, out, 0, seq, "scan output"), 0, batch, "scan output")
                                 : insertDim(node, out, l.output_axes[k], seq, "scan_output_axes");
    c.outputs[l.num_states + k] = t;
  }
}

// SequenceMap (opset 17): the body runs once per element of the input sequences (all
// of one length) and takes the tensors as they are; each output is a sequence of what
// the body makes.
void inferSequenceMap(InferContext& c) {
  const ir::Node& node = c.node;
  const ir::Graph& body = subgraph(node, "body");
  checkCaptures(node, c.inputs, body, "body");
  const size_t formal = node.numFormalInputs();
  if (formalInputs(body) != formal)
    c.fail("has " + std::to_string(formal) + " inputs but its body takes " +
           std::to_string(formalInputs(body)));
  if (body.outputs.size() != node.outputs.size())
    c.fail("has " + std::to_string(node.outputs.size()) + " outputs but its body makes " +
           std::to_string(body.outputs.size()));
  if (c.input(0).kind != ir::ValueKind::kSequence)
    c.fail("input 0 must be a sequence but is " + c.input(0).kindStr());
  for (size_t i = 0; i < formal; ++i) {
    const ir::TensorType& t = c.input(i);
    if (t.kind == ir::ValueKind::kOptional) c.fail("input " + std::to_string(i) + " is " + t.kindStr());
    checkSameDType(node, t.element(), body.typeOf(body.inputs[i]),
                   "input " + std::to_string(i) + " and its body input");
  }
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    const ir::TensorType& out = body.typeOf(body.outputs[o]);
    if (!out.isTensor())
      c.fail("body output " + std::to_string(o) + " is " + out.kindStr() + " (it must be a tensor)");
    c.outputs[o] = ir::TensorType::sequenceOf(out);
  }
}

}  // namespace

bool kindsFit(const ir::TensorType& slot, const ir::TensorType& value) {
  if (slot.kind == value.kind) return slot.kind != ir::ValueKind::kOptional || slot.inner == value.inner;
  return slot.kind == ir::ValueKind::kOptional && slot.inner == value.kind;
}

ir::TensorType mergeTypes(const ir::TensorType& a, const ir::TensorType& b) {
  ir::TensorType r = a;
  // An optional and what it holds merge into the optional.
  if (b.kind == ir::ValueKind::kOptional && a.kind != ir::ValueKind::kOptional) {
    r.kind = b.kind;
    r.inner = b.inner;
  }
  if (!a.has_rank || !b.has_rank || a.rank() != b.rank()) {
    r.has_rank = false;
    r.dims.clear();
    return r;
  }
  for (size_t d = 0; d < r.rank(); ++d) {
    const ir::Dim &x = a.dims[d], &y = b.dims[d];
    const bool same = x.isKnown() ? y.isKnown() && x.value == y.value : !y.isKnown() && !x.symbol.empty() && x.symbol == y.symbol;
    if (!same) r.dims[d] = ir::Dim{};
  }
  return r;
}

LoopLayout loopLayout(const ir::Node& node) {
  LoopLayout l;
  l.body = &subgraph(node, "body");
  const ir::Graph& body = *l.body;
  const size_t formal = node.numFormalInputs();
  if (formal < 2) fail(node, "takes at least 2 inputs (M and cond, either may be omitted)");
  l.num_carried = formal - 2;
  if (formalInputs(body) != 2 + l.num_carried)
    fail(node, "has " + std::to_string(l.num_carried) + " loop-carried values but its body takes " +
                   std::to_string(formalInputs(body)) + " inputs (it must take 2 + " +
                   std::to_string(l.num_carried) + ")");
  if (node.outputs.size() < l.num_carried || body.outputs.size() != 1 + node.outputs.size())
    fail(node, "has " + std::to_string(node.outputs.size()) + " outputs and its body " +
                   std::to_string(body.outputs.size()) + " (it must make the condition and one per node output)");
  l.num_scan = node.outputs.size() - l.num_carried;
  return l;
}

ScanLayout scanLayout(const ir::Node& node) {
  ScanLayout l;
  l.body = &subgraph(node, "body");
  const ir::Graph& body = *l.body;
  l.batched = node.opset < 9;
  l.first_state = l.batched ? 1 : 0;
  const int64_t m = node.attrs.getInt("num_scan_inputs", -1);
  const size_t formal = node.numFormalInputs();
  if (m < 1) fail(node, "needs num_scan_inputs >= 1");
  if (size_t(m) + l.first_state > formal)
    fail(node, "has " + std::to_string(formal) + " inputs but num_scan_inputs " + std::to_string(m));
  l.num_scan_inputs = size_t(m);
  l.num_states = formal - l.first_state - l.num_scan_inputs;
  if (formalInputs(body) != l.num_states + l.num_scan_inputs)
    fail(node, "has " + std::to_string(l.num_states) + " states and " + std::to_string(m) +
                   " scan inputs but its body takes " + std::to_string(formalInputs(body)) + " inputs");
  if (body.outputs.size() != node.outputs.size() || node.outputs.size() < l.num_states)
    fail(node, "has " + std::to_string(node.outputs.size()) + " outputs but its body makes " +
                   std::to_string(body.outputs.size()));
  l.num_scan_outputs = node.outputs.size() - l.num_states;
  auto perValue = [&](const char* attr, size_t n, int64_t def) {
    std::vector<int64_t> v = node.attrs.getInts(attr);
    if (v.empty()) v.assign(n, def);
    if (v.size() != n)
      fail(node, std::string("attribute '") + attr + "' has " + std::to_string(v.size()) + " entries for " +
                     std::to_string(n) + " values");
    return v;
  };
  auto directions = [&](const std::vector<int64_t>& d, const char* attr) {
    std::vector<bool> r;
    for (int64_t x : d) {
      if (x != 0 && x != 1) fail(node, std::string("attribute '") + attr + "' holds " + std::to_string(x) + " (0 or 1)");
      r.push_back(x == 1);
    }
    return r;
  };
  if (l.batched) {
    l.input_reverse = directions(perValue("directions", l.num_scan_inputs, 0), "directions");
    l.output_reverse.assign(l.num_scan_outputs, false);
    l.input_axes.assign(l.num_scan_inputs, 1);
    l.output_axes.assign(l.num_scan_outputs, 1);
  } else {
    l.input_axes = perValue("scan_input_axes", l.num_scan_inputs, 0);
    l.output_axes = perValue("scan_output_axes", l.num_scan_outputs, 0);
    l.input_reverse = directions(perValue("scan_input_directions", l.num_scan_inputs, 0), "scan_input_directions");
    l.output_reverse =
        directions(perValue("scan_output_directions", l.num_scan_outputs, 0), "scan_output_directions");
  }
  return l;
}

void checkCaptures(const ir::Node& node, const std::vector<ir::TensorType>& inputs, const ir::Graph& sub,
                   const std::string& attr) {
  const size_t first = node.numFormalInputs(), first_sub = formalInputs(sub);
  for (size_t k = 0; k < sub.captures; ++k) {
    if (first + k >= inputs.size()) break;
    const ir::TensorType& outer = inputs[first + k];
    const ir::Value& inner = sub.value(sub.inputs[first_sub + k]);
    if ((outer.dtype != ir::DType::kUndefined && inner.type.dtype != ir::DType::kUndefined &&
         outer.dtype != inner.type.dtype) ||
        (outer.dtype != ir::DType::kUndefined && !kindsFit(inner.type, outer)))
      fail(node, attr + " reads outer value '" + inner.name + "' as " + inner.type.str() + " but it is " + outer.str());
  }
}

void registerControlFlowOps(OpRegistry& r) {
  // Their changes at 16, 19 and 21 only add types (sequences and optionals at 16;
  // float8/int4 are refused at import). Scan carries tensors only.
  r.add("If", OpDef{.infer = inferIf, .run = nullptr, .newest = 21, .control_flow = true});
  r.add("Loop", OpDef{.infer = inferLoop, .run = nullptr, .newest = 21, .control_flow = true});
  r.add("Scan", OpDef{.infer = inferScan, .run = nullptr, .newest = 21, .control_flow = true});
  r.add("SequenceMap", OpDef{.infer = inferSequenceMap, .run = nullptr, .newest = 17, .control_flow = true});
}

}  // namespace partita::kernels
