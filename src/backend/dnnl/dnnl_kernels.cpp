#include "backend/dnnl/dnnl_kernels.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backend/dnnl/dnnl_memory_desc.h"
#include "ir/dtype.h"
#include "partita/error.h"

namespace partita::dnnl_backend {

bool isOwnKernel(StepKind kind) {
  return kind == StepKind::kDynamicQuantize || kind == StepKind::kSwish || kind == StepKind::kScaleChannels ||
         kind == StepKind::kChannelMean || kind == StepKind::kInt8MaxPool || kind == StepKind::kAddLayerNorm ||
         kind == StepKind::kSoftmaxRows || kind == StepKind::kBiasGelu || kind == StepKind::kAddRowCopy ||
         kind == StepKind::kMatVec;
}

const char* ownKernelName(StepKind kind) {
  switch (kind) {
    case StepKind::kDynamicQuantize:
      return "partita:dynamic_quantize";
    case StepKind::kSwish:
      return "partita:swish";
    case StepKind::kScaleChannels:
      return "partita:scale_channels";
    case StepKind::kChannelMean:
      return "partita:channel_mean";
    case StepKind::kInt8MaxPool:
      return "partita:int8_max_pool";
    case StepKind::kAddLayerNorm:
      return "partita:add_layer_norm";
    case StepKind::kSoftmaxRows:
      return "partita:softmax_rows";
    case StepKind::kBiasGelu:
      return "partita:bias_gelu";
    case StepKind::kAddRowCopy:
      return "partita:add_row_copy";
    case StepKind::kMatVec:
      return "partita:mat_vec";
    default:
      return "partita:unknown";
  }
}

namespace {

// Whether `a` is a dense row-major argument of type `t` (no offset either).
bool plainOf(const Arg* a, dnnl_data_type_t t) { return a && a->md.data.data_type == t && isPlainDense(a->md); }

}  // namespace

std::optional<int> copyRunDim(const memory::desc& view, const memory::desc& dst) {
  const dnnl_memory_desc_t& v = view.data;
  const dnnl_memory_desc_t& y = dst.data;
  if (v.format_kind != dnnl_blocked || y.format_kind != dnnl_blocked || v.ndims != y.ndims) return std::nullopt;
  for (int d = v.ndims - 1; d >= 0; --d)
    if (v.format_desc.blocking.strides[d] == 1 && y.format_desc.blocking.strides[d] == 1) return d;
  return std::nullopt;
}

namespace {

// A row kernel's (kAddLayerNorm's, kBiasGelu's) source and destination, checked: dense
// row-major float32 buffers of one size and row length. Their element count and row
// length.
template <typename Bad>
std::pair<int64_t, int64_t> rowsSourceAndDestination(const Step& step, const Bad& bad) {
  const std::string kind = stepKindName(step.kind);
  const Arg* x = step.find(DNNL_ARG_SRC);
  const Arg* y = step.find(DNNL_ARG_DST);
  if (!plainOf(x, dnnl_f32) || !plainOf(y, dnnl_f32) || x->source != ArgSource::kBuffer ||
      y->source != ArgSource::kBuffer)
    bad("the " + kind + " step's source and destination are not dense row-major float32 buffers");
  const int64_t n = numElements(x->md), c = x->md.data.ndims > 0 ? x->md.data.dims[x->md.data.ndims - 1] : 0;
  if (c < 1 || numElements(y->md) != n || y->md.data.dims[y->md.data.ndims - 1] != c)
    bad("the " + kind + " step's source and destination differ in size or row length");
  return {n, c};
}

// The number of arguments of a kAddLayerNorm's, kBiasGelu's or kAddRowCopy's quantized
// result (0 or 4), after checking them: a dense uint8 buffer of the `n` elements it quantizes,
// sharing no buffer with another argument, and one-element scale and zero points.
template <typename Bad>
size_t quantizedResultArgs(const Step& step, int64_t n, const Bad& bad) {
  const Arg* q = step.find(kQuantizedResultArg);
  if (!q) return 0;
  const std::string kind = stepKindName(step.kind);
  if (!plainOf(q, dnnl_u8) || numElements(q->md) != n || q->source != ArgSource::kBuffer)
    bad("the " + kind + " step's quantized result is not a dense uint8 buffer of the source's size");
  for (const Arg& a : step.args)
    if (&a != q && a.source == ArgSource::kBuffer && a.index == q->index)
      bad("the " + kind + " step's quantized result shares a buffer with another argument");
  const std::pair<int, dnnl_data_type_t> one[] = {
      {kDynamicScaleArg, dnnl_f32}, {kDynamicZeroArg, dnnl_f32}, {kDynamicZeroS32Arg, dnnl_s32}};
  for (const auto& [key, t] : one) {
    const Arg* a = step.find(key);
    if (!plainOf(a, t) || numElements(a->md) != 1 || a->source != ArgSource::kBuffer)
      bad("the " + kind + " step's scale or zero point is not a one-element buffer");
  }
  return 4;
}

// A per-channel operand or result of a channels-last source of `dims`: [N (or 1 when
// batch_of_one), C, 1...], float32, dense.
bool perChannelDesc(const memory::desc& md, const std::vector<int64_t>& dims, bool batch_of_one) {
  if (dims.size() < 2) return false;
  std::vector<int64_t> want(dims.size(), 1);
  want[1] = dims[1];
  const std::vector<int64_t> got = dimsOf(md);
  if (got.size() != dims.size() || md.data.data_type != dnnl_f32) return false;
  if (!(got[0] == dims[0] || (batch_of_one && got[0] == 1))) return false;
  want[0] = got[0];
  return got == want && (isPlainDense(md) || isChannelsLastDense(md));
}

// Why a max pool step's window does not suit the own max pool kernels over a source
// of dims `in` into `out` ([N, C, H, W]), or "" when it does: two kernel, stride and pad
// extents without dilation, and every window holding at least one element of the
// source.
std::string maxPoolWindowMisfit(const Step& step, const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  if (in.size() != 4 || out.size() != 4 || in[0] != out[0] || in[1] != out[1])
    return "destination changes the batch or the channels";
  auto two = [](const std::vector<int64_t>& v) { return v.size() == 2; };
  if (!two(step.kernel) || !two(step.strides) || !two(step.pad_l) || !two(step.pad_r) ||
      !(step.dilates.empty() || (two(step.dilates) && step.dilates[0] == 0 && step.dilates[1] == 0)))
    return "window is not two kernel, stride and pad extents without dilation";
  for (size_t i = 0; i < 2; ++i) {
    const int64_t k = step.kernel[i], s = step.strides[i], pl = step.pad_l[i], pr = step.pad_r[i];
    const int64_t extent = in[2 + i], o = out[2 + i];
    // Every window holds at least one element of the source: it starts before the end
    // and ends after the start. (Bounds first: the sums and the product below stay far
    // from overflow.)
    constexpr int64_t kFar = int64_t(1) << 31;
    if (k > kFar || s > kFar || pr > kFar || extent > kFar || o > kFar) return "window extents are out of range";
    if (k < 1 || s < 1 || pl < 0 || pr < 0 || pl >= k || extent < 1 || k > extent + pl + pr ||
        o != (extent + pl + pr - k) / s + 1 || (o - 1) * s - pl >= extent)
      return "window does not fit its source and destination";
  }
  return "";
}

}  // namespace

void checkOwnKernelStep(const Step& step, const std::string& where) {
  auto bad = [&](const std::string& what) {
    throw Error(ErrorCode::kInvalidArtifact, "dnnl module: " + where + ": " + what);
  };
  if (step.kind == StepKind::kSwish) {
    const Arg* x = step.find(DNNL_ARG_SRC);
    const Arg* y = step.find(DNNL_ARG_DST);
    const Arg* mean = step.find(DNNL_ARG_DST_1);
    if (!x || !y || x->source != ArgSource::kBuffer || y->source != ArgSource::kBuffer ||
        (mean && mean->source != ArgSource::kBuffer) || step.args.size() != (mean ? 3u : 2u))
      bad("a swish needs exactly a source and a destination buffer (and a mean buffer)");
    if (!sameDesc(x->md, y->md) || x->md.data.data_type != dnnl_f32 || x->md.data.offset0 != 0)
      bad("a swish's source and destination are not one float32 descriptor");
    if (mean) {
      if (!isChannelsLastDense(x->md)) bad("a swish with a mean: the source is not a dense channels-last tensor");
      if (!perChannelDesc(mean->md, dimsOf(x->md), false))
        bad("a swish's mean is not a dense [N, C, 1...] float32 tensor");
    }
    if (!step.post_ops.empty() || !step.quant.empty()) bad("post-ops or int8 attributes on a swish");
    return;
  }
  if (step.kind == StepKind::kMatVec) {
    const Arg* x = step.find(DNNL_ARG_SRC);
    const Arg* w = step.find(DNNL_ARG_WEIGHTS);
    const Arg* bias = step.find(DNNL_ARG_BIAS);
    const Arg* y = step.find(DNNL_ARG_DST);
    if (!x || !w || !y || x->source != ArgSource::kBuffer || y->source != ArgSource::kBuffer ||
        w->source == ArgSource::kBuffer || (bias && bias->source == ArgSource::kBuffer) ||
        step.args.size() != (bias ? 4u : 3u))
      bad("a mat_vec needs exactly a source buffer, constant weights (and a bias) and a destination buffer");
    const std::vector<int64_t> xd = dimsOf(x->md), yd = dimsOf(y->md), wd = dimsOf(w->md);
    const size_t rank = xd.size();
    bool ok = rank >= 2 && yd.size() == rank && wd.size() == rank && xd[0] == 1 && yd[0] == 1 && wd[0] == yd[1] &&
              wd[1] == xd[1];
    for (size_t i = 2; ok && i < rank; ++i) ok = xd[i] == 1 && yd[i] == 1 && wd[i] == 1;
    if (!ok) bad("a mat_vec's source, weights and destination are not [1, K, 1...], [O, K, 1...], [1, O, 1...]");
    for (const Arg* a : {x, y})
      if (a->md.data.data_type != dnnl_f32) bad("a mat_vec's source or destination is not float32");
    if (w->md.data.data_type != dnnl_f32 && w->md.data.data_type != dnnl_f16)
      bad("a mat_vec's weights are not float32 or float16");
    if (!isPlainDense(x->md) || !isPlainDense(y->md)) bad("a mat_vec's source or destination is not dense");
    // The weights in blocks of outputs, each [K][B] (matVecWeightsDesc).
    const int64_t o = wd[0];
    if (!sameDesc(w->md, matVecWeightsDesc(wd, memory::data_type(w->md.data.data_type))))
      bad("a mat_vec's weights are not stored in blocks of outputs, [O / B][K][B]");
    if (bias && (bias->md.data.data_type != dnnl_f32 || !isPlainDense(bias->md) || dimsOf(bias->md) != std::vector<int64_t>{o}))
      bad("a mat_vec's bias is not a dense float32 [O]");
    const int32_t alg = step.alg;
    if (alg != 0 && alg != int32_t(dnnl::algorithm::eltwise_relu) && alg != int32_t(dnnl::algorithm::eltwise_logistic) &&
        alg != int32_t(dnnl::algorithm::eltwise_swish))
      bad("a mat_vec's activation is not none, relu, logistic or swish");
    if (!step.post_ops.empty() || !step.quant.empty()) bad("post-ops or int8 attributes on a mat_vec");
    return;
  }
  if (step.kind == StepKind::kSoftmaxRows) {
    const Arg* x = step.find(DNNL_ARG_SRC);
    const Arg* y = step.find(DNNL_ARG_DST);
    if (!x || !y || x->source != ArgSource::kBuffer || y->source != ArgSource::kBuffer || step.args.size() != 2)
      bad("a softmax_rows needs exactly a source and a destination buffer");
    if (!sameDesc(x->md, y->md) || x->md.data.data_type != dnnl_f32 || !isPlainDense(x->md) ||
        x->md.data.ndims < 1 || x->md.data.dims[x->md.data.ndims - 1] < 1)
      bad("a softmax_rows' source and destination are not one dense row-major float32 descriptor");
    if (!step.post_ops.empty() || !step.quant.empty()) bad("post-ops or int8 attributes on a softmax_rows");
    if (!std::isfinite(step.alpha)) bad("a softmax_rows' scale is not finite");
    return;
  }
  if (step.kind == StepKind::kScaleChannels || step.kind == StepKind::kChannelMean) {
    const bool scale = step.kind == StepKind::kScaleChannels;
    const Arg* x = step.find(scale ? DNNL_ARG_SRC_0 : DNNL_ARG_SRC);
    const Arg* s = scale ? step.find(DNNL_ARG_SRC_1) : nullptr;
    const Arg* y = step.find(DNNL_ARG_DST);
    if (!x || !y || (scale && !s) || step.args.size() != (scale ? 3u : 2u))
      bad(std::string("a ") + stepKindName(step.kind) + " needs exactly its " + (scale ? "three" : "two") +
          " buffers");
    for (const Arg& a : step.args)
      if (a.source != ArgSource::kBuffer) bad(std::string("a ") + stepKindName(step.kind) + " reads a constant");
    if (!isChannelsLastDense(x->md) || x->md.data.data_type != dnnl_f32)
      bad("the source is not a dense channels-last float32 tensor");
    const std::vector<int64_t> dims = dimsOf(x->md);
    if (scale) {
      if (!sameDesc(x->md, y->md)) bad("a scale_channels' source and destination are not one descriptor");
      if (!perChannelDesc(s->md, dims, true))
        bad("a scale_channels' scale is not a dense [N or 1, C, 1...] float32 tensor");
    } else if (!perChannelDesc(y->md, dims, false)) {
      bad("a channel_mean's destination is not a dense [N, C, 1...] float32 tensor");
    }
    if (!step.post_ops.empty() || !step.quant.empty())
      bad(std::string("post-ops or int8 attributes on a ") + stepKindName(step.kind));
    return;
  }
  if (step.kind == StepKind::kInt8MaxPool) {
    const Arg* x = step.find(DNNL_ARG_SRC);
    const Arg* y = step.find(DNNL_ARG_DST);
    if (!x || !y || x->source != ArgSource::kBuffer || y->source != ArgSource::kBuffer || step.args.size() != 2)
      bad("an int8 max pool needs exactly a source and a destination buffer");
    const dnnl_data_type_t t = x->md.data.data_type;
    if ((t != dnnl_u8 && t != dnnl_s8) || y->md.data.data_type != t || x->md.data.ndims != 4 ||
        !isChannelsLastDense(x->md) || !isChannelsLastDense(y->md))
      bad("an int8 max pool's source and destination are not dense channels-last int8 tensors of one type");
    if (!step.post_ops.empty() || !step.quant.empty()) bad("post-ops or int8 attributes on an int8 max pool");
    if (const std::string why = maxPoolWindowMisfit(step, dimsOf(x->md), dimsOf(y->md)); !why.empty())
      bad("an int8 max pool's " + why);
    return;
  }
  if (step.kind == StepKind::kAddLayerNorm) {
    if (!step.post_ops.empty() || !step.quant.empty()) bad("post-ops or int8 attributes on an add_layer_norm");
    const auto plain = plainOf;
    const Arg* y = step.find(DNNL_ARG_DST);
    const auto [n, c] = rowsSourceAndDestination(step, bad);
    for (int key : {DNNL_ARG_SCALE, DNNL_ARG_SHIFT})
      if (!plain(step.find(key), dnnl_f32) || numElements(step.find(key)->md) != c)
        bad("an add_layer_norm's scale or shift is not one float32 per column");
    size_t adds = 0;
    while (adds < size_t(kMaxLayerNormAddends) && step.find(DNNL_ARG_MULTIPLE_SRC + int(adds))) ++adds;
    for (size_t i = 0; i < adds; ++i) {
      const Arg* a = step.find(DNNL_ARG_MULTIPLE_SRC + int(i));
      const int64_t m = numElements(a->md);
      if (!plain(a, dnnl_f32) || (m != c && m != n))
        bad("an add_layer_norm's addend is neither one row nor the source's size in float32");
      if (m != n && a->source == ArgSource::kBuffer && a->index == y->index)
        bad("an add_layer_norm writes over a row it adds");
    }
    if (step.args.size() != 4 + adds + quantizedResultArgs(step, n, bad))
      bad("an add_layer_norm has arguments other than its own");
    return;
  }
  if (step.kind == StepKind::kBiasGelu) {
    if (!step.post_ops.empty() || !step.quant.empty()) bad("post-ops or int8 attributes on a bias_gelu");
    const Arg* y = step.find(DNNL_ARG_DST);
    const auto [n, c] = rowsSourceAndDestination(step, bad);
    const Arg* bias = step.find(DNNL_ARG_SRC_1);
    if (bias && (!plainOf(bias, dnnl_f32) || numElements(bias->md) != c))
      bad("a bias_gelu's bias is not one float32 per column");
    if (bias && bias->source == ArgSource::kBuffer && bias->index == y->index)
      bad("a bias_gelu writes over the bias it adds");
    if (step.args.size() != 2 + (bias ? 1 : 0) + quantizedResultArgs(step, n, bad))
      bad("a bias_gelu has arguments other than its own");
    return;
  }
  if (step.kind == StepKind::kAddRowCopy) {
    if (!step.post_ops.empty() || !step.quant.empty()) bad("post-ops or int8 attributes on an add_row_copy");
    const Arg* x = step.find(DNNL_ARG_SRC);
    if (!plainOf(x, dnnl_f32) || x->source != ArgSource::kBuffer || x->md.data.ndims < 1)
      bad("an add_row_copy's source is not a dense row-major float32 buffer");
    const int64_t n = numElements(x->md), c = x->md.data.dims[x->md.data.ndims - 1];
    if (c < 1) bad("an add_row_copy's source has empty rows");
    const Arg* bias = step.find(DNNL_ARG_SRC_1);
    if (bias && (!plainOf(bias, dnnl_f32) || numElements(bias->md) != c))
      bad("an add_row_copy's bias is not one float32 per column");
    size_t copies = 0;
    while (copies < size_t(kMaxRowCopies) && step.find(DNNL_ARG_MULTIPLE_SRC + int(copies))) ++copies;
    if (copies == 0) bad("an add_row_copy has no view to copy");
    // With a quantized result: one view, quantized into it instead of copied.
    const Arg* quantized = step.find(kQuantizedResultArg);
    if (quantized && (copies != 1 || step.find(kRowCopyDst[0])))
      bad("a quantized add_row_copy has more than its one view or a float32 destination too");
    for (size_t i = 0; i < copies; ++i) {
      const Arg* v = step.find(DNNL_ARG_MULTIPLE_SRC + int(i));
      const Arg* y = quantized ? quantized : step.find(kRowCopyDst[i]);
      const dnnl_memory_desc_t& vd = v->md.data;
      if (v->source != ArgSource::kBuffer || v->index != x->index || vd.data_type != dnnl_f32 ||
          vd.format_kind != dnnl_blocked || vd.format_desc.blocking.inner_nblks != 0 || vd.ndims < 1 ||
          vd.ndims > kMaxCopyRank || vd.offset0 < 0)
        bad("an add_row_copy's view is not a strided float32 view of its source");
      // Every element of the view inside the source.
      int64_t last = vd.offset0;
      for (int d = 0; d < vd.ndims; ++d) {
        const int64_t s = vd.format_desc.blocking.strides[d];
        if (vd.dims[d] < 1 || vd.padded_dims[d] != vd.dims[d] || s < 0) bad("an add_row_copy's view has bad dims or strides");
        last += (vd.dims[d] - 1) * s;
      }
      if (last >= n) bad("an add_row_copy's view reaches past its source");
      if (!y || y->source != ArgSource::kBuffer || y->index == x->index || !isDenseUnblocked(y->md) ||
          y->md.data.data_type != (quantized ? dnnl_u8 : dnnl_f32) || dimsOf(y->md) != dimsOf(v->md) ||
          !copyRunDim(v->md, y->md))
        bad("an add_row_copy's destination is not a dense float32 (quantized: uint8) buffer of its view's dims "
            "with a dim contiguous on both sides");
      if (bias && bias->source == ArgSource::kBuffer && bias->index == y->index)
        bad("an add_row_copy writes over its bias");
      for (size_t k = 0; k < i; ++k)
        if (step.find(kRowCopyDst[k])->index == y->index) bad("two add_row_copy destinations share a buffer");
    }
    const size_t outputs =
        quantized ? 1 + quantizedResultArgs(step, numElements(step.find(DNNL_ARG_MULTIPLE_SRC)->md), bad) : 2 * copies;
    if (step.args.size() != 1 + (bias ? 1 : 0) + outputs) bad("an add_row_copy has arguments other than its own");
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

// Runs f(begin, end, thread) over [0, n) cut into one contiguous share per thread of
// the calling thread's OpenMP team, each a whole number of `granule` items (16 floats:
// no two threads write one cache line) (the executor sets the team: one thread for
// small steps). On a team of one, f(0, n, 0) without a parallel region.
template <typename F>
void onTeam(int64_t n, F&& f, int64_t granule = 16) {
  const int team = omp_get_max_threads();
  if (team <= 1) return f(int64_t(0), n, 0);
  const int64_t chunk = ((n + team - 1) / team + granule - 1) / granule * granule;
#pragma omp parallel for
  for (int t = 0; t < team; ++t) {
    const int64_t b = t * chunk, e = std::min(n, b + chunk);
    if (b < e) f(b, e, t);
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
  // (GCC does not vectorise a float min/max reduction without -ffast-math.) Four
  // accumulators each, so that the loop is bound by its loads, not by the latency of
  // one min/max chain (2.5x at 32768 floats). A NaN in x is skipped: min/max return
  // their second operand, the accumulator, when either is NaN.
  if (n >= 16) {
    const __m512 inf = _mm512_set1_ps(INFINITY), ninf = _mm512_set1_ps(-INFINITY);
    __m512 lo0 = inf, lo1 = inf, lo2 = inf, lo3 = inf, hi0 = ninf, hi1 = ninf, hi2 = ninf, hi3 = ninf;
    for (; i + 64 <= n; i += 64) {
      const __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16), c = _mm512_loadu_ps(x + i + 32),
                   d = _mm512_loadu_ps(x + i + 48);
      lo0 = _mm512_min_ps(a, lo0);
      hi0 = _mm512_max_ps(a, hi0);
      lo1 = _mm512_min_ps(b, lo1);
      hi1 = _mm512_max_ps(b, hi1);
      lo2 = _mm512_min_ps(c, lo2);
      hi2 = _mm512_max_ps(c, hi2);
      lo3 = _mm512_min_ps(d, lo3);
      hi3 = _mm512_max_ps(d, hi3);
    }
    for (; i + 16 <= n; i += 16) {
      const __m512 a = _mm512_loadu_ps(x + i);
      lo0 = _mm512_min_ps(a, lo0);
      hi0 = _mm512_max_ps(a, hi0);
    }
    const __m512 lo = _mm512_min_ps(_mm512_min_ps(lo0, lo1), _mm512_min_ps(lo2, lo3));
    const __m512 hi = _mm512_max_ps(_mm512_max_ps(hi0, hi1), _mm512_max_ps(hi2, hi3));
    mn = std::min(mn, _mm512_reduce_min_ps(lo));
    mx = std::max(mx, _mm512_reduce_max_ps(hi));
  }
#endif
  for (; i < n; ++i) {
    mn = std::min(mn, x[i]);
    mx = std::max(mx, x[i]);
  }
}

#ifdef __AVX512F__
// Sixteen quantized as int32, saturate(round(x / scale) + zero) but for the upper
// clamp, which the unsigned saturating narrowing store does. The rounding in the
// conversion to int32 and the clamp in integers (two instructions fewer a vector than
// rounding, adding and clamping as floats: [256, 1024] 19.6 -> 17.9 us). The quotient
// is first held below 1e9 (+inf among them), so that no finite one above int32's
// range converts to its "indefinite" INT_MIN; a NaN passes (min's second operand) and
// converts to INT_MIN, which the clamp makes 0, as -inf.
struct Quantize16 {
  __m512 s, cap = _mm512_set1_ps(1e9f);
  __m512i z, low = _mm512_setzero_si512();
  Quantize16(float scale, float zero) : s(_mm512_set1_ps(scale)), z(_mm512_set1_epi32(int32_t(zero))) {}
  __m512i operator()(__m512 v) const {
    const __m512 d = _mm512_min_ps(cap, _mm512_div_ps(v, s));
    const __m512i k = _mm512_cvt_roundps_epi32(d, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm512_max_epi32(_mm512_add_epi32(k, z), low);
  }
};
#endif

// y = saturate(round(x / scale) + zero), ties to even, as ONNX's QuantizeLinear; the
// division kept (x times 1 / scale rounds differently at some ties). NaN gives 0.
void quantize(const float* x, int64_t n, float scale, float zero, uint8_t* y) {
  int64_t i = 0;
#ifdef __AVX512F__
  const Quantize16 q(scale, zero);
  for (; i + 64 <= n; i += 64) {
    const __m512i a = q(_mm512_loadu_ps(x + i)), b = q(_mm512_loadu_ps(x + i + 16)),
                  c = q(_mm512_loadu_ps(x + i + 32)), d = q(_mm512_loadu_ps(x + i + 48));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm512_cvtusepi32_epi8(a));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i + 16), _mm512_cvtusepi32_epi8(b));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i + 32), _mm512_cvtusepi32_epi8(c));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i + 48), _mm512_cvtusepi32_epi8(d));
  }
  for (; i + 16 <= n; i += 16)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm512_cvtusepi32_epi8(q(_mm512_loadu_ps(x + i))));
