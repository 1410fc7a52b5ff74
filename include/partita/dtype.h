// Element types of tensors. The numeric values are stable: they are written into
// artifacts (docs/format.md), so never renumber, only append.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace partita {

enum class DType : uint8_t {
  kUndefined = 0,
  kFloat32 = 1,
  kFloat16 = 2,
  kBFloat16 = 3,
  kFloat64 = 4,
  kInt8 = 5,
  kInt16 = 6,
  kInt32 = 7,
  kInt64 = 8,
  kUInt8 = 9,
  kUInt16 = 10,
  kUInt32 = 11,
  kUInt64 = 12,
  kBool = 13,
};

// Bytes per element (0 for kUndefined).
size_t dtypeSize(DType t);
// "float32", "float16", "int64", "bool", ... ("invalid" for a value outside the enum).
std::string_view dtypeName(DType t);

}  // namespace partita
