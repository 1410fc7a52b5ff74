// Tests of the reduction-style host ops: each builds a node, infers its output types
// (with every input value known, as the executor does at run time), runs the kernel and
// checks values. Expected numbers come from numpy or from a plain reference loop.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kernels/op_registry.h"
#include "kernels/reduce_common.h"
#include "partita/error.h"

namespace partita::kernels {
namespace {

using namespace reduce;

using ir::DType;
using ir::OwnedTensor;

template <typename T>
OwnedTensor tensor(DType dtype, std::vector<int64_t> shape, const std::vector<T>& data) {
  OwnedTensor t(dtype, std::move(shape));
  EXPECT_EQ(size_t(t.view().numel()), data.size());
  if (!data.empty()) std::memcpy(t.data(), data.data(), data.size() * sizeof(T));
  return t;
}
OwnedTensor f32(std::vector<int64_t> shape, const std::vector<float>& d) {
  return tensor(DType::kFloat32, shape, d);
}
OwnedTensor i64(std::vector<int64_t> shape, const std::vector<int64_t>& d) {
  return tensor(DType::kInt64, shape, d);
}

template <typename T>
std::vector<T> values(const OwnedTensor& t) {
  const T* p = t.as<T>();
  return std::vector<T>(p, p + t.view().numel());
}

ir::Node makeNode(const std::string& op, int opset, size_t num_inputs, size_t num_outputs = 1) {
  ir::Node n;
  n.op_type = op;
  n.opset = opset;
  n.name = "n0";
  for (size_t i = 0; i < num_inputs; ++i) n.inputs.push_back(ir::ValueId(i));
  for (size_t i = 0; i < num_outputs; ++i) n.outputs.push_back(ir::ValueId(num_inputs + i));
  return n;
}

// Infers with every input value known, allocates the outputs and runs the kernel.
// A null input pointer is an omitted optional input.
std::vector<OwnedTensor> run(const ir::Node& node, const std::vector<const OwnedTensor*>& inputs) {
  const OpDef* def = OpRegistry::global().find(node.domain, node.op_type);
  EXPECT_NE(def, nullptr) << node.op_type;
  std::vector<ir::TensorType> types;
  std::vector<const ir::Tensor*> vals;
  for (const OwnedTensor* t : inputs) {
    types.push_back(t ? ir::typeOf(t->view()) : ir::TensorType{});
    vals.push_back(t ? &t->view() : nullptr);
  }
  std::vector<ir::TensorType> out_types = inferNode(node, types, vals, nullptr);
  KernelContext ctx{node, nullptr, {}, {}, 2};
  for (const OwnedTensor* t : inputs) ctx.inputs.push_back(t ? t->view() : ir::Tensor{});
  std::vector<OwnedTensor> outs;
  for (const ir::TensorType& t : out_types) {
    EXPECT_TRUE(t.isStatic()) << t.str();
    outs.emplace_back(t.dtype, t.staticShape());
  }
  for (OwnedTensor& o : outs) ctx.outputs.push_back(o.view());
  def->run(ctx);
  return outs;
}

// Infers with input types only (values unknown, as at compile time for non-constants).
std::vector<ir::TensorType> inferTypes(const ir::Node& node, const std::vector<ir::TensorType>& types,
                                       const std::vector<const ir::Tensor*>& vals = {}) {
  std::vector<const ir::Tensor*> v = vals;
  v.resize(types.size(), nullptr);
  return inferNode(node, types, v, nullptr);
}

void expectNear(const std::vector<float>& got, const std::vector<float>& want, float tol = 1e-5f) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0f, std::fabs(want[i]))) << i;
}

std::vector<float> ramp(int64_t n, float scale = 0.5f, float offset = -3.0f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float(i) * scale + offset;
  return v;
}

std::vector<float> randoms(size_t n, unsigned seed, float lo = -4, float hi = 4) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// ---- Reduce* ----

