// The graph executor's per-signature arena plans (models with symbolic dims): one plan
// per input-shape signature, made by the first run at it and cached (LRU, bounded);
// later runs at the signature reuse the plan and its arena; steps whose shapes come
// from data stay dynamic on every run.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "passes/passes.h"
#include "runtime/graph_executor.h"
#include "runtime/shape_cache.h"

namespace partita::runtime {
namespace {

using ir::DType;
using ir::TensorType;

ir::Node node(const std::string& op, const std::string& name, std::vector<ir::ValueId> in,
              std::vector<ir::ValueId> out, ir::AttributeMap attrs = {}) {
  ir::Node n;
  n.op_type = op;
  n.opset = 14;
  n.name = name;
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  n.attrs = std::move(attrs);
  return n;
}

ir::OwnedTensor counting(DType dtype, std::vector<int64_t> shape, float scale = 0.1f) {
  ir::OwnedTensor t(dtype, std::move(shape));
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dtype == DType::kFloat32) t.as<float>()[i] = float(i % 13 - 6) * scale;
    if (dtype == DType::kInt64) t.as<int64_t>()[i] = i;
  }
  return t;
}

std::shared_ptr<GraphExecutor> executorOf(ir::Graph g, RunOptions options = {}) {
  passes::FoldOptions fold;
  fold.max_growth_bytes = 0;
  passes::inferShapes(g, fold);
  auto graph = std::make_shared<ir::Graph>(std::move(g));
  auto store = std::make_shared<ConstStore>(ConstStore::fromPool(graph->constants));
  return std::make_shared<GraphExecutor>(graph, store, std::vector<std::shared_ptr<const RuntimeModule>>{}, options);
}

std::vector<ir::OwnedTensor> runOnce(const GraphExecutor& e, GraphExecutor::RunState& state,
                                     const std::vector<ir::OwnedTensor>& inputs) {
  std::vector<ir::Tensor> views;
  for (const ir::OwnedTensor& t : inputs) views.push_back(t.view());
  return e.run(state, views);
}

