#include "runtime/manifest.h"

#include <algorithm>

#include "base/byte_io.h"

namespace partita::artifact {

namespace {

// Smallest encoded sizes, used to reject counts that cannot fit before allocating.
constexpr size_t kMinString = 1;
constexpr size_t kMinKeyValue = 2;
constexpr size_t kMinConstantEntry = 1 + 1 + 1 + 1 + 1 + 1 + 8 + 8 + 8;
constexpr size_t kMinModuleEntry = 1 + 1 + 1 + 1 + 1;
constexpr size_t kMinUse = 2;
constexpr size_t kMinValue = 1 + 3 + 1;
constexpr size_t kMinDim = 1;
constexpr size_t kMinNode = 7;
constexpr size_t kMinAttribute = 2;
constexpr size_t kMinGraph = 5;

class Decoder {
 public:
  Decoder(const std::byte* data, size_t size) : r(data, size, "the manifest") {}

  void stringTable() {
    uint32_t n = r.vcount(kMinString, "strings");
    strings.resize(n);
    for (std::string& s : strings) s = r.vstr();
  }
  const std::string& str() {
    uint64_t i = r.varint();
    if (i >= strings.size())
      r.fail("string index " + std::to_string(i) + " is out of range (the string table has " +
             std::to_string(strings.size()) + ")");
    return strings[size_t(i)];
  }
  KeyValues keyValues(const char* what) {
    KeyValues kvs(r.vcount(kMinKeyValue, what));
    for (auto& [k, v] : kvs) {
      k = str();
      v = str();
    }
    return kvs;
  }
  ir::DType dtype() {
    uint8_t d = r.u8();
    if (d >= ir::kNumDTypes) r.fail("unknown dtype code " + std::to_string(d));
    return ir::DType(d);
  }
  ir::TensorType type() {
    uint8_t kind = r.u8();
    if (kind > uint8_t(ValueKind::kOptional)) r.fail("unknown value kind " + std::to_string(kind));
    ir::TensorType t;
    t.kind = ValueKind(kind);
    if (t.kind == ValueKind::kOptional) {
      // What the optional holds: a tensor or a sequence (never another optional).
      const uint8_t inner = r.u8();
      if (inner > uint8_t(ValueKind::kSequence))
        r.fail("an optional of value kind " + std::to_string(inner) + " (it holds a tensor or a sequence)");
      t.inner = ValueKind(inner);
    }
    t.dtype = dtype();
    uint32_t rank1 = r.vcount(0, "dimensions");
    t.has_rank = rank1 != 0;
    if (rank1 > r.remaining() + 1) r.fail("a rank of " + std::to_string(rank1 - 1) + " that cannot fit");
    t.dims.resize(t.has_rank ? rank1 - 1 : 0);
    for (ir::Dim& d : t.dims) {
      uint64_t u = r.varint();
      if (u == 0) {
        d.value = -1;
        d.symbol = str();
      } else {
        if (u - 1 > uint64_t(INT64_MAX)) r.fail("a dimension of " + std::to_string(u - 1));
        d.value = int64_t(u - 1);
      }
    }
    return t;
  }
  ir::Attribute attribute() {
    using K = ir::Attribute::Kind;
    ir::Attribute a;
    uint8_t kind = r.u8();
    if (kind < uint8_t(K::kInt) || kind > uint8_t(K::kGraph)) r.fail("unknown attribute kind " + std::to_string(kind));
    a.kind = K(kind);
    switch (a.kind) {
      case K::kInt: a.i = r.svarint(); break;
      case K::kFloat: a.f = r.f32(); break;
      case K::kString: a.s = str(); break;
      case K::kInts:
        a.ints.resize(r.vcount(1, "ints"));
        for (int64_t& v : a.ints) v = r.svarint();
        break;
      case K::kFloats:
        a.floats.resize(r.vcount(4, "floats"));
        for (float& v : a.floats) v = r.f32();
        break;
      case K::kStrings:
        a.strings.resize(r.vcount(1, "strings"));
        for (std::string& s : a.strings) s = str();
        break;
      case K::kTensor: a.tensor = r.varint32("a tensor attribute's constant id"); break;
      case K::kGraph: a.i = int64_t(r.varint32("a graph attribute's graph index")); break;  // linked later
    }
    return a;
  }
  std::vector<ir::ValueId> ids(size_t nvalues, bool allow_none, const char* what) {
    std::vector<ir::ValueId> ids(r.vcount(1, what));
    for (ir::ValueId& v : ids) {
      uint64_t u = r.varint();
      if (u == 0 && allow_none) {
        v = ir::kNoValue;
        continue;
      }
      if (u == 0 || u > nvalues)
        r.fail(std::string(what) + " refer to value " + (u == 0 ? std::string("-1") : std::to_string(u - 1)) +
               " of " + std::to_string(nvalues));
      v = ir::ValueId(u - 1);
    }
    return ids;
  }
  void graph(ir::Graph& g) {
    g.name = str();
    uint32_t nvalues = r.vcount(kMinValue, "values");
    g.values.resize(nvalues);
    for (ir::Value& v : g.values) {
      v.name = str();
      v.type = type();
      uint32_t c = r.varint32("a value's constant id");
      v.constant = c == 0 ? ir::kNoConst : c - 1;
    }
    uint32_t nnodes = r.vcount(kMinNode, "nodes");
    g.nodes.resize(nnodes);
    for (size_t n = 0; n < nnodes; ++n) {
      ir::Node& node = g.nodes[n];
      node.op_type = str();
      node.domain = str();
      node.opset = int(r.varint32("an opset"));
      node.name = str();
      node.inputs = ids(nvalues, true, "node inputs");
      node.outputs = ids(nvalues, true, "node outputs");
      uint32_t nattrs = r.vcount(kMinAttribute, "attributes");
      for (uint32_t a = 0; a < nattrs; ++a) {
        std::string name = str();
        if (node.attrs.has(name)) r.fail("node '" + node.name + "' repeats attribute '" + name + "'");
        node.attrs.set(name, attribute());
      }
      for (ir::ValueId out : node.outputs)
        if (out != ir::kNoValue) g.values[size_t(out)].producer = ir::NodeId(n);
    }
    g.inputs = ids(nvalues, false, "graph inputs");
    g.outputs = ids(nvalues, false, "graph outputs");
  }

