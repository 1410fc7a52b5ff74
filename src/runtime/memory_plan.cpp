#include "runtime/memory_plan.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <numeric>
#include <set>
#include <string>
#include <utility>

#include "base/mapped_file.h"
#include "partita/error.h"

namespace partita::runtime {

namespace {

size_t alignUp(size_t n) { return (n + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment; }

[[noreturn]] void tooLarge(const std::string& what) {
  throw Error(ErrorCode::kInvalidModel, "activation memory plan: " + what + " does not fit in 64 bits");
}

size_t checkedAdd(size_t a, size_t b, const char* what) {
  if (a > SIZE_MAX - b) tooLarge(what);
  return a + b;
}

// Each request's size in the arena: its bytes rounded up to the alignment (at least one unit).
std::vector<size_t> alignedSizes(const std::vector<BufferRequest>& requests) {
  std::vector<size_t> sizes(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    if (requests[i].bytes > SIZE_MAX - kArenaAlignment) tooLarge("a buffer of " + std::to_string(requests[i].bytes) + " bytes");
    sizes[i] = alignUp(std::max<size_t>(requests[i].bytes, 1));
  }
  return sizes;
}

// The placed requests, searchable by lifetime: a max-tree over the requests sorted by
// `first`, each leaf holding its request's `last` once placed (else "none"). The
// placed requests alive during [first, last] are those among the prefix with
// first <= last whose `last` is >= first: found in O((k + 1) log n) for k of them.
class LiveIndex {
 public:
  explicit LiveIndex(const std::vector<BufferRequest>& requests) : requests_(requests) {
    order_.resize(requests.size());
    std::iota(order_.begin(), order_.end(), size_t(0));
    std::stable_sort(order_.begin(), order_.end(),
                     [&](size_t a, size_t b) { return requests[a].first < requests[b].first; });
    position_.resize(requests.size());
    for (size_t p = 0; p < order_.size(); ++p) position_[order_[p]] = p;
    leaves_ = 1;
    while (leaves_ < std::max<size_t>(order_.size(), 1)) leaves_ *= 2;
    max_last_.assign(2 * leaves_, kNone);
  }

  void place(size_t request) {
    size_t node = leaves_ + position_[request];
    max_last_[node] = requests_[request].last;
    for (node /= 2; node >= 1; node /= 2) max_last_[node] = std::max(max_last_[2 * node], max_last_[2 * node + 1]);
  }

  // Appends the placed requests alive at some step of [first, last] to `out`.
  void alive(int32_t first, int32_t last, std::vector<size_t>& out) const {
    // Leaves [0, end) have first <= last.
    size_t end = size_t(std::upper_bound(order_.begin(), order_.end(), last,
                                         [&](int32_t v, size_t r) { return v < requests_[r].first; }) -
                        order_.begin());
    if (end == 0) return;
    stack_.clear();
    stack_.push_back({1, 0, leaves_});
    while (!stack_.empty()) {
      auto [node, lo, hi] = stack_.back();
      stack_.pop_back();
      if (lo >= end || max_last_[node] < first) continue;
      if (hi - lo == 1) {
        out.push_back(order_[lo]);
        continue;
      }
      size_t mid = (lo + hi) / 2;
      stack_.push_back({2 * node + 1, mid, hi});
      stack_.push_back({2 * node, lo, mid});
    }
  }

 private:
  static constexpr int32_t kNone = INT32_MIN;
  struct Range {
    size_t node, lo, hi;
  };
  const std::vector<BufferRequest>& requests_;
  std::vector<size_t> order_;     // request indices by first step
  std::vector<size_t> position_;  // request -> its leaf
  size_t leaves_ = 1;
  std::vector<int32_t> max_last_;
  mutable std::vector<Range> stack_;
};

// Greedy best fit by decreasing size: each request goes into the smallest gap between
// the address ranges of the placed buffers alive at the same time, else above them.
// Gives up (returns false) once the alive buffers it has looked at exceed `budget`:
// only graphs with very many values alive at once come near it.
bool greedyBySize(const std::vector<BufferRequest>& requests, const std::vector<size_t>& sizes, size_t budget,
                  MemoryPlan& plan) {
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return requests[a].bytes > requests[b].bytes; });
  LiveIndex index(requests);
  std::vector<size_t> alive;
  std::vector<std::pair<size_t, size_t>> busy;
  size_t seen = 0;
  for (size_t idx : order) {
    const BufferRequest& r = requests[idx];
    const size_t size = sizes[idx];
    alive.clear();
    index.alive(r.first, r.last, alive);
    seen += alive.size();
    if (seen > budget) return false;
    busy.clear();
    for (size_t p : alive) busy.emplace_back(plan.offsets[p], plan.offsets[p] + sizes[p]);
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
    plan.arena_bytes = std::max(plan.arena_bytes, checkedAdd(best, size, "the arena"));
    index.place(idx);
  }
  return true;
}

// Linear scan through time with a best-fit free list: at each step the buffers whose
// last reader has run are freed (merging with free neighbours), then the buffers
// written there are placed, largest first, into the smallest free block that holds
// them, else at the top of the arena. O(n log n) whatever the lifetimes.
void sweepBestFit(const std::vector<BufferRequest>& requests, const std::vector<size_t>& sizes, MemoryPlan& plan) {
  std::vector<size_t> by_first(requests.size()), by_last(requests.size());
  std::iota(by_first.begin(), by_first.end(), size_t(0));
  std::iota(by_last.begin(), by_last.end(), size_t(0));
  std::stable_sort(by_first.begin(), by_first.end(), [&](size_t a, size_t b) {
    if (requests[a].first != requests[b].first) return requests[a].first < requests[b].first;
    return sizes[a] > sizes[b];
  });
  std::stable_sort(by_last.begin(), by_last.end(),
                   [&](size_t a, size_t b) { return requests[a].last < requests[b].last; });
  std::map<size_t, size_t> free_at;             // offset -> size
  std::set<std::pair<size_t, size_t>> by_size;  // (size, offset)
  size_t top = 0;                               // the arena's high-water mark
  auto addFree = [&](size_t offset, size_t size) {
    auto next = free_at.lower_bound(offset);
    if (next != free_at.end() && offset + size == next->first) {
      size += next->second;
      by_size.erase({next->second, next->first});
      next = free_at.erase(next);
    }
    if (next != free_at.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        offset = prev->first;
        size += prev->second;
        by_size.erase({prev->second, prev->first});
        free_at.erase(prev);
      }
    }
    free_at.emplace(offset, size);
    by_size.insert({size, offset});
  };
  size_t freed = 0;
  for (size_t idx : by_first) {
    const BufferRequest& r = requests[idx];
    for (; freed < by_last.size() && requests[by_last[freed]].last < r.first; ++freed) {
      size_t f = by_last[freed];
      if (requests[f].first <= requests[f].last) addFree(plan.offsets[f], sizes[f]);
    }
    const size_t size = sizes[idx];
    size_t offset;
    auto fit = by_size.lower_bound({size, 0});
    if (fit != by_size.end()) {
      auto [block, at] = *fit;
      by_size.erase(fit);
      free_at.erase(at);
      offset = at;
      if (block > size) addFree(at + size, block - size);
    } else if (!free_at.empty() && std::prev(free_at.end())->first + std::prev(free_at.end())->second == top) {
      // The free block at the top grows into the rest.
      auto last = std::prev(free_at.end());
      offset = last->first;
      by_size.erase({last->second, last->first});
      free_at.erase(last);
      top = checkedAdd(offset, size, "the arena");
    } else {
      offset = top;
      top = checkedAdd(top, size, "the arena");
    }
    plan.offsets[idx] = offset;
  }
  plan.arena_bytes = top;
}

}  // namespace

