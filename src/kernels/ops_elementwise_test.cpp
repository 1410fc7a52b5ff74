#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/elementwise_math.h"
#include "kernels/op_registry.h"
#include "ir/tensor.h"
#include "partita/error.h"

namespace partita::kernels {
namespace {

using ir::DType;
using ir::OwnedTensor;

template <class T>
OwnedTensor tensor(DType dt, std::vector<int64_t> shape, const std::vector<T>& data) {
  OwnedTensor t(dt, std::move(shape));
  EXPECT_EQ(size_t(t.view().numel()), data.size());
  if (!data.empty()) std::memcpy(t.data(), data.data(), data.size() * sizeof(T));
  return t;
}
OwnedTensor f32(std::vector<int64_t> shape, const std::vector<float>& d) {
  return tensor(DType::kFloat32, shape, d);
}
OwnedTensor i32(std::vector<int64_t> shape, const std::vector<int32_t>& d) {
  return tensor(DType::kInt32, shape, d);
}
OwnedTensor boolean(std::vector<int64_t> shape, const std::vector<uint8_t>& d) {
  return tensor(DType::kBool, shape, d);
}

template <class T>
std::vector<T> values(const OwnedTensor& t) {
  std::vector<T> out(size_t(t.view().numel()));
  std::memcpy(out.data(), t.data(), out.size() * sizeof(T));
  return out;
}

ir::Node makeNode(const std::string& op, int opset = 17, size_t outputs = 1) {
  ir::Node n;
  n.op_type = op;
  n.name = op + "_test";
  n.opset = opset;
  for (size_t i = 0; i < outputs; ++i) n.outputs.push_back(ir::ValueId(i));
  return n;
}

// Infers output types, allocates outputs and runs the kernel, as the executor does.
// An undefined OwnedTensor stands for an omitted optional input.
std::vector<OwnedTensor> run(ir::Node node, const std::vector<const OwnedTensor*>& inputs) {
  std::vector<ir::TensorType> types;
  std::vector<const ir::Tensor*> vals;
  for (size_t i = 0; i < inputs.size(); ++i) {
    node.inputs.push_back(inputs[i] ? ir::ValueId(100 + i) : ir::kNoValue);
    types.push_back(inputs[i] ? ir::typeOf(inputs[i]->view()) : ir::TensorType{});
    vals.push_back(nullptr);
  }
  std::vector<ir::TensorType> out_types = inferNode(node, types, vals, nullptr);
  const OpDef* def = OpRegistry::global().find("", node.op_type);
  KernelContext ctx{node, nullptr, {}, {}, 2};
  for (const OwnedTensor* in : inputs) ctx.inputs.push_back(in ? in->view() : ir::Tensor{});
  std::vector<OwnedTensor> outs;
  outs.reserve(out_types.size());
  for (const ir::TensorType& t : out_types) {
    EXPECT_TRUE(t.isStatic()) << t.str();
    outs.emplace_back(t.dtype, t.staticShape());
    ctx.outputs.push_back(outs.back().view());
  }
  def->run(ctx);
  return outs;
}

TEST(ElementwiseOps, AddBroadcastsBothWays) {
  OwnedTensor a = f32({2, 1, 3}, {1, 2, 3, 4, 5, 6});
  OwnedTensor b = f32({4, 1}, {10, 20, 30, 40});
  std::vector<OwnedTensor> out = run(makeNode("Add"), {&a, &b});
  ASSERT_EQ(out[0].shape(), (std::vector<int64_t>{2, 4, 3}));
  std::vector<float> got = values<float>(out[0]);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k)
        EXPECT_EQ(got[size_t((i * 4 + j) * 3 + k)], float(i * 3 + k + 1) + 10.0f * float(j + 1));
}

TEST(ElementwiseOps, SubWithScalarOnTheLeft) {
  OwnedTensor a = f32({}, {10});
  OwnedTensor b = f32({2, 2}, {1, 2, 3, 4});
  std::vector<OwnedTensor> out = run(makeNode("Sub"), {&a, &b});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{9, 8, 7, 6}));
}

