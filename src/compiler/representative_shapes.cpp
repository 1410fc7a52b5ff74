#include "compiler/representative_shapes.h"

#include <algorithm>

#include "kernels/op_registry.h"
#include "partita/error.h"

namespace partita::backend {

bool hasSymbolicDims(const ir::Graph& g) {
  for (const ir::Value& v : g.values)
    if (v.type.dtype != ir::DType::kUndefined && !v.type.isStatic()) return true;
  return false;
}

namespace {

void propagate(ir::Graph& rep, const ir::ConstantPool& pool, size_t& failures);

// An If whose condition is not known at this shape (it depends on an input, as a
// sample-rate switch does) merges its branches' types, and where their sizes differ
// the merge leaves the dims unknown, so nothing after the If would have a shape. At
// this shape its outputs take then_branch's types instead: a representative only (the
// regions after it are shape-polymorphic and lowered again at the shapes runs make).
void representBranch(const ir::Graph& rep, const ir::ConstantPool& pool, const ir::Node& node,
                     std::vector<ir::TensorType>& out) {
  if (std::all_of(out.begin(), out.end(), [](const ir::TensorType& t) { return t.isStatic(); })) return;
  const ir::Attribute* a = node.attrs.find("then_branch");
  if (!a || a->kind != ir::Attribute::Kind::kGraph || !a->graph) return;
  ir::Graph branch = *a->graph;
  // The branch's inputs are the node's outer values, after the condition.
  for (size_t k = 0; k < branch.inputs.size() && 1 + k < node.inputs.size(); ++k)
    if (node.inputs[1 + k] != ir::kNoValue) branch.value(branch.inputs[k]).type = rep.typeOf(node.inputs[1 + k]);
  size_t failures = 0;
  propagate(branch, pool, failures);
  for (size_t o = 0; o < out.size() && o < branch.outputs.size(); ++o) {
    const ir::TensorType& t = branch.typeOf(branch.outputs[o]);
    if (!out[o].isStatic() && t.isStatic() && t.dtype == out[o].dtype) out[o] = t;
  }
}

// Infers `rep`'s nodes in order from its inputs' types (and the constants of `pool`,
// the outermost graph's); `failures` counts the nodes whose inference refused.
void propagate(ir::Graph& rep, const ir::ConstantPool& pool, size_t& failures) {
  const kernels::PoolResolver constants(pool);
  // The contents known at this shape: constants, and what is computed from them and
  // from Shape and Size of sized values (a Reshape's target made of the input's dims),
  // when small.
  constexpr int64_t kMaxKnownElements = 4096;
  std::vector<ir::Tensor> views(rep.values.size());
  std::vector<ir::OwnedTensor> computed;
  computed.reserve(rep.nodes.size() * 2);
  for (size_t v = 0; v < rep.values.size(); ++v)
    if (rep.values[v].isConstant()) views[v] = pool.get(rep.values[v].constant).view();
  std::vector<ir::TensorType> in_types;
  std::vector<const ir::Tensor*> in_values;
  for (const ir::Node& node : rep.nodes) {
    in_types.clear();
    in_values.clear();
    bool all_known = true;
    for (ir::ValueId in : node.inputs) {
      in_types.push_back(in == ir::kNoValue ? ir::TensorType{} : rep.typeOf(in));
      const bool known = in != ir::kNoValue && views[size_t(in)].defined();
      in_values.push_back(known ? &views[size_t(in)] : nullptr);
      all_known &= in == ir::kNoValue || known;
    }
    std::vector<ir::TensorType> out;
    try {
      out = kernels::inferNode(node, in_types, in_values, &constants);
    } catch (const Error&) {
      ++failures;
      continue;  // not valid at this shape: its values keep their symbolic types
    }
    if (node.domain.empty() && node.op_type == "If") representBranch(rep, pool, node, out);
    for (size_t o = 0; o < node.outputs.size() && o < out.size(); ++o)
      if (node.outputs[o] != ir::kNoValue && out[o].isStatic()) rep.value(node.outputs[o]).type = out[o];
    // Shape and Size of a sized value, or a small node over known contents: its contents.
    const bool shape_of = node.domain.empty() && (node.op_type == "Shape" || node.op_type == "Size") &&
                          node.hasInput(0) && rep.typeOf(node.inputs[0]).isStatic();
    if (!shape_of && !all_known) continue;
    const kernels::OpDef* op = kernels::OpRegistry::global().find(node.domain, node.op_type);
    if (!op || !op->hasKernel()) continue;
    bool small = true;
    for (size_t o = 0; o < node.outputs.size(); ++o)
      if (node.outputs[o] != ir::kNoValue)
        small &= o < out.size() && out[o].isStatic() && out[o].numel() <= kMaxKnownElements;
    if (!small) continue;
    kernels::KernelContext ctx{node, &constants, {}, {}, 1};
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (shape_of && i == 0) {  // Shape and Size read their input's shape only
        const ir::TensorType& t = rep.typeOf(node.inputs[0]);
        ctx.inputs.push_back(ir::Tensor{t.dtype, t.staticShape(), nullptr});
        continue;
      }
      ctx.inputs.push_back(in_values[i] ? *in_values[i] : ir::Tensor{});
    }
    const size_t first = computed.size();
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      if (node.outputs[o] == ir::kNoValue) {
        ctx.outputs.emplace_back();
        continue;
      }
      computed.emplace_back(out[o].dtype, out[o].staticShape());
      ctx.outputs.push_back(computed.back().view());
    }
    try {
      op->run(ctx);
    } catch (const Error&) {
      computed.resize(first);
      continue;
    }
    size_t k = first;
    for (ir::ValueId o : node.outputs)
      if (o != ir::kNoValue) views[size_t(o)] = computed[k++].view();
  }
}

