#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "kernels/op_registry.h"
#include "kernels/shape_strided_copy.h"
#include "partita/error.h"

namespace partita::kernels {
namespace {

using ir::DType;
using ir::OwnedTensor;
using ir::TensorType;

template <typename T>
OwnedTensor make(DType dtype, std::vector<int64_t> shape, const std::vector<T>& values) {
  OwnedTensor t(dtype, std::move(shape));
  EXPECT_EQ(size_t(t.view().numel()), values.size());
  EXPECT_EQ(sizeof(T), ir::dtypeSize(dtype));
  if (!values.empty()) std::memcpy(t.data(), values.data(), values.size() * sizeof(T));
  return t;
}
OwnedTensor f32(std::vector<int64_t> shape, const std::vector<float>& v) {
  return make(DType::kFloat32, shape, v);
}
OwnedTensor i64(std::vector<int64_t> shape, const std::vector<int64_t>& v) {
  return make(DType::kInt64, shape, v);
}
OwnedTensor i32(std::vector<int64_t> shape, const std::vector<int32_t>& v) {
  return make(DType::kInt32, shape, v);
}

// 0, 1, 2, ... as float32 of `shape`.
OwnedTensor iota(std::vector<int64_t> shape) {
  std::vector<float> v(size_t(ir::shapeNumel(shape)));
  std::iota(v.begin(), v.end(), 0.f);
  return f32(std::move(shape), v);
}

template <typename T>
std::vector<T> values(const OwnedTensor& t) {
  std::vector<T> v(size_t(t.view().numel()));
  if (!v.empty()) std::memcpy(v.data(), t.data(), v.size() * sizeof(T));
  return v;
}

ir::Node makeNode(const std::string& op, int opset, size_t inputs, size_t outputs = 1) {
  ir::Node n;
  n.op_type = op;
  n.opset = opset;
  n.name = "n";
  for (size_t i = 0; i < inputs; ++i) n.inputs.push_back(ir::ValueId(i));
  for (size_t o = 0; o < outputs; ++o) n.outputs.push_back(ir::ValueId(inputs + o));
  return n;
}

// Infers with every input value known, allocates the outputs and runs the kernel, as
// the executor does for a dynamic node. A null input is an omitted optional input.
std::vector<OwnedTensor> run(const ir::Node& node, const std::vector<const OwnedTensor*>& inputs,
                             const ConstResolver* constants = nullptr) {
  std::vector<TensorType> types;
  std::vector<const ir::Tensor*> vals;
  for (const OwnedTensor* t : inputs) {
    types.push_back(t ? ir::typeOf(t->view()) : TensorType{});
    vals.push_back(t ? &t->view() : nullptr);
  }
  std::vector<TensorType> out_types = inferNode(node, types, vals, constants);
  const OpDef* op = OpRegistry::global().find("", node.op_type);
  KernelContext ctx{node, constants, {}, {}, 2};
  for (const OwnedTensor* t : inputs) ctx.inputs.push_back(t ? t->view() : ir::Tensor{});
  std::vector<OwnedTensor> outs;
  outs.reserve(out_types.size());
  for (const TensorType& t : out_types) {
    EXPECT_TRUE(t.isStatic()) << node.op_type << ": " << t.str();
    outs.emplace_back(t.dtype, t.staticShape());
    ctx.outputs.push_back(outs.back().view());
  }
  op->run(ctx);
  return outs;
}

// Infers from types only (the values of the inputs flagged in `known` are passed).
std::vector<TensorType> infer(const ir::Node& node, const std::vector<TensorType>& types,
                              const std::vector<const ir::Tensor*>& vals = {}) {
  std::vector<const ir::Tensor*> v = vals;
  v.resize(types.size(), nullptr);
  return inferNode(node, types, v, nullptr);
}

TensorType typeWith(DType dt, std::vector<ir::Dim> dims) { return TensorType{dt, true, std::move(dims)}; }
ir::Dim sym(const std::string& s) { return ir::Dim::symbolic(s); }
ir::Dim dim(int64_t v) { return ir::Dim::known(v); }

// ---------------------------------------------------------------------------------------

TEST(ShapeOps, ReshapeCopiesZeroAndInfersMinusOne) {
  OwnedTensor x = iota({2, 3, 4}), s = i64({2}, {0, -1});
  auto out = run(makeNode("Reshape", 14, 2), {&x, &s});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2, 12}));
  EXPECT_EQ(values<float>(out[0]), values<float>(x));
}

TEST(ShapeOps, ReshapeAllowZeroKeepsZero) {
  OwnedTensor x(DType::kFloat32, {0, 3});
  OwnedTensor s = i64({3}, {3, 0, 4});
  ir::Node n = makeNode("Reshape", 14, 2);
  n.attrs.setInt("allowzero", 1);
  std::vector<TensorType> t = infer(n, {ir::typeOf(x.view()), ir::typeOf(s.view())}, {nullptr, &s.view()});
  EXPECT_EQ(t[0].str(), "float32[3,0,4]");
  n.attrs.setInt("allowzero", 0);
  EXPECT_THROW(infer(n, {ir::typeOf(x.view()), ir::typeOf(s.view())}, {nullptr, &s.view()}),
               Error);  // 0 copies dim 1 (3)
}