TEST(ReduceOps, SumOverMiddleAxisKeepsDims) {
  OwnedTensor x = f32({2, 3, 4}, ramp(24));
  OwnedTensor axes = i64({1}, {1});
  auto out = run(makeNode("ReduceSum", 13, 2), {&x, &axes});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2, 1, 4}));
  expectNear(values<float>(out[0]), {-3.0f, -1.5f, 0.0f, 1.5f, 15.0f, 16.5f, 18.0f, 19.5f});
}

TEST(ReduceOps, SumAxesAttributeBeforeOpset13) {
  ir::Node n = makeNode("ReduceSum", 11, 1);
  n.attrs.setInts("axes", {-2});
  n.attrs.setInt("keepdims", 0);
  OwnedTensor x = f32({2, 3, 4}, ramp(24));
  auto out = run(n, {&x});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2, 4}));
  expectNear(values<float>(out[0]), {-3.0f, -1.5f, 0.0f, 1.5f, 15.0f, 16.5f, 18.0f, 19.5f});
}

TEST(ReduceOps, SumEmptyAxesReducesAllOrIsNoop) {
  OwnedTensor x = f32({2, 2}, {1, 2, 3, 4});
  OwnedTensor empty = i64({0}, {});
  auto all = run(makeNode("ReduceSum", 13, 2), {&x, &empty});
  EXPECT_EQ(all[0].shape(), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(values<float>(all[0]), (std::vector<float>{10}));
  auto omitted = run(makeNode("ReduceSum", 13, 1), {&x});
  EXPECT_EQ(values<float>(omitted[0]), (std::vector<float>{10}));

  ir::Node noop = makeNode("ReduceSum", 13, 2);
  noop.attrs.setInt("noop_with_empty_axes", 1);
  auto same = run(noop, {&x, &empty});
  EXPECT_EQ(same[0].shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(values<float>(same[0]), (std::vector<float>{1, 2, 3, 4}));
}

TEST(ReduceOps, SumWithUnknownAxesInfersRankOnlyWhenKeepingDims) {
  ir::Node n = makeNode("ReduceSum", 13, 2);
  auto x = ir::TensorType::of(DType::kFloat32, {2, 1, 4});
  auto axes = ir::TensorType::of(DType::kInt64, {1});
  auto kept = inferTypes(n, {x, axes});
  ASSERT_TRUE(kept[0].has_rank);
  EXPECT_EQ(kept[0].str(), "float32[?,1,?]");
  n.attrs.setInt("keepdims", 0);
  EXPECT_FALSE(inferTypes(n, {x, axes})[0].has_rank);
}

TEST(ReduceOps, BadAxisFailsInference) {
  ir::Node n = makeNode("ReduceMean", 13, 1);
  n.attrs.setInts("axes", {3});
  EXPECT_THROW(inferTypes(n, {ir::TensorType::of(DType::kFloat32, {2, 3})}), Error);
}

TEST(ReduceOps, MeanOverOuterAndInnerAxes) {
  ir::Node n = makeNode("ReduceMean", 13, 1);
  n.attrs.setInts("axes", {0, 2});
  n.attrs.setInt("keepdims", 0);
  OwnedTensor x = f32({2, 3, 4}, ramp(24));
  auto out = run(n, {&x});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{3}));
  expectNear(values<float>(out[0]), {0.75f, 2.75f, 4.75f});
}

TEST(ReduceOps, L2OverLastAxisAndProdOverFirst) {
  ir::Node l2 = makeNode("ReduceL2", 13, 1);
  l2.attrs.setInts("axes", {-1});
  l2.attrs.setInt("keepdims", 0);
  OwnedTensor x = f32({2, 3, 4}, ramp(24));
  expectNear(values<float>(run(l2, {&x})[0]),
             {4.636809349f, 1.224744916f, 3.674234629f, 7.582875252f, 11.554220200f, 15.540269852f});
  ir::Node prod = makeNode("ReduceProd", 13, 1);
  prod.attrs.setInts("axes", {0});
  expectNear(values<float>(run(prod, {&x})[0]),
             {-9.0f, -8.75f, -8.0f, -6.75f, -5.0f, -2.75f, 0.0f, 3.25f, 7.0f, 11.25f, 16.0f, 21.25f});
}