// Large enough to take the multi-threaded path; checks every broadcast pattern
// against a direct index computation.
TEST(ElementwiseOps, LargeBroadcastPatternsMatchReference) {
  const int64_t N = 2, C = 16, H = 48, W = 50;
  std::vector<float> x(size_t(N * C * H * W));
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i % 97) * 0.5f;
  OwnedTensor a = f32({N, C, H, W}, x);
  struct Pattern {
    std::vector<int64_t> shape;
    std::vector<int64_t> strides;  // of b along N, C, H, W (0: broadcast)
  };
  const std::vector<Pattern> patterns = {
      {{N, C, H, W}, {C * H * W, H * W, W, 1}},  // same shape
      {{C, 1, 1}, {0, 1, 0, 0}},                 // per channel
      {{W}, {0, 0, 0, 1}},                       // last axis
      {{N, 1, H, 1}, {H, 0, 1, 0}},              // strided
      {{1}, {0, 0, 0, 0}},                       // scalar
  };
  for (const Pattern& p : patterns) {
    std::vector<float> y(size_t(ir::shapeNumel(p.shape)));
    for (size_t i = 0; i < y.size(); ++i) y[i] = float(i % 13) + 1.0f;
    OwnedTensor b = f32(p.shape, y);
    std::vector<OwnedTensor> out = run(makeNode("Mul"), {&a, &b});
    std::vector<float> got = values<float>(out[0]);
    ASSERT_EQ(out[0].shape(), (std::vector<int64_t>{N, C, H, W}));
    int64_t bad = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t w = 0; w < W; ++w) {
            int64_t o = ((n * C + c) * H + h) * W + w;
            int64_t j = n * p.strides[0] + c * p.strides[1] + h * p.strides[2] + w * p.strides[3];
            if (got[size_t(o)] != x[size_t(o)] * y[size_t(j)]) ++bad;
          }
    EXPECT_EQ(bad, 0) << "pattern " << ir::shapeStr(p.shape);
  }
}

TEST(ElementwiseOps, IntegerDivisionTruncatesTowardZero) {
  OwnedTensor a = i32({6}, {7, -7, 7, -7, 5, std::numeric_limits<int32_t>::min()});
  OwnedTensor b = i32({6}, {2, 2, -2, -2, 0, -1});
  std::vector<OwnedTensor> out = run(makeNode("Div"), {&a, &b});
  EXPECT_EQ(values<int32_t>(out[0]),
            (std::vector<int32_t>{3, -3, -3, 3, 0, std::numeric_limits<int32_t>::min()}));
}

TEST(ElementwiseOps, UInt8ArithmeticWraps) {
  OwnedTensor a = tensor<uint8_t>(DType::kUInt8, {3}, {250, 3, 16});
  OwnedTensor b = tensor<uint8_t>(DType::kUInt8, {3}, {10, 5, 16});
  EXPECT_EQ(values<uint8_t>(run(makeNode("Add"), {&a, &b})[0]), (std::vector<uint8_t>{4, 8, 32}));
  EXPECT_EQ(values<uint8_t>(run(makeNode("Sub"), {&a, &b})[0]), (std::vector<uint8_t>{240, 254, 0}));
  EXPECT_EQ(values<uint8_t>(run(makeNode("Mul"), {&a, &b})[0]), (std::vector<uint8_t>{196, 15, 0}));
}

