#include <algorithm>
#include <cstring>
#include <new>

#include <omp.h>

#include "ir/limits.h"
#include "kernels/control_flow.h"
#include "kernels/op_registry.h"
#include "kernels/op_util.h"
#include "partita/error.h"
#include "passes/passes.h"

namespace partita::passes {

namespace {

std::string producedBy(const ir::Value& v, const ir::Node& node) {
  return "value '" + v.name + "' (made by " + node.op_type + " node '" + node.name + "')";
}

// The declared type of `v` as a hint to what inference found (passes.h has the rule):
// a declared dtype must match; declared dims fill what inference does not know, and
// are ignored where it does (and where the ranks differ).
ir::TensorType mergeDeclared(const ir::TensorType& found, const ir::TensorType& declared, const ir::Value& v,
                             const ir::Node& node) {
  // A value inferred optional that the model declares as what the optional holds (a
  // Loop carrying an optional sequence that it returns as a sequence) is that.
  ir::TensorType inferred = found;
  if (declared.dtype != ir::DType::kUndefined && found.kind == ir::ValueKind::kOptional &&
      declared.kind == found.inner) {
    inferred.kind = found.inner;
    inferred.inner = ir::ValueKind::kTensor;
  }
  if (declared.dtype != ir::DType::kUndefined && inferred.dtype != ir::DType::kUndefined &&
      declared.dtype != inferred.dtype)
    throw Error(ErrorCode::kInvalidModel, producedBy(v, node) + " is declared " + declared.str() + " but is " +
                                              inferred.str());
  if (declared.dtype != ir::DType::kUndefined && !kernels::kindsFit(declared, inferred) &&
      !kernels::kindsFit(inferred, declared))
    throw Error(ErrorCode::kInvalidModel,
                producedBy(v, node) + " is declared " + declared.kindStr() + " but is " + inferred.kindStr());
  // A sequence's element shapes are data: a declaration does not fill them in.
  if (inferred.dtype != ir::DType::kUndefined && !inferred.isTensor()) return inferred;
  if (declared.dtype == ir::DType::kUndefined || !declared.has_rank) return inferred;
  if (!inferred.has_rank) {
    ir::TensorType t = declared;
    if (inferred.dtype != ir::DType::kUndefined) {  // what inference found wins, the declaration fills in
      t.dtype = inferred.dtype;
      t.kind = inferred.kind;
      t.inner = inferred.inner;
    }
    return t;
  }
  if (inferred.rank() != declared.rank()) return inferred;
  ir::TensorType t = inferred;
  for (size_t i = 0; i < t.rank(); ++i)
    if (!t.dims[i].isKnown() && (declared.dims[i].isKnown() || !declared.dims[i].symbol.empty()))
      t.dims[i] = declared.dims[i];
  return t;
}

bool foldShapeOf(ir::Graph& g, ir::ConstantPool& pool, ir::Node& node) {
  // Shape and Size of a statically shaped value are constants even when its data is not.
  if (node.domain != "" || (node.op_type != "Shape" && node.op_type != "Size")) return false;
  if (!node.hasInput(0) || !node.hasOutput(0) || !g.typeOf(node.inputs[0]).isStatic()) return false;
  std::vector<int64_t> shape = g.typeOf(node.inputs[0]).staticShape();
  std::vector<int64_t> data;
  if (node.op_type == "Size") {
    data.push_back(ir::shapeNumel(shape));
  } else {
    int64_t rank = int64_t(shape.size());
    int64_t start = node.attrs.getInt("start", 0), end = node.attrs.getInt("end", rank);
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = std::clamp<int64_t>(start, 0, rank);
    end = std::clamp<int64_t>(end, 0, rank);
    for (int64_t i = start; i < end; ++i) data.push_back(shape[size_t(i)]);
  }
  std::vector<int64_t> out_shape;
  if (node.op_type == "Shape") out_shape.push_back(int64_t(data.size()));
  ir::ConstId c = pool.add(g.value(node.outputs[0]).name, ir::DType::kInt64, out_shape,
                                  Bytes::copyOf(data.data(), data.size() * sizeof(int64_t)));
  ir::Value& out = g.value(node.outputs[0]);
  out.constant = c;
  out.producer = ir::kNoNode;
  out.type = ir::TensorType::of(ir::DType::kInt64, out_shape);
  return true;
}

void inferGraph(ir::Graph& g, ir::ConstantPool& pool, const FoldOptions& options);

bool isOp(const ir::Node& node, const char* op) { return node.domain.empty() && node.op_type == op; }

// The subgraph's capture inputs get the types of the outer values the node passes.
void typeCaptures(const ir::Graph& g, const ir::Node& node, ir::Graph& sub) {
  const size_t first = node.numFormalInputs(), first_sub = sub.inputs.size() - sub.captures;
  for (size_t k = 0; k < sub.captures && first + k < node.inputs.size(); ++k)
    sub.value(sub.inputs[first_sub + k]).type = g.typeOf(node.inputs[first + k]);
}

// The type a subgraph input gets from the outer value feeding it: the outer type where
// it knows more than the body's declaration (a declaration is a hint), else the
// declaration.
ir::TensorType feedType(const ir::TensorType& outer, const ir::TensorType& declared) {
  if (outer.dtype == ir::DType::kUndefined) return declared;
  if (!outer.isTensor()) return outer;  // a sequence's element shapes are data, not declarations
  if (!outer.has_rank && declared.has_rank && declared.dtype == outer.dtype) return declared;
  return outer;
}

// `t` without the dimensions in `axes` (ascending, normalized): a scan input's element.
ir::TensorType dropDims(const ir::TensorType& t, const std::vector<int64_t>& axes) {
  if (!t.has_rank) return t;
  ir::TensorType r = t;
  for (size_t i = axes.size(); i-- > 0;)
    if (axes[i] >= 0 && axes[i] < int64_t(r.dims.size())) r.dims.erase(r.dims.begin() + axes[i]);
  return r;
}

// Infers a Loop or Scan body whose carried values (body inputs first_state..+n, body
// outputs out_first..+n) must keep one type across iterations: when an iteration makes
// a more general type than it was given (a growing shape), the inputs are widened and
// the body inferred again from its original form (nothing folded for a shape it does
// not keep).
void inferCarried(ir::Graph& g, ir::Node& node, ir::ConstantPool& pool, const FoldOptions& options,
                  std::vector<ir::TensorType> input_types, size_t in_first, size_t out_first, size_t n) {
  const std::shared_ptr<ir::Graph> pristine = node.attrs.find("body")->graph->clone();
  std::vector<ir::TensorType> carried(input_types.begin() + ptrdiff_t(in_first),
                                      input_types.begin() + ptrdiff_t(in_first + n));
  for (int round = 0;; ++round) {
    std::shared_ptr<ir::Graph> body = pristine->clone();
    for (size_t i = 0; i < input_types.size(); ++i) {
      ir::TensorType t = i >= in_first && i < in_first + n ? carried[i - in_first] : input_types[i];
      body->value(body->inputs[i]).type = feedType(t, body->typeOf(body->inputs[i]));
    }
    typeCaptures(g, node, *body);
    inferGraph(*body, pool, options);
    node.attrs.setGraph("body", body);
    bool widened = false;
    for (size_t i = 0; i < n; ++i) {
      const ir::TensorType& in = body->typeOf(body->inputs[in_first + i]);
      const ir::TensorType& out = body->typeOf(body->outputs[out_first + i]);
      if (out.dtype != in.dtype && out.dtype != ir::DType::kUndefined && in.dtype != ir::DType::kUndefined)
        continue;  // the op's inference names the mismatch
      ir::TensorType merged = kernels::mergeTypes(in, out);
      if (round >= 2) {
        merged.has_rank = false;
        merged.dims.clear();
      }
      if (merged != in) {
        carried[i] = merged;
        widened = true;
      }
    }
    if (!widened || round >= 3) return;
  }
}

// Infers the subgraphs of a control-flow node from the types of what it passes them.
void inferSubgraphs(ir::Graph& g, ir::Node& node, ir::ConstantPool& pool, const FoldOptions& options) {
  auto inputType = [&](size_t i) {
    return i < node.inputs.size() && node.inputs[i] != ir::kNoValue ? g.typeOf(node.inputs[i]) : ir::TensorType{};
  };
  if (isOp(node, "Loop")) {
    const kernels::LoopLayout l = kernels::loopLayout(node);
    std::vector<ir::TensorType> types = {ir::TensorType::of(ir::DType::kInt64, {}),
                                         ir::TensorType::of(ir::DType::kBool, {})};
    for (size_t i = 0; i < l.num_carried; ++i) types.push_back(inputType(2 + i));
    inferCarried(g, node, pool, options, types, 2, 1, l.num_carried);
  } else if (isOp(node, "Scan")) {
    const kernels::ScanLayout l = kernels::scanLayout(node);
    std::vector<ir::TensorType> types;
    for (size_t i = 0; i < l.num_states; ++i) {
      ir::TensorType t = inputType(l.first_state + i);
      types.push_back(l.batched ? dropDims(t, {0}) : t);
    }
    for (size_t j = 0; j < l.num_scan_inputs; ++j) {
      ir::TensorType t = inputType(l.first_state + l.num_states + j);
      if (t.has_rank && l.batched) {
        t = dropDims(t, {0, 1});
      } else if (t.has_rank) {
        int64_t axis = l.input_axes[j] < 0 ? l.input_axes[j] + int64_t(t.rank()) : l.input_axes[j];
        if (axis < 0 || axis >= int64_t(t.rank()))
          throw Error(ErrorCode::kInvalidModel, "Scan node '" + node.name + "': scan_input_axes " +
                                                    std::to_string(l.input_axes[j]) + " is out of range for " + t.str());
        t = dropDims(t, {axis});
      }
      types.push_back(t);
    }
    inferCarried(g, node, pool, options, types, 0, 0, l.num_states);
  } else if (isOp(node, "SequenceMap")) {
    // The body takes one element of each sequence input, and the tensor inputs as they are.
    const ir::Attribute* a = node.attrs.find("body");
    if (!a || a->kind != ir::Attribute::Kind::kGraph || !a->graph) return;  // inference names it
    ir::Graph& body = *a->graph;
    const size_t formal = std::min(node.numFormalInputs(), body.inputs.size() - body.captures);
    for (size_t i = 0; i < formal; ++i) {
      ir::Value& in = body.value(body.inputs[i]);
      in.type = feedType(inputType(i).element(), in.type);
    }
    typeCaptures(g, node, body);
    inferGraph(body, pool, options);
  } else {
    for (const auto& [name, a] : node.attrs.all()) {
      if (a.kind != ir::Attribute::Kind::kGraph || !a.graph) continue;
      typeCaptures(g, node, *a.graph);
      inferGraph(*a.graph, pool, options);
    }
  }
}

// An If whose condition is a constant: the nodes of the branch it takes, reading the
// node's inputs and making its outputs (Identity where a branch output is not made by
// a node of its own).
std::vector<ir::Node> inlineBranch(ir::Graph& g, const ir::Node& node, const ir::Graph& branch) {
  std::vector<ir::ValueId> map(branch.values.size(), ir::kNoValue);
  const size_t first = node.numFormalInputs();
  for (size_t k = 0; k < branch.captures; ++k) map[size_t(branch.inputs[k])] = node.inputs[first + k];
  for (size_t v = 0; v < branch.values.size(); ++v)
    if (branch.values[v].isConstant()) {
      ir::ValueId c = g.addValue(branch.values[v].name, branch.values[v].type);
      g.value(c).constant = branch.values[v].constant;
      map[v] = c;
    }
  std::vector<std::pair<ir::ValueId, ir::ValueId>> copies;  // branch value -> If output
  for (size_t o = 0; o < branch.outputs.size() && o < node.outputs.size(); ++o) {
    const ir::ValueId bv = branch.outputs[o], pv = node.outputs[o];
    if (pv == ir::kNoValue) continue;
    if (branch.value(bv).producer != ir::kNoNode && map[size_t(bv)] == ir::kNoValue)
      map[size_t(bv)] = pv;
    else
      copies.emplace_back(bv, pv);
  }
  std::vector<ir::Node> nodes;
  for (const ir::Node& bn : branch.nodes) {
    ir::Node n = bn;
    for (ir::ValueId& in : n.inputs)
      if (in != ir::kNoValue) in = map[size_t(in)];
    for (ir::ValueId& out : n.outputs) {
      if (out == ir::kNoValue) continue;
      if (map[size_t(out)] == ir::kNoValue)
        map[size_t(out)] = g.addValue(node.name + "/" + branch.value(out).name, branch.typeOf(out));
      out = map[size_t(out)];
    }
    nodes.push_back(std::move(n));
  }
  for (const auto& [bv, pv] : copies) {
    ir::Node id;
    id.op_type = "Identity";
    id.opset = node.opset;
    id.name = node.name + "/" + g.value(pv).name;
    id.inputs = {map[size_t(bv)]};
    id.outputs = {pv};
    nodes.push_back(std::move(id));
  }
  return nodes;
}

void inferGraph(ir::Graph& g, ir::ConstantPool& pool, const FoldOptions& options) {
  kernels::PoolResolver resolver(pool);
  std::vector<bool> folded(g.nodes.size(), false);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    if (isOp(g.nodes[n], "If") && g.nodes[n].hasSubgraphs() && g.nodes[n].hasInput(0) &&
        g.value(g.nodes[n].inputs[0]).isConstant()) {
      // A constant condition: the branch taken replaces the node, folded from here on.
      const ir::Node node = g.nodes[n];
      const ir::Constant& cond = pool.get(g.value(node.inputs[0]).constant);
      if (cond.dtype != ir::DType::kBool || cond.nbytes() != 1)
        throw Error(ErrorCode::kInvalidModel, "If node '" + node.name + "': the condition must be one bool but is " +
                                                  g.typeOf(node.inputs[0]).str());
      const bool take_then = *reinterpret_cast<const uint8_t*>(cond.bytes.data) != 0;
      const ir::Graph* branch = node.attrs.getGraph(take_then ? "then_branch" : "else_branch");
      const ir::Graph* other = node.attrs.getGraph(take_then ? "else_branch" : "then_branch");
      if (branch && other && branch->inputs.size() == branch->captures &&
          branch->outputs.size() == node.outputs.size()) {
        // The branches must still agree (the same errors as when the condition is data).
        for (ir::Graph* sub : {const_cast<ir::Graph*>(branch), const_cast<ir::Graph*>(other)}) {
          typeCaptures(g, node, *sub);
          inferGraph(*sub, pool, options);
        }
        std::vector<ir::TensorType> in_types;
        for (ir::ValueId in : node.inputs) in_types.push_back(g.typeOf(in));
        kernels::inferNode(node, in_types, std::vector<const ir::Tensor*>(in_types.size(), nullptr), &resolver,
                           options.limits, &g);
        std::vector<ir::Node> nodes = inlineBranch(g, node, *branch);
        g.nodes.erase(g.nodes.begin() + ptrdiff_t(n));
        folded.erase(folded.begin() + ptrdiff_t(n));
        g.nodes.insert(g.nodes.begin() + ptrdiff_t(n), std::make_move_iterator(nodes.begin()),
                       std::make_move_iterator(nodes.end()));
        folded.insert(folded.begin() + ptrdiff_t(n), nodes.size(), false);
        --n;  // infer the inlined nodes next
        continue;
      }
    }
    ir::Node& node = g.nodes[n];
    if (foldShapeOf(g, pool, node)) {
      folded[n] = true;
      continue;
    }
    if (node.hasSubgraphs()) inferSubgraphs(g, node, pool, options);
    std::vector<ir::TensorType> in_types;
    std::vector<ir::Tensor> const_views;
    std::vector<const ir::Tensor*> in_values;
    const_views.reserve(node.inputs.size());
    bool all_const = true;
    size_t in_bytes = 0;
    for (ir::ValueId in : node.inputs) {
      if (in == ir::kNoValue) {
        in_types.emplace_back();
        in_values.push_back(nullptr);
        continue;
      }
      const ir::Value& v = g.value(in);
      in_types.push_back(v.type);
      if (v.isConstant()) {
        const_views.push_back(pool.get(v.constant).view());
        in_values.push_back(&const_views.back());
        in_bytes += const_views.back().nbytes();
      } else {
        in_values.push_back(nullptr);
        all_const = false;
      }
    }
    std::vector<ir::TensorType> out_types =
        kernels::inferNode(node, in_types, in_values, &resolver, options.limits, &g);
    size_t out_bytes = 0;
    bool out_static = true;
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      if (node.outputs[o] == ir::kNoValue) continue;
      ir::Value& out = g.value(node.outputs[o]);
      out.type = mergeDeclared(out_types[o], out.type, out, node);
      ir::checkLimits(out.type, options.limits, ErrorCode::kInvalidModel, producedBy(out, node));
      if (out.type.isStatic())
        out_bytes += size_t(out.type.numel()) * ir::dtypeSize(out.type.dtype);
      else
        out_static = false;
    }
    if (!all_const || !out_static) continue;
    const kernels::OpDef* op = kernels::OpRegistry::global().find(node.domain, node.op_type);
    if (!op || !op->hasKernel()) continue;  // infer-only: a backend runs it
    if (!op->deterministic) continue;       // a random op draws at every run
    // Element type conversions of constants (a float16 or int8 weight made float32)
    // grow only by the element size, and their readers need them constant.
    const bool conversion = node.domain.empty() && (node.op_type == "Cast" || node.op_type == "CastLike" ||
                                                    node.op_type == "DequantizeLinear");
    if (out_bytes > options.max_growth_bytes && out_bytes > in_bytes && !conversion) continue;

