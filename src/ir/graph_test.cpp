#include "ir/graph.h"

#include <gtest/gtest.h>

#include "partita/error.h"

namespace partita::ir {
namespace {

TEST(Graph, VerifyAcceptsTopologicalGraphAndPrints) {
  Graph g;
  ValueId x = g.addValue("x", TensorType::of(DType::kFloat32, {2, 3}));
  g.inputs.push_back(x);
  float w[6] = {1, 2, 3, 4, 5, 6};
  ConstId c = g.constants.add("w", DType::kFloat32, {2, 3}, Bytes::copyOf(w, sizeof w));
  ValueId wv = g.addConstantValue("w", c);
  ValueId y = g.addValue("y", TensorType::of(DType::kFloat32, {2, 3}));
  Node n;
  n.op_type = "Add";
  n.name = "add0";
  n.inputs = {x, wv};
  n.outputs = {y};
  g.addNode(std::move(n));
  g.outputs.push_back(y);
  EXPECT_NO_THROW(g.verify());
  EXPECT_EQ(g.str(),
            "graph main (%x: float32[2,3]) {\n"
            "  %w: float32[2,3] = const#0\n"
            "  %y: float32[2,3] = Add(%x, %w)\n"
            "  return %y\n}\n");
}

TEST(Graph, VerifyRejectsUseBeforeDefinition) {
  Graph g;
  ValueId a = g.addValue("a", TensorType::of(DType::kFloat32, {1}));
  ValueId b = g.addValue("b", TensorType::of(DType::kFloat32, {1}));
  Node n;
  n.op_type = "Relu";
  n.name = "r";
  n.inputs = {a};
  n.outputs = {b};
  g.addNode(std::move(n));
  g.outputs.push_back(b);
  try {
    g.verify();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("reads 'a' before it is produced"), std::string::npos) << e.what();
  }
}

TEST(DType, HalfRoundTrip) {
  for (float f : {0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f})
    EXPECT_EQ(halfToFloat(floatToHalf(f)), f);
  EXPECT_EQ(bfloat16ToFloat(floatToBfloat16(1.5f)), 1.5f);
}

}  // namespace
}  // namespace partita::ir
