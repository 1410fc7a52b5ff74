#include "compiler/partition.h"

#include <algorithm>
#include <queue>

#include "backend/constant_sink.h"
#include "compiler/backends.h"
#include "compiler/representative_shapes.h"
#include "partita/error.h"
#include "kernels/op_registry.h"
#include "runtime/graph_executor.h"

namespace partita::backend {

namespace {

constexpr int kHost = -1;

bool hostRuns(const ir::Node& n) {
  const kernels::OpDef* op = kernels::OpRegistry::global().find(n.domain, n.op_type);
  return op && op->hostRuns();
}

std::string opName(const ir::Node& n) { return n.domain.empty() ? n.op_type : n.domain + "." + n.op_type; }

ir::Attribute stringsAttribute(std::vector<std::string> strings) {
  ir::Attribute a;
  a.kind = ir::Attribute::Kind::kStrings;
  a.strings = std::move(strings);
  return a;
}

// Whether every value `node` reads or makes has a static shape (or, with `ranked`,
// at least a known rank) in `g`.
bool allValues(const ir::Graph& g, const ir::Node& node, bool ranked) {
  auto ok = [&](ir::ValueId v) {
    if (v == ir::kNoValue) return true;
    const ir::TensorType& t = g.typeOf(v);
    return ranked ? t.has_rank : t.isStatic();
  };
  return std::all_of(node.inputs.begin(), node.inputs.end(), ok) &&
         std::all_of(node.outputs.begin(), node.outputs.end(), ok);
}

// Whether every value `node` reads or makes is a tensor: a node touching a sequence or
// optional stays on the host, whatever a backend would say of its op.
bool onlyTensors(const ir::Graph& g, const ir::Node& node) {
  auto tensor = [&](ir::ValueId v) { return v == ir::kNoValue || g.typeOf(v).isTensor(); };
  return std::all_of(node.inputs.begin(), node.inputs.end(), tensor) &&
         std::all_of(node.outputs.begin(), node.outputs.end(), tensor);
}

std::string shapeText(const std::vector<int64_t>& shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
  return s.empty() ? "scalar" : s;
}

struct Partitioner {
  ir::Graph& g;
  const PartitionOptions& options;
  std::unique_ptr<ir::Graph> rep;  // g at its representative shape, when g has symbolic dims
  std::vector<std::unique_ptr<Backend>> backends;
  std::vector<int> backend_of;                 // per node: backend index or kHost
  std::vector<int> region_of;                  // per node: region index or -1
  std::vector<std::vector<ir::NodeId>> region_nodes;
  std::vector<int> region_backend;
  std::vector<std::vector<ir::NodeId>> consumers;  // per value
  std::vector<bool> shape_node;  // per node, with `rep`: a shape computation (shapeComputations)

  bool allowed(size_t b, const ir::Node& node) const {
    const std::string& name = std::string(backends[b]->name());
    auto a = options.allow_ops.find(name);
    if (a != options.allow_ops.end() && !a->second.count(node.op_type)) return false;
    auto d = options.deny_ops.find(name);
    if (d != options.deny_ops.end() && d->second.count(node.op_type)) return false;
    return true;
  }

  // True when some node in `producers` (outside region r) is reachable from region r
  // among the nodes processed so far (index < limit), treating regions as units.
  bool reachesAny(int r, const std::vector<ir::NodeId>& producers, ir::NodeId limit) const {
    std::vector<bool> seen(g.nodes.size(), false), region_seen(region_nodes.size(), false);
    std::vector<ir::NodeId> stack;
    auto visitRegion = [&](int reg) {
      if (region_seen[size_t(reg)]) return;
      region_seen[size_t(reg)] = true;
      for (ir::NodeId m : region_nodes[size_t(reg)])
        if (!seen[size_t(m)]) {
          seen[size_t(m)] = true;
          stack.push_back(m);
        }
    };
    visitRegion(r);
    while (!stack.empty()) {
      ir::NodeId m = stack.back();
      stack.pop_back();
      for (ir::ValueId out : g.nodes[size_t(m)].outputs) {
        if (out == ir::kNoValue) continue;
        for (ir::NodeId c : consumers[size_t(out)]) {
          if (c >= limit || seen[size_t(c)]) continue;
          seen[size_t(c)] = true;
          stack.push_back(c);
          if (region_of[size_t(c)] >= 0) visitRegion(region_of[size_t(c)]);
        }
      }
    }
    for (ir::NodeId p : producers)
      if (seen[size_t(p)] && region_of[size_t(p)] != r) return true;
    return false;
  }

