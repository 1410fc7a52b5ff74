// Tests of the neural-network host ops: each builds one node, runs its inference and
// kernel through the registry, and compares with values computed by PyTorch or by
// ONNX's reference code (pasted as literals), or with a naive loop in the test.
#include <gtest/gtest.h>

#include <limits>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/op_registry.h"
#include "kernels/op_util.h"
#include "ir/tensor.h"
#include "partita/error.h"

namespace partita::kernels {
namespace {

using ir::DType;
using ir::OwnedTensor;

OwnedTensor floats(const std::vector<int64_t>& shape, const std::vector<float>& v) {
  OwnedTensor t(DType::kFloat32, shape);
  EXPECT_EQ(size_t(t.view().numel()), v.size());
  std::copy(v.begin(), v.end(), t.as<float>());
  return t;
}

OwnedTensor uint8s(const std::vector<int64_t>& shape, const std::vector<uint8_t>& v) {
  OwnedTensor t(DType::kUInt8, shape);
  std::copy(v.begin(), v.end(), t.as<uint8_t>());
  return t;
}

OwnedTensor int64s(const std::vector<int64_t>& shape, const std::vector<int64_t>& v) {
  OwnedTensor t(DType::kInt64, shape);
  std::copy(v.begin(), v.end(), t.as<int64_t>());
  return t;
}

// (i % mod) - off for i in [0, n): the same pattern the Python generator used.
std::vector<float> pattern(int64_t n, int64_t mod, int64_t off) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float(i % mod - off);
  return v;
}

std::vector<float> randoms(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(gen);
  return v;
}

struct NodeRun {
  ir::Node node;
  std::vector<ir::TensorType> types;  // inferred output types
  std::vector<OwnedTensor> outputs;
};

// Infers (with every input value known) and runs `op` on `inputs` (an undefined
// OwnedTensor is an omitted input). `num_outputs` outputs are requested.
NodeRun runOp(const std::string& op, const ir::AttributeMap& attrs,
              const std::vector<const OwnedTensor*>& inputs, size_t num_outputs = 1, int opset = 17) {
  NodeRun r;
  r.node.op_type = op;
  r.node.name = "n0";
  r.node.opset = opset;
  r.node.attrs = attrs;
  for (size_t i = 0; i < inputs.size(); ++i)
    r.node.inputs.push_back(inputs[i] ? ir::ValueId(i) : ir::kNoValue);
  for (size_t i = 0; i < num_outputs; ++i) r.node.outputs.push_back(ir::ValueId(100 + i));
  const OpDef* def = OpRegistry::global().find("", op);
  if (!def) throw Error(ErrorCode::kUnsupported, "no op " + op);
  std::vector<ir::TensorType> in_types;
  std::vector<const ir::Tensor*> values;
  for (const OwnedTensor* t : inputs) {
    in_types.push_back(t ? ir::typeOf(t->view()) : ir::TensorType{});
    values.push_back(t ? &t->view() : nullptr);
  }
  r.types = inferNode(r.node, in_types, values, nullptr);
  KernelContext ctx{r.node, nullptr, {}, {}, 2};
  for (const OwnedTensor* t : inputs) ctx.inputs.push_back(t ? t->view() : ir::Tensor{});
  r.outputs.reserve(num_outputs);
  for (const ir::TensorType& t : r.types) {
    r.outputs.emplace_back(t.dtype, t.staticShape());
    ctx.outputs.push_back(r.outputs.back().view());
  }
  def->run(ctx);
  return r;
}

void expectValues(const OwnedTensor& t, const std::vector<int64_t>& shape, const std::vector<float>& want,
                  float tol = 1e-5f) {
  ASSERT_EQ(t.shape(), shape);
  ASSERT_EQ(size_t(t.view().numel()), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(t.as<float>()[i], want[i], tol * std::max(1.0f, std::abs(want[i]))) << "at " << i;
}

ir::AttributeMap attrs(std::initializer_list<std::pair<std::string, std::vector<int64_t>>> ints) {
  ir::AttributeMap m;
  for (const auto& [k, v] : ints) m.setInts(k, v);
  return m;
}

// Direct 2-D convolution, the definition written out.
std::vector<float> naiveConv2d(const std::vector<float>& x, const std::vector<int64_t>& xs,
                               const std::vector<float>& w, const std::vector<int64_t>& ws,
                               const std::vector<float>& b, int64_t group, int64_t stride, int64_t pad,
                               int64_t dil, std::vector<int64_t>& ys) {
  const int64_t n = xs[0], c = xs[1], h = xs[2], wd = xs[3], m = ws[0], kh = ws[2], kw = ws[3];
  const int64_t oh = (h + 2 * pad - (kh - 1) * dil - 1) / stride + 1,
                ow = (wd + 2 * pad - (kw - 1) * dil - 1) / stride + 1;
  ys = {n, m, oh, ow};
  const int64_t cg = c / group, mg = m / group;
  std::vector<float> y(static_cast<size_t>(n * m * oh * ow));
  for (int64_t bi = 0; bi < n; ++bi)
    for (int64_t mi = 0; mi < m; ++mi)
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = b.empty() ? 0 : b[size_t(mi)];
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t p = 0; p < kh; ++p)
              for (int64_t q = 0; q < kw; ++q) {
                int64_t ih = i * stride - pad + p * dil, iw = j * stride - pad + q * dil;
                if (ih < 0 || ih >= h || iw < 0 || iw >= wd) continue;
                int64_t cin = (mi / mg) * cg + ci;
                acc += double(x[size_t(((bi * c + cin) * h + ih) * wd + iw)]) *
                       w[size_t(((mi * cg + ci) * kh + p) * kw + q)];
              }
          y[size_t(((bi * m + mi) * oh + i) * ow + j)] = float(acc);
        }
  return y;
}

