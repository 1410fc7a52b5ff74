// fuseQuantizedOps: QDQ Conv and MaxPool patterns become QLinearConv and an int8
// MaxPool; patterns that do not compute the same stay as they are.
#include <gtest/gtest.h>

#include "backend/backend_testing.h"
#include "passes/passes.h"

namespace partita::passes {
namespace {

using backend::testing::GraphBuilder;

template <typename T>
ir::ValueId typedConstant(GraphBuilder& b, const std::string& name, ir::DType dtype, std::vector<int64_t> shape,
                          const std::vector<T>& data) {
  ir::ConstId c = b.g.constants.add(name, dtype, std::move(shape), Bytes::copyOf(data.data(), data.size() * sizeof(T)));
  return b.g.addConstantValue(name, c);
}

size_t count(const ir::Graph& g, const std::string& op) {
  size_t n = 0;
  for (const ir::Node& node : g.nodes) n += node.op_type == op;
  return n;
}

// x -> Q -> DQ -> Conv(DQ(w), bias) -> Relu -> Q(out_zero) -> DQ -> MaxPool -> Q -> DQ;
// `bias_kind`: 0 none, 1 float32, 2 int32 behind a DequantizeLinear.
GraphBuilder qdqConv(uint8_t out_zero, int bias_kind, float pool_scale) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 2, 6, 6});
  auto qdq = [&](ir::ValueId v, const std::string& p, float s, uint8_t z) {
    ir::ValueId sc = typedConstant<float>(b, p + "s", ir::DType::kFloat32, {}, {s});
    ir::ValueId zp = typedConstant<uint8_t>(b, p + "z", ir::DType::kUInt8, {}, {z});
    return b.node("DequantizeLinear", {b.node("QuantizeLinear", {v, sc, zp}, {}, 13), sc, zp}, {}, 13);
  };
  ir::AttributeMap axis0;
  axis0.setInt("axis", 0);
  ir::ValueId w = b.node("DequantizeLinear",
                         {typedConstant<int8_t>(b, "w", ir::DType::kInt8, {3, 2, 1, 1}, {1, -2, 3, -4, 5, -6}),
                          typedConstant<float>(b, "ws", ir::DType::kFloat32, {3}, {0.1f, 0.2f, 0.3f}),
                          typedConstant<int8_t>(b, "wz", ir::DType::kInt8, {3}, {0, 0, 0})},
                         axis0, 13);
  std::vector<ir::ValueId> conv_in = {qdq(x, "x", 0.5f, 128), w};
  if (bias_kind == 1) conv_in.push_back(b.constant("bias", {3}, {0.3f, -0.2f, 0.1f}));
  if (bias_kind == 2)
    conv_in.push_back(b.node("DequantizeLinear",
                             {typedConstant<int32_t>(b, "bq", ir::DType::kInt32, {3}, {6, -2, 1}),
                              typedConstant<float>(b, "bs", ir::DType::kFloat32, {3}, {0.05f, 0.1f, 0.15f})},
                             axis0, 13));
  ir::ValueId y = qdq(b.node("Relu", {b.node("Conv", conv_in, {}, 13)}, {}, 13), "y", 0.25f, out_zero);
  ir::AttributeMap pool;
  pool.setInts("kernel_shape", {2, 2});
  b.output(qdq(b.node("MaxPool", {y}, pool, 13), "p", pool_scale, out_zero));
  return b;
}

TEST(FuseQuantizedOps, ConvReluQuantizeBecomesQLinearConvAndMaxPoolTakesInt8) {
  for (int bias_kind : {0, 1, 2}) {
    GraphBuilder b = qdqConv(0, bias_kind, 0.25f);
    EXPECT_EQ(fuseQuantizedOps(b.g), 2u) << "bias kind " << bias_kind;
    EXPECT_EQ(count(b.g, "QLinearConv"), 1u);
    EXPECT_EQ(count(b.g, "Conv"), 0u);
    EXPECT_EQ(count(b.g, "Relu"), 0u) << "the saturation at zero point 0 is the Relu";
    for (const ir::Node& n : b.g.nodes)
      if (n.op_type == "MaxPool") {
        EXPECT_TRUE(b.g.value(n.inputs[0]).producer != ir::kNoNode &&
                    b.g.nodes[size_t(b.g.value(n.inputs[0]).producer)].op_type == "QLinearConv");
      }
    EXPECT_NO_THROW(inferShapes(b.g));
    EXPECT_EQ(b.g.typeOf(b.g.outputs[0]).dtype, ir::DType::kFloat32);
  }
}

