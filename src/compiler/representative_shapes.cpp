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

ir::Graph representativeGraph(const ir::Graph& g, const std::map<std::string, std::vector<int64_t>>& hints) {
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
      int64_t value = d == 0 ? kRepresentativeBatch : kRepresentativeSize;
      if (!dim.symbol.empty()) value = symbol_value.emplace(dim.symbol, value).first->second;
      dim = ir::Dim::known(value);
    }
  }
  const kernels::PoolResolver constants(rep.constants);
  std::vector<ir::TensorType> in_types;
  std::vector<const ir::Tensor*> in_values;
  std::vector<ir::Tensor> views(rep.values.size());
  for (size_t v = 0; v < rep.values.size(); ++v)
    if (rep.values[v].isConstant()) views[v] = rep.constants.get(rep.values[v].constant).view();
  for (const ir::Node& node : rep.nodes) {
    in_types.clear();
    in_values.clear();
    for (ir::ValueId in : node.inputs) {
      in_types.push_back(in == ir::kNoValue ? ir::TensorType{} : rep.typeOf(in));
      in_values.push_back(in != ir::kNoValue && rep.value(in).isConstant() ? &views[size_t(in)] : nullptr);
    }
    std::vector<ir::TensorType> out;
    try {
      out = kernels::inferNode(node, in_types, in_values, &constants);
    } catch (const Error&) {
      continue;  // not valid at this shape: its values keep their symbolic types
    }
    for (size_t o = 0; o < node.outputs.size() && o < out.size(); ++o)
      if (node.outputs[o] != ir::kNoValue && out[o].isStatic()) rep.value(node.outputs[o]).type = out[o];
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
