#include "compiler/representative_shapes.h"

#include <algorithm>
#include <set>

#include "kernels/known_values.h"
#include "kernels/op_registry.h"
#include "partita/error.h"

namespace partita::backend {

bool hasSymbolicDims(const ir::Graph& g) {
  for (const ir::Value& v : g.values)
    if (v.type.dtype != ir::DType::kUndefined && !v.type.isStatic()) return true;
  return false;
}

namespace {

void propagate(ir::Graph& rep, const ir::ConstantPool& pool, size_t& failures,
               const std::vector<bool>* shape_nodes = nullptr);

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
// the outermost graph's); `failures` counts the nodes whose inference refused. With
// `shape_nodes` (shapeComputations of the graph `rep` was copied from, `pool` being
// rep's own), what a node other than those reads of their known values becomes a
// constant.
void propagate(ir::Graph& rep, const ir::ConstantPool& pool, size_t& failures, const std::vector<bool>* shape_nodes) {
  const kernels::PoolResolver constants(pool);
  // The contents known at this shape: constants, and what is computed from them and
  // from Shape and Size of sized values (a Reshape's target made of the input's dims),
  // when small.
  std::vector<ir::Tensor> views(rep.values.size());
  std::vector<ir::OwnedTensor> computed;  // their storage stays where it is when moved
  for (size_t v = 0; v < rep.values.size(); ++v)
    if (rep.values[v].isConstant()) views[v] = pool.get(rep.values[v].constant).view();
  std::vector<ir::TensorType> in_types;
  std::vector<const ir::Tensor*> in_values;
  for (const ir::Node& node : rep.nodes) {
    in_types.clear();
    in_values.clear();
    for (ir::ValueId in : node.inputs) {
      in_types.push_back(in == ir::kNoValue ? ir::TensorType{} : rep.typeOf(in));
      in_values.push_back(in != ir::kNoValue && views[size_t(in)].defined() ? &views[size_t(in)] : nullptr);
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
    std::vector<ir::OwnedTensor> known = kernels::evaluateKnown(node, in_types, in_values, out, &constants);
    for (size_t o = 0; o < known.size() && o < node.outputs.size(); ++o)
      if (node.outputs[o] != ir::kNoValue) {
        views[size_t(node.outputs[o])] = known[o].view();
        computed.push_back(std::move(known[o]));
      }
  }
  if (shape_nodes) kernels::readKnownAsConstants(rep, *shape_nodes, views, "_at_representative");
}

// representativeGraph with `size` for the symbolic sides no hint gives; `failures`
// counts the nodes whose inference refused that shape.
ir::Graph graphAt(const ir::Graph& g, const std::map<std::string, std::vector<int64_t>>& hints, int64_t size,
                  const std::vector<bool>& shape_nodes, size_t& failures) {
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
  propagate(rep, rep.constants, failures, &shape_nodes);
  return rep;
}

// The most elements of one graph input of `g` whose shape is known (saturated at
// INT64_MAX).
int64_t largestInput(const ir::Graph& g) {
  int64_t largest = 0;
  for (ir::ValueId in : g.inputs) {
    const ir::TensorType& t = g.typeOf(in);
    if (!t.isStatic()) continue;
    largest = std::max(largest, ir::checkedNumel(t.staticShape()).value_or(INT64_MAX));
  }
  return largest;
}

}  // namespace

ir::Graph representativeGraph(const ir::Graph& g, const std::map<std::string, std::vector<int64_t>>& hints) {
  size_t failures = 0;
  const std::vector<bool> shape_nodes = shapeComputations(g);
  ir::Graph rep = graphAt(g, hints, kRepresentativeSize, shape_nodes, failures);
  // A side of 224 may be too short for the model (an audio front end whose first
  // window is 400 samples): then the smallest doubling where the fewest nodes refuse.
  for (int64_t size = 2 * kRepresentativeSize; failures > 0 && size <= kMaxRepresentativeSize; size *= 2) {
    size_t f = 0;
    ir::Graph at = graphAt(g, hints, size, shape_nodes, f);
    if (largestInput(at) > kMaxRepresentativeElements) break;
    if (f < failures) {
      rep = std::move(at);
      failures = f;
    }
  }
  return rep;
}

std::vector<bool> shapeComputations(const ir::Graph& g) {
  constexpr int64_t kMaxElements = 64;
  std::vector<bool> shape(g.nodes.size(), false);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const ir::Node& node = g.nodes[n];
    if (!kernels::isShapeOp(node) || node.outputs.empty()) continue;
    bool ok = true;
    for (ir::ValueId out : node.outputs) {
      if (out == ir::kNoValue) continue;
      const ir::TensorType& t = g.typeOf(out);
      ok &= t.isStatic() && t.rank() <= 1 && t.numel() <= kMaxElements &&
            (t.dtype == ir::DType::kInt64 || t.dtype == ir::DType::kInt32 || t.dtype == ir::DType::kFloat32 ||
             t.dtype == ir::DType::kFloat64);
    }
    const bool of_shape = kernels::isShapeOf(node);
    for (size_t i = 0; ok && i < node.inputs.size(); ++i) {
      const ir::ValueId in = node.inputs[i];
      if (in == ir::kNoValue || g.value(in).isConstant()) continue;
      if (of_shape && i == 0) {
        ok = g.typeOf(in).has_rank;
        continue;
      }
      const ir::NodeId p = g.value(in).producer;
      ok = p != ir::kNoNode && shape[size_t(p)];
    }
    shape[n] = ok;
  }
  return shape;
}

std::optional<std::vector<ir::NodeId>> shapeClosure(const ir::Graph& g, const std::vector<bool>& shape,
                                                    ir::NodeId n) {
  std::set<ir::NodeId> seen;
  std::vector<ir::NodeId> stack = {n};
  while (!stack.empty()) {
    const ir::Node& node = g.nodes[size_t(stack.back())];
    const bool first = stack.back() == n;
    stack.pop_back();
    const bool of_shape = !first && kernels::isShapeOf(node);
    for (size_t i = of_shape ? 1 : 0; i < node.inputs.size(); ++i) {
      const ir::ValueId in = node.inputs[i];
      if (in == ir::kNoValue) continue;
      const ir::NodeId p = g.value(in).producer;
      if (p != ir::kNoNode && shape[size_t(p)] && seen.insert(p).second) stack.push_back(p);
    }
    if (seen.size() > kMaxShapeClosure) return std::nullopt;
  }
  return std::vector<ir::NodeId>(seen.begin(), seen.end());
}

size_t privatizeShapeComputations(ir::Graph& g) {
  const std::vector<bool> shape = shapeComputations(g);
  std::vector<size_t> readers(g.values.size(), 0);
  for (const ir::Node& node : g.nodes)
    for (ir::ValueId in : node.inputs)
      if (in != ir::kNoValue) ++readers[size_t(in)];
  for (ir::ValueId out : g.outputs) ++readers[size_t(out)];
  std::vector<ir::Node> rebuilt;
  std::vector<bool> is_shape;  // per rebuilt node
  size_t privatized = 0, budget = std::max<size_t>(g.nodes.size(), 4096);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    std::optional<std::vector<ir::NodeId>> found;
    if (!shape[n]) found = shapeClosure(g, shape, ir::NodeId(n));
    if (found && !found->empty() && found->size() <= budget) {
      const std::vector<ir::NodeId>& closure = *found;
      // Shared: some value of the closure is read by more readers than the closure
      // and this node account for.
      std::map<ir::ValueId, size_t> inside;
      for (ir::NodeId c : closure)
        for (ir::ValueId in : g.nodes[size_t(c)].inputs)
          if (in != ir::kNoValue) ++inside[in];
      for (ir::ValueId in : g.nodes[n].inputs)
        if (in != ir::kNoValue) ++inside[in];
      bool shared = false;
      for (ir::NodeId c : closure)
        for (ir::ValueId out : g.nodes[size_t(c)].outputs)
          if (out != ir::kNoValue && readers[size_t(out)] > inside[out]) shared = true;
      if (shared) {
        budget -= closure.size();
        std::map<ir::ValueId, ir::ValueId> copy;
        auto remap = [&](ir::ValueId& v) {
          auto it = copy.find(v);
          if (v != ir::kNoValue && it != copy.end()) v = it->second;
        };
        for (ir::NodeId c : closure) {
          ir::Node k = g.nodes[size_t(c)];
          k.name += "/for/" + g.nodes[n].name;
          for (ir::ValueId& in : k.inputs) remap(in);
          for (ir::ValueId& out : k.outputs) {
            if (out == ir::kNoValue) continue;
            ir::Value v{g.value(out).name + "/for/" + g.nodes[n].name, g.value(out).type, ir::kNoNode, ir::kNoConst};
            g.values.push_back(std::move(v));
            out = copy[out] = ir::ValueId(g.values.size() - 1);
          }
          rebuilt.push_back(std::move(k));
          is_shape.push_back(true);
        }
        ++privatized;
        rebuilt.push_back(g.nodes[n]);
        for (ir::ValueId& in : rebuilt.back().inputs) remap(in);
        is_shape.push_back(false);
        continue;
      }
    }
    rebuilt.push_back(g.nodes[n]);  // a copy: later nodes' closures read the earlier ones
    is_shape.push_back(shape[n]);
  }
  // Shape computations no one reads any more.
  std::vector<bool> read(g.values.size(), false);
  for (ir::ValueId out : g.outputs) read[size_t(out)] = true;
  std::vector<bool> keep(rebuilt.size(), true);
  for (size_t n = rebuilt.size(); n-- > 0;) {
    if (is_shape[n]) {
      keep[n] = false;
      for (ir::ValueId out : rebuilt[n].outputs) keep[n] = keep[n] || (out != ir::kNoValue && read[size_t(out)]);
    }
    if (!keep[n]) continue;
    for (ir::ValueId in : rebuilt[n].inputs)
      if (in != ir::kNoValue) read[size_t(in)] = true;
  }
  g.nodes.clear();
  for (ir::Value& v : g.values) v.producer = ir::kNoNode;
  for (size_t n = 0; n < rebuilt.size(); ++n)
    if (keep[n]) g.addNode(std::move(rebuilt[n]));
  g.verify();
  return privatized;
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
  // No probe past kMaxRepresentativeElements, unless the representative shape is.
  const int64_t max_elements = std::max(kMaxRepresentativeElements, largestInput(rep));
  std::vector<std::map<std::string, std::vector<int64_t>>> out;
  for (const Probe& p : probes) {
    std::map<std::string, std::vector<int64_t>> hints;
    bool changed = false;
    int64_t elements = 0;  // the probe's largest input
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
      elements = std::max(elements, ir::checkedNumel(shape).value_or(INT64_MAX));
      hints[g.value(in).name] = shape;
    }
    if (changed && elements <= max_elements) out.push_back(std::move(hints));
  }
  return out;
}

}  // namespace partita::backend
