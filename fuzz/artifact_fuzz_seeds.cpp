// Writes a few small valid artifacts into DIR as the fuzzer's seed corpus: a plain
// MLP, tied weights (shared extents), an external module with borrow / derive / embed
// uses and a derived layout, empty tensors and tensor attributes.
#include <cstdio>
#include <string>

#include "backend/backend.h"
#include "compiler/artifact_testing.h"
#include "compiler/artifact_writer.h"
#include "partita/error.h"

using namespace partita;
namespace at = partita::artifact::testing;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  try {
    artifact::writeArtifact(at::mlpGraph(4, 6, 3), dir + "/mlp.pta");
    artifact::writeArtifact(at::mlpGraph(5, 5, 5, /*tied=*/true), dir + "/tied.pta");

    ir::Graph g = at::mlpGraph(4, 4, 4);
    std::vector<float> blocked = at::randomFloats(16, 1);
    ir::ConstId derived = g.constants.add("W1.blocked", ir::DType::kFloat32, {4, 4},
                                          Bytes::copyOf(blocked.data(), blocked.size() * 4), "AB4b4a");
    ir::ConstId embedded = at::addFloats(g, "lut", {8}, at::randomFloats(8, 5));
    backend::ModuleImage mod{"test.vendor", std::vector<std::byte>(24, std::byte{'m'}),
                             {{1, artifact::UseKind::kBorrow, ir::kNoConst},
                              {derived, artifact::UseKind::kDerive, 0},
                              {embedded, artifact::UseKind::kEmbed, ir::kNoConst}},
                             2,
                             {}};
    artifact::writeArtifact(g, {mod}, dir + "/module.pta");

    ir::Graph e;
    ir::ConstId e0 = e.constants.add("e0", ir::DType::kFloat32, {0}, Bytes{});
    ir::ConstId shape = e.constants.add("shape", ir::DType::kInt64, {1}, Bytes::copyOf("\x03\0\0\0\0\0\0\0", 8));
    ir::ConstId value = at::addFloats(e, "value", {1}, {2.5f});
    ir::ValueId out = e.addValue("filled", ir::TensorType::of(ir::DType::kFloat32, {3}));
    ir::Node fill;
    fill.op_type = "ConstantOfShape";
    fill.name = "fill";
    fill.opset = 13;
    fill.inputs = {e.addConstantValue("shape", shape)};
    fill.outputs = {out};
    fill.attrs.setTensor("value", value);
    e.addNode(std::move(fill));
    e.outputs = {out, e.addConstantValue("e0", e0)};
    artifact::writeArtifact(e, dir + "/attrs.pta");
  } catch (const Error& err) {
    std::fprintf(stderr, "error: %s\n", err.what());
    return 1;
  }
  return 0;
}