TEST(ElementwiseOps, ModFollowsDivisorSignUnlessFmod) {
  OwnedTensor a = i32({6}, {-4, 7, 5, 4, -7, 8});
  OwnedTensor b = i32({6}, {2, -3, 8, -2, 3, 5});
  // numpy.mod
  EXPECT_EQ(values<int32_t>(run(makeNode("Mod"), {&a, &b})[0]), (std::vector<int32_t>{0, -2, 5, 0, 2, 3}));
  ir::Node fmod = makeNode("Mod");
  fmod.attrs.setInt("fmod", 1);
  // numpy.fmod
  EXPECT_EQ(values<int32_t>(run(fmod, {&a, &b})[0]), (std::vector<int32_t>{0, 1, 5, 0, -1, 3}));
  OwnedTensor x = f32({3}, {-4.3f, 7.2f, 5.0f});
  OwnedTensor y = f32({3}, {2.1f, -3.4f, 8.0f});
  std::vector<float> got = values<float>(run(fmod, {&x, &y})[0]);
  EXPECT_FLOAT_EQ(got[0], std::fmod(-4.3f, 2.1f));
  EXPECT_FLOAT_EQ(got[1], std::fmod(7.2f, -3.4f));
  EXPECT_FLOAT_EQ(got[2], 5.0f);
}

TEST(ElementwiseOps, PowMixesBaseAndExponentTypes) {
  OwnedTensor base = i32({4}, {2, -3, 5, 1});
  OwnedTensor exp = i32({4}, {10, 3, 0, -2});
  EXPECT_EQ(values<int32_t>(run(makeNode("Pow"), {&base, &exp})[0]), (std::vector<int32_t>{1024, -27, 1, 1}));
  OwnedTensor fbase = f32({3}, {2.0f, 0.5f, -2.0f});
  OwnedTensor iexp = tensor<int64_t>(DType::kInt64, {3}, {3, -2, 2});
  EXPECT_EQ(values<float>(run(makeNode("Pow"), {&fbase, &iexp})[0]), (std::vector<float>{8.0f, 4.0f, 4.0f}));
  OwnedTensor fexp = f32({1}, {0.5f});
  OwnedTensor ibase = tensor<int64_t>(DType::kInt64, {2}, {16, 10});
  EXPECT_EQ(values<int64_t>(run(makeNode("Pow"), {&ibase, &fexp})[0]), (std::vector<int64_t>{4, 3}));
}

TEST(ElementwiseOps, BitShiftAndComparisons) {
  OwnedTensor a = tensor<uint8_t>(DType::kUInt8, {3}, {16, 4, 1});
  OwnedTensor b = tensor<uint8_t>(DType::kUInt8, {3}, {1, 2, 8});
  ir::Node left = makeNode("BitShift");
  left.attrs.setString("direction", "LEFT");
  EXPECT_EQ(values<uint8_t>(run(left, {&a, &b})[0]), (std::vector<uint8_t>{32, 16, 0}));
  ir::Node right = makeNode("BitShift");
  right.attrs.setString("direction", "RIGHT");
  EXPECT_EQ(values<uint8_t>(run(right, {&a, &b})[0]), (std::vector<uint8_t>{8, 1, 0}));

  OwnedTensor x = f32({2, 2}, {1, 2, 3, 4});
  OwnedTensor y = f32({2}, {2, 3});
  std::vector<OwnedTensor> less = run(makeNode("Less"), {&x, &y});
  EXPECT_EQ(less[0].dtype(), DType::kBool);
  EXPECT_EQ(values<uint8_t>(less[0]), (std::vector<uint8_t>{1, 1, 0, 0}));
  EXPECT_EQ(values<uint8_t>(run(makeNode("GreaterOrEqual"), {&x, &y})[0]),
            (std::vector<uint8_t>{0, 0, 1, 1}));
  EXPECT_EQ(values<uint8_t>(run(makeNode("Equal"), {&x, &y})[0]), (std::vector<uint8_t>{0, 0, 0, 0}));
  OwnedTensor p = boolean({4}, {0, 1, 0, 1});
  OwnedTensor q = boolean({4}, {0, 0, 1, 1});
  EXPECT_EQ(values<uint8_t>(run(makeNode("Xor"), {&p, &q})[0]), (std::vector<uint8_t>{0, 1, 1, 0}));
  EXPECT_EQ(values<uint8_t>(run(makeNode("And"), {&p, &q})[0]), (std::vector<uint8_t>{0, 0, 0, 1}));
  EXPECT_EQ(values<uint8_t>(run(makeNode("Not"), {&p})[0]), (std::vector<uint8_t>{1, 0, 1, 0}));
}