TEST(FuseQuantizedOps, WhatDoesNotComputeTheSameStays) {
  // A Relu before a zero point above the minimum is not the saturation: no fusion of
  // the Conv; a MaxPool between different scales stays float.
  GraphBuilder b = qdqConv(10, 2, 0.5f);
  EXPECT_EQ(fuseQuantizedOps(b.g), 0u);
  EXPECT_EQ(count(b.g, "Conv"), 1u);
  EXPECT_EQ(count(b.g, "QLinearConv"), 0u);
}

// DQ(x) -> Gemm(transB, DQ(int8 w per row), float bias) -> Relu -> Q: a 1x1
// QLinearConv between two Reshapes, computing what the QDQ graph does (host, both).
TEST(FuseQuantizedOps, GemmBecomesOneByOneQLinearConv) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {4, 6});
  ir::ValueId xs = typedConstant<float>(b, "xs", ir::DType::kFloat32, {}, {0.01f});
  ir::ValueId xz = typedConstant<uint8_t>(b, "xz", ir::DType::kUInt8, {}, {128});
  ir::ValueId xd = b.node("DequantizeLinear", {b.node("QuantizeLinear", {x, xs, xz}, {}, 13), xs, xz}, {}, 13);
  std::vector<int8_t> wq(3 * 6);
  for (size_t i = 0; i < wq.size(); ++i) wq[i] = int8_t(int(i * 29 % 255) - 127);
  ir::AttributeMap axis0;
  axis0.setInt("axis", 0);
  ir::ValueId w = b.node("DequantizeLinear",
                         {typedConstant<int8_t>(b, "w", ir::DType::kInt8, {3, 6}, wq),
                          typedConstant<float>(b, "ws", ir::DType::kFloat32, {3}, {0.01f, 0.02f, 0.03f}),
                          typedConstant<int8_t>(b, "wz", ir::DType::kInt8, {3}, {0, 0, 0})},
                         axis0, 13);
  ir::AttributeMap trans;
  trans.setInt("transB", 1);
  ir::ValueId y = b.node("Relu", {b.node("Gemm", {xd, w, b.constant("bias", {3}, {0.1f, -0.2f, 0.3f})}, trans, 13)},
                         {}, 13);
  ir::ValueId ys = typedConstant<float>(b, "ys", ir::DType::kFloat32, {}, {0.05f});
  ir::ValueId yz = typedConstant<uint8_t>(b, "yz", ir::DType::kUInt8, {}, {0});
  b.output(b.node("DequantizeLinear", {b.node("QuantizeLinear", {y, ys, yz}, {}, 13), ys, yz}, {}, 13));
  GraphBuilder fused = b;
  EXPECT_EQ(fuseQuantizedOps(fused.g), 1u);
  EXPECT_EQ(count(fused.g, "Gemm"), 0u);
  EXPECT_EQ(count(fused.g, "QLinearConv"), 1u);
  EXPECT_EQ(count(fused.g, "Reshape"), 2u);
  backend::testing::Compiled want = backend::testing::compile(b.g, {"host"});
  backend::testing::Compiled got = backend::testing::compile(fused.g, {"host"});
  std::vector<ir::OwnedTensor> in = backend::testing::randomInputs(*want.graph, 3);
  std::vector<ir::OwnedTensor> a = got.run(in), e = want.run(in);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(a[0].shape(), (std::vector<int64_t>{4, 3}));
  // The float bias rounded to int32 in the accumulator's units: one output step at most.
  EXPECT_LE(backend::testing::closeness(a[0], e[0], 0, 0.0501), 1.0);
}

}  // namespace
}  // namespace partita::passes