TEST(ShapeOps, ReshapeInferenceWithSymbolsAndUnknownShape) {
  ir::Node n = makeNode("Reshape", 13, 2);
  TensorType in = typeWith(DType::kFloat32, {sym("N"), dim(3), dim(4)});
  OwnedTensor s = i64({2}, {0, -1});
  EXPECT_EQ(infer(n, {in, ir::typeOf(s.view())}, {nullptr, &s.view()})[0].str(), "float32[N,12]");
  OwnedTensor s2 = i64({2}, {12, -1});
  EXPECT_EQ(infer(n, {in, ir::typeOf(s2.view())}, {nullptr, &s2.view()})[0].str(), "float32[12,N]");
  // Unknown shape value: rank from the shape input's length, or unranked.
  EXPECT_EQ(infer(n, {in, TensorType::of(DType::kInt64, {3})})[0].str(), "float32[?,?,?]");
  EXPECT_EQ(infer(n, {in, typeWith(DType::kInt64, {ir::Dim{}})})[0].str(), "float32[*]");
  OwnedTensor bad = i64({2}, {-1, -1});
  EXPECT_THROW(infer(n, {in, ir::typeOf(bad.view())}, {nullptr, &bad.view()}), Error);
  OwnedTensor mismatch = i64({2}, {5, 5});
  EXPECT_THROW(infer(n, {TensorType::of(DType::kFloat32, {2, 3}), ir::typeOf(mismatch.view())},
                     {nullptr, &mismatch.view()}),
               Error);
}

TEST(ShapeOps, Flatten) {
  OwnedTensor x = iota({2, 3, 4});
  ir::Node n = makeNode("Flatten", 13, 1);
  n.attrs.setInt("axis", 0);
  EXPECT_EQ(run(n, {&x})[0].shape(), (std::vector<int64_t>{1, 24}));
  n.attrs.setInt("axis", -1);
  auto out = run(n, {&x});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{6, 4}));
  EXPECT_EQ(values<float>(out[0]), values<float>(x));
  n.attrs.setInt("axis", 1);
  EXPECT_EQ(infer(n, {typeWith(DType::kFloat32, {sym("B"), dim(3), dim(4)})})[0].str(), "float32[B,12]");
}

TEST(ShapeOps, SqueezeAttributeInputAndAll) {
  OwnedTensor x = iota({1, 3, 1, 2});
  ir::Node n11 = makeNode("Squeeze", 11, 1);
  n11.attrs.setInts("axes", {-2});
  EXPECT_EQ(run(n11, {&x})[0].shape(), (std::vector<int64_t>{1, 3, 2}));
  OwnedTensor axes = i64({1}, {0});
  auto out = run(makeNode("Squeeze", 13, 2), {&x, &axes});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{3, 1, 2}));
  EXPECT_EQ(values<float>(out[0]), values<float>(x));
  EXPECT_EQ(run(makeNode("Squeeze", 13, 1), {&x})[0].shape(), (std::vector<int64_t>{3, 2}));
  OwnedTensor bad = i64({1}, {1});
  EXPECT_THROW(run(makeNode("Squeeze", 13, 2), {&x, &bad}), Error);
  // Without axes an unknown dim might be 1: the rank is unknown.
  EXPECT_EQ(infer(makeNode("Squeeze", 13, 1), {typeWith(DType::kFloat32, {sym("N"), dim(1)})})[0].str(),
            "float32[*]");
}

TEST(ShapeOps, UnsqueezeAttributeAndInput) {
  OwnedTensor x = iota({2, 3});
  ir::Node n11 = makeNode("Unsqueeze", 11, 1);
  n11.attrs.setInts("axes", {0, 3});
  EXPECT_EQ(run(n11, {&x})[0].shape(), (std::vector<int64_t>{1, 2, 3, 1}));
  OwnedTensor axes = i64({2}, {-1, 1});
  auto out = run(makeNode("Unsqueeze", 13, 2), {&x, &axes});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2, 1, 3, 1}));
  EXPECT_EQ(values<float>(out[0]), values<float>(x));
  EXPECT_EQ(infer(makeNode("Unsqueeze", 13, 2), {ir::typeOf(x.view()), TensorType::of(DType::kInt64, {2})})[0]
                .str(),
            "float32[?,?,?,?]");
  OwnedTensor dup = i64({2}, {1, 1});
  EXPECT_THROW(run(makeNode("Unsqueeze", 13, 2), {&x, &dup}), Error);
}

// Reference transpose for checking the fast paths.
std::vector<float> referenceTranspose(const std::vector<float>& in, const std::vector<int64_t>& shape,
                                      const std::vector<int64_t>& perm) {
  const size_t r = shape.size();
  std::vector<int64_t> in_strides(r, 1), out_shape(r);
  for (size_t k = r - 1; k-- > 0;) in_strides[k] = in_strides[k + 1] * shape[k + 1];
  for (size_t k = 0; k < r; ++k) out_shape[k] = shape[size_t(perm[k])];
  std::vector<float> out(in.size());
  std::vector<int64_t> pos(r, 0);
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t src = 0;
    for (size_t k = 0; k < r; ++k) src += pos[k] * in_strides[size_t(perm[k])];
    out[i] = in[size_t(src)];
    for (size_t k = r; k-- > 0;) {
      if (++pos[k] < out_shape[k]) break;
      pos[k] = 0;
    }
  }
  return out;
}

TEST(ShapeOps, Transpose2D) {
  OwnedTensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  auto out = run(makeNode("Transpose", 13, 1), {&x});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{1, 4, 2, 5, 3, 6}));
}

TEST(ShapeOps, TransposeEveryPermutationOf4D) {
  const std::vector<int64_t> shape{2, 3, 4, 5};
  OwnedTensor x = iota(shape);
  std::vector<int64_t> perm{0, 1, 2, 3};
  do {
    ir::Node n = makeNode("Transpose", 13, 1);
    n.attrs.setInts("perm", perm);
    auto out = run(n, {&x});
    EXPECT_EQ(values<float>(out[0]), referenceTranspose(values<float>(x), shape, perm)) << ir::shapeStr(perm);
  } while (std::next_permutation(perm.begin(), perm.end()));
}

