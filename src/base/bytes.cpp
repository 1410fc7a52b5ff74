#include "base/bytes.h"

#include <cstring>

#include <xxhash.h>

namespace partita {

Bytes Bytes::fromVector(std::vector<std::byte> v) {
  auto holder = std::make_shared<std::vector<std::byte>>(std::move(v));
  Bytes b;
  b.data = holder->data();
  b.size = holder->size();
  b.owner = std::move(holder);
  return b;
}

Bytes Bytes::copyOf(const void* p, size_t n) {
  std::vector<std::byte> v(n);
  if (n) std::memcpy(v.data(), p, n);
  return fromVector(std::move(v));
}

uint64_t hashBytes(const void* p, size_t n) { return XXH3_64bits(p, n); }

}  // namespace partita
