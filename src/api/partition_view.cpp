#include "api/partition_view.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <set>

#include "partita/error.h"
#include "runtime/graph_executor.h"

namespace partita::api {

namespace {

constexpr size_t kMaxListedHostNodes = 8;  // longer host runs are summarised by op type
constexpr const char* kHostColour = "#d9d9d9";
// One colour per external module kind, in the order the modules are numbered.
constexpr const char* kModuleColours[] = {"#8dd3c7", "#fdb462", "#bebada", "#fb8072",
                                          "#80b1d3", "#b3de69", "#fccde5", "#bc80bd"};

std::string qualifiedOp(const ir::Node& n) {
  return n.domain.empty() ? n.op_type : n.domain + "." + n.op_type;
}

std::string count(size_t n, const char* noun) { return std::to_string(n) + " " + noun + (n == 1 ? "" : "s"); }

// "Conv x20", "Relu x17", "MaxPool": most frequent first, ties in order of appearance.
std::vector<std::string> opCounts(const std::vector<std::string>& ops) {
  std::vector<std::pair<std::string, size_t>> counts;
  for (const std::string& op : ops) {
    auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == op; });
    if (it == counts.end())
      counts.emplace_back(op, 1);
    else
      ++it->second;
  }
  std::stable_sort(counts.begin(), counts.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<std::string> items;
  for (const auto& [op, n] : counts) items.push_back(n == 1 ? op : op + " x" + std::to_string(n));
  return items;
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string s;
  for (size_t i = 0; i < items.size(); ++i) s += (i ? sep : "") + items[i];
  return s;
}

std::string padRight(const std::string& s, size_t width) {
  return s.size() >= width ? s : s + std::string(width - s.size(), ' ');
}

std::string unitDescription(const PartitionUnit& u) {
  if (!u.recorded) return "nodes not recorded (compiled before partitions were recorded)";
  std::vector<std::string> items;
  if (u.backend == "host" && u.ops.size() <= kMaxListedHostNodes) {
    for (size_t i = 0; i < u.ops.size(); ++i)
      items.push_back(u.nodes[i].empty() ? u.ops[i] : u.ops[i] + " '" + u.nodes[i] + "'");
  } else {
    items = opCounts(u.ops);
  }
  return count(u.ops.size(), "node") + ": " + join(items, ", ");
}

// The external module kinds in module order, each with its colour.
std::map<std::string, std::string> moduleColours(const artifact::Artifact& a,
                                                 std::vector<std::string>* order) {
  std::map<std::string, std::string> colours;
  const size_t external = a.modules.empty() ? 0 : a.modules.size() - 1;  // the last is the graph executor
  for (size_t m = 0; m < external; ++m) {
    const std::string& kind = a.modules[m].kind;
    if (colours.count(kind)) continue;
    colours[kind] = kModuleColours[colours.size() % std::size(kModuleColours)];
    order->push_back(kind);
  }
  return colours;
}

std::string moduleKind(const artifact::Artifact& a, const ir::Node& call) {
  int64_t m = call.attrs.getInt("module", -1);  // the reader checked it names an external module
  return m >= 0 && size_t(m) < a.modules.size() ? a.modules[size_t(m)].kind : "?";
}

// A Graphviz quoted string: quotes and backslashes escaped, lines joined with \n.
std::string dotQuoted(const std::vector<std::string>& lines) {
  std::string s = "\"";
  for (size_t l = 0; l < lines.size(); ++l) {
    if (l) s += "\\n";
    for (char c : lines[l]) {
      if (c == '"' || c == '\\') s += '\\';
      if (c == '\n' || c == '\r') c = ' ';
      s += c;
    }
  }
  return s + "\"";
}

std::string typeLabel(const ir::TensorType& t) { return t.has_rank ? t.str() : std::string(); }

}  // namespace

std::vector<PartitionUnit> partitionUnits(const artifact::Artifact& a) { return partitionUnits(a, *a.graph); }

std::vector<PartitionUnit> partitionUnits(const artifact::Artifact& a, const ir::Graph& g) {
  std::vector<PartitionUnit> units;
  for (const ir::Node& n : g.nodes) {
    if (runtime::isCallNode(n)) {
      PartitionUnit u;
      u.name = n.name;
      u.backend = moduleKind(a, n);
      const ir::Attribute* ops = n.attrs.find("ops");
      const ir::Attribute* nodes = n.attrs.find("nodes");
      u.recorded = ops && nodes && ops->kind == ir::Attribute::Kind::kStrings &&
                   nodes->kind == ir::Attribute::Kind::kStrings &&
                   ops->strings.size() == nodes->strings.size();
      if (u.recorded) {
        u.ops = ops->strings;
        u.nodes = nodes->strings;
      }
      for (ir::ValueId v : n.inputs) u.polymorphic |= !g.typeOf(v).isStatic();
      for (ir::ValueId v : n.outputs) u.polymorphic |= v != ir::kNoValue && !g.typeOf(v).isStatic();
      if (u.polymorphic) {
        for (ir::ValueId v : n.inputs) u.inputs.push_back(g.value(v).name + " " + g.typeOf(v).str());
        const ir::Attribute* rep = n.attrs.find("representative");
        if (rep && rep->kind == ir::Attribute::Kind::kStrings) u.representative = rep->strings;
      }
      units.push_back(std::move(u));
      continue;
    }
    if (units.empty() || units.back().backend != "host")
      units.push_back(PartitionUnit{"host", "host", {}, {}, true, false, {}, {}});
    units.back().ops.push_back(qualifiedOp(n));
    units.back().nodes.push_back(n.name);
  }
  return units;
}

