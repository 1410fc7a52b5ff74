#include "runtime/memory_plan.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <numeric>
#include <utility>

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

namespace {
constexpr size_t kHugePage = size_t(2) << 20;
}  // namespace

ArenaMemory::ArenaMemory(size_t bytes) : size_(std::max(alignUp(bytes), kArenaAlignment)) {
  if (size_ >= kHugePage) {
    void* p = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    madvise(p, size_, MADV_HUGEPAGE);  // advice only: without THP the arena works the same
    data_ = static_cast<std::byte*>(p);
    mapped_ = true;
    return;
  }
  data_ = static_cast<std::byte*>(std::aligned_alloc(kArenaAlignment, size_));
  if (!data_) throw std::bad_alloc();
  std::memset(data_, 0, size_);
}

ArenaMemory::~ArenaMemory() { release(); }

ArenaMemory::ArenaMemory(ArenaMemory&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)),
      mapped_(std::exchange(other.mapped_, false)) {}

ArenaMemory& ArenaMemory::operator=(ArenaMemory&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_ = std::exchange(other.mapped_, false);
  }
  return *this;
}

void ArenaMemory::release() {
  if (!data_) return;
  if (mapped_)
    munmap(data_, size_);
  else
    std::free(data_);
  data_ = nullptr;
}

}  // namespace partita::runtime
