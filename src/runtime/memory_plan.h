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

// Greedy best-fit by decreasing size: deterministic for the same requests.
MemoryPlan planMemory(const std::vector<BufferRequest>& requests);

}  // namespace partita::runtime