  ByteReader r;
  std::vector<std::string> strings;
};

}  // namespace

Manifest decodeManifest(const std::byte* data, size_t size) {
  Decoder d(data, size);
  ByteReader& r = d.r;
  Manifest m;
  d.stringTable();
  m.producer = d.str();
  m.executor = d.str();  // which kinds a runtime has is the loader's to decide (executor_kinds.h)
  if (m.executor.empty()) r.fail("the entry program has no executor kind");
  m.metadata = d.keyValues("metadata entries");

  uint32_t nconst = r.vcount(kMinConstantEntry, "constants");
  m.constants.resize(nconst);
  for (ConstantEntry& c : m.constants) {
    c.id = r.varint32("a constant id");
    c.name = d.str();
    c.dtype = d.dtype();
    uint8_t storage = r.u8();
    if (storage != uint8_t(Storage::kWeights) && storage != uint8_t(Storage::kEmbedded))
      r.fail("constant " + std::to_string(c.id) + " has unknown storage " + std::to_string(storage));
    c.storage = Storage(storage);
    c.shape.resize(r.vcount(1, "dimensions"));
    for (int64_t& dim : c.shape) dim = int64_t(r.varint());  // > INT64_MAX reads as negative: rejected by the reader
    c.layout = d.str();
    c.offset = r.u64();
    c.nbytes = r.u64();
    c.hash = r.u64();
  }

  uint32_t nmod = r.vcount(kMinModuleEntry, "modules");
  m.modules.resize(nmod);
  for (ModuleEntry& mod : m.modules) {
    mod.kind = d.str();
    uint32_t section = r.varint32("a module's section");
    mod.section = section == 0 ? kNoSection : section - 1;
    mod.num_functions = r.varint32("a module's function count");
    mod.uses.resize(r.vcount(kMinUse, "constant uses"));
    for (ConstUse& u : mod.uses) {
      u.id = r.varint32("a constant id");
      uint8_t kind = r.u8();
      if (kind < uint8_t(UseKind::kBorrow) || kind > uint8_t(UseKind::kEmbed))
        r.fail("module '" + mod.kind + "' has a use of unknown kind " + std::to_string(kind));
      u.kind = UseKind(kind);
      u.source = u.kind == UseKind::kDerive ? r.varint32("a derived constant's source id") : ir::kNoConst;
    }
    mod.assumptions = d.keyValues("assumptions");
  }

  uint32_t ngraphs = r.vcount(kMinGraph, "graphs");
  if (ngraphs == 0) r.fail("no graphs (graph 0 is the entry program)");
  d.graph(m.graph);
  // Subgraphs (If/Loop/Scan bodies), each followed by its capture count.
  std::vector<std::shared_ptr<ir::Graph>> subgraphs(ngraphs);
  for (uint32_t i = 1; i < ngraphs; ++i) {
    subgraphs[i] = std::make_shared<ir::Graph>();
    d.graph(*subgraphs[i]);
    subgraphs[i]->captures = r.varint32("a subgraph's capture count");
    if (subgraphs[i]->captures > subgraphs[i]->inputs.size())
      r.fail("graph " + std::to_string(i) + " reads " + std::to_string(subgraphs[i]->captures) +
             " outer values but has " + std::to_string(subgraphs[i]->inputs.size()) + " inputs");
  }
  if (r.remaining() != 0) r.fail(std::to_string(r.remaining()) + " unexpected bytes after the graphs");
  // Graph attributes refer to graphs 1.., each exactly once, nested at most
  // ir::kMaxGraphDepth deep below graph 0: a tree, never a cycle or a shared body.
  std::vector<uint8_t> referenced(ngraphs, 0);
  std::vector<std::pair<ir::Graph*, int>> stack = {{&m.graph, 0}};
  size_t reached = 1;
  while (!stack.empty()) {
    auto [g, depth] = stack.back();
    stack.pop_back();
    for (ir::Node& node : g->nodes)
      for (const auto& [name, a] : node.attrs.all()) {
        if (a.kind != ir::Attribute::Kind::kGraph) continue;
        const int64_t idx = a.i;
        if (idx < 1 || idx >= int64_t(ngraphs))
          r.fail("node '" + node.name + "' attribute '" + name + "' refers to graph " + std::to_string(idx) + " of " +
                 std::to_string(ngraphs) + (idx == 0 ? " (graph 0 is the entry program)" : ""));
        if (referenced[size_t(idx)]++)
          r.fail("graph " + std::to_string(idx) + " is the body of more than one attribute");
        if (depth + 1 >= ir::kMaxGraphDepth)
          r.fail("subgraphs nest deeper than " + std::to_string(ir::kMaxGraphDepth) + " levels");
        ir::Attribute linked = a;
        linked.i = 0;
        linked.graph = subgraphs[size_t(idx)];
        node.attrs.set(name, std::move(linked));
        stack.push_back({subgraphs[size_t(idx)].get(), depth + 1});
        ++reached;
      }
  }
  if (reached != ngraphs)
    r.fail(std::to_string(ngraphs - reached) + " graphs are not reached from graph 0 (unused or in a cycle)");

  // Consumers are not stored: they are the module table's uses, per constant.
  for (size_t mi = 0; mi < m.modules.size(); ++mi)
    for (const ConstUse& u : m.modules[mi].uses) {
      auto it = std::lower_bound(m.constants.begin(), m.constants.end(), u.id,
                                 [](const ConstantEntry& c, ir::ConstId want) { return c.id < want; });
      if (it != m.constants.end() && it->id == u.id &&
          (it->consumers.empty() || it->consumers.back() != uint32_t(mi)))
        it->consumers.push_back(uint32_t(mi));
    }
  return m;
}

}  // namespace partita::artifact