TEST(ReduceOps, LogSumExpIsStableForLargeValues) {
  ir::Node n = makeNode("ReduceLogSumExp", 13, 1);
  n.attrs.setInts("axes", {1, 2});
  n.attrs.setInt("keepdims", 0);
  OwnedTensor x = f32({2, 3, 4}, ramp(24));
  expectNear(values<float>(run(n, {&x})[0]), {3.430270195f, 9.430270195f});
  OwnedTensor big = f32({1, 1, 2}, {1000.0f, 1000.0f});
  expectNear(values<float>(run(n, {&big})[0]), {1000.0f + std::log(2.0f)});
}

TEST(ReduceOps, L1SumSquareLogSumMinOverAllAxes) {
  OwnedTensor x = f32({2, 3, 4}, ramp(24));
  ir::Node l1 = makeNode("ReduceL1", 13, 1);
  l1.attrs.setInt("keepdims", 0);
  auto out = run(l1, {&x});
  EXPECT_EQ(out[0].view().rank(), 0u);
  expectNear(values<float>(out[0]), {87.0f});
  OwnedTensor y = f32({2, 2}, {1, 2, 3, 4});
  expectNear(values<float>(run(makeNode("ReduceSumSquare", 13, 1), {&y})[0]), {30.0f});
  expectNear(values<float>(run(makeNode("ReduceLogSum", 13, 1), {&y})[0]), {std::log(10.0f)});
  expectNear(values<float>(run(makeNode("ReduceMin", 13, 1), {&y})[0]), {1.0f});
}

TEST(ReduceOps, IntegerMaxMinAndMean) {
  OwnedTensor x = tensor<int32_t>(DType::kInt32, {2, 3}, {3, -7, 2, 9, 9, -1});
  ir::Node mx = makeNode("ReduceMax", 13, 1);
  mx.attrs.setInt("keepdims", 0);
  EXPECT_EQ(values<int32_t>(run(mx, {&x})[0]), (std::vector<int32_t>{9}));
  ir::Node mn = makeNode("ReduceMin", 13, 1);
  mn.attrs.setInts("axes", {1});
  EXPECT_EQ(values<int32_t>(run(mn, {&x})[0]), (std::vector<int32_t>{-7, -1}));
  OwnedTensor y = i64({2, 2}, {1, 2, 4, 7});
  ir::Node mean = makeNode("ReduceMean", 13, 1);
  mean.attrs.setInts("axes", {1});
  EXPECT_EQ(values<int64_t>(run(mean, {&y})[0]), (std::vector<int64_t>{1, 5}));  // truncating, like ORT
}

TEST(ReduceOps, AllLayoutsAgreeWithReferenceSum) {
  // Exercise every kernel path (rows, accumulate-rows, generic) on a 4-D tensor.
  const std::vector<int64_t> shape{3, 5, 4, 6};
  std::vector<float> data = randoms(360, 7);
  OwnedTensor x = f32(shape, data);
  for (int mask = 1; mask < 16; ++mask) {
    std::vector<int64_t> axes;
    for (int a = 0; a < 4; ++a)
      if (mask & (1 << a)) axes.push_back(a);
    ir::Node n = makeNode("ReduceSum", 11, 1);
    n.attrs.setInts("axes", axes);
    std::vector<float> got = values<float>(run(n, {&x})[0]);
    std::vector<int64_t> out_shape = shape;
    for (int64_t a : axes) out_shape[size_t(a)] = 1;
    std::vector<double> want(size_t(ir::shapeNumel(out_shape)), 0.0);
    std::vector<int64_t> os = stridesOf(out_shape);
    for (int64_t i0 = 0; i0 < 3; ++i0)
      for (int64_t i1 = 0; i1 < 5; ++i1)
        for (int64_t i2 = 0; i2 < 4; ++i2)
          for (int64_t i3 = 0; i3 < 6; ++i3) {
            int64_t idx[4] = {i0, i1, i2, i3};
            int64_t o = 0;
            for (int a = 0; a < 4; ++a) o += (out_shape[size_t(a)] == 1 ? 0 : idx[a]) * os[size_t(a)];
            want[size_t(o)] += data[size_t(((i0 * 5 + i1) * 4 + i2) * 6 + i3)];
          }
    ASSERT_EQ(got.size(), want.size()) << mask;
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], want[i], 1e-3) << "mask " << mask << " at " << i;
  }
}

