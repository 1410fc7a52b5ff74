// The ewise backend: every op computes what the host computes, bit for bit; chains
// become one function; small constants are embedded and large ones borrowed (zero
// copy both ways); what it cannot stream stays on the host; blobs are checked.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "api/module_kinds.h"
#include "backend/backend_testing.h"
#include "backend/ewise/ewise_module.h"
#include "backend/ewise/ewise_program.h"
#include "kernels/op_util.h"
#include "partita/error.h"

namespace partita::ewise {
namespace {

using backend::testing::Compiled;
using backend::testing::GraphBuilder;
using backend::testing::randomFloats;

// Same bits, or both NaN.
::testing::AssertionResult identical(const ir::OwnedTensor& a, const ir::OwnedTensor& b) {
  if (a.shape() != b.shape()) return ::testing::AssertionFailure() << "shapes differ";
  for (int64_t i = 0; i < a.numel(); ++i) {
    const float x = a.as<float>()[i], y = b.as<float>()[i];
    if (std::isnan(x) && std::isnan(y)) continue;
    if (std::memcmp(&x, &y, sizeof x) != 0)
      return ::testing::AssertionFailure() << "element " << i << ": " << x << " vs host " << y;
  }
  return ::testing::AssertionSuccess();
}

// Runs `g` through ewise+host and through the host alone on the same inputs.
struct Both {
  Compiled ewise, host;
  std::vector<ir::OwnedTensor> got, want;
};
Both runBoth(const ir::Graph& g, uint64_t seed = 1, size_t min_region_size = 1) {
  Both b{backend::testing::compile(g, {"ewise", "host"}, min_region_size), backend::testing::compile(g, {"host"}),
         {}, {}};
  std::vector<ir::OwnedTensor> in = backend::testing::randomInputs(*b.ewise.graph, seed);
  b.got = b.ewise.run(in);
  b.want = b.host.run(in);
  return b;
}

size_t ewiseNodes(const Compiled& c) {
  size_t n = 0;
  for (const auto& r : c.parts.regions) n += r.backend == "ewise" ? r.ops.size() : 0;
  return n;
}

const EwiseModule& moduleOf(const Compiled& c) { return dynamic_cast<const EwiseModule&>(*c.modules.at(0)); }

std::map<ir::ConstId, runtime::ConstUseKind> usesOf(const Compiled& c) {
  std::map<ir::ConstId, runtime::ConstUseKind> m;
  for (const runtime::ConstUse& u : c.parts.modules.at(0).uses) m[u.id] = u.kind;
  return m;
}

ir::ConstId constIdOf(const Compiled& c, ir::ValueId v) { return c.graph->value(v).constant; }

struct OpCase {
  const char* op;
  ir::AttributeMap attrs;
};

std::vector<OpCase> unaryCases() {
  auto attrs = [](std::vector<std::pair<const char*, float>> kv) {
    ir::AttributeMap a;
    for (auto [k, v] : kv) a.setFloat(k, v);
    return a;
  };
  return {{"Relu", {}},
          {"LeakyRelu", attrs({{"alpha", 0.07f}})},
          {"ThresholdedRelu", attrs({{"alpha", 0.3f}})},
          {"Elu", attrs({{"alpha", 0.8f}})},
          {"Selu", {}},
          {"Celu", attrs({{"alpha", 1.5f}})},
          {"Sigmoid", {}},
          {"HardSigmoid", attrs({{"alpha", 0.3f}, {"beta", 0.4f}})},
          {"HardSwish", {}},
          {"Softplus", {}},
          {"Softsign", {}},
          {"Tanh", {}},
          {"Exp", {}},
          {"Log", {}},
          {"Sqrt", {}},
          {"Neg", {}},
          {"Abs", {}},
          {"Reciprocal", {}},
          {"Erf", {}},
          {"Floor", {}},
          {"Ceil", {}},
          {"Round", {}}};
}

TEST(EwiseBackend, EveryUnaryOpMatchesTheHostBitForBit) {
  for (const OpCase& c : unaryCases()) {
    GraphBuilder b;
    ir::ValueId x = b.input("x", {2, 3, 4, 5});
    // Scaled so that exp, log and friends see a wide range (negative inputs give NaN
    // for Log and Sqrt on both sides).
    ir::ValueId scaled = b.node("Mul", {x, b.constant("k", {}, {6.0f})});
    b.output(b.node(c.op, {scaled}, c.attrs));
    Both r = runBoth(b.g, 3);
    EXPECT_EQ(ewiseNodes(r.ewise), 2u) << c.op;
    EXPECT_TRUE(identical(r.got[0], r.want[0])) << c.op;
  }
}

TEST(EwiseBackend, EveryBinaryOpMatchesTheHostBitForBit) {
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min"}) {
    GraphBuilder b;
    ir::ValueId x = b.input("x", {2, 3, 4, 5});
    ir::ValueId y = b.input("y", {2, 3, 4, 5});
    ir::ValueId c = b.constant("c", {3, 1, 1}, randomFloats(3, 9));
    ir::ValueId s = b.constant("s", {}, {0.5f});
    // value op value, value op constant, constant op value (operand order matters).
    ir::ValueId t = b.node(op, {x, y});
    t = b.node(op, {t, c});
    t = b.node(op, {s, t});
    b.output(t);
    Both r = runBoth(b.g, 5);
    EXPECT_EQ(ewiseNodes(r.ewise), 3u) << op;
    EXPECT_EQ(r.ewise.parts.regions.size(), 1u) << op;
    EXPECT_TRUE(identical(r.got[0], r.want[0])) << op;
  }
}

TEST(EwiseBackend, ClipBoundsFromAttributesAndConstantInputs) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {4, 33});
  ir::AttributeMap old_style;
  old_style.setFloat("min", -0.5f);
  old_style.setFloat("max", 0.25f);
  ir::ValueId a = b.node("Clip", {x}, old_style, 6);
  ir::ValueId lo = b.constant("lo", {}, {-0.1f});
  ir::ValueId hi = b.constant("hi", {}, {0.2f});
  ir::ValueId c = b.node("Clip", {b.node("Mul", {a, x}), lo, hi});
  ir::ValueId d = b.node("Clip", {c, ir::kNoValue, hi});
  b.output(d);
  Both r = runBoth(b.g);
  EXPECT_EQ(ewiseNodes(r.ewise), 4u);
  EXPECT_TRUE(identical(r.got[0], r.want[0]));
  auto uses = usesOf(r.ewise);
  EXPECT_EQ(uses.at(constIdOf(r.ewise, lo)), runtime::ConstUseKind::kEmbed);
  EXPECT_EQ(uses.at(constIdOf(r.ewise, hi)), runtime::ConstUseKind::kEmbed);
}