TEST(ShapeOps, TransposeLargeUsesTiledAndParallelPaths) {
  for (auto [shape, perm] : std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>{
           {{300, 257}, {1, 0}},                // tiled 2-D, parallel
           {{3, 130, 67}, {0, 2, 1}},           // batched tiled
           {{64, 40, 3, 50}, {2, 0, 1, 3}},     // keeps the innermost axis: row copies
           {{17, 33, 29, 5}, {3, 1, 0, 2}}}) {  // general strided
    OwnedTensor x = iota(shape);
    ir::Node n = makeNode("Transpose", 13, 1);
    n.attrs.setInts("perm", perm);
    auto out = run(n, {&x});
    EXPECT_EQ(values<float>(out[0]), referenceTranspose(values<float>(x), shape, perm))
        << ir::shapeStr(shape);
  }
}

TEST(ShapeOps, TransposeOtherElementSizes) {
  OwnedTensor h = make<uint16_t>(DType::kFloat16, {2, 3}, {1, 2, 3, 4, 5, 6});
  auto out = run(makeNode("Transpose", 13, 1), {&h});
  EXPECT_EQ(out[0].dtype(), DType::kFloat16);
  EXPECT_EQ(values<uint16_t>(out[0]), (std::vector<uint16_t>{1, 4, 2, 5, 3, 6}));
  OwnedTensor b = make<uint8_t>(DType::kBool, {3, 2}, {1, 0, 0, 1, 1, 1});
  EXPECT_EQ(values<uint8_t>(run(makeNode("Transpose", 13, 1), {&b})[0]),
            (std::vector<uint8_t>{1, 0, 1, 0, 1, 1}));
  OwnedTensor l = i64({2, 2}, {int64_t(1) << 40, 2, 3, -4});
  EXPECT_EQ(values<int64_t>(run(makeNode("Transpose", 13, 1), {&l})[0]),
            (std::vector<int64_t>{int64_t(1) << 40, 3, 2, -4}));
}

TEST(ShapeOps, ConcatAlongMiddleAxis) {
  OwnedTensor a = f32({2, 1, 2}, {1, 2, 3, 4}), b = f32({2, 2, 2}, {5, 6, 7, 8, 9, 10, 11, 12});
  ir::Node n = makeNode("Concat", 13, 2);
  n.attrs.setInt("axis", -2);
  auto out = run(n, {&a, &b});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2, 3, 2}));
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{1, 2, 5, 6, 7, 8, 3, 4, 9, 10, 11, 12}));
  EXPECT_EQ(infer(n, {typeWith(DType::kFloat32, {sym("N"), dim(1), dim(2)}),
                      typeWith(DType::kFloat32, {dim(4), dim(2), ir::Dim{}})})[0]
                .str(),
            "float32[4,3,2]");
  EXPECT_THROW(
      infer(n, {TensorType::of(DType::kFloat32, {2, 1, 2}), TensorType::of(DType::kFloat32, {2, 1, 3})}),
      Error);
}

TEST(ShapeOps, SplitEqualVariableAndUneven) {
  OwnedTensor x = iota({2, 6});
  ir::Node n = makeNode("Split", 13, 1, 3);
  n.attrs.setInt("axis", 1);
  auto out = run(n, {&x});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(values<float>(out[1]), (std::vector<float>{2, 3, 8, 9}));

  OwnedTensor split = i64({2}, {1, 5});
  ir::Node n2 = makeNode("Split", 13, 2, 2);
  n2.attrs.setInt("axis", -1);
  out = run(n2, {&x, &split});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{0, 6}));
  EXPECT_EQ(values<float>(out[1]), (std::vector<float>{1, 2, 3, 4, 5, 7, 8, 9, 10, 11}));

  ir::Node n11 = makeNode("Split", 11, 1, 2);
  n11.attrs.setInts("split", {1, 1});
  out = run(n11, {&x});
  EXPECT_EQ(values<float>(out[1]), (std::vector<float>{6, 7, 8, 9, 10, 11}));

  // 7 into 3 parts: the last part is smaller.
  OwnedTensor y = iota({7});
  out = run(makeNode("Split", 13, 1, 3), {&y});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{3}));
  EXPECT_EQ(values<float>(out[2]), (std::vector<float>{6}));

  OwnedTensor bad = i64({2}, {2, 5});
  EXPECT_THROW(run(n2, {&x, &bad}), Error);
  // Unknown split value: the axis dim is unknown.
  EXPECT_EQ(infer(n2, {ir::typeOf(x.view()), TensorType::of(DType::kInt64, {2})})[0].str(), "float32[2,?]");
}

TEST(ShapeOps, SliceOpset9Attributes) {
  OwnedTensor x = iota({3, 4});
  ir::Node n = makeNode("Slice", 9, 1);
  n.attrs.setInts("starts", {1, -3});
  n.attrs.setInts("ends", {1000, -1});
  auto out = run(n, {&x});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{5, 6, 9, 10}));
}

TEST(ShapeOps, SliceNegativeStepsAndClamping) {
  OwnedTensor x = iota({4, 5});
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max(), kMin = std::numeric_limits<int64_t>::min();
  OwnedTensor starts = i64({2}, {3, -1}), ends = i64({2}, {0, kMin}), axes = i64({2}, {0, 1}),
              steps = i64({2}, {-2, -1});
  auto out = run(makeNode("Slice", 13, 5), {&x, &starts, &ends, &axes, &steps});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{19, 18, 17, 16, 15, 9, 8, 7, 6, 5}));

  // Default axes, steps omitted, out-of-range start gives an empty result.
  OwnedTensor s2 = i64({1}, {10}), e2 = i64({1}, {kMax});
  out = run(makeNode("Slice", 13, 3), {&x, &s2, &e2});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{0, 5}));

  // int32 parameters with a step of 2 on the last axis.
  OwnedTensor s3 = i32({1}, {1}), e3 = i32({1}, {5}), a3 = i32({1}, {-1}), st3 = i32({1}, {2});
  out = run(makeNode("Slice", 13, 5), {&x, &s3, &e3, &a3, &st3});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{1, 3, 6, 8, 11, 13, 16, 18}));
}