TEST(ElementwiseOps, RoundHalfToEvenFloorCeil) {
  OwnedTensor x = f32({9}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 2.4f, 2.6f, -2.6f});
  EXPECT_EQ(values<float>(run(makeNode("Round"), {&x})[0]),
            (std::vector<float>{0, 2, 2, -0.0f, -2, -2, 2, 3, -3}));
  EXPECT_EQ(values<float>(run(makeNode("Floor"), {&x})[0]),
            (std::vector<float>{0, 1, 2, -1, -2, -3, 2, 2, -3}));
  EXPECT_EQ(values<float>(run(makeNode("Ceil"), {&x})[0]),
            (std::vector<float>{1, 2, 3, -0.0f, -1, -2, 3, 3, -2}));
}

TEST(ElementwiseOps, CastFloatToHalfAndBack) {
  OwnedTensor x = f32({6}, {1.0f, 0.1f, 65504.0f, 1e5f, 3.14159f, -2.5e-8f});
  ir::Node to_half = makeNode("Cast");
  to_half.attrs.setInt("to", 10);  // FLOAT16
  std::vector<OwnedTensor> h = run(to_half, {&x});
  ASSERT_EQ(h[0].dtype(), DType::kFloat16);
  EXPECT_EQ(values<uint16_t>(h[0]), (std::vector<uint16_t>{0x3C00, 0x2E66, 0x7BFF, 0x7C00, 0x4248, 0x8000}));
  ir::Node to_float = makeNode("Cast");
  to_float.attrs.setInt("to", 1);
  std::vector<float> back = values<float>(run(to_float, {&h[0]})[0]);
  EXPECT_EQ(back[0], 1.0f);
  EXPECT_EQ(back[1], 0.0999755859375f);
  EXPECT_EQ(back[2], 65504.0f);
  EXPECT_EQ(back[3], std::numeric_limits<float>::infinity());
  EXPECT_EQ(back[4], 3.140625f);
  EXPECT_EQ(back[5], 0.0f);
}

// Long enough for the vector (F16C) path; must agree with ir's scalar conversions,
// including subnormals, overflow, infinities and NaN.
TEST(ElementwiseOps, CastHalfArraysMatchScalarConversion) {
  std::vector<float> x;
  for (int i = 0; i < 2000; ++i)
    x.push_back(std::ldexp(float((i * 7919) % 1000) / 999.0f + 1.0f, (i % 60) - 30) * (i % 3 ? 1.0f : -1.0f));
  x.push_back(std::numeric_limits<float>::infinity());
  x.push_back(-std::numeric_limits<float>::infinity());
  x.push_back(65519.0f);
  x.push_back(65520.0f);
  x.push_back(std::nanf(""));
  for (int i = 0; i < 3; ++i) x.push_back(5.96e-8f * float(i));  // half subnormals
  OwnedTensor in = f32({int64_t(x.size())}, x);
  ir::Node to_half = makeNode("Cast");
  to_half.attrs.setInt("to", 10);
  std::vector<uint16_t> h = values<uint16_t>(run(to_half, {&in})[0]);
  int bad = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    uint16_t want = ir::floatToHalf(x[i]);
    bool both_nan =
        (want & 0x7c00) == 0x7c00 && (want & 0x3ff) && (h[i] & 0x7c00) == 0x7c00 && (h[i] & 0x3ff);
    if (h[i] != want && !both_nan) ++bad;
  }
  EXPECT_EQ(bad, 0);
  OwnedTensor hin = tensor<uint16_t>(DType::kFloat16, {int64_t(h.size())}, h);
  ir::Node to_float = makeNode("Cast");
  to_float.attrs.setInt("to", 1);
  std::vector<float> back = values<float>(run(to_float, {&hin})[0]);
  bad = 0;
  for (size_t i = 0; i < h.size(); ++i) {
    float want = ir::halfToFloat(h[i]);
    if (back[i] != want && !(std::isnan(back[i]) && std::isnan(want))) ++bad;
  }
  EXPECT_EQ(bad, 0);
}

