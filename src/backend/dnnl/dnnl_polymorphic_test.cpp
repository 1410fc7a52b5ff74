// Shape-polymorphic dnnl regions (docs/dynamic_shapes.md): a small CNN whose input has
// a symbolic batch, height and width runs on oneDNN at any size, giving what the same
// graph compiled for that fixed size gives; the module's instance cache is bounded;
// wrong inputs are clear errors.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>

#include "backend/dnnl/dnnl_module.h"
#include "backend/dnnl/dnnl_program.h"
#include "backend/dnnl/dnnl_testing.h"
#include "partita/error.h"

// Counts the C++ allocations made while `g_counting` is set (one test below checks
// that a call at a cached shape makes none of its own). The replacements pair malloc
// with free, which GCC cannot see through inlining.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
namespace {
std::atomic<bool> g_counting{false};
std::atomic<size_t> g_allocations{0};
}  // namespace

void* operator new(std::size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
// The nothrow form too (std::stable_sort's temporary buffer): otherwise the library's
// own, which ASan tracks apart from malloc, would be freed by the delete below.
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace partita::dnnl_backend {
namespace {

using testing::GraphBuilder;
using testing::randomFloats;
using testing::randomTensor;
using testing::blobVersion;
using testing::readAsVersion;
using testing::relativeError;

ir::AttributeMap ints(const std::string& name, std::vector<int64_t> v) {
  ir::AttributeMap a;
  a.setInts(name, std::move(v));
  return a;
}

// Conv+BatchNormalization+Relu, a residual Add, MaxPool, a 1x1 Conv whose output is
// concatenated with 2*Sigmoid of itself, GlobalAveragePool, Flatten, Gemm, Softmax.
// `dims`: the input's [N, 3, H, W], fixed or symbolic.
ir::Graph convNet(std::vector<ir::Dim> dims) {
  GraphBuilder b;
  auto weights = [&](const std::string& name, std::vector<int64_t> shape, uint64_t seed, float lo = -0.5f,
                     float hi = 0.5f) {
    return b.constant(name, shape, randomFloats(size_t(ir::shapeNumel(shape)), seed, lo, hi));
  };
  ir::ValueId x = b.symbolicInput("x", std::move(dims));
  ir::AttributeMap pad1 = ints("pads", {1, 1, 1, 1});
  ir::ValueId c1 = b.node("Conv", {x, weights("w1", {8, 3, 3, 3}, 1), weights("b1", {8}, 2)}, pad1, 17, "c1");
  ir::ValueId bn = b.node("BatchNormalization",
                          {c1, weights("gamma", {8}, 3, 0.5f, 1.5f), weights("beta", {8}, 4),
                           weights("mean", {8}, 5), weights("var", {8}, 6, 0.5f, 1.5f)},
                          {}, 15, "bn");
  ir::ValueId r1 = b.node("Relu", {bn}, {}, 17, "r1");
  ir::ValueId c2 = b.node("Conv", {r1, weights("w2", {8, 8, 3, 3}, 7), weights("b2", {8}, 8)}, pad1, 17, "c2");
  ir::ValueId sum = b.node("Add", {c2, r1}, {}, 17, "residual");
  ir::ValueId r2 = b.node("Relu", {sum}, {}, 17, "r2");
  ir::AttributeMap pool = ints("kernel_shape", {2, 2});
  pool.setInts("strides", {2, 2});
  ir::ValueId p = b.node("MaxPool", {r2}, pool, 12, "pool");
  ir::ValueId c3 = b.node("Conv", {p, weights("w3", {4, 8, 1, 1}, 9)}, {}, 17, "c3");
  ir::ValueId sig = b.node("Sigmoid", {c3}, {}, 17, "sig");
  ir::ValueId two = b.node("Mul", {sig, b.constant("two", {}, {2.0f})}, {}, 17, "twice");
  ir::AttributeMap axis1;
  axis1.setInt("axis", 1);
  ir::ValueId cat = b.node("Concat", {c3, two}, axis1, 13, "cat");
  ir::ValueId gap = b.node("GlobalAveragePool", {cat}, {}, 1, "gap");
  ir::ValueId flat = b.node("Flatten", {gap}, axis1, 13, "flat");
  ir::AttributeMap trans;
  trans.setInt("transB", 1);
  ir::ValueId fc = b.node("Gemm", {flat, weights("wg", {5, 8}, 10), weights("bg", {5}, 11)}, trans, 13, "fc");
  b.output(b.node("Softmax", {fc}, axis1, 13, "softmax"));
  return std::move(b.g);
}

std::vector<ir::Dim> symbolic() {
  return {ir::Dim::symbolic("N"), ir::Dim::known(3), ir::Dim::symbolic("H"), ir::Dim::symbolic("W")};
}

std::vector<ir::Dim> fixed(const std::vector<int64_t>& shape) {
  std::vector<ir::Dim> dims;
  for (int64_t d : shape) dims.push_back(ir::Dim::known(d));
  return dims;
}

const DnnlModule& dnnlModule(const testing::Compiled& c) {
  const auto* m = dynamic_cast<const DnnlModule*>(c.modules.at(0).get());
  if (!m) throw Error(ErrorCode::kInternal, "module 0 is not a dnnl module");
  return *m;
}

// What the graph gives at `shape` when compiled for that shape with `backends`.
ir::OwnedTensor fixedResult(const std::vector<int64_t>& shape, const ir::OwnedTensor& x,
                            const std::vector<std::string>& backends) {
  testing::Compiled c = testing::compile(convNet(fixed(shape)), backends);
  return std::move(c.run({x})[0]);
}

const std::vector<std::vector<int64_t>> kShapes = {{1, 3, 32, 40}, {3, 3, 17, 23}, {2, 3, 64, 48}};

TEST(DnnlPolymorphic, SymbolicDimsRunOnOneDnnlRegion) {
  testing::Compiled c = testing::compile(convNet(symbolic()), {"dnnl", "host"});
  ASSERT_EQ(c.parts.regions.size(), 1u);
  EXPECT_EQ(c.parts.regions[0].backend, "dnnl");
  EXPECT_EQ(c.parts.regions[0].ops.size(), 15u);  // every node
  // Compiled first for the default representative shape: batch 1, sides 224.
  EXPECT_EQ(c.parts.regions[0].representative, std::vector<std::string>{"1x3x224x224"});
  const DnnlModule& m = dnnlModule(c);
  EXPECT_TRUE(m.shapePolymorphic(0));
  EXPECT_EQ(m.representativeShapes(0), (std::vector<std::vector<int64_t>>{{1, 3, 224, 224}}));
  // The Call node carries the representative shape for `partita inspect`.
  const ir::Node& call = c.graph->nodes.at(0);
  ASSERT_NE(call.attrs.find("representative"), nullptr);
  EXPECT_EQ(call.attrs.find("representative")->strings, std::vector<std::string>{"1x3x224x224"});
}

TEST(DnnlPolymorphic, EqualsTheFixedShapeCompileAtEveryShape) {
  testing::Compiled c = testing::compile(convNet(symbolic()), {"dnnl", "host"});
  uint64_t seed = 100;
  for (const std::vector<int64_t>& shape : kShapes) {
    SCOPED_TRACE(ir::shapeStr(shape));
    ir::OwnedTensor x = randomTensor(shape, seed++);
    ir::OwnedTensor got = c.run({x})[0];
    EXPECT_EQ(got.shape(), (std::vector<int64_t>{shape[0], 5}));
    EXPECT_LE(relativeError(got, fixedResult(shape, x, {"dnnl", "host"})), 1e-5);
    EXPECT_LE(relativeError(got, fixedResult(shape, x, {"host"})), 1e-4);
  }
  // Each new shape was lowered once, the representative one never.
  EXPECT_EQ(dnnlModule(c).instancesCreated(), kShapes.size());
  // The same shapes again: from the cache, and still right.
  seed = 100;
  for (const std::vector<int64_t>& shape : kShapes) {
    ir::OwnedTensor x = randomTensor(shape, seed++);
    EXPECT_LE(relativeError(c.run({x})[0], fixedResult(shape, x, {"dnnl", "host"})), 1e-5);
  }
  EXPECT_EQ(dnnlModule(c).instancesCreated(), kShapes.size());
  EXPECT_EQ(c.executor->shapePlansCached(), kShapes.size());
}

TEST(DnnlPolymorphic, TheRepresentativeShapeUsesTheStoredSteps) {
  testing::Compiled c = testing::compile(convNet(symbolic()), {"dnnl", "host"});
  ir::OwnedTensor x = randomTensor({1, 3, 224, 224}, 7);
  EXPECT_LE(relativeError(c.run({x})[0], fixedResult({1, 3, 224, 224}, x, {"dnnl", "host"})), 1e-5);
  EXPECT_EQ(dnnlModule(c).instancesCreated(), 0u);
}

TEST(DnnlPolymorphic, InstanceCacheEvictsAtItsBoundAndStaysRight) {
  testing::Compiled c = testing::compile(convNet(symbolic()), {"dnnl", "host"}, 1, /*shape_cache=*/2);
  const DnnlModule& m = dnnlModule(c);
  std::vector<ir::OwnedTensor> inputs, want;
  for (size_t i = 0; i < kShapes.size(); ++i) {
    inputs.push_back(randomTensor(kShapes[i], 200 + i));
    want.push_back(fixedResult(kShapes[i], inputs.back(), {"dnnl", "host"}));
  }
  // Three shapes through a cache of two, twice round: every call misses.
  for (int round = 0; round < 2; ++round)
    for (size_t i = 0; i < kShapes.size(); ++i) {
      SCOPED_TRACE("round " + std::to_string(round) + " shape " + ir::shapeStr(kShapes[i]));
      EXPECT_LE(relativeError(c.run({inputs[i]})[0], want[i]), 1e-5);
      EXPECT_LE(m.instancesCached(), 2u);
    }
  EXPECT_EQ(m.instancesCreated(), 6u);
  EXPECT_EQ(m.instanceEvictions(), 4u);
  EXPECT_LE(c.executor->shapePlansCached(), 2u);
  EXPECT_EQ(c.executor->shapePlanEvictions(), 4u);
  // The last two shapes are cached: no new instance.
  EXPECT_LE(relativeError(c.run({inputs[2]})[0], want[2]), 1e-5);
  EXPECT_LE(relativeError(c.run({inputs[1]})[0], want[1]), 1e-5);
  EXPECT_EQ(m.instancesCreated(), 6u);
}

TEST(DnnlPolymorphic, ACallAtACachedShapeAllocatesNothingOfItsOwn) {
  // The module's call as the executor makes it, at a shape it has cached, against the
  // same call into a module compiled for that fixed shape: oneDNN allocates inside
  // each primitive's execution (its argument map) in both; the cached instance must
  // add nothing to that (no lowering, no primitive, no workspace, no lookup cost).
  const std::vector<int64_t> shape = {2, 3, 33, 29};
  testing::Compiled c = testing::compile(convNet(symbolic()), {"dnnl", "host"});
  testing::Compiled f = testing::compile(convNet(fixed(shape)), {"dnnl", "host"});
  const DnnlModule& m = dnnlModule(c);
  const DnnlModule& mf = dnnlModule(f);
  ir::OwnedTensor x = randomTensor(shape, 11);
  std::vector<ir::Tensor> in = {x.view()};
  ir::OwnedTensor y(ir::DType::kFloat32, m.outputShapes(0, in)[0]);
  std::vector<ir::Tensor> out = {y.view()};
  m.run(0, in, out);  // the first call makes the instance's workspace
  mf.run(0, in, out);
  auto allocations = [&](const DnnlModule& module) {
    g_allocations = 0;
    g_counting = true;
    module.run(0, in, out);
    g_counting = false;
    return g_allocations.load();
  };
  const size_t fixed_module = allocations(mf);
  const size_t cached = allocations(m);
  ASSERT_EQ(m.steps(0).size(), mf.steps(0).size());
  EXPECT_EQ(cached, fixed_module);
  EXPECT_EQ(allocations(m), cached);  // steady
  EXPECT_EQ(m.instancesCreated(), 1u);
  RecordProperty("allocations_per_call", int(cached));
}

TEST(DnnlPolymorphic, WrongInputsAreClearErrors) {
  testing::Compiled c = testing::compile(convNet(symbolic()), {"dnnl", "host"});
  auto message = [&](const ir::OwnedTensor& x) -> std::string {
    try {
      c.run({x});
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
      return e.what();
    }
    return "no error";
  };
  // Another rank, another dtype, another fixed dim.
  EXPECT_NE(message(randomTensor({1, 3, 32}, 1)).find("input 'x' must have shape float32[N,3,H,W]"),
            std::string::npos);
  ir::OwnedTensor ints(ir::DType::kInt32, {1, 3, 8, 8});
  EXPECT_NE(message(ints).find("input 'x' must be float32[N,3,H,W] but got int32[1,3,8,8]"), std::string::npos);
  EXPECT_NE(message(randomTensor({1, 4, 8, 8}, 2)).find("must have shape"), std::string::npos);
  // Too small for the pooling window: the node says so.
  std::string small = message(randomTensor({1, 3, 1, 1}, 3));
  EXPECT_NE(small.find("pool"), std::string::npos) << small;
  // And the model still runs after them.
  ir::OwnedTensor x = randomTensor({2, 3, 16, 16}, 4);
  EXPECT_LE(relativeError(c.run({x})[0], fixedResult({2, 3, 16, 16}, x, {"dnnl", "host"})), 1e-5);
}

TEST(DnnlPolymorphic, AHintSetsTheRepresentativeShape) {
  ir::Graph g = convNet(symbolic());
  testing::Compiled c;
  c.graph = std::make_shared<ir::Graph>(std::move(g));
  passes::FoldOptions fold;
  fold.max_growth_bytes = 0;
  passes::inferShapes(*c.graph, fold);
  backend::PartitionOptions o;
  o.backends = {"dnnl", "host"};
  o.shape_hints["x"] = {4, 3, 48, 64};
  c.parts = backend::partitionGraph(*c.graph, o);
  ASSERT_EQ(c.parts.regions.size(), 1u);
  EXPECT_EQ(c.parts.regions[0].representative, std::vector<std::string>{"4x3x48x64"});
  // A hint that contradicts the input's fixed channels is refused.
  ir::Graph g2 = convNet(symbolic());
  passes::inferShapes(g2, fold);
  o.shape_hints["x"] = {4, 5, 48, 64};
  try {
    backend::partitionGraph(g2, o);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("--shape-hint x dim 1 is 5"), std::string::npos) << e.what();
  }
}

// Channels may be symbolic: the statistics fix them. At the default representative
// shape (224 channels) the node does not infer, so it stays on the host; with a hint
// that fits it goes to oneDNN.
TEST(DnnlPolymorphic, SymbolicChannelsNeedARepresentativeShapeThatFits) {
  GraphBuilder b;
  ir::ValueId x = b.symbolicInput("x", {ir::Dim::symbolic("N"), ir::Dim::symbolic("C"), ir::Dim::known(8), ir::Dim::known(8)});
  b.output(b.node("Relu", {b.node("BatchNormalization",
                                  {x, b.constant("g", {4}, {1, 1, 1, 1}), b.constant("b", {4}, {0, 0, 0, 0}),
                                   b.constant("m", {4}, {0, 0, 0, 0}), b.constant("v", {4}, {1, 1, 1, 1})},
                                  {}, 15)}));
  ir::Graph g = b.g;
  testing::Compiled c = testing::compile(std::move(b.g), {"dnnl", "host"});
  for (const auto& r : c.parts.regions)
    for (const std::string& op : r.ops) EXPECT_NE(op, "BatchNormalization");
  // With a hint of 4 channels.
  passes::FoldOptions fold;
  fold.max_growth_bytes = 0;
  passes::inferShapes(g, fold);
  backend::PartitionOptions o;
  o.backends = {"dnnl", "host"};
  o.shape_hints["x"] = {2, 4, 8, 8};
  backend::PartitionResult parts = backend::partitionGraph(g, o);
  ASSERT_EQ(parts.regions.size(), 1u);
  EXPECT_EQ(parts.regions[0].ops, (std::vector<std::string>{"BatchNormalization", "Relu"}));
}

TEST(DnnlPolymorphic, ABlobWithAShapePolymorphicFunctionRoundTrips) {
  testing::Compiled c = testing::compile(convNet(symbolic()), {"dnnl", "host"});
  const std::vector<std::byte>& blob = c.parts.modules.at(0).blob;
  Program p = readProgram(blob.data(), blob.size());
  ASSERT_EQ(p.functions.size(), 1u);
  ASSERT_TRUE(p.functions[0].poly);
  const PolyFunction& poly = *p.functions[0].poly;
  EXPECT_EQ(poly.graph.nodes.size(), 15u);
  EXPECT_EQ(poly.representative, (std::vector<std::vector<int64_t>>{{1, 3, 224, 224}}));
  EXPECT_EQ(poly.graph.typeOf(poly.graph.inputs[0]).str(), "float32[N,3,H,W]");
  EXPECT_EQ(poly.weights.size(), 4u);  // three Conv and the Gemm
  // Written again with the same embedded data: the same bytes.
  p.embedded.assign(blob.begin() + std::ptrdiff_t(p.embedded_offset), blob.end());
  EXPECT_EQ(writeProgram(p), blob);
  // A truncated blob is refused, not misread.
  for (size_t cut : {size_t(100), p.embedded_offset / 2, p.embedded_offset - 1}) {
    try {
      readProgram(blob.data(), cut);
      ADD_FAILURE() << "a blob cut at " << cut << " was read";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArtifact) << e.what();
    }
  }
}

// Sessions on two threads, each going through shapes the other makes instances of.
TEST(DnnlModule, ConcurrentRunsOfAShapePolymorphicFunction) {
  testing::Compiled c = testing::compile(convNet(symbolic()), {"dnnl", "host"}, 1, /*shape_cache=*/2);
  std::vector<ir::OwnedTensor> inputs, want;
  for (size_t i = 0; i < kShapes.size(); ++i) {
    inputs.push_back(randomTensor(kShapes[i], 300 + i));
    want.push_back(fixedResult(kShapes[i], inputs.back(), {"dnnl", "host"}));
  }
  std::atomic<int> wrong{0};
  auto worker = [&](size_t offset) {
    auto state = c.executor->newRunState();
    for (size_t k = 0; k < 6; ++k) {
      const size_t i = (k + offset) % kShapes.size();
      std::vector<ir::Tensor> in = {inputs[i].view()};
      if (relativeError(c.executor->run(*state, in)[0], want[i]) > 1e-5) ++wrong;
    }
  };
  std::thread a(worker, 0), b(worker, 1);
  a.join();
  b.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_LE(dnnlModule(c).instancesCached(), 2u);
}

// A shape-polymorphic blob with bytes changed is refused with an Error or, when what
// it says still holds together, loads and runs: never a crash.
TEST(DnnlPolymorphic, ChangedBytesInTheRegionGraphAreRefusedOrRun) {
  testing::Compiled c = testing::compile(convNet(symbolic()), {"dnnl", "host"});
  const backend::ModuleImage& image = c.parts.modules.at(0);
  Program p = readProgram(image.blob.data(), image.blob.size());
  // The region graph and records lie between the last step and the embedded data: 64
  // positions spread over the 4000 bytes before it.
  const size_t end = p.embedded_offset, begin = end > 4000 ? end - 4000 : 0;
  size_t refused = 0, loaded = 0;
  for (size_t at = begin; at < end; at += (end - begin) / 64 + 1) {
    std::vector<std::byte> blob = image.blob;
    blob[at] = std::byte(uint8_t(blob[at]) ^ 0x5a);
    runtime::ModuleLoadContext ctx{Bytes::fromVector(std::move(blob)), c.store.get(), image.uses, 2,
                                   image.assumptions, 2};
    try {
      std::shared_ptr<DnnlModule> m = DnnlModule::load(ctx);
      ++loaded;
      ir::OwnedTensor x = randomTensor({1, 3, 20, 24}, 5);
      std::vector<ir::Tensor> in = {x.view()};
      std::vector<std::vector<int64_t>> shapes = m->outputShapes(0, in);
      if (shapes.size() != 1) continue;
      ir::OwnedTensor y(ir::DType::kFloat32, shapes[0]);
      m->run(0, in, {y.view()});
    } catch (const Error&) {
      ++refused;
    }
  }
  EXPECT_GT(refused, 0u);
  RecordProperty("loaded", int(loaded));
}


// A data node of an op that shape computations are also made of (here a Slice) whose
// output would be empty at a run-time shape is refused by name, as any other node.
TEST(DnnlPolymorphic, AnEmptyDataSliceAtARunShapeIsAClearError) {
  GraphBuilder b;
  ir::ValueId x = b.symbolicInput("x", {ir::Dim::symbolic("N"), ir::Dim::symbolic("T"), ir::Dim::known(8)});
  ir::ValueId sl = b.node("Slice", {b.node("Relu", {x}, {}, 14, "r1"), b.constantInts("s", {1}, {5}),
                                    b.constantInts("e", {1}, {1000}), b.constantInts("a", {1}, {1})},
                          {}, 13, "tail");
  b.output(b.node("Relu", {sl}, {}, 14, "r2"));
  testing::Compiled c = testing::compile(std::move(b.g), {"dnnl", "host"});
  ASSERT_EQ(c.parts.regions.size(), 1u);
  EXPECT_EQ(c.run({randomTensor({1, 9, 8}, 3)})[0].shape(), (std::vector<int64_t>{1, 4, 8}));
  try {
    c.run({randomTensor({1, 3, 8}, 4)});
    ADD_FAILURE() << "an empty Slice ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Slice node 'tail' (making"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("would be empty"), std::string::npos) << e.what();
  }
}

