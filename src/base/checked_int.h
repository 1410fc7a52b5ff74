// Integers from untrusted text and counts from untrusted sizes, without wrapping or
// saturating: a number that does not fit is an error for the caller to report, never
// a different number.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace partita {

// The most bytes one tensor read from a file or described by a flag may take (1 TiB):
// more than any real input, small enough that counts of such tensors cannot overflow.
inline constexpr uint64_t kMaxInputTensorBytes = uint64_t(1) << 40;

// `text` as a non-negative decimal integer: one or more ASCII digits and nothing else
// (no sign, space, "0x" or suffix), at most INT64_MAX. Nothing when it is not one.
inline std::optional<int64_t> parseDecimal(std::string_view text) {
  if (text.empty()) return std::nullopt;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    if (v > (uint64_t(INT64_MAX) - uint64_t(c - '0')) / 10) return std::nullopt;
    v = v * 10 + uint64_t(c - '0');
  }
  return int64_t(v);
}

// a * b, or nothing when the product exceeds `limit`.
inline std::optional<uint64_t> mulAtMost(uint64_t a, uint64_t b, uint64_t limit) {
  uint64_t p = 0;
  if (__builtin_mul_overflow(a, b, &p) || p > limit) return std::nullopt;
  return p;
}

}  // namespace partita
