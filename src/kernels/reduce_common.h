// Private to the host backend's reduction-style ops (ops_reduce.cpp and reduce_*.cpp):
// registration of the op groups, the [outer, n, inner] view of a tensor around one axis,
// element access for float16/bfloat16 through float, and an exp that vectorises.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kernels/op_registry.h"
#include "kernels/op_util.h"

namespace partita::kernels {

// Op groups, each registered from its own file; registerReduceOps calls them all.
void registerReductionOps(OpRegistry& r);  // ops_reduce.cpp: Reduce*, ArgMax/ArgMin, MVN
void registerSoftmaxOps(OpRegistry& r);    // reduce_softmax.cpp: Softmax, LogSoftmax, Hardmax
void registerScanOps(OpRegistry& r);       // reduce_scan.cpp: CumSum, TopK, NonZero
void registerMatrixOps(OpRegistry& r);     // reduce_matrix.cpp: OneHot, Trilu, EyeLike
void registerEinsumOp(OpRegistry& r);
void registerDetOp(OpRegistry& r);        // reduce_det.cpp: Det      // reduce_einsum.cpp: Einsum

// Helpers shared by those files; a namespace of their own keeps them apart from
// similarly named helpers of other op groups.
namespace reduce {

// A tensor seen as [outer, n, inner] around `axis`: n is the axis' extent.
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
};
inline AxisSplit splitAt(const std::vector<int64_t>& shape, int64_t axis) {
  AxisSplit s;
  for (int64_t i = 0; i < int64_t(shape.size()); ++i) {
    if (i < axis)
      s.outer *= shape[size_t(i)];
    else if (i == axis)
      s.n = shape[size_t(i)];
    else
      s.inner *= shape[size_t(i)];
  }
  return s;
}

// Storage types for the 16-bit floats so templates can tell them from uint16_t.
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

// Element access: kernels compute in Compute<T> and convert at load and store.
template <typename T>
struct Elem {
  using Compute = T;
  static T load(T v) { return v; }
  static T store(T v) { return v; }
};
template <>
struct Elem<Half> {
  using Compute = float;
  static float load(Half v) { return ir::halfToFloat(v.bits); }
  static Half store(float v) { return Half{ir::floatToHalf(v)}; }
};
template <>
struct Elem<BFloat16> {
  using Compute = float;
  static float load(BFloat16 v) { return ir::bfloat16ToFloat(v.bits); }
  static BFloat16 store(float v) { return BFloat16{ir::floatToBfloat16(v)}; }
};

// Dispatch over the floating-point dtypes (float32, float64, float16, bfloat16).
#define PARTITA_DISPATCH_FLOATS(dtype, what, ...)                                                            \
  switch (dtype) {                                                                                           \
    PARTITA_DISPATCH_CASE(kFloat32, float, __VA_ARGS__)                                                      \
    PARTITA_DISPATCH_CASE(kFloat64, double, __VA_ARGS__)                                                     \
    PARTITA_DISPATCH_CASE(kFloat16, ::partita::kernels::reduce::Half, __VA_ARGS__)                              \
    PARTITA_DISPATCH_CASE(kBFloat16, ::partita::kernels::reduce::BFloat16, __VA_ARGS__)                         \
    default:                                                                                                 \
      throw ::partita::Error(                                                                                \
          ::partita::ErrorCode::kUnsupported,                                                                \
          std::string(what) + ": dtype " + std::string(::partita::ir::dtypeName(dtype)) + " not supported"); \
  }

// Every numeric dtype including the 16-bit floats.
#define PARTITA_DISPATCH_NUMERIC(dtype, what, ...)                                                           \
  switch (dtype) {                                                                                           \
    PARTITA_DISPATCH_CASE(kFloat32, float, __VA_ARGS__)                                                      \
    PARTITA_DISPATCH_CASE(kFloat64, double, __VA_ARGS__)                                                     \
    PARTITA_DISPATCH_CASE(kFloat16, ::partita::kernels::reduce::Half, __VA_ARGS__)                              \
    PARTITA_DISPATCH_CASE(kBFloat16, ::partita::kernels::reduce::BFloat16, __VA_ARGS__)                         \
    PARTITA_DISPATCH_CASE(kInt8, int8_t, __VA_ARGS__)                                                        \
    PARTITA_DISPATCH_CASE(kInt16, int16_t, __VA_ARGS__)                                                      \
    PARTITA_DISPATCH_CASE(kInt32, int32_t, __VA_ARGS__)                                                      \
    PARTITA_DISPATCH_CASE(kInt64, int64_t, __VA_ARGS__)                                                      \
    PARTITA_DISPATCH_CASE(kUInt8, uint8_t, __VA_ARGS__)                                                      \
    PARTITA_DISPATCH_CASE(kUInt16, uint16_t, __VA_ARGS__)                                                    \
    PARTITA_DISPATCH_CASE(kUInt32, uint32_t, __VA_ARGS__)                                                    \
    PARTITA_DISPATCH_CASE(kUInt64, uint64_t, __VA_ARGS__)                                                    \
    default:                                                                                                 \
      throw ::partita::Error(                                                                                \
          ::partita::ErrorCode::kUnsupported,                                                                \
          std::string(what) + ": dtype " + std::string(::partita::ir::dtypeName(dtype)) + " not supported"); \
  }

// exp(x) in float, within a few ulp of std::exp, branch-free and without float->int
// conversions so that GCC vectorises loops over it. Returns 0 below -87.33 (where exp
// is denormal) and +inf above 88.37.
// exp(x) = 2^n * exp(r) with n = round(x / ln 2), |r| <= ln2 / 2, exp(r) by its Taylor
// series to degree 7 (truncation error below 6e-9). Adding 1.5 * 2^23 rounds x / ln 2
// to an integer held in the low mantissa bits, from where it is shifted into 2^n.
inline float expFast(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;  // ln 2 = hi + lo, hi exact in a few bits
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kLo = -87.3365f, kHi = 88.3762f;
  constexpr float kShift = 12582912.0f;
  float xc = x < kLo ? kLo : (x > kHi ? kHi : x);
  float t = xc * kLog2e + kShift;
  float n = t - kShift;
  float r = xc - n * kLn2Hi;
  r = r - n * kLn2Lo;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  int32_t e = std::bit_cast<int32_t>(t) - std::bit_cast<int32_t>(kShift) + 127;
  float y = p * std::bit_cast<float>(e << 23);
  y = x < kLo ? 0.0f : y;
  y = x > kHi ? std::numeric_limits<float>::infinity() : y;
  return x != x ? x : y;
}

}  // namespace reduce

}  // namespace partita::kernels
