#include "runtime/memory_plan.h"

#include <gtest/gtest.h>

namespace partita::runtime {
namespace {

bool overlaps(const MemoryPlan& p, const std::vector<BufferRequest>& r, size_t a, size_t b) {
  bool time = r[a].first <= r[b].last && r[b].first <= r[a].last;
  bool space = p.offsets[a] < p.offsets[b] + r[b].bytes && p.offsets[b] < p.offsets[a] + r[a].bytes;
  return time && space;
}

TEST(MemoryPlan, ChainReusesBuffers) {
  // a -> b -> c -> d, each read only by the next step: two buffers suffice.
  std::vector<BufferRequest> r = {{1000, 0, 1}, {1000, 1, 2}, {1000, 2, 3}, {1000, 3, 4}};
  MemoryPlan p = planMemory(r);
  EXPECT_EQ(p.arena_bytes, 2 * 1024u);
  EXPECT_EQ(p.unshared_bytes, 4 * 1024u);
  for (size_t i = 0; i < r.size(); ++i)
    for (size_t j = i + 1; j < r.size(); ++j) EXPECT_FALSE(overlaps(p, r, i, j)) << i << "," << j;
}

TEST(MemoryPlan, LiveTogetherNeverShare) {
  std::vector<BufferRequest> r = {{64, 0, 5}, {128, 1, 5}, {256, 2, 5}, {64, 6, 7}};
  MemoryPlan p = planMemory(r);
  EXPECT_EQ(p.arena_bytes, 64u + 128u + 256u);
  for (size_t i = 0; i < r.size(); ++i) {
    EXPECT_EQ(p.offsets[i] % kArenaAlignment, 0u);
    for (size_t j = i + 1; j < r.size(); ++j) EXPECT_FALSE(overlaps(p, r, i, j));
  }
}

}  // namespace
}  // namespace partita::runtime