TEST(ElementwiseOps, CastToBfloat16TruncatesButArithmeticRounds) {
  std::vector<uint32_t> bits = {0x3ef5eeb0u, 0x3f800000u, 0xbf81ffffu, 0x7fc00001u};
  std::vector<float> x(bits.size());
  std::memcpy(x.data(), bits.data(), bits.size() * 4);
  OwnedTensor in = f32({4}, x);
  ir::Node to_bf16 = makeNode("Cast");
  to_bf16.attrs.setInt("to", 16);  // BFLOAT16
  std::vector<OwnedTensor> b = run(to_bf16, {&in});
  ASSERT_EQ(b[0].dtype(), DType::kBFloat16);
  std::vector<uint16_t> got = values<uint16_t>(b[0]);
  EXPECT_EQ(got[0], 0x3ef5);  // ONNX's conformance data truncates
  EXPECT_EQ(got[1], 0x3f80);
  EXPECT_EQ(got[2], 0xbf81);
  EXPECT_EQ(got[3] & 0x7fc0, 0x7fc0);  // still NaN
  // 1.0078125 + 0.00390625 is halfway between two bfloat16 values: rounds to even.
  OwnedTensor p = tensor<uint16_t>(DType::kBFloat16, {1}, {0x3f81});
  OwnedTensor q = tensor<uint16_t>(DType::kBFloat16, {1}, {0x3b80});  // 0.00390625
  EXPECT_EQ(values<uint16_t>(run(makeNode("Add"), {&p, &q})[0]), (std::vector<uint16_t>{0x3f82}));
}

TEST(ElementwiseOps, CastBetweenIntegersFloatsAndBool) {
  OwnedTensor x = f32({5}, {-1.7f, 2.9f, 0.0f, 300.0f, std::nanf("")});
  ir::Node to_i32 = makeNode("Cast");
  to_i32.attrs.setInt("to", 6);
  EXPECT_EQ(values<int32_t>(run(to_i32, {&x})[0]), (std::vector<int32_t>{-1, 2, 0, 300, 0}));
  ir::Node to_u8 = makeNode("Cast");
  to_u8.attrs.setInt("to", 2);
  EXPECT_EQ(values<uint8_t>(run(to_u8, {&x})[0]), (std::vector<uint8_t>{255, 2, 0, 44, 0}));
  ir::Node to_bool = makeNode("Cast");
  to_bool.attrs.setInt("to", 9);
  EXPECT_EQ(values<uint8_t>(run(to_bool, {&x})[0]), (std::vector<uint8_t>{1, 1, 0, 1, 1}));
  OwnedTensor like = tensor<double>(DType::kFloat64, {1}, {0.0});
  std::vector<OwnedTensor> d = run(makeNode("CastLike"), {&x, &like});
  EXPECT_EQ(d[0].dtype(), DType::kFloat64);
  EXPECT_EQ(values<double>(d[0])[1], double(2.9f));
}

TEST(ElementwiseOps, CastToStringIsUnsupported) {
  OwnedTensor x = f32({1}, {1});
  ir::Node n = makeNode("Cast");
  n.attrs.setInt("to", 8);
  try {
    run(n, {&x});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
  }
}