// ---- Conv ---------------------------------------------------------------------------

TEST(ConvOp, GroupedWithAsymmetricStrideAndPadsMatchesTorch) {
  OwnedTensor x = floats({1, 4, 5, 5}, pattern(100, 7, 3));
  OwnedTensor w = floats({4, 2, 3, 3}, pattern(72, 5, 2));
  OwnedTensor b = floats({4}, {1, -1, 0.5f, 2});
  ir::AttributeMap a = attrs({{"strides", {2, 2}}, {"pads", {1, 0, 1, 0}}});
  a.setInt("group", 2);
  NodeRun r = runOp("Conv", a, {&x, &w, &b});
  EXPECT_EQ(r.types[0].str(), "float32[1,4,3,2]");
  expectValues(r.outputs[0], {1, 4, 3, 2},
               {1,    -11,    -20,    30,    13,    -8,   -5,  -4, 37, -10, -14, -12,
                7.5f, -14.5f, -17.5f, 17.5f, -2.5f, 5.5f, -11, 15, 40, 3,   -2,  -10});
}

TEST(ConvOp, DepthwiseMatchesTorch) {
  OwnedTensor x = floats({1, 3, 4, 4}, pattern(48, 5, 2));
  OwnedTensor w = floats({3, 1, 3, 3}, pattern(27, 4, 1));
  ir::AttributeMap a = attrs({{"pads", {1, 1, 1, 1}}});
  a.setInt("group", 3);
  NodeRun r = runOp("Conv", a, {&x, &w});
  expectValues(r.outputs[0], {1, 3, 4, 4},
               {8,  -4, -6, -2, -3, 15, -2, -6, -4, -3, 15, -4, 2,  -4, -3, 8, 2,  -1, 0, -2, -4, 10, 4,  0,
                -7, -4, 10, -1, 0,  -7, -4, 2,  2,  7,  0,  -3, -3, 4,  14, 0, -8, -6, 4, 7,  -5, -8, -3, 2});
}

TEST(ConvOp, DepthwiseWithMultiplierStrideDilationMatchesTorch) {
  OwnedTensor x = floats({2, 2, 6, 6}, pattern(144, 7, 3));
  OwnedTensor w = floats({4, 1, 3, 3}, pattern(36, 3, 1));
  OwnedTensor b = floats({4}, {0.5f, -0.5f, 1, 2});
  ir::AttributeMap a = attrs({{"pads", {2, 2, 2, 2}}, {"strides", {2, 2}}, {"dilations", {2, 2}}});
  a.setInt("group", 2);
  NodeRun r = runOp("Conv", a, {&x, &w, &b});
  expectValues(
      r.outputs[0], {2, 4, 3, 3},
      {-3.5f, 1.5f,  4.5f,  -1.5f, -1.5f, 2.5f, -0.5f, -5.5f, 1.5f, -4.5f, 0.5f, 3.5f, -2.5f, -2.5f, 1.5f,
       -1.5f, -6.5f, 0.5f,  -1,    2,     3,    2,     -1,    0,    2,     -5,   0,    0,     3,     4,
       3,     0,     1,     3,     -4,    1,    0.5f,  8.5f,  0.5f, -2.5f, 5.5f, 3.5f, -3.5f, 1.5f,  4.5f,
       -0.5f, 7.5f,  -0.5f, -3.5f, 4.5f,  2.5f, -4.5f, 0.5f,  3.5f, 3,     2,    -1,   1,     -1,    1,
       -1,    2,     3,     4,     3,     0,    2,     0,     2,    0,     3,    4});
}

// Shapes that take each code path: tiles over columns, the channel-split GEMM for
// small images, the 1x1 path without im2col, batches of grouped images and the
// depthwise loops.
TEST(ConvOp, AllPathsMatchNaiveConvolution) {
  struct Case {
    std::vector<int64_t> xs, ws;
    int64_t group, stride, pad, dil;
    bool bias;
  };
  const Case cases[] = {
      {{1, 16, 40, 40}, {32, 16, 3, 3}, 1, 1, 1, 1, true},  // tiled
      {{1, 64, 5, 5}, {96, 64, 3, 3}, 1, 1, 1, 1, true},    // small image: split by channels
      {{2, 8, 20, 21}, {16, 4, 3, 3}, 2, 2, 2, 2, false},   // grouped, strided, dilated
      {{1, 32, 30, 30}, {48, 32, 1, 1}, 1, 1, 0, 1, true},  // pointwise
      {{3, 6, 7, 9}, {4, 6, 1, 1}, 1, 2, 0, 1, true},       // 1x1 but strided: im2col
      {{1, 3, 33, 33}, {8, 3, 7, 7}, 1, 2, 3, 1, true},     // stem-like
      {{1, 8, 19, 43}, {8, 1, 3, 3}, 8, 1, 1, 1, true},     // depthwise 3x3, register blocks + tail
      {{1, 6, 20, 41}, {6, 1, 5, 5}, 6, 2, 2, 1, false},    // depthwise 5x5 stride 2
      {{2, 4, 9, 9}, {8, 1, 2, 2}, 4, 1, 1, 1, true},       // depthwise 2x2, multiplier 2: generic loop
  };
  uint32_t seed = 1;
  for (const Case& cs : cases) {
    std::vector<float> xv = randoms(ir::shapeNumel(cs.xs), seed++);
    std::vector<float> wv = randoms(ir::shapeNumel(cs.ws), seed++);
    std::vector<float> bv = cs.bias ? randoms(cs.ws[0], seed++) : std::vector<float>{};
    OwnedTensor x = floats(cs.xs, xv), w = floats(cs.ws, wv), b;
    if (cs.bias) b = floats({cs.ws[0]}, bv);
    ir::AttributeMap a = attrs({{"strides", {cs.stride, cs.stride}},
                                {"pads", {cs.pad, cs.pad, cs.pad, cs.pad}},
                                {"dilations", {cs.dil, cs.dil}}});
    a.setInt("group", cs.group);
    std::vector<int64_t> ys;
    std::vector<float> want = naiveConv2d(xv, cs.xs, wv, cs.ws, bv, cs.group, cs.stride, cs.pad, cs.dil, ys);
    NodeRun r = runOp("Conv", a, {&x, &w, cs.bias ? &b : nullptr});
    SCOPED_TRACE(ir::shapeStr(cs.xs) + " * " + ir::shapeStr(cs.ws));
    expectValues(r.outputs[0], ys, want, 1e-4f);
  }
}

