#include "ir/limits.h"

namespace partita::ir {

std::optional<int64_t> checkedNumel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return std::nullopt;
  // A zero dimension makes the count 0 even after an earlier product that would not
  // have overflowed: the loop above never overflows past a 0, so this is exact.
  return n;
}

std::optional<uint64_t> checkedNbytes(DType dtype, const std::vector<int64_t>& shape) {
  std::optional<int64_t> n = checkedNumel(shape);
  int64_t bytes = 0;
  if (!n || __builtin_mul_overflow(*n, int64_t(dtypeSize(dtype)), &bytes)) return std::nullopt;
  return uint64_t(bytes);
}

std::string limitViolation(const TensorType& type, const TensorLimits& limits) {
  if (!type.has_rank) return {};
  if (type.rank() > limits.max_rank)
    return "rank " + std::to_string(type.rank()) + " is over the limit of " + std::to_string(limits.max_rank) +
           " dimensions (TensorLimits::max_rank)";
  // Known dims only; a 0 counts as 1, so [0, 2^62] is refused like [1, 2^62].
  uint64_t bytes = std::max<uint64_t>(dtypeSize(type.dtype), 1);
  bool overflow = false;
  for (size_t i = 0; i < type.rank(); ++i) {
    const Dim& d = type.dims[i];
    if (!d.isKnown()) {
      if (d.value < -1) return "dimension " + std::to_string(i) + " is negative (" + std::to_string(d.value) + ")";
      continue;
    }
    if (d.value == 0) continue;
    if (__builtin_mul_overflow(bytes, uint64_t(d.value), &bytes)) overflow = true;
  }
  if (overflow) return type.str() + " has more bytes than 64 bits count";
  if (bytes > limits.max_bytes)
    return type.str() + " needs " + std::to_string(bytes) + " bytes, over the limit of " +
           std::to_string(limits.max_bytes) + " (TensorLimits::max_bytes)";
  return {};
}

void checkLimits(const TensorType& type, const TensorLimits& limits, ErrorCode code, const std::string& what) {
  std::string why = limitViolation(type, limits);
  if (!why.empty()) throw Error(code, what + ": " + why);
}

}  // namespace partita::ir
