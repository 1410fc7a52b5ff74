#include "backend/dnnl/dnnl_function_lowering.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "backend/dnnl/dnnl_claims.h"
#include "backend/dnnl/dnnl_kernels.h"
#include "backend/dnnl/dnnl_module.h"
#include "backend/dnnl/dnnl_primitive.h"
#include "partita/error.h"

namespace partita::dnnl_backend {

using ir::ValueId;

void internal(const std::string& msg) { throw Error(ErrorCode::kInternal, "dnnl backend: " + msg); }

namespace {

// Whether a step reads or writes buffer `b` through argument `a`.
bool touches(const Arg& a, uint64_t b) { return a.source == ArgSource::kBuffer && a.index == b; }
// Whether argument key `key` is one a step writes: DST, an RNN's DST_ITER / DST_ITER_C,
// the own kernels' extra outputs (kDynamicScaleArg ...).
bool writes(int key) { return key >= DNNL_ARG_DST && key <= kQuantizedResultArg; }
// Whether buffer `b` shares bytes with another: a view, or a view's parent.
bool aliased(const Function& fn, uint64_t b) {
  if (b >= fn.buffers.size()) return false;
  if (fn.buffers[b].view) return true;
  for (const Buffer& v : fn.buffers)
    if (v.view && v.index == b) return true;
  return false;
}

// Drops buffer `b`, which no step touches, and renumbers the buffers after it.
void dropBuffer(Function& fn, uint64_t b) {
  fn.buffers.erase(fn.buffers.begin() + std::ptrdiff_t(b));
  for (Step& step : fn.steps)
    for (Arg& a : step.args)
      if (a.source == ArgSource::kBuffer && a.index > b) --a.index;
  for (Buffer& v : fn.buffers)
    if (v.view && v.index > b) --v.index;
}

// Drops buffer `b` when no step touches it any more (a fusion took the steps that did).
void dropIfUntouched(Function& fn, uint64_t b) {
  for (const Step& step : fn.steps)
    for (const Arg& a : step.args)
      if (touches(a, b)) return;
  dropBuffer(fn, b);
}

// Two reorders through a row-major temporary that no other step touches are one,
// from the first's source straight into the second's destination:
//   * a layout change for a view (Flatten, Reshape: "to row-major") followed by a
//     QuantizeLinear or the copy to a region output: the destination's row-major bytes
//     are the same with the first's dims. (The int8 demo CNN: its channels-last pooled
//     float32 went through row-major float32 before it was quantized for fc1;
//     100x32x7x7, 29 us of 0.68 ms at 2 threads.)
//   * a Slice followed by a Transpose of it (the attention heads of a fused QKV
//     projection): the two strided views compose into one (composeViews).
// Steps are kept when oneDNN has only its reference code for the one.
void mergeReorderPairs(Function& fn) {
  for (size_t j = 0; j < fn.steps.size(); ++j) {
    const Step& second = fn.steps[j];
    const Arg* src = second.find(DNNL_ARG_SRC);
    const Arg* dst = second.find(DNNL_ARG_DST);
    if (second.kind != StepKind::kReorder || !second.post_ops.empty() || second.args.size() != 2 || !src || !dst ||
        src->source != ArgSource::kBuffer)
      continue;
    const uint64_t mid = src->index;
    if (mid >= fn.buffers.size() || fn.buffers[mid].kind != BufferKind::kTemp || aliased(fn, mid)) continue;
    // The one step before that writes `mid`, and nothing else that touches it.
    size_t writer = fn.steps.size();
    bool other = false;
    for (size_t k = 0; k < fn.steps.size() && !other; ++k)
      for (const Arg& a : fn.steps[k].args) {
        if (!touches(a, mid) || (k == j && &a == src)) continue;
        if (k < j && a.key == DNNL_ARG_DST && writer == fn.steps.size())
          writer = k;
        else
          other = true;
      }
    if (other || writer == fn.steps.size()) continue;
    const Step& first = fn.steps[writer];
    const Arg* from = first.find(DNNL_ARG_SRC);
    const Arg* through = first.find(DNNL_ARG_DST);
    if (first.kind != StepKind::kReorder || !first.post_ops.empty() || !first.quant.empty() || first.args.size() != 2 ||
        !from || !through || from->source != ArgSource::kBuffer)
      continue;
    if (!isPlainDense(through->md) || through->md.data_type() != from->md.data_type() ||
        through->md.data_type() != src->md.data_type() || aliased(fn, from->index))
      continue;
    Step merged = second;
    if (isPlainDense(src->md) && isPlainDense(dst->md) && numElements(src->md) == numElements(through->md)) {
      // Row-major on both sides of the temporary: the second's destination has the same
      // bytes with the first's dims.
      *merged.find(DNNL_ARG_SRC) = *from;
      merged.find(DNNL_ARG_DST)->md = withDataType(plainDesc(dimsOf(through->md)), dst->md.data_type());
    } else if (std::optional<memory::desc> view = composeViews(from->md, src->md)) {
      *merged.find(DNNL_ARG_SRC) = Arg{DNNL_ARG_SRC, ArgSource::kBuffer, from->index, *view, false};
    } else {
      continue;
    }
    // The first's source must still hold its value when the second runs.
    bool overwritten = false;
    for (size_t k = writer + 1; k < j; ++k)
      for (const Arg& a : fn.steps[k].args) overwritten |= touches(a, from->index) && writes(a.key);
    if (overwritten) continue;
    merged.label = first.label + "; " + second.label;
    try {
      if (isReference(makePrimitiveDesc(merged, cpuEngine()))) continue;
    } catch (const dnnl::error&) {
      continue;
    }
    fn.steps[j] = std::move(merged);
    fn.steps.erase(fn.steps.begin() + std::ptrdiff_t(writer));
    --j;
    dropBuffer(fn, mid);
  }
}

// Whether the value in buffer `b` is dead after step `j`: no later step reads it before
// one writes it (a sum post-op reads its destination).
bool deadAfter(const Function& fn, uint64_t b, size_t j) {
  for (size_t k = j + 1; k < fn.steps.size(); ++k) {
    const Step& step = fn.steps[k];
    bool read = false, written = false;
    for (const Arg& a : step.args)
      if (touches(a, b)) (writes(a.key) ? written : read) = true;
    for (const PostOp& op : step.post_ops) read |= written && op.kind == PostOp::Kind::kSum;
    if (read) return false;
    if (written) return true;
  }
  return true;
}

// Whether `a` is a dense row-major float32 argument of `n` elements (or, with `row`,
// one row of `row` elements: dims [1, ..., 1, row], added to every row of a tensor
// whose last dim is `row`; a column [..., row, 1] of as many elements is not one).
bool plainFloats(const Arg* a, int64_t n, int64_t row = -1) {
  if (!a || a->md.data.data_type != dnnl_f32 || !isPlainDense(a->md)) return false;  // (no offset either)
  const int64_t m = numElements(a->md);
  if (m == n) return true;
  if (m != row) return false;
  const int nd = a->md.data.ndims;
  if (nd < 1 || a->md.data.dims[nd - 1] != row) return false;
  for (int i = 0; i + 1 < nd; ++i)
    if (a->md.data.dims[i] != 1) return false;
  return true;
}

// The dynamic quantization step right after step `j` that reads buffer `value` (`n`
// elements), or null: what a fused row kernel takes as its quantized result.
const Step* quantizationAfter(const Function& fn, size_t j, uint64_t value, int64_t n) {
  if (j + 1 >= fn.steps.size()) return nullptr;
  const Step& next = fn.steps[j + 1];
  const Arg* in = next.find(DNNL_ARG_SRC);
  return next.kind == StepKind::kDynamicQuantize && in && in->source == ArgSource::kBuffer && in->index == value &&
                 numElements(in->md) == n
             ? &next
             : nullptr;
}

// Whether `dq` writes its outputs into buffers apart from `value` and from every
// argument in `reads`.
bool quantizationWritesApart(const Step& dq, uint64_t value, const std::vector<const Arg*>& reads) {
  for (int key : {DNNL_ARG_DST, kDynamicScaleArg, kDynamicZeroArg, kDynamicZeroS32Arg}) {
    const Arg* o = dq.find(key);
    if (!o || o->source != ArgSource::kBuffer || o->index == value) return false;
    for (const Arg* a : reads)
      if (a && touches(*a, o->index)) return false;
  }
  return true;
}

// `dq`'s outputs as the fused step's quantized result (kQuantizedResultArg and the
// scale and zero points).
void appendQuantizedResult(Step& fused, const Step& dq) {
  Arg q = *dq.find(DNNL_ARG_DST);
  q.key = kQuantizedResultArg;
  fused.args.push_back(q);
  for (int key : {kDynamicScaleArg, kDynamicZeroArg, kDynamicZeroS32Arg}) fused.args.push_back(*dq.find(key));
}

// A LayerNormalization with the Adds that feed it and the DynamicQuantizeLinear that
// reads it, as one step of the module's own kernel (StepKind::kAddLayerNorm): a
// transformer's `bias Add -> residual Add -> LayerNorm -> DynamicQuantizeLinear` were
// three or four steps, each reading what the one before wrote. Taken: float32 binary
// Add steps (their post-ops binary Adds too), each operand one row or the full size,
// right before the layer normalization and writing the value it normalizes (nothing
// else reading what they write: temporaries, or the buffer the layer normalization
// writes over, which may be a region output), and a dynamic quantization of its
// result right after it.
void fuseAddLayerNorm(Function& fn) {
  const uint32_t scale_shift =
      uint32_t(dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift);
  for (size_t j = 0; j < fn.steps.size(); ++j) {
    const Step& ln = fn.steps[j];
    if (ln.kind != StepKind::kLayerNorm || ln.flags != scale_shift || !ln.post_ops.empty() || !ln.quant.empty() ||
        ln.args.size() != 4)
      continue;
    const Arg* src = ln.find(DNNL_ARG_SRC);
    const Arg* dst = ln.find(DNNL_ARG_DST);
    if (!src || !dst || src->source != ArgSource::kBuffer || dst->source != ArgSource::kBuffer ||
        src->md.data.ndims < 1)
      continue;
    const int64_t c = src->md.data.dims[src->md.data.ndims - 1], n = numElements(src->md);
    if (c < 1 || !plainFloats(src, n) || !plainFloats(dst, n) || !plainFloats(ln.find(DNNL_ARG_SCALE), c) ||
        !plainFloats(ln.find(DNNL_ARG_SHIFT), c))
      continue;
    // The Adds right before it, last first.
    std::vector<const Arg*> addends;  // in the order they are added, once reversed per step
    std::vector<size_t> added_by;     // per addend: the index in `written` of the step that adds it
    std::vector<uint64_t> written;    // buffers the absorbed steps wrote, last step first
    uint64_t cur = src->index;
    const Arg* x = src;
    size_t first = j;
    while (first > 0 && addends.size() < size_t(kMaxLayerNormAddends)) {
      const Step& add = fn.steps[first - 1];
      const Arg* a0 = add.find(DNNL_ARG_SRC_0);
      const Arg* a1 = add.find(DNNL_ARG_SRC_1);
      // The chain goes on through whichever operand the step before wrote (x + r and
      // r + x are the same float).
      if (first >= 2 && a0 && a1 && a1->source == ArgSource::kBuffer && plainFloats(a1, n)) {
        const Arg* before = fn.steps[first - 2].find(DNNL_ARG_DST);
        if (before && before->source == ArgSource::kBuffer && before->index == a1->index &&
            before->index != a0->index)
          std::swap(a0, a1);
      }
      const Arg* out = add.find(DNNL_ARG_DST);
      if (add.kind != StepKind::kBinary || add.alg != int32_t(dnnl::algorithm::binary_add) || !add.quant.empty() ||
          add.flags != 0 || !out || out->source != ArgSource::kBuffer || out->index != cur || !plainFloats(out, n) ||
          !a0 || a0->source != ArgSource::kBuffer || !plainFloats(a0, n) || !plainFloats(a1, n, c) ||
          add.args.size() != 3 + add.post_ops.size() ||
          addends.size() + 1 + add.post_ops.size() > size_t(kMaxLayerNormAddends) ||
          (fn.buffers[cur].kind != BufferKind::kTemp && cur != dst->index) || aliased(fn, cur))
        break;
      std::vector<const Arg*> mine = {a1};
      bool ok = true;
      for (size_t i = 0; i < add.post_ops.size() && ok; ++i) {
        const PostOp& op = add.post_ops[i];
        const Arg* operand = add.find(DNNL_ARG_ATTR_MULTIPLE_POST_OP(int(i)) | DNNL_ARG_SRC_1);
        ok = op.kind == PostOp::Kind::kBinary && op.alg == int32_t(dnnl::algorithm::binary_add) &&
             plainFloats(operand, n, c);
        mine.push_back(operand);
      }
      if (!ok) break;
      addends.insert(addends.begin(), mine.begin(), mine.end());
      added_by.insert(added_by.begin(), mine.size(), written.size());
      written.push_back(cur);
      cur = a0->index;
      x = a0;
      --first;
    }
    // The dynamic quantization right after it.
    const Step* dq = quantizationAfter(fn, j, dst->index, n);
    if (addends.empty() && !dq) continue;
    // What the Adds wrote is read by nothing after the layer normalization (where its
    // result is not written over it), and none adds a value an Add before it wrote (an
    // Add written in place over its own addend, as a residual Add over the layer's
    // input is, still reads that addend's value).
    const size_t last = dq ? j + 1 : j;
    bool ok = true;
    for (uint64_t b : written) ok &= b == dst->index || deadAfter(fn, b, last);
    for (size_t i = 0; i < addends.size(); ++i)
      for (size_t w = added_by[i] + 1; w < written.size(); ++w) ok &= !touches(*addends[i], written[w]);
    if (dq) {
      std::vector<const Arg*> reads = addends;
      reads.push_back(x);
      ok &= quantizationWritesApart(*dq, dst->index, reads);
    }
    if (!ok) continue;

    Step fused;
    fused.kind = StepKind::kAddLayerNorm;
    fused.epsilon = ln.epsilon;
    for (size_t k = first; k <= last; ++k)
      fused.label += (fused.label.empty() ? "" : "+") + fn.steps[k].label;
    const memory::desc rows = plainDesc({n / c, c});
    fused.args.push_back(Arg{DNNL_ARG_SRC, ArgSource::kBuffer, x->index, rows, false});
    for (size_t i = 0; i < addends.size(); ++i) {
      Arg a = *addends[i];
      a.key = DNNL_ARG_MULTIPLE_SRC + int(i);
      fused.args.push_back(a);
    }
    fused.args.push_back(*ln.find(DNNL_ARG_SCALE));
    fused.args.push_back(*ln.find(DNNL_ARG_SHIFT));
    fused.args.push_back(Arg{DNNL_ARG_DST, ArgSource::kBuffer, dst->index, rows, false});
    if (dq) appendQuantizedResult(fused, *dq);
    fn.steps[first] = std::move(fused);
    fn.steps.erase(fn.steps.begin() + std::ptrdiff_t(first + 1), fn.steps.begin() + std::ptrdiff_t(last + 1));
    j = first;
    // Buffers no step touches now (what the Adds wrote): dropped, highest first.
    std::sort(written.begin(), written.end());
    written.erase(std::unique(written.begin(), written.end()), written.end());
    for (auto b = written.rbegin(); b != written.rend(); ++b) {
      bool used = false;
      for (const Step& step : fn.steps)
        for (const Arg& a : step.args) used |= touches(a, *b);
      if (!used && fn.buffers[*b].kind == BufferKind::kTemp && !aliased(fn, *b)) dropBuffer(fn, *b);
    }
  }
}

// Gelu (erf form) as one step of the module's own kernel (StepKind::kBiasGelu): a
// float32 binary Add of a bias row with a gelu_erf post-op (a feed-forward block's
// `bias Add -> Gelu`), or a gelu_erf eltwise step, over dense row-major tensors, with
// the DynamicQuantizeLinear that reads its result right after it (what the next int8
// MatMul quantizes) taken into the same step.
void fuseBiasGelu(Function& fn) {
  auto isGelu = [](int32_t alg, float alpha, float beta) {
    return alg == int32_t(dnnl::algorithm::eltwise_gelu_erf) && alpha == 0 && beta == 0;
  };
  for (size_t j = 0; j < fn.steps.size(); ++j) {
    const Step& st = fn.steps[j];
    if (!st.quant.empty() || st.flags != 0) continue;
    const Arg* x = nullptr;
    const Arg* bias = nullptr;
    const Arg* y = st.find(DNNL_ARG_DST);
    if (!y || y->source != ArgSource::kBuffer || y->md.data.ndims < 1) continue;
    const int64_t n = numElements(y->md), c = y->md.data.dims[y->md.data.ndims - 1];
    if (c < 1 || !plainFloats(y, n)) continue;
    if (st.kind == StepKind::kBinary && st.alg == int32_t(dnnl::algorithm::binary_add) && st.post_ops.size() == 1 &&
        st.post_ops[0].kind == PostOp::Kind::kEltwise && st.post_ops[0].scale == 1 &&
        isGelu(st.post_ops[0].alg, st.post_ops[0].alpha, st.post_ops[0].beta) && st.args.size() == 3) {
      x = st.find(DNNL_ARG_SRC_0);
      bias = st.find(DNNL_ARG_SRC_1);
      if (x && bias && c != n && plainFloats(x, -1, c) && plainFloats(bias, n)) std::swap(x, bias);  // bias + x
      if (!x || !bias || !plainFloats(x, n) || !plainFloats(bias, -1, c)) continue;
      if (bias->source == ArgSource::kBuffer && bias->index == y->index) continue;
    } else if (st.kind == StepKind::kEltwise && isGelu(st.alg, st.alpha, st.beta) && st.post_ops.empty() &&
               st.args.size() == 2) {
      x = st.find(DNNL_ARG_SRC);
      if (!x || !plainFloats(x, n)) continue;
    } else {
      continue;
    }
    if (x->source != ArgSource::kBuffer) continue;
    // The dynamic quantization right after it, writing none of what it reads.
    const Step* dq = quantizationAfter(fn, j, y->index, n);
    if (dq && !quantizationWritesApart(*dq, y->index, {x, bias})) dq = nullptr;
    Step fused;
    fused.kind = StepKind::kBiasGelu;
    fused.label = st.label + (dq ? "+" + dq->label : "");
    const memory::desc rows = plainDesc({n / c, c});
    fused.args.push_back(Arg{DNNL_ARG_SRC, ArgSource::kBuffer, x->index, rows, false});
    if (bias) {
      Arg b = *bias;
      b.key = DNNL_ARG_SRC_1;
      fused.args.push_back(b);
    }
    fused.args.push_back(Arg{DNNL_ARG_DST, ArgSource::kBuffer, y->index, rows, false});
    if (dq) appendQuantizedResult(fused, *dq);
    fn.steps[j] = std::move(fused);
    if (dq) fn.steps.erase(fn.steps.begin() + std::ptrdiff_t(j + 1));
  }
}

// A float32 matmul's last post-op scaling its product (eltwise_linear, no shift: the
// attention scores' 1 / sqrt(head dim), prescaled from the query or a Div after the
// product) taken by the softmax_rows step right after it that reads the product, as
// its scale (the same single rounding): brgemm's post-op cost 8-19 us on [4, 256, 256]
// at one thread, the multiplication as the kernel reads nothing measurable.
void foldScaleIntoSoftmax(Function& fn) {
  for (size_t j = 1; j < fn.steps.size(); ++j) {
    Step& sm = fn.steps[j];
    Step& mm = fn.steps[j - 1];
    if (sm.kind != StepKind::kSoftmaxRows || sm.alpha != 0 || mm.kind != StepKind::kMatMul || mm.post_ops.empty() ||
        !mm.quant.empty())
      continue;
    const PostOp& last = mm.post_ops.back();
    const Arg* x = sm.find(DNNL_ARG_SRC);
    const Arg* y = sm.find(DNNL_ARG_DST);
    const Arg* product = mm.find(DNNL_ARG_DST);
    if (last.kind != PostOp::Kind::kEltwise || last.alg != int32_t(dnnl::algorithm::eltwise_linear) ||
        last.beta != 0 || last.scale != 1 || last.alpha == 0 || !std::isfinite(last.alpha) || !x || !y ||
        !product || product->source != ArgSource::kBuffer || x->index != product->index ||
        !plainFloats(product, numElements(x->md)) || fn.buffers[x->index].kind != BufferKind::kTemp ||
        aliased(fn, x->index) || !(y->index == x->index || deadAfter(fn, x->index, j)))
      continue;
    bool chosen = false;
    for (const Arg& a : mm.args) chosen |= a.chosen;
    if (chosen) continue;  // (a layout oneDNN chose with the post-op in place)
    sm.alpha = last.alpha;
    mm.post_ops.pop_back();
  }
}

// For a float32 reorder add_row_copy can run (a view of a buffer, no inner blocks,
// into a dense unblocked buffer of its own that is nobody's view, both sides with a
// dim of stride 1, no post-ops or scales): that dim (copyRunDim); nullopt otherwise.
std::optional<int> ownCopyRun(const Function& fn, const Step& r) {
  const Arg* v = r.find(DNNL_ARG_SRC);
  const Arg* y = r.find(DNNL_ARG_DST);
  if (r.kind != StepKind::kReorder || !r.post_ops.empty() || !r.quant.empty() || r.args.size() != 2 || !v || !y ||
      v->source != ArgSource::kBuffer || y->source != ArgSource::kBuffer || v->index == y->index ||
      aliased(fn, y->index))
    return std::nullopt;
  const dnnl_memory_desc_t& vd = v->md.data;
  if (vd.data_type != dnnl_f32 || y->md.data.data_type != dnnl_f32 || vd.format_kind != dnnl_blocked ||
      vd.format_desc.blocking.inner_nblks != 0 || vd.ndims > kMaxCopyRank || vd.ndims < 1 || vd.offset0 < 0 ||
      !isDenseUnblocked(y->md) || dimsOf(y->md) != dimsOf(v->md))
    return std::nullopt;
  return copyRunDim(v->md, y->md);
}

// A float32 binary Add of a bias row whose result only the reorders right after it
// read, each copying a strided view of it (attention's QKV bias and its Q, K and V head
// copies, after an int8 projection whose bias stays a separate Add): one step of the
// module's own kernel (StepKind::kAddRowCopy), which adds the bias as it copies. The
// views read the Add's source in its place (the same dense row-major positions).
void fuseAddIntoCopies(Function& fn) {
  for (size_t j = 0; j < fn.steps.size(); ++j) {
    const Step& add = fn.steps[j];
    const Arg* x = add.find(DNNL_ARG_SRC_0);
    const Arg* bias = add.find(DNNL_ARG_SRC_1);
    const Arg* t = add.find(DNNL_ARG_DST);
    if (add.kind != StepKind::kBinary || add.alg != int32_t(dnnl::algorithm::binary_add) || !add.post_ops.empty() ||
        !add.quant.empty() || add.flags != 0 || add.args.size() != 3 || !x || !bias || !t ||
        t->source != ArgSource::kBuffer || x->source != ArgSource::kBuffer || t->md.data.ndims < 1)
      continue;
    const int64_t n = numElements(t->md), c = t->md.data.dims[t->md.data.ndims - 1];
    if (c < 1 || !plainFloats(t, n) || !plainFloats(x, n) || !plainFloats(bias, -1, c) ||
        fn.buffers[t->index].kind != BufferKind::kTemp || aliased(fn, t->index) || aliased(fn, x->index) ||
        (bias->source == ArgSource::kBuffer && bias->index == t->index))
      continue;
    // The reorders right after it that copy views of its result.
    size_t k = 0;
    while (k < size_t(kMaxRowCopies) && j + 1 + k < fn.steps.size()) {
      const Step& r = fn.steps[j + 1 + k];
      if (!ownCopyRun(fn, r) || r.find(DNNL_ARG_SRC)->index != t->index) break;
      const Arg* y = r.find(DNNL_ARG_DST);
      if (y->index == x->index || touches(*bias, y->index)) break;
      bool distinct = true;  // (each copy its own destination)
      for (size_t q = 0; q < k; ++q) distinct &= fn.steps[j + 1 + q].find(DNNL_ARG_DST)->index != y->index;
      if (!distinct) break;
      ++k;
    }
    if (k == 0 || !deadAfter(fn, t->index, j + k)) continue;
    Step fused;
    fused.kind = StepKind::kAddRowCopy;
    fused.label = add.label;
    fused.args.push_back(Arg{DNNL_ARG_SRC, ArgSource::kBuffer, x->index, plainDesc({n / c, c}), false});
    Arg b = *bias;
    b.key = DNNL_ARG_SRC_1;
    fused.args.push_back(b);
    for (size_t q = 0; q < k; ++q) {
      const Step& r = fn.steps[j + 1 + q];
      fused.label += "; " + r.label;
      Arg v = *r.find(DNNL_ARG_SRC);
      v.key = DNNL_ARG_MULTIPLE_SRC + int(q);
      v.index = x->index;
      fused.args.push_back(v);
      Arg y = *r.find(DNNL_ARG_DST);
      y.key = kRowCopyDst[q];
      fused.args.push_back(y);
    }
    const uint64_t result = t->index, source = x->index;
    fn.steps[j] = std::move(fused);
    fn.steps.erase(fn.steps.begin() + std::ptrdiff_t(j + 1), fn.steps.begin() + std::ptrdiff_t(j + 1 + k));
    // The Add's result, when it had a buffer of its own, is touched by no step now.
    if (result != source) dropIfUntouched(fn, result);
  }
}

// The result of an int8 projection that only an add_row_copy right after it reads, each
// copy a block of whole heads ([H, M, D] dense, of a view of columns [c0, c0 + H * D)
// of the [M, N] result: attention's Q, K and V of a fused QKV projection): the matmul
// writes its result in blocks of D columns ([N / D][M][D]; its own kernel,
// IntMatMul::column_block), so that each copy's destination is the bytes of its
// columns, and adds the copy's bias row as its last post-op. The destinations become
// views of the result's buffer (at c0 / D * M * D floats) and the copy goes (the int8
// encoder at 256 tokens: 88 us of copies a run gone, the projections 15 us slower;
// docs/backends.md).
void writeHeadsFromMatMul(Function& fn) {
  for (size_t j = 1; j < fn.steps.size(); ++j) {
    const Step& c = fn.steps[j];
    const Step& mm = fn.steps[j - 1];
    const Arg* x = c.find(DNNL_ARG_SRC);
    const Arg* y = mm.find(DNNL_ARG_DST);
    if (c.kind != StepKind::kAddRowCopy || c.find(kQuantizedResultArg) || mm.kind != StepKind::kMatMul || !x || !y ||
        x->source != ArgSource::kBuffer || y->source != ArgSource::kBuffer || x->index != y->index)
      continue;
    const uint64_t t = y->index;
    const std::optional<IntMatMul> plan = planIntMatMul(mm);
    if (!plan || plan->column_block != 0 || plan->bias_post_op >= 0 || fn.buffers[t].kind != BufferKind::kTemp ||
        fn.buffers[t].zero_padded || aliased(fn, t) || !deadAfter(fn, t, j) ||
        dimsOf(x->md) != std::vector<int64_t>{plan->m, plan->n})
      continue;
    const int64_t m = plan->m, n = plan->n;
    const Arg* bias = c.find(DNNL_ARG_SRC_1);
    if (bias && (!plainFloats(bias, -1, n) || touches(*bias, t))) continue;
    int64_t block = 0;
    std::vector<std::pair<uint64_t, uint64_t>> views;  // destination buffer, its offset in t's bytes
    std::vector<bool> taken(size_t(n), false);         // columns some copy reads (no two the same)
    bool ok = true;
    for (int q = 0; q < kMaxRowCopies && ok; ++q) {
      const Arg* v = c.find(DNNL_ARG_MULTIPLE_SRC + q);
      const Arg* d = c.find(kRowCopyDst[q]);
      if (!v && !d) break;
      ok = v && d && d->source == ArgSource::kBuffer && isDenseUnblocked(d->md) && dimsOf(d->md) == dimsOf(v->md) &&
           v->md.data.offset0 >= 0;
      if (!ok) break;
      // The view's dims (those of size 1 aside) are the head dim d (stride 1 on both
      // sides), the rows t (stride N in the result, D in the copy) and, with more than
      // one head, the heads h (stride D in the result, M * D in the copy).
      const std::vector<int64_t> dims = dimsOf(v->md), vs = elementStrides(v->md), ds = elementStrides(d->md);
      int64_t dim = 0, rows = 1, h = 1;
      for (size_t i = 0; i < dims.size(); ++i)
        if (dims[i] > 1 && vs[i] == 1 && ds[i] == 1 && dim == 0) dim = dims[i];
      for (size_t i = 0; i < dims.size() && ok; ++i) {
        if (dims[i] == 1 || (vs[i] == 1 && ds[i] == 1)) continue;
        if (vs[i] == n && ds[i] == dim && rows == 1 && dims[i] == m)
          rows = dims[i];
        else if (vs[i] == dim && ds[i] == m * dim && h == 1)
          h = dims[i];
        else
          ok = false;
      }
      const int64_t c0 = v->md.data.offset0;
      ok = ok && rows == m && dim >= 16 && dim % 16 == 0 && n % dim == 0 && (block == 0 || block == dim) &&
           c0 % dim == 0 && c0 + h * dim <= n;
      if (!ok) break;
      block = dim;
      const uint64_t b = d->index;
      ok = b != t && fn.buffers[b].kind == BufferKind::kTemp && !fn.buffers[b].zero_padded && !aliased(fn, b) &&
           fn.buffers[b].bytes == uint64_t(h * m * dim) * sizeof(float) && !(bias && touches(*bias, b));
      for (const auto& [other, at] : views) ok &= other != b;
      // Views of one column twice would share bytes that each copy had to itself.
      for (int64_t col = c0; col < c0 + h * dim && ok; ++col) ok = !taken[size_t(col)];
      for (int64_t col = c0; col < c0 + h * dim; ++col) taken[size_t(col)] = true;
      views.emplace_back(b, uint64_t(c0 / dim * m * dim) * sizeof(float));
    }
    if (!ok || views.empty()) continue;
    Step fused = mm;
    fused.label += "; " + c.label;
    fused.find(DNNL_ARG_DST)->md = columnBlocksDesc(m, n, block);
    if (bias) {
      Arg row = *bias;
      row.key = DNNL_ARG_ATTR_MULTIPLE_POST_OP(int(fused.post_ops.size())) | DNNL_ARG_SRC_1;
      row.md = plainDesc({1, n});
      fused.args.push_back(row);
      fused.post_ops.push_back(PostOp{PostOp::Kind::kBinary, int32_t(dnnl::algorithm::binary_add), 0, 0, 1.0f});
    }
    const std::optional<IntMatMul> mine = planIntMatMul(fused);
    if (!mine || mine->column_block != block || (bias && mine->bias_post_op < 0)) continue;
    try {
      (void)makePrimitiveDesc(fused, cpuEngine());  // (oneDNN's reference code where the kernel cannot run)
    } catch (const dnnl::error&) {
      continue;
    }
    for (const auto& [b, at] : views) {
      Buffer& v = fn.buffers[b];
      v.view = true;
      v.index = uint32_t(t);
      v.offset = at;
    }
    fn.steps[j - 1] = std::move(fused);
    fn.steps.erase(fn.steps.begin() + std::ptrdiff_t(j));
    --j;
  }
}

// A float32 reorder that transposes between two unblocked layouts (a strided view
// into a dense tensor, both with a dim of stride 1 of at least 16 elements, as
// attention's context heads back to [seq, heads * dim]): the add_row_copy kernel
// without a bias. oneDNN 2.6's reorder took 8 us for [4, 256, 64] at one thread and 28
// at two; the kernel splits its runs between the team.
void ownStridedCopies(Function& fn) {
  for (Step& r : fn.steps) {
    const std::optional<int> run = ownCopyRun(fn, r);
    if (!run) continue;
    const Arg* v = r.find(DNNL_ARG_SRC);
    const Arg* y = r.find(DNNL_ARG_DST);
    const int64_t floats = int64_t(fn.buffers[v->index].bytes / sizeof(float));
    if (v->md.data.dims[*run] < 16 || floats < 1 ||
        (isPlainDense(v->md) && isPlainDense(y->md)))  // (a plain copy: oneDNN's is a memcpy)
      continue;
    // Only a transposing copy (the dims in another order on the two sides): a window
    // that keeps its source's order (a channels-last Slice of half the channels, as
    // ShuffleNet's) is oneDNN's faster, 7-25 us against 12-29 at two threads.
    auto order = [](const memory::desc& md) {
      const std::vector<int64_t> st = elementStrides(md);
      std::vector<int> o(st.size());
      for (size_t d = 0; d < o.size(); ++d) o[d] = int(d);
      std::stable_sort(o.begin(), o.end(), [&](int a, int b) { return st[size_t(a)] > st[size_t(b)]; });
      return o;
    };
    if (order(v->md) == order(y->md)) continue;
    Step copy;
    copy.kind = StepKind::kAddRowCopy;
    copy.label = r.label;
    copy.args.push_back(Arg{DNNL_ARG_SRC, ArgSource::kBuffer, v->index, plainDesc({floats}), false});
    Arg view = *v;
    view.key = DNNL_ARG_MULTIPLE_SRC;
    copy.args.push_back(view);
    Arg dst = *y;
    dst.key = kRowCopyDst[0];
    copy.args.push_back(dst);
    r = std::move(copy);
  }
}

// An add_row_copy of one view without a bias right after the own float32 matmul that
// writes its source, which nothing else reads (attention's context heads back to
// [seq, heads * dim]), when the view only reorders the matmul's dims [B, M, N]: the
// matmul writes each element where the copy would put it (its result a strided view of
// the copy's destination, the columns still contiguous: FloatMatMul::ldc and
// batch_stride) and the copy goes. The dynamic quantization after it then reads a
// row-major buffer of its own (`quantizeCopies` finds no copy): at 256 tokens, one
// thread, 7.7 us a layer where the copy with the quantization took 13-14.
void writeThroughCopies(Function& fn) {
  for (size_t j = 1; j < fn.steps.size(); ++j) {
    const Step& c = fn.steps[j];
    const Step& mm = fn.steps[j - 1];
    const Arg* x = c.find(DNNL_ARG_SRC);
    const Arg* v = c.find(DNNL_ARG_MULTIPLE_SRC);
    const Arg* y = c.find(kRowCopyDst[0]);
    const Arg* r = mm.find(DNNL_ARG_DST);
    if (c.kind != StepKind::kAddRowCopy || c.args.size() != 3 || !x || !v || !y || mm.kind != StepKind::kMatMul ||
        !r || r->source != ArgSource::kBuffer || x->source != ArgSource::kBuffer || x->index != r->index ||
        y->source != ArgSource::kBuffer || y->index == r->index || v->md.data.offset0 != 0)
      continue;
    const uint64_t t = r->index;
    const std::optional<FloatMatMul> plan = planFloatMatMul(mm);
    if (!plan || plan->ldc != plan->n || plan->batch_stride != plan->m * plan->n ||
        fn.buffers[t].kind != BufferKind::kTemp || aliased(fn, t) || !deadAfter(fn, t, j) ||
        fn.buffers[y->index].zero_padded || aliased(fn, y->index))
      continue;
    bool reads_y = false;  // (the matmul must not write over what it reads)
    for (const Arg& a : mm.args) reads_y |= &a != r && touches(a, y->index);
    if (reads_y) continue;
    // Each of the matmul's dims (stride in its dense result) is one dim of the view
    // with that stride and size; its stride in the copy's destination is its stride
    // in the new result.
    const std::vector<int64_t> rd = dimsOf(r->md), rs = elementStrides(r->md);
    const std::vector<int64_t> vd = dimsOf(v->md), vs = elementStrides(v->md), ys = elementStrides(y->md);
    if (dimsOf(y->md) != vd || !isDenseUnblocked(y->md)) continue;
    std::vector<int64_t> strides(rd.size(), 0);
    std::vector<bool> used(vd.size(), false);
    bool ok = true;
    for (size_t i = 0; i < rd.size() && ok; ++i) {
      if (rd[i] == 1) continue;
      ok = false;
      for (size_t k = 0; k < vd.size() && !ok; ++k)
        if (!used[k] && vd[k] == rd[i] && vs[k] == rs[i]) {
          used[k] = ok = true;
          strides[i] = ys[k];
        }
    }
    for (size_t k = 0; k < vd.size() && ok; ++k) ok = used[k] || vd[k] == 1;
    if (!ok) continue;
    Step fused = mm;
    fused.label += "; " + c.label;
    memory::desc direct(memory::dims(rd.begin(), rd.end()), memory::data_type::f32,
                        memory::dims(strides.begin(), strides.end()));
    *fused.find(DNNL_ARG_DST) = Arg{DNNL_ARG_DST, ArgSource::kBuffer, y->index, direct, false};
    const std::optional<FloatMatMul> mine = planFloatMatMul(fused);
    if (!mine) continue;
    try {
      (void)makePrimitiveDesc(fused, cpuEngine());  // (oneDNN's matmul where the kernel cannot run)
    } catch (const dnnl::error&) {
      continue;
    }
    fn.steps[j - 1] = std::move(fused);
    fn.steps.erase(fn.steps.begin() + std::ptrdiff_t(j));
    --j;
    dropIfUntouched(fn, t);
  }
}

// An add_row_copy of one view into a row-major buffer that only the dynamic
// quantization right after it reads (attention's context heads copied back to [seq,
// heads * dim] for the output projection's int8 MatMul): the quantization made from the
// view, without the float32 copy (StepKind::kAddRowCopy with a quantized result, blob
// version 6). At 256 tokens, one thread: the copy (13 us) and the quantization (8 us)
// -> 11.4 us a layer.
void quantizeCopies(Function& fn) {
  for (size_t j = 0; j + 1 < fn.steps.size(); ++j) {
    const Step& c = fn.steps[j];
    if (c.kind != StepKind::kAddRowCopy || c.find(kQuantizedResultArg) || c.find(DNNL_ARG_MULTIPLE_SRC + 1)) continue;
    const Arg* y = c.find(kRowCopyDst[0]);
    if (!y || y->source != ArgSource::kBuffer || !isPlainDense(y->md) || fn.buffers[y->index].kind != BufferKind::kTemp ||
        aliased(fn, y->index) || !deadAfter(fn, y->index, j + 1))
      continue;
    const Step* dq = quantizationAfter(fn, j, y->index, numElements(y->md));
    if (!dq || !quantizationWritesApart(*dq, y->index, {c.find(DNNL_ARG_SRC), c.find(DNNL_ARG_SRC_1)})) continue;
    Step fused = c;
    const uint64_t copy = y->index;
    const memory::desc copy_md = y->md;
    fused.args.erase(std::find_if(fused.args.begin(), fused.args.end(),
                                  [](const Arg& a) { return a.key == kRowCopyDst[0]; }));
    appendQuantizedResult(fused, *dq);
    // The integers in the copy's order, with its dims (the quantization read them as
    // its own row-major dims: the same bytes).
    fused.find(kQuantizedResultArg)->md = withDataType(copy_md, memory::data_type::u8);
    fused.label += "; " + dq->label;
    fn.steps[j] = std::move(fused);
    fn.steps.erase(fn.steps.begin() + std::ptrdiff_t(j + 1));
    dropIfUntouched(fn, copy);
  }
}

}  // namespace

Function FunctionLowering::run() {
  const size_t n = r_.nodes.size();
  done_.assign(n, false);
  for (size_t p = 0; p < n; ++p) pos_of_[r_.nodes[p]] = p;
  for (size_t p = 0; p < n; ++p) {
    std::set<ValueId> seen;
    for (ValueId in : nodeAt(p).inputs)
      if (in != ir::kNoValue && !isConstant(in) && seen.insert(in).second) {
        consumers_[in].push_back(p);
        ++remaining_[in];
      }
  }
  for (ValueId out : r_.outputs) ++remaining_[out];
  fn_.num_inputs = uint32_t(r_.inputs.size());
  fn_.num_outputs = uint32_t(r_.outputs.size());
  for (size_t i = 0; i < r_.inputs.size(); ++i) {
    ValueId v = r_.inputs[i];
    const ir::DType t = g_.typeOf(v).dtype;
    if ((t != ir::DType::kFloat32 && t != ir::DType::kUInt8 && t != ir::DType::kInt8) || !g_.typeOf(v).isStatic())
      internal("region input '" + g_.value(v).name + "' is not a statically shaped float32, uint8 or int8 tensor");
    memory::desc md = withDataType(plainDesc(shapeOf(v)), elementType(v));
    fn_.buffers.push_back(Buffer{BufferKind::kInput, uint32_t(i), md.get_size(), false});
    buffer_values_.emplace_back();
    place(v, Loc{uint32_t(fn_.buffers.size() - 1), md});
  }
  for (size_t p = 0; p < n; ++p)
    if (!done_[p]) lowerNode(p);
  bindOutputs();
  mergeReorderPairs(fn_);
  fuseAddLayerNorm(fn_);
  fuseBiasGelu(fn_);
  foldScaleIntoSoftmax(fn_);
  fuseAddIntoCopies(fn_);
  writeHeadsFromMatMul(fn_);
  ownStridedCopies(fn_);
  writeThroughCopies(fn_);
  quantizeCopies(fn_);
  return std::move(fn_);
}

// Gives the node at `pos` to its family's member, which may absorb later nodes too.
void FunctionLowering::lowerNode(size_t pos) {
  const ir::Node& node = nodeAt(pos);
  switch (classify(node)) {
    case OpClass::kConv:
      lowerConv(pos);
      break;
    case OpClass::kMatMul:
      lowerMatMul(pos);
      break;
    case OpClass::kPool:
      lowerPool(pos);
      break;
    case OpClass::kEltwise:
      lowerEltwise(pos);
      break;
    case OpClass::kBinary:
      lowerBinary(pos);
      break;
    case OpClass::kSoftmax:
      lowerSoftmax(pos);
      break;
    case OpClass::kLayerNorm:
      lowerLayerNorm(pos);
      break;
    case OpClass::kBatchNorm:
      lowerBatchNorm(pos);
      break;
    case OpClass::kConcat:
      lowerConcat(pos);
      break;
    case OpClass::kPrelu:
      lowerPrelu(pos);
      break;
    case OpClass::kView:
      lowerView(pos);
      break;
    case OpClass::kMove:
      lowerMove(pos);
      break;
    case OpClass::kReduce:
      lowerReduce(pos);
      break;
    case OpClass::kResample:
      lowerResample(pos);
      break;
    case OpClass::kRecurrent:
      lowerRecurrent(pos);
      break;
    case OpClass::kQConv:
      lowerQConv(pos);
      break;
    case OpClass::kQMatMul:
      lowerQMatMul(pos);
      break;
    case OpClass::kDynamicQuantize:
      lowerDynamicQuantize(pos);
      break;
    case OpClass::kNone:
      internal("node '" + node.name + "' (" + node.op_type + ") is not supported");
  }
}

uint32_t FunctionLowering::newBuffer(const memory::desc& md) {
  fn_.buffers.push_back(Buffer{BufferKind::kTemp, 0, md.get_size(), hasPadding(md)});
  buffer_values_.emplace_back();
  return uint32_t(fn_.buffers.size() - 1);
}

void FunctionLowering::place(ValueId v, const Loc& loc) {
  locs_[v].push_back(loc);
  buffer_values_[loc.buffer].push_back(v);
}

std::vector<Loc>& FunctionLowering::locsOf(ValueId v) {
  auto d = deferred_.find(v);
  if (d != deferred_.end()) {
    const size_t pos = d->second;
    deferred_.erase(d);
    emitQuantize(pos);
  }
  if (!locs_.count(v) && dynamic_.count(v)) emitCentred(v);
  if (auto p = prescaled_.find(v); p != prescaled_.end()) {  // a reader other than its MatMul
    const size_t pos = p->second.pos;
    prescaled_.erase(p);
    computed_prescales_.insert(pos);
    lowerBinary(pos);
  }
  auto it = locs_.find(v);
  if (it == locs_.end()) internal("value '" + g_.value(v).name + "' used before it is computed");
  return it->second;
}

const Loc& FunctionLowering::primary(ValueId v) {
  locsOf(v);
  auto it = locs_.find(v);
  if (it == locs_.end() || it->second.empty())
    internal("value '" + g_.value(v).name + "' used before it is computed");
  return it->second.front();
}

bool FunctionLowering::bufferDead(uint32_t b) const {
  // A view's bytes are its parent's: never reused for another value.
  if (fn_.buffers[b].kind != BufferKind::kTemp || fn_.buffers[b].view) return false;
  for (ValueId v : buffer_values_[b])
    if (remaining_.at(v) > 0) return false;
  return true;
}

void FunctionLowering::consume(size_t pos) {
  done_[pos] = true;
  std::set<ValueId> seen;
  for (ValueId in : nodeAt(pos).inputs)
    if (in != ir::kNoValue && !isConstant(in) && seen.insert(in).second) --remaining_[in];
}

void FunctionLowering::consumeItem(const ChainItem& c) {
  for (size_t q : c.extra) {
    consume(q);
    // A prescaled value the item's post-ops computed (collectChain).
    auto p = prescaled_.find(nodeAt(q).outputs[0]);
    if (p != prescaled_.end() && p->second.pos == q) prescaled_.erase(p);
  }
  consume(c.pos);
}

Loc FunctionLowering::emitReorder(const Loc& src, const memory::desc& dst_md, const std::string& label) {
  Loc dst{newBuffer(dst_md), dst_md};
  Step s;
  s.kind = StepKind::kReorder;
  s.label = label;
  s.args.push_back(Arg{DNNL_ARG_SRC, ArgSource::kBuffer, src.buffer, src.md, false});
  s.args.push_back(Arg{DNNL_ARG_DST, ArgSource::kBuffer, dst.buffer, dst_md, false});
  fn_.steps.push_back(std::move(s));
  return dst;
}

// `v` in layout `want`, reordering (once) when it is not there yet.
Loc FunctionLowering::get(ValueId v, const memory::desc& want) {
  for (const Loc& l : locsOf(v))
    if (sameDesc(l.md, want)) return l;
  Loc l = emitReorder(primary(v), want, "to " + formatTag(want) + ": " + g_.value(v).name);
  place(v, l);
  return l;
}

// `v` in row-major order (the returned md has the dims of whichever layout it came from).
Loc FunctionLowering::plain(ValueId v) {
  for (const Loc& l : locsOf(v))
    if (isPlainDense(l.md)) return l;
  const Loc& p = primary(v);
  Loc l = emitReorder(p, withDataType(plainDesc(dimsOf(p.md)), elementType(v)), "to row-major: " + g_.value(v).name);
  place(v, l);
  return l;
}

// A constant operand: embedded when it is one element, borrowed otherwise.
Arg FunctionLowering::constantArg(int key, ValueId v, const memory::desc& md) {
  if (ir::shapeNumel(shapeOf(v)) == 1) return mb_.embed(key, constData(v), md, {constOf(v)});
  return mb_.borrow(key, constOf(v), md);
}

// Appends `step`, whose destination is a new row-major buffer of `dst_md`, and places
// `out` there. Throws dnnl::error when oneDNN has no implementation for the step.
void FunctionLowering::emitToNewBuffer(Step step, const memory::desc& dst_md, ValueId out) {
  const Loc dst = emitIntoNewBuffer(std::move(step), dst_md, dst_md);
  place(out, Loc{dst.buffer, plainDesc(shapeOf(out))});
}

// The same over a dead source buffer of the result's size (the header says when).
void FunctionLowering::emitOverDeadSource(Step step, uint32_t src, bool may_overwrite, const memory::desc& dst_md,
                                          ValueId out) {
  if (may_overwrite && bufferDead(src) && fn_.buffers[src].bytes == dst_md.get_size()) {
    step.args.push_back(bufferArg(DNNL_ARG_DST, src, dst_md));
    if (!isOwnKernel(step.kind)) makePrimitiveDesc(step, cpuEngine());
    fn_.steps.push_back(std::move(step));
    place(out, Loc{src, plainDesc(shapeOf(out))});
    return;
  }
  emitToNewBuffer(std::move(step), dst_md, out);
}

Loc FunctionLowering::emitIntoNewBuffer(Step step, const memory::desc& buffer_md, const memory::desc& dst_view) {
  const uint32_t dst = newBuffer(buffer_md);
  step.args.push_back(bufferArg(DNNL_ARG_DST, dst, dst_view));
  if (!isOwnKernel(step.kind)) makePrimitiveDesc(step, cpuEngine());
  fn_.steps.push_back(std::move(step));
  return Loc{dst, buffer_md};
}

std::string FunctionLowering::labelOf(size_t pos, const std::vector<ChainItem>& chain) const {
  std::string s = nodeAt(pos).name.empty() ? nodeAt(pos).op_type : nodeAt(pos).name;
  for (const ChainItem& c : chain)
    for (size_t q : c.extra) s += "+" + (nodeAt(q).name.empty() ? nodeAt(q).op_type : nodeAt(q).name);
  for (const ChainItem& c : chain)
    if (c.pos != pos) s += "+" + (nodeAt(c.pos).name.empty() ? nodeAt(c.pos).op_type : nodeAt(c.pos).name);
  return s;
}

// Region outputs are row-major in the caller's tensors. A temporary that already holds
// an output row-major becomes that output (no copy); otherwise a reorder writes it.
void FunctionLowering::bindOutputs() {
  std::vector<bool> taken(fn_.buffers.size(), false);
  for (size_t i = 0; i < r_.outputs.size(); ++i) {
    ValueId v = r_.outputs[i];
    if (!available(v)) internal("region output '" + g_.value(v).name + "' was never computed");
    const int64_t numel = ir::shapeNumel(shapeOf(v));
    bool bound = false;
    for (const Loc& l : locsOf(v)) {
      Buffer& b = fn_.buffers[l.buffer];
      if (b.kind != BufferKind::kTemp || taken[l.buffer] || !isPlainDense(l.md) || numElements(l.md) != numel)
        continue;
      b.kind = BufferKind::kOutput;
      b.index = uint32_t(i);
      taken[l.buffer] = true;
      bound = true;
      break;
    }
    if (bound) continue;
    const Loc& p = primary(v);
    Loc l = emitReorder(p, withDataType(plainDesc(dimsOf(p.md)), elementType(v)), "output: " + g_.value(v).name);
    fn_.buffers[l.buffer].kind = BufferKind::kOutput;
    fn_.buffers[l.buffer].index = uint32_t(i);
    taken.resize(fn_.buffers.size(), false);
    taken[l.buffer] = true;
  }
}

}  // namespace partita::dnnl_backend