TEST(ConvOp, AutoPadSameLowerAnd1DAnd3D) {
  // 1-D: x = [0..6], w = [1, 2, 3], SAME_LOWER stride 2: pad total 2 -> 1 before, 1 after.
  OwnedTensor x = floats({1, 1, 7}, {0, 1, 2, 3, 4, 5, 6});
  OwnedTensor w = floats({1, 1, 3}, {1, 2, 3});
  ir::AttributeMap a = attrs({{"strides", {2}}});
  a.setString("auto_pad", "SAME_LOWER");
  NodeRun r = runOp("Conv", a, {&x, &w});
  // outputs at centres 0, 2, 4, 6: [0*2+1*3, 1+4+9, 3+8+15, 5+12+0]
  expectValues(r.outputs[0], {1, 1, 4}, {3, 14, 26, 17});

  // 3-D: a 2x2x2 box filter over a 2x3x3 volume, VALID.
  std::vector<float> vol(18);
  for (int i = 0; i < 18; ++i) vol[size_t(i)] = float(i);
  OwnedTensor x3 = floats({1, 1, 2, 3, 3}, vol);
  OwnedTensor w3 = floats({1, 1, 2, 2, 2}, std::vector<float>(8, 1.0f));
  ir::AttributeMap a3;
  a3.setString("auto_pad", "VALID");
  NodeRun r3 = runOp("Conv", a3, {&x3, &w3});
  // sum of {i, i+1, i+3, i+4, i+9, i+10, i+12, i+13} = 8i + 52 for i in {0, 1, 3, 4}
  expectValues(r3.outputs[0], {1, 1, 1, 2, 2}, {52, 60, 76, 84});
}

TEST(ConvOp, InferenceKeepsUnknownDimsAndRejectsChannelMismatch) {
  ir::Node node;
  node.op_type = "Conv";
  node.name = "c";
  node.opset = 13;
  node.inputs = {0, 1};
  node.outputs = {2};
  node.attrs.setInts("pads", {1, 1, 1, 1});
  ir::TensorType x{
      DType::kFloat32, true, {ir::Dim::symbolic("N"), ir::Dim::known(3), ir::Dim{}, ir::Dim::known(8)}};
  ir::TensorType w = ir::TensorType::of(DType::kFloat32, {16, 3, 3, 3});
  auto out = inferNode(node, {x, w}, {nullptr, nullptr}, nullptr);
  EXPECT_EQ(out[0].str(), "float32[N,16,?,8]");
  ir::TensorType bad_w = ir::TensorType::of(DType::kFloat32, {16, 4, 3, 3});
  EXPECT_THROW(inferNode(node, {x, bad_w}, {nullptr, nullptr}, nullptr), Error);
}

TEST(ConvTransposeOp, StridesPadsOutputPaddingMatchTorch) {
  OwnedTensor x = floats({1, 1, 3, 3}, pattern(9, 9, 0));
  OwnedTensor w = floats({1, 2, 3, 3}, pattern(18, 4, 1));
  OwnedTensor b = floats({2}, {1, -2});
  ir::AttributeMap a = attrs({{"strides", {3, 2}}, {"pads", {1, 0, 1, 0}}, {"output_padding", {1, 1}}});
  NodeRun r = runOp("ConvTranspose", a, {&x, &w, &b});
  expectValues(r.outputs[0], {1, 2, 8, 8},
               {1,  1,  3,  0,  5,  -1, 1,  1,  1,  1,  2,  3,  2,  5,  -1, 1,   -2, 1,  0,  1, 0,  1,
                6,  1,  7,  -2, 9,  -3, 11, -4, 1,  1,  4,  7,  2,  9,  2,  11,  -4, 1,  -5, 1, 0,  1,
                0,  1,  9,  1,  13, -5, 15, -6, 17, -7, 1,  1,  7,  13, 2,  15,  2,  17, -7, 1, -2, -2,
                -3, -2, -3, -2, 0,  -2, -2, -2, 0,  -3, 2,  -4, -2, -2, -2, 1,   4,  2,  6,  3, 8,  -2,
                -5, -2, -3, -2, -3, -2, 3,  -2, 4,  -5, 6,  -6, 8,  -7, -2, -2,  -2, 4,  10, 5, 12, 6,
                14, -2, -8, -2, -3, -2, -3, -2, 6,  -2, 10, -8, 12, -9, 14, -10, -2, -2});
}