TEST(ShapeOps, SliceInferenceWithUnknownValues) {
  ir::Node n = makeNode("Slice", 13, 4);
  TensorType in = typeWith(DType::kFloat32, {sym("N"), dim(8), dim(3)});
  OwnedTensor axes = i64({1}, {1});
  std::vector<TensorType> t = infer(
      n,
      {in, TensorType::of(DType::kInt64, {1}), TensorType::of(DType::kInt64, {1}), ir::typeOf(axes.view())},
      {nullptr, nullptr, nullptr, &axes.view()});
  EXPECT_EQ(t[0].str(), "float32[N,?,3]");
  OwnedTensor s = i64({1}, {2}), e = i64({1}, {-1});
  t = infer(n, {in, ir::typeOf(s.view()), ir::typeOf(e.view()), ir::typeOf(axes.view())},
            {nullptr, &s.view(), &e.view(), &axes.view()});
  EXPECT_EQ(t[0].str(), "float32[N,5,3]");
  OwnedTensor zero = i64({1}, {0});
  ir::Node n5 = makeNode("Slice", 13, 5);
  EXPECT_THROW(infer(n5,
                     {in, ir::typeOf(s.view()), ir::typeOf(e.view()), ir::typeOf(axes.view()),
                      ir::typeOf(zero.view())},
                     {nullptr, &s.view(), &e.view(), &axes.view(), &zero.view()}),
               Error);
}

TEST(ShapeOps, GatherNegativeAndInt32Indices) {
  OwnedTensor x = iota({3, 4});
  OwnedTensor idx = i32({2, 2}, {-1, 0, 2, 2});
  ir::Node n = makeNode("Gather", 13, 2);
  n.attrs.setInt("axis", 1);
  auto out = run(n, {&x, &idx});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{3, 2, 2}));
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{3, 0, 2, 2, 7, 4, 6, 6, 11, 8, 10, 10}));
  OwnedTensor rows = i64({}, {-2});
  out = run(makeNode("Gather", 13, 2), {&x, &rows});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{4}));
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{4, 5, 6, 7}));
  OwnedTensor bad = i64({1}, {3});
  EXPECT_THROW(run(makeNode("Gather", 13, 2), {&x, &bad}), Error);
}

TEST(ShapeOps, GatherElements) {
  OwnedTensor x = f32({2, 2}, {1, 2, 3, 4});
  OwnedTensor idx = i64({2, 2}, {0, 0, 1, -2});
  ir::Node n = makeNode("GatherElements", 13, 2);
  n.attrs.setInt("axis", 1);
  EXPECT_EQ(values<float>(run(n, {&x, &idx})[0]), (std::vector<float>{1, 1, 4, 3}));
  OwnedTensor idx0 = i64({1, 2}, {1, 0});
  EXPECT_EQ(values<float>(run(makeNode("GatherElements", 13, 2), {&x, &idx0})[0]),
            (std::vector<float>{3, 2}));
}

TEST(ShapeOps, GatherNDWithBatchDims) {
  OwnedTensor x = iota({2, 3, 4});
  OwnedTensor idx = i64({2, 2}, {0, 2, 1, 0});
  auto out = run(makeNode("GatherND", 13, 2), {&x, &idx});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{8, 9, 10, 11, 12, 13, 14, 15}));
  // batch_dims=1: per batch, index [row] then [row, col].
  ir::Node n = makeNode("GatherND", 13, 2);
  n.attrs.setInt("batch_dims", 1);
  OwnedTensor bidx = i64({2, 1}, {2, -3});
  out = run(n, {&x, &bidx});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{8, 9, 10, 11, 12, 13, 14, 15}));
  OwnedTensor bidx2 = i64({2, 2}, {1, 3, 0, 1});
  out = run(n, {&x, &bidx2});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2}));
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{7, 13}));
}

TEST(ShapeOps, ScatterElementsReductions) {
  OwnedTensor x = f32({1, 5}, {1, 2, 3, 4, 5});
  OwnedTensor idx = i64({1, 3}, {1, 1, -1});
  OwnedTensor upd = f32({1, 3}, {1.5f, 2.5f, 10});
  ir::Node n = makeNode("ScatterElements", 16, 3);
  n.attrs.setInt("axis", 1);
  EXPECT_EQ(values<float>(run(n, {&x, &idx, &upd})[0]), (std::vector<float>{1, 2.5f, 3, 4, 10}));
  n.attrs.setString("reduction", "add");
  EXPECT_EQ(values<float>(run(n, {&x, &idx, &upd})[0]), (std::vector<float>{1, 6, 3, 4, 15}));
  n.attrs.setString("reduction", "mul");
  EXPECT_EQ(values<float>(run(n, {&x, &idx, &upd})[0]), (std::vector<float>{1, 7.5f, 3, 4, 50}));
  // Scatter (opset 9-10) is ScatterElements without reductions; the input is untouched.
  ir::Node old = makeNode("Scatter", 10, 3);
  old.attrs.setInt("axis", 1);
  EXPECT_EQ(values<float>(run(old, {&x, &idx, &upd})[0]), (std::vector<float>{1, 2.5f, 3, 4, 10}));
  EXPECT_EQ(values<float>(x), (std::vector<float>{1, 2, 3, 4, 5}));
}

TEST(ShapeOps, ScatterND) {
  OwnedTensor x = iota({2, 2, 2});
  OwnedTensor idx = i64({2, 1}, {1, 1});
  OwnedTensor upd = f32({2, 2, 2}, {1, 1, 1, 1, 2, 2, 2, 2});
  ir::Node n = makeNode("ScatterND", 16, 3);
  n.attrs.setString("reduction", "mul");
  EXPECT_EQ(values<float>(run(n, {&x, &idx, &upd})[0]), (std::vector<float>{0, 1, 2, 3, 8, 10, 12, 14}));
  OwnedTensor idx2 = i64({1, 3}, {0, 1, 0});
  OwnedTensor upd2 = f32({1}, {-7});
  EXPECT_EQ(values<float>(run(makeNode("ScatterND", 13, 3), {&x, &idx2, &upd2})[0]),
            (std::vector<float>{0, 1, -7, 3, 4, 5, 6, 7}));
}