// ---- ArgMax / ArgMin ----

TEST(ArgOps, ArgMaxFirstAndLastIndexOfTies) {
  OwnedTensor x = f32({2, 4}, {2, 1, 2, 0, 5, 5, -1, 5});
  ir::Node n = makeNode("ArgMax", 13, 1);
  n.attrs.setInt("axis", 1);
  auto out = run(n, {&x});
  EXPECT_EQ(out[0].dtype(), DType::kInt64);
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(values<int64_t>(out[0]), (std::vector<int64_t>{0, 0}));
  n.attrs.setInt("select_last_index", 1);
  n.attrs.setInt("keepdims", 0);
  out = run(n, {&x});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2}));
  EXPECT_EQ(values<int64_t>(out[0]), (std::vector<int64_t>{2, 3}));
}

TEST(ArgOps, ArgMinAlongOuterAxis) {
  OwnedTensor x = f32({2, 4}, {2, 1, 2, 0, 5, 5, -1, 5});
  auto out = run(makeNode("ArgMin", 13, 1), {&x});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(values<int64_t>(out[0]), (std::vector<int64_t>{0, 0, 1, 0}));
}

// ---- Softmax family ----

std::vector<float> referenceSoftmax(const std::vector<float>& x, int64_t outer, int64_t n, int64_t inner,
                                    bool log) {
  std::vector<float> y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double m = -INFINITY, s = 0;
      for (int64_t j = 0; j < n; ++j) m = std::max(m, double(x[size_t((o * n + j) * inner + i)]));
      for (int64_t j = 0; j < n; ++j) s += std::exp(double(x[size_t((o * n + j) * inner + i)]) - m);
      for (int64_t j = 0; j < n; ++j) {
        double v = double(x[size_t((o * n + j) * inner + i)]) - m;
        y[size_t((o * n + j) * inner + i)] = float(log ? v - std::log(s) : std::exp(v) / s);
      }
    }
  return y;
}

TEST(SoftmaxOps, LastAxisRowsMatchReference) {
  std::vector<float> data = randoms(64 * 1000, 3, -20, 20);
  OwnedTensor x = f32({64, 1000}, data);
  expectNear(values<float>(run(makeNode("Softmax", 13, 1), {&x})[0]),
             referenceSoftmax(data, 64, 1000, 1, false), 2e-6f);
  expectNear(values<float>(run(makeNode("LogSoftmax", 13, 1), {&x})[0]),
             referenceSoftmax(data, 64, 1000, 1, true), 2e-6f);
}

TEST(SoftmaxOps, InnerAxisAtOpset13) {
  std::vector<float> data = randoms(2 * 3 * 5, 4);
  OwnedTensor x = f32({2, 3, 5}, data);
  ir::Node n = makeNode("Softmax", 13, 1);
  n.attrs.setInt("axis", 1);
  expectNear(values<float>(run(n, {&x})[0]), referenceSoftmax(data, 2, 3, 5, false));
  ir::Node l = makeNode("LogSoftmax", 13, 1);
  l.attrs.setInt("axis", 0);
  expectNear(values<float>(run(l, {&x})[0]), referenceSoftmax(data, 1, 2, 15, true));
}

TEST(SoftmaxOps, Opset11CoercesTo2D) {
  std::vector<float> data = randoms(2 * 3 * 5, 5);
  OwnedTensor x = f32({2, 3, 5}, data);
  // Default axis 1: each of the 2 rows of 15 sums to one.
  expectNear(values<float>(run(makeNode("Softmax", 11, 1), {&x})[0]),
             referenceSoftmax(data, 2, 15, 1, false));
  ir::Node n = makeNode("LogSoftmax", 11, 1);
  n.attrs.setInt("axis", 0);
  expectNear(values<float>(run(n, {&x})[0]), referenceSoftmax(data, 1, 30, 1, true));
}