// Self-attention as torch.nn.MultiheadAttention exports it with a symbolic batch and
// sequence length (embedding 16, 2 heads): the heads' Reshape targets are computed
// from Shape of the [seq, batch, 16] input at run time, the last one (back to [seq,
// batch, 16] from [seq*batch, 16]) from dims its input does not have, one of them read
// from the graph input; the scores and the context are MatMuls of two computed operands.
ir::Graph attention() {
  GraphBuilder b;
  ir::ValueId x = b.symbolicInput("x", {ir::Dim::symbolic("batch"), ir::Dim::symbolic("seq"), ir::Dim::known(16)});
  auto scalar = [&](const std::string& name, int64_t v) { return b.constantInts(name, {}, {v}); };
  auto axes0 = b.constantInts("axes0", {1}, {0});
  ir::ValueId xt = b.node("Transpose", {x}, ints("perm", {1, 0, 2}), 13, "xt");
  // seq and batch, each read once and shared by every target below
  ir::ValueId seq = b.node("Gather", {b.node("Shape", {xt}, {}, 15, "shape0"), scalar("i0", 0)}, {}, 13, "seq");
  ir::ValueId batch = b.node("Gather", {b.node("Shape", {xt}, {}, 15, "shape1"), scalar("i1", 1)}, {}, 13, "batch");
  ir::ValueId heads = b.node("Mul", {batch, scalar("h", 2)}, {}, 14, "batch_heads");
  auto unsq = [&](ir::ValueId v, const std::string& name) { return b.node("Unsqueeze", {v, axes0}, {}, 13, name); };
  ir::AttributeMap axis0 = ints("axes", {0});
  ir::AttributeMap cat0;
  cat0.setInt("axis", 0);
  ir::ValueId heads_target = b.node(
      "Concat", {unsq(seq, "u0"), unsq(heads, "u1"), b.constantInts("hd", {1}, {8})}, cat0, 13, "heads_target");
  ir::ValueId proj = b.node("MatMul", {xt, b.constant("w_in", {16, 48}, randomFloats(16 * 48, 21, -0.3f, 0.3f))},
                            {}, 13, "in_proj");
  auto part = [&](int64_t k, const std::string& name) {
    ir::ValueId sl = b.node("Slice", {proj, b.constantInts(name + "_s", {1}, {16 * k}),
                                       b.constantInts(name + "_e", {1}, {16 * k + 16}), b.constantInts(name + "_a", {1}, {2})},
                            {}, 13, name + "_slice");
    return b.node("Transpose", {b.node("Reshape", {sl, heads_target}, {}, 14, name + "_heads")},
                  ints("perm", {1, 0, 2}), 13, name);
  };
  ir::ValueId q = part(0, "q"), k = part(1, "k"), v = part(2, "v");
  ir::ValueId kt = b.node("Transpose", {k}, ints("perm", {0, 2, 1}), 13, "kt");
  ir::ValueId scores = b.node("MatMul", {q, kt}, {}, 13, "scores");
  ir::AttributeMap last;
  last.setInt("axis", -1);
  ir::ValueId p = b.node("Softmax", {scores}, last, 13, "softmax");
  ir::ValueId ctx = b.node("Transpose", {b.node("MatMul", {p, v}, {}, 13, "context")}, ints("perm", {1, 0, 2}), 13,
                           "ctx_t");
  ir::ValueId rows = b.node("Mul", {seq, batch}, {}, 14, "rows");
  ir::ValueId flat = b.node("Reshape", {ctx, b.node("Concat", {unsq(rows, "u2"), b.constantInts("e", {1}, {16})}, cat0,
                                                    13, "flat_target")},
                            {}, 14, "flat");
  ir::ValueId out = b.node("MatMul", {flat, b.constant("w_out", {16, 16}, randomFloats(256, 22, -0.3f, 0.3f))}, {},
                           13, "out_proj");
  // The batch read from the graph input (a region input whose shape only is read).
  ir::ValueId x_batch = b.node("Gather", {b.node("Shape", {x}, {}, 15, "shape_x"), scalar("i2", 0)}, {}, 13, "x_batch");
  ir::ValueId back_target =
      b.node("Concat", {unsq(seq, "u3"), unsq(x_batch, "u4"), b.constantInts("e2", {1}, {16})}, cat0, 13, "back_target");
  ir::ValueId back = b.node("Reshape", {out, back_target}, {}, 14, "back");
  b.output(b.node("Add", {x, b.node("Transpose", {back}, ints("perm", {1, 0, 2}), 13, "bt")}, {}, 14, "residual"));
  return std::move(b.g);
}