// Constants of every broadcast pattern: one value, a row, a column, per channel,
// full size, per batch, and mixed.
TEST(EwiseBackend, ConstantsBroadcastLikeTheHost) {
  const std::vector<std::vector<int64_t>> shapes = {{},           {7},          {5, 1},       {3, 1, 1},
                                                    {2, 3, 5, 7}, {2, 1, 1, 1}, {3, 1, 7},    {1, 3, 5, 1},
                                                    {2, 1, 5, 1}, {1},          {1, 1, 1, 7}};
  for (const auto& shape : shapes) {
    GraphBuilder b;
    ir::ValueId x = b.input("x", {2, 3, 5, 7});
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    ir::ValueId c = b.constant("c", shape, randomFloats(size_t(n), 11));
    b.output(b.node("Relu", {b.node("Add", {b.node("Mul", {x, c}), c})}));
    Both r = runBoth(b.g);
    EXPECT_EQ(ewiseNodes(r.ewise), 3u) << ir::shapeStr(shape);
    EXPECT_TRUE(identical(r.got[0], r.want[0])) << ir::shapeStr(shape);
  }
}

// A chain with small and large constants, and a value used twice (x * sigmoid(x)):
// one region, one function; small constants embedded, the large one borrowed.
TEST(EwiseBackend, ChainIsOnePassSmallConstantsEmbeddedLargeBorrowed) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 8, 32, 32});
  ir::ValueId scale = b.constant("scale", {8, 1, 1}, randomFloats(8, 1));
  ir::ValueId bias = b.constant("bias", {8, 1, 1}, randomFloats(8, 2));
  ir::ValueId big = b.constant("big", {8, 32, 32}, randomFloats(8 * 32 * 32, 3));
  ir::ValueId t = b.node("Add", {b.node("Mul", {x, scale}), bias});
  t = b.node("Mul", {t, b.node("Sigmoid", {t})});
  t = b.node("Add", {t, big});
  ir::ValueId out = b.node("Clip", {t, b.constant("zero", {}, {0.0f}), b.constant("six", {}, {6.0f})});
  b.output(out);
  b.output(t);  // an intermediate that is also an output
  Both r = runBoth(b.g);
  ASSERT_EQ(r.ewise.parts.regions.size(), 1u);
  EXPECT_EQ(r.ewise.parts.regions[0].ops.size(), 6u);
  EXPECT_EQ(moduleOf(r.ewise).numFunctions(), 1u);
  EXPECT_TRUE(identical(r.got[0], r.want[0]));
  EXPECT_TRUE(identical(r.got[1], r.want[1]));
  auto uses = usesOf(r.ewise);
  EXPECT_EQ(uses.at(constIdOf(r.ewise, scale)), runtime::ConstUseKind::kEmbed);
  EXPECT_EQ(uses.at(constIdOf(r.ewise, bias)), runtime::ConstUseKind::kEmbed);
  EXPECT_EQ(uses.at(constIdOf(r.ewise, big)), runtime::ConstUseKind::kBorrow);

  // Zero copy: embedded constants point into the module blob, borrowed ones are the
  // store's own bytes.
  const backend::ModuleImage& image = r.ewise.parts.modules[0];
  size_t embedded = 0, borrowed = 0;
  for (auto [id, ptr] : moduleOf(r.ewise).constantPointers(0)) {
    if (uses.at(id) == runtime::ConstUseKind::kBorrow) {
      EXPECT_EQ(static_cast<const void*>(ptr), r.ewise.store->get(id).data);
      ++borrowed;
    } else {
      ++embedded;
    }
  }
  EXPECT_EQ(borrowed, 1u);
  EXPECT_EQ(embedded, 2u);
  EXPECT_GT(image.blob.size(), 2 * 8 * sizeof(float));
}