TEST(ConvTransposeOp, Grouped1DWithDilationMatchesTorch) {
  OwnedTensor x = floats({1, 4, 5}, pattern(20, 5, 2));
  OwnedTensor w = floats({4, 3, 2}, pattern(24, 3, 1));
  ir::AttributeMap a = attrs({{"strides", {2}}, {"dilations", {2}}});
  a.setInt("group", 2);
  NodeRun r = runOp("ConvTranspose", a, {&x, &w});
  expectValues(r.outputs[0], {1, 6, 11},
               {4,  0, 2,  0, 0,  0, -2, 0, -4, 0, 0,  -4, 0, 2,  0, 2,  0, 2,  0, 2,  0, -4,
                0,  0, -4, 0, -2, 0, 0,  0, 2,  0, 4,  4,  0, 2,  0, 0,  0, -2, 0, -4, 0, 0,
                -4, 0, 2,  0, 2,  0, 2,  0, 2,  0, -4, 0,  0, -4, 0, -2, 0, 0,  0, 2,  0, 4});
}

TEST(ConvTransposeOp, OutputShapeDerivesPads) {
  // Stride 2, kernel 2 of ones: each input value fills a 2-wide block. output_shape
  // 5 (natural 6) -> total pad 1, put at the start (NOTSET) so the first column drops.
  OwnedTensor x = floats({1, 1, 3}, {1, 2, 3});
  OwnedTensor w = floats({1, 1, 2}, {1, 1});
  NodeRun r = runOp("ConvTranspose", attrs({{"strides", {2}}, {"output_shape", {5}}}), {&x, &w});
  expectValues(r.outputs[0], {1, 1, 5}, {1, 2, 2, 3, 3});
  // output_shape 7 (natural 6): the total pad -1 floors to 0 before, -1 after: a zero at the end.
  NodeRun r7 = runOp("ConvTranspose", attrs({{"strides", {2}}, {"output_shape", {7}}}), {&x, &w});
  expectValues(r7.outputs[0], {1, 1, 7}, {1, 1, 2, 2, 3, 3, 0});
}

// ---- MatMul / Gemm --------------------------------------------------------------------

TEST(MatMulOp, BroadcastsBatchesAndPromotesVectors) {
  OwnedTensor a = floats({2, 1, 2, 3}, pattern(12, 5, 2));
  OwnedTensor b = floats({3, 3, 2}, pattern(18, 4, 1));
  NodeRun r = runOp("MatMul", {}, {&a, &b});
  expectValues(r.outputs[0], {2, 3, 2, 2},
               {1, -2, 3, 4, -1, -4, -3, -2, 1, -2, 3, 4, 0, 0, -3, -4, 0, 0, 3, 2, 0, 0, -3, -4});

  OwnedTensor v = floats({3}, {1, 2, 3});
  expectValues(runOp("MatMul", {}, {&v, &b}).outputs[0], {3, 2}, {-2, 4, 2, 8, -2, 4});
  OwnedTensor m = floats({2, 3}, pattern(6, 4, 1));
  expectValues(runOp("MatMul", {}, {&m, &v}).outputs[0], {2}, {2, 0});
}

TEST(MatMulOp, LargeAndIntegerProducts) {
  // Large enough to be split over threads; compared with a double-precision loop.
  const int64_t m = 70, k = 90, n = 130;
  std::vector<float> av = randoms(m * k, 7), bv = randoms(k * n, 8);
  OwnedTensor a = floats({m, k}, av), b = floats({k, n}, bv);
  NodeRun r = runOp("MatMul", {}, {&a, &b});
  std::vector<float> want(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p) acc += double(av[size_t(i * k + p)]) * bv[size_t(p * n + j)];
      want[size_t(i * n + j)] = float(acc);
    }
  expectValues(r.outputs[0], {m, n}, want, 1e-4f);

  OwnedTensor ai = int64s({2, 2}, {1, 2, 3, 4}), bi = int64s({2, 2}, {5, 6, 7, 8});
  NodeRun ri = runOp("MatMul", {}, {&ai, &bi});
  const int64_t* y = ri.outputs[0].as<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(y, y + 4), (std::vector<int64_t>{19, 22, 43, 50}));
}

TEST(GemmOp, TransposesScalesAndBroadcastsC) {
  OwnedTensor a = floats({3, 2}, pattern(6, 5, 2));
  OwnedTensor b = floats({4, 3}, pattern(12, 3, 1));
  OwnedTensor c = floats({4}, {1, 2, 3, 4});
  ir::AttributeMap at;
  at.setInt("transA", 1);
  at.setInt("transB", 1);
  at.setFloat("alpha", 0.5f);
  at.setFloat("beta", 2.0f);
  NodeRun r = runOp("Gemm", at, {&a, &b, &c});
  expectValues(r.outputs[0], {2, 4}, {4, 6, 8, 10, 1.5f, 3.5f, 5.5f, 7.5f});
  // Without C (opset 11+), and with a [M, 1] C.
  NodeRun r2 = runOp("Gemm", at, {&a, &b});
  expectValues(r2.outputs[0], {2, 4}, {2, 2, 2, 2, -0.5f, -0.5f, -0.5f, -0.5f});
  OwnedTensor c2 = floats({2, 1}, {10, 20});
  NodeRun r3 = runOp("Gemm", at, {&a, &b, &c2});
  expectValues(r3.outputs[0], {2, 4}, {22, 22, 22, 22, 39.5f, 39.5f, 39.5f, 39.5f});
}

// ---- Pooling -------------------------------------------------------------------------

std::vector<float> poolInput() {  // (7 i) mod 11 over a 5x5 plane
  std::vector<float> v(25);
  for (int i = 0; i < 25; ++i) v[size_t(i)] = float((i * 7) % 11);
  return v;
}