namespace {
void collectSubgraphs(const artifact::Artifact& a, const ir::Graph& g, const std::string& prefix, size_t depth,
                      std::vector<ArtifactInfo::Subgraph>& out) {
  for (const ir::Node& n : g.nodes)
    for (const auto& [name, attr] : n.attrs.all()) {
      if (attr.kind != ir::Attribute::Kind::kGraph || !attr.graph) continue;
      const ir::Graph& sub = *attr.graph;
      ArtifactInfo::Subgraph s;
      s.path = prefix + n.op_type + " '" + n.name + "' " + name;
      s.depth = depth;
      s.inputs = sub.inputs.size() - sub.captures;
      s.outputs = sub.outputs.size();
      s.captures = sub.captures;
      s.partition = partitionUnits(a, sub);
      std::set<uint32_t> ids;
      for (const ir::Value& v : sub.values)
        if (v.isConstant()) ids.insert(v.constant);
      for (const ir::Node& m : sub.nodes)
        for (const auto& [an, aa] : m.attrs.all())
          if (aa.kind == ir::Attribute::Kind::kTensor) ids.insert(aa.tensor);
      s.constants.assign(ids.begin(), ids.end());
      const std::string path = s.path;
      out.push_back(std::move(s));
      collectSubgraphs(a, sub, path + " / ", depth + 1, out);
    }
}
}  // namespace

std::vector<ArtifactInfo::Subgraph> subgraphsOf(const artifact::Artifact& a) {
  std::vector<ArtifactInfo::Subgraph> out;
  collectSubgraphs(a, *a.graph, "", 1, out);
  return out;
}

std::string subgraphText(const std::vector<ArtifactInfo::Subgraph>& subgraphs) {
  if (subgraphs.empty()) return {};
  std::string out = "subgraphs: " + std::to_string(subgraphs.size()) + " (their constants are in the weight table)\n";
  for (const ArtifactInfo::Subgraph& s : subgraphs) {
    const std::string indent(2 * s.depth, ' ');
    std::string ids;
    for (size_t i = 0; i < s.constants.size() && i < 16; ++i) ids += (i ? " " : "") + std::to_string(s.constants[i]);
    if (s.constants.size() > 16) ids += " ... (" + std::to_string(s.constants.size()) + ")";
    out += indent + s.path + ": " + count(s.inputs, "input") + ", " + count(s.captures, "outer value") + ", " +
           count(s.outputs, "output") + "; constants " + (ids.empty() ? std::string("none") : ids) + "\n";
    std::string part = partitionText(s.partition);
    size_t start = 0;
    while (start < part.size()) {
      size_t end = part.find('\n', start);
      if (end == std::string::npos) end = part.size();
      out += indent + "  " + part.substr(start, end - start) + "\n";
      start = end + 1;
    }
  }
  return out;
}

std::string partitionText(const std::vector<PartitionUnit>& units) {
  size_t host_nodes = 0;
  struct PerBackend {
    size_t regions = 0, nodes = 0, polymorphic = 0;
    bool all_recorded = true;
  };
  std::vector<std::pair<std::string, PerBackend>> backends;  // in order of first region
  for (const PartitionUnit& u : units) {
    if (u.backend == "host") {
      host_nodes += u.ops.size();
      continue;
    }
    auto it =
        std::find_if(backends.begin(), backends.end(), [&](const auto& b) { return b.first == u.backend; });
    if (it == backends.end()) {
      backends.emplace_back(u.backend, PerBackend{});
      it = backends.end() - 1;
    }
    ++it->second.regions;
    it->second.polymorphic += u.polymorphic;
    it->second.nodes += u.ops.size();
    it->second.all_recorded &= u.recorded;
  }
  if (backends.empty()) return "partition: host only (" + count(host_nodes, "node") + ")\n";

  std::vector<std::string> parts;
  for (const auto& [name, b] : backends)
    parts.push_back(count(b.regions, "region") + " on " + name + " (" +
                    (b.all_recorded ? count(b.nodes, "node") : std::string("nodes not recorded")) +
                    (b.polymorphic ? ", " + std::to_string(b.polymorphic) + " shape-polymorphic" : "") + ")");
  parts.push_back(count(host_nodes, "host node"));
  std::string out = "partition: " + join(parts, ", ") + "\n";

  size_t name_width = 0, backend_width = 0;
  for (const PartitionUnit& u : units) {
    name_width = std::max(name_width, u.name.size());
    if (u.backend != "host") backend_width = std::max(backend_width, u.backend.size());
  }
  for (const PartitionUnit& u : units) {
    out += "  " + padRight(u.name, name_width) + "  " +
           padRight(u.backend == "host" ? "" : u.backend, backend_width) + "  " + unitDescription(u) + "\n";
    if (u.polymorphic)
      out += "  " + std::string(name_width + backend_width + 4, ' ') + "shape-polymorphic: " + join(u.inputs, ", ") +
             (u.representative.empty() ? std::string() : "; compiled for " + join(u.representative, ", ") + " first") +
             "\n";
  }
  return out;
}