bool equal(const ir::OwnedTensor& a, const ir::OwnedTensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// x[N,4] -> Relu -> MatMul [4,3] -> Softmax, with `x_dims` as x's dims.
ir::Graph mlp(std::vector<ir::Dim> x_dims) {
  ir::Graph g;
  ir::ValueId x = g.addValue("x", TensorType{DType::kFloat32, true, std::move(x_dims)});
  ir::OwnedTensor w = counting(DType::kFloat32, {4, 3}, 0.3f);
  ir::ValueId wv = g.addConstantValue("w", g.constants.addCopy("w", w.view()));
  ir::ValueId r = g.addValue("r"), m = g.addValue("m"), y = g.addValue("y");
  g.inputs = {x};
  g.addNode(node("Relu", "relu", {x}, {r}));
  g.addNode(node("MatMul", "matmul", {r, wv}, {m}));
  g.addNode(node("Softmax", "softmax", {m}, {y}));
  g.outputs = {y};
  return g;
}

TEST(GraphExecutorShapes, OnePlanPerInputShapeBoundedAndReused) {
  auto e = executorOf(mlp({ir::Dim::symbolic("N"), ir::Dim::known(4)}), RunOptions{2, {}, /*shape_cache=*/2});
  EXPECT_EQ(e->dynamicSteps(), 3u);
  auto state = e->newRunState();
  auto expect = [&](int64_t n) {
    auto fixed = executorOf(mlp({ir::Dim::known(n), ir::Dim::known(4)}));
    auto fixed_state = fixed->newRunState();
    ir::OwnedTensor x = counting(DType::kFloat32, {n, 4});
    std::vector<ir::OwnedTensor> want = runOnce(*fixed, *fixed_state, {x});
    std::vector<ir::OwnedTensor> got = runOnce(*e, *state, {x});
    EXPECT_TRUE(equal(got[0], want[0])) << "N=" << n;
  };
  expect(5);
  EXPECT_EQ(e->shapePlansCached(), 1u);
  expect(5);  // the same signature: the same plan and arena, no new plan
  const std::byte* arena = state->shape_arena.data();
  expect(5);
  EXPECT_EQ(state->shape_arena.data(), arena);
  EXPECT_EQ(e->shapePlansCached(), 1u);
  expect(3);  // a smaller shape fits the arena the larger one grew
  EXPECT_EQ(state->shape_arena.data(), arena);
  EXPECT_EQ(e->shapePlansCached(), 2u);
  expect(9);  // a third signature: the least recently used plan goes
  EXPECT_EQ(e->shapePlansCached(), 2u);
  EXPECT_EQ(e->shapePlanEvictions(), 1u);
  expect(5);
  expect(3);
  expect(9);
  EXPECT_EQ(e->shapePlanEvictions(), 4u);
}

TEST(GraphExecutorShapes, StatesShareThePlans) {
  auto e = executorOf(mlp({ir::Dim::symbolic("N"), ir::Dim::known(4)}));
  auto a = e->newRunState(), b = e->newRunState();
  ir::OwnedTensor x = counting(DType::kFloat32, {6, 4});
  std::vector<ir::OwnedTensor> first = runOnce(*e, *a, {x});
  std::vector<ir::OwnedTensor> second = runOnce(*e, *b, {x});  // a plan made by the other state
  EXPECT_TRUE(equal(first[0], second[0]));
  EXPECT_EQ(e->shapePlansCached(), 1u);
  EXPECT_NE(a->shape_arena.data(), b->shape_arena.data());  // each state its own arena
}

// y = Relu(Reshape(x, s)): s is an input, so the Reshape's shape comes from data and it
// stays dynamic even at one signature; with s = Shape(z) it follows from the shapes.
TEST(GraphExecutorShapes, ShapesFromDataStayDynamic) {
  ir::Graph g;
  ir::ValueId x = g.addValue("x", TensorType{DType::kFloat32, true, {ir::Dim::symbolic("N")}});
  ir::ValueId s = g.addValue("s", TensorType::of(DType::kInt64, {2}));
  ir::ValueId t = g.addValue("t"), y = g.addValue("y");
  g.inputs = {x, s};
  g.addNode(node("Reshape", "reshape", {x, s}, {t}));
  g.addNode(node("Relu", "relu", {t}, {y}));
  g.outputs = {y};
  auto e = executorOf(std::move(g));
  auto state = e->newRunState();
  ir::OwnedTensor x6 = counting(DType::kFloat32, {6});
  ir::OwnedTensor s23(DType::kInt64, {2}), s32(DType::kInt64, {2});
  s23.as<int64_t>()[0] = 2, s23.as<int64_t>()[1] = 3;
  s32.as<int64_t>()[0] = 3, s32.as<int64_t>()[1] = 2;
  EXPECT_EQ(runOnce(*e, *state, {x6, s23})[0].shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(runOnce(*e, *state, {x6, s32})[0].shape(), (std::vector<int64_t>{3, 2}));  // same signature
  EXPECT_EQ(runOnce(*e, *state, {x6, s23})[0].shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(e->shapePlansCached(), 1u);
}

TEST(GraphExecutorShapes, ReshapeToAShapeOfTheInputsIsPlanned) {
  ir::Graph g;
  ir::ValueId x = g.addValue("x", TensorType{DType::kFloat32, true, {ir::Dim::symbolic("N"), ir::Dim::known(4)}});
  ir::ValueId z = g.addValue("z", TensorType{DType::kFloat32, true, {ir::Dim::symbolic("N"), ir::Dim::known(2),
                                                                      ir::Dim::known(2)}});
  ir::ValueId s = g.addValue("s"), t = g.addValue("t"), y = g.addValue("y");
  g.inputs = {x, z};
  g.addNode(node("Shape", "shape", {z}, {s}));
  g.addNode(node("Reshape", "reshape", {x, s}, {t}));
  g.addNode(node("Add", "add", {t, z}, {y}));
  g.outputs = {y};
  auto e = executorOf(std::move(g));
  auto state = e->newRunState();
  for (int64_t n : {2, 5, 2, 5}) {
    ir::OwnedTensor xs = counting(DType::kFloat32, {n, 4}), zs = counting(DType::kFloat32, {n, 2, 2}, 1.0f);
    std::vector<ir::OwnedTensor> out = runOnce(*e, *state, {xs, zs});
    ASSERT_EQ(out[0].shape(), (std::vector<int64_t>{n, 2, 2}));
    for (int64_t i = 0; i < out[0].numel(); ++i)
      EXPECT_FLOAT_EQ(out[0].as<float>()[i], xs.as<float>()[i] + zs.as<float>()[i]);
  }
  EXPECT_EQ(e->shapePlansCached(), 2u);
  // Planned: the signature's arena holds every value (x*4 + 2 planned values of n*4 floats).
  EXPECT_GE(state->shape_arena.size(), size_t(2 * 5 * 4 * sizeof(float)));
}

// The cache's bound is per function: functions that each keep a shape do not evict one
// another (a module split into more shape-polymorphic regions than the bound lowered
// every region again on every call); a function past its bound evicts its own least
// recently used entry.
TEST(ShapeCacheBound, IsPerFunction) {
  ShapeCache<int> cache(2);
  auto at = [](int64_t n) { return std::vector<ir::Tensor>{ir::Tensor{ir::DType::kFloat32, {n}, nullptr}}; };
  for (uint32_t fn = 0; fn < 5; ++fn) cache.insert(fn, at(3), std::make_shared<int>(int(fn)));
  EXPECT_EQ(cache.size(), 5u);
  EXPECT_EQ(cache.evictions(), 0u);
  for (uint32_t fn = 0; fn < 5; ++fn) {
    ASSERT_NE(cache.find(fn, at(3)), nullptr) << fn;
    EXPECT_EQ(*cache.find(fn, at(3)), int(fn));
  }
  cache.insert(0, at(4), std::make_shared<int>(40));
  cache.find(0, at(3));                               // shape 4 is now function 0's oldest
  cache.insert(0, at(5), std::make_shared<int>(50));  // evicts it
  EXPECT_EQ(cache.evictions(), 1u);
  EXPECT_EQ(cache.find(0, at(4)), nullptr);
  EXPECT_NE(cache.find(0, at(3)), nullptr);
  EXPECT_NE(cache.find(0, at(5)), nullptr);
  for (uint32_t fn = 1; fn < 5; ++fn) EXPECT_NE(cache.find(fn, at(3)), nullptr) << fn;
}

}  // namespace
}  // namespace partita::runtime
