// Test support for the artifact format (tests and the fuzzer only): small graphs to
// link, and resealing a file whose bytes a test has edited (recomputing checksums) so
// the edit reaches the check it is meant to reach instead of stopping at a checksum.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "api/module_kinds.h"
#include "runtime/format.h"
#include "base/bytes.h"
#include "ir/graph.h"
#include "partita/error.h"
#include "backend/backend.h"
#include "runtime/module.h"

namespace partita::artifact::testing {

// Deterministic pseudo-random floats in [-1, 1).
inline std::vector<float> randomFloats(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (float& f : v) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    f = float(int64_t(s >> 40) - (int64_t(1) << 23)) / float(1 << 23);
  }
  return v;
}

inline ir::ConstId addFloats(ir::Graph& g, const std::string& name, std::vector<int64_t> shape,
                             const std::vector<float>& data) {
  return g.constants.add(name, ir::DType::kFloat32, std::move(shape),
                         Bytes::copyOf(data.data(), data.size() * sizeof(float)));
}

inline ir::ValueId addNode(ir::Graph& g, const std::string& op, const std::string& name,
                           std::vector<ir::ValueId> inputs, ir::TensorType out_type) {
  ir::ValueId out = g.addValue(name, std::move(out_type));
  ir::Node n;
  n.op_type = op;
  n.name = name;
  n.opset = 13;
  n.inputs = std::move(inputs);
  n.outputs = {out};
  g.addNode(std::move(n));
  return out;
}

// y = Relu(x @ W1 + b1) @ W2 + b2 with x: float32[batch, in]. `tied` makes W2 a
// separate constant with the same bytes as W1 (needs in == hidden == out).
inline ir::Graph mlpGraph(int64_t in, int64_t hidden, int64_t out, bool tied = false, int64_t batch = 2) {
  ir::Graph g;
  g.name = "mlp";
  ir::ValueId x = g.addValue("x", ir::TensorType::of(ir::DType::kFloat32, {batch, in}));
  g.inputs.push_back(x);
  auto f32 = [](std::vector<int64_t> s) { return ir::TensorType::of(ir::DType::kFloat32, s); };
  ir::ValueId w1 = g.addConstantValue("W1", addFloats(g, "W1", {in, hidden}, randomFloats(size_t(in * hidden), 1)));
  ir::ValueId b1 = g.addConstantValue("b1", addFloats(g, "b1", {hidden}, randomFloats(size_t(hidden), 2)));
  ir::ValueId w2 = g.addConstantValue(
      "W2", addFloats(g, "W2", {hidden, out}, randomFloats(size_t(hidden * out), tied ? 1 : 3)));
  ir::ValueId b2 = g.addConstantValue("b2", addFloats(g, "b2", {out}, randomFloats(size_t(out), 4)));
  ir::ValueId h = addNode(g, "MatMul", "mm1", {x, w1}, f32({batch, hidden}));
  h = addNode(g, "Add", "add1", {h, b1}, f32({batch, hidden}));
  h = addNode(g, "Relu", "relu", {h}, f32({batch, hidden}));
  h = addNode(g, "MatMul", "mm2", {h, w2}, f32({batch, out}));
  ir::ValueId y = addNode(g, "Add", "add2", {h, b2}, f32({batch, out}));
  g.outputs.push_back(y);
  return g;
}

// A runtime module kind for tests, "test.addconst": its blob is one little-endian
// u32 ConstId; function 0 computes out = in + that constant (float32, same shape),
// reading the constant from the shared store (zero copy).
class AddConstModule : public runtime::RuntimeModule {
 public:
  explicit AddConstModule(ir::Tensor c) : c_(std::move(c)) {}
  std::string_view kind() const override { return "test.addconst"; }
  void run(uint32_t fn, const std::vector<ir::Tensor>& in, const std::vector<ir::Tensor>& out) const override {
    if (fn != 0 || in.size() != 1 || out.size() != 1 || in[0].numel() != c_.numel())
      throw Error(ErrorCode::kInvalidArgument, "test.addconst: bad call");
    for (int64_t i = 0; i < c_.numel(); ++i) out[0].as<float>()[i] = in[0].as<float>()[i] + c_.as<float>()[i];
  }

 private:
  ir::Tensor c_;
};

// This build's module kinds plus "test.addconst".
inline const runtime::ModuleKinds& addConstModuleKinds() {
  static const runtime::ModuleKinds kinds = [] {
    std::vector<runtime::ModuleKind> all = api::builtinModuleKinds().all();
    all.push_back({"test.addconst", [](const runtime::ModuleLoadContext& ctx) {
                     if (ctx.blob.size != 4) throw Error(ErrorCode::kInvalidArtifact, "test.addconst: bad blob");
                     ir::ConstId id = 0;
                     std::memcpy(&id, ctx.blob.data, 4);
                     return std::shared_ptr<runtime::RuntimeModule>(std::make_shared<AddConstModule>(ctx.store->get(id)));
                   }});
    return runtime::ModuleKinds(std::move(all));
  }();
  return kinds;
}

inline backend::ModuleImage addConstImage(ir::ConstId c) {
  backend::ModuleImage image{"test.addconst", std::vector<std::byte>(4), {{c, runtime::ConstUseKind::kBorrow, ir::kNoConst}}, 1, {}};
  std::memcpy(image.blob.data(), &c, 4);
  return image;
}

// Recomputes every section checksum, the section table checksum and the header
// checksum of `file` in place, as far as its (possibly edited) header and table
// allow. Leaves bytes it cannot make sense of alone.
inline void reseal(std::vector<std::byte>& file) {
  if (file.size() < kHeaderSize) return;
  Header h = decodeHeader(file.data());
  uint64_t table_bytes = uint64_t(h.section_count) * kSectionEntrySize;
  if (h.section_count <= kMaxSections && h.section_table_offset <= file.size() &&
      table_bytes <= file.size() - h.section_table_offset) {
    for (uint32_t i = 0; i < h.section_count; ++i) {
      std::byte* at = file.data() + h.section_table_offset + i * kSectionEntrySize;
      SectionEntry e = decodeSectionEntry(at);
      if (e.offset > file.size() || e.size > file.size() - e.offset) continue;
      e.checksum = hashBytes(file.data() + e.offset, size_t(e.size));
      encodeSectionEntry(e, at);
    }
    h.section_table_checksum = hashBytes(file.data() + h.section_table_offset, size_t(table_bytes));
  }
  std::byte magic[8];
  std::memcpy(magic, file.data(), 8);
  encodeHeader(h, file.data());  // rewrites the magic: keep an edited one
  std::memcpy(file.data(), magic, 8);
  uint64_t sum = headerChecksum(file.data());
  for (int i = 0; i < 8; ++i) file[56 + size_t(i)] = std::byte(uint8_t(sum >> (8 * i)));
}

inline Bytes bytesOf(const std::vector<std::byte>& v) { return Bytes::copyOf(v.data(), v.size()); }

}  // namespace partita::artifact::testing