  void formRegions() {
    const size_t n = g.nodes.size();
    backend_of.assign(n, kHost);
    region_of.assign(n, -1);
    consumers.assign(g.values.size(), {});
    for (size_t i = 0; i < n; ++i)
      for (ir::ValueId in : g.nodes[i].inputs)
        if (in != ir::kNoValue) consumers[size_t(in)].push_back(ir::NodeId(i));

    if (rep) shape_node = shapeComputations(g);
    for (size_t i = 0; i < n; ++i) {
      const ir::Node& node = g.nodes[i];
      if (!onlyTensors(g, node)) continue;
      // Shape computations go with the node that reads them, when a backend takes it
      // (below); else they stay on the host.
      if (rep && shape_node[i]) continue;
      // A node with symbolic dims is asked at the representative shape too.
      const bool fixed = allValues(g, node, false);
      const bool polymorphic = !fixed && rep && allValues(g, node, true) && allValues(*rep, node, false);
      // The shape computations a shape-polymorphic node reads (a Reshape's target),
      // unless one is already another's: they join its region and are computed there
      // at each shape. (A node of static shapes is asked about `g`, where they are
      // values computed before it, as before.)
      std::vector<ir::NodeId> closure;
      bool closure_free = true;
      if (polymorphic) {
        std::optional<std::vector<ir::NodeId>> found = shapeClosure(g, shape_node, ir::NodeId(i));
        closure_free = found.has_value();
        if (found) closure = std::move(*found);
        for (ir::NodeId c : closure) closure_free &= region_of[size_t(c)] < 0;
      }
      for (size_t b = 0; b < backends.size(); ++b) {
        if (!allowed(b, node)) continue;
        if ((!closure.empty() || !closure_free) && (!closure_free || !backends[b]->evaluatesShapeValues())) continue;
        const bool takes = fixed ? backends[b]->supports(g, ir::NodeId(i))
                                 : polymorphic && backends[b]->supportsPolymorphic(g, *rep, ir::NodeId(i));
        if (takes) {
          backend_of[i] = int(b);
          break;
        }
      }
      if (backend_of[i] == kHost) continue;
      // What it waits for: its inputs' producers and those of the values whose shapes
      // its shape computations read (those come along).
      std::vector<ir::NodeId> producers;
      auto waitFor = [&](ir::ValueId in) {
        if (in == ir::kNoValue) return;
        const ir::NodeId p = g.value(in).producer;
        if (p != ir::kNoNode && !std::binary_search(closure.begin(), closure.end(), p)) producers.push_back(p);
      };
      for (ir::ValueId in : node.inputs) waitFor(in);
      for (ir::NodeId c : closure)
        for (ir::ValueId in : g.nodes[size_t(c)].inputs) waitFor(in);
      int joined = -1;
      for (ir::NodeId p : producers) {
        int r = region_of[size_t(p)];
        if (r < 0 || region_backend[size_t(r)] != backend_of[i]) continue;
        if (!reachesAny(r, producers, ir::NodeId(i))) {
          joined = r;
          break;
        }
      }
      if (joined < 0) {
        joined = int(region_nodes.size());
        region_nodes.emplace_back();
        region_backend.push_back(backend_of[i]);
      }
      for (ir::NodeId c : closure) {
        region_of[size_t(c)] = joined;
        backend_of[size_t(c)] = backend_of[i];
        region_nodes[size_t(joined)].push_back(c);
      }
      region_of[i] = joined;
      region_nodes[size_t(joined)].push_back(ir::NodeId(i));
    }
    // Regions below the minimum size go back to the host, unless the host cannot run
    // one of their nodes (an infer-only op).
    for (size_t r = 0; r < region_nodes.size(); ++r) {
      if (region_nodes[r].size() >= std::max<size_t>(options.min_region_size, 1)) continue;
      if (!std::all_of(region_nodes[r].begin(), region_nodes[r].end(),
                       [&](ir::NodeId m) { return hostRuns(g.nodes[size_t(m)]); }))
        continue;
      for (ir::NodeId m : region_nodes[r]) {
        region_of[size_t(m)] = -1;
        backend_of[size_t(m)] = kHost;
      }
      region_nodes[r].clear();
    }
  }