    // Evaluate with the host kernel; outputs become constants.
    std::vector<ir::OwnedTensor> results;
    kernels::KernelContext ctx{node, &resolver, {}, {}, omp_get_max_threads()};
    for (size_t i = 0; i < node.inputs.size(); ++i)
      ctx.inputs.push_back(in_values[i] ? *in_values[i] : ir::Tensor{});
    results.reserve(node.outputs.size());
    for (ir::ValueId out : node.outputs) {
      if (out == ir::kNoValue) {
        results.emplace_back();
        ctx.outputs.emplace_back();
        continue;
      }
      const ir::TensorType& t = g.typeOf(out);
      results.emplace_back(t.dtype, t.staticShape());
      ctx.outputs.push_back(results.back().view());
    }
    try {
      op->run(ctx);
    } catch (const std::bad_alloc&) {
      throw Error(ErrorCode::kInvalidModel,
                  node.op_type + " node '" + node.name + "': out of memory while folding it into a constant");
    }
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      if (node.outputs[o] == ir::kNoValue) continue;
      ir::Value& out = g.value(node.outputs[o]);
      out.constant = pool.addCopy(out.name, results[o].view());
      out.producer = ir::kNoNode;
    }
    folded[n] = true;
  }
  std::vector<ir::Node> kept;
  kept.reserve(g.nodes.size());
  for (size_t n = 0; n < g.nodes.size(); ++n)
    if (!folded[n]) kept.push_back(std::move(g.nodes[n]));
  g.nodes = std::move(kept);
  for (size_t n = 0; n < g.nodes.size(); ++n)
    for (ir::ValueId out : g.nodes[n].outputs)
      if (out != ir::kNoValue) g.value(out).producer = ir::NodeId(n);
}

}  // namespace

void inferShapes(ir::Graph& g, const FoldOptions& options) {
  inferGraph(g, g.constants, options);
  g.verify();
}

}  // namespace partita::passes