TEST(DnnlPolymorphic, AttentionWithShapeComputationsIsOneRegion) {
  testing::Compiled c = testing::compile(attention(), {"dnnl", "host"});
  ASSERT_EQ(c.parts.regions.size(), 1u);
  EXPECT_EQ(c.parts.regions[0].backend, "dnnl");
  // Every node, the Shape -> Gather -> Unsqueeze -> Concat targets (copied per Reshape
  // that reads them) included: nothing left on the host.
  ASSERT_EQ(c.graph->nodes.size(), 1u);
  size_t shapes = 0;
  for (const std::string& op : c.parts.regions[0].ops) shapes += op == "Shape";
  EXPECT_EQ(shapes, 2u * 5u);  // two Shape nodes for each of the five Reshapes
  testing::Compiled host = testing::compile(attention(), {"host"});
  uint64_t seed = 300;
  for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{{1, 5, 16}, {3, 7, 16}, {2, 1, 16}}) {
    SCOPED_TRACE(ir::shapeStr(shape));
    ir::OwnedTensor x = randomTensor(shape, seed++);
    ir::OwnedTensor got = c.run({x})[0];
    EXPECT_EQ(got.shape(), shape);
    EXPECT_LE(relativeError(got, host.run({x})[0]), 1e-5);
  }
  // The representative shape (1x224x16), then three others.
  EXPECT_EQ(dnnlModule(c).instancesCreated(), 3u);
  // The region graph computes shapes: a version 4 blob. Marked as version 3, it is
  // refused by name.
  const std::vector<std::byte>& blob = c.parts.modules.at(0).blob;
  EXPECT_EQ(blobVersion(blob), 4u);
  const std::string error = readAsVersion(blob, 3);
  EXPECT_NE(error.find("computes shapes"), std::string::npos) << error;
}

}  // namespace
}  // namespace partita::dnnl_backend
