#include "backend/dnnl/dnnl_kernels.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "backend/dnnl/dnnl_memory_desc.h"
#include "partita/error.h"

namespace partita::dnnl_backend {

bool isOwnKernel(StepKind kind) { return kind == StepKind::kDynamicQuantize || kind == StepKind::kSwish; }

const char* ownKernelName(StepKind kind) {
  switch (kind) {
    case StepKind::kDynamicQuantize:
      return "partita:dynamic_quantize";
    case StepKind::kSwish:
      return "partita:swish";
    default:
      return "partita:unknown";
  }
}

void checkOwnKernelStep(const Step& step, const std::string& where) {
  auto bad = [&](const std::string& what) {
    throw Error(ErrorCode::kInvalidArtifact, "dnnl module: " + where + ": " + what);
  };
  if (step.kind == StepKind::kSwish) {
    const Arg* x = step.find(DNNL_ARG_SRC);
    const Arg* y = step.find(DNNL_ARG_DST);
    if (!x || !y || x->source != ArgSource::kBuffer || y->source != ArgSource::kBuffer || step.args.size() != 2)
      bad("a swish needs exactly a source and a destination buffer");
    if (!sameDesc(x->md, y->md) || x->md.data.data_type != dnnl_f32 || x->md.data.offset0 != 0)
      bad("a swish's source and destination are not one float32 descriptor");
    if (!step.post_ops.empty() || !step.quant.empty()) bad("post-ops or int8 attributes on a swish");
    return;
  }
  if (step.kind != StepKind::kDynamicQuantize) bad("not one of the module's own kernels");
  if (!step.post_ops.empty() || !step.quant.empty()) bad("post-ops or int8 attributes on a dynamic quantization");
  auto arg = [&](int key, memory::data_type t, const char* name) -> const Arg& {
    const Arg* a = step.find(key);
    if (!a || a->source != ArgSource::kBuffer) bad(std::string("no ") + name + " buffer");
    if (memory::data_type(a->md.data.data_type) != t || !isPlainDense(a->md))
      bad(std::string(name) + " is not a dense row-major buffer of the expected type");
    return *a;
  };
  const Arg& x = arg(DNNL_ARG_SRC, memory::data_type::f32, "source");
  const Arg& y = arg(DNNL_ARG_DST, memory::data_type::u8, "destination");
  if (numElements(x.md) != numElements(y.md)) bad("source and destination differ in size");
  if (numElements(arg(kDynamicScaleArg, memory::data_type::f32, "scale").md) != 1 ||
      numElements(arg(kDynamicZeroArg, memory::data_type::f32, "zero point").md) != 1 ||
      numElements(arg(kDynamicZeroS32Arg, memory::data_type::s32, "int32 zero point").md) != 1)
    bad("a scale or zero point that is not one element");
  if (step.args.size() != 5) bad("arguments other than its five");
}

namespace {

// Runs f(begin, end) over [0, n) cut into one share per thread of the calling
// thread's OpenMP team, each a whole number of 16-element vectors (of floats: no two
// threads write one cache line) (the executor sets the team: one thread for small
// steps). On a team of one, f(0, n) without a parallel region.
template <typename F>
void onTeam(int64_t n, F&& f) {
  const int team = omp_get_max_threads();
  if (team <= 1) return f(int64_t(0), n);
  const int64_t chunk = ((n + team - 1) / team + 15) / 16 * 16;
#pragma omp parallel for
  for (int t = 0; t < team; ++t) {
    const int64_t b = t * chunk, e = std::min(n, b + chunk);
    if (b < e) f(b, e);
  }
}

// GCC 12's AVX-512 min/max intrinsics pass _mm512_undefined_ps() as the unused merge
// source, which -Wmaybe-uninitialized reports.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
void minMax(const float* x, int64_t n, float& mn, float& mx) {
  int64_t i = 0;
#ifdef __AVX512F__
  // (GCC does not vectorise a float min/max reduction without -ffast-math.)
  if (n >= 16) {
    __m512 lo = _mm512_loadu_ps(x), hi = lo;
    for (i = 16; i + 16 <= n; i += 16) {
      const __m512 v = _mm512_loadu_ps(x + i);
      lo = _mm512_min_ps(lo, v);
      hi = _mm512_max_ps(hi, v);
    }
    alignas(64) float los[16], his[16];
    _mm512_store_ps(los, lo);
    _mm512_store_ps(his, hi);
    for (int k = 0; k < 16; ++k) {
      mn = std::min(mn, los[k]);
      mx = std::max(mx, his[k]);
    }
  }
#endif
  for (; i < n; ++i) {
    mn = std::min(mn, x[i]);
    mx = std::max(mx, x[i]);
  }
}
#pragma GCC diagnostic pop

// |x / scale| <= 255 (scale spans x's range): adding and subtracting 1.5 * 2^23
// rounds to the nearest integer, ties to even (the default rounding mode), as
// nearbyint does, in two vector adds.
void quantize(const float* x, int64_t n, float scale, float zero, uint8_t* y) {
  constexpr float kRound = 12582912.0f;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float q = ((x[i] / scale + kRound) - kRound) + zero;
    // NaN fails both tests: 0 (no float-to-int conversion of a NaN).
    y[i] = uint8_t(int32_t(q >= 0.0f ? (q <= 255.0f ? q : 255.0f) : 0.0f));
  }
}

}  // namespace