TEST(SoftmaxOps, LargeNumbersDoNotOverflow) {
  OwnedTensor x = f32({1, 4}, {10000, 10001, 10002, 10003});
  expectNear(values<float>(run(makeNode("Softmax", 13, 1), {&x})[0]),
             {0.032058604f, 0.087144318f, 0.236882818f, 0.643914260f});
}

TEST(SoftmaxOps, HardmaxPicksFirstMaximum) {
  OwnedTensor x = f32({2, 3}, {1, 3, 3, 0, -1, -2});
  EXPECT_EQ(values<float>(run(makeNode("Hardmax", 13, 1), {&x})[0]), (std::vector<float>{0, 1, 0, 1, 0, 0}));
  ir::Node n = makeNode("Hardmax", 13, 1);
  n.attrs.setInt("axis", 0);
  EXPECT_EQ(values<float>(run(n, {&x})[0]), (std::vector<float>{1, 1, 1, 0, 0, 0}));
}

TEST(SoftmaxOps, Float64) {
  OwnedTensor x = tensor<double>(DType::kFloat64, {3}, {1, 2, 3});
  std::vector<double> y = values<double>(run(makeNode("Softmax", 13, 1), {&x})[0]);
  EXPECT_NEAR(y[0], 0.09003057317038046, 1e-15);
  EXPECT_NEAR(y[2], 0.6652409557748219, 1e-15);
}

TEST(SoftmaxOps, ExpFastIsWithinFewUlps) {
  double worst = 0;
  for (float x = -87.0f; x < 88.0f; x += 0.0137f) {
    double rel = std::fabs(double(expFast(x)) - std::exp(double(x))) / std::exp(double(x));
    worst = std::max(worst, rel);
  }
  EXPECT_LT(worst, 3e-7);
  EXPECT_EQ(expFast(-INFINITY), 0.0f);
  EXPECT_EQ(expFast(-100.0f), 0.0f);
  EXPECT_TRUE(std::isinf(expFast(100.0f)));
  EXPECT_TRUE(std::isnan(expFast(NAN)));
  EXPECT_EQ(expFast(0.0f), 1.0f);
}

// ---- CumSum, TopK, NonZero ----

TEST(ScanOps, CumSumExclusiveReverse) {
  OwnedTensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  OwnedTensor axis = tensor<int32_t>(DType::kInt32, {}, {1});
  ir::Node n = makeNode("CumSum", 14, 2);
  EXPECT_EQ(values<float>(run(n, {&x, &axis})[0]), (std::vector<float>{1, 3, 6, 4, 9, 15}));
  n.attrs.setInt("exclusive", 1);
  n.attrs.setInt("reverse", 1);
  EXPECT_EQ(values<float>(run(n, {&x, &axis})[0]), (std::vector<float>{5, 3, 0, 11, 6, 0}));
  OwnedTensor axis0 = i64({}, {-2});
  OwnedTensor xi = i64({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(values<int64_t>(run(makeNode("CumSum", 14, 2), {&xi, &axis0})[0]),
            (std::vector<int64_t>{1, 2, 3, 5, 7, 9}));
}

TEST(ScanOps, TopKLargestAndSmallestWithTies) {
  OwnedTensor x = f32({2, 4}, {1, 3, 3, 2, 0, -1, 5, 0});
  OwnedTensor k = i64({1}, {2});
  auto out = run(makeNode("TopK", 11, 2, 2), {&x, &k});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{3, 3, 5, 0}));
  EXPECT_EQ(values<int64_t>(out[1]), (std::vector<int64_t>{1, 2, 2, 0}));
  ir::Node s = makeNode("TopK", 11, 2, 2);
  s.attrs.setInt("largest", 0);
  s.attrs.setInt("axis", 0);
  OwnedTensor k1 = i64({1}, {1});
  out = run(s, {&x, &k1});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{0, -1, 3, 0}));
  EXPECT_EQ(values<int64_t>(out[1]), (std::vector<int64_t>{1, 1, 0, 1}));
}

