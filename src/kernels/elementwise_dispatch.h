// dtype dispatch shared by the host elementwise kernels: visit a dtype as a C++ type,
// restricted to a set of dtypes, with errors that name the node.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/op_registry.h"
#include "kernels/op_util.h"
#include "ir/tensor.h"
#include "partita/error.h"

namespace partita::kernels::elementwise {

template <class T>
struct Tag {
  using type = T;
};

enum TypeSet : unsigned {
  kFloats = 1,
  kSigned = 2,    // signed integers
  kUnsigned = 4,  // unsigned integers
  kBools = 8,
  kIntegers = kSigned | kUnsigned,
  kNumeric = kFloats | kSigned | kUnsigned,
  kAll = kNumeric | kBools,
};

[[noreturn]] inline void unsupportedDType(const KernelContext& c, ir::DType dt) {
  throw Error(ErrorCode::kUnsupported, c.node.op_type + " node '" + c.node.name + "': dtype " +
                                           std::string(ir::dtypeName(dt)) + " is not supported");
}

// Calls fn(Tag<T>{}) for the C++ type T of `dt` when `dt` is in `Set`.
template <unsigned Set, class Fn>
void visit(const KernelContext& c, ir::DType dt, Fn&& fn) {
  switch (dt) {
    case ir::DType::kFloat32:
      if constexpr ((Set & kFloats) != 0) return fn(Tag<float>{});
      break;
    case ir::DType::kFloat64:
      if constexpr ((Set & kFloats) != 0) return fn(Tag<double>{});
      break;
    case ir::DType::kInt8:
      if constexpr ((Set & kSigned) != 0) return fn(Tag<int8_t>{});
      break;
    case ir::DType::kInt16:
      if constexpr ((Set & kSigned) != 0) return fn(Tag<int16_t>{});
      break;
    case ir::DType::kInt32:
      if constexpr ((Set & kSigned) != 0) return fn(Tag<int32_t>{});
      break;
    case ir::DType::kInt64:
      if constexpr ((Set & kSigned) != 0) return fn(Tag<int64_t>{});
      break;
    case ir::DType::kUInt8:
      if constexpr ((Set & kUnsigned) != 0) return fn(Tag<uint8_t>{});
      break;
    case ir::DType::kUInt16:
      if constexpr ((Set & kUnsigned) != 0) return fn(Tag<uint16_t>{});
      break;
    case ir::DType::kUInt32:
      if constexpr ((Set & kUnsigned) != 0) return fn(Tag<uint32_t>{});
      break;
    case ir::DType::kUInt64:
      if constexpr ((Set & kUnsigned) != 0) return fn(Tag<uint64_t>{});
      break;
    case ir::DType::kBool:
      if constexpr ((Set & kBools) != 0) return fn(Tag<bool>{});
      break;
    default:
      break;
  }
  unsupportedDType(c, dt);
}

inline void requireSameDType(const KernelContext& c, const ir::Tensor& a, const ir::Tensor& b) {
  if (a.dtype != b.dtype)
    c.fail("inputs have different dtypes " + std::string(ir::dtypeName(a.dtype)) + " and " +
           std::string(ir::dtypeName(b.dtype)));
}

// Integer arithmetic wraps (as numpy does) instead of overflowing signed types:
// compute in an unsigned type at least as wide as int, then narrow.
template <class T>
using Wide = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

}  // namespace partita::kernels::elementwise