TEST(ElementwiseOps, WhereBroadcastsAllThreeInputs) {
  OwnedTensor cond = boolean({2, 1}, {1, 0});
  OwnedTensor x = tensor<int64_t>(DType::kInt64, {1, 3}, {1, 2, 3});
  OwnedTensor y = tensor<int64_t>(DType::kInt64, {}, {-1});
  std::vector<OwnedTensor> out = run(makeNode("Where"), {&cond, &x, &y});
  ASSERT_EQ(out[0].shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(values<int64_t>(out[0]), (std::vector<int64_t>{1, 2, 3, -1, -1, -1}));
}

TEST(ElementwiseOps, VariadicMaxMinSumMean) {
  OwnedTensor a = f32({3}, {3, 2, 1});
  OwnedTensor b = f32({1}, {2});
  OwnedTensor c = f32({2, 1}, {0, 5});
  EXPECT_EQ(values<float>(run(makeNode("Max"), {&a, &b, &c})[0]), (std::vector<float>{3, 2, 2, 5, 5, 5}));
  EXPECT_EQ(values<float>(run(makeNode("Min"), {&a, &b, &c})[0]), (std::vector<float>{0, 0, 0, 2, 2, 1}));
  EXPECT_EQ(values<float>(run(makeNode("Sum"), {&a, &b, &c})[0]), (std::vector<float>{5, 4, 3, 10, 9, 8}));
  EXPECT_EQ(values<float>(run(makeNode("Mean"), {&a, &b})[0]), (std::vector<float>{2.5f, 2, 1.5f}));
  EXPECT_EQ(values<float>(run(makeNode("Sum"), {&a})[0]), (std::vector<float>{3, 2, 1}));
  OwnedTensor ia = tensor<uint16_t>(DType::kUInt16, {2}, {7, 65535});
  OwnedTensor ib = tensor<uint16_t>(DType::kUInt16, {2}, {9, 1});
  EXPECT_EQ(values<uint16_t>(run(makeNode("Max"), {&ia, &ib})[0]), (std::vector<uint16_t>{9, 65535}));
}

TEST(ElementwiseOps, Float16GoesThroughFloat) {
  OwnedTensor a = tensor<uint16_t>(DType::kFloat16, {2}, {0x3C00, 0x4000});  // 1, 2
  OwnedTensor b = tensor<uint16_t>(DType::kFloat16, {1}, {0x3800});          // 0.5
  std::vector<OwnedTensor> out = run(makeNode("Add"), {&a, &b});
  ASSERT_EQ(out[0].dtype(), DType::kFloat16);
  EXPECT_EQ(values<uint16_t>(out[0]), (std::vector<uint16_t>{0x3E00, 0x4100}));  // 1.5, 2.5
}

TEST(ElementwiseOps, ClipInputsAndAttributes) {
  OwnedTensor x = tensor<int8_t>(DType::kInt8, {4}, {-128, -3, 5, 127});
  OwnedTensor lo = tensor<int8_t>(DType::kInt8, {}, {-2});
  EXPECT_EQ(values<int8_t>(run(makeNode("Clip", 13), {&x, &lo})[0]), (std::vector<int8_t>{-2, -2, 5, 127}));
  OwnedTensor none;
  OwnedTensor hi = tensor<int8_t>(DType::kInt8, {}, {4});
  EXPECT_EQ(values<int8_t>(run(makeNode("Clip", 13), {&x, &none, &hi})[0]),
            (std::vector<int8_t>{-128, -3, 4, 4}));
  ir::Node old = makeNode("Clip", 6);
  old.attrs.setFloat("min", -1.0f);
  old.attrs.setFloat("max", 1.5f);
  OwnedTensor f = f32({3}, {-5, 0.25f, 9});
  EXPECT_EQ(values<float>(run(old, {&f})[0]), (std::vector<float>{-1, 0.25f, 1.5f}));
}

TEST(ElementwiseOps, ActivationsWithAttributes) {
  OwnedTensor x = f32({4}, {-2, -0.5f, 0.5f, 3});
  ir::Node leaky = makeNode("LeakyRelu");
  leaky.attrs.setFloat("alpha", 0.1f);
  std::vector<float> got = values<float>(run(leaky, {&x})[0]);
  EXPECT_FLOAT_EQ(got[0], -0.2f);
  EXPECT_FLOAT_EQ(got[3], 3.0f);
  EXPECT_EQ(values<float>(run(makeNode("Relu"), {&x})[0]), (std::vector<float>{0, 0, 0.5f, 3}));
  got = values<float>(run(makeNode("HardSwish"), {&x})[0]);
  EXPECT_FLOAT_EQ(got[0], -2.0f * (-2.0f / 6 + 0.5f));
  EXPECT_FLOAT_EQ(got[3], 3.0f);
  got = values<float>(run(makeNode("Elu"), {&x})[0]);
  EXPECT_NEAR(got[0], std::expm1(-2.0), 1e-7);
  EXPECT_NEAR(got[1], std::expm1(-0.5), 1e-7);
  ir::Node shrink = makeNode("Shrink");
  shrink.attrs.setFloat("lambd", 1.0f);
  shrink.attrs.setFloat("bias", 0.5f);
  EXPECT_EQ(values<float>(run(shrink, {&x})[0]), (std::vector<float>{-1.5f, 0, 0, 2.5f}));
  OwnedTensor slope = f32({4}, {0.1f, 0.2f, 0.3f, 0.4f});
  got = values<float>(run(makeNode("PRelu"), {&x, &slope})[0]);
  EXPECT_FLOAT_EQ(got[0], -0.2f);
  EXPECT_FLOAT_EQ(got[1], -0.1f);
  EXPECT_FLOAT_EQ(got[2], 0.5f);
}

TEST(ElementwiseOps, PReluAcceptsPerChannelSlope) {
  OwnedTensor x = f32({1, 2, 2}, {-1, 1, -1, 1});
  OwnedTensor slope = f32({2}, {0.5f, 0.25f});  // [C] against [N, C, W] with C == W: numpy rules apply
  EXPECT_EQ(values<float>(run(makeNode("PRelu"), {&x, &slope})[0]), (std::vector<float>{-0.5f, 1, -0.5f, 1}));
  OwnedTensor x3 = f32({1, 2, 3}, {-1, -1, -1, -2, -2, -2});
  EXPECT_EQ(values<float>(run(makeNode("PRelu"), {&x3, &slope})[0]),
            (std::vector<float>{-0.5f, -0.5f, -0.5f, -0.5f, -0.5f, -0.5f}));
}

TEST(ElementwiseOps, IsNaNIsInf) {
  const float inf = std::numeric_limits<float>::infinity();
  OwnedTensor x = f32({4}, {1, std::nanf(""), inf, -inf});
  EXPECT_EQ(values<uint8_t>(run(makeNode("IsNaN"), {&x})[0]), (std::vector<uint8_t>{0, 1, 0, 0}));
  EXPECT_EQ(values<uint8_t>(run(makeNode("IsInf"), {&x})[0]), (std::vector<uint8_t>{0, 0, 1, 1}));
  ir::Node neg = makeNode("IsInf");
  neg.attrs.setInt("detect_positive", 0);
  EXPECT_EQ(values<uint8_t>(run(neg, {&x})[0]), (std::vector<uint8_t>{0, 0, 0, 1}));
}

TEST(ElementwiseOps, DropoutInInferenceIsIdentityWithTrueMask) {
  OwnedTensor x = f32({3}, {1, 2, 3});
  OwnedTensor ratio = f32({}, {0.7f});
  std::vector<OwnedTensor> out = run(makeNode("Dropout", 13, 2), {&x, &ratio});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{1, 2, 3}));
  ASSERT_EQ(out[1].dtype(), DType::kBool);
  EXPECT_EQ(values<uint8_t>(out[1]), (std::vector<uint8_t>{1, 1, 1}));
  OwnedTensor training = boolean({}, {1});
  try {
    run(makeNode("Dropout", 13, 2), {&x, &ratio, &training});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
  }
  OwnedTensor zero = f32({}, {0.0f});
  out = run(makeNode("Dropout", 13, 2), {&x, &zero, &training});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{1, 2, 3}));
  std::vector<OwnedTensor> old = run(makeNode("Dropout", 7, 2), {&x});
  ASSERT_EQ(old[1].dtype(), DType::kFloat32);
  EXPECT_EQ(values<float>(old[1]), (std::vector<float>{1, 1, 1}));
}

