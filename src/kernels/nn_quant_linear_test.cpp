// QuantizeLinear / DequantizeLinear at opsets the importer does not take yet (19: half
// scales, 21: block_size and output_dtype), straight through the registry. The other
// cases run through the Python package (tests/precision/check_precision.py) and ONNX's
// node conformance cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/op_registry.h"
#include "ir/tensor.h"
#include "partita/error.h"

namespace partita::kernels {
namespace {

using ir::DType;
using ir::OwnedTensor;

template <class T>
OwnedTensor tensor(DType dt, const std::vector<int64_t>& shape, const std::vector<T>& v) {
  OwnedTensor t(dt, shape);
  std::copy(v.begin(), v.end(), t.as<T>());
  return t;
}

std::vector<OwnedTensor> run(const std::string& op, int opset, const ir::AttributeMap& attrs,
                             const std::vector<const OwnedTensor*>& inputs) {
  ir::Node node;
  node.op_type = op;
  node.name = "n0";
  node.opset = opset;
  node.attrs = attrs;
  for (size_t i = 0; i < inputs.size(); ++i) node.inputs.push_back(ir::ValueId(i));
  node.outputs.push_back(100);
  std::vector<ir::TensorType> types;
  std::vector<const ir::Tensor*> values;
  for (const OwnedTensor* t : inputs) {
    types.push_back(ir::typeOf(t->view()));
    values.push_back(&t->view());
  }
  std::vector<ir::TensorType> out = inferNode(node, types, values, nullptr);
  KernelContext ctx{node, nullptr, {}, {}, 2};
  for (const OwnedTensor* t : inputs) ctx.inputs.push_back(t->view());
  std::vector<OwnedTensor> results;
  results.reserve(out.size());
  for (const ir::TensorType& t : out) {
    results.emplace_back(t.dtype, t.staticShape());
    ctx.outputs.push_back(results.back().view());
  }
  OpRegistry::global().find("", op)->run(ctx);
  return results;
}

// DynamicQuantizeLinear over a range whose width / 255 is not a normal float32 (a
// range of subnormals: 0; one wider than FLT_MAX: infinity): the scale is held to
// [FLT_MIN, FLT_MAX], the zero point and values stay defined (a scale of 0 made -min /
// scale NaN, converted to uint8: undefined behaviour the fuzzer found).
TEST(QuantLinear, DynamicQuantizeOfATinyOrHugeRange) {
  for (const std::vector<float>& x : {std::vector<float>{0.0f, 1e-45f, 3e-45f}, std::vector<float>{-1e-44f, 0.0f},
                                       std::vector<float>{-3e38f, 3e38f, 0.0f}}) {
    const OwnedTensor in = tensor<float>(DType::kFloat32, {int64_t(x.size())}, x);
    ir::Node node;
    node.op_type = "DynamicQuantizeLinear";
    node.name = "dq";
    node.opset = 11;
    node.inputs = {0};
    node.outputs = {100, 101, 102};
    std::vector<ir::TensorType> out = inferNode(node, {ir::typeOf(in.view())}, {&in.view()}, nullptr);
    ASSERT_EQ(out.size(), 3u);
    KernelContext ctx{node, nullptr, {in.view()}, {}, 2};
    std::vector<OwnedTensor> results;
    results.reserve(3);
    for (const ir::TensorType& t : out) {
      results.emplace_back(t.dtype, t.staticShape());
      ctx.outputs.push_back(results.back().view());
    }
    OpRegistry::global().find("", "DynamicQuantizeLinear")->run(ctx);
    const float scale = results[1].as<float>()[0];
    EXPECT_TRUE(std::isfinite(scale) && scale >= std::numeric_limits<float>::min()) << scale;
    const uint8_t zero = results[2].as<uint8_t>()[0];
    const float lo = std::min(0.0f, *std::min_element(x.begin(), x.end()));
    EXPECT_EQ(zero, uint8_t(std::clamp(std::nearbyint(-lo / scale), 0.0f, 255.0f)));
    for (size_t i = 0; i < x.size(); ++i)
      EXPECT_EQ(results[0].as<uint8_t>()[i], uint8_t(std::clamp(std::nearbyint(x[i] / scale) + zero, 0.0f, 255.0f)))
          << i;
  }
}

TEST(QuantLinear, BlockedQuantizeAndDequantize) {
  // x [2,5], blocks of 2 along axis 1: 3 scale columns.
  OwnedTensor x = tensor<float>(DType::kFloat32, {2, 5}, {1, 2, 3, 4, 5, -1, -2, -3, -4, -5.5f});
  OwnedTensor s = tensor<float>(DType::kFloat32, {2, 3}, {0.5f, 1, 2, 0.25f, 0.5f, 1});
  OwnedTensor z = tensor<int8_t>(DType::kInt8, {2, 3}, {0, 1, -1, 2, 0, 3});
  ir::AttributeMap a;
  a.setInt("axis", 1);
  a.setInt("block_size", 2);
  std::vector<OwnedTensor> q = run("QuantizeLinear", 21, a, {&x, &s, &z});
  ASSERT_EQ(q[0].dtype(), DType::kInt8);
  // round(x / s) + z, ties to even: 1/0.5=2, 2/0.5=4, 3/1+1=4, 4/1+1=5, 5/2=2.5->2 -1=1;
  // -1/0.25+2=-2, -2/0.25+2=-6, -3/0.5=-6, -4/0.5=-8, -5.5/1+3=-5.5->-6+3=-3
  const std::vector<int8_t> want = {2, 4, 4, 5, 1, -2, -6, -6, -8, -3};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(q[0].as<int8_t>()[i], want[i]) << i;
  std::vector<OwnedTensor> d = run("DequantizeLinear", 21, a, {&q[0], &s, &z});
  const std::vector<float> back = {1, 2, 3, 4, 4, -1, -2, -3, -4, -6};
  for (size_t i = 0; i < back.size(); ++i) EXPECT_EQ(d[0].as<float>()[i], back[i]) << i;
}

TEST(QuantLinear, OutputDtypeAttribute) {
  OwnedTensor x = tensor<float>(DType::kFloat32, {3}, {-70000, 3, 70000});
  OwnedTensor s = tensor<float>(DType::kFloat32, {}, {1});
  ir::AttributeMap a;
  a.setInt("output_dtype", 5);  // int16
  std::vector<OwnedTensor> q = run("QuantizeLinear", 21, a, {&x, &s});
  ASSERT_EQ(q[0].dtype(), DType::kInt16);
  EXPECT_EQ(q[0].as<int16_t>()[0], -32768);
  EXPECT_EQ(q[0].as<int16_t>()[1], 3);
  EXPECT_EQ(q[0].as<int16_t>()[2], 32767);
}

TEST(QuantLinear, HalfScaleMakesHalfOutput) {
  OwnedTensor q = tensor<uint8_t>(DType::kUInt8, {3}, {0, 10, 255});
  OwnedTensor s = tensor<uint16_t>(DType::kFloat16, {}, {ir::floatToHalf(0.5f)});
  OwnedTensor z = tensor<uint8_t>(DType::kUInt8, {}, {10});
  std::vector<OwnedTensor> d = run("DequantizeLinear", 19, {}, {&q, &s, &z});
  ASSERT_EQ(d[0].dtype(), DType::kFloat16);
  EXPECT_EQ(ir::halfToFloat(d[0].as<uint16_t>()[0]), -5.0f);
  EXPECT_EQ(ir::halfToFloat(d[0].as<uint16_t>()[2]), 122.5f);
  // bfloat16 x and scale into uint8
  OwnedTensor x = tensor<uint16_t>(DType::kBFloat16, {2}, {ir::floatToBfloat16(3.0f), ir::floatToBfloat16(-1.0f)});
  OwnedTensor bs = tensor<uint16_t>(DType::kBFloat16, {}, {ir::floatToBfloat16(0.5f)});
  std::vector<OwnedTensor> y = run("QuantizeLinear", 19, {}, {&x, &bs, &z});
  EXPECT_EQ(y[0].as<uint8_t>()[0], 16);
  EXPECT_EQ(y[0].as<uint8_t>()[1], 8);
}

TEST(QuantLinear, BlockedShapeMismatchIsAnError) {
  OwnedTensor x = tensor<float>(DType::kFloat32, {2, 5}, std::vector<float>(10, 1));
  OwnedTensor s = tensor<float>(DType::kFloat32, {2, 2}, {1, 1, 1, 1});
  ir::AttributeMap a;
  a.setInt("axis", 1);
  a.setInt("block_size", 2);
  try {
    run("QuantizeLinear", 21, a, {&x, &s});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dimension 1 should be 3"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace partita::kernels