TEST(ScanOps, TopKInfersUnknownDimUntilKIsKnownAndUsesAttributeBefore10) {
  ir::Node n = makeNode("TopK", 11, 2, 2);
  auto types =
      inferTypes(n, {ir::TensorType::of(DType::kFloat32, {3, 7}), ir::TensorType::of(DType::kInt64, {1})});
  EXPECT_EQ(types[0].str(), "float32[3,?]");
  EXPECT_EQ(types[1].str(), "int64[3,?]");
  ir::Node old = makeNode("TopK", 9, 1, 2);
  old.attrs.setInt("k", 2);
  old.attrs.setInt("axis", 0);
  OwnedTensor x = f32({3, 1}, {1, 7, 4});
  auto out = run(old, {&x});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{7, 4}));
  EXPECT_EQ(values<int64_t>(out[1]), (std::vector<int64_t>{1, 2}));
  OwnedTensor big_k = i64({1}, {5});
  EXPECT_THROW(run(n, {&x, &big_k}), Error);
}

TEST(ScanOps, NonZeroShapeIsDataDependent) {
  ir::Node n = makeNode("NonZero", 13, 1);
  EXPECT_EQ(inferTypes(n, {ir::TensorType::of(DType::kFloat32, {2, 3})})[0].str(), "int64[2,?]");
  OwnedTensor x = f32({2, 3}, {0, 1.5f, 0, -2, 0, 3});
  auto out = run(n, {&x});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(values<int64_t>(out[0]), (std::vector<int64_t>{0, 1, 1, 1, 0, 2}));
  OwnedTensor b = tensor<uint8_t>(DType::kBool, {3}, {1, 0, 1});
  EXPECT_EQ(values<int64_t>(run(n, {&b})[0]), (std::vector<int64_t>{0, 2}));
}

// ---- OneHot, Trilu, EyeLike ----

TEST(MatrixOps, OneHotWithNegativeIndicesAndAxis) {
  OwnedTensor indices = i64({3}, {0, -1, 7});
  OwnedTensor depth = f32({}, {3});
  OwnedTensor vals = f32({2}, {0.5f, 2});
  auto out = run(makeNode("OneHot", 11, 3), {&indices, &depth, &vals});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{2, 0.5f, 0.5f, 0.5f, 0.5f, 2, 0.5f, 0.5f, 0.5f}));
  ir::Node n = makeNode("OneHot", 11, 3);
  n.attrs.setInt("axis", 0);
  OwnedTensor idx2 = tensor<int32_t>(DType::kInt32, {2}, {1, 0});
  OwnedTensor d2 = i64({1}, {2});
  OwnedTensor v2 = i64({2}, {0, 1});
  out = run(n, {&idx2, &d2, &v2});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(values<int64_t>(out[0]), (std::vector<int64_t>{0, 1, 1, 0}));
}

TEST(MatrixOps, OneHotHugeDepthAndIndices) {
  OwnedTensor indices = i64({2}, {int64_t(1) << 62, -(int64_t(1) << 62)});
  OwnedTensor huge = f32({}, {1e30f});
  OwnedTensor vals = f32({2}, {0, 1});
  EXPECT_THROW(run(makeNode("OneHot", 11, 3), {&indices, &huge, &vals}), Error);
  OwnedTensor big = i64({}, {int64_t(1) << 62});
  EXPECT_THROW(run(makeNode("OneHot", 11, 3), {&indices, &big, &vals}), Error);  // over the tensor limit
  // Indices far out of range leave their rows all off.
  OwnedTensor three = i64({}, {3});
  auto out = run(makeNode("OneHot", 11, 3), {&indices, &three, &vals});
  EXPECT_EQ(values<float>(out[0]), std::vector<float>(6, 0.f));
}

TEST(MatrixOps, EyeLikeWithExtremeOffsets) {
  OwnedTensor x = f32({2, 3}, std::vector<float>(6, 7));
  for (int64_t k : {INT64_MAX, INT64_MIN, int64_t(3), int64_t(-2)}) {
    ir::Node n = makeNode("EyeLike", 9, 1);
    n.attrs.setInt("k", k);
    EXPECT_EQ(values<float>(run(n, {&x})[0]), std::vector<float>(6, 0.f)) << k;
  }
  ir::Node n = makeNode("EyeLike", 9, 1);
  n.attrs.setInt("k", -1);
  EXPECT_EQ(values<float>(run(n, {&x})[0]), (std::vector<float>{0, 0, 0, 1, 0, 0}));
}