TEST(ShapeOps, ExpandBroadcastsBothWays) {
  OwnedTensor x = f32({3, 1}, {1, 2, 3});
  OwnedTensor s = i64({3}, {2, 1, 2});
  auto out = run(makeNode("Expand", 13, 2), {&x, &s});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2, 3, 2}));
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
  OwnedTensor bad = i64({2}, {4, 1});
  EXPECT_THROW(run(makeNode("Expand", 13, 2), {&x, &bad}), Error);
  EXPECT_EQ(
      infer(makeNode("Expand", 13, 2), {ir::typeOf(x.view()), TensorType::of(DType::kInt64, {3})})[0].str(),
      "float32[?,3,?]");
}

TEST(ShapeOps, Tile) {
  OwnedTensor x = f32({2, 2}, {1, 2, 3, 4});
  OwnedTensor r = i64({2}, {2, 3});
  auto out = run(makeNode("Tile", 13, 2), {&x, &r});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(values<float>(out[0]),
            (std::vector<float>{1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4, 1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4}));
  EXPECT_EQ(
      infer(makeNode("Tile", 13, 2), {typeWith(DType::kFloat32, {sym("N"), dim(2)}), ir::typeOf(r.view())})[0]
          .str(),
      "float32[?,?]");
}

TEST(ShapeOps, PadModes) {
  OwnedTensor x = make<int32_t>(DType::kInt32, {2, 3}, {1, 2, 3, 4, 5, 6});
  ir::Node n = makeNode("Pad", 13, 2);
  n.attrs.setString("mode", "reflect");
  OwnedTensor pads = i64({4}, {1, 2, 1, 2});
  auto out = run(n, {&x, &pads});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{4, 7}));
  EXPECT_EQ(values<int32_t>(out[0]), (std::vector<int32_t>{6, 5, 4, 5, 6, 5, 4, 3, 2, 1, 2, 3, 2, 1,
                                                           6, 5, 4, 5, 6, 5, 4, 3, 2, 1, 2, 3, 2, 1}));
  n.attrs.setString("mode", "edge");
  OwnedTensor pads2 = i64({4}, {0, 1, 1, 0});
  EXPECT_EQ(values<int32_t>(run(n, {&x, &pads2})[0]),
            (std::vector<int32_t>{1, 1, 2, 3, 4, 4, 5, 6, 4, 4, 5, 6}));

  ir::Node nc = makeNode("Pad", 13, 3);
  OwnedTensor pads3 = i64({4}, {1, 0, 0, 1});
  OwnedTensor nine = make<int32_t>(DType::kInt32, {}, {9});
  EXPECT_EQ(values<int32_t>(run(nc, {&x, &pads3, &nine})[0]),
            (std::vector<int32_t>{9, 9, 9, 9, 1, 2, 3, 9, 4, 5, 6, 9}));
  // Negative pads crop.
  OwnedTensor crop = i64({4}, {0, 1, 0, -2});
  auto cropped = run(makeNode("Pad", 13, 2), {&x, &crop});
  EXPECT_EQ(cropped[0].shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(values<int32_t>(cropped[0]), (std::vector<int32_t>{0, 1, 0, 4}));
}

TEST(ShapeOps, PadOpset2AttributesAndUnknownPads) {
  OwnedTensor x = f32({1, 2}, {1, 2});
  ir::Node n = makeNode("Pad", 2, 1);
  n.attrs.setInts("pads", {0, 1, 1, 0});
  n.attrs.setFloat("value", 0.5f);
  auto out = run(n, {&x});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{0.5f, 1, 2, 0.5f, 0.5f, 0.5f}));
  EXPECT_EQ(
      infer(makeNode("Pad", 11, 2), {ir::typeOf(x.view()), TensorType::of(DType::kInt64, {4})})[0].str(),
      "float32[?,?]");
}

TEST(ShapeOps, ShapeAndSize) {
  OwnedTensor x = iota({2, 3, 4});
  EXPECT_EQ(values<int64_t>(run(makeNode("Shape", 13, 1), {&x})[0]), (std::vector<int64_t>{2, 3, 4}));
  ir::Node n = makeNode("Shape", 15, 1);
  n.attrs.setInt("start", -2);
  n.attrs.setInt("end", 10);
  EXPECT_EQ(values<int64_t>(run(n, {&x})[0]), (std::vector<int64_t>{3, 4}));
  auto size = run(makeNode("Size", 13, 1), {&x});
  EXPECT_TRUE(size[0].shape().empty());
  EXPECT_EQ(values<int64_t>(size[0]), (std::vector<int64_t>{24}));
  EXPECT_EQ(infer(makeNode("Shape", 13, 1), {TensorType::unranked(DType::kFloat32)})[0].str(), "int64[?]");
}

TEST(ShapeOps, ConstantOfShape) {
  OwnedTensor s = i64({2}, {2, 3});
  auto out = run(makeNode("ConstantOfShape", 9, 1), {&s});
  EXPECT_EQ(out[0].dtype(), DType::kFloat32);
  EXPECT_EQ(values<float>(out[0]), std::vector<float>(6, 0.f));

  ir::ConstantPool pool;
  int32_t seven = 7;
  ir::Tensor v{DType::kInt32, {1}, &seven};
  ir::Node n = makeNode("ConstantOfShape", 9, 1);
  n.attrs.setTensor("value", pool.addCopy("value", v));
  PoolResolver resolver(pool);
  out = run(n, {&s}, &resolver);
  EXPECT_EQ(out[0].dtype(), DType::kInt32);
  EXPECT_EQ(values<int32_t>(out[0]), std::vector<int32_t>(6, 7));
  OwnedTensor empty = i64({1}, {0});
  EXPECT_EQ(run(n, {&empty}, &resolver)[0].shape(), (std::vector<int64_t>{0}));
  EXPECT_EQ(inferNode(n, {TensorType::of(DType::kInt64, {3})}, {nullptr}, &resolver)[0].str(),
            "int32[?,?,?]");
}