#endif
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding and subtracting it rounds, ties to even
  for (; i < n; ++i) {
    const float r = ((x[i] / scale + kRound) - kRound) + zero;
    // NaN fails both tests: 0 (no float-to-int conversion of a NaN).
    y[i] = uint8_t(int32_t(r >= 0.0f ? (r <= 255.0f ? r : 255.0f) : 0.0f));
  }
}
#pragma GCC diagnostic pop

constexpr int kMaxTeam = 64;  // per-thread ranges live on the stack: no allocation a run

// One thread's share of a range (a cache line each: no false sharing).
struct alignas(64) Range {
  float mn = INFINITY, mx = -INFINITY;
};

// ONNX's scale and zero point for the range [mn, mx] widened to include 0.
void dynamicParams(float mn, float mx, float& scale, float& zero) {
  const float hi = std::max(mx, 0.0f), lo = std::max(-mn, 0.0f);
  scale = std::min(std::max((hi + lo) / 255.0f, FLT_MIN), FLT_MAX);
  zero = std::nearbyint(std::min(std::max(lo / scale, 0.0f), 255.0f));
}

// The same for the union of `threads` shares' ranges (every thread derives the same).
void sharedParams(const Range* ranges, int threads, float& scale, float& zero) {
  float mn = INFINITY, mx = -INFINITY;
  for (int k = 0; k < threads; ++k) {
    mn = std::min(mn, ranges[k].mn);
    mx = std::max(mx, ranges[k].mx);
  }
  dynamicParams(mn, mx, scale, zero);
}

// `items` items in one contiguous share per thread of the calling thread's team, a
// whole number of `granule` items each: `fill(b, e, range)` computes items [b, e) (or
// only reads them) and widens `range` to their values. With `quantized`, all meet,
// derive ONNX's scale and zero point from the union of the ranges, each thread
// quantizes its own share (`quantizeShare(b, e, scale, zero)`), and the scale and zero
// points are written. On a team of one, no parallel region.
template <typename Fill, typename QuantizeShare>
void fillThenQuantize(int64_t items, int64_t granule, Fill&& fill, QuantizeShare&& quantizeShare, bool quantized,
                      float* scale_out, float* zero_out, int32_t* zero_s32) {
  const int team = std::min(omp_get_max_threads(), kMaxTeam);
  float scale = 0, zero = 0;
  if (team <= 1) {
    Range range;
    fill(int64_t(0), items, range);
    if (quantized) {
      dynamicParams(range.mn, range.mx, scale, zero);
      quantizeShare(int64_t(0), items, scale, zero);
    }
  } else {
    Range ranges[kMaxTeam];
#pragma omp parallel num_threads(team)
    {
      const int t = omp_get_thread_num(), threads = omp_get_num_threads();
      const int64_t per = ((items + threads - 1) / threads + granule - 1) / granule * granule;
      const int64_t b = std::min(items, t * per), e = std::min(items, b + per);
      fill(b, e, ranges[t]);
      if (quantized) {
#pragma omp barrier
        float s = 0, z = 0;
        sharedParams(ranges, threads, s, z);
        quantizeShare(b, e, s, z);
        if (t == 0) {
          scale = s;
          zero = z;
        }
      }
    }
  }
  if (quantized) {
    *scale_out = scale;
    *zero_out = zero;
    *zero_s32 = int32_t(zero);
  }
}

// fillThenQuantize over items of `width` floats at `values`, quantized into `y` (null:
// no quantization) in the same order.
template <typename Fill>
void fillThenQuantize(int64_t items, int64_t width, int64_t granule, Fill&& fill, const float* values, uint8_t* y,
                      float* scale_out, float* zero_out, int32_t* zero_s32) {
  fillThenQuantize(
      items, granule, fill,
      [&](int64_t b, int64_t e, float s, float z) { quantize(values + b * width, (e - b) * width, s, z, y + b * width); },
      y != nullptr, scale_out, zero_out, zero_s32);
}

// A row kernel's `row(a, r, mn, mx)` over a.rows rows of a.cols floats into a.y, then,
// with a.q, the DynamicQuantizeLinear of a.y (fillThenQuantize: rows split between the
// team's threads, each quantizing its own).
template <typename Args, typename Row>
void rowsThenQuantize(const Args& a, Row&& row) {
  fillThenQuantize(
      a.rows, a.cols, 1,
      [&](int64_t b, int64_t e, Range& range) {
        for (int64_t r = b; r < e; ++r) row(a, r, range.mn, range.mx);
      },
      a.y, a.q, a.scale, a.zero, a.zero_s32);
}

}  // namespace

void dynamicQuantize(const float* x, int64_t n, uint8_t* y, float* scale, float* zero, int32_t* zero_s32) {
  // Shares of whole cache lines of floats (16): no two threads write one line of x's.
  fillThenQuantize(
      n, 1, 16, [&](int64_t b, int64_t e, Range& range) { minMax(x + b, e - b, range.mn, range.mx); }, x, y, scale,
      zero, zero_s32);
}

