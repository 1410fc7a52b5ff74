#include "compiler/manifest_encode.h"

#include <unordered_map>

#include "base/byte_io.h"

namespace partita::artifact {

namespace {

// Strings by index: each distinct string once, in order of first use.
class StringTable {
 public:
  uint32_t intern(const std::string& s) {
    auto [it, inserted] = index_.emplace(s, uint32_t(strings_.size()));
    if (inserted) strings_.push_back(s);
    return it->second;
  }
  const std::vector<std::string>& strings() const { return strings_; }

 private:
  std::unordered_map<std::string, uint32_t> index_;
  std::vector<std::string> strings_;
};

class Encoder {
 public:
  Encoder() { table.intern(""); }  // string 0 is the empty string (a writer's convention)
  void str(const std::string& s) { w.varint(table.intern(s)); }
  void keyValues(const KeyValues& kvs) {
    w.varint(kvs.size());
    for (const auto& [k, v] : kvs) {
      str(k);
      str(v);
    }
  }
  void type(const ir::TensorType& t) {
    w.u8(uint8_t(t.kind));
    if (t.kind == ValueKind::kOptional) w.u8(uint8_t(t.inner));
    w.u8(uint8_t(t.dtype));
    w.varint(t.has_rank ? t.dims.size() + 1 : 0);
    for (const ir::Dim& d : t.dims) {
      w.varint(d.value >= 0 ? uint64_t(d.value) + 1 : 0);
      if (d.value < 0) str(d.symbol);
    }
  }
  void attribute(const ir::Attribute& a) {
    using K = ir::Attribute::Kind;
    w.u8(uint8_t(a.kind));
    switch (a.kind) {
      case K::kInt: w.svarint(a.i); break;
      case K::kFloat: w.f32(a.f); break;
      case K::kString: str(a.s); break;
      case K::kInts:
        w.varint(a.ints.size());
        for (int64_t v : a.ints) w.svarint(v);
        break;
      case K::kFloats:
        w.varint(a.floats.size());
        for (float v : a.floats) w.f32(v);
        break;
      case K::kStrings:
        w.varint(a.strings.size());
        for (const std::string& s : a.strings) str(s);
        break;
      case K::kTensor: w.varint(a.tensor); break;
      case K::kGraph:
        // Subgraphs follow graph 0 in the order their attributes are written.
        subgraphs.push_back(a.graph.get());
        w.varint(subgraphs.size());
        break;
    }
  }
  // Value indices + 1; 0 for an omitted optional one.
  void ids(const std::vector<ir::ValueId>& ids) {
    w.varint(ids.size());
    for (ir::ValueId v : ids) w.varint(v == ir::kNoValue ? 0 : uint64_t(v) + 1);
  }
  void graph(const ir::Graph& g) {
    str(g.name);
    w.varint(g.values.size());
    for (const ir::Value& v : g.values) {
      str(v.name);
      type(v.type);
      w.varint(v.constant == ir::kNoConst ? 0 : uint64_t(v.constant) + 1);
    }
    w.varint(g.nodes.size());
    for (const ir::Node& n : g.nodes) {
      str(n.op_type);
      str(n.domain);
      w.varint(uint32_t(n.opset));
      str(n.name);
      ids(n.inputs);
      ids(n.outputs);
      w.varint(n.attrs.all().size());
      for (const auto& [name, a] : n.attrs.all()) {  // std::map: sorted, deterministic
        str(name);
        attribute(a);
      }
    }
    ids(g.inputs);
    ids(g.outputs);
  }

  ByteWriter w;
  StringTable table;
  std::vector<const ir::Graph*> subgraphs;  // graphs 1.. of the graph list
};

}  // namespace

std::vector<std::byte> encodeManifest(const Manifest& m) {
  Encoder e;
  ByteWriter& w = e.w;
  e.str(m.producer);
  e.str(m.executor);
  e.keyValues(m.metadata);

  w.varint(m.constants.size());
  for (const ConstantEntry& c : m.constants) {
    w.varint(c.id);
    e.str(c.name);
    w.u8(uint8_t(c.dtype));
    w.u8(uint8_t(c.storage));
    w.varint(c.shape.size());
    for (int64_t d : c.shape) w.varint(uint64_t(d));
    e.str(c.layout);
    w.u64(c.offset);  // fixed width: the writer fills offsets in after sizing the manifest
    w.u64(c.nbytes);
    w.u64(c.hash);
  }

  w.varint(m.modules.size());
  for (const ModuleEntry& mod : m.modules) {
    e.str(mod.kind);
    w.varint(mod.section == kNoSection ? 0 : uint64_t(mod.section) + 1);
    w.varint(mod.num_functions);
    w.varint(mod.uses.size());
    for (const ConstUse& u : mod.uses) {
      w.varint(u.id);
      w.u8(uint8_t(u.kind));
      if (u.kind == UseKind::kDerive) w.varint(u.source);
    }
    e.keyValues(mod.assumptions);
  }

  // Graph 0, then every subgraph in the order attributes refer to them (breadth first:
  // encoding one subgraph may append more), each with its capture count.
  ByteWriter graphs;
  std::swap(e.w, graphs);
  e.graph(m.graph);
  for (size_t i = 0; i < e.subgraphs.size(); ++i) {
    const ir::Graph& sub = *e.subgraphs[i];
    e.graph(sub);
    e.w.varint(sub.captures);
  }
  std::swap(e.w, graphs);
  w.varint(1 + e.subgraphs.size());
  w.raw(graphs.bytes().data(), graphs.bytes().size());

  ByteWriter out;
  out.varint(e.table.strings().size());
  for (const std::string& s : e.table.strings()) out.vstr(s);
  out.raw(w.bytes().data(), w.bytes().size());
  return std::move(out.bytes());
}

}  // namespace partita::artifact