TEST(MatrixOps, TriluUpperAndLowerWithK) {
  OwnedTensor x = i64({3, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  EXPECT_EQ(values<int64_t>(run(makeNode("Trilu", 14, 1), {&x})[0]),
            (std::vector<int64_t>{1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12}));
  ir::Node lower = makeNode("Trilu", 14, 2);
  lower.attrs.setInt("upper", 0);
  OwnedTensor k = i64({}, {-1});
  EXPECT_EQ(values<int64_t>(run(lower, {&x, &k})[0]),
            (std::vector<int64_t>{0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0}));
}

TEST(MatrixOps, EyeLikeWithDtypeAndOffset) {
  OwnedTensor x = tensor<int32_t>(DType::kInt32, {3, 4}, std::vector<int32_t>(12, 7));
  ir::Node n = makeNode("EyeLike", 9, 1);
  n.attrs.setInt("dtype", 11);  // ONNX DOUBLE
  n.attrs.setInt("k", 1);
  auto out = run(n, {&x});
  EXPECT_EQ(out[0].dtype(), DType::kFloat64);
  EXPECT_EQ(values<double>(out[0]), (std::vector<double>{0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}));
  auto same = run(makeNode("EyeLike", 9, 1), {&x});
  EXPECT_EQ(values<int32_t>(same[0]), (std::vector<int32_t>{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0}));
}

// ---- Einsum ----

std::vector<float> einsum(const std::string& eq, const std::vector<const OwnedTensor*>& inputs,
                          std::vector<int64_t>* shape = nullptr) {
  ir::Node n = makeNode("Einsum", 12, inputs.size());
  n.attrs.setString("equation", eq);
  auto out = run(n, inputs);
  if (shape) *shape = out[0].shape();
  return values<float>(out[0]);
}

TEST(EinsumOp, MatmulTransposedOperandAndImplicitOutput) {
  OwnedTensor a = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  OwnedTensor b = f32({3, 2}, {1, 0, 0, 1, 1, 1});
  std::vector<int64_t> shape;
  EXPECT_EQ(einsum("ij,jk->ik", {&a, &b}, &shape), (std::vector<float>{4, 5, 10, 11}));
  EXPECT_EQ(shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(einsum("ij,jk", {&a, &b}), (std::vector<float>{4, 5, 10, 11}));
  OwnedTensor bt = f32({2, 3}, {1, 0, 1, 0, 1, 1});  // b transposed
  EXPECT_EQ(einsum("ij, kj -> ik", {&a, &bt}), (std::vector<float>{4, 5, 10, 11}));
  EXPECT_EQ(einsum("ij,jk->ki", {&a, &b}), (std::vector<float>{4, 10, 5, 11}));
}

TEST(EinsumOp, BatchMatmulWithBroadcastEllipsis) {
  std::vector<float> ad = ramp(2 * 2 * 3, 1, 0), bd = ramp(3 * 2, 1, 1);
  OwnedTensor a = f32({2, 2, 3}, ad);
  OwnedTensor b = f32({1, 3, 2}, bd);
  std::vector<int64_t> shape;
  std::vector<float> got = einsum("...ij,...jk->...ik", {&a, &b}, &shape);
  EXPECT_EQ(shape, (std::vector<int64_t>{2, 2, 2}));
  // numpy.einsum('...ij,...jk->...ik', arange(12).reshape(2,2,3), arange(1,7).reshape(1,3,2))
  EXPECT_EQ(got, (std::vector<float>{13, 16, 40, 52, 67, 88, 94, 124}));
  EXPECT_THROW(einsum("bij,bjk->bik", {&a, &a}), Error);  // j is 3 in one operand, 2 in the other
}

TEST(EinsumOp, TransposeTraceDiagonalSumInnerOuterChain) {
  OwnedTensor m = f32({3, 3}, ramp(9, 1, 0));
  EXPECT_EQ(einsum("ij->ji", {&m}), (std::vector<float>{0, 3, 6, 1, 4, 7, 2, 5, 8}));
  EXPECT_EQ(einsum("ii->", {&m}), (std::vector<float>{12}));
  EXPECT_EQ(einsum("ii->i", {&m}), (std::vector<float>{0, 4, 8}));
  EXPECT_EQ(einsum("ij->i", {&m}), (std::vector<float>{3, 12, 21}));
  OwnedTensor bm = f32({2, 2, 2}, ramp(8, 1, 0));
  EXPECT_EQ(einsum("bii->bi", {&bm}), (std::vector<float>{0, 3, 4, 7}));
  EXPECT_EQ(einsum("...ii->...i", {&bm}), (std::vector<float>{0, 3, 4, 7}));
  OwnedTensor u = f32({3}, {1, 2, 3}), v = f32({3}, {4, 5, 6});
  EXPECT_EQ(einsum("i,i", {&u, &v}), (std::vector<float>{32}));
  EXPECT_EQ(einsum("i,j->ij", {&u, &v}), (std::vector<float>{4, 5, 6, 8, 10, 12, 12, 15, 18}));
  // (u v^T) m u, summed: a three-operand chain.
  EXPECT_EQ(einsum("i,ij,j->", {&u, &m, &u}),
            (std::vector<float>{1 * (0 + 2 + 6) + 2 * (3 + 8 + 15) + 3 * (6 + 14 + 24)}));
}

TEST(EinsumOp, Int64AndFloat64) {
  OwnedTensor a = i64({2, 2}, {1, 2, 3, 4});
  ir::Node n = makeNode("Einsum", 12, 2);
  n.attrs.setString("equation", "ij,jk->ik");
  EXPECT_EQ(values<int64_t>(run(n, {&a, &a})[0]), (std::vector<int64_t>{7, 10, 15, 22}));
  OwnedTensor d = tensor<double>(DType::kFloat64, {2, 2}, {1, 2, 3, 4});
  EXPECT_EQ(values<double>(run(n, {&d, &d})[0]), (std::vector<double>{7, 10, 15, 22}));
}

TEST(EinsumOp, BadEquationsFail) {
  ir::Node n = makeNode("Einsum", 12, 1);
  n.attrs.setString("equation", "ij->k");
  EXPECT_THROW(inferTypes(n, {ir::TensorType::of(DType::kFloat32, {2, 3})}), Error);
  n.attrs.setString("equation", "ijk->i");
  EXPECT_THROW(inferTypes(n, {ir::TensorType::of(DType::kFloat32, {2, 3})}), Error);
}

// ---- MeanVarianceNormalization ----

TEST(MvnOp, NormalisesOverDefaultAxes) {
  std::vector<float> data = randoms(2 * 3 * 2 * 2, 9);
  OwnedTensor x = f32({2, 3, 2, 2}, data);
  std::vector<float> got = values<float>(run(makeNode("MeanVarianceNormalization", 13, 1), {&x})[0]);
  // Per channel c: mean and variance over n, h, w.
  for (int64_t c = 0; c < 3; ++c) {
    double mean = 0, var = 0;
    for (int64_t nn = 0; nn < 2; ++nn)
      for (int64_t k = 0; k < 4; ++k) mean += data[size_t((nn * 3 + c) * 4 + k)];
    mean /= 8;
    for (int64_t nn = 0; nn < 2; ++nn)
      for (int64_t k = 0; k < 4; ++k) var += std::pow(data[size_t((nn * 3 + c) * 4 + k)] - mean, 2);
    var /= 8;
    for (int64_t nn = 0; nn < 2; ++nn)
      for (int64_t k = 0; k < 4; ++k) {
        size_t i = size_t((nn * 3 + c) * 4 + k);
        EXPECT_NEAR(got[i], (data[i] - mean) / (std::sqrt(var) + 1e-9), 1e-5);
      }
  }
}

}  // namespace
}  // namespace partita::kernels