void dynamicQuantize(const float* x, int64_t n, uint8_t* y, float* scale_out, float* zero_out, int32_t* zero_s32) {
  float mn = INFINITY, mx = -INFINITY;
  onTeam(n, [&](int64_t b, int64_t e) {
    float lo = INFINITY, hi = -INFINITY;
    minMax(x + b, e - b, lo, hi);
#pragma omp critical(partita_dynamic_quantize_range)
    {
      mn = std::min(mn, lo);
      mx = std::max(mx, hi);
    }
  });
  const float hi = std::max(mx, 0.0f), lo = std::max(-mn, 0.0f);
  const float scale = std::min(std::max((hi + lo) / 255.0f, FLT_MIN), FLT_MAX);
  const float zero = std::nearbyint(std::min(std::max(lo / scale, 0.0f), 255.0f));
  onTeam(n, [&](int64_t b, int64_t e) { quantize(x + b, e - b, scale, zero, y + b); });
  *scale_out = scale;
  *zero_out = zero;
  *zero_s32 = int32_t(zero);
}

namespace {

// x * sigmoid(x) = x / (1 + e^-x), with e^-|x| (in (0, 1], no overflow) from a degree-7
// Taylor polynomial on |r| <= ln2 / 2 scaled by 2^n (as kernels/elementwise_math.h's
// fastExp), the reciprocal of 1 + e (in [1, 2]) from rcp14 and one Newton step:
// within a few ulp of x * sigmoid(x). For x < 0: x * e / (1 + e).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
void swishRange(const float* x, float* y, int64_t n) {
  int64_t i = 0;
#ifdef __AVX512F__
  const __m512 log2e = _mm512_set1_ps(1.44269504088896341f), ln2hi = _mm512_set1_ps(0.693145751953125f),
               ln2lo = _mm512_set1_ps(1.42860682030941723212e-6f), one = _mm512_set1_ps(1.0f),
               lowest = _mm512_set1_ps(-104.0f), sign = _mm512_set1_ps(-0.0f);
  auto f = [&](__m512 v) {
    const __m512 a = _mm512_max_ps(_mm512_or_ps(v, sign), lowest);  // -|v|, clamped
    const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(a, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 r = _mm512_fnmadd_ps(k, ln2lo, _mm512_fnmadd_ps(k, ln2hi, a));
    __m512 p = _mm512_set1_ps(1.0f / 5040);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, one);
    p = _mm512_fmadd_ps(p, r, one);
    const __m512 e = _mm512_scalef_ps(p, k);  // e^-|v|
    const __m512 d = _mm512_add_ps(one, e);
    __m512 q = _mm512_rcp14_ps(d);
    q = _mm512_fmadd_ps(q, _mm512_fnmadd_ps(d, q, one), q);  // 1 / (1 + e)
    const __mmask16 neg = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ);
    return _mm512_mul_ps(v, _mm512_mask_mul_ps(q, neg, q, e));  // sigmoid(v) = q or e * q
  };
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, f(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = __mmask16((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, f(_mm512_maskz_loadu_ps(m, x + i)));
    return;
  }
#endif
  for (; i < n; ++i) y[i] = x[i] / (1.0f + std::exp(-x[i]));
}
#pragma GCC diagnostic pop

}  // namespace

void swish(const float* x, float* y, int64_t n) {
  onTeam(n, [&](int64_t b, int64_t e) { swishRange(x + b, y + b, e - b); });
}

}  // namespace partita::dnnl_backend