TEST(ShapeOps, Range) {
  OwnedTensor s = f32({}, {1}), l = f32({}, {2}), d = f32({}, {0.3f});
  auto out = run(makeNode("Range", 11, 3), {&s, &l, &d});
  ASSERT_EQ(out[0].shape(), (std::vector<int64_t>{4}));
  std::vector<float> v = values<float>(out[0]);
  EXPECT_FLOAT_EQ(v[3], 1.9f);
  OwnedTensor si = i32({}, {10}), li = i32({}, {4}), di = i32({}, {-3});
  EXPECT_EQ(values<int32_t>(run(makeNode("Range", 11, 3), {&si, &li, &di})[0]),
            (std::vector<int32_t>{10, 7}));
  OwnedTensor zero = i32({}, {0});
  EXPECT_THROW(run(makeNode("Range", 11, 3), {&si, &li, &zero}), Error);
  EXPECT_EQ(
      infer(makeNode("Range", 11, 3), {ir::typeOf(s.view()), ir::typeOf(l.view()), ir::typeOf(d.view())})[0]
          .str(),
      "float32[?]");
}

TEST(ShapeOps, DepthToSpaceModesAndSpaceToDepth) {
  OwnedTensor x = iota({1, 8, 1, 2});
  ir::Node n = makeNode("DepthToSpace", 13, 1);
  n.attrs.setInt("blocksize", 2);
  auto dcr = run(n, {&x});
  EXPECT_EQ(dcr[0].shape(), (std::vector<int64_t>{1, 2, 2, 4}));
  EXPECT_EQ(values<float>(dcr[0]),
            (std::vector<float>{0, 4, 1, 5, 8, 12, 9, 13, 2, 6, 3, 7, 10, 14, 11, 15}));
  n.attrs.setString("mode", "CRD");
  EXPECT_EQ(values<float>(run(n, {&x})[0]),
            (std::vector<float>{0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15}));
  // SpaceToDepth undoes DCR DepthToSpace.
  ir::Node s2d = makeNode("SpaceToDepth", 13, 1);
  s2d.attrs.setInt("blocksize", 2);
  auto back = run(s2d, {&dcr[0]});
  EXPECT_EQ(back[0].shape(), x.shape());
  EXPECT_EQ(values<float>(back[0]), values<float>(x));
  EXPECT_THROW(infer(s2d, {TensorType::of(DType::kFloat32, {1, 1, 3, 4})}), Error);
}

TEST(ShapeOps, Compress) {
  OwnedTensor x = iota({3, 2});
  OwnedTensor cond = make<uint8_t>(DType::kBool, {2}, {0, 1});
  ir::Node n = makeNode("Compress", 11, 2);
  n.attrs.setInt("axis", 0);
  auto out = run(n, {&x, &cond});
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{2, 3}));
  OwnedTensor flat = make<uint8_t>(DType::kBool, {5}, {1, 0, 1, 1, 0});
  EXPECT_EQ(values<float>(run(makeNode("Compress", 11, 2), {&x, &flat})[0]), (std::vector<float>{0, 2, 3}));
  EXPECT_EQ(infer(n, {ir::typeOf(x.view()), TensorType::of(DType::kBool, {2})})[0].str(), "float32[?,2]");
}

TEST(ShapeOps, ReverseSequence) {
  OwnedTensor x = iota({4, 3});  // [time, batch]
  OwnedTensor lens = i64({3}, {4, 1, 2});
  auto out = run(makeNode("ReverseSequence", 10, 2), {&x, &lens});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{9, 1, 5, 6, 4, 2, 3, 7, 8, 0, 10, 11}));
  ir::Node n = makeNode("ReverseSequence", 10, 2);
  n.attrs.setInt("batch_axis", 0);
  n.attrs.setInt("time_axis", 1);
  OwnedTensor y = iota({2, 3});
  OwnedTensor lens2 = i64({2}, {3, 2});
  EXPECT_EQ(values<float>(run(n, {&y, &lens2})[0]), (std::vector<float>{2, 1, 0, 4, 3, 5}));
}

// ---- counts, limits and indices (issue 10) ----------------------------------------

constexpr int64_t kBig = int64_t(1) << 62;

// The message of the Error `f` throws ("" when it throws none).
template <typename F>
std::string errorOf(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ShapeCounts, InferredOutputsKeepTheLimits) {
  OwnedTensor s = i64({2}, {kBig, 4});
  ir::Node n = makeNode("ConstantOfShape", 9, 1);
  EXPECT_NE(errorOf([&] { infer(n, {ir::typeOf(s.view())}, {&s.view()}); }).find("more bytes than 64 bits"),
            std::string::npos);
  OwnedTensor big = i64({2}, {1 << 20, 1 << 20});  // 4 TiB of float32: counts fit, the limit does not
  EXPECT_NE(errorOf([&] { infer(n, {ir::typeOf(big.view())}, {&big.view()}); }).find("TensorLimits::max_bytes"),
            std::string::npos);
  ir::TensorLimits roomy;
  roomy.max_bytes = uint64_t(1) << 43;
  EXPECT_EQ(inferNode(n, {ir::typeOf(big.view())}, {&big.view()}, nullptr, roomy)[0].str(),
            "float32[1048576,1048576]");
  // A shape input longer than the rank limit fails before anything is sized by it.
  EXPECT_NE(errorOf([&] { infer(n, {TensorType::of(DType::kInt64, {kBig})}); }).find("max_rank"),
            std::string::npos);
  OwnedTensor deep = i64({17}, std::vector<int64_t>(17, 1));
  EXPECT_NE(errorOf([&] { infer(n, {ir::typeOf(deep.view())}, {&deep.view()}); }).find("rank 17"),
            std::string::npos);
}

