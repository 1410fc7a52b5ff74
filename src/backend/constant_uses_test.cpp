// The backend contract's constant plumbing: the partitioner's sink assigns the IDs the
// derived tensors get in the pool, and the shared use builder declares one use per ID
// (borrow wins over embed) with embedded tensors at aligned offsets.
#include <gtest/gtest.h>

#include <vector>

#include "backend/constant_sink.h"
#include "backend/constant_uses.h"
#include "partita/error.h"

namespace partita::backend {
namespace {

using runtime::ConstUse;
using runtime::ConstUseKind;

ir::ConstantPool poolOf(size_t n) {
  ir::ConstantPool pool;
  for (size_t i = 0; i < n; ++i) {
    std::vector<float> v(3, float(i));
    pool.add("c" + std::to_string(i), ir::DType::kFloat32, {3}, Bytes::copyOf(v.data(), sizeof(float) * 3));
  }
  return pool;
}

TEST(ConstantSink, AssignsTheIdsThePoolGivesOnCommit) {
  ir::ConstantPool pool = poolOf(2);
  PendingConstants sink(pool);
  std::vector<float> a(8, 1.0f), b(4, 2.0f);
  EXPECT_EQ(sink.add("a.blocked", ir::DType::kFloat32, {8}, Bytes::copyOf(a.data(), 32), "tag:a"), 2u);
  EXPECT_EQ(sink.add("b", ir::DType::kFloat32, {2, 2}, Bytes::copyOf(b.data(), 16), ""), 3u);
  EXPECT_EQ(pool.size(), 2u);  // nothing joins the pool before commit
  sink.commit(pool);
  ASSERT_EQ(pool.size(), 4u);
  EXPECT_EQ(pool.get(2).name, "a.blocked");
  EXPECT_EQ(pool.get(2).layout, "tag:a");
  EXPECT_EQ(pool.get(3).shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(sink.size(), 0u);
  // The next compile continues the numbering.
  EXPECT_EQ(sink.add("c", ir::DType::kFloat32, {1}, Bytes::copyOf(b.data(), 4), ""), 4u);
}

TEST(ConstantSink, RefusesABadSizeAndAPoolThatChanged) {
  ir::ConstantPool pool = poolOf(1);
  PendingConstants sink(pool);
  std::vector<float> a(4, 0.0f);
  EXPECT_THROW(sink.add("bad", ir::DType::kFloat32, {5}, Bytes::copyOf(a.data(), 16), ""), Error);
  sink.add("ok", ir::DType::kFloat32, {4}, Bytes::copyOf(a.data(), 16), "");
  pool.add("meanwhile", ir::DType::kFloat32, {4}, Bytes::copyOf(a.data(), 16));
  EXPECT_THROW(sink.commit(pool), Error);
}

TEST(ConstantUses, OneUsePerIdAscendingAndBorrowWinsOverEmbed) {
  ir::ConstantPool pool = poolOf(5);
  PendingConstants sink(pool);
  ConstantUses uses(sink);
  float x = 1.0f;
  uses.embed(&x, sizeof x, {3});  // embedded first, borrowed later: a borrow
  uses.borrow(4);
  uses.borrow(3);
  uses.borrow(1);                  // borrowed first, embedded later: still a borrow
  uses.embed(&x, sizeof x, {1, 0});
  uses.absorb(2);
  uses.borrow(4);                  // twice: once
  std::vector<float> d(3, 0.0f);
  ir::ConstId derived = uses.derive(4, "c4.packed", ir::DType::kFloat32, {3}, Bytes::copyOf(d.data(), 12), "p");
  EXPECT_EQ(derived, 5u);
  std::vector<ConstUse> want = {{0, ConstUseKind::kEmbed, ir::kNoConst},  {1, ConstUseKind::kBorrow, ir::kNoConst},
                                {2, ConstUseKind::kEmbed, ir::kNoConst},  {3, ConstUseKind::kBorrow, ir::kNoConst},
                                {4, ConstUseKind::kBorrow, ir::kNoConst}, {5, ConstUseKind::kDerive, 4}};
  EXPECT_EQ(uses.uses(), want);
}

TEST(ConstantUses, EmbeddedTensorsStartAlignedAndAConstantIsEmbeddedOnce) {
  ir::ConstantPool pool = poolOf(2);
  PendingConstants sink(pool);
  ConstantUses uses(sink);
  const size_t a = runtime::kEmbeddedAlignment;
  EXPECT_EQ(uses.embedConstant(pool.get(0)), 0u);
  EXPECT_EQ(uses.embedConstant(pool.get(1)), a);
  EXPECT_EQ(uses.embedConstant(pool.get(0)), 0u);  // already there
  char byte = 7;
  EXPECT_EQ(uses.embed(&byte, 1, {}), 2 * a);
  EXPECT_EQ(uses.embedded().size(), 2 * a + 1);
  std::vector<std::byte> data = uses.takeEmbedded(/*padded_end=*/true);
  EXPECT_EQ(data.size(), 3 * a);
  EXPECT_EQ(data[12], std::byte{0});  // zero padding after constant 0's 12 bytes
  EXPECT_EQ(data[2 * a], std::byte{7});
}

}  // namespace
}  // namespace partita::backend
