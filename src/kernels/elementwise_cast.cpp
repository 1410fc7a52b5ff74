#include "kernels/elementwise_cast.h"

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include <bit>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/elementwise_broadcast.h"
#include "partita/error.h"

namespace partita::kernels::elementwise {

namespace {

// Storage types of the 16-bit floats, distinct from uint16_t for overloading.
struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};

template <class T>
struct Tag {
  using type = T;
};

template <class To, class From>
To floatToInt(From v) {
  constexpr From kTwo63 = From(9223372036854775808.0);
  if (v != v) return To(0);
  if constexpr (std::is_same_v<To, uint64_t>) {
    if (v >= kTwo63) return v >= 2 * kTwo63 ? std::numeric_limits<uint64_t>::max() : To(v);
  }
  if (v >= kTwo63) return To(std::numeric_limits<int64_t>::max());
  if (v < -kTwo63) return To(std::numeric_limits<int64_t>::min());
  return To(int64_t(v));  // wraps modulo 2^bits for narrower targets (C++20)
}

// bfloat16 conversions inline (ir's are out of line) so that array loops vectorise.
inline float bfloat16ToFloat(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }
inline uint16_t roundToBfloat16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint16_t quiet_nan = uint16_t((bits >> 16) | 0x40);
  const uint16_t rounded = uint16_t((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
  return f != f ? quiet_nan : rounded;
}
// Cast to bfloat16 truncates the low mantissa bits, as ONNX's reference (and its
// conformance data) does; NaN stays NaN.
inline uint16_t truncateToBfloat16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  return uint16_t(f != f ? (bits >> 16) | 0x40 : bits >> 16);
}

// float16 <-> float32 over arrays, with the F16C instructions when the build targets them.
void halfToFloatArray(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
#endif
  for (; i < n; ++i) dst[i] = ir::halfToFloat(src[i]);
}
void floatToHalfArray(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(
        reinterpret_cast<__m128i*>(dst + i),
        _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
  for (; i < n; ++i) dst[i] = ir::floatToHalf(src[i]);
}

// Runs fn(begin, count) over [0, n) split across threads.
template <class Fn>
void forChunks(int64_t n, int64_t cost, Fn fn) {
  BroadcastPlan<1> plan;
  plan.dims = {n};
  plan.strides[0] = {1};
  plan.numel = n;
  forEachRun(plan, cost,
             [&](int64_t begin, const std::array<int64_t, 1>&, int64_t count) { fn(begin, count); });
}

template <class To, class From>
To convert(From v) {
  if constexpr (std::is_same_v<From, Half>) {
    return convert<To>(ir::halfToFloat(v.bits));
  } else if constexpr (std::is_same_v<From, BFloat16>) {
    return convert<To>(bfloat16ToFloat(v.bits));
  } else if constexpr (std::is_same_v<To, Half>) {
    return Half{ir::floatToHalf(float(v))};
  } else if constexpr (std::is_same_v<To, BFloat16>) {
    return BFloat16{truncateToBfloat16(float(v))};
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    return floatToInt<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

template <class Fn>
void visitAny(ir::DType dt, Fn&& fn) {
  switch (dt) {
    case ir::DType::kFloat32:
      return fn(Tag<float>{});
    case ir::DType::kFloat64:
      return fn(Tag<double>{});
    case ir::DType::kFloat16:
      return fn(Tag<Half>{});
    case ir::DType::kBFloat16:
      return fn(Tag<BFloat16>{});
    case ir::DType::kInt8:
      return fn(Tag<int8_t>{});
    case ir::DType::kInt16:
      return fn(Tag<int16_t>{});
    case ir::DType::kInt32:
      return fn(Tag<int32_t>{});
    case ir::DType::kInt64:
      return fn(Tag<int64_t>{});
    case ir::DType::kUInt8:
      return fn(Tag<uint8_t>{});
    case ir::DType::kUInt16:
      return fn(Tag<uint16_t>{});
    case ir::DType::kUInt32:
      return fn(Tag<uint32_t>{});
    case ir::DType::kUInt64:
      return fn(Tag<uint64_t>{});
    case ir::DType::kBool:
      return fn(Tag<bool>{});
    case ir::DType::kUndefined:
      break;
  }
  throw Error(ErrorCode::kUnsupported, "cast: dtype " + std::string(ir::dtypeName(dt)) + " is not supported");
}

}  // namespace

bool isHalfLike(ir::DType t) { return t == ir::DType::kFloat16 || t == ir::DType::kBFloat16; }

bool anyHalfLike(const KernelContext& c) {
  for (const ir::Tensor& t : c.inputs)
    if (t.defined() && isHalfLike(t.dtype)) return true;
  for (const ir::Tensor& t : c.outputs)
    if (t.defined() && isHalfLike(t.dtype)) return true;
  return false;
}

void castElements(const ir::Tensor& src, const ir::Tensor& dst) {
  if (src.numel() != dst.numel())
    throw Error(ErrorCode::kInternal,
                "cast: " + ir::shapeStr(src.shape) + " into " + ir::shapeStr(dst.shape));
  if (src.dtype == dst.dtype) {
    if (src.data != dst.data && src.nbytes()) std::memcpy(dst.data, src.data, src.nbytes());
    return;
  }
  if (src.dtype == ir::DType::kFloat16 && dst.dtype == ir::DType::kFloat32) {
    const uint16_t* in = src.as<const uint16_t>();
    float* out = dst.as<float>();
    forChunks(src.numel(), kCheap, [&](int64_t i, int64_t n) { halfToFloatArray(in + i, out + i, n); });
    return;
  }
  if (src.dtype == ir::DType::kFloat32 && dst.dtype == ir::DType::kFloat16) {
    const float* in = src.as<const float>();
    uint16_t* out = dst.as<uint16_t>();
    forChunks(src.numel(), kCheap, [&](int64_t i, int64_t n) { floatToHalfArray(in + i, out + i, n); });
    return;
  }
  visitAny(src.dtype, [&](auto from) {
    using From = typename decltype(from)::type;
    visitAny(dst.dtype, [&](auto to) {
      using To = typename decltype(to)::type;
      const int64_t cost = (isHalfLike(src.dtype) || isHalfLike(dst.dtype)) ? kMedium : kCheap;
      unaryMap<To, From>(src, dst, cost, [](From v) { return convert<To>(v); });
    });
  });
}

void runThroughFloat(KernelContext& c, KernelFn body) {
  KernelContext f{c.node, c.constants, {}, {}, c.threads};
  std::vector<ir::OwnedTensor> copies;
  copies.reserve(c.inputs.size() + c.outputs.size());
  for (const ir::Tensor& t : c.inputs) {
    if (!isHalfLike(t.dtype)) {
      f.inputs.push_back(t);
      continue;
    }
    copies.emplace_back(ir::DType::kFloat32, t.shape);
    castElements(t, copies.back().view());
    f.inputs.push_back(copies.back().view());
  }
  std::vector<size_t> rounded;  // outputs to convert back
  for (size_t i = 0; i < c.outputs.size(); ++i) {
    const ir::Tensor& t = c.outputs[i];
    if (!isHalfLike(t.dtype)) {
      f.outputs.push_back(t);
      continue;
    }
    copies.emplace_back(ir::DType::kFloat32, t.shape);
    f.outputs.push_back(copies.back().view());
    rounded.push_back(i);
  }
  body(f);
  // Computed results round to nearest even (Cast's truncation is for Cast only).
  for (size_t i : rounded) {
    if (c.outputs[i].dtype == ir::DType::kFloat16)
      castElements(f.outputs[i], c.outputs[i]);
    else
      unaryMap<uint16_t, float>(f.outputs[i], c.outputs[i], kCheap, roundToBfloat16);
  }
}

}  // namespace partita::kernels::elementwise