TEST(ShapeCounts, ErrorsNameTheOutputWhenTheGraphIsKnown) {
  ir::Graph g;
  ir::ValueId x = g.addValue("x", TensorType::of(DType::kFloat32, {4}));
  ir::ValueId r = g.addValue("r", TensorType::of(DType::kInt64, {1}));
  ir::ValueId y = g.addValue("y");
  ir::Node n = makeNode("Tile", 13, 0, 0);
  n.name = "tile";
  n.inputs = {x, r};
  n.outputs = {y};
  OwnedTensor reps = i64({1}, {kBig});
  std::string msg = errorOf([&] {
    inferNode(n, {g.typeOf(x), g.typeOf(r)}, {nullptr, &reps.view()}, nullptr, {}, &g);
  });
  EXPECT_NE(msg.find("Tile node 'tile' (making 'y')"), std::string::npos) << msg;
  EXPECT_NE(msg.find("overflows a 64-bit dimension"), std::string::npos) << msg;
}

TEST(ShapeCounts, DimensionArithmeticNeverWraps) {
  // Tile: 4 x 2^62.
  OwnedTensor x = iota({4}), reps = i64({1}, {kBig});
  EXPECT_THROW(infer(makeNode("Tile", 13, 2), {ir::typeOf(x.view()), ir::typeOf(reps.view())},
                     {nullptr, &reps.view()}),
               Error);
  // Reshape: an empty input "matching" [2^62, 4] once the count wraps to 0.
  OwnedTensor empty(DType::kFloat32, {0});
  OwnedTensor wrap = i64({2}, {kBig, 4});
  EXPECT_NE(errorOf([&] { run(makeNode("Reshape", 14, 2), {&empty, &wrap}); }).find("cannot reshape"),
            std::string::npos);
  OwnedTensor minus = i64({3}, {kBig, 4, -1});
  EXPECT_THROW(infer(makeNode("Reshape", 14, 2), {TensorType::of(DType::kFloat32, {8}), ir::typeOf(minus.view())},
                     {nullptr, &minus.view()}),
               Error);
  // Pad: 2 + (2^63 - 2) + 1 and pads below zero.
  OwnedTensor two = iota({2});
  OwnedTensor huge = i64({2}, {INT64_MAX - 1, 1}), negative = i64({2}, {-2, -1});
  EXPECT_NE(errorOf([&] { run(makeNode("Pad", 13, 2), {&two, &huge}); }).find("overflows"), std::string::npos);
  EXPECT_NE(errorOf([&] { run(makeNode("Pad", 13, 2), {&two, &negative}); }).find("negative: -1"),
            std::string::npos);
  // Concat: known dims summing past int64.
  ir::Node cat = makeNode("Concat", 13, 2);
  cat.attrs.setInt("axis", 0);
  EXPECT_THROW(infer(cat, {TensorType::of(DType::kUInt8, {INT64_MAX}), TensorType::of(DType::kUInt8, {1})}),
               Error);
  // Split sizes summing past int64.
  ir::Node split = makeNode("Split", 11, 1, 2);
  split.attrs.setInts("split", {INT64_MAX, 1});
  EXPECT_THROW(infer(split, {TensorType::of(DType::kFloat32, {4})}), Error);
  // DepthToSpace with a blocksize whose square overflows.
  ir::Node d2s = makeNode("DepthToSpace", 13, 1);
  d2s.attrs.setInt("blocksize", int64_t(1) << 32);
  EXPECT_THROW(infer(d2s, {TensorType::of(DType::kFloat32, {1, 4, 2, 2})}), Error);
}

TEST(ShapeCounts, RangeLengthIn128Bits) {
  OwnedTensor lo = i64({}, {INT64_MIN}), hi = i64({}, {INT64_MAX}), one = i64({}, {1});
  EXPECT_NE(errorOf([&] { run(makeNode("Range", 11, 3), {&lo, &hi, &one}); }).find("more elements than 64 bits"),
            std::string::npos);
  OwnedTensor back = i64({}, {INT64_MIN});  // delta INT64_MIN: -delta overflows int64
  OwnedTensor zero = i64({}, {0}), ten = i64({}, {10});
  EXPECT_EQ(run(makeNode("Range", 11, 3), {&ten, &zero, &back})[0].shape(), (std::vector<int64_t>{1}));
  OwnedTensor fs = f32({}, {0.f}), fl = f32({}, {1e30f}), fd = f32({}, {1e-30f});
  EXPECT_THROW(run(makeNode("Range", 11, 3), {&fs, &fl, &fd}), Error);
  OwnedTensor nan = f32({}, {std::numeric_limits<float>::quiet_NaN()});
  EXPECT_THROW(run(makeNode("Range", 11, 3), {&fs, &nan, &fd}), Error);
}

TEST(ShapeCounts, SliceWithExtremeSteps) {
  OwnedTensor x = iota({5});
  OwnedTensor s = i64({1}, {1}), e = i64({1}, {INT64_MAX}), ax = i64({1}, {0}), st = i64({1}, {INT64_MAX});
  auto out = run(makeNode("Slice", 13, 5), {&x, &s, &e, &ax, &st});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{1}));
  OwnedTensor s2 = i64({1}, {-1}), e2 = i64({1}, {INT64_MIN}), st2 = i64({1}, {INT64_MIN});
  out = run(makeNode("Slice", 13, 5), {&x, &s2, &e2, &ax, &st2});
  EXPECT_EQ(values<float>(out[0]), (std::vector<float>{4}));
  OwnedTensor empty(DType::kFloat32, {0}), back = i64({1}, {-1});
  EXPECT_EQ(run(makeNode("Slice", 13, 5), {&empty, &s2, &e2, &ax, &back})[0].shape(), (std::vector<int64_t>{0}));
}

