#include <algorithm>

#include "passes/passes.h"

namespace partita::passes {

namespace {

template <typename F>
void forEachSubgraph(ir::Graph& g, F&& f) {
  for (ir::Node& n : g.nodes)
    for (const auto& [name, a] : n.attrs.all())
      if (a.kind == ir::Attribute::Kind::kGraph && a.graph) f(*a.graph);
}

// Drops the nodes no output of `g` depends on, in `g` and in its subgraphs (whose
// outputs are all live; a control-flow node reads what its subgraphs read through its
// inputs, so the producers of those stay).
void dropDeadNodes(ir::Graph& g) {
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
  forEachSubgraph(g, dropDeadNodes);
}

// Marks the pool constants `g` and its subgraphs refer to.
void markConstants(ir::Graph& g, std::vector<bool>& const_used) {
  for (const ir::Value& v : g.values)
    if (v.isConstant() && v.constant < const_used.size()) const_used[v.constant] = true;
  for (const ir::Node& n : g.nodes)
    for (const auto& [name, a] : n.attrs.all())
      if (a.kind == ir::Attribute::Kind::kTensor && a.tensor < const_used.size()) const_used[a.tensor] = true;
  forEachSubgraph(g, [&](ir::Graph& sub) { markConstants(sub, const_used); });
}

// Drops the values `g` no longer refers to and renumbers the rest (and its constants'
// IDs by `const_map`), in `g` and its subgraphs.
void compactValues(ir::Graph& g, const std::vector<ir::ConstId>& const_map) {
  std::vector<bool> used(g.values.size(), false);
  for (ir::ValueId v : g.inputs) used[size_t(v)] = true;
  for (ir::ValueId v : g.outputs) used[size_t(v)] = true;
  for (const ir::Node& n : g.nodes) {
    for (ir::ValueId v : n.inputs)
      if (v != ir::kNoValue) used[size_t(v)] = true;
    for (ir::ValueId v : n.outputs)
      if (v != ir::kNoValue) used[size_t(v)] = true;
  }
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
  forEachSubgraph(g, [&](ir::Graph& sub) { compactValues(sub, const_map); });
}

}  // namespace

void eliminateDead(ir::Graph& g) {
  dropDeadNodes(g);
  compact(g);
}

void compact(ir::Graph& g) {
  // Constants still referenced, by values or tensor attributes, here or in a subgraph.
  // A value nothing reads is dropped below, and its constant with it.
  std::vector<bool> const_used(g.constants.size(), false);
  std::vector<ir::ConstId> identity(g.constants.size());
  for (size_t i = 0; i < identity.size(); ++i) identity[i] = ir::ConstId(i);
  compactValues(g, identity);
  markConstants(g, const_used);

  std::vector<ir::ConstId> const_map(g.constants.size(), ir::kNoConst);
  ir::ConstantPool pool;
  for (const ir::Constant& c : g.constants.all()) {
    if (!const_used[c.id]) continue;
    const_map[c.id] = pool.add(c.name, c.dtype, c.shape, c.bytes, c.layout);
  }
  g.constants = std::move(pool);
  // Renumber the constants: values keep their places now.
  compactValues(g, const_map);
  g.verify();
}

}  // namespace partita::passes
