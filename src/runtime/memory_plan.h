// Activation memory planning: every statically shaped intermediate value gets an
// offset in one arena; two values share bytes only when their lifetimes (the steps
// between the producing and the last consuming node) do not overlap.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace partita::runtime {

struct BufferRequest {
  size_t bytes = 0;
  int32_t first = 0;  // step that writes it
  int32_t last = 0;   // last step that reads it (>= first)
};

struct MemoryPlan {
  std::vector<size_t> offsets;  // one per request, 64-byte aligned
  size_t arena_bytes = 0;       // the planned peak
  size_t unshared_bytes = 0;    // sum of all requests: what no reuse would cost
};

inline constexpr size_t kArenaAlignment = 64;

// Deterministic for the same requests, O(n log n) in the request count: the smaller of
// two plans, greedy best fit by decreasing size (the tighter on most graphs; skipped
// when very many buffers are alive at once, where its cost grows with the product)
// and a time sweep with a best-fit free list. Throws Error(kInvalidModel) when a size
// or the arena overflows 64 bits.
MemoryPlan planMemory(const std::vector<BufferRequest>& requests);

// The memory of one arena: zero-filled, kArenaAlignment-aligned, freed with the
// object. From 2 MiB up it is its own anonymous mapping in whole 2 MiB pages
// (arenaMappedBytes) with transparent huge pages requested (MADV_HUGEPAGE), so the
// first run touches it with a few faults of 2 MiB instead of one per 4 KiB page (on a
// VM each first write to a 4 KiB page costs microseconds: see docs/benchmarks.md,
// start-up); the kernel zero-fills it without us touching it.
// The bytes an ArenaMemory of `bytes` holds: from 2 MiB up, rounded up to whole 2 MiB
// pages (a partial one at the end would be backed by 4 KiB pages), else `bytes`
// aligned; 0 for none.
size_t arenaMappedBytes(size_t bytes);

class ArenaMemory {
 public:
  ArenaMemory() = default;
  explicit ArenaMemory(size_t bytes);  // throws Error(kInvalidArgument) when out of memory
  ~ArenaMemory();
  ArenaMemory(ArenaMemory&& other) noexcept;
  ArenaMemory& operator=(ArenaMemory&& other) noexcept;
  ArenaMemory(const ArenaMemory&) = delete;
  ArenaMemory& operator=(const ArenaMemory&) = delete;

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void release();
  std::byte* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_bytes_ = 0;  // of its own mapping (size_ in whole huge pages); 0: malloc'd
};

}  // namespace partita::runtime