std::string partitionDot(const artifact::Artifact& a) {
  const ir::Graph& g = *a.graph;
  std::vector<std::string> kinds;
  const std::map<std::string, std::string> colours = moduleColours(a, &kinds);

  std::string out = "digraph partition {\n";
  out += "  graph [rankdir=TB, fontname=\"Helvetica\"];\n";
  out += "  node [fontname=\"Helvetica\", fontsize=10];\n";
  out += "  edge [fontname=\"Helvetica\", fontsize=9];\n";

  std::map<ir::ValueId, std::string> source;  // value -> the dot node it comes from
  for (size_t k = 0; k < g.inputs.size(); ++k) {
    const ir::Value& v = g.value(g.inputs[k]);
    out += "  in" + std::to_string(k) + " [shape=ellipse, label=" + dotQuoted({v.name, typeLabel(v.type)}) +
           "];\n";
    source[g.inputs[k]] = "in" + std::to_string(k);
  }
  bool has_host = false;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    const std::string id = "n" + std::to_string(i);
    std::vector<std::string> lines;
    std::string colour = kHostColour;
    if (runtime::isCallNode(n)) {
      auto it = colours.find(moduleKind(a, n));
      if (it != colours.end()) colour = it->second;
      lines.push_back(n.name);
      const ir::Attribute* ops = n.attrs.find("ops");
      if (ops && ops->kind == ir::Attribute::Kind::kStrings) {
        lines.push_back(count(ops->strings.size(), "node"));
        std::vector<std::string> items = opCounts(ops->strings);
        for (size_t k = 0; k < items.size(); k += 3)
          lines.push_back(join(std::vector<std::string>(items.begin() + long(k),
                                                        items.begin() + long(std::min(k + 3, items.size()))),
                               ", "));
      }
    } else {
      has_host = true;
      lines.push_back(qualifiedOp(n));
      if (!n.name.empty()) lines.push_back(n.name);
    }
    out += "  " + id + " [shape=box, style=filled, fillcolor=\"" + colour + "\", label=" + dotQuoted(lines) +
           "];\n";
    for (ir::ValueId out_v : n.outputs)
      if (out_v != ir::kNoValue) source[out_v] = id;
  }
  for (size_t k = 0; k < g.outputs.size(); ++k) {
    const ir::Value& v = g.value(g.outputs[k]);
    out += "  out" + std::to_string(k) + " [shape=ellipse, label=" + dotQuoted({v.name, typeLabel(v.type)}) +
           "];\n";
  }

  auto edge = [&](ir::ValueId v, const std::string& to) {
    auto it = source.find(v);
    if (it == source.end()) return;  // a constant
    out += "  " + it->second + " -> " + to + " [label=" + dotQuoted({typeLabel(g.typeOf(v))}) + "];\n";
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    std::set<ir::ValueId> seen;
    for (ir::ValueId v : g.nodes[i].inputs)
      if (v != ir::kNoValue && seen.insert(v).second) edge(v, "n" + std::to_string(i));
  }
  for (size_t k = 0; k < g.outputs.size(); ++k) edge(g.outputs[k], "out" + std::to_string(k));

  out += "  subgraph cluster_legend {\n    label=\"backends\";\n    style=dashed;\n";
  if (has_host)
    out += "    legend_host [shape=box, style=filled, fillcolor=\"" + std::string(kHostColour) +
           "\", label=\"host\"];\n";
  for (size_t k = 0; k < kinds.size(); ++k)
    out += "    legend_" + std::to_string(k) + " [shape=box, style=filled, fillcolor=\"" +
           colours.at(kinds[k]) + "\", label=" + dotQuoted({kinds[k]}) + "];\n";
  out += "  }\n}\n";
  return out;
}

}  // namespace partita::api
