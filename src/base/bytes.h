// Bytes: a read-only byte range with shared ownership of whatever backs it (a heap
// buffer, a mapped file). Copying Bytes shares the owner; the bytes are never copied.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace partita {

struct Bytes {
  std::shared_ptr<const void> owner;
  const std::byte* data = nullptr;
  size_t size = 0;

  // Takes a heap vector over.
  static Bytes fromVector(std::vector<std::byte> v);
  static Bytes copyOf(const void* p, size_t n);
  // A sub-range that keeps the same owner alive.
  Bytes slice(size_t offset, size_t n) const { return Bytes{owner, data + offset, n}; }
};

// XXH3 64-bit hash of a byte range (libxxhash).
uint64_t hashBytes(const void* p, size_t n);

}  // namespace partita