namespace {

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
// Rows [r, r + R) of addLayerNorm with NA addends: y's rows, and their smallest and
// largest values into mn, mx. The R rows go through each pass together, so that one
// row's chain of additions (its sum, its squared deviations: a row of 256 floats is
// sixteen dependent adds) overlaps the others' ([256, 256] at one thread: 20 -> 15.5 us
// for R = 4); each row's sums are taken in the same order as one row alone. The
// addends' count is a template argument and every pointer a local (stores into y may
// alias the arguments: read from `a` inside the loops, each was loaded again after
// every store, with a test of the count a vector), each row has its own smallest and
// largest values (one pair for all was a chain of dependent min and max through the
// last pass): [256, 256] with a bias row and a residual at one thread, quantization
// aside, 19.0 -> 17.4 us. What is left is mostly the first pass's traffic from L2 (two
// rows read, one written, per row; written over one of them: docs/backends.md).
template <int R, int NA>
void addLayerNormRows(const AddLayerNormArgs& a, int64_t r, float& mn, float& mx) {
  const int64_t n = a.cols;
  const float* gamma = a.gamma;
  const float* beta = a.beta;
  const float* x[R];
  float* y[R];
  const float* add[R][NA > 0 ? NA : 1];
  for (int k = 0; k < R; ++k) {
    x[k] = a.x + (r + k) * n;
    y[k] = a.y + (r + k) * n;
    for (int i = 0; i < NA; ++i) add[k][i] = a.adds[i] + (a.add_is_row[i] ? 0 : (r + k) * n);
  }
  // The sum into y (each element read before it is written: y may be x or an addend).
  float sum[R] = {}, mean[R], var[R] = {}, sd[R];
  int64_t c = 0;
#ifdef __AVX512F__
  __m512 vsum[R];
  for (int k = 0; k < R; ++k) vsum[k] = _mm512_setzero_ps();
  for (; c + 16 <= n; c += 16)
    for (int k = 0; k < R; ++k) {
      __m512 v = _mm512_loadu_ps(x[k] + c);
      for (int i = 0; i < NA; ++i) v = _mm512_add_ps(v, _mm512_loadu_ps(add[k][i] + c));
      _mm512_storeu_ps(y[k] + c, v);
      vsum[k] = _mm512_add_ps(vsum[k], v);
    }
  for (int k = 0; k < R; ++k) sum[k] = _mm512_reduce_add_ps(vsum[k]);
#endif
  for (int k = 0; k < R; ++k) {
    for (int64_t j = c; j < n; ++j) {
      float v = x[k][j];
      for (int i = 0; i < NA; ++i) v += add[k][i][j];
      y[k][j] = v;
      sum[k] += v;
    }
    mean[k] = sum[k] / float(n);
  }
  c = 0;
#ifdef __AVX512F__
  __m512 vmean[R], vvar[R];
  for (int k = 0; k < R; ++k) {
    vmean[k] = _mm512_set1_ps(mean[k]);
    vvar[k] = _mm512_setzero_ps();
  }
  for (; c + 16 <= n; c += 16)
    for (int k = 0; k < R; ++k) {
      const __m512 d = _mm512_sub_ps(_mm512_loadu_ps(y[k] + c), vmean[k]);
      vvar[k] = _mm512_fmadd_ps(d, d, vvar[k]);
    }
  for (int k = 0; k < R; ++k) var[k] = _mm512_reduce_add_ps(vvar[k]);
#endif
  // As the ONNX ops of a LayerNormalization written out compute it (Sub, Div by the
  // Sqrt, Mul, Add: no reciprocal, no fused multiply-add), so that a DynamicQuantizeLinear
  // after it rounds the values as ONNX Runtime's does.
  for (int k = 0; k < R; ++k) {
    for (int64_t j = c; j < n; ++j) var[k] += (y[k][j] - mean[k]) * (y[k][j] - mean[k]);
    sd[k] = std::sqrt(var[k] / float(n) + a.epsilon);
  }
  c = 0;
#ifdef __AVX512F__
  __m512 vsd[R], lo[R], hi[R];
  for (int k = 0; k < R; ++k) {
    vsd[k] = _mm512_set1_ps(sd[k]);
    lo[k] = _mm512_set1_ps(INFINITY);
    hi[k] = _mm512_set1_ps(-INFINITY);
  }
  for (; c + 16 <= n; c += 16) {
    const __m512 g = _mm512_loadu_ps(gamma + c), b = _mm512_loadu_ps(beta + c);
    for (int k = 0; k < R; ++k) {
      const __m512 t = _mm512_div_ps(_mm512_sub_ps(_mm512_loadu_ps(y[k] + c), vmean[k]), vsd[k]);
      const __m512 v = _mm512_add_ps(_mm512_mul_ps(t, g), b);
      _mm512_storeu_ps(y[k] + c, v);
      lo[k] = _mm512_min_ps(v, lo[k]);  // a NaN keeps the accumulator (min/max's second operand)
      hi[k] = _mm512_max_ps(v, hi[k]);
    }
  }
  for (int k = 0; k < R; ++k) {
    mn = std::min(mn, _mm512_reduce_min_ps(lo[k]));
    mx = std::max(mx, _mm512_reduce_max_ps(hi[k]));
  }
#endif
  for (int k = 0; k < R; ++k)
    for (int64_t j = c; j < n; ++j) {
      const float t = (y[k][j] - mean[k]) / sd[k], g = t * gamma[j], v = g + beta[j];
      y[k][j] = v;
      mn = std::min(mn, v);
      mx = std::max(mx, v);
    }
}

// Rows [b, e) of addLayerNorm, four at a time.
template <int NA>
void addLayerNormRange(const AddLayerNormArgs& a, int64_t b, int64_t e, float& mn, float& mx) {
  int64_t r = b;
  for (; r + 4 <= e; r += 4) addLayerNormRows<4, NA>(a, r, mn, mx);
  for (; r < e; ++r) addLayerNormRows<1, NA>(a, r, mn, mx);
}
#pragma GCC diagnostic pop

}  // namespace

void addLayerNorm(const AddLayerNormArgs& a) {
  static_assert(kMaxLayerNormAddends == 4);
  static constexpr void (*kRange[])(const AddLayerNormArgs&, int64_t, int64_t, float&, float&) = {
      addLayerNormRange<0>, addLayerNormRange<1>, addLayerNormRange<2>, addLayerNormRange<3>, addLayerNormRange<4>};
  if (a.n_adds < 0 || a.n_adds > kMaxLayerNormAddends)
    throw Error(ErrorCode::kInternal, "addLayerNorm: " + std::to_string(a.n_adds) + " addends");
  const auto range = kRange[a.n_adds];
  fillThenQuantize(
      a.rows, a.cols, 1, [&](int64_t b, int64_t e, Range& out) { range(a, b, e, out.mn, out.mx); }, a.y, a.q, a.scale,
      a.zero, a.zero_s32);
}

namespace {

// x * sigmoid(x) = x / (1 + e^-x), with e^-|x| (in (0, 1], no overflow) from a degree-5
// polynomial on |r| <= ln2 / 2 (fitted at Chebyshev nodes: 1.04e-7 relative, as close
// as the degree-7 Taylor polynomial it replaced, with two multiply-adds fewer) scaled
// by 2^n, the reciprocal of 1 + e (in [1, 2]) from rcp14 and one Newton step: within
// a few ulp of x * sigmoid(x). For x < 0: x * e / (1 + e). Four vectors a loop
// iteration, so that their dependency chains overlap: 4.2 -> 5.2 G elements/s at one
// thread (EfficientNet-B0 spends a sixth of its run here).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#ifdef __AVX512F__
// e^(r + k ln2) = e^r 2^k for |r| <= ln2 / 2: e^r from the degree-5 polynomial, 2^k by
// vscalefps.
inline __m512 expReduced(__m512 r, __m512 k) {
  __m512 p = _mm512_set1_ps(8.3751288906e-03f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1917529688e-02f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666415477e-01f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.9998869109e-01f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0000000377e+00f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0000000755e+00f));
  return _mm512_scalef_ps(p, k);
}

// e^a for a <= 0 (a NaN gives e^-104): within a few ulp; below -104 (where e^a is
// under float32's smallest subnormal) e^-104, which float32 flushes towards 0.
inline __m512 expNonPositive(__m512 a) {
  const __m512 log2e = _mm512_set1_ps(1.44269504088896341f), ln2hi = _mm512_set1_ps(0.693145751953125f),
               ln2lo = _mm512_set1_ps(1.42860682030941723212e-6f);
  a = _mm512_max_ps(a, _mm512_set1_ps(-104.0f));
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(a, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 r = _mm512_fnmadd_ps(k, ln2lo, _mm512_fnmadd_ps(k, ln2hi, a));
  return expReduced(r, k);
}

// e^a for a <= 0 as expNonPositive, with one multiply-add for the reduction r = a - k
// ln2 (ln2 rounded to float32, 1.9e-9 from it: r is off by 1.9e-9 k, 2e-8 relative
// where e^a >= 2^-10, 3e-7 at e^-104): softmax's exponential, bound by the count of its
// vector operations (this core issues about two a cycle), one fewer. A NaN stays NaN
// (max returns its second operand for one), -inf and everything below -104 give e^-104.
inline __m512 expSoftmax(__m512 a) {
  a = _mm512_max_ps(_mm512_set1_ps(-104.0f), a);
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(a, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693147180559945309f), a);
  return expReduced(r, k);
}
#endif

#ifdef __AVX512F__
// sigmoid(v) = 1 / (1 + e) for v >= 0, e / (1 + e) below, e = e^-|v| (swishRange).
inline __m512 sigmoid16(__m512 v) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 e = expNonPositive(_mm512_or_ps(v, _mm512_set1_ps(-0.0f)));  // e^-|v|
  const __m512 d = _mm512_add_ps(one, e);
  __m512 q = _mm512_rcp14_ps(d);
  q = _mm512_fmadd_ps(q, _mm512_fnmadd_ps(d, q, one), q);  // 1 / (1 + e)
  const __mmask16 neg = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ);
  return _mm512_mask_mul_ps(q, neg, q, e);
}
#endif

void swishRange(const float* x, float* y, int64_t n) {
  int64_t i = 0;
#ifdef __AVX512F__
  auto f = [](__m512 v) { return _mm512_mul_ps(v, sigmoid16(v)); };
  for (; i + 64 <= n; i += 64) {  // all four loaded before any is stored: in place works
    const __m512 a = f(_mm512_loadu_ps(x + i)), b = f(_mm512_loadu_ps(x + i + 16)),
                 c = f(_mm512_loadu_ps(x + i + 32)), d = f(_mm512_loadu_ps(x + i + 48));
    _mm512_storeu_ps(y + i, a);
    _mm512_storeu_ps(y + i + 16, b);
    _mm512_storeu_ps(y + i + 32, c);
    _mm512_storeu_ps(y + i + 48, d);
  }
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, f(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = __mmask16((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, f(_mm512_maskz_loadu_ps(m, x + i)));
    return;
  }
#endif
  for (; i < n; ++i) y[i] = x[i] / (1.0f + std::exp(-x[i]));
}

// Softmax of z = x * scale (kScaled; else z = x) over rows [0, rows) of n floats: y =
// e^(z - max) / sum per row. A NaN anywhere in a row makes it all NaN, as the
// definition computes it (found by the sum: e^NaN is NaN). Three passes a row (the
// largest z; the exponentials and their sum; the division), about 18 vector operations
// per 16 elements, bound by their count (about two a cycle) and by each row's chain of
// reductions between its passes: so one loop runs row r's exponentials, row r + 1's
// largest z and row r - 1's division together (independent work for the core while a
// row's maximum and sum are reduced; two or four rows through each pass at once were
// slower, a shorter chain of sums no faster): rows of 256 in L1, 9.3 -> 7.8 cycles a
// vector, the same bits. Each row's maximum and sum are taken in the same order as
// before (the sum one vector at a time). In place works: a row is read before it is
// written, and the next row only read.
template <bool kScaled>
void softmaxRowsRange(const float* x, float* y, int64_t rows, int64_t n, float scale) {
  // Rounding is monotonic: for a positive scale the largest z is the largest x times
  // the scale, rounded once (the same float), so the maximum multiplies nothing; only
  // for another scale does it scale each x.
  const bool scale_each = kScaled && !(scale > 0);
  auto scalarZ = [&](float v) { return kScaled ? v * scale : v; };
  // What the maximum takes of an x (z, or x for a positive scale), and the largest z
  // from the largest of those.
  auto maxTerm = [&](float v) { return scale_each ? v * scale : v; };
  auto maxOfTerms = [&](float m) { return kScaled && !scale_each ? m * scale : m; };
#ifdef __AVX512F__
  const __m512 vscale = _mm512_set1_ps(scale);
  auto z16 = [&](const float* p) {
    const __m512 v = _mm512_loadu_ps(p);
    return kScaled ? _mm512_mul_ps(v, vscale) : v;
  };
  auto m16 = [&](const float* p) {  // what the maximum takes: z, or x for a positive scale
    const __m512 v = _mm512_loadu_ps(p);
    return scale_each ? _mm512_mul_ps(v, vscale) : v;
  };
#endif
  // The largest z of the row at `xr` (two chains of maxima).
  auto rowMax = [&](const float* xr) {
    int64_t i = 0;
    float mx = -INFINITY;
#ifdef __AVX512F__
    __m512 a = _mm512_set1_ps(-INFINITY), b = a;
    for (; i + 32 <= n; i += 32) {
      a = _mm512_max_ps(a, m16(xr + i));
      b = _mm512_max_ps(b, m16(xr + i + 16));
    }
    for (; i + 16 <= n; i += 16) a = _mm512_max_ps(a, m16(xr + i));
    mx = _mm512_reduce_max_ps(_mm512_max_ps(a, b));
#endif
    for (; i < n; ++i) mx = std::max(mx, maxTerm(xr[i]));
    return maxOfTerms(mx);
  };
  auto allNan = [&](float* yr) {
    for (int64_t j = 0; j < n; ++j) yr[j] = NAN;
  };
  float mx = rows > 0 ? rowMax(x) : 0.0f;
  float* pending = nullptr;  // a row whose division is still to do, by `inv`
  float inv = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * n;
    float* yr = y + r * n;
    const float* next = r + 1 < rows ? xr + n : nullptr;
    if (std::isnan(mx) || std::isinf(mx)) {  // (inf - inf: NaN too)
      allNan(yr);
      mx = next ? rowMax(next) : 0.0f;
      continue;
    }
    int64_t i = 0;
    float sum = 0, next_mx = -INFINITY;
#ifdef __AVX512F__
    const __m512 m = _mm512_set1_ps(mx), vinv = _mm512_set1_ps(inv);
    __m512 vsum = _mm512_setzero_ps(), na = _mm512_set1_ps(-INFINITY), nb = na;
    for (; i + 32 <= n; i += 32) {
      const __m512 e = expSoftmax(_mm512_sub_ps(z16(xr + i), m)), f = expSoftmax(_mm512_sub_ps(z16(xr + i + 16), m));
      _mm512_storeu_ps(yr + i, e);
      _mm512_storeu_ps(yr + i + 16, f);
      vsum = _mm512_add_ps(_mm512_add_ps(vsum, e), f);
      if (next) {
        na = _mm512_max_ps(na, m16(next + i));
        nb = _mm512_max_ps(nb, m16(next + i + 16));
      }
      if (pending) {
        _mm512_storeu_ps(pending + i, _mm512_mul_ps(_mm512_loadu_ps(pending + i), vinv));
        _mm512_storeu_ps(pending + i + 16, _mm512_mul_ps(_mm512_loadu_ps(pending + i + 16), vinv));
      }
    }
    for (; i + 16 <= n; i += 16) {
      const __m512 e = expSoftmax(_mm512_sub_ps(z16(xr + i), m));
      _mm512_storeu_ps(yr + i, e);
      vsum = _mm512_add_ps(vsum, e);
      if (next) na = _mm512_max_ps(na, m16(next + i));
      if (pending) _mm512_storeu_ps(pending + i, _mm512_mul_ps(_mm512_loadu_ps(pending + i), vinv));
    }
    sum = _mm512_reduce_add_ps(vsum);
    next_mx = _mm512_reduce_max_ps(_mm512_max_ps(na, nb));
#endif
    for (int64_t j = i; j < n; ++j) {
      sum += (yr[j] = std::exp(scalarZ(xr[j]) - mx));
      if (next) next_mx = std::max(next_mx, maxTerm(next[j]));
      if (pending) pending[j] *= inv;
    }
    if (next) mx = maxOfTerms(next_mx);
    pending = nullptr;
    if (std::isnan(sum)) {
      allNan(yr);
    } else {
      pending = yr;
      inv = 1.0f / sum;
    }
  }
  if (pending) {
    int64_t i = 0;
#ifdef __AVX512F__
    const __m512 vinv = _mm512_set1_ps(inv);
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(pending + i, _mm512_mul_ps(_mm512_loadu_ps(pending + i), vinv));
#endif
    for (; i < n; ++i) pending[i] *= inv;
  }
}
#pragma GCC diagnostic pop

}  // namespace

