#include "runtime/manifest.h"

#include "base/byte_io.h"

namespace partita::artifact {

namespace {

// Smallest encoded sizes, used to reject counts that cannot fit before allocating.
constexpr size_t kMinConstantEntry = 4 + 4 + 1 + 1 + 4 + 4 + 8 + 8 + 8 + 4;
constexpr size_t kMinModuleEntry = 4 + 4 + 4 + 4;
constexpr size_t kUseEntry = 4 + 1 + 4;
constexpr size_t kMinValue = 4 + 1 + 1 + 4 + 4;
constexpr size_t kMinDim = 8 + 4;
constexpr size_t kMinNode = 4 + 4 + 4 + 4 + 4 + 4 + 4;
constexpr size_t kMinAttribute = 4 + 1 + 4;

void encodeType(ByteWriter& w, const ir::TensorType& t) {
  w.u8(uint8_t(t.dtype));
  w.u8(t.has_rank ? 1 : 0);
  w.u32(uint32_t(t.dims.size()));
  for (const ir::Dim& d : t.dims) {
    w.i64(d.value);
    w.str(d.symbol);
  }
}

void encodeAttribute(ByteWriter& w, const ir::Attribute& a) {
  using K = ir::Attribute::Kind;
  w.u8(uint8_t(a.kind));
  switch (a.kind) {
    case K::kInt: w.i64(a.i); break;
    case K::kFloat: w.f32(a.f); break;
    case K::kString: w.str(a.s); break;
    case K::kInts:
      w.u32(uint32_t(a.ints.size()));
      for (int64_t v : a.ints) w.i64(v);
      break;
    case K::kFloats:
      w.u32(uint32_t(a.floats.size()));
      for (float v : a.floats) w.f32(v);
      break;
    case K::kStrings:
      w.u32(uint32_t(a.strings.size()));
      for (const std::string& s : a.strings) w.str(s);
      break;
    case K::kTensor: w.u32(a.tensor); break;
  }
}

void encodeIds(ByteWriter& w, const std::vector<ir::ValueId>& ids) {
  w.u32(uint32_t(ids.size()));
  for (ir::ValueId v : ids) w.i32(v);
}

ir::DType readDType(ByteReader& r) {
  uint8_t d = r.u8();
  if (d >= ir::kNumDTypes) r.fail("unknown dtype code " + std::to_string(d));
  return ir::DType(d);
}

ir::TensorType decodeType(ByteReader& r) {
  ir::TensorType t;
  t.dtype = readDType(r);
  uint8_t has_rank = r.u8();
  if (has_rank > 1) r.fail("has_rank must be 0 or 1");
  t.has_rank = has_rank == 1;
  uint32_t rank = r.count(kMinDim, "dimensions");
  if (!t.has_rank && rank != 0) r.fail("an unranked type with dimensions");
  t.dims.resize(rank);
  for (ir::Dim& d : t.dims) {
    d.value = r.i64();
    if (d.value < -1) r.fail("a dimension of " + std::to_string(d.value));
    d.symbol = r.str();
  }
  return t;
}

ir::Attribute decodeAttribute(ByteReader& r) {
  using K = ir::Attribute::Kind;
  ir::Attribute a;
  uint8_t kind = r.u8();
  if (kind < uint8_t(K::kInt) || kind > uint8_t(K::kTensor)) r.fail("unknown attribute kind " + std::to_string(kind));
  a.kind = K(kind);
  switch (a.kind) {
    case K::kInt: a.i = r.i64(); break;
    case K::kFloat: a.f = r.f32(); break;
    case K::kString: a.s = r.str(); break;
    case K::kInts: {
      uint32_t n = r.count(8, "ints");
      a.ints.resize(n);
      for (int64_t& v : a.ints) v = r.i64();
      break;
    }
    case K::kFloats: {
      uint32_t n = r.count(4, "floats");
      a.floats.resize(n);
      for (float& v : a.floats) v = r.f32();
      break;
    }
    case K::kStrings: {
      uint32_t n = r.count(4, "strings");
      a.strings.resize(n);
      for (std::string& s : a.strings) s = r.str();
      break;
    }
    case K::kTensor: a.tensor = r.u32(); break;
  }
  return a;
}

std::vector<ir::ValueId> decodeIds(ByteReader& r, size_t nvalues, bool allow_none, const char* what) {
  uint32_t n = r.count(4, what);
  std::vector<ir::ValueId> ids(n);
  for (ir::ValueId& v : ids) {
    v = r.i32();
    if (v == ir::kNoValue && allow_none) continue;
    if (v < 0 || size_t(v) >= nvalues)
      r.fail(std::string(what) + " refer to value " + std::to_string(v) + " of " + std::to_string(nvalues));
  }
  return ids;
}

}  // namespace

std::vector<std::byte> encodeManifest(const Manifest& m) {
  ByteWriter w;
  w.str(m.producer);

  w.u32(uint32_t(m.constants.size()));
  for (const ConstantEntry& c : m.constants) {
    w.u32(c.id);
    w.str(c.name);
    w.u8(uint8_t(c.dtype));
    w.u8(uint8_t(c.storage));
    w.u32(uint32_t(c.shape.size()));
    for (int64_t d : c.shape) w.i64(d);
    w.str(c.layout);
    w.u64(c.offset);
    w.u64(c.nbytes);
    w.u64(c.hash);
    w.u32(uint32_t(c.consumers.size()));
    for (uint32_t mod : c.consumers) w.u32(mod);
  }

  w.u32(uint32_t(m.modules.size()));
  for (const ModuleEntry& mod : m.modules) {
    w.str(mod.kind);
    w.u32(mod.section);
    w.u32(mod.num_functions);
    w.u32(uint32_t(mod.uses.size()));
    for (const ConstUse& u : mod.uses) {
      w.u32(u.id);
      w.u8(uint8_t(u.kind));
      w.u32(u.source);
    }
  }

  const ir::Graph& g = m.graph;
  w.str(g.name);
  w.u32(uint32_t(g.values.size()));
  for (const ir::Value& v : g.values) {
    w.str(v.name);
    encodeType(w, v.type);
    w.u32(v.constant);
  }
  w.u32(uint32_t(g.nodes.size()));
  for (const ir::Node& n : g.nodes) {
    w.str(n.op_type);
    w.str(n.domain);
    w.i32(n.opset);
    w.str(n.name);
    encodeIds(w, n.inputs);
    encodeIds(w, n.outputs);
    w.u32(uint32_t(n.attrs.all().size()));
    for (const auto& [name, a] : n.attrs.all()) {  // std::map: sorted, deterministic
      w.str(name);
      encodeAttribute(w, a);
    }
  }
  encodeIds(w, g.inputs);
  encodeIds(w, g.outputs);
  return std::move(w.bytes());
}

Manifest decodeManifest(const std::byte* data, size_t size) {
  ByteReader r(data, size, "the manifest");
  Manifest m;
  m.producer = r.str();

  uint32_t nconst = r.count(kMinConstantEntry, "constants");
  m.constants.resize(nconst);
  for (ConstantEntry& c : m.constants) {
    c.id = r.u32();
    c.name = r.str();
    c.dtype = readDType(r);
    uint8_t storage = r.u8();
    if (storage != uint8_t(Storage::kWeights) && storage != uint8_t(Storage::kEmbedded))
      r.fail("constant " + std::to_string(c.id) + " has unknown storage " + std::to_string(storage));
    c.storage = Storage(storage);
    uint32_t rank = r.count(8, "dimensions");
    c.shape.resize(rank);
    for (int64_t& d : c.shape) d = r.i64();
    c.layout = r.str();
    c.offset = r.u64();
    c.nbytes = r.u64();
    c.hash = r.u64();
    uint32_t ncons = r.count(4, "consumers");
    c.consumers.resize(ncons);
    for (uint32_t& mod : c.consumers) mod = r.u32();
  }

  uint32_t nmod = r.count(kMinModuleEntry, "modules");
  m.modules.resize(nmod);
  for (ModuleEntry& mod : m.modules) {
    mod.kind = r.str();
    mod.section = r.u32();
    mod.num_functions = r.u32();
    uint32_t nuses = r.count(kUseEntry, "constant uses");
    mod.uses.resize(nuses);
    for (ConstUse& u : mod.uses) {
      u.id = r.u32();
      uint8_t kind = r.u8();
      if (kind < uint8_t(UseKind::kBorrow) || kind > uint8_t(UseKind::kEmbed))
        r.fail("module '" + mod.kind + "' has a use of unknown kind " + std::to_string(kind));
      u.kind = UseKind(kind);
      u.source = r.u32();
    }
  }

  ir::Graph& g = m.graph;
  g.name = r.str();
  uint32_t nvalues = r.count(kMinValue, "values");
  g.values.resize(nvalues);
  for (ir::Value& v : g.values) {
    v.name = r.str();
    v.type = decodeType(r);
    v.constant = r.u32();
  }
  uint32_t nnodes = r.count(kMinNode, "nodes");
  g.nodes.resize(nnodes);
  for (size_t n = 0; n < nnodes; ++n) {
    ir::Node& node = g.nodes[n];
    node.op_type = r.str();
    node.domain = r.str();
    node.opset = r.i32();
    node.name = r.str();
    node.inputs = decodeIds(r, nvalues, true, "node inputs");
    node.outputs = decodeIds(r, nvalues, true, "node outputs");
    uint32_t nattrs = r.count(kMinAttribute, "attributes");
    for (uint32_t a = 0; a < nattrs; ++a) {
      std::string name = r.str();
      if (node.attrs.has(name)) r.fail("node '" + node.name + "' repeats attribute '" + name + "'");
      node.attrs.set(name, decodeAttribute(r));
    }
    for (ir::ValueId out : node.outputs)
      if (out != ir::kNoValue) g.values[size_t(out)].producer = ir::NodeId(n);
  }
  g.inputs = decodeIds(r, nvalues, false, "graph inputs");
  g.outputs = decodeIds(r, nvalues, false, "graph outputs");
  if (r.remaining() != 0) r.fail(std::to_string(r.remaining()) + " unexpected bytes after the graph");
  return m;
}

}  // namespace partita::artifact