// Large enough to be split across threads.
TEST(EwiseBackend, ThreadedRunsMatchTheHost) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {2, 16, 96, 96});
  ir::ValueId c = b.constant("c", {16, 1, 1}, randomFloats(16, 4));
  b.output(b.node("Tanh", {b.node("Sub", {b.node("Exp", {x}), c})}));
  Both r = runBoth(b.g);
  EXPECT_EQ(ewiseNodes(r.ewise), 3u);
  EXPECT_TRUE(identical(r.got[0], r.want[0]));
}

TEST(EwiseBackend, LeavesWhatItCannotStreamToTheHost) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {3, 4});
  ir::ValueId row = b.input("row", {4});
  ir::ValueId ints = b.constantInts("ints", {2}, {3, 4});
  ir::ValueId bcast = b.node("Add", {x, row});  // two values of different shapes
  ir::ValueId three = b.node("Max", {x, x, x});  // variadic form
  ir::ValueId dyn_clip = b.node("Clip", {x, b.node("ReduceMin", {x})});  // bound known only at run time
  ir::ValueId reshaped = b.node("Reshape", {x, ints});
  b.output(bcast);
  b.output(three);
  b.output(dyn_clip);
  b.output(reshaped);
  Both r = runBoth(b.g);
  EXPECT_EQ(ewiseNodes(r.ewise), 0u);
  for (size_t i = 0; i < r.got.size(); ++i) EXPECT_TRUE(identical(r.got[i], r.want[i])) << i;
}