MemoryPlan planMemory(const std::vector<BufferRequest>& requests) {
  const std::vector<size_t> sizes = alignedSizes(requests);
  MemoryPlan sweep;
  sweep.offsets.assign(requests.size(), 0);
  for (size_t s : sizes) sweep.unshared_bytes = checkedAdd(sweep.unshared_bytes, s, "the sum of all buffers");
  sweepBestFit(requests, sizes, sweep);
  // Greedy by size packs tighter on most graphs; its cost grows with the number of
  // buffers alive together, so it stops at a budget linear in the request count.
  MemoryPlan greedy;
  greedy.offsets.assign(requests.size(), 0);
  greedy.unshared_bytes = sweep.unshared_bytes;
  const size_t budget = std::max<size_t>(size_t(1) << 20, 16 * requests.size());
  if (greedyBySize(requests, sizes, budget, greedy) && greedy.arena_bytes <= sweep.arena_bytes) return greedy;
  return sweep;
}

namespace {

[[noreturn]] void outOfMemory(size_t bytes) {
  throw Error(ErrorCode::kInvalidArgument,
              "out of memory: cannot allocate an activation arena of " + std::to_string(bytes) + " bytes");
}
}  // namespace

size_t arenaMappedBytes(size_t bytes) {
  if (bytes == 0) return 0;
  const size_t size = std::max(alignUp(bytes), kArenaAlignment);
  if (size < kHugePageBytes || size > SIZE_MAX - 2 * kHugePageBytes) return size;
  return (size + kHugePageBytes - 1) & ~(kHugePageBytes - 1);
}

ArenaMemory::ArenaMemory(size_t bytes) : size_(std::max(alignUp(bytes), kArenaAlignment)) {
  if (size_ >= kHugePageBytes) {
    // Mapped 2 MiB-aligned and in whole 2 MiB pages so that transparent huge pages can
    // back all of it: a first run then takes one fault per 2 MiB instead of one per
    // 4 KiB page (each first write to a 4 KiB page costs 5-7 us on a VM; a partial
    // huge page at the end cost SqueezeNet's first run 3.3 ms, 7.7 against 4.4 ms).
    // (mapAtHugePageBoundary gives back the slack around the aligned range.)
    if (size_ > SIZE_MAX - 2 * kHugePageBytes) outOfMemory(size_);
    mapped_bytes_ = arenaMappedBytes(size_);
    void* p = mapAtHugePageBoundary(mapped_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1);
    if (p == MAP_FAILED) outOfMemory(size_);
#ifdef MADV_POPULATE_WRITE
    // A run writes nearly all of its arena: map the zeroed pages in one call rather
    // than take a fault on each (where THP is off, one per 4 KiB). Advice too.
    (void)madvise(p, size_, MADV_POPULATE_WRITE);
#endif
    data_ = static_cast<std::byte*>(p);
    return;
  }
  data_ = static_cast<std::byte*>(std::aligned_alloc(kArenaAlignment, size_));
  if (!data_) outOfMemory(size_);
  std::memset(data_, 0, size_);
}

ArenaMemory::~ArenaMemory() { release(); }

ArenaMemory::ArenaMemory(ArenaMemory&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)),
      mapped_bytes_(std::exchange(other.mapped_bytes_, 0)) {}

ArenaMemory& ArenaMemory::operator=(ArenaMemory&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    mapped_bytes_ = std::exchange(other.mapped_bytes_, 0);
  }
  return *this;
}

void ArenaMemory::release() {
  if (!data_) return;
  if (mapped_bytes_ > 0)
    munmap(data_, mapped_bytes_);
  else
    std::free(data_);
  data_ = nullptr;
}

}  // namespace partita::runtime