  // The one check that every node left on the host has a host kernel (an infer-only
  // op needs a backend): Error(kUnsupported) listing each missing op with its nodes
  // and why each enabled backend refused the first of them.
  void checkHostKernels() const {
    std::map<std::string, std::vector<ir::NodeId>> missing;  // op -> nodes
    for (size_t i = 0; i < g.nodes.size(); ++i)
      if ((backend_of.empty() || backend_of[i] == kHost) && !hostRuns(g.nodes[i]))
        missing[opName(g.nodes[i])].push_back(ir::NodeId(i));
    if (missing.empty()) return;
    std::string msg = "no host kernel for ";
    bool first = true;
    for (const auto& [op, nodes] : missing) {
      msg += (first ? "" : "; ") + op + " (node";
      msg += nodes.size() > 1 ? "s " : " ";
      for (size_t i = 0; i < nodes.size() && i < 3; ++i) msg += (i ? ", '" : "'") + g.nodes[size_t(nodes[i])].name + "'";
      if (nodes.size() > 3) msg += ", +" + std::to_string(nodes.size() - 3) + " more";
      msg += ")";
      first = false;
    }
    if (backends.empty()) {
      msg += ", and no external backend is enabled (see --backends)";
    } else {
      const ir::NodeId example = missing.begin()->second.front();
      msg += ", and no enabled backend took it";
      for (size_t b = 0; b < backends.size(); ++b) {
        std::string why = allowed(b, g.nodes[size_t(example)]) ? backends[b]->whyNot(g, example)
                                                               : "excluded by the op allow/deny lists";
        msg += " (" + std::string(backends[b]->name()) + ": " + (why.empty() ? "refused" : why) + ")";
      }
    }
    throw Error(ErrorCode::kUnsupported, msg);
  }

