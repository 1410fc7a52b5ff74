// The graph executor never trusts a declared shape: what a step makes at run time must
// be what the steps after it were compiled for, a static step whose types its own
// inference cannot give is checked like a dynamic one, and every type keeps the limits.
#include "runtime/graph_executor.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "partita/error.h"
#include "frontend/onnx/onnx_importer.h"
#include "passes/passes.h"
#include "passes/pipeline.h"

namespace partita::runtime {
namespace {

using ir::DType;
using ir::TensorType;

ir::Node node(const std::string& op, const std::string& name, std::vector<ir::ValueId> in,
              std::vector<ir::ValueId> out) {
  ir::Node n;
  n.op_type = op;
  n.opset = 14;
  n.name = name;
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  return n;
}

// x -> Reshape(x, s) = t (declared `declared`) -> Relu = y.
ir::Graph reshapeRelu(const TensorType& x_type, const TensorType& declared) {
  ir::Graph g;
  ir::ValueId x = g.addValue("x", x_type);
  ir::ValueId s = g.addValue("s", TensorType::of(DType::kInt64, {2}));
  ir::ValueId t = g.addValue("t", declared);
  ir::ValueId y = g.addValue("y");
  g.inputs = {x, s};
  g.addNode(node("Reshape", "reshape", {x, s}, {t}));
  g.addNode(node("Relu", "relu", {t}, {y}));
  g.outputs = {y};
  return g;
}

GraphExecutor executorOf(ir::Graph g, RunOptions options = {}) {
  auto graph = std::make_shared<ir::Graph>(std::move(g));
  auto store = std::make_shared<ConstStore>(ConstStore::fromPool(graph->constants));
  return GraphExecutor(graph, store, {}, options);
}

std::string runError(const GraphExecutor& e, const std::vector<ir::OwnedTensor>& inputs) {
  auto state = e.newRunState();
  std::vector<ir::Tensor> views;
  for (const ir::OwnedTensor& t : inputs) views.push_back(t.view());
  try {
    e.run(*state, views);
  } catch (const Error& err) {
    return err.what();
  }
  return "";
}

ir::OwnedTensor shapeTensor(std::vector<int64_t> v) {
  ir::OwnedTensor t(DType::kInt64, {int64_t(v.size())});
  std::memcpy(t.data(), v.data(), v.size() * sizeof(int64_t));
  return t;
}

TEST(GraphExecutorTypes, DynamicStepMustMakeTheDeclaredShape) {
  ir::Graph g = reshapeRelu(TensorType{DType::kFloat32, true, {ir::Dim::symbolic("N")}},
                            TensorType::of(DType::kFloat32, {4, 4}));
  passes::inferShapes(g);
  EXPECT_EQ(g.typeOf(g.outputs[0]).str(), "float32[4,4]");  // the hint filled what inference did not know
  GraphExecutor e = executorOf(std::move(g));
  std::string msg = runError(e, {ir::OwnedTensor(DType::kFloat32, {6}), shapeTensor({2, 3})});
  EXPECT_NE(msg.find("value 't' (made by Reshape node 'reshape') is float32[2,3] at run time, but the model was "
                     "compiled for float32[4,4]"),
            std::string::npos)
      << msg;
  EXPECT_EQ(runError(e, {ir::OwnedTensor(DType::kFloat32, {16}), shapeTensor({4, 4})}), "");
}

TEST(GraphExecutorTypes, StaticStepWithADeclaredTypeIsCheckedAtRunTime) {
  // Every type static, but t's came from the declaration, not from Reshape's inference
  // (s is data): the step must be checked, not trusted.
  ir::Graph g = reshapeRelu(TensorType::of(DType::kFloat32, {16}), TensorType::of(DType::kFloat32, {4, 4}));
  passes::inferShapes(g);
  ASSERT_TRUE(g.typeOf(g.nodes[0].outputs[0]).isStatic());
  GraphExecutor e = executorOf(std::move(g));
  EXPECT_EQ(e.dynamicSteps(), 1u);  // the Reshape; the Relu after it stays planned
  std::string msg = runError(e, {ir::OwnedTensor(DType::kFloat32, {16}), shapeTensor({2, 8})});
  EXPECT_NE(msg.find("value 't'"), std::string::npos) << msg;
  EXPECT_EQ(runError(e, {ir::OwnedTensor(DType::kFloat32, {16}), shapeTensor({4, 4})}), "");
}

TEST(GraphExecutorTypes, InferenceConfirmsEveryStepOfRealModels) {
  // The load-time check costs a real model no dynamic step (nor planned memory). The
  // torchvision exports exist once the real_model tests have made them.
  for (const std::string& path : {std::string(PARTITA_SOURCE_DIR "/models/fashion/fashion_cnn.onnx"),
                                 std::string(PARTITA_BINARY_DIR "/models/resnet18.onnx"),
                                 std::string(PARTITA_BINARY_DIR "/models/mobilenet_v2.onnx")}) {
    if (!std::filesystem::exists(path)) continue;
    ir::Graph g = frontend::importOnnx(path);
    passes::optimize(g);
    const size_t nodes = g.nodes.size();
    GraphExecutor e = executorOf(std::move(g));
    EXPECT_GT(nodes, 5u) << path;
    EXPECT_EQ(e.dynamicSteps(), 0u) << path;
  }
}

TEST(GraphExecutorTypes, StaticTypesInferenceContradictsAreRefusedAtLoad) {
  ir::Graph g;
  ir::ValueId x = g.addValue("x", TensorType::of(DType::kFloat32, {4}));
  ir::ValueId y = g.addValue("y", TensorType::of(DType::kFloat32, {8}));  // Relu of [4] is [4]
  g.inputs = {x};
  g.addNode(node("Relu", "relu", {x}, {y}));
  g.outputs = {y};
  try {
    executorOf(std::move(g));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("value 'y' (made by Relu node 'relu') is typed float32[8] but its inputs "
                                         "make float32[4]"),
              std::string::npos)
        << e.what();
  }
}

TEST(GraphExecutorTypes, ConflictingStaticDeclarationIsIgnored) {
  // As ONNX Runtime's default merge: inference knows t is [4]; the declared [16] is dropped.
  ir::Graph g;
  ir::ValueId x = g.addValue("x", TensorType::of(DType::kFloat32, {4}));
  ir::ValueId t = g.addValue("t", TensorType::of(DType::kFloat32, {16}));
  ir::ValueId y = g.addValue("y");
  g.inputs = {x};
  g.addNode(node("Relu", "relu", {x}, {t}));
  g.addNode(node("Relu", "relu2", {t}, {y}));
  g.outputs = {y};
  passes::inferShapes(g);
  EXPECT_EQ(g.typeOf(t).str(), "float32[4]");
  // A declared dtype that differs is an error naming the value.
  ir::Graph h;
  ir::ValueId hx = h.addValue("x", TensorType::of(DType::kFloat32, {4}));
  ir::ValueId ht = h.addValue("t", TensorType::of(DType::kFloat64, {4}));
  h.inputs = {hx};
  h.addNode(node("Relu", "relu", {hx}, {ht}));
  h.outputs = {ht};
  try {
    passes::inferShapes(h);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidModel);
    EXPECT_NE(std::string(e.what()).find("value 't' (made by Relu node 'relu') is declared float64[4] but is "
                                         "float32[4]"),
              std::string::npos)
        << e.what();
  }
}