TEST(ElementwiseOps, InferRejectsShapesThatDoNotBroadcast) {
  ir::Node n = makeNode("Add");
  n.inputs = {0, 1};
  try {
    inferNode(n, {ir::TensorType::of(DType::kFloat32, {2, 3}), ir::TensorType::of(DType::kFloat32, {4})}, {},
              nullptr);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidModel);
    EXPECT_NE(std::string(e.what()).find("do not broadcast"), std::string::npos) << e.what();
  }
  ir::Node one_input = makeNode("Add");
  one_input.inputs = {0};
  try {
    inferNode(one_input, {ir::TensorType::of(DType::kFloat32, {2})}, {}, nullptr);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidModel);
    EXPECT_NE(std::string(e.what()).find("Add node 'Add_test': has 1 input, opset 17 allows 2"), std::string::npos) << e.what();
  }
  // Symbolic dims stay symbolic.
  ir::TensorType a = ir::TensorType::of(DType::kFloat32, {1, 3});
  a.dims[0] = ir::Dim::symbolic("N");
  std::vector<ir::TensorType> out =
      inferNode(n, {a, ir::TensorType::of(DType::kFloat32, {3})}, {nullptr, nullptr}, nullptr);
  EXPECT_EQ(out[0].str(), "float32[N,3]");
}

