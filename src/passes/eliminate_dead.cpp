#include <algorithm>

#include "passes/passes.h"

namespace partita::passes {

void eliminateDead(ir::Graph& g) {
  std::vector<bool> live_value(g.values.size(), false);
  for (ir::ValueId out : g.outputs) live_value[size_t(out)] = true;
  std::vector<bool> live_node(g.nodes.size(), false);
  for (size_t n = g.nodes.size(); n-- > 0;) {
    const ir::Node& node = g.nodes[n];
    bool needed = std::any_of(node.outputs.begin(), node.outputs.end(), [&](ir::ValueId v) {
      return v != ir::kNoValue && live_value[size_t(v)];
    });
    if (!needed) continue;
    live_node[n] = true;
    for (ir::ValueId in : node.inputs)
      if (in != ir::kNoValue) live_value[size_t(in)] = true;
  }
  std::vector<ir::Node> kept;
  for (size_t n = 0; n < g.nodes.size(); ++n)
    if (live_node[n]) kept.push_back(std::move(g.nodes[n]));
  g.nodes = std::move(kept);
  compact(g);
}

void compact(ir::Graph& g) {
  // Values still referenced.
  std::vector<bool> used(g.values.size(), false);
  for (ir::ValueId v : g.inputs) used[size_t(v)] = true;
  for (ir::ValueId v : g.outputs) used[size_t(v)] = true;
  for (const ir::Node& n : g.nodes) {
    for (ir::ValueId v : n.inputs)
      if (v != ir::kNoValue) used[size_t(v)] = true;
    for (ir::ValueId v : n.outputs)
      if (v != ir::kNoValue) used[size_t(v)] = true;
  }
  // Constants still referenced, by values or tensor attributes.
  std::vector<bool> const_used(g.constants.size(), false);
  for (size_t v = 0; v < g.values.size(); ++v)
    if (used[v] && g.values[v].isConstant()) const_used[g.values[v].constant] = true;
  for (const ir::Node& n : g.nodes)
    for (const auto& [name, a] : n.attrs.all())
      if (a.kind == ir::Attribute::Kind::kTensor) const_used[a.tensor] = true;

  std::vector<ir::ConstId> const_map(g.constants.size(), ir::kNoConst);
  ir::ConstantPool pool;
  for (const ir::Constant& c : g.constants.all()) {
    if (!const_used[c.id]) continue;
    const_map[c.id] = pool.add(c.name, c.dtype, c.shape, c.bytes, c.layout);
  }
  g.constants = std::move(pool);

  std::vector<ir::ValueId> value_map(g.values.size(), ir::kNoValue);
  std::vector<ir::Value> values;
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (!used[v]) continue;
    value_map[v] = ir::ValueId(values.size());
    ir::Value val = std::move(g.values[v]);
    if (val.isConstant()) val.constant = const_map[val.constant];
    values.push_back(std::move(val));
  }
  g.values = std::move(values);
  auto remap = [&](std::vector<ir::ValueId>& ids) {
    for (ir::ValueId& v : ids)
      if (v != ir::kNoValue) v = value_map[size_t(v)];
  };
  remap(g.inputs);
  remap(g.outputs);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    ir::Node& node = g.nodes[n];
    remap(node.inputs);
    remap(node.outputs);
    for (const auto& [name, a] : node.attrs.all())
      if (a.kind == ir::Attribute::Kind::kTensor) node.attrs.setTensor(name, const_map[a.tensor]);
    for (ir::ValueId v : node.outputs)
      if (v != ir::kNoValue) g.value(v).producer = ir::NodeId(n);
  }
  g.verify();
}

}  // namespace partita::passes