TEST(PoolOp, MaxPoolCeilModeWithIndices) {
  OwnedTensor x = floats({1, 1, 5, 5}, poolInput());
  ir::AttributeMap a = attrs({{"kernel_shape", {2, 2}}, {"strides", {2, 2}}});
  a.setInt("ceil_mode", 1);
  NodeRun r = runOp("MaxPool", a, {&x}, 2);
  expectValues(r.outputs[0], {1, 1, 3, 3}, {9, 10, 8, 6, 9, 10, 8, 7, 3});
  ASSERT_EQ(r.outputs[1].dtype(), DType::kInt64);
  const int64_t* idx = r.outputs[1].as<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(idx, idx + 9), (std::vector<int64_t>{6, 3, 9, 15, 17, 14, 20, 23, 24}));
  // Column-major indices: (w * H + h) for the same maxima.
  a.setInt("storage_order", 1);
  NodeRun rc = runOp("MaxPool", a, {&x}, 2);
  const int64_t* ci = rc.outputs[1].as<int64_t>();
  EXPECT_EQ(std::vector<int64_t>(ci, ci + 9), (std::vector<int64_t>{6, 15, 21, 3, 13, 22, 4, 19, 24}));
}

TEST(PoolOp, MaxPoolDilatedAndPadded) {
  OwnedTensor x = floats({1, 1, 5, 5}, poolInput());
  NodeRun r = runOp("MaxPool",
                    attrs({{"kernel_shape", {3, 3}}, {"pads", {1, 1, 1, 1}}, {"dilations", {2, 2}}}), {&x});
  expectValues(r.outputs[0], {1, 1, 3, 3}, {9, 9, 9, 10, 10, 10, 9, 9, 9});
}

TEST(PoolOp, AveragePoolCountIncludePad) {
  OwnedTensor x = floats({1, 1, 5, 5}, poolInput());
  ir::AttributeMap a = attrs({{"kernel_shape", {3, 3}}, {"strides", {2, 2}}, {"pads", {1, 1, 1, 1}}});
  expectValues(runOp("AveragePool", a, {&x}).outputs[0], {1, 1, 3, 3},
               {4.5f, 5.833333f, 6.25f, 3.833333f, 4.555556f, 4.666667f, 5, 4.5f, 4});
  a.setInt("count_include_pad", 1);
  expectValues(runOp("AveragePool", a, {&x}).outputs[0], {1, 1, 3, 3},
               {2, 3.888889f, 2.777778f, 2.555556f, 4.555556f, 3.111111f, 2.222222f, 3, 1.777778f});
}

TEST(PoolOp, LpPoolAndGlobalPools) {
  OwnedTensor x = floats({1, 1, 5, 5}, poolInput());
  ir::AttributeMap a = attrs({{"kernel_shape", {2, 2}}});
  a.setInt("p", 3);
  expectValues(runOp("LpPool", a, {&x}).outputs[0], {1, 1, 4, 4},
               {10.25986f, 10.69696f, 10.486f, 12.00231f, 9.287044f, 10.61772f, 7.915783f, 11.548f, 6.603854f,
                10.25986f, 10.69696f, 10.486f, 9.283178f, 9.287044f, 10.61772f, 7.915783f});
  OwnedTensor g = floats({1, 2, 2, 2}, {1, 2, 3, 4, -1, -2, -3, -8});
  expectValues(runOp("GlobalAveragePool", {}, {&g}).outputs[0], {1, 2, 1, 1}, {2.5f, -3.5f});
  expectValues(runOp("GlobalMaxPool", {}, {&g}).outputs[0], {1, 2, 1, 1}, {4, -1});
}

TEST(PoolOp, SameUpperPadsAtTheEnd) {
  // 1-D, kernel 2 stride 1 SAME_UPPER over [1, 5, 2]: windows [1,5] [5,2] [2,pad].
  OwnedTensor x = floats({1, 1, 3}, {1, 5, 2});
  ir::AttributeMap a = attrs({{"kernel_shape", {2}}});
  a.setString("auto_pad", "SAME_UPPER");
  expectValues(runOp("MaxPool", a, {&x}).outputs[0], {1, 1, 3}, {5, 5, 2});
  a.setString("auto_pad", "SAME_LOWER");
  expectValues(runOp("MaxPool", a, {&x}).outputs[0], {1, 1, 3}, {1, 5, 5});
}

// A kernel as wide as its padding allows (2^31 columns over 5, one output column)
// walks only the columns that reach the input: max over the row's windows, the
// average over the taps inside; and an output with no planes (a Pad that took the
// channels away) whose rows or columns are in the hundreds of millions makes no
// per-row or per-column tables (an onnx fuzz finding allocated 2 GB for them:
// fuzz/findings/onnx/pool_no_channels_tall_output.onnx).
TEST(PoolOp, HugeKernelsWalkOnlyTheInputAndEmptyOutputsAllocateNothing) {
  OwnedTensor x = floats({1, 1, 5, 5}, poolInput());
  const int64_t k = int64_t(1) << 31;
  ir::AttributeMap a = attrs({{"kernel_shape", {1, k}}, {"pads", {0, k - 5, 0, 0}}});
  expectValues(runOp("MaxPool", a, {&x}).outputs[0], {1, 1, 5, 1}, {10, 9, 10, 9, 8});
  expectValues(runOp("AveragePool", a, {&x}).outputs[0], {1, 1, 5, 1}, {5.2f, 5, 4.8f, 4.6f, 4.4f});
  OwnedTensor none = floats({1, 0, 3, int64_t(1) << 33}, {});
  ir::AttributeMap b = attrs({{"kernel_shape", {2, 2}}, {"strides", {8, 65}}});
  NodeRun r = runOp("AveragePool", b, {&none});
  EXPECT_EQ(r.outputs[0].shape(), (std::vector<int64_t>{1, 0, 1, (int64_t(1) << 33) / 65 + 1}));
}