void swish(const float* x, float* y, int64_t n) {
  onTeam(n, [&](int64_t b, int64_t e, int) { swishRange(x + b, y + b, e - b); });
}

namespace {

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
// y = sigmoid(x) over n floats (in place allowed): swishRange's sigmoid, not
// multiplied by x.
void sigmoidRange(const float* x, float* y, int64_t n) {
  int64_t i = 0;
#ifdef __AVX512F__
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(y + i, m, sigmoid16(_mm512_maskz_loadu_ps(m, x + i)));
  }
#endif
  for (; i < n; ++i) y[i] = 1.0f / (1.0f + std::exp(-x[i]));
}

#ifdef __AVX512F__
// Sixteen weights (those of mask) as floats: float32, or float16 converted exactly.
template <typename W>
inline __m512 loadWeights(__mmask16 mask, const W* w) {
  if constexpr (std::is_same_v<W, uint16_t>)
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask, w));
  else
    return _mm512_maskz_loadu_ps(mask, w);
}

// `width` <= 16 * NV outputs of matVec whose weights for input i start at w + i *
// stride (bias and y at those outputs): NV vectors of sums in registers down the k
// inputs, even and odd inputs in two sets (two chains a vector).
template <int NV, typename W>
void matVecOutputs(const float* x, const W* w, int64_t stride, const float* bias, float* y, int64_t k,
                   int64_t width) {
  const __mmask16 tail = __mmask16(width - 16 * (NV - 1) >= 16 ? 0xffff : (1u << (width - 16 * (NV - 1))) - 1);
  auto mask = [&](int v) { return v == NV - 1 ? tail : __mmask16(0xffff); };
  __m512 a[NV], b[NV];
  for (int v = 0; v < NV; ++v) {
    a[v] = bias ? _mm512_maskz_loadu_ps(mask(v), bias + 16 * v) : _mm512_setzero_ps();
    b[v] = _mm512_setzero_ps();
  }
  int64_t i = 0;
  for (; i + 2 <= k; i += 2) {
    const __m512 x0 = _mm512_set1_ps(x[i]), x1 = _mm512_set1_ps(x[i + 1]);
    const W* w0 = w + i * stride;
    const W* w1 = w0 + stride;
    for (int v = 0; v < NV; ++v) {
      a[v] = _mm512_fmadd_ps(x0, loadWeights(mask(v), w0 + 16 * v), a[v]);
      b[v] = _mm512_fmadd_ps(x1, loadWeights(mask(v), w1 + 16 * v), b[v]);
    }
  }
  if (i < k) {
    const __m512 x0 = _mm512_set1_ps(x[i]);
    for (int v = 0; v < NV; ++v) a[v] = _mm512_fmadd_ps(x0, loadWeights(mask(v), w + i * stride + 16 * v), a[v]);
  }
  for (int v = 0; v < NV; ++v) _mm512_mask_storeu_ps(y + 16 * v, mask(v), _mm512_add_ps(a[v], b[v]));
}
#endif
#pragma GCC diagnostic pop

#ifdef __AVX512F__
// Outputs [b, e) in pieces inside one block of B.
template <typename W>
void matVecRange(const float* x, const W* w, const float* bias, float* y, int64_t k, int64_t o, int64_t b,
                 int64_t e) {
  const int64_t block = matVecBlock(o);
  for (int64_t o0 = b; o0 < e;) {
    const int64_t width = std::min({int64_t(128), e - o0, block - o0 % block});
    const W* wb = w + (o0 / block) * k * block + o0 % block;
    const float* bb = bias ? bias + o0 : nullptr;
    switch ((width + 15) / 16) {
      case 1: matVecOutputs<1>(x, wb, block, bb, y + o0, k, width); break;
      case 2: matVecOutputs<2>(x, wb, block, bb, y + o0, k, width); break;
      case 3: matVecOutputs<3>(x, wb, block, bb, y + o0, k, width); break;
      case 4: matVecOutputs<4>(x, wb, block, bb, y + o0, k, width); break;
      case 5: matVecOutputs<5>(x, wb, block, bb, y + o0, k, width); break;
      case 6: matVecOutputs<6>(x, wb, block, bb, y + o0, k, width); break;
      case 7: matVecOutputs<7>(x, wb, block, bb, y + o0, k, width); break;
      default: matVecOutputs<8>(x, wb, block, bb, y + o0, k, width); break;
    }
    o0 += width;
  }
}
#endif

}  // namespace

int64_t matVecBlock(int64_t o) { return std::min<int64_t>(128, (o + 15) / 16 * 16); }

memory::desc matVecWeightsDesc(const std::vector<int64_t>& dims, memory::data_type t) {
  memory::desc md(dims, t, memory::format_tag::any);
  dnnl_memory_desc_t& d = md.data;
  const int64_t o = dims[0], k = dims[1], block = matVecBlock(o), padded = (o + block - 1) / block * block;
  d.format_kind = dnnl_blocked;
  d.padded_dims[0] = padded;
  dnnl_blocking_desc_t& b = d.format_desc.blocking;
  b.inner_nblks = 1;
  b.inner_blks[0] = block;
  b.inner_idxs[0] = 0;
  b.strides[0] = k * block;
  b.strides[1] = block;
  for (int i = 2; i < d.ndims; ++i) b.strides[i] = padded * k;
  return md;
}

void matVec(const float* x, const void* w, bool half, const float* bias, float* y, int64_t k, int64_t o,
            int32_t act) {
  onTeam(o, [&](int64_t b, int64_t e, int) {
#ifdef __AVX512F__
    if (half)
      matVecRange(x, static_cast<const uint16_t*>(w), bias, y, k, o, b, e);
    else
      matVecRange(x, static_cast<const float*>(w), bias, y, k, o, b, e);
#else
    const int64_t block = matVecBlock(o);
    for (int64_t j = b; j < e; ++j) {
      float sum = bias ? bias[j] : 0.0f;
      for (int64_t i = 0; i < k; ++i) {
        const int64_t at = ((j / block) * k + i) * block + j % block;
        sum += x[i] * (half ? ir::halfToFloat(static_cast<const uint16_t*>(w)[at]) : static_cast<const float*>(w)[at]);
      }
      y[j] = sum;
    }
#endif
    if (act == int32_t(dnnl::algorithm::eltwise_relu))
      for (int64_t j = b; j < e; ++j) y[j] = y[j] < 0.0f ? 0.0f : y[j];  // (a NaN stays NaN)
    else if (act == int32_t(dnnl::algorithm::eltwise_logistic))
      sigmoidRange(y + b, y + b, e - b);
    else if (act == int32_t(dnnl::algorithm::eltwise_swish))
      swishRange(y + b, y + b, e - b);
  });
}

void softmaxRows(const float* x, float* y, int64_t rows, int64_t cols, float scale) {
  onTeam(
      rows,
      [&](int64_t b, int64_t e, int) {
        if (scale == 1.0f)
          softmaxRowsRange<false>(x + b * cols, y + b * cols, e - b, cols, scale);
        else
          softmaxRowsRange<true>(x + b * cols, y + b * cols, e - b, cols, scale);
      },
      1);
}

namespace {

// GELU(v) = h + h erf(v / sqrt 2), h = v / 2, with erf from 16 pieces of degree 4
// (scripts/fit_gelu_erf.py prints them): s = |v| / sqrt 2 * kGeluErfR, piece k =
// round(s) a polynomial in t = s - k, |t| <= 1/2 (2.4e-7 from erf at most, so GELU
// within 1.2e-7 |v| plus rounding); piece 15 is 1 (float32's erf from u = 3.93 on:
// |v| >= 5.56 gives erf +-1, y = v or 0 exactly) and s is clamped to 15.25, inside
// it. No division: the vector kernel reads the pieces' coefficients with vpermps from
// five registers, the piece number being the low bits of s + 1.5 * 2^23:
// partita_bench_kernels encoder/bias_gelu/t1 91.1 -> 71.0 us (best of six medians,
// alternating with the build before, the machine busy), against the rational erf
// before, u P(u^2) / Q(u^2), bound by its division and fifteen multiply-adds.
constexpr float kGeluErfR = 3.69f;
constexpr float kGeluErfSlope = kGeluErfR * 0.70710678118654752f;  // s = |v| * this
constexpr float kGeluErfTop = 15.25f;                                // the clamp of s
constexpr float kGeluErfC0[16] = {0.000000000e+00f, 2.984698117e-01f, 5.566279292e-01f, 7.497602105e-01f, 8.747297525e-01f, 9.446703792e-01f, 9.785254002e-01f, 9.926989079e-01f, 9.978308678e-01f, 9.994379878e-01f, 9.998731613e-01f, 9.999750853e-01f, 9.999957681e-01f, 9.999993443e-01f, 9.999999404e-01f, 1.000000000e+00f};
constexpr float kGeluErfC1[16] = {3.057931066e-01f, 2.841383219e-01f, 2.279535085e-01f, 1.578965187e-01f, 9.442926198e-02f, 4.875797778e-02f, 2.173632570e-02f, 8.366116323e-03f, 2.780054929e-03f, 7.975696353e-04f, 1.975433988e-04f, 4.224031727e-05f, 7.797466424e-06f, 1.242600320e-06f, 1.709424140e-07f, 0.000000000e+00f};
constexpr float kGeluErfC2[16] = {1.371892995e-05f, -2.086712234e-02f, -3.348205239e-02f, -3.478817269e-02f, -2.774018049e-02f, -1.790462807e-02f, -9.578466415e-03f, -4.301239736e-03f, -1.633546897e-03f, -5.272549461e-04f, -1.451105927e-04f, -3.413424565e-05f, -6.874597148e-06f, -1.186967893e-06f, -1.758753285e-07f, 0.000000000e+00f};
constexpr float kGeluErfC3[16] = {-7.569239940e-03f, -5.900235847e-03f, -2.303845249e-03f, 1.216448261e-03f, 3.091624938e-03f, 3.174279584e-03f, 2.280700020e-03f, 1.274747076e-03f, 5.772501463e-04f, 2.161163138e-04f, 6.768460298e-05f, 1.786537905e-05f, 3.994456620e-06f, 7.592740303e-07f, 1.230268509e-07f, 0.000000000e+00f};
constexpr float kGeluErfC4[16] = {1.990001474e-04f, 7.214084617e-04f, 9.807654424e-04f, 7.113355678e-04f, 2.227942459e-04f, -1.434520236e-04f, -2.657852019e-04f, -2.203942131e-04f, -1.283820311e-04f, -5.794834942e-05f, -2.108597255e-05f, -6.313044196e-06f, -1.574178327e-06f, -3.295137958e-07f, -5.822094096e-08f, 0.000000000e+00f};

float geluScalar(float v) {
  if (std::isnan(v)) return v;
  const float s = std::min(std::fabs(v) * kGeluErfSlope, kGeluErfTop), k = std::nearbyint(s), t = s - k;
  const int i = int(k);
  float p = kGeluErfC4[i];
  p = std::fma(p, t, kGeluErfC3[i]);
  p = std::fma(p, t, kGeluErfC2[i]);
  p = std::fma(p, t, kGeluErfC1[i]);
  p = std::fma(p, t, kGeluErfC0[i]);
  const float h = v * 0.5f;
  return std::fma(h, std::copysign(p, v), h);
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#ifdef __AVX512F__
// The pieces' coefficients halved (exactly: a power of two), one register each.
struct GeluTable {
  static __m512 half(const float* c) { return _mm512_mul_ps(_mm512_loadu_ps(c), _mm512_set1_ps(0.5f)); }
  __m512 c0 = half(kGeluErfC0), c1 = half(kGeluErfC1), c2 = half(kGeluErfC2), c3 = half(kGeluErfC3),
         c4 = half(kGeluErfC4);
};

// The same sixteen at a time, as |v| * (erf(|u|) / 2) + v / 2: the polynomial of halved
// coefficients is exactly half of geluScalar's (every step scaled by 2^-1), and |v|
// times it is h * erf(u) with its sign, so the bits are geluScalar's fma(h, e, h)
// without applying the sign (8.9 -> 8.4 cycles a vector with the bias and range, in
// L1). t = s - round(s) by vreduceps. A NaN stays NaN (h and the product keep it);
// -inf gives inf * 1/2 - inf = NaN, as before.
inline __m512 gelu16(__m512 v, const GeluTable& g) {
  const __m512 magic = _mm512_set1_ps(12582912.0f);  // 1.5 * 2^23: s + magic rounds s to an integer
  const __m512 a = _mm512_abs_ps(v);
  const __m512 s = _mm512_min_ps(_mm512_mul_ps(a, _mm512_set1_ps(kGeluErfSlope)), _mm512_set1_ps(kGeluErfTop));
  const __m512i k = _mm512_castps_si512(_mm512_add_ps(s, magic));  // vpermps reads its low four bits: round(s)
  const __m512 t = _mm512_reduce_ps(s, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);  // s - round(s), exact
  __m512 p = _mm512_permutexvar_ps(k, g.c4);
  p = _mm512_fmadd_ps(p, t, _mm512_permutexvar_ps(k, g.c3));
  p = _mm512_fmadd_ps(p, t, _mm512_permutexvar_ps(k, g.c2));
  p = _mm512_fmadd_ps(p, t, _mm512_permutexvar_ps(k, g.c1));
  p = _mm512_fmadd_ps(p, t, _mm512_permutexvar_ps(k, g.c0));
  return _mm512_fmadd_ps(a, p, _mm512_mul_ps(v, _mm512_set1_ps(0.5f)));
}
#endif

// Row r of biasGelu: y's row, and its smallest and largest values into mn, mx (a NaN
// is skipped).
void biasGeluRow(const BiasGeluArgs& a, int64_t r, float& mn, float& mx) {
  const int64_t n = a.cols;
  const float* x = a.x + r * n;
  const float* bias = a.bias;  // a local: stores into y may alias `a`, whose fields would be loaded again
  float* y = a.y + r * n;
  int64_t c = 0;
#ifdef __AVX512F__
  __m512 lo = _mm512_set1_ps(INFINITY), hi = _mm512_set1_ps(-INFINITY);
  const GeluTable g;
  auto one = [&](int64_t at, __mmask16 m) {
    __m512 v = _mm512_maskz_loadu_ps(m, x + at);
    if (bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, bias + at));
    v = gelu16(v, g);
    _mm512_mask_storeu_ps(y + at, m, v);
    lo = _mm512_mask_min_ps(lo, m, v, lo);
    hi = _mm512_mask_max_ps(hi, m, v, hi);
  };
  for (; c + 32 <= n; c += 32) {  // two chains in flight
    one(c, 0xffff);
    one(c + 16, 0xffff);
  }
  for (; c < n; c += 16) one(c, n - c >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - c)) - 1));
  mn = std::min(mn, _mm512_reduce_min_ps(lo));
  mx = std::max(mx, _mm512_reduce_max_ps(hi));