  Region describeRegion(const std::vector<ir::NodeId>& nodes, int r) const {
    Region region;
    region.nodes = nodes;
    std::vector<bool> is_output(g.values.size(), false);
    for (ir::ValueId out : g.outputs) is_output[size_t(out)] = true;
    for (ir::NodeId m : nodes) {
      for (ir::ValueId in : g.nodes[size_t(m)].inputs) {
        if (in == ir::kNoValue || g.value(in).isConstant()) continue;
        ir::NodeId p = g.value(in).producer;
        if (p != ir::kNoNode && region_of[size_t(p)] == r) continue;
        if (std::find(region.inputs.begin(), region.inputs.end(), in) == region.inputs.end())
          region.inputs.push_back(in);
      }
      for (ir::ValueId out : g.nodes[size_t(m)].outputs) {
        if (out == ir::kNoValue) continue;
        bool outside = is_output[size_t(out)];
        for (ir::NodeId c : consumers[size_t(out)]) outside |= region_of[size_t(c)] != r;
        if (outside) region.outputs.push_back(out);
      }
    }
    bool polymorphic = false;
    for (ir::NodeId m : nodes) polymorphic |= !allValues(g, g.nodes[size_t(m)], false);
    if (polymorphic)
      for (ir::ValueId in : region.inputs) region.representative.push_back(rep->typeOf(in).staticShape());
    return region;
  }
};

}  // namespace

PartitionResult partitionGraph(ir::Graph& g, const PartitionOptions& options) {
  Partitioner p{g, options, {}, {}, {}, {}, {}, {}, {}, {}};
  for (const std::string& name : options.backends) {
    if (name == "host") continue;
    std::unique_ptr<Backend> b = makeBackend(name);
    if (!b) {
      std::string known = "host";
      for (const std::string& k : backendNames()) known += ", " + k;
      throw Error(ErrorCode::kInvalidArgument, "unknown backend '" + name + "' (this build has: " + known + ")");
    }
    b->setFloatPrecision(options.float_precision);
    p.backends.push_back(std::move(b));
  }
  PartitionResult result;
  if (!p.backends.empty() && options.shape_polymorphic && hasSymbolicDims(g)) {
    privatizeShapeComputations(g);
    p.rep = std::make_unique<ir::Graph>(representativeGraph(g, options.shape_hints));
  }
  if (!p.backends.empty()) p.formRegions();
  p.checkHostKernels();
  if (p.backends.empty()) return result;

  // Compile each backend's regions into one module; function index = order.
  std::vector<int> module_of_region(p.region_nodes.size(), -1), function_of_region(p.region_nodes.size(), -1),
      summary_of_region(p.region_nodes.size(), -1);
  std::vector<Region> regions(p.region_nodes.size());
  for (size_t r = 0; r < p.region_nodes.size(); ++r)
    if (!p.region_nodes[r].empty()) regions[r] = p.describeRegion(p.region_nodes[r], int(r));
  // Shape-polymorphic regions: their inputs at the probe shapes too.
  bool any_polymorphic = false;
  for (const Region& r : regions) any_polymorphic |= r.polymorphic();
  if (any_polymorphic && options.layout_probes)
    for (const auto& hints : probeShapes(g, *p.rep)) {
      ir::Graph at;
      try {
        at = representativeGraph(g, hints);
      } catch (const Error&) {
        continue;
      }
      for (Region& r : regions) {
        if (!r.polymorphic()) continue;
        std::vector<std::vector<int64_t>> shapes;
        for (ir::ValueId in : r.inputs)
          if (at.typeOf(in).isStatic()) shapes.push_back(at.typeOf(in).staticShape());
        if (shapes.size() == r.inputs.size() && shapes != r.representative) r.probes.push_back(std::move(shapes));
      }
    }
  for (size_t b = 0; b < p.backends.size(); ++b) {
    std::vector<Region> mine;
    std::vector<size_t> ids;
    for (size_t r = 0; r < p.region_nodes.size(); ++r) {
      if (p.region_nodes[r].empty() || p.region_backend[r] != int(b)) continue;
      mine.push_back(regions[r]);
      ids.push_back(r);
    }
    if (mine.empty()) continue;
    // The backend reads g; its derived tensors get IDs after the pool's and join it
    // once compile returns.
    PendingConstants derived(g.constants);
    ModuleImage image = p.backends[b]->compile(g, mine, derived);
    derived.commit(g.constants);
    image.num_functions = uint32_t(mine.size());
    for (size_t f = 0; f < ids.size(); ++f) {
      module_of_region[ids[f]] = int(result.modules.size());
      function_of_region[ids[f]] = int(f);
      RegionSummary s;
      s.backend = std::string(p.backends[b]->name());
      s.module = result.modules.size();
      s.function = f;
      for (ir::NodeId m : mine[f].nodes) {
        const ir::Node& node = g.nodes[size_t(m)];
        s.ops.push_back(node.domain.empty() ? node.op_type : node.domain + "." + node.op_type);
        s.nodes.push_back(node.name);
      }
      for (const std::vector<int64_t>& shape : mine[f].representative) s.representative.push_back(shapeText(shape));
      summary_of_region[ids[f]] = int(result.regions.size());
      result.regions.push_back(std::move(s));
    }
    result.modules.push_back(std::move(image));
  }

  // Rebuild the node list: host nodes as they are, each region as one Call node,
  // in a topological order of these units (ties broken by first original index).
  const size_t n = g.nodes.size();
  std::vector<int> unit_of(n);
  std::vector<ir::NodeId> unit_first;  // first original node of each unit
  std::vector<int> region_unit(p.region_nodes.size(), -1);
  for (size_t i = 0; i < n; ++i) {
    int r = p.region_of[i];
    if (r >= 0 && region_unit[size_t(r)] >= 0) {
      unit_of[i] = region_unit[size_t(r)];
      continue;
    }
    unit_of[i] = int(unit_first.size());
    if (r >= 0) region_unit[size_t(r)] = unit_of[i];
    unit_first.push_back(ir::NodeId(i));
  }
  const size_t units = unit_first.size();
  std::vector<std::vector<int>> succ(units);
  std::vector<int> indegree(units, 0);
  for (size_t i = 0; i < n; ++i)
    for (ir::ValueId in : g.nodes[i].inputs) {
      if (in == ir::kNoValue) continue;
      ir::NodeId prod = g.value(in).producer;
      if (prod == ir::kNoNode || unit_of[size_t(prod)] == unit_of[i]) continue;
      succ[size_t(unit_of[size_t(prod)])].push_back(unit_of[i]);
      ++indegree[size_t(unit_of[i])];
    }
  std::priority_queue<std::pair<ir::NodeId, int>, std::vector<std::pair<ir::NodeId, int>>, std::greater<>> ready;
  for (size_t u = 0; u < units; ++u)
    if (indegree[u] == 0) ready.push({unit_first[u], int(u)});
  std::vector<ir::Node> rebuilt;
  std::vector<int> unit_region(units, -1);
  for (size_t r = 0; r < region_unit.size(); ++r)
    if (region_unit[r] >= 0) unit_region[size_t(region_unit[r])] = int(r);
  while (!ready.empty()) {
    auto [first, u] = ready.top();
    ready.pop();
    int r = unit_region[size_t(u)];
    if (r < 0) {
      rebuilt.push_back(std::move(g.nodes[size_t(first)]));
    } else {
      ir::Node call;
      call.domain = runtime::kCallDomain;
      call.op_type = runtime::kCallOp;
      call.opset = 1;
      call.name = std::string(p.backends[size_t(p.region_backend[size_t(r)])]->name()) + "_region_" +
                  std::to_string(module_of_region[size_t(r)]) + "_" + std::to_string(function_of_region[size_t(r)]);
      call.inputs = regions[size_t(r)].inputs;
      call.outputs = regions[size_t(r)].outputs;
      call.attrs.setInt("module", module_of_region[size_t(r)]);
      call.attrs.setInt("function", function_of_region[size_t(r)]);
      // What the call replaced, for `partita inspect`; the executor reads only module and function.
      const RegionSummary& summary = result.regions[size_t(summary_of_region[size_t(r)])];
      call.attrs.set("ops", stringsAttribute(summary.ops));
      call.attrs.set("nodes", stringsAttribute(summary.nodes));
      if (!summary.representative.empty()) call.attrs.set("representative", stringsAttribute(summary.representative));
      rebuilt.push_back(std::move(call));
    }
    for (int s : succ[size_t(u)])
      if (--indegree[size_t(s)] == 0) ready.push({unit_first[size_t(s)], s});
  }
  if (rebuilt.size() != units)
    throw Error(ErrorCode::kInternal, "partitioning produced a cycle between regions");
  // Values produced inside regions but not exported lose their producer.
  for (ir::Value& v : g.values) v.producer = ir::kNoNode;
  g.nodes = std::move(rebuilt);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (ir::ValueId out : g.nodes[i].outputs)
      if (out != ir::kNoValue) g.value(out).producer = ir::NodeId(i);
  g.verify();
  return result;
}

}  // namespace partita::backend
