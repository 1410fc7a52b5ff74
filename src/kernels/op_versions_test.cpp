// Every host op implements its op's newest definition up to opset 21 (the newest opset
// partita reads), so a model at any opset partita accepts reaches each registered
// kernel with semantics the kernel knows. A new op, or a new opset, that breaks this
// shows up here by name.
#include <gtest/gtest.h>

#include "kernels/op_registry.h"

namespace partita::kernels {
namespace {

TEST(OpVersions, EveryRegisteredOpImplementsItsDefinitionAtOpset21) {
  const OpRegistry& r = OpRegistry::global();
  std::string gaps;
  for (const std::string& key : r.opTypes()) {
    if (key.find('.') != std::string::npos) continue;  // other domains have their own versions
    const OpDef* def = r.find("", key);
    ASSERT_NE(def, nullptr) << key;
    ir::Node n;
    n.op_type = key;
    n.name = "n";
    n.opset = 21;
    std::string why = unimplementedVersion(*def, n);
    if (!why.empty()) gaps += key + ": " + why + "\n";
    // `newest` is one of the op's definitions (or 17, the default, for ops unchanged since).
    if (def->newest != 17) {
      EXPECT_EQ(schemaVersion("", key, def->newest), def->newest) << key << " declares newest " << def->newest;
    }
  }
  EXPECT_EQ(gaps, "");
}

TEST(OpVersions, NodesResolveToTheNewestDefinitionAtOrBelowTheirOpset) {
  EXPECT_EQ(schemaVersion("", "Pad", 17), 13);
  EXPECT_EQ(schemaVersion("", "Pad", 18), 18);
  EXPECT_EQ(schemaVersion("", "Pad", 20), 19);
  EXPECT_EQ(schemaVersion("", "Pad", 21), 21);
  EXPECT_EQ(schemaVersion("", "GridSample", 15), 0);
  EXPECT_EQ(schemaVersion("", "GridSample", 19), 16);
  EXPECT_EQ(schemaVersion("", "GroupNormalization", 20), 18);
  EXPECT_EQ(schemaVersion("ai.onnx", "Split", 18), 18);
  ir::Node n;
  n.op_type = "Pad";
  n.name = "p";
  n.opset = 19;
  EXPECT_EQ(unimplementedVersion(OpDef{nullptr, nullptr, 18}, n),
            "opset 19 gives it Pad's opset-19 definition, which partita does not implement (it implements Pad up "
            "to the opset-18 definition)");
  EXPECT_EQ(unimplementedVersion(OpDef{nullptr, nullptr, 19}, n), "");
}

}  // namespace
}  // namespace partita::kernels