#endif
  for (; c < n; ++c) {
    const float v = geluScalar(bias ? x[c] + bias[c] : x[c]);
    y[c] = v;
    if (!std::isnan(v)) {
      mn = std::min(mn, v);
      mx = std::max(mx, v);
    }
  }
}
#pragma GCC diagnostic pop

}  // namespace

void biasGelu(const BiasGeluArgs& a) { rowsThenQuantize(a, biasGeluRow); }

namespace {

// The number of runs (along dim c.inner) of copy c.
int64_t runsOf(const StridedCopy& c) {
  int64_t runs = 1;
  for (int d = 0; d < c.rank; ++d) runs *= d == c.inner ? 1 : c.dims[d];
  return runs;
}

// f(src offset, dst offset, the source's column: src offset % cols) for runs [b, e) of
// copy c, in order (the other dims' index, last fastest).
template <typename F>
void forEachRun(const StridedCopy& c, int64_t cols, int64_t b, int64_t e, F&& f) {
  // The first run's index in the other dims, then an odometer that moves the source
  // and destination offsets and the source's column (kept without a division a run).
  int64_t idx[kMaxCopyRank] = {}, col_step[kMaxCopyRank] = {}, col_back[kMaxCopyRank] = {};
  for (int d = 0; d < c.rank; ++d) {
    col_step[d] = c.src_strides[d] % cols;
    col_back[d] = (c.dims[d] * c.src_strides[d]) % cols;
  }
  int64_t so = c.src_offset, dof = 0, rest = b;
  for (int d = c.rank - 1; d >= 0; --d) {
    if (d == c.inner) continue;
    idx[d] = rest % c.dims[d];
    rest /= c.dims[d];
    so += idx[d] * c.src_strides[d];
    dof += idx[d] * c.dst_strides[d];
  }
  int64_t col = so % cols;
  for (int64_t run = b; run < e; ++run) {
    f(so, dof, col);
    for (int d = c.rank - 1; d >= 0; --d) {
      if (d == c.inner) continue;
      so += c.src_strides[d];
      dof += c.dst_strides[d];
      if ((col += col_step[d]) >= cols) col -= cols;
      if (++idx[d] < c.dims[d]) break;
      so -= c.dims[d] * c.src_strides[d];
      dof -= c.dims[d] * c.dst_strides[d];
      if ((col -= col_back[d]) < 0) col += cols;
      idx[d] = 0;
    }
  }
}

// Whether copy c's view holds every element of its source (`cols` floats a row, as many
// elements as the view) exactly once: offset 0, and its strides those of a dense tensor
// of its dims in some order.
bool coversSourceOnce(const StridedCopy& c, int64_t cols) {
  if (c.src_offset != 0) return false;
  int order[kMaxCopyRank], n = 0;  // by stride, smallest first (no allocation: it runs at every call)
  for (int d = 0; d < c.rank; ++d) {
    if (c.dims[d] <= 1) continue;
    int i = n++;
    for (; i > 0 && c.src_strides[order[i - 1]] > c.src_strides[d]; --i) order[i] = order[i - 1];
    order[i] = d;
  }
  int64_t next = 1;
  for (int i = 0; i < n; ++i) {
    if (c.src_strides[order[i]] != next) return false;
    next *= c.dims[order[i]];
  }
  return next % cols == 0;  // (whole rows: the source is at least `next` floats, checked when read)
}

// dst[k] = src[k] + the bias row's element of column (col + k) % cols (no bias: a copy)
// for k < len.
inline void addRowRun(const float* src, const float* bias, int64_t cols, int64_t col, int64_t len, float* dst) {
  if (!bias) {
    std::copy(src, src + len, dst);
  } else if (col + len <= cols) {  // within one row: the bias row's slice
    const float* bv = bias + col;
#pragma omp simd
    for (int64_t k = 0; k < len; ++k) dst[k] = src[k] + bv[k];
  } else {
    for (int64_t k = 0; k < len; ++k) dst[k] = src[k] + bias[(col + k) % cols];
  }
}

}  // namespace

void addRowCopy(const float* x, const float* bias, int64_t cols, const StridedCopy* copies, int n) {
  // The copies' runs one after another, split between the team in one parallel region
  // (a region each cost a fork and a join per copy: attention's Q, K and V are three).
  int64_t first[kMaxRowCopies + 1] = {};
  for (int i = 0; i < n; ++i) first[i + 1] = first[i] + runsOf(copies[i]);
  onTeam(
      first[n],
      [&](int64_t b, int64_t e, int) {
        for (int i = 0; i < n; ++i) {
          const int64_t lo = std::max(b, first[i]), hi = std::min(e, first[i + 1]);
          if (lo >= hi) continue;
          const StridedCopy& c = copies[i];
          const int64_t len = c.dims[c.inner];
          forEachRun(c, cols, lo - first[i], hi - first[i], [&](int64_t so, int64_t dof, int64_t col) {
            addRowRun(x + so, bias, cols, col, len, c.dst + dof);
          });
        }
      },
      1);
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
void addRowCopyQuantized(const float* x, const float* bias, int64_t cols, const StridedCopy& c, uint8_t* q,
                         float* scale, float* zero, int32_t* zero_s32) {
  const int64_t len = c.dims[c.inner];
  // g(v, m, at) for the run's values (x plus the bias) in pieces of at most kPiece
  // floats, `at` the destination offset of the piece's first.
  constexpr int64_t kPiece = 256;
  auto eachPiece = [&](int64_t b, int64_t e, auto&& g) {
    float tmp[kPiece];
    forEachRun(c, cols, b, e, [&](int64_t so, int64_t dof, int64_t col) {
      for (int64_t k = 0; k < len; k += kPiece) {
        const int64_t m = std::min(kPiece, len - k);
        const float* v = x + so + k;
        if (bias) {
          addRowRun(v, bias, cols, (col + k) % cols, m, tmp);
          v = tmp;
        }
        g(v, m, dof + k);
      }
    });
  };
  // The range needs every value once in any order: a view that is the whole source in
  // another order (attention's heads back to [seq, heads * dim]) is read in the
  // source's order, a share of as many floats as the share's runs hold.
  const bool whole = coversSourceOnce(c, cols);
  // (Runs are short, 64 floats for attention's heads: the range of strided runs keeps
  // its accumulators across them instead of reducing each run as minMax would.)
  fillThenQuantize(
      runsOf(c), 1,
      [&](int64_t b, int64_t e, Range& range) {
#ifdef __AVX512F__
        __m512 lo = _mm512_set1_ps(INFINITY), hi = _mm512_set1_ps(-INFINITY);
        auto widen = [&](const float* v, int64_t m, int64_t) {
          for (int64_t i = 0; i < m; i += 16) {
            const __mmask16 k = m - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (m - i)) - 1);
            const __m512 a = _mm512_maskz_loadu_ps(k, v + i);
            lo = _mm512_mask_min_ps(lo, k, a, lo);  // a NaN keeps the accumulator
            hi = _mm512_mask_max_ps(hi, k, a, hi);
          }
        };
#else
        auto widen = [&](const float* v, int64_t m, int64_t) { minMax(v, m, range.mn, range.mx); };
#endif
        if (whole && !bias) {
          minMax(x + b * len, (e - b) * len, range.mn, range.mx);
        } else if (whole) {
          float tmp[kPiece];
          for (int64_t i = b * len, end = e * len; i < end;) {  // pieces within one row
            const int64_t col = i % cols, m = std::min({kPiece, end - i, cols - col});
            addRowRun(x + i, bias, cols, col, m, tmp);
            widen(tmp, m, 0);
            i += m;
          }
        } else {
          eachPiece(b, e, widen);
        }
#ifdef __AVX512F__
        range.mn = std::min(range.mn, _mm512_reduce_min_ps(lo));
        range.mx = std::max(range.mx, _mm512_reduce_max_ps(hi));
#endif
      },
      [&](int64_t b, int64_t e, float s, float z) {
        eachPiece(b, e, [&](const float* v, int64_t m, int64_t at) { quantize(v, m, s, z, q + at); });
      },
      true, scale, zero, zero_s32);
}
#pragma GCC diagnostic pop

// Rows split by positions: a thread's rows are the bytes the swish before (split by
// elements the same way, to within a vector) left in its core's cache.
void scaleChannels(const float* x, const float* s, float* y, int64_t n, int64_t positions, int64_t c,
                   bool per_batch) {
  onTeam(
      n * positions,
      [&](int64_t b, int64_t e, int) {
        for (int64_t r = b; r < e; ++r) {
          const float* sv = per_batch ? s + (r / positions) * c : s;
          const float* xr = x + r * c;
          float* yr = y + r * c;
#pragma omp simd
          for (int64_t j = 0; j < c; ++j) yr[j] = xr[j] * sv[j];
        }
      },
      1);
}

namespace {

// acc[j] += the sum of x[r * c + j] over r < rows, for j < c: up to 128 channels at a
// time summed in registers down the rows (no store per row), then added to acc.
#ifdef __AVX512F__
template <int NV>
void sumRowsBlock(const float* x, int64_t rows, int64_t c, int64_t width, float* acc) {
  __m512 a[NV];
  for (int v = 0; v < NV; ++v) a[v] = _mm512_setzero_ps();
  const __mmask16 tail = __mmask16(width - 16 * (NV - 1) >= 16 ? 0xffff : (1u << (width - 16 * (NV - 1))) - 1);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * c;
    for (int v = 0; v < NV - 1; ++v) a[v] = _mm512_add_ps(a[v], _mm512_loadu_ps(xr + 16 * v));
    a[NV - 1] = _mm512_add_ps(a[NV - 1], _mm512_maskz_loadu_ps(tail, xr + 16 * (NV - 1)));
  }
  for (int v = 0; v < NV - 1; ++v) _mm512_storeu_ps(acc + 16 * v, _mm512_add_ps(_mm512_loadu_ps(acc + 16 * v), a[v]));
  float* last = acc + 16 * (NV - 1);
  _mm512_mask_storeu_ps(last, tail, _mm512_add_ps(_mm512_maskz_loadu_ps(tail, last), a[NV - 1]));
}
#endif

void sumRows(const float* x, int64_t rows, int64_t c, float* acc) {
#ifdef __AVX512F__
  for (int64_t j = 0; j < c; j += 128) {
    const int64_t width = std::min<int64_t>(128, c - j);
    switch ((width + 15) / 16) {
      case 1: sumRowsBlock<1>(x + j, rows, c, width, acc + j); break;
      case 2: sumRowsBlock<2>(x + j, rows, c, width, acc + j); break;
      case 3: sumRowsBlock<3>(x + j, rows, c, width, acc + j); break;
      case 4: sumRowsBlock<4>(x + j, rows, c, width, acc + j); break;
      case 5: sumRowsBlock<5>(x + j, rows, c, width, acc + j); break;
      case 6: sumRowsBlock<6>(x + j, rows, c, width, acc + j); break;
      case 7: sumRowsBlock<7>(x + j, rows, c, width, acc + j); break;
      default: sumRowsBlock<8>(x + j, rows, c, width, acc + j); break;
    }
  }
#else
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < c; ++j) acc[j] += x[r * c + j];
#endif
}

}  // namespace

// The positions of an image are summed in fixed blocks, each block's sums added in
// block order: the same result on any team size (a run that falls back to a team of
// one gives the bits a two-thread run gave).
constexpr int64_t kMeanBlockRows = 64;

namespace {

// channelMean over the blocks of positions: `rowsOf(at, rows)` readies a block's rows
// (starting at float `at` of the source) and gives where to sum them from; each
// block's sums are added into mean[i, :] in block order.
template <typename RowsOf>
void meanOverBlocks(float* mean, int64_t n, int64_t positions, int64_t c, RowsOf&& rowsOf) {
  const int64_t blocks = (positions + kMeanBlockRows - 1) / kMeanBlockRows;  // per image
  // Each block's sums (the calling thread's vector, reused across runs).
  thread_local std::vector<float> partial;
  partial.assign(size_t(n * blocks * c), 0.0f);
  float* const sums = partial.data();  // (a worker's own `partial` is another vector)
  onTeam(
      n * blocks,
      [&](int64_t b, int64_t e, int) {
        for (int64_t k = b; k < e; ++k) {
          const int64_t i = k / blocks, first = (k % blocks) * kMeanBlockRows;
          const int64_t rows = std::min(kMeanBlockRows, positions - first);
          sumRows(rowsOf((i * positions + first) * c, rows), rows, c, sums + k * c);
        }
      },
      1);
  const float count = float(positions);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < c; ++j) {
      float sum = 0;
      for (int64_t k = 0; k < blocks; ++k) sum += sums[(i * blocks + k) * c + j];
      mean[i * c + j] = sum / count;
    }
}

}  // namespace

void channelMean(const float* x, float* y, int64_t n, int64_t positions, int64_t c) {
  meanOverBlocks(y, n, positions, c, [&](int64_t at, int64_t) { return x + at; });
}

void swishChannelMean(const float* x, float* y, float* mean, int64_t n, int64_t positions, int64_t c) {
  meanOverBlocks(mean, n, positions, c, [&](int64_t at, int64_t rows) {
    swishRange(x + at, y + at, rows * c);
    return static_cast<const float*>(y + at);
  });
}