TEST(ShapeCounts, MissingInputsAndOutputsAreErrorsNotCrashes) {
  // Inference fails first, so the kernels (which read their inputs unchecked) never run.
  OwnedTensor x = iota({2, 3});
  for (const char* op : {"ReverseSequence", "InstanceNormalization", "LayerNormalization", "Concat"}) {
    ir::Node n = makeNode(op, 17, std::string(op) == "Concat" ? 0 : 1);
    n.attrs.setInt("axis", 0);
    std::vector<TensorType> types(n.inputs.size(), ir::typeOf(x.view()));
    EXPECT_THROW(infer(n, types), Error) << op;
  }
  ir::Node none = makeNode("Relu", 14, 1, 0);
  EXPECT_NE(errorOf([&] { infer(none, {ir::typeOf(x.view())}); }).find("has 0 outputs, opset 14 allows 1"), std::string::npos);
}

TEST(ShapeCounts, MessagesAboutHostileShapesStayShort) {
  ir::Graph g;
  ir::Node n = makeNode("Split", 13, 0, 0);
  n.name = "split";
  n.inputs = {g.addValue("x", TensorType::of(DType::kFloat32, {3}))};
  for (int i = 0; i < 5000; ++i) n.outputs.push_back(g.addValue("o" + std::to_string(i)));
  std::string msg = errorOf([&] { inferNode(n, {g.typeOf(n.inputs[0])}, {nullptr}, nullptr, {}, &g); });
  EXPECT_NE(msg.find("(making 'o0', 'o1', 'o2' and 4997 more)"), std::string::npos) << msg;
  OwnedTensor ones = i64({1 << 20}, std::vector<int64_t>(1 << 20, 1));
  msg = errorOf([&] { infer(makeNode("Reshape", 14, 2), {ir::typeOf(iota({2, 3}).view()), ir::typeOf(ones.view())},
                            {nullptr, &ones.view()}); });
  EXPECT_LT(msg.size(), 400u) << msg.substr(0, 400);
  EXPECT_NE(msg.find("rank 1048576]"), std::string::npos);
}

TEST(ShapeIndices, GatherElementsIndicesWiderThanData) {
  OwnedTensor data = iota({2, 2});
  OwnedTensor wide = i64({2, 5}, std::vector<int64_t>(10, 0));
  ir::Node n = makeNode("GatherElements", 13, 2);
  EXPECT_NE(errorOf([&] { run(n, {&data, &wide}); }).find("wider than data"), std::string::npos);
  // Caught by inference too when both shapes are known.
  EXPECT_THROW(infer(n, {ir::typeOf(data.view()), ir::typeOf(wide.view())}), Error);
  // Narrower is fine (ONNX allows indices smaller than data on the other axes).
  OwnedTensor narrow = i64({1, 1}, {1});
  EXPECT_EQ(values<float>(run(n, {&data, &narrow})[0]), (std::vector<float>{2}));
}

TEST(ShapeIndices, ScatterChecksShapesAndDtypes) {
  OwnedTensor data = iota({2, 2});
  OwnedTensor idx = i64({2, 3}, std::vector<int64_t>(6, 0));
  OwnedTensor upd = iota({2, 3});
  ir::Node se = makeNode("ScatterElements", 13, 3);
  EXPECT_NE(errorOf([&] { run(se, {&data, &idx, &upd}); }).find("wider than data"), std::string::npos);
  // Updates of another dtype would be read as data's.
  OwnedTensor idx2 = i64({1, 1}, {0});
  OwnedTensor upd64 = make(DType::kInt64, {1, 1}, std::vector<int64_t>{7});
  KernelContext ctx{se, nullptr, {data.view(), idx2.view(), upd64.view()}, {}, 1};
  OwnedTensor out(DType::kFloat32, {2, 2});
  ctx.outputs.push_back(out.view());
  EXPECT_THROW(OpRegistry::global().find("", "ScatterElements")->run(ctx), Error);
  // ScatterND into an output of another shape.
  ir::Node snd = makeNode("ScatterND", 13, 3);
  OwnedTensor nd_idx = i64({1, 1}, {1}), nd_upd = iota({1, 2});
  OwnedTensor small(DType::kFloat32, {1, 2});
  KernelContext nd{snd, nullptr, {data.view(), nd_idx.view(), nd_upd.view()}, {small.view()}, 1};
  EXPECT_THROW(OpRegistry::global().find("", "ScatterND")->run(nd), Error);
}

TEST(ShapeIndices, GatherChecksTheOutputDtype) {
  OwnedTensor data = iota({4}), idx = i64({2}, {0, 3});
  OwnedTensor narrow(DType::kUInt8, {2});  // would take 8 bytes into 2
  KernelContext ctx{makeNode("Gather", 13, 2), nullptr, {data.view(), idx.view()}, {narrow.view()}, 1};
  EXPECT_THROW(OpRegistry::global().find("", "Gather")->run(ctx), Error);
}

TEST(StridedCopy, BroadcastFillAndNegativeStrides) {
  std::vector<int32_t> src{1, 2, 3};
  std::vector<int32_t> dst(6, 0);
  // [2, 3] reading src reversed along the last axis and broadcast along the first.
  copyStridedToDense(reinterpret_cast<std::byte*>(dst.data()),
                     reinterpret_cast<const std::byte*>(src.data() + 2), {0, -1}, {2, 3}, sizeof(int32_t));
  EXPECT_EQ(dst, (std::vector<int32_t>{3, 2, 1, 3, 2, 1}));
  std::vector<int16_t> fill(5, 0);
  int16_t v = 0x1234;
  fillElements(reinterpret_cast<std::byte*>(fill.data()), reinterpret_cast<const std::byte*>(&v), 5, 2);
  EXPECT_EQ(fill, std::vector<int16_t>(5, 0x1234));
}

}  // namespace
}  // namespace partita::kernels
