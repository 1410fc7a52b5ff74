#include "runtime/memory_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "partita/error.h"

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

// The planner before issue 10 (greedy best fit by decreasing size, scanning every
// placed buffer per request): the new one must pack at least as tightly.
size_t quadraticGreedyArena(const std::vector<BufferRequest>& requests) {
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return requests[a].bytes > requests[b].bytes; });
  struct Placed {
    size_t offset, size;
    int32_t first, last;
  };
  std::vector<Placed> placed;
  size_t arena = 0;
  for (size_t idx : order) {
    const BufferRequest& r = requests[idx];
    size_t size = (std::max<size_t>(r.bytes, 1) + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
    std::vector<std::pair<size_t, size_t>> busy;
    for (const Placed& p : placed)
      if (p.first <= r.last && r.first <= p.last) busy.emplace_back(p.offset, p.offset + p.size);
    std::sort(busy.begin(), busy.end());
    size_t best = SIZE_MAX, best_gap = SIZE_MAX, cursor = 0;
    for (auto [lo, hi] : busy) {
      if (lo > cursor && lo - cursor >= size && lo - cursor < best_gap) {
        best = cursor;
        best_gap = lo - cursor;
      }
      cursor = std::max(cursor, hi);
    }
    if (best == SIZE_MAX) best = cursor;
    arena = std::max(arena, best + size);
    placed.push_back({best, size, r.first, r.last});
  }
  return arena;
}

void expectValid(const MemoryPlan& p, const std::vector<BufferRequest>& r) {
  ASSERT_EQ(p.offsets.size(), r.size());
  for (size_t i = 0; i < r.size(); ++i) {
    EXPECT_EQ(p.offsets[i] % kArenaAlignment, 0u);
    EXPECT_LE(p.offsets[i] + r[i].bytes, p.arena_bytes);
    for (size_t j = i + 1; j < r.size(); ++j) ASSERT_FALSE(overlaps(p, r, i, j)) << i << "," << j;
  }
}

TEST(MemoryPlan, RandomGraphsPackAtLeastAsTightlyAsBefore) {
  std::mt19937 rng(10);
  for (int trial = 0; trial < 200; ++trial) {
    const int steps = 1 + int(rng() % 60);
    std::vector<BufferRequest> r;
    for (int i = 0, n = 1 + int(rng() % 80); i < n; ++i) {
      int32_t first = int32_t(rng() % uint32_t(steps));
      int32_t last = first + int32_t(rng() % (trial % 3 == 0 ? 40u : 6u));
      size_t bytes = trial % 5 == 0 ? 64 * (1 + rng() % 4) : rng() % 5000;
      r.push_back({bytes, first, last});
    }
    MemoryPlan p = planMemory(r);
    expectValid(p, r);
    EXPECT_LE(p.arena_bytes, quadraticGreedyArena(r)) << "trial " << trial;
  }
}

TEST(MemoryPlan, ManyBuffersAliveTogether) {
  // Every buffer is read by one last step (a Concat of all of them): greedy by size
  // would compare each with every other; the plan is still the sum, found fast.
  const int32_t n = 200000;
  std::vector<BufferRequest> r;
  for (int32_t i = 0; i < n; ++i) r.push_back({size_t(64 * (1 + i % 3)), i, n});
  MemoryPlan p = planMemory(r);
  size_t sum = 0;
  for (const BufferRequest& b : r) sum += b.bytes;
  EXPECT_EQ(p.arena_bytes, sum);
  EXPECT_EQ(p.unshared_bytes, sum);
  std::vector<size_t> order(r.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p.offsets[a] < p.offsets[b]; });
  for (size_t k = 1; k < order.size(); ++k)
    ASSERT_GE(p.offsets[order[k]], p.offsets[order[k - 1]] + r[order[k - 1]].bytes);
}

TEST(MemoryPlan, LongChainIsTwoBuffers) {
  std::vector<BufferRequest> r;
  for (int32_t i = 0; i < 200000; ++i) r.push_back({16, i, i + 1});
  MemoryPlan p = planMemory(r);
  EXPECT_EQ(p.arena_bytes, 2 * kArenaAlignment);
}

TEST(MemoryPlan, OverflowIsAnError) {
  try {
    planMemory({{SIZE_MAX - 3, 0, 1}});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("does not fit in 64 bits"), std::string::npos) << e.what();
  }
  // Each fits; together they do not.
  EXPECT_THROW(planMemory({{size_t(1) << 63, 0, 1}, {size_t(1) << 63, 0, 1}}), Error);
}

}  // namespace
}  // namespace partita::runtime