namespace {

// One output position: the max over window rows [h0, h1) and columns [w0, w1) of
// `image` (rows of `width` positions of c bytes of channels), V-byte vectors of them. KH
// and KW > 0: the whole kernel_h x kernel_w window, unrolled (no branch per element:
// the loops with a run-time count of one or two mispredicted often enough to take 6x
// the time of the unrolled form).
template <int KH, int KW, typename V, typename Load, typename Max, typename Store>
inline void maxWindow(const uint8_t* image, int64_t width, int64_t c, int64_t h0, int64_t h1, int64_t w0,
                      int64_t w1, uint8_t* out, Load load, Max max, Store store) {
  constexpr int64_t kBytes = int64_t(sizeof(V));
  const uint8_t* origin = image + (h0 * width + w0) * c;
  const int64_t row = width * c;
  for (int64_t j = 0; j < c; j += kBytes) {
    V acc = load(origin + j);
    if constexpr (KH > 0 && KW > 0) {
      for (int h = 0; h < KH; ++h)
        for (int w = 0; w < KW; ++w)
          if (h != 0 || w != 0) acc = max(acc, load(origin + h * row + w * c + j));
    } else {
      for (int64_t h = 0; h < h1 - h0; ++h)
        for (int64_t w = 0; w < w1 - w0; ++w) acc = max(acc, load(origin + h * row + w * c + j));
    }
    store(out + j, acc);
  }
}

// Every output position of rows [b, e) (of n * out_h), V-byte vectors when c is a
// whole number of them. In an output row whose windows lie inside the image's rows,
// the columns whose windows lie inside too run as one tight loop of the unrolled
// KH x KW form; the others (clipped by pads) take the general one.
template <int KH, int KW, typename V, typename Load, typename Max, typename Store>
void poolRows(const uint8_t* x, uint8_t* y, const MaxPoolWindow& p, int64_t b, int64_t e, Load load, Max max,
              Store store) {
  // Locals: a store through uint8_t* may alias any object, `p` included, and would
  // make the compiler read its fields again after every store.
  const int64_t c = p.c, in_h = p.in_h, in_w = p.in_w, out_h = p.out_h, out_w = p.out_w;
  const int64_t kernel_h = p.kernel_h, kernel_w = p.kernel_w, stride_h = p.stride_h, stride_w = p.stride_w;
  const int64_t pad_h = p.pad_h, pad_w = p.pad_w;
  // Output columns [first, last) whose windows lie inside the image's columns.
  const int64_t first = std::min(out_w, (pad_w + stride_w - 1) / stride_w);
  const int64_t last = std::max(first, std::min(out_w, in_w + pad_w - kernel_w >= 0
                                                           ? (in_w + pad_w - kernel_w) / stride_w + 1
                                                           : int64_t(0)));
  for (int64_t r = b; r < e; ++r) {
    const int64_t i = r / out_h, oh = r % out_h;
    const int64_t top = oh * stride_h - pad_h;
    const int64_t h0 = std::max<int64_t>(top, 0), h1 = std::min(top + kernel_h, in_h);
    const uint8_t* image = x + i * in_h * in_w * c;
    uint8_t* out_row = y + r * out_w * c;
    auto general = [&](int64_t ow) {
      const int64_t left = ow * stride_w - pad_w;
      const int64_t w0 = std::max<int64_t>(left, 0), w1 = std::min(left + kernel_w, in_w);
      maxWindow<0, 0, V>(image, in_w, c, h0, h1, w0, w1, out_row + ow * c, load, max, store);
    };
    if (KH == 0 || h0 != top || h1 - h0 != KH) {
      for (int64_t ow = 0; ow < out_w; ++ow) general(ow);
      continue;
    }
    for (int64_t ow = 0; ow < first; ++ow) general(ow);
    const uint8_t* origin = image + (top * in_w + first * stride_w - pad_w) * c;
    for (int64_t ow = first; ow < last; ++ow, origin += stride_w * c)
      maxWindow<KH, KW, V>(origin, in_w, c, 0, KH, 0, KW, out_row + ow * c, load, max, store);
    for (int64_t ow = last; ow < out_w; ++ow) general(ow);
  }
}

// poolRows with the kernel's extents fixed when they are 2x2 or 3x3.
template <typename V, typename Load, typename Max, typename Store>
void poolRowsFor(const uint8_t* x, uint8_t* y, const MaxPoolWindow& p, int64_t b, int64_t e, Load load, Max max,
                 Store store) {
  if (p.kernel_h == 2 && p.kernel_w == 2) return poolRows<2, 2, V>(x, y, p, b, e, load, max, store);
  if (p.kernel_h == 3 && p.kernel_w == 3) return poolRows<3, 3, V>(x, y, p, b, e, load, max, store);
  poolRows<0, 0, V>(x, y, p, b, e, load, max, store);
}

template <bool Signed>
void int8MaxPoolImpl(const uint8_t* x, uint8_t* y, const MaxPoolWindow& p) {
  onTeam(
      p.n * p.out_h,
      [&](int64_t b, int64_t e, int) {
#ifdef __AVX512BW__
        if (p.c % 64 == 0)
          return poolRowsFor<__m512i>(
              x, y, p, b, e, [](const uint8_t* q) { return _mm512_loadu_si512(q); },
              [](__m512i u, __m512i v) { return Signed ? _mm512_max_epi8(u, v) : _mm512_max_epu8(u, v); },
              [](uint8_t* q, __m512i v) { _mm512_storeu_si512(q, v); });
#endif
#ifdef __AVX2__
        if (p.c % 32 == 0)
          return poolRowsFor<__m256i>(
              x, y, p, b, e, [](const uint8_t* q) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)); },
              [](__m256i u, __m256i v) { return Signed ? _mm256_max_epi8(u, v) : _mm256_max_epu8(u, v); },
              [](uint8_t* q, __m256i v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), v); });
        if (p.c % 16 == 0)
          return poolRowsFor<__m128i>(
              x, y, p, b, e, [](const uint8_t* q) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(q)); },
              [](__m128i u, __m128i v) { return Signed ? _mm_max_epi8(u, v) : _mm_max_epu8(u, v); },
              [](uint8_t* q, __m128i v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(q), v); });
#endif
        using T = std::conditional_t<Signed, int8_t, uint8_t>;
        poolRowsFor<uint8_t>(
            x, y, p, b, e, [](const uint8_t* q) { return *q; },
            [](uint8_t u, uint8_t v) { return T(u) < T(v) ? v : u; }, [](uint8_t* q, uint8_t v) { *q = v; });
      },
      1);
}

}  // namespace

void int8MaxPool(const uint8_t* x, uint8_t* y, bool is_signed, const MaxPoolWindow& p) {
  if (is_signed)
    int8MaxPoolImpl<true>(x, y, p);
  else
    int8MaxPoolImpl<false>(x, y, p);
}

namespace {

// Whether md is a dense [N, C, H, W] float32 tensor in 16-channel blocks (aBcd16b) with
// C a multiple of 16 (no padded channels): blocks of H * W * 16 floats, one after the
// other, as oneDNN lays out that tag.
bool isDenseChannelBlocks16(const memory::desc& md) {
  const dnnl_memory_desc_t& d = md.data;
  return d.format_kind == dnnl_blocked && d.ndims == 4 && d.data_type == dnnl_f32 && d.dims[1] % 16 == 0 &&
         sameDesc(md, memory::desc(md.dims(), memory::data_type::f32, memory::format_tag::aBcd16b));
}

}  // namespace

std::optional<QuantizeCopy> planQuantizeCopy(const Step& step) {
#ifdef __AVX512F__
  if (step.kind != StepKind::kReorder || !step.post_ops.empty() || step.quant.output_scales.size() != 1 ||
      step.quant.src_zero_point != 0 || step.args.size() != 2)
    return std::nullopt;
  const Arg* x = step.find(DNNL_ARG_SRC);
  const Arg* y = step.find(DNNL_ARG_DST);
  if (!x || !y || x->md.data.data_type != dnnl_f32 || (y->md.data.data_type != dnnl_u8 && y->md.data.data_type != dnnl_s8) ||
      !isDenseUnblocked(x->md) || !isDenseUnblocked(y->md) || dimsOf(x->md) != dimsOf(y->md) ||
      elementStrides(x->md) != elementStrides(y->md))
    return std::nullopt;
  QuantizeCopy q;
  q.n = numElements(x->md);
  q.scale = step.quant.output_scales[0];
  q.zero_point = float(step.quant.dst_zero_point);
  q.is_signed = y->md.data.data_type == dnnl_s8;
  return q;
#else
  (void)step;
  return std::nullopt;
#endif
}

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_ps() as the unused merge source,
// which -Wmaybe-uninitialized reports (as for minMax): quantizeCopy to intMatMul.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
void quantizeCopy(const QuantizeCopy& q, const float* x, uint8_t* y) {
#ifdef __AVX512F__
  const float lo = q.is_signed ? -128.f : 0.f, hi = q.is_signed ? 127.f : 255.f;
  onTeam(q.n, [&](int64_t b, int64_t e, int) {
    const __m512 scale = _mm512_set1_ps(q.scale), zero = _mm512_set1_ps(q.zero_point);
    const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
    // A NaN becomes what oneDNN's reorder makes of it: 0 in uint8 (max first: max(NaN,
    // lo) is its second operand, lo) and 127 in int8 (min first: hi).
    const bool nan_high = q.is_signed;
    auto quantize = [&](__m512 v) {
      v = _mm512_add_ps(_mm512_mul_ps(v, scale), zero);
      v = nan_high ? _mm512_max_ps(_mm512_min_ps(v, vhi), vlo) : _mm512_min_ps(_mm512_max_ps(v, vlo), vhi);
      return _mm512_cvtps_epi32(v);  // nearest even
    };
    int64_t i = b;
    for (; i + 16 <= e; i += 16) {
      const __m512i v = quantize(_mm512_loadu_ps(x + i));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm512_cvtepi32_epi8(v));  // in range: truncation exact
    }
    if (i < e) {
      const __mmask16 m = __mmask16((1u << (e - i)) - 1);
      const __m512i v = quantize(_mm512_maskz_loadu_ps(m, x + i));
      _mm_mask_storeu_epi8(y + i, m, _mm512_cvtepi32_epi8(v));
    }
  });
#else
  (void)q, (void)x, (void)y;
  throw Error(ErrorCode::kInternal, "quantizeCopy: built without AVX-512");
#endif
}

std::optional<MaxPoolWindow> planFloatMaxPool(const Step& step) {
#ifdef __AVX512F__
  if (step.kind != StepKind::kPooling || step.alg != int32_t(dnnl::algorithm::pooling_max) ||
      !step.post_ops.empty() || !step.quant.empty())
    return std::nullopt;
  const Arg* x = step.find(DNNL_ARG_SRC);
  const Arg* y = step.find(DNNL_ARG_DST);
  if (!x || !y || x->md.data.data_type != dnnl_f32 || y->md.data.data_type != dnnl_f32 || x->md.data.ndims != 4)
    return std::nullopt;
  const std::vector<int64_t> in = dimsOf(x->md), out = dimsOf(y->md);
  if (!maxPoolWindowMisfit(step, in, out).empty()) return std::nullopt;
  MaxPoolWindow p;
  if (isChannelsLastDense(x->md) && isChannelsLastDense(y->md) && in[1] % 16 == 0) {
    p.n = in[0];
    p.c = in[1];
  } else if (isDenseChannelBlocks16(x->md) && isDenseChannelBlocks16(y->md)) {
    p.n = in[0] * (in[1] / 16);
    p.c = 16;
  } else {
    return std::nullopt;
  }
  p.in_h = in[2];
  p.in_w = in[3];
  p.out_h = out[2];
  p.out_w = out[3];
  p.kernel_h = step.kernel[0];
  p.kernel_w = step.kernel[1];
  p.stride_h = step.strides[0];
  p.stride_w = step.strides[1];
  p.pad_h = step.pad_l[0];
  p.pad_w = step.pad_l[1];
  return p;
#else
  (void)step;
  return std::nullopt;
#endif
}

void floatMaxPool(const float* x, float* y, const MaxPoolWindow& p) {
#ifdef __AVX512F__
  MaxPoolWindow bytes = p;  // the row loops count a position's channels in bytes
  bytes.c = p.c * int64_t(sizeof(float));
  onTeam(
      p.n * p.out_h,
      [&](int64_t b, int64_t e, int) {
        poolRowsFor<__m512>(
            reinterpret_cast<const uint8_t*>(x), reinterpret_cast<uint8_t*>(y), bytes, b, e,
            [](const uint8_t* q) { return _mm512_loadu_ps(q); },
            [](__m512 u, __m512 v) { return _mm512_max_ps(u, v); }, [](uint8_t* q, __m512 v) { _mm512_storeu_ps(q, v); });
      },
      1);
#else
  (void)x, (void)y, (void)p;
  throw Error(ErrorCode::kInternal, "floatMaxPool: built without AVX-512");
#endif
}

memory::desc columnBlocksDesc(int64_t m, int64_t n, int64_t b) {
  dnnl_memory_desc_t d = plainDesc({m, n}).data;
  d.format_desc.blocking.strides[0] = b;
  d.format_desc.blocking.strides[1] = m * b;
  d.format_desc.blocking.inner_nblks = 1;
  d.format_desc.blocking.inner_blks[0] = b;
  d.format_desc.blocking.inner_idxs[0] = 1;
  return memory::desc(d);
}

std::optional<IntMatMul> planIntMatMul(const Step& step) {
#if defined(__AVX512F__) && defined(__AVX512VNNI__)
  using dt = memory::data_type;
  using tag = memory::format_tag;
  if (step.kind != StepKind::kMatMul || !step.quant.empty() || step.find(DNNL_ARG_BIAS)) return std::nullopt;
  const Arg* x = step.find(DNNL_ARG_SRC);
  const Arg* w = step.find(DNNL_ARG_WEIGHTS);
  const Arg* y = step.find(DNNL_ARG_DST);
  const Arg* zp = step.find(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC);
  if (!x || !w || !y || !zp || w->source == ArgSource::kBuffer || x->md.data.ndims != 2 || w->md.data.ndims != 2)
    return std::nullopt;
  IntMatMul p;
  p.m = x->md.data.dims[0];
  p.k = x->md.data.dims[1];
  p.n = w->md.data.dims[1];
  if (p.m <= 0 || p.k <= 0 || p.n <= 0 || p.k % 4 != 0 || w->md.data.dims[0] != p.k) return std::nullopt;
  if (!sameDesc(x->md, memory::desc({p.m, p.k}, dt::u8, tag::ab))) return std::nullopt;
  if (!sameDesc(y->md, memory::desc({p.m, p.n}, dt::f32, tag::ab))) {
    // In blocks of columns: [N / B][M][B], B a multiple of 16 dividing N.
    const int64_t b = y->md.data.format_desc.blocking.inner_blks[0];
    if (b < 16 || b % 16 != 0 || p.n % b != 0 || !sameDesc(y->md, columnBlocksDesc(p.m, p.n, b))) return std::nullopt;
    p.column_block = b;
  }
  memory::desc packed({p.k, p.n}, dt::s8, tag::BA16a64b4a);
  packed.data.extra.flags = dnnl_memory_extra_flag_compensation_conv_asymmetric_src;
  packed.data.extra.asymm_compensation_mask = 2;  // one per column
  if (!sameDesc(w->md, packed)) return std::nullopt;
  p.panel_bytes = w->md.data.padded_dims[0] * 64;
  p.compensation_offset = w->md.data.padded_dims[0] * w->md.data.padded_dims[1];
  for (size_t i = 0; i < step.post_ops.size(); ++i) {
    const PostOp& op = step.post_ops[i];
    const bool first_mul = op.kind == PostOp::Kind::kBinary && op.alg == int32_t(dnnl::algorithm::binary_mul) &&
                           p.scale_post_op < 0 && !p.linear;
    const bool first_linear = op.kind == PostOp::Kind::kEltwise && op.alg == int32_t(dnnl::algorithm::eltwise_linear) &&
                              op.scale == 1.0f && !p.linear && p.bias_post_op < 0;
    const bool last_add = op.kind == PostOp::Kind::kBinary && op.alg == int32_t(dnnl::algorithm::binary_add) &&
                          op.scale == 1.0f && i + 1 == step.post_ops.size();
    if (first_mul && p.bias_post_op < 0) {
      const Arg* s = step.find(DNNL_ARG_ATTR_MULTIPLE_POST_OP(int(i)) | DNNL_ARG_SRC_1);
      if (!s || s->md.data.data_type != dnnl_f32 || s->md.get_size() != sizeof(float)) return std::nullopt;
      p.scale_post_op = int(i);
    } else if (first_linear) {
      p.linear = true;
      p.alpha = op.alpha;
      p.beta = op.beta;
    } else if (last_add) {  // a row: one float32 per column
      const Arg* r = step.find(DNNL_ARG_ATTR_MULTIPLE_POST_OP(int(i)) | DNNL_ARG_SRC_1);
      if (!r || !sameDesc(r->md, memory::desc({1, p.n}, dt::f32, tag::ab))) return std::nullopt;
      p.bias_post_op = int(i);
    } else {
      return std::nullopt;
    }
  }
  return p;
#else
  (void)step;
  return std::nullopt;
#endif
}