// The vectorisable float32 exp/tanh/erf against libm in double.
TEST(ElementwiseMath, FastFunctionsStayWithinAFewUlp) {
  double worst_exp = 0, worst_tanh = 0, worst_erf = 0, worst_expm1 = 0;
  for (float x = -87.0f; x < 88.0f; x += 0.0137f) {
    double ref = std::exp(double(x));
    worst_exp = std::max(worst_exp, std::fabs(elementwise::fastExp(x) - ref) / ref);
  }
  for (float x = -9.0f; x < 9.0f; x += 0.00113f) {
    double t = std::tanh(double(x)), e = std::erf(double(x)), m = std::expm1(double(x));
    worst_tanh = std::max(worst_tanh, std::fabs(elementwise::fastTanh(x) - t) / std::fabs(t));
    worst_erf = std::max(worst_erf, std::fabs(elementwise::fastErf(x) - e) / std::fabs(e));
    worst_expm1 = std::max(worst_expm1, std::fabs(elementwise::fastExpm1(x) - m) / std::fabs(m));
  }
  EXPECT_LT(worst_exp, 3e-7);
  EXPECT_LT(worst_tanh, 3e-7);
  EXPECT_LT(worst_erf, 4e-7);
  EXPECT_LT(worst_expm1, 4e-7);
  EXPECT_EQ(elementwise::fastExp(-200.0f), 0.0f);
  EXPECT_EQ(elementwise::fastExp(100.0f), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(elementwise::fastExp(std::nanf(""))));
  EXPECT_EQ(elementwise::fastTanh(50.0f), 1.0f);
  EXPECT_EQ(elementwise::fastErf(-10.0f), -1.0f);
  EXPECT_TRUE(std::isnan(elementwise::fastTanh(std::nanf(""))));
}

TEST(ElementwiseOps, SigmoidAndTanhSaturate) {
  OwnedTensor x = f32({5}, {-100, -1, 0, 1, 100});
  std::vector<float> s = values<float>(run(makeNode("Sigmoid"), {&x})[0]);
  EXPECT_EQ(s[0], 0.0f);
  EXPECT_NEAR(s[1], 1.0 / (1.0 + std::exp(1.0)), 1e-7);
  EXPECT_EQ(s[2], 0.5f);
  EXPECT_EQ(s[4], 1.0f);
  std::vector<float> t = values<float>(run(makeNode("Tanh"), {&x})[0]);
  EXPECT_EQ(t[0], -1.0f);
  EXPECT_NEAR(t[3], std::tanh(1.0), 1e-7);
}

}  // namespace
}  // namespace partita::kernels