// representativeGraph with `size` for the symbolic sides no hint gives; `failures`
// counts the nodes whose inference refused that shape.
ir::Graph graphAt(const ir::Graph& g, const std::map<std::string, std::vector<int64_t>>& hints, int64_t size,
                  size_t& failures) {
  failures = 0;
  ir::Graph rep = g;
  std::map<std::string, int64_t> symbol_value;
  for (const auto& [name, shape] : hints) {
    bool found = false;
    for (ir::ValueId in : g.inputs) found |= g.value(in).name == name;
    if (!found) throw Error(ErrorCode::kInvalidArgument, "--shape-hint names '" + name + "', which is no input of the model");
  }
  for (ir::ValueId in : g.inputs) {
    ir::TensorType& t = rep.value(in).type;
    if (t.isStatic() || !t.has_rank) continue;
    auto hint = hints.find(g.value(in).name);
    if (hint != hints.end() && hint->second.size() != t.rank())
      throw Error(ErrorCode::kInvalidArgument, "--shape-hint " + hint->first + " has rank " +
                                                   std::to_string(hint->second.size()) + ", the input is " + t.str());
    for (size_t d = 0; d < t.rank(); ++d) {
      ir::Dim& dim = t.dims[d];
      if (hint != hints.end()) {
        if (dim.isKnown() && dim.value != hint->second[d])
          throw Error(ErrorCode::kInvalidArgument, "--shape-hint " + hint->first + " dim " + std::to_string(d) +
                                                       " is " + std::to_string(hint->second[d]) + ", the input is " +
                                                       t.str());
        if (hint->second[d] < 1)
          throw Error(ErrorCode::kInvalidArgument, "--shape-hint " + hint->first + ": dims must be at least 1");
        if (!dim.isKnown() && !dim.symbol.empty()) symbol_value.emplace(dim.symbol, hint->second[d]);
        dim = ir::Dim::known(hint->second[d]);
        continue;
      }
      if (dim.isKnown()) continue;
      int64_t value = d == 0 ? kRepresentativeBatch : size;
      if (!dim.symbol.empty()) value = symbol_value.emplace(dim.symbol, value).first->second;
      dim = ir::Dim::known(value);
    }
  }
  propagate(rep, rep.constants, failures);
  return rep;
}

}  // namespace

ir::Graph representativeGraph(const ir::Graph& g, const std::map<std::string, std::vector<int64_t>>& hints) {
  size_t failures = 0;
  ir::Graph rep = graphAt(g, hints, kRepresentativeSize, failures);
  // A side of 224 may be too short for the model (an audio front end whose first
  // window is 400 samples): then the smallest doubling where the fewest nodes refuse.
  for (int64_t size = 2 * kRepresentativeSize; failures > 0 && size <= kMaxRepresentativeSize; size *= 2) {
    size_t f = 0;
    ir::Graph at = graphAt(g, hints, size, f);
    if (f < failures) {
      rep = std::move(at);
      failures = f;
    }
  }
  return rep;
}

std::vector<std::map<std::string, std::vector<int64_t>>> probeShapes(const ir::Graph& g, const ir::Graph& rep) {
  // Per probe: the factors of the first, second, ... symbolic side; odd: made odd.
  struct Probe {
    std::vector<double> sides;
    bool odd = false;
    int64_t batch = 0;  // > 0: dim 0 (when symbolic) takes this, the sides their representative value
  };
  const std::vector<Probe> probes = {
      {{0.57}, false, 0}, {{1.43, 1.07}, false, 0}, {{0.43, 0.58}, true, 0}, {{2.14, 2.86}, false, 0}, {{}, false, 8}};
  std::vector<std::map<std::string, std::vector<int64_t>>> out;
  for (const Probe& p : probes) {
    std::map<std::string, std::vector<int64_t>> hints;
    bool changed = false;
    for (ir::ValueId in : g.inputs) {
      const ir::TensorType& t = g.typeOf(in);
      const ir::TensorType& r = rep.typeOf(in);
      if (t.isStatic() || !t.has_rank || !r.isStatic()) continue;
      std::vector<int64_t> shape = r.staticShape();
      size_t side = 0;
      for (size_t d = 0; d < t.rank(); ++d) {
        if (t.dims[d].isKnown()) continue;
        if (d == 0) {
          if (p.batch > 0) shape[d] = p.batch;
          continue;
        }
        if (p.sides.empty()) continue;
        const double f = p.sides[side++ % p.sides.size()];
        int64_t v = std::max<int64_t>(1, int64_t(double(shape[d]) * f + 0.5));
        if (p.odd) v |= 1;
        shape[d] = v;
      }
      changed |= shape != r.staticShape();
      hints[g.value(in).name] = shape;
    }
    if (changed) out.push_back(std::move(hints));
  }
  return out;
}

}  // namespace partita::backend