#ifdef __AVX512F__
namespace {

// The tile of both own matmuls: rows [0, MR) of 64 columns, a the first row's source
// (rows lda apart), b the first step's weights, c the first row's results (rows ldc
// apart). Each of the 24 accumulators is a variable of its own (GCC keeps an array of
// them in memory), the tile a function of its own (inlined into the loop over tiles,
// GCC spilled half of them), and the accumulators are pinned to registers at the
// loop's end (else the epilogue's conversions made GCC 12 spill them inside the loop,
// 2x slower). `Ops` is the arithmetic: Acc, the accumulators' vector; start(j), column
// vector j's first value; load(b, j), a step's weights for vector j; next(b), the
// next step's weights; broadcast(a, q), a row's source for step q in every lane;
// madd(acc, a, b); epilogue(), what the stores need, in locals, with its store(row,
// j, acc). (An intrinsic's store may alias anything: what the stores read from `ops`
// was loaded again after each of them, six loads a vector in the int8 epilogue.)
template <int MR, typename Ops>
__attribute__((noinline)) void matMulTile(const typename Ops::Src* a, int64_t lda, const typename Ops::Weight* b,
                                          int64_t steps, float* c, int64_t ldc, const Ops& ops) {
  static_assert(MR >= 1 && MR <= 6);
  using Acc = typename Ops::Acc;
  const Acc z0 = ops.start(0), z1 = ops.start(1), z2 = ops.start(2), z3 = ops.start(3);
  Acc c00 = z0, c01 = z1, c02 = z2, c03 = z3, c10 = z0, c11 = z1, c12 = z2, c13 = z3, c20 = z0, c21 = z1, c22 = z2, c23 = z3, c30 = z0, c31 = z1, c32 = z2, c33 = z3, c40 = z0, c41 = z1, c42 = z2, c43 = z3, c50 = z0, c51 = z1, c52 = z2, c53 = z3;
  for (int64_t q = 0; q < steps; ++q, b = ops.next(b)) {
    const Acc b0 = ops.load(b, 0), b1 = ops.load(b, 1), b2 = ops.load(b, 2), b3 = ops.load(b, 3);
#define PARTITA_TILE_ROW(i)                            \
  if constexpr (MR > i) {                              \
    const Acc v = ops.broadcast(a + i * lda, q);       \
    c##i##0 = Ops::madd(c##i##0, v, b0);               \
    c##i##1 = Ops::madd(c##i##1, v, b1);               \
    c##i##2 = Ops::madd(c##i##2, v, b2);               \
    c##i##3 = Ops::madd(c##i##3, v, b3);               \
  }
    PARTITA_TILE_ROW(0)
    PARTITA_TILE_ROW(1)
    PARTITA_TILE_ROW(2)
    PARTITA_TILE_ROW(3)
    PARTITA_TILE_ROW(4)
    PARTITA_TILE_ROW(5)
#undef PARTITA_TILE_ROW
  }
  asm("" : "+v"(c00), "+v"(c01), "+v"(c02), "+v"(c03), "+v"(c10), "+v"(c11), "+v"(c12), "+v"(c13), "+v"(c20), "+v"(c21), "+v"(c22), "+v"(c23));
  asm("" : "+v"(c30), "+v"(c31), "+v"(c32), "+v"(c33), "+v"(c40), "+v"(c41), "+v"(c42), "+v"(c43), "+v"(c50), "+v"(c51), "+v"(c52), "+v"(c53));
  const auto ep = ops.epilogue();
#define PARTITA_TILE_STORE(i)         \
  if constexpr (MR > i) {             \
    float* row = c + i * ldc;         \
    ep.store(row, 0, c##i##0);        \
    ep.store(row, 1, c##i##1);        \
    ep.store(row, 2, c##i##2);        \
    ep.store(row, 3, c##i##3);        \
  }
  PARTITA_TILE_STORE(0)
  PARTITA_TILE_STORE(1)
  PARTITA_TILE_STORE(2)
  PARTITA_TILE_STORE(3)
  PARTITA_TILE_STORE(4)
  PARTITA_TILE_STORE(5)
#undef PARTITA_TILE_STORE
}

// Rows [0, rows) for rows <= 6: one tile of that height.
template <typename Ops>
void matMulRows(int64_t rows, const typename Ops::Src* a, int64_t lda, const typename Ops::Weight* b, int64_t steps,
                float* c, int64_t ldc, const Ops& ops) {
  switch (rows) {
    case 6: return matMulTile<6>(a, lda, b, steps, c, ldc, ops);
    case 5: return matMulTile<5>(a, lda, b, steps, c, ldc, ops);
    case 4: return matMulTile<4>(a, lda, b, steps, c, ldc, ops);
    case 3: return matMulTile<3>(a, lda, b, steps, c, ldc, ops);
    case 2: return matMulTile<2>(a, lda, b, steps, c, ldc, ops);
    default: return matMulTile<1>(a, lda, b, steps, c, ldc, ops);
  }
}

// A panel's vectors' columns inside N (of n), from column n0.
void panelMasks(int64_t n, int64_t n0, __mmask16 (&mask)[4]) {
  for (int j = 0; j < 4; ++j) {
    const int64_t left = std::clamp<int64_t>(n - (n0 + 16 * j), 0, 16);
    mask[j] = __mmask16((1u << left) - 1);
  }
}

#ifdef __AVX512VNNI__
// The int8 matmul's arithmetic: a step is four rows of the weights (a group of
// BA16a64b4a: 64 columns x 4 int8, 256 bytes), `vpdpbusd` of four source bytes; each
// accumulator starts at its column's zero-point compensation (int32 sums wrap alike in
// any order: the same bits as adding it at the end); the epilogue converts and applies
// the post-ops in oneDNN's order. `E` is the epilogue: kAnyEpilogue tests each post-op
// and masks each vector to N; a known one (kKnownEpilogue with the flags of the
// post-ops it has: the multiply always, the linear eltwise, the bias row) takes whole
// panels only (N a multiple of 64: a transformer's projections), so that the 24 stores
// of a tile are the conversion, the post-ops and a plain store, with no test, branch
// or mask between them. Measured alone at one thread, the result's lines not in cache
// (24 buffers in turn): [256, 256] x [256, 768] with a bias row 158 -> 128-134 us,
// x [256, 1024] 187-207 -> 170-176 us; in cache within the noise (123-128 us).
enum IntEpilogue { kAnyEpilogue = 0, kKnownEpilogue = 1, kLinearPostOp = 2, kBiasPostOp = 4 };
template <int E>
struct IntTileOps {
  using Src = uint8_t;
  using Weight = int8_t;
  using Acc = __m512i;
  struct Epilogue {
    __m512 scale, alpha, beta, bias[4];  // bias: the panel's row, zero without one
    int64_t at[4];                       // where each vector's columns start in a row of the results
    __mmask16 mask[4];                   // the panel's columns inside N
    bool mul, linear, add;
    void store(float* row, int j, Acc acc) const {
      __m512 v = _mm512_cvtepi32_ps(acc);
      if constexpr (E == kAnyEpilogue) {
        if (mul) v = _mm512_mul_ps(v, scale);
        if (linear) v = _mm512_fmadd_ps(v, alpha, beta);
        if (add) v = _mm512_add_ps(v, bias[j]);
        _mm512_mask_storeu_ps(row + at[j], mask[j], v);
      } else {
        v = _mm512_mul_ps(v, scale);
        if constexpr ((E & kLinearPostOp) != 0) v = _mm512_fmadd_ps(v, alpha, beta);
        if constexpr ((E & kBiasPostOp) != 0) v = _mm512_add_ps(v, bias[j]);
        _mm512_storeu_ps(row + at[j], v);
      }
    }
  };
  __m512i compensation[4];  // zero_point * (negated column sum) for the panel's 4 vectors
  Epilogue ep;              // the panel's: set with the compensation, once a panel
  Acc start(int j) const { return compensation[j]; }
  static Acc load(const int8_t* b, int j) { return _mm512_loadu_si512(b + 64 * j); }
  static const int8_t* next(const int8_t* b) { return b + 256; }
  static Acc broadcast(const uint8_t* row, int64_t q) {
    int32_t four;
    std::memcpy(&four, row + 4 * q, sizeof four);
    return _mm512_set1_epi32(four);
  }
  static Acc madd(Acc acc, Acc a, Acc b) { return _mm512_dpbusd_epi32(acc, a, b); }
  Epilogue epilogue() const { return ep; }
};

// Rows [r0, r1) of intMatMul with epilogue E.
template <int E>
void intMatMulBand(const IntMatMul& p, const uint8_t* a, const int8_t* w, int32_t zero_point, float scale,
                   const float* bias, float* c, int64_t r0, int64_t r1) {
  const int64_t panels = (p.n + 63) / 64;
  const int32_t* negated_sums = reinterpret_cast<const int32_t*>(w + p.compensation_offset);
  IntTileOps<E> t;
  typename IntTileOps<E>::Epilogue& ep = t.ep;
  ep.scale = _mm512_set1_ps(scale);
  ep.alpha = _mm512_set1_ps(p.alpha);
  ep.beta = _mm512_set1_ps(p.beta);
  ep.mul = p.scale_post_op >= 0;
  ep.linear = p.linear;
  ep.add = bias != nullptr;
  const __m512i zp = _mm512_set1_epi32(zero_point);
  const int64_t tiles = (r1 - r0 + 5) / 6;
  // Row r's results: at c + r * ldc, column j at j (row-major) or at its block's
  // j / B * M * B + j % B (blocks of B columns).
  const int64_t b = p.column_block, ldc = b ? b : p.n;
  for (int64_t panel = 0; panel < panels; ++panel) {
    const int64_t n0 = panel * 64;
    panelMasks(p.n, n0, ep.mask);
    for (int j = 0; j < 4; ++j) {
      const int64_t col = n0 + 16 * j;
      ep.at[j] = b ? col / b * p.m * b + col % b : col;
      ep.bias[j] = bias ? _mm512_maskz_loadu_ps(ep.mask[j], bias + col) : _mm512_setzero_ps();
      // (the padding's sums are zero; read only what N holds)
      t.compensation[j] = _mm512_mullo_epi32(zp, _mm512_maskz_loadu_epi32(ep.mask[j], negated_sums + col));
    }
    const int8_t* weights = w + panel * p.panel_bytes;
    const char* next = panel + 1 < panels ? reinterpret_cast<const char*>(weights + p.panel_bytes) : nullptr;
    const int64_t per_tile = next ? (p.panel_bytes + tiles - 1) / tiles : 0;
    int64_t fetch = 0;
    for (int64_t r = r0; r < r1; r += 6) {
      for (const int64_t e = std::min(p.panel_bytes, fetch + per_tile); fetch < e; fetch += 64)
        _mm_prefetch(next + fetch, _MM_HINT_T0);
      matMulRows(std::min<int64_t>(r1 - r, 6), a + r * p.k, p.k, weights, p.k / 4, c + r * ldc, ldc, t);
    }
  }
}
#endif

// The float32 matmul's arithmetic: a step is one row of the weights (ldb floats apart),
// read only inside N.
struct FloatTileOps {
  using Src = float;
  using Weight = float;
  using Acc = __m512;
  __mmask16 mask[4];
  int64_t ldb = 0;
  static Acc start(int) { return _mm512_setzero_ps(); }
  Acc load(const float* b, int j) const { return _mm512_maskz_loadu_ps(mask[j], b + 16 * j); }
  const float* next(const float* b) const { return b + ldb; }
  static Acc broadcast(const float* row, int64_t q) { return _mm512_set1_ps(row[q]); }
  static Acc madd(Acc acc, Acc a, Acc b) { return _mm512_fmadd_ps(a, b, acc); }
  struct Epilogue {
    __mmask16 mask[4];
    void store(float* row, int j, Acc acc) const { _mm512_mask_storeu_ps(row + 16 * j, mask[j], acc); }
  };
  Epilogue epilogue() const { return {{mask[0], mask[1], mask[2], mask[3]}}; }
};

}  // namespace
#endif

void intMatMul(const IntMatMul& p, const uint8_t* a, const int8_t* w, int32_t zero_point, float scale, const float* bias,
               float* c) {
#if defined(__AVX512F__) && defined(__AVX512VNNI__)
  // Each thread its band of rows (whole tiles), as the steps after it split their work:
  // a band's results stay in its core's cache for them (split by panels, the encoder
  // ran 5 % slower at two threads). In a band panel by panel: a panel stays in L1
  // while every tile reads it, and the next one is fetched meanwhile.
  static constexpr void (*kBand[])(const IntMatMul&, const uint8_t*, const int8_t*, int32_t, float, const float*,
                                   float*, int64_t, int64_t) = {
      intMatMulBand<kKnownEpilogue>, intMatMulBand<kKnownEpilogue | kLinearPostOp>,
      intMatMulBand<kKnownEpilogue | kBiasPostOp>, intMatMulBand<kKnownEpilogue | kLinearPostOp | kBiasPostOp>};
  // The multiply then a linear eltwise without shift is how the lowering carries a
  // dynamic-int8 MatMul's scale product, ONNX's Mul(activation scale, weights' scale)
  // (dnnl_fusion.cpp, prescaled_): multiplied out here, once, so that each result is
  // ONNX's float(sum) * product, one multiply fewer a vector than the post-ops' order
  // (float(sum) * scale) * alpha, which rounds twice. (Exactly ONNX's for a product
  // written as a Mul; one written x / c is carried as x * (1 / c), within an ulp of
  // ONNX's quotient. Nothing else lowers to that pair but a Neg, exact either way: a
  // model's own second Mul by a constant is a binary post-op, left to oneDNN.)
  IntMatMul q = p;
  if (q.scale_post_op >= 0 && q.linear && q.beta == 0.0f) {
    scale *= q.alpha;
    q.linear = false;
    q.alpha = 1.0f;
  }
  const auto band = q.n % 64 != 0 || q.scale_post_op < 0 ? intMatMulBand<kAnyEpilogue>
                                                          : kBand[(q.linear ? 1 : 0) + (bias ? 2 : 0)];
  onTeam(
      q.m, [&](int64_t r0, int64_t r1, int) { band(q, a, w, zero_point, scale, bias, c, r0, r1); }, 6);
#else
  (void)p, (void)a, (void)w, (void)zero_point, (void)scale, (void)bias, (void)c;
  throw Error(ErrorCode::kInternal, "intMatMul: built without AVX-512 VNNI");
#endif
}

std::optional<FloatMatMul> planFloatMatMul(const Step& step) {
#ifdef __AVX512F__
  using dt = memory::data_type;
  if (step.kind != StepKind::kMatMul || !step.quant.empty() || !step.post_ops.empty() || step.args.size() != 3)
    return std::nullopt;
  const Arg* x = step.find(DNNL_ARG_SRC);
  const Arg* w = step.find(DNNL_ARG_WEIGHTS);
  const Arg* y = step.find(DNNL_ARG_DST);
  if (!x || !w || !y || w->source != ArgSource::kBuffer) return std::nullopt;
  // Rank 2, 3, or 4 with a leading batch of one ([1, B, M, K]: attention's heads as
  // exporters write them for a batch of one).
  const int rank = x->md.data.ndims;
  if (rank < 2 || rank > 4 || w->md.data.ndims != rank || y->md.data.ndims != rank) return std::nullopt;
  if (rank == 4 && (x->md.data.dims[0] != 1 || w->md.data.dims[0] != 1 || y->md.data.dims[0] != 1))
    return std::nullopt;
  FloatMatMul p;
  p.batch = rank >= 3 ? x->md.data.dims[rank - 3] : 1;
  p.m = x->md.data.dims[rank - 2];
  p.k = x->md.data.dims[rank - 1];
  p.n = w->md.data.dims[rank - 1];
  if (p.batch <= 0 || p.m <= 0 || p.k <= 0 || p.n <= 0 || w->md.data.dims[rank - 2] != p.k ||
      (rank >= 3 && (w->md.data.dims[rank - 3] != p.batch || y->md.data.dims[rank - 3] != p.batch)))
    return std::nullopt;
  auto rowMajor = [&](const std::vector<int64_t>& dims) {
    using tag = memory::format_tag;
    return memory::desc(memory::dims(dims.begin(), dims.end()), dt::f32,
                        rank == 4 ? tag::abcd : rank == 3 ? tag::abc : tag::ab);
  };
  auto dims = [&](int64_t rows, int64_t cols) {
    return rank == 4   ? std::vector<int64_t>{1, p.batch, rows, cols}
           : rank == 3 ? std::vector<int64_t>{p.batch, rows, cols}
                       : std::vector<int64_t>{rows, cols};
  };
  if (!sameDesc(x->md, rowMajor(dims(p.m, p.k))) || !sameDesc(w->md, rowMajor(dims(p.k, p.n)))) return std::nullopt;
  p.ldc = p.n;
  p.batch_stride = p.m * p.n;
  if (!sameDesc(y->md, rowMajor(dims(p.m, p.n)))) {
    // Plain strides with the columns contiguous, rows (and batches) not overlapping:
    // a row is p.n floats from p.ldc >= p.n apart, a batch p.m rows from its stride
    // (>= the rows' extent, or a row's width apart when the batches interleave rows).
    const dnnl_memory_desc_t& d = y->md.data;
    const auto& blk = d.format_desc.blocking;
    if (d.data_type != dnnl_f32 || d.format_kind != dnnl_blocked || blk.inner_nblks != 0 || d.offset0 != 0 ||
        blk.strides[rank - 1] != 1 || dimsOf(y->md) != dims(p.m, p.n))
      return std::nullopt;
    for (int i = 0; i < rank; ++i)
      if (d.padded_dims[i] != d.dims[i] || d.padded_offsets[i] != 0) return std::nullopt;
    p.ldc = blk.strides[rank - 2];
    p.batch_stride = rank >= 3 ? blk.strides[rank - 3] : 0;
    const bool rows_apart = p.ldc >= p.n || p.m == 1;
    const bool batches_apart = rank == 2 || p.batch == 1 || p.batch_stride >= (p.m - 1) * p.ldc + p.n ||
                               (p.batch_stride >= p.n && p.batch * p.batch_stride <= p.ldc);
    if (p.ldc < 1 || p.batch_stride < 0 || !rows_apart || !batches_apart) return std::nullopt;
  }
  return p;
#else
  (void)step;
  return std::nullopt;
#endif
}

void floatMatMul(const FloatMatMul& p, const float* a, const float* b, float* c) {
#ifdef __AVX512F__
  const int64_t bands = (p.m + 5) / 6, panels = (p.n + 63) / 64;
  // Work items (batch, band of 6 rows), batch-major: a thread's items share few
  // batches, whose weights stay in its caches.
  onTeam(
      p.batch * bands,
      [&](int64_t first, int64_t end, int) {
        for (int64_t item = first; item < end; ++item) {
          const int64_t bi = item / bands, r = (item % bands) * 6, rows = std::min<int64_t>(6, p.m - r);
          const float* ar = a + (bi * p.m + r) * p.k;
          float* cr = c + bi * p.batch_stride + r * p.ldc;
          FloatTileOps t;
          t.ldb = p.n;
          for (int64_t panel = 0; panel < panels; ++panel) {
            const int64_t n0 = panel * 64;
            panelMasks(p.n, n0, t.mask);
            matMulRows(rows, ar, p.k, b + bi * p.k * p.n + n0, p.k, cr + n0, p.ldc, t);
          }
        }
      },
      1);
#else
  (void)p, (void)a, (void)b, (void)c;
  throw Error(ErrorCode::kInternal, "floatMatMul: built without AVX-512");
#endif
}
#pragma GCC diagnostic pop

namespace {

// n bytes from src to dst (not overlapping): the blocks of a channel concat are a few
// hundred bytes, where a call to memcpy costs as much as the copy.
void copyBytes(std::byte* dst, const std::byte* src, int64_t n) {
  if (n >= 4096) {
    std::memcpy(dst, src, size_t(n));
    return;
  }
  int64_t i = 0;
#ifdef __AVX512BW__
  for (; i + 64 <= n; i += 64) _mm512_storeu_si512(dst + i, _mm512_loadu_si512(src + i));
  if (i < n) {
    const __mmask64 m = _bzhi_u64(~uint64_t(0), unsigned(n - i));
    _mm512_mask_storeu_epi8(dst + i, m, _mm512_maskz_loadu_epi8(m, src + i));
  }
#else
  std::memcpy(dst, src, size_t(n));
#endif
}

}  // namespace

std::optional<PlainConcat> planPlainConcat(const std::vector<memory::desc>& srcs, const memory::desc& dst,
                                           int axis) {
  const dnnl_memory_desc_t& d = dst.data;
  if (d.format_kind != dnnl_blocked || axis < 0 || axis >= d.ndims || srcs.empty()) return std::nullopt;
  const size_t elem = dnnl_data_type_size(d.data_type);
  if (elem == 0) return std::nullopt;
  // The destination's order, outermost first (ties: the lower dim first).
  std::vector<int> perm(size_t(d.ndims));
  for (int i = 0; i < d.ndims; ++i) perm[size_t(i)] = i;
  std::stable_sort(perm.begin(), perm.end(), [&](int a, int b) {
    return d.format_desc.blocking.strides[a] > d.format_desc.blocking.strides[b];
  });
  if (!isDenseInOrder(dst, perm)) return std::nullopt;
  PlainConcat plan;
  int64_t inner = 1;
  bool outside = true;
  for (int dim : perm) {
    if (dim == axis)
      outside = false;
    else
      (outside ? plan.outer : inner) *= d.dims[dim];
  }
  int64_t along = 0;
  for (const memory::desc& s : srcs) {
    if (s.data.data_type != d.data_type || !isDenseInOrder(s, perm)) return std::nullopt;
    for (int i = 0; i < d.ndims; ++i)
      if (i != axis && s.data.dims[i] != d.dims[i]) return std::nullopt;
    along += s.data.dims[axis];
    plan.part_bytes.push_back(s.data.dims[axis] * inner * int64_t(elem));
  }
  if (along != d.dims[axis]) return std::nullopt;
  return plan;
}

void plainConcat(const PlainConcat& p, const std::byte* const* srcs, std::byte* dst) {
  int64_t row = 0;
  for (int64_t b : p.part_bytes) row += b;
  onTeam(
      p.outer,
      [&](int64_t b, int64_t e, int) {
        for (int64_t o = b; o < e; ++o) {
          std::byte* out = dst + o * row;
          for (size_t i = 0; i < p.part_bytes.size(); ++i) {
            copyBytes(out, srcs[i] + o * p.part_bytes[i], p.part_bytes[i]);
            out += p.part_bytes[i];
          }
        }
      },
      1);
}

namespace {

// A tensor's dims of extent above 1 in dst's order, outermost first, merged where
// both layouts keep them side by side in that order (a dim's stride the next one's
// stride times its extent, in each): {extent, innermost dim's dst and src strides}.
struct DimGroup {
  int64_t extent, dst_stride, src_stride;
};
std::vector<DimGroup> mergedDims(const dnnl_memory_desc_t& d, const dnnl_memory_desc_t& s) {
  std::vector<int> order(size_t(d.ndims));
  for (int i = 0; i < d.ndims; ++i) order[size_t(i)] = i;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return d.format_desc.blocking.strides[a] > d.format_desc.blocking.strides[b];
  });
  std::vector<DimGroup> groups;
  for (int dim : order) {
    const int64_t n = d.dims[dim], ds = d.format_desc.blocking.strides[dim], ss = s.format_desc.blocking.strides[dim];
    if (n == 1) continue;
    int64_t dn = 0, sn = 0;  // (a product past int64 is no neighbour's stride)
    if (!groups.empty() && !__builtin_mul_overflow(ds, n, &dn) && !__builtin_mul_overflow(ss, n, &sn) &&
        groups.back().dst_stride == dn && groups.back().src_stride == sn) {
      groups.back().extent *= n;
      groups.back().dst_stride = ds;
      groups.back().src_stride = ss;
    } else {
      groups.push_back({n, ds, ss});
    }
  }
  return groups;
}

// Rows [r0, r1) of one transpose of three columns of 4-byte elements (an RGB image to
// channels-last): dst[r][c] = src[c][r]; with AVX-512 sixteen rows at a time, three
// loads interleaved into three stores by permutations, the rest one by one.
void transposeRowsThreeColumns(const float* src, float* dst, int64_t rows, int64_t r0, int64_t r1) {
  int64_t r = r0;
#ifdef __AVX512F__
  // Output element e of a block of 48 is column e % 3 of row e / 3: from the first
  // two columns' vectors (index row or 16 + row), or the third's.
  alignas(64) static const int32_t kIdx[3][16] = {
      {0, 16, 0, 1, 17, 1, 2, 18, 2, 3, 19, 3, 4, 20, 4, 5},
      {21, 5, 6, 22, 6, 7, 23, 7, 8, 24, 8, 9, 25, 9, 10, 26},
      {10, 11, 27, 11, 12, 28, 12, 13, 29, 13, 14, 30, 14, 15, 31, 15}};
  // Lanes taking the third column (e % 3 == 2).
  constexpr __mmask16 kThird[3] = {0x4924, 0x2492, 0x9249};
  const float* c0 = src;
  const float* c1 = src + rows;
  const float* c2 = src + 2 * rows;
  const __m512i i0 = _mm512_load_si512(kIdx[0]), i1 = _mm512_load_si512(kIdx[1]), i2 = _mm512_load_si512(kIdx[2]);
  for (; r + 16 <= r1; r += 16) {
    const __m512 a = _mm512_loadu_ps(c0 + r), b = _mm512_loadu_ps(c1 + r), c = _mm512_loadu_ps(c2 + r);
    float* out = dst + r * 3;
    _mm512_storeu_ps(out, _mm512_mask_permutexvar_ps(_mm512_permutex2var_ps(a, i0, b), kThird[0], i0, c));
    _mm512_storeu_ps(out + 16, _mm512_mask_permutexvar_ps(_mm512_permutex2var_ps(a, i1, b), kThird[1], i1, c));
    _mm512_storeu_ps(out + 32, _mm512_mask_permutexvar_ps(_mm512_permutex2var_ps(a, i2, b), kThird[2], i2, c));
  }
#endif
  for (; r < r1; ++r)
    for (int64_t c = 0; c < 3; ++c) dst[r * 3 + c] = src[c * rows + r];
}

}  // namespace

void plainTranspose(const PlainTranspose& p, const std::byte* src, std::byte* dst) {
  const int64_t matrix = p.rows * p.cols;
  onTeam(p.batch * p.rows, [&](int64_t b, int64_t e, int) {
    while (b < e) {  // a share may span matrices
      const int64_t n = b / p.rows, r0 = b % p.rows, r1 = std::min(p.rows, r0 + (e - b));
      transposeRowsThreeColumns(reinterpret_cast<const float*>(src) + n * matrix,
                                reinterpret_cast<float*>(dst) + n * matrix, p.rows, r0, r1);
      b += r1 - r0;
    }
  });
}

std::optional<PlainTranspose> planPlainTranspose(const memory::desc& src, const memory::desc& dst) {
  const dnnl_memory_desc_t &s = src.data, &d = dst.data;
  if (!isDenseUnblocked(src) || !isDenseUnblocked(dst) || s.ndims != d.ndims || s.data_type != d.data_type ||
      dnnl_data_type_size(d.data_type) != 4)
    return std::nullopt;
  for (int i = 0; i < d.ndims; ++i)
    if (s.dims[i] != d.dims[i]) return std::nullopt;
  // dst [batch][rows][cols] dense, src [batch][cols][rows] dense: each group of dims
  // kept side by side in both (mergedDims) checked by its innermost strides, which
  // with the extents inside it fix every dim's stride.
  const std::vector<DimGroup> g = mergedDims(d, s);
  if (g.size() < 2 || g.size() > 3) return std::nullopt;
  PlainTranspose p;
  const size_t k = g.size() - 2;
  if (k == 1) p.batch = g[0].extent;
  p.rows = g[k].extent;
  p.cols = g[k + 1].extent;
  // Only three columns (an RGB image to channels-last) beat oneDNN: a loop over tiles
  // of other shapes ran ShuffleNet's [58, 2] channel shuffles 15x slower than its
  // jit:uni reorder.
  if (p.cols != 3) return std::nullopt;
  int64_t matrix = 0;
  if (__builtin_mul_overflow(p.rows, p.cols, &matrix)) return std::nullopt;
  if (g[k + 1].dst_stride != 1 || g[k].dst_stride != p.cols || g[k].src_stride != 1 ||
      g[k + 1].src_stride != p.rows || (k == 1 && (g[0].dst_stride != matrix || g[0].src_stride != matrix)))
    return std::nullopt;
  return p;
}


}  // namespace partita::dnnl_backend
