#include "runtime/memory_plan.h"

#include <algorithm>
#include <numeric>

namespace partita::runtime {

namespace {
size_t alignUp(size_t n) { return (n + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment; }
}  // namespace

MemoryPlan planMemory(const std::vector<BufferRequest>& requests) {
  MemoryPlan plan;
  plan.offsets.assign(requests.size(), 0);
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return requests[a].bytes > requests[b].bytes; });
  struct Placed {
    size_t offset, size;
    int32_t first, last;
  };
  std::vector<Placed> placed;
  for (size_t idx : order) {
    const BufferRequest& r = requests[idx];
    size_t size = alignUp(std::max<size_t>(r.bytes, 1));
    plan.unshared_bytes += size;
    // Address ranges of placed buffers alive at the same time, sorted by offset.
    std::vector<std::pair<size_t, size_t>> busy;
    for (const Placed& p : placed)
      if (p.first <= r.last && r.first <= p.last) busy.emplace_back(p.offset, p.offset + p.size);
    std::sort(busy.begin(), busy.end());
    // Best fit: the smallest gap that holds `size`; else the end.
    size_t best = SIZE_MAX, best_gap = SIZE_MAX, cursor = 0;
    for (auto [lo, hi] : busy) {
      if (lo > cursor && lo - cursor >= size && lo - cursor < best_gap) {
        best = cursor;
        best_gap = lo - cursor;
      }
      cursor = std::max(cursor, hi);
    }
    if (best == SIZE_MAX) best = cursor;
    plan.offsets[idx] = best;
    plan.arena_bytes = std::max(plan.arena_bytes, best + size);
    placed.push_back({best, size, r.first, r.last});
  }
  return plan;
}

}  // namespace partita::runtime
