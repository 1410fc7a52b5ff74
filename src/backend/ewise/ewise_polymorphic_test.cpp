// Shape-polymorphic ewise functions: a chain over a tensor with symbolic dims runs at
// any size, bit for bit what the host computes; two run-time operands must be sure to
// have one shape.
#include <gtest/gtest.h>

#include <cstring>

#include "backend/backend_testing.h"
#include "backend/ewise/ewise_module.h"
#include "backend/ewise/ewise_program.h"
#include "partita/error.h"

namespace partita::ewise {
namespace {

using backend::testing::GraphBuilder;
using backend::testing::randomTensor;

// Sigmoid(Relu(x) * scale + bias) + Tanh(x), scale and bias per channel; x [N,4,H,W]
// with `h`/`w` naming its sides ("" for unnamed unknown dims).
ir::Graph chain(const std::string& h, const std::string& w) {
  GraphBuilder b;
  auto side = [](const std::string& s) { return s.empty() ? ir::Dim{} : ir::Dim::symbolic(s); };
  ir::ValueId x = b.symbolicInput("x", {ir::Dim::symbolic("N"), ir::Dim::known(4), side(h), side(w)});
  ir::ValueId scale = b.constant("scale", {4, 1, 1}, {0.5f, -1.0f, 2.0f, 0.25f});
  ir::ValueId bias = b.constant("bias", {4, 1, 1}, {0.1f, 0.2f, -0.3f, 0.0f});
  ir::ValueId y = b.node("Sigmoid", {b.node("Add", {b.node("Mul", {b.node("Relu", {x}), scale}), bias})});
  b.output(b.node("Add", {y, b.node("Tanh", {x})}));
  return std::move(b.g);
}

const EwiseModule* ewiseModule(const backend::testing::Compiled& c) {
  for (const auto& m : c.modules)
    if (auto* e = dynamic_cast<const EwiseModule*>(m.get())) return e;
  return nullptr;
}

TEST(EwisePolymorphic, AChainRunsAtAnySizeAsTheHostDoes) {
  backend::testing::Compiled c = backend::testing::compile(chain("H", "W"), {"ewise", "host"});
  size_t ewise_nodes = 0;
  for (const auto& r : c.parts.regions) ewise_nodes += r.ops.size();
  EXPECT_EQ(ewise_nodes, 6u);  // every node, the final Add of two run-time values too
  const EwiseModule* m = ewiseModule(c);
  ASSERT_NE(m, nullptr);
  for (uint32_t f = 0; f < m->numFunctions(); ++f) EXPECT_TRUE(m->shapePolymorphic(f));
  backend::testing::Compiled host = backend::testing::compile(chain("H", "W"), {"host"});
  uint64_t seed = 1;
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{1, 4, 5, 7}, {3, 4, 33, 65}, {2, 4, 1, 1000}, {1, 4, 5, 7}}) {
    ir::OwnedTensor x = randomTensor(shape, seed++);
    ir::OwnedTensor got = c.run({x})[0], want = host.run({x})[0];
    ASSERT_EQ(got.shape(), shape);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.nbytes()), 0) << ir::shapeStr(shape);
  }
  EXPECT_EQ(m->walksCached(), 3u * m->numFunctions());  // one walk per shape and function
}

TEST(EwisePolymorphic, RunTimeOperandsOfUnprovenEqualShapeStayApart) {
  // With unnamed sides, Add(Sigmoid(..), Tanh(x)) might broadcast at run time: not fused.
  backend::testing::Compiled c = backend::testing::compile(chain("", ""), {"ewise", "host"});
  size_t ewise_nodes = 0;
  for (const auto& r : c.parts.regions) ewise_nodes += r.ops.size();
  EXPECT_EQ(ewise_nodes, 5u);
  backend::testing::Compiled host = backend::testing::compile(chain("", ""), {"host"});
  ir::OwnedTensor x = randomTensor({2, 4, 3, 9}, 7);
  ir::OwnedTensor got = c.run({x})[0], want = host.run({x})[0];
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.nbytes()), 0);
}

TEST(EwisePolymorphic, CallsOfAnotherShapeAreRefused) {
  GraphBuilder b;
  ir::ValueId x = b.symbolicInput("x", {ir::Dim::symbolic("N"), ir::Dim::known(4), ir::Dim{}, ir::Dim{}});
  b.output(b.node("Sigmoid", {b.node("Relu", {x})}));
  backend::testing::Compiled c = backend::testing::compile(std::move(b.g), {"ewise", "host"});
  const EwiseModule* m = ewiseModule(c);
  ASSERT_NE(m, nullptr);
  ir::OwnedTensor t = randomTensor({1, 5, 2, 2}, 3);  // 5 channels, compiled for 4
  try {
    m->outputShapes(0, {t.view()});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("compiled for float32[?,4,?,?]"), std::string::npos) << e.what();
  }
}

TEST(EwisePolymorphic, TheBlobMarksRunTimeDims) {
  backend::testing::Compiled c = backend::testing::compile(chain("H", "W"), {"ewise", "host"});
  const std::vector<std::byte>& blob = c.parts.modules.at(0).blob;
  uint32_t version;
  std::memcpy(&version, blob.data() + 4, 4);
  EXPECT_EQ(version, 2u);
  Program p = readProgram(blob.data(), blob.size());
  EXPECT_EQ(p.functions.at(0).shape, (std::vector<int64_t>{kRunTimeDim, 4, kRunTimeDim, kRunTimeDim}));
  // A model of fixed shapes still writes version 1.
  GraphBuilder b;
  b.output(b.node("Relu", {b.node("Sigmoid", {b.input("x", {2, 3})})}));
  backend::testing::Compiled fixed = backend::testing::compile(std::move(b.g), {"ewise", "host"});
  std::memcpy(&version, fixed.parts.modules.at(0).blob.data() + 4, 4);
  EXPECT_EQ(version, 1u);
}

}  // namespace
}  // namespace partita::ewise