// ---- Normalisation ----------------------------------------------------------------------

TEST(NormOp, BatchNormalizationInferenceAndTraining) {
  OwnedTensor x = floats({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  OwnedTensor scale = floats({2}, {1, 2}), bias = floats({2}, {0, 1});
  OwnedTensor mean = floats({2}, {1, 2}), var = floats({2}, {4, 1});
  ir::AttributeMap a;
  a.setFloat("epsilon", 0.0f);
  // (x - mean) / sqrt(var) * scale + bias per channel.
  expectValues(runOp("BatchNormalization", a, {&x, &scale, &bias, &mean, &var}).outputs[0], {2, 2, 2},
               {0, 0.5f, 3, 5, 2, 2.5f, 11, 13});
  a.setInt("training_mode", 1);
  a.setFloat("momentum", 0.5f);
  NodeRun t = runOp("BatchNormalization", a, {&x, &scale, &bias, &mean, &var}, 3, 15);
  // Channel 0 values {1, 2, 5, 6}: mean 3.5, var 4.25; channel 1 {3, 4, 7, 8}: mean 5.5, var 4.25.
  const float sd = std::sqrt(4.25f);
  expectValues(t.outputs[0], {2, 2, 2},
               {-2.5f / sd, -1.5f / sd, 1 + 2 * -2.5f / sd, 1 + 2 * -1.5f / sd, 1.5f / sd, 2.5f / sd,
                1 + 2 * 1.5f / sd, 1 + 2 * 2.5f / sd});
  expectValues(t.outputs[1], {2}, {2.25f, 3.75f});
  expectValues(t.outputs[2], {2}, {4.125f, 2.625f});
}

TEST(NormOp, InstanceNormalization) {
  OwnedTensor x = floats({1, 2, 4}, {1, 2, 3, 4, 2, 2, 6, 6});
  OwnedTensor scale = floats({2}, {1, 3}), bias = floats({2}, {0, -1});
  ir::AttributeMap a;
  a.setFloat("epsilon", 0.0f);
  const float s = 1 / std::sqrt(1.25f);  // channel 0: mean 2.5, var 1.25; channel 1: mean 4, var 4
  expectValues(runOp("InstanceNormalization", a, {&x, &scale, &bias}).outputs[0], {1, 2, 4},
               {-1.5f * s, -0.5f * s, 0.5f * s, 1.5f * s, -4, -4, 2, 2});
}

TEST(NormOp, LayerNormalizationWithStatistics) {
  OwnedTensor x = floats({2, 2, 2}, {1, 2, 3, 4, 0, 0, 0, 8});
  OwnedTensor scale = floats({2, 2}, {1, 1, 2, 2}), bias = floats({2}, {0, 1});
  ir::AttributeMap a;
  a.setInt("axis", 1);
  a.setFloat("epsilon", 0.0f);
  NodeRun r = runOp("LayerNormalization", a, {&x, &scale, &bias}, 3);
  const float i0 = 1 / std::sqrt(1.25f), i1 = 1 / std::sqrt(12.0f);
  expectValues(r.outputs[0], {2, 2, 2},
               {-1.5f * i0, 1 - 0.5f * i0, 2 * 0.5f * i0, 1 + 2 * 1.5f * i0, -2 * i1, 1 - 2 * i1, -4 * i1,
                1 + 12 * i1});
  EXPECT_EQ(r.types[1].str(), "float32[2,1,1]");
  expectValues(r.outputs[1], {2, 1, 1}, {2.5f, 2});
  expectValues(r.outputs[2], {2, 1, 1}, {i0, i1});
}

TEST(NormOp, LrnMatchesTorch) {
  OwnedTensor x = floats({1, 4, 2, 2}, pattern(16, 7, 3));
  ir::AttributeMap a;
  a.setInt("size", 3);
  a.setFloat("alpha", 0.1f);
  a.setFloat("beta", 0.75f);
  a.setFloat("bias", 2.0f);
  expectValues(runOp("LRN", a, {&x}).outputs[0], {1, 4, 2, 2},
               {-1.589054f, -1.082653f, -0.5296847f, 0, 0.5080625f, 1.070864f, 1.589054f, -1.589054f,
                -1.070864f, -0.5080625f, 0, 0.5080625f, 1.082653f, 1.589054f, -1.606295f, -1.119917f});
}

// ---- Resize / Upsample ------------------------------------------------------------------

std::vector<float> iota16() {
  std::vector<float> v(16);
  for (int i = 0; i < 16; ++i) v[size_t(i)] = float(i + 1);
  return v;
}

TEST(ResizeOp, LinearAlignCornersWithScales) {
  OwnedTensor x = floats({1, 1, 4, 4}, iota16());
  OwnedTensor scales = floats({4}, {1, 1, 0.75f, 1.5f});
  ir::AttributeMap a;
  a.setString("mode", "linear");
  a.setString("coordinate_transformation_mode", "align_corners");
  NodeRun r = runOp("Resize", a, {&x, nullptr, &scales}, 1, 13);
  expectValues(
      r.outputs[0], {1, 1, 3, 6},
      {1, 1.6f, 2.2f, 2.8f, 3.4f, 4, 7, 7.6f, 8.2f, 8.8f, 9.4f, 10, 13, 13.6f, 14.2f, 14.8f, 15.4f, 16});
}

TEST(ResizeOp, CubicExcludeOutsideWithSizes) {
  OwnedTensor x = floats({1, 1, 4, 4}, iota16());
  OwnedTensor sizes = int64s({4}, {1, 1, 3, 5});
  ir::AttributeMap a;
  a.setString("mode", "cubic");
  a.setFloat("cubic_coeff_a", -0.5f);
  a.setInt("exclude_outside", 1);
  NodeRun r = runOp("Resize", a, {&x, nullptr, nullptr, &sizes}, 1, 13);
  expectValues(r.outputs[0], {1, 1, 3, 5},
               {1.368109f, 2.059464f, 2.911379f, 3.763293f, 4.454648f, 6.956731f, 7.648085f, 8.5f, 9.351915f,
                10.04327f, 12.54535f, 13.23671f, 14.08862f, 14.94054f, 15.63189f});
}

TEST(ResizeOp, NearestRoundPreferCeilAsymmetric) {
  OwnedTensor x = floats({1, 1, 4, 4}, iota16());
  OwnedTensor sizes = int64s({4}, {1, 1, 3, 6});
  ir::AttributeMap a;
  a.setString("coordinate_transformation_mode", "asymmetric");
  a.setString("nearest_mode", "round_prefer_ceil");
  NodeRun r = runOp("Resize", a, {&x, nullptr, nullptr, &sizes}, 1, 13);
  expectValues(r.outputs[0], {1, 1, 3, 6}, {1, 2, 2, 3, 4, 4, 5, 6, 6, 7, 8, 8, 13, 14, 14, 15, 16, 16});
}

TEST(ResizeOp, CropAndResizeExtrapolates) {
  OwnedTensor x = floats({1, 1, 4, 4}, iota16());
  OwnedTensor roi = floats({8}, {0, 0, 0.2f, 0.5f, 1, 1, 1.3f, 0.9f});
  OwnedTensor sizes = int64s({4}, {1, 1, 3, 3});
  ir::AttributeMap a;
  a.setString("mode", "linear");
  a.setString("coordinate_transformation_mode", "tf_crop_and_resize");
  a.setFloat("extrapolation_value", -1.0f);
  NodeRun r = runOp("Resize", a, {&x, &roi, nullptr, &sizes}, 1, 13);
  expectValues(r.outputs[0], {1, 1, 3, 3}, {4.9f, 5.5f, 6.1f, 11.5f, 12.1f, 12.7f, -1, -1, -1});
}

// Resize(x, roi omitted, scales) at opset 13.
ir::Node resizeWithScales() {
  ir::Node node;
  node.op_type = "Resize";
  node.name = "r";
  node.opset = 13;
  node.inputs = {0, ir::kNoValue, 2};
  node.outputs = {3};
  return node;
}

// An input of unknown rank with constant scales: the output takes the scales' rank,
// its dims unknown where a unit scale would have kept the input's (fuzz finding: the
// input's dims were read, an empty vector).
TEST(ResizeOp, InferenceOfAnUnrankedInputKeepsUnitScaledDimsUnknown) {
  const ir::Node node = resizeWithScales();
  OwnedTensor scales = floats({4}, {1, 1, 2, 2});
  const ir::TensorType x = ir::TensorType::unranked(DType::kFloat32);
  auto out = inferNode(node, {x, ir::TensorType{}, ir::typeOf(scales.view())}, {nullptr, nullptr, &scales.view()},
                       nullptr);
  EXPECT_EQ(out[0].str(), "float32[?,?,?,?]");
}

TEST(ResizeOp, InferenceNeedsTheScalesValue) {
  const ir::Node node = resizeWithScales();
  ir::TensorType x = ir::TensorType::of(DType::kFloat32, {1, 3, 4, 4});
  ir::TensorType s = ir::TensorType::of(DType::kFloat32, {4});
  auto out = inferNode(node, {x, {}, s}, {nullptr, nullptr, nullptr}, nullptr);
  EXPECT_EQ(out[0].str(), "float32[?,?,?,?]");
  OwnedTensor sv = floats({4}, {1, 1, 2, 2.5f});
  out = inferNode(node, {x, {}, s}, {nullptr, nullptr, &sv.view()}, nullptr);
  EXPECT_EQ(out[0].str(), "float32[1,3,8,10]");
}

TEST(ResizeOp, ScalesPastSixtyFourBitsAreErrors) {
  const ir::Node node = resizeWithScales();
  ir::TensorType x = ir::TensorType::of(DType::kFloat32, {1, 1, 4, 4});
  ir::TensorType s = ir::TensorType::of(DType::kFloat32, {4});
  for (float bad : {1e30f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    OwnedTensor sv = floats({4}, {1, 1, bad, 1});
    EXPECT_THROW(inferNode(node, {x, {}, s}, {nullptr, nullptr, &sv.view()}, nullptr), Error) << bad;
  }
}

TEST(WindowOps, HugePadsStridesAndDilationsNeverWrap) {
  OwnedTensor x = floats({1, 1, 4}, std::vector<float>(4, 1.f));
  ir::AttributeMap a;
  a.setInts("kernel_shape", {2});
  a.setInts("pads", {INT64_MAX - 2, 4});  // in + pads overflows
  EXPECT_THROW(runOp("MaxPool", a, {&x}), Error);
  ir::AttributeMap d;
  d.setInts("kernel_shape", {3});
  d.setInts("dilations", {int64_t(1) << 62});  // (k - 1) * d + 1 overflows
  EXPECT_THROW(runOp("MaxPool", d, {&x}), Error);
  ir::AttributeMap s;
  s.setInts("kernel_shape", {2});
  s.setInts("strides", {INT64_MAX});
  s.setString("auto_pad", "SAME_UPPER");  // (in + s - 1) / s used to overflow
  NodeRun r = runOp("MaxPool", s, {&x});
  EXPECT_EQ(r.outputs[0].shape(), (std::vector<int64_t>{1, 1, 1}));
  s.setString("auto_pad", "NOTSET");
  s.setInt("ceil_mode", 1);  // a second window would start past the input
  r = runOp("MaxPool", s, {&x});
  EXPECT_EQ(r.outputs[0].shape(), (std::vector<int64_t>{1, 1, 1}));
}

TEST(WindowOps, ConvTransposePadsBelowZeroOutputAreErrors) {
  OwnedTensor x = floats({1, 1, 2}, {1, 2});
  OwnedTensor w = floats({1, 1, 1}, {1});
  ir::AttributeMap a;
  a.setInts("pads", {2, 1});  // output (2 - 1) + 1 - 3 = -1
  EXPECT_THROW(runOp("ConvTranspose", a, {&x, &w}), Error);
  ir::AttributeMap big;
  big.setInts("strides", {INT64_MAX});  // s * (in - 1) overflows
  EXPECT_THROW(runOp("ConvTranspose", big, {&x, &w}), Error);
}

TEST(ResizeOp, Opset10NearestRoundsUpWhenDownsampling) {
  // Resize-10 has only asymmetric coordinates; downsampling picks ceil (ONNX's opset-10 test data).
  OwnedTensor x = floats({1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  OwnedTensor scales = floats({4}, {1, 1, 0.6f, 0.6f});
  NodeRun r = runOp("Resize", {}, {&x, &scales}, 1, 10);
  expectValues(r.outputs[0], {1, 1, 1, 2}, {1, 3});
}

TEST(UpsampleOp, Opset7AttributeAndOpset9Input) {
  OwnedTensor x = floats({1, 1, 2, 2}, {1, 2, 3, 4});
  ir::AttributeMap a;
  a.setFloats("scales", {1, 1, 2, 1.5f});
  NodeRun r = runOp("Upsample", a, {&x}, 1, 7);
  expectValues(r.outputs[0], {1, 1, 4, 3}, {1, 1, 2, 1, 1, 2, 3, 3, 4, 3, 3, 4});
  OwnedTensor scales = floats({4}, {1, 1, 2, 2});
  ir::AttributeMap lin;
  lin.setString("mode", "linear");
  NodeRun r9 = runOp("Upsample", lin, {&x, &scales}, 1, 9);
  // Asymmetric coordinates x / 2, clamped at the far edge.
  expectValues(r9.outputs[0], {1, 1, 4, 4}, {1, 1.5f, 2, 2, 2, 2.5f, 3, 3, 3, 3.5f, 4, 4, 3, 3.5f, 4, 4});
}

// ---- Quantized ----------------------------------------------------------------------------

TEST(QuantOp, MatMulIntegerWithPerRowAndPerColumnZeroPoints) {
  OwnedTensor a = uint8s({2, 2}, {1, 2, 3, 4}), b = uint8s({2, 2}, {5, 6, 7, 8});
  OwnedTensor az = uint8s({2}, {1, 2}), bz = uint8s({2}, {0, 1});
  // (A - [1, 2] per row) @ (B - [0, 1] per column) = [[0, 1], [1, 2]] @ [[5, 5], [7, 7]]
  NodeRun r = runOp("MatMulInteger", {}, {&a, &b, &az, &bz}, 1, 10);
  ASSERT_EQ(r.outputs[0].dtype(), DType::kInt32);
  const int32_t* y = r.outputs[0].as<int32_t>();
  EXPECT_EQ(std::vector<int32_t>(y, y + 4), (std::vector<int32_t>{7, 7, 19, 19}));
}

TEST(QuantOp, QLinearMatMulRoundsHalfToEven) {
  OwnedTensor a = uint8s({1, 2}, {10, 20}), b = uint8s({2, 2}, {1, 0, 3, 0});
  OwnedTensor as = floats({}, {0.5f}), bs = floats({}, {0.25f}), ys = floats({}, {0.5f});
  OwnedTensor az = uint8s({}, {10}), bz = uint8s({}, {1}), yz = uint8s({}, {100});
  // accumulators [0 * 0 + 10 * 2, 10 * -1] = [20, -10]; times 0.5 * 0.25 / 0.5 = [5, -2.5 -> -2]
  NodeRun r = runOp("QLinearMatMul", {}, {&a, &as, &az, &b, &bs, &bz, &ys, &yz}, 1, 10);
  ASSERT_EQ(r.outputs[0].dtype(), DType::kUInt8);
  const uint8_t* y = r.outputs[0].as<uint8_t>();
  EXPECT_EQ(std::vector<int>(y, y + 2), (std::vector<int>{105, 98}));
}

TEST(QuantOp, ConvIntegerSubtractsZeroPoint) {
  OwnedTensor x = uint8s({1, 1, 2, 2}, {1, 2, 3, 4}), w = uint8s({1, 1, 2, 2}, {1, 0, 0, 1});
  OwnedTensor xz = uint8s({}, {1});
  NodeRun r = runOp("ConvInteger", {}, {&x, &w, &xz}, 1, 10);
  EXPECT_EQ(r.types[0].str(), "int32[1,1,1,1]");
  EXPECT_EQ(r.outputs[0].as<int32_t>()[0], 3);  // (1-1)*1 + (4-1)*1
}

}  // namespace
}  // namespace partita::kernels
