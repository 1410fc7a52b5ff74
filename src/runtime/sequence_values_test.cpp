// Sequence and optional values through the graph executor: the ops' results, and each
// bad input as an error naming the node (positions out of range, concatenating
// mismatched shapes, reading an empty optional, a sequence where a tensor is expected).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "api/module_kinds.h"
#include "base/temp_dir_testing.h"
#include "frontend/onnx/onnx_importer.h"
#include "partita/compiler.h"
#include "partita/error.h"
#include "passes/passes.h"
#include "runtime/artifact_reader.h"
#include "runtime/executor_kinds.h"
#include "runtime/graph_executor.h"

namespace partita::runtime {
namespace {

using ir::DType;
using ir::TensorType;

struct Builder {
  ir::Graph g;
  ir::ValueId input(const std::string& name, TensorType t) {
    ir::ValueId v = g.addValue(name, std::move(t));
    g.inputs.push_back(v);
    return v;
  }
  ir::ValueId node(const std::string& op, const std::string& name, std::vector<ir::ValueId> in,
                   int opset = 17) {
    ir::Node n;
    n.op_type = op;
    n.opset = opset;
    n.name = name;
    n.inputs = std::move(in);
    n.outputs = {g.addValue(name)};
    g.addNode(n);
    return g.nodes.back().outputs[0];
  }
  ir::Node& last() { return g.nodes.back(); }
};

ir::OwnedTensor floats(std::vector<int64_t> shape, float first = 0) {
  ir::OwnedTensor t(DType::kFloat32, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = first + float(i);
  return t;
}

ir::OwnedTensor int64s(int64_t v) {
  ir::OwnedTensor t(DType::kInt64, {});
  *t.as<int64_t>() = v;
  return t;
}

// Infers the graph (as the compiler does), builds its executor and runs it; returns the
// outputs, or the error message in `error`.
std::vector<RunValue> run(Builder& b, const std::vector<ir::OwnedTensor>& inputs,
                          std::string* error = nullptr) {
  b.g.outputs = {b.g.nodes.back().outputs[0]};
  try {
    passes::inferShapes(b.g);
    auto graph = std::make_shared<ir::Graph>(b.g);
    auto store = std::make_shared<ConstStore>(ConstStore::fromPool(graph->constants));
    GraphExecutor e(graph, store);
    auto state = e.newState();
    std::vector<ir::Tensor> views;
    for (const ir::OwnedTensor& t : inputs) views.push_back(t.view());
    return e.runValues(*state, views);
  } catch (const Error& err) {
    if (!error) throw;
    *error = err.what();
  }
  return {};
}

// x float32[2,3], y float32[2,4] -> SequenceConstruct 'seq'.
Builder twoTensors(ir::ValueId& seq) {
  Builder b;
  ir::ValueId x = b.input("x", TensorType::of(DType::kFloat32, {2, 3}));
  ir::ValueId y = b.input("y", TensorType::of(DType::kFloat32, {2, 4}));
  seq = b.node("SequenceConstruct", "seq", {x, y});
  return b;
}

TEST(SequenceValues, SequenceAtCountsNegativePositionsFromTheBackAndRefusesOthers) {
  ir::ValueId seq;
  Builder b = twoTensors(seq);
  ir::ValueId pos = b.input("pos", TensorType::of(DType::kInt64, {}));
  b.node("SequenceAt", "at", {seq, pos});
  std::vector<RunValue> out = run(b, {floats({2, 3}), floats({2, 4}, 100), int64s(-1)});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].tensor.shape(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(out[0].tensor.as<float>()[0], 100.f);
  std::string msg;
  run(b, {floats({2, 3}), floats({2, 4}), int64s(2)}, &msg);
  EXPECT_EQ(msg, "SequenceAt node 'at': position 2 is out of range for a sequence of 2 tensors (-2..1)");
  run(b, {floats({2, 3}), floats({2, 4}), int64s(-3)}, &msg);
  EXPECT_EQ(msg, "SequenceAt node 'at': position -3 is out of range for a sequence of 2 tensors (-2..1)");
}

TEST(SequenceValues, InsertEraseAndLengthShareTheElements) {
  ir::ValueId seq;
  Builder b = twoTensors(seq);
  ir::ValueId z = b.input("z", TensorType::of(DType::kFloat32, {1}));
  ir::ValueId front = b.input("front", TensorType::of(DType::kInt64, {}));
  ir::ValueId ins = b.node("SequenceInsert", "ins", {seq, z, front});
  ir::ValueId erased = b.node("SequenceErase", "erase", {ins});  // the last one
  b.node("Identity", "same", {erased});
  std::vector<RunValue> out = run(b, {floats({2, 3}), floats({2, 4}), floats({1}, 7), int64s(0)});
  ASSERT_EQ(out.size(), 1u);
  ASSERT_TRUE(out[0].aggregate);
  const ir::Aggregate& s = *out[0].aggregate;
  ASSERT_EQ(s.tensors.size(), 2u);
  EXPECT_EQ(s.tensors[0]->shape(), (std::vector<int64_t>{1}));
  EXPECT_EQ(s.tensors[0]->as<float>()[0], 7.f);
  EXPECT_EQ(s.tensors[1]->shape(), (std::vector<int64_t>{2, 3}));
  std::string msg;
  run(b, {floats({2, 3}), floats({2, 4}), floats({1}), int64s(3)}, &msg);
  EXPECT_EQ(msg, "SequenceInsert node 'ins': position 3 is out of range for a sequence of 2 tensors (-2..2)");

  Builder e;
  ir::ValueId empty = e.node("SequenceEmpty", "empty", {});
  e.node("SequenceErase", "erase", {empty});
  run(e, {}, &msg);
  EXPECT_EQ(
      msg,
      "SequenceErase node 'erase': position -1 is out of range for a sequence of 0 tensors (it is empty)");
}

TEST(SequenceValues, ConcatFromSequenceNamesTheElementThatDoesNotFit) {
  for (int64_t axis : {1, 0}) {
    ir::ValueId seq;
    Builder b = twoTensors(seq);
    b.node("ConcatFromSequence", "cat", {seq});
    b.last().attrs.setInt("axis", axis);
    std::string msg;
    std::vector<RunValue> out = run(b, {floats({2, 3}), floats({2, 4})}, &msg);
    if (axis == 1) {
      ASSERT_EQ(out.size(), 1u) << msg;
      EXPECT_EQ(out[0].tensor.shape(), (std::vector<int64_t>{2, 7}));
      EXPECT_EQ(out[0].tensor.as<float>()[3], 0.f);  // row 0 of y after row 0 of x
      EXPECT_EQ(out[0].tensor.as<float>()[7], 3.f);  // row 1 of x
    } else {
      EXPECT_EQ(
          msg,
          "ConcatFromSequence node 'cat': element 1 is float32[2,4] but element 0 is float32[2,3]: they "
          "must agree on every dimension but axis 0");
    }
  }
}

TEST(SequenceValues, SplitToSequenceChecksTheSplit) {
  Builder b;
  ir::ValueId x = b.input("x", TensorType::of(DType::kFloat32, {5, 2}));
  ir::ValueId split = b.input("split", TensorType::of(DType::kInt64, {2}));
  b.node("SplitToSequence", "split", {x, split});
  ir::OwnedTensor sizes(DType::kInt64, {2});
  sizes.as<int64_t>()[0] = 2;
  sizes.as<int64_t>()[1] = 3;
  std::vector<RunValue> out = run(b, {floats({5, 2}), sizes});
  ASSERT_TRUE(out.at(0).aggregate);
  ASSERT_EQ(out[0].aggregate->tensors.size(), 2u);
  EXPECT_EQ(out[0].aggregate->tensors[1]->shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(out[0].aggregate->tensors[1]->as<float>()[0], 4.f);
  sizes.as<int64_t>()[1] = 4;
  std::string msg;
  run(b, {floats({5, 2}), sizes}, &msg);
  EXPECT_EQ(msg, "SplitToSequence node 'split': 'split' [2,4] does not add up to 5, the length of axis 0");
}

TEST(SequenceValues, OptionalGetElementOfAnEmptyOptionalIsAnError) {
  for (bool read : {false, true}) {
    Builder b;
    ir::ValueId opt = b.node("Optional", "none", {}, 15);
    b.last().attrs.setInts("type", {int64_t(ir::ValueKind::kTensor), 1});  // ONNX's code for float
    b.node(read ? "OptionalGetElement" : "OptionalHasElement", "get", {opt}, 15);
    std::string msg;
    std::vector<RunValue> out = run(b, {}, &msg);
    if (read) {
      EXPECT_EQ(msg, "OptionalGetElement node 'get': the optional is empty");
    } else {
      ASSERT_EQ(out.size(), 1u) << msg;
      EXPECT_FALSE(*out[0].tensor.as<bool>());
    }
  }
}

TEST(SequenceValues, ASequenceWhereATensorIsExpectedIsRefusedByName) {
  ir::ValueId seq;
  Builder b = twoTensors(seq);
  b.node("Add", "add", {seq, b.g.inputs[0]});
  std::string msg;
  run(b, {floats({2, 3}), floats({2, 4})}, &msg);
  EXPECT_EQ(msg,
            "Add node 'add' (making 'add'): input 0 ('seq') is a sequence of float32 tensors, but Add takes "
            "tensors only");
}

TEST(SequenceValues, RunRefusesASequenceOutputAndATensorForASequenceInput) {
  ir::ValueId seq;
  Builder b = twoTensors(seq);
  b.g.outputs = {seq};
  passes::inferShapes(b.g);
  auto graph = std::make_shared<ir::Graph>(b.g);
  auto store = std::make_shared<ConstStore>(ConstStore::fromPool(graph->constants));
  GraphExecutor e(graph, store);
  auto state = e.newState();
  ir::OwnedTensor x = floats({2, 3}), y = floats({2, 4});
  try {
    e.run(*state, {x.view(), y.view()});
    ADD_FAILURE() << "a sequence output came back from run()";
  } catch (const Error& err) {
    EXPECT_EQ(
        std::string(err.what()),
        "output 'seq' is a sequence of float32 tensors; this way of running a model returns tensors only");
  }

  Builder l;
  ir::ValueId in = l.input("s", TensorType::sequenceOf(TensorType::unranked(DType::kFloat32)));
  l.node("SequenceLength", "len", {in});
  std::string msg;
  run(l, {floats({2})}, &msg);
  EXPECT_EQ(msg, "input 's' is a sequence of float32 tensors but got float32[2]");
}

// The tensors of two values, one by one: "" when they agree (within 1e-5 relative).
std::string differences(const RunValue& got, const frontend::ProtoValue& want) {
  std::vector<const ir::OwnedTensor*> a, b;
  if (want.aggregate) {
    if (!got.aggregate) return "a tensor where a sequence or optional was expected";
    for (const ir::SharedTensor& t : got.aggregate->tensors) a.push_back(t.get());
    for (const ir::SharedTensor& t : want.aggregate->tensors) b.push_back(t.get());
  } else {
    a.push_back(&got.tensor);
    b.push_back(&want.tensor);
  }
  if (a.size() != b.size()) return std::to_string(a.size()) + " tensors, not " + std::to_string(b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i]->dtype() != b[i]->dtype() || a[i]->shape() != b[i]->shape())
      return "tensor " + std::to_string(i) + " is " + ir::typeOf(a[i]->view()).str() + ", not " +
             ir::typeOf(b[i]->view()).str();
    if (a[i]->dtype() != DType::kFloat32) {
      if (std::memcmp(a[i]->data(), b[i]->data(), a[i]->nbytes()) != 0)
        return "tensor " + std::to_string(i) + " differs";
      continue;
    }
    for (int64_t k = 0; k < a[i]->numel(); ++k) {
      const float x = a[i]->as<float>()[k], y = b[i]->as<float>()[k];
      if (std::fabs(x - y) > 1e-5f * std::max(1.f, std::fabs(y)))
        return "tensor " + std::to_string(i) + " differs";
    }
  }
  return "";
}

// If and Loop carrying sequences and optionals, from a linked artifact (the value kinds
// written and read back) with every backend enabled: ONNX's own cases, checked against
// their expected outputs.
TEST(SequenceValues, IfAndLoopCarryingSequencesRunFromAnArtifact) {
  const std::filesystem::path data = "/usr/share/libonnx-testdata/data/node";
  if (!std::filesystem::exists(data / "test_loop16_seq_none"))
    GTEST_SKIP() << "no ONNX backend test data in " << data;
  partita::testing::TempDir dir;
  for (const char* name : {"test_if_seq", "test_if_opt", "test_loop13_seq", "test_loop16_seq_none",
                           "test_sequence_map_add_1_sequence_1_tensor"}) {
    SCOPED_TRACE(name);
    const std::filesystem::path c = data / name;
    CompileOptions options;
    options.backends = {"dnnl", "ewise", "host"};
    const std::string pta = dir.path(std::string(name) + ".pta");
    compileToArtifact((c / "model.onnx").string(), pta, options);
    artifact::Artifact a = artifact::openArtifact(pta);
    std::shared_ptr<Executor> exec =
        api::builtinExecutorKinds().create(a, api::builtinModuleKinds(), RunOptions{});
    const std::filesystem::path set = c / "test_data_set_0";
    std::vector<frontend::ProtoValue> inputs;
    for (size_t i = 0; i < exec->inputs().size(); ++i)
      inputs.push_back(frontend::readValueProtoFile((set / ("input_" + std::to_string(i) + ".pb")).string(),
                                                    exec->inputs()[i].type));
    std::vector<ir::Tensor> views;
    for (const frontend::ProtoValue& v : inputs)
      views.push_back(v.aggregate ? ir::box(*v.aggregate) : v.tensor.view());
    auto state = exec->newState();
    std::vector<RunValue> out = exec->runValues(*state, views);
    ASSERT_EQ(out.size(), exec->outputs().size());
    for (size_t o = 0; o < out.size(); ++o) {
      frontend::ProtoValue want = frontend::readValueProtoFile(
          (set / ("output_" + std::to_string(o) + ".pb")).string(), exec->outputs()[o].type);
      EXPECT_EQ(differences(out[o], want), "") << "output " << o;
    }
  }
}

}  // namespace
}  // namespace partita::runtime