// Many small regions of one backend become functions of one module.
TEST(EwiseBackend, RegionsBetweenHostNodesAreFunctionsOfOneModule) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 4, 8, 8});
  ir::AttributeMap pool;
  pool.setInts("kernel_shape", {2, 2});
  ir::ValueId t = b.node("Relu", {b.node("Mul", {x, b.constant("a", {4, 1, 1}, randomFloats(4, 1))})});
  t = b.node("MaxPool", {t}, pool);
  t = b.node("Sigmoid", {b.node("Add", {t, b.constant("c", {4, 1, 1}, randomFloats(4, 2))})});
  b.output(t);
  Both r = runBoth(b.g);
  EXPECT_EQ(r.ewise.parts.modules.size(), 1u);
  EXPECT_EQ(r.ewise.parts.regions.size(), 2u);
  EXPECT_EQ(moduleOf(r.ewise).numFunctions(), 2u);
  EXPECT_TRUE(identical(r.got[0], r.want[0]));
  // min_region_size 3 sends both two-node regions home.
  Both small = runBoth(b.g, 1, 3);
  EXPECT_EQ(ewiseNodes(small.ewise), 0u);
}

Compiled chain() {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {4, 8, 16, 16});
  ir::ValueId t = b.node("Mul", {x, b.constant("s", {8, 1, 1}, randomFloats(8, 1))});
  t = b.node("Add", {t, b.constant("big", {4, 8, 16, 16}, randomFloats(4 * 8 * 256, 2))});
  b.output(b.node("HardSigmoid", {t}));
  return backend::testing::compile(b.g, {"ewise", "host"});
}

std::string loadError(const Compiled& c, std::vector<std::byte> blob, std::vector<runtime::ConstUse> uses) {
  runtime::ModuleLoadContext ctx{Bytes::fromVector(std::move(blob)), c.store.get(), std::move(uses), 2, {}};
  try {
    api::builtinModuleKinds().load(kModuleKind, ctx);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArtifact) << e.what();
    return e.what();
  }
  return {};
}

TEST(EwiseProgram, BlobRoundTripIsByteIdentical) {
  Compiled c = chain();
  const std::vector<std::byte>& blob = c.parts.modules.at(0).blob;
  Program p = readProgram(blob.data(), blob.size());
  p.data.assign(blob.begin() + std::ptrdiff_t(p.data_offset), blob.end());
  EXPECT_EQ(writeProgram(p), blob);
}

TEST(EwiseModule, TruncatedOrCorruptedBlobsNeverCrashLoad) {
  Compiled c = chain();
  const backend::ModuleImage& image = c.parts.modules.at(0);
  for (size_t n = 0; n < image.blob.size(); ++n) {
    std::vector<std::byte> cut(image.blob.begin(), image.blob.begin() + std::ptrdiff_t(n));
    EXPECT_FALSE(loadError(c, cut, image.uses).empty()) << "truncated to " << n;
  }
  EXPECT_NE(loadError(c, std::vector<std::byte>(64, std::byte{0}), image.uses).find("magic"), std::string::npos);
  // Every byte flipped in turn: load either fails with an error or gives a module
  // that was checked (e.g. a flipped float parameter).
  size_t rejected = 0;
  for (size_t i = 0; i < image.blob.size(); ++i) {
    std::vector<std::byte> bad = image.blob;
    bad[i] ^= std::byte{0xff};
    rejected += !loadError(c, bad, image.uses).empty();
  }
  EXPECT_GT(rejected, image.blob.size() / 4);
}

TEST(EwiseModule, RejectsUndeclaredConstantsAndBadCalls) {
  Compiled c = chain();
  const backend::ModuleImage& image = c.parts.modules.at(0);
  std::vector<runtime::ConstUse> uses = image.uses;
  for (runtime::ConstUse& u : uses) u.kind = runtime::ConstUseKind::kEmbed;  // "big" is really borrowed
  EXPECT_NE(loadError(c, image.blob, uses).find("not declared as borrowed"), std::string::npos);
  uses = image.uses;
  uses.pop_back();
  EXPECT_NE(loadError(c, image.blob, uses).find("not declared"), std::string::npos);

  ir::OwnedTensor wrong(ir::DType::kFloat32, {4, 8, 16, 15}), out(ir::DType::kFloat32, {4, 8, 16, 16});
  try {
    moduleOf(c).run(0, {wrong.view()}, {out.view()});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("input 0"), std::string::npos) << e.what();
  }
  EXPECT_THROW(moduleOf(c).run(1, {out.view()}, {out.view()}), Error);
}

}  // namespace
}  // namespace partita::ewise