TEST(GraphExecutorTypes, LimitsAtLoadAndOnInputs) {
  RunOptions small;
  small.limits.max_bytes = 64;
  ir::Graph g;
  ir::ValueId x = g.addValue("x", TensorType{DType::kFloat32, true, {ir::Dim::symbolic("N")}});
  ir::ValueId y = g.addValue("y", TensorType{DType::kFloat32, true, {ir::Dim::symbolic("N")}});
  g.inputs = {x};
  g.addNode(node("Relu", "relu", {x}, {y}));
  g.outputs = {y};
  GraphExecutor e = executorOf(g, small);
  EXPECT_EQ(runError(e, {ir::OwnedTensor(DType::kFloat32, {16})}), "");
  std::string msg = runError(e, {ir::OwnedTensor(DType::kFloat32, {17})});
  EXPECT_NE(msg.find("input 'x': float32[17] needs 68 bytes, over the limit of 64"), std::string::npos) << msg;
  // A planned value over the limit is refused at load.
  ir::Graph big;
  ir::ValueId bx = big.addValue("x", TensorType::of(DType::kFloat32, {8}));
  ir::ValueId bt = big.addValue("t", TensorType::of(DType::kFloat32, {8, 4}));
  ir::ValueId by = big.addValue("y", TensorType::of(DType::kFloat32, {8}));
  ir::ValueId axes = big.addValue("axes", TensorType::of(DType::kInt64, {1}));
  big.inputs = {bx, axes};
  ir::Node expand = node("Expand", "expand", {bx, axes}, {bt});
  big.addNode(expand);
  big.addNode(node("ReduceSum", "sum", {bt, axes}, {by}));
  big.outputs = {by};
  try {
    executorOf(std::move(big), small);
    FAIL();
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("value 't' (made by Expand node 'expand'): float32[8,4] needs 128 bytes"),
              std::string::npos)
        << err.what();
  }
}

}  // namespace
}  // namespace partita::runtime
