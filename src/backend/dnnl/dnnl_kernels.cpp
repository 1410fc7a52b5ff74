#include "backend/dnnl/dnnl_kernels.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cfloat>
#include <cmath>

#include "backend/dnnl/dnnl_memory_desc.h"
#include "partita/error.h"

namespace partita::dnnl_backend {

bool isOwnKernel(StepKind kind) { return kind == StepKind::kDynamicQuantize; }

const char* ownKernelName(StepKind kind) {
  return kind == StepKind::kDynamicQuantize ? "partita:dynamic_quantize" : "partita:unknown";
}

void checkOwnKernelStep(const Step& step, const std::string& where) {
  auto bad = [&](const std::string& what) {
    throw Error(ErrorCode::kInvalidArtifact, "dnnl module: " + where + ": " + what);
  };
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
    y[i] = uint8_t(int32_t(std::min(std::max(q, 0.0f), 255.0f)));
  }
}

}  // namespace

void dynamicQuantize(const float* x, int64_t n, uint8_t* y, float* scale_out, float* zero_out, int32_t* zero_s32) {
  // A team when the executor gave this step one (large inputs: stepThreads).
  const int team = omp_get_max_threads();
  const int64_t chunk = (n + team - 1) / team;
  float mx = -INFINITY, mn = INFINITY;
  if (team > 1) {
#pragma omp parallel for reduction(max : mx) reduction(min : mn)
    for (int t = 0; t < team; ++t) {
      const int64_t b = t * chunk, e = std::min(n, b + chunk);
      if (b < e) minMax(x + b, e - b, mn, mx);
    }
  } else {
    minMax(x, n, mn, mx);
  }
  const float hi = std::max(mx, 0.0f), lo = std::max(-mn, 0.0f);
  const float scale = std::min(std::max((hi + lo) / 255.0f, FLT_MIN), FLT_MAX);
  const float zero = std::nearbyint(std::min(std::max(lo / scale, 0.0f), 255.0f));
  if (team > 1) {
#pragma omp parallel for
    for (int t = 0; t < team; ++t) {
      const int64_t b = t * chunk, e = std::min(n, b + chunk);
      if (b < e) quantize(x + b, e - b, scale, zero, y + b);
    }
  } else {
    quantize(x, n, scale, zero, y);
  }
  *scale_out = scale;
  *zero_out = zero;
  *zero_s32 = int32_t(zero);
}

}  // namespace partita::dnnl_backend
