// Lowering of the sliding-window ops: Conv and ConvTranspose (weights reordered into
// the layout oneDNN chooses, an inference BatchNormalization right after a Conv folded
// into its weights and bias, post-ops fused) and pooling.
#include "backend/dnnl/dnnl_function_lowering.h"

#include "backend/dnnl/dnnl_kernels.h"

#include <cmath>

#include "backend/dnnl/dnnl_claims.h"
#include "backend/dnnl/dnnl_module.h"
#include "backend/dnnl/dnnl_primitive.h"
#include "ir/dtype.h"
#include "kernels/op_util.h"

namespace partita::dnnl_backend {

using ir::ValueId;

// A ConvTranspose whose stride equals its kernel and that neither pads nor overlaps
// (FPN and U-Net upsampling: every output pixel comes from exactly one input pixel and
// one kernel tap) is a 1x1 convolution to Co*kh*kw channels followed by depth-to-space.
// oneDNN 2.6's deconvolution runs these at a tenth of its convolution's GFLOP/s
// (docs/benchmarks.md, kernel table). Lowered as:
//   1. a 1x1 convolution whose output channel (i*kw + j)*Co + co holds tap (i, j) of
//      output channel co: weights derived at compile time in that order, the bias
//      repeated per tap (embedded), the activations after the ConvTranspose fused as
//      post-ops (elementwise: they commute with moving pixels); its destination is
//      channels-last, so each pixel's kh*kw*Co values are contiguous;
//   2. one reorder that moves those runs of kw*Co values to their output rows
//      (6-D strided views of the two channels-last buffers), leaving the output
//      channels-last.
bool FunctionLowering::lowerUpsamplingDeconv(size_t pos, const ConvSpec& spec) {
  if (!spec.transposed || spec.groups != 1 || spec.in_shape.size() != 4) return false;
  const int64_t kh = spec.weight_shape[2], kw = spec.weight_shape[3];
  if (spec.strides != std::vector<int64_t>{kh, kw}) return false;
  for (const auto* v : {&spec.dilates, &spec.pad_l, &spec.pad_r})
    for (int64_t e : *v)
      if (e != 0) return false;
  const int64_t N = spec.in_shape[0], C = spec.in_shape[1], H = spec.in_shape[2], W = spec.in_shape[3];
  const int64_t Co = spec.out_shape[1], K = kh * kw;
  if (spec.out_shape != std::vector<int64_t>{N, Co, H * kh, W * kw}) return false;

  const ir::Node& node = nodeAt(pos);
  const ValueId x = node.inputs[0], out = node.outputs[0];
  const std::vector<int64_t> mid_dims = {N, K * Co, H, W};
  const memory::desc mid_md = withStrides(mid_dims, {H * W * K * Co, 1, W * K * Co, K * Co});
  Step step;
  step.kind = StepKind::kConvolution;
  step.strides = {1, 1};
  step.dilates = {0, 0};
  step.pad_l = {0, 0};
  step.pad_r = {0, 0};
  step.args.push_back(Arg{DNNL_ARG_SRC, ArgSource::kBuffer, 0, anyDesc(spec.in_shape), true});
  // The weights are computed from the ConvTranspose's (`folded`): a replay of a
  // shape-polymorphic region reads them in the layout the compiler stored.
  const ir::ConstId w_id = constOf(node.inputs[1]);
  if (std::optional<memory::desc> stored = mb_.storedWeights(w_id, true))
    step.args.push_back(Arg{DNNL_ARG_WEIGHTS, ArgSource::kConstant, 0, *stored, false});
  else
    step.args.push_back(Arg{DNNL_ARG_WEIGHTS, ArgSource::kConstant, 0, anyDesc({K * Co, C, 1, 1}), true});
  if (spec.has_bias) step.args.push_back(Arg{DNNL_ARG_BIAS, ArgSource::kConstant, 0, plainDesc({K * Co}), false});
  step.args.push_back(Arg{DNNL_ARG_DST, ArgSource::kBuffer, 0, mid_md, false});
  std::vector<ChainItem> chain = collectChain(out, false, false);
  dnnl::primitive_desc_base pd;
  size_t k;
  try {
    k = fitChain(step, chain, 0, pd);
  } catch (const dnnl::error&) {
    return false;  // no channels-last 1x1 convolution here: the deconvolution it is
  }
  chain.resize(k);
  recordChosenLayouts(step, pd);
  Arg* wa = step.find(DNNL_ARG_WEIGHTS);
  mb_.chosenWeights(w_id, true, wa->md);

  // Weights [C, Co, kh, kw] -> [(i, j, co), C, 1, 1]; bias [Co] -> [(i, j, co)]. A
  // replay computes nothing: it finds the constants the compiler made.
  std::vector<float> wk, bk;
  if (mb_.computes()) {
    const float* w = constData(node.inputs[1]);
    wk.resize(size_t(K * Co * C));
    for (int64_t c = 0; c < C; ++c)
      for (int64_t co = 0; co < Co; ++co)
        for (int64_t t = 0; t < K; ++t) wk[size_t((t * Co + co) * C + c)] = w[(c * Co + co) * K + t];
    if (spec.has_bias) {
      const float* b = constData(node.inputs[2]);
      bk.resize(size_t(K * Co));
      for (int64_t t = 0; t < K; ++t)
        for (int64_t co = 0; co < Co; ++co) bk[size_t(t * Co + co)] = b[co];
    }
  }
  wa->index = mb_.derive(w_id, plainDesc({K * Co, C, 1, 1}), wk.data(), wa->md, false);
  if (spec.has_bias)
    *step.find(DNNL_ARG_BIAS) = mb_.embed(DNNL_ARG_BIAS, bk.data(), plainDesc({K * Co}), {constOf(node.inputs[2])});
  Arg* src = step.find(DNNL_ARG_SRC);
  src->index = get(x, src->md).buffer;

  step.label = labelOf(pos, chain);
  consume(pos);
  for (const ChainItem& c : chain)
    if (c.pos != pos) consumeItem(c);
  const uint32_t mid = newBuffer(mid_md);
  step.find(DNNL_ARG_DST)->index = mid;
  const std::string label = step.label;
  fn_.steps.push_back(std::move(step));

  // Depth-to-space: dims (N, Co, H, kh, W, kw) over both buffers.
  const int64_t Ho = H * kh, Wo = W * kw;
  const memory::desc from = withStrides({N, Co, H, kh, W, kw}, {H * W * K * Co, 1, W * K * Co, kw * Co, K * Co, Co});
  const memory::desc to = withStrides({N, Co, H, kh, W, kw}, {Ho * Wo * Co, 1, kh * Wo * Co, Wo * Co, kw * Co, Co});
  const memory::desc out_md = withStrides({N, Co, Ho, Wo}, {Ho * Wo * Co, 1, Wo * Co, Co});
  const uint32_t dst = newBuffer(out_md);
  Step move;
  move.kind = StepKind::kReorder;
  move.label = "depth-to-space: " + label;
  move.args.push_back(bufferArg(DNNL_ARG_SRC, mid, from));
  move.args.push_back(bufferArg(DNNL_ARG_DST, dst, to));
  fn_.steps.push_back(std::move(move));
  const ValueId final_value = chain.empty() ? out : nodeAt(chain.back().pos).outputs[0];
  place(final_value, Loc{dst, out_md});
  return true;
}

// 2-D convolutions read and write channels-last (`acdb`) rather than the layout
// oneDNN picks for each alone. Left to itself, oneDNN 2.6 on AVX-512 takes `acdb` for
// depthwise and most 3x3 convolutions (brgconv, brdgmm) but channel blocks
// (`aBcd16b`, padded when the channels are not a multiple of 16) for 1x1 ones
// (jit_1x1), so chains of both reorder between them at every step, and Concat,
// Slice and Transpose over padded blocks need row-major copies. Channels-last
// throughout made ShuffleNetV2 at 320x320 about 1.6x faster (CPU time per run 8.7 ->
// 5.3 ms, 1 thread) and left ResNet-18, MobileNetV2, SqueezeNet and EfficientNet-B0
// unchanged within noise (docs/backends.md, "Layout decisions measured"). Where
// oneDNN has only its reference code for channels-last (a first layer over one
// channel, bfloat16 sources here), or refuses it, `any` stays. True when `step` was
// set up so, with its post-op count in `k` and descriptor in `pd`.
bool FunctionLowering::channelsLastConv(Step& step, const ConvSpec& spec, bool excluded,
                                        const std::vector<ChainItem>& chain, size_t fixed,
                                        dnnl::primitive_desc_base& pd, size_t& k) {
  if (excluded || spec.transposed || spec.in_shape.size() != 4) return false;
  Step nhwc = step;
  for (int key : {DNNL_ARG_SRC, DNNL_ARG_DST}) {
    Arg* a = nhwc.find(key);
    const std::vector<int64_t>& dims = key == DNNL_ARG_SRC ? spec.in_shape : spec.out_shape;
    a->md = memory::desc(memory::dims(dims.begin(), dims.end()), memory::data_type::f32, memory::format_tag::acdb);
    a->chosen = false;
  }
  try {
    k = fitChain(nhwc, chain, fixed, pd);
  } catch (const dnnl::error&) {
    return false;
  }
  if (isReference(pd)) return false;
  step = std::move(nhwc);
  return true;
}

ConvWeights convWeights(const ConvSpec& spec) {
  const int64_t G = spec.groups, c_in = spec.in_shape[1], c_out = spec.out_shape[1];
  std::vector<int64_t> kernel(spec.weight_shape.begin() + 2, spec.weight_shape.end());
  const int64_t K = ir::shapeNumel(kernel);
  // oneDNN's weight dims ([G,] O, I, spatial) and the ONNX layout as strides over them.
  std::vector<int64_t> w_dims = {c_out / G, c_in / G}, w_strides;
  if (!spec.transposed)
    w_strides = {(c_in / G) * K, K};
  else  // ONNX: [C_in, C_out / G, k...] = [G, C_in / G, C_out / G, k...]
    w_strides = {K, (c_out / G) * K};
  if (G > 1) {
    w_dims.insert(w_dims.begin(), G);
    w_strides.insert(w_strides.begin(), (c_in / G) * (c_out / G) * K);
  }
  const std::vector<int64_t> kstr = kernels::stridesOf(kernel);
  w_dims.insert(w_dims.end(), kernel.begin(), kernel.end());
  w_strides.insert(w_strides.end(), kstr.begin(), kstr.end());
  return {w_dims, withStrides(w_dims, w_strides)};
}

namespace {
// A 1x1 convolution of stride 1 without padding.
bool pointwise(const ConvSpec& spec) {
  if (spec.weight_shape.size() != 4 || spec.weight_shape[2] != 1 || spec.weight_shape[3] != 1) return false;
  for (int64_t s : spec.strides)
    if (s != 1) return false;
  for (size_t i = 0; i < spec.pad_l.size(); ++i)
    if (spec.pad_l[i] != 0 || spec.pad_r[i] != 0) return false;
  return true;
}
}  // namespace

const std::vector<size_t>* FunctionLowering::regionReaders(ValueId v) const {
  auto readers = consumers_.find(v);
  if (readers == consumers_.end() || readers->second.empty() || graph_uses_[size_t(v)] != int(readers->second.size()))
    return nullptr;
  return &readers->second;
}

bool FunctionLowering::readOnlyByConcatWriters(ValueId v) const {
  const std::vector<size_t>* readers = regionReaders(v);
  if (!readers) return false;
  for (size_t q : *readers)
    if (classify(nodeAt(q)) != OpClass::kConv || nodeAt(q).inputs[0] != v || !concatAhead(q)) return false;
  return true;
}

bool FunctionLowering::readersTakeChannelBlocks(ValueId v) const {
  if (std::optional<size_t> pool = soleConsumer(v)) {
    const ir::Node& n = nodeAt(*pool);
    if ((n.op_type == "MaxPool" || n.op_type == "AveragePool") && n.domain.empty() && n.inputs[0] == v &&
        n.outputs.size() == 1)
      v = n.outputs[0];
  }
  const std::vector<size_t>* readers = regionReaders(v);
  if (!readers) return false;
  for (size_t q : *readers) {
    const ir::Node& n = nodeAt(q);
    if (classify(n) != OpClass::kConv || n.inputs[0] != v) return false;
    const std::optional<ConvSpec> spec = decodeConv(g_, n, nullptr);
    if (!spec || spec->transposed || spec->groups != 1 || spec->in_shape.size() != 4 || spec->in_shape[0] != 1 ||
        spec->in_shape[1] % 16 != 0 || spec->out_shape[1] % 16 != 0)
      return false;
    // As lowerConv decides: a convolution that writes its part of a Concat in place,
    // Winograd not before another Concat (its kernels take blocks), or one read only
    // by convolutions writing a Concat in place.
    if (concatAhead(q)) continue;
    ValueId out = n.outputs[0];
    for (int hop = 0; hop < 2; ++hop) {  // its fused activation, as collectChain takes it
      const std::optional<size_t> next = soleConsumer(out);
      if (!next || classify(nodeAt(*next)) != OpClass::kEltwise || nodeAt(*next).inputs[0] != out) break;
      out = nodeAt(*next).outputs[0];
    }
    const std::optional<size_t> reader = soleConsumer(out);
    const bool before_concat = reader && classify(nodeAt(*reader)) == OpClass::kConcat;
    if (winograd_ && !bf16_ && winogradShape(*spec) && !before_concat) continue;
    if (!readOnlyByConcatWriters(out)) return false;
  }
  return true;
}

bool winogradShape(const ConvSpec& spec) {
  if (spec.transposed || spec.groups != 1 || spec.weight_shape.size() != 4) return false;
  for (int64_t s : spec.strides)
    if (s != 1) return false;
  for (int64_t d : spec.dilates)
    if (d != 0) return false;
  return spec.weight_shape[2] == 3 && spec.weight_shape[3] == 3 && spec.weight_shape[0] >= 16 &&
         spec.weight_shape[1] >= 16;
}

void FunctionLowering::lowerConv(size_t pos) {
  const ir::Node& node = nodeAt(pos);
  const ConvSpec spec = decoded(decodeConv(g_, node, nullptr), pos);
  if (lowerUpsamplingDeconv(pos, spec) || emitMatVec(pos, spec)) return;
  const ValueId x = node.inputs[0], out = node.outputs[0];
  const ir::ConstId w_id = constOf(node.inputs[1]);
  int64_t c_out = spec.out_shape[1];
  const ConvWeights weights = convWeights(spec);
  const std::vector<int64_t>& w_dims = weights.dims;
  const memory::desc& w_from = weights.onnx;

  // Inference BatchNormalization right after a Conv folds into its weights and bias.
  std::vector<float> folded_w, folded_b;
  std::vector<ir::ConstId> absorbed;
  std::optional<size_t> bn_pos;
  ValueId cur = out;
  if (!spec.transposed) {
    std::optional<size_t> next = soleConsumer(out);
    if (next && classify(nodeAt(*next)) == OpClass::kBatchNorm) {
      const ir::Node& bn = nodeAt(*next);
      std::optional<NormSpec> ns = decodeBatchNorm(g_, bn, nullptr);
      if (ns && bn.inputs[0] == out) {
        bn_pos = next;
        if (mb_.computes()) {  // a replay finds the folded constants the compiler made
          const float *gamma = constData(bn.inputs[1]), *beta = constData(bn.inputs[2]);
          const float *mean = constData(bn.inputs[3]), *var = constData(bn.inputs[4]);
          const float* w = constData(node.inputs[1]);
          const float* b = spec.has_bias ? constData(node.inputs[2]) : nullptr;
          const int64_t per_oc = ir::shapeNumel(spec.weight_shape) / c_out;
          folded_w.resize(size_t(c_out * per_oc));
          folded_b.resize(size_t(c_out));
          for (int64_t oc = 0; oc < c_out; ++oc) {
            float scale = gamma[oc] / std::sqrt(var[oc] + ns->epsilon);
            for (int64_t i = 0; i < per_oc; ++i) folded_w[size_t(oc * per_oc + i)] = w[oc * per_oc + i] * scale;
            folded_b[size_t(oc)] = ((b ? b[oc] : 0.0f) - mean[oc]) * scale + beta[oc];
          }
        }
        for (size_t i = 1; i < 5; ++i) absorbed.push_back(constOf(bn.inputs[i]));
        if (spec.has_bias) absorbed.push_back(constOf(node.inputs[2]));
        cur = bn.outputs[0];
      }
    }
  }

  Step step;
  step.kind = spec.transposed ? StepKind::kDeconvolution : StepKind::kConvolution;
  step.strides = spec.strides;
  step.dilates = spec.dilates;
  step.pad_l = spec.pad_l;
  step.pad_r = spec.pad_r;
  // A convolution over one input channel (a grayscale image's first layer) reads its
  // input in the plain layout: oneDNN has dedicated kernels for that case, where with
  // `any` it picks a blocked-layout one (the demo CNN's conv: 0.44 -> 0.19 ms a batch
  // at 1 thread; whole model 1.75 -> 1.48 ms, and 1.47 -> 1.39 ms at 2 threads). The
  // 3-channel first layers of the ImageNet models gain nothing at 1 thread and lose
  // 1-5 % at 2, so they keep `any`.
  const bool first_layer =
      !spec.transposed && spec.groups == 1 && spec.in_shape.size() == 4 && spec.in_shape[1] == 1;
  // bfloat16 compute (bf16_): source and weights in bfloat16, destination float32.
  const bool bf16 = bf16_ && !spec.transposed && !first_layer;
  const memory::data_type in_type = bf16 ? memory::data_type::bf16 : memory::data_type::f32;
  if (first_layer)
    step.args.push_back(Arg{DNNL_ARG_SRC, ArgSource::kBuffer, 0, plainDesc(spec.in_shape), false});
  else
    step.args.push_back(
        Arg{DNNL_ARG_SRC, ArgSource::kBuffer, 0, withDataType(anyDesc(spec.in_shape), in_type), true});
  // A replay reads the weights in the layout the compiler stored them in.
  const bool folded = bn_pos.has_value();
  if (std::optional<memory::desc> stored = mb_.storedWeights(w_id, folded))
    step.args.push_back(Arg{DNNL_ARG_WEIGHTS, ArgSource::kConstant, 0, *stored, false});
  else
    step.args.push_back(Arg{DNNL_ARG_WEIGHTS, ArgSource::kConstant, 0, withDataType(anyDesc(w_dims), in_type), true});
  const bool has_bias = spec.has_bias || bn_pos;
  if (has_bias) step.args.push_back(Arg{DNNL_ARG_BIAS, ArgSource::kConstant, 0, plainDesc({c_out}), false});
  step.args.push_back(Arg{DNNL_ARG_DST, ArgSource::kBuffer, 0, anyDesc(spec.out_shape), true});

  std::vector<ChainItem> chain = collectChain(cur, true, true);
  if (bn_pos) {
    ChainItem bn_item;
    bn_item.pos = *bn_pos;
    chain.insert(chain.begin(), bn_item);
  }
  dnnl::primitive_desc_base pd;
  size_t k = 0;
  // Winograd where oneDNN has it with the same post-ops (a float16 model: winograd_;
  // oneDNN 2.6 at one thread: 0.42-0.82 ms against 0.98-1.24 ms direct on ResNet-18's
  // 3x3 shapes), in the blocked layouts its kernels take; else channels-last or `any`.
  // Not before a Concat: Winograd writes channel blocks, its channels-last siblings
  // then reorder too (SqueezeNet's fire modules ran 40 % slower so).
  bool wino = false;
  const size_t fixed = bn_pos ? 1 : 0;
  const ValueId chain_out = chain.empty() ? cur : nodeAt(chain.back().pos).outputs[0];
  auto readByConcat = [&] {
    const std::optional<size_t> reader = soleConsumer(chain_out);
    return reader && classify(nodeAt(*reader)) == OpClass::kConcat;
  };
  // A convolution writing its part of a Concat in place (concatAhead), or one read only
  // by such convolutions, works in 16-channel blocks (aBcd16b) throughout.
  const bool into_concat = !spec.transposed && !bf16 && !first_layer && concatAhead(pos).has_value();
  const bool feeds_concat =
      !spec.transposed && !bf16 && !first_layer && !into_concat && !mb_.polymorphic() && readOnlyByConcatWriters(chain_out);
  // `s` with its source and destination in the given layouts (null: as chosen).
  auto laidOut = [](Step s, const memory::desc* src, const memory::desc* dst) {
    for (auto [key, md] : {std::pair{DNNL_ARG_SRC, src}, std::pair{DNNL_ARG_DST, dst}}) {
      if (!md) continue;
      Arg* a = s.find(key);
      a->md = *md;
      a->chosen = false;
    }
    return s;
  };
  // 16-channel blocks of the source and destination (2-D convolutions only).
  const bool two_d = spec.in_shape.size() == 4 && spec.out_shape.size() == 4;
  const memory::desc src_blocks = two_d ? channelBlocks(spec.in_shape) : memory::desc();
  const memory::desc dst_blocks = two_d ? channelBlocks(spec.out_shape) : memory::desc();
  const bool blocked_fits =
      (into_concat || feeds_concat) && two_d && spec.in_shape[0] == 1 && spec.in_shape[1] % 16 == 0 && c_out % 16 == 0;
  // Takes `candidate` when oneDNN fits it with the whole chain, and not by its reference code.
  auto adoptWhole = [&](Step candidate) {
    try {
      k = fitChain(candidate, chain, fixed, pd);
      if (isReference(pd) || k != chain.size()) return false;
    } catch (const dnnl::error&) {
      return false;
    }
    step = std::move(candidate);
    return true;
  };
  if (winograd_ && !bf16 && !first_layer && winogradShape(spec) && (!readByConcat() || (into_concat && blocked_fits))) {
    Step w = step;
    w.alg = int32_t(dnnl::algorithm::convolution_winograd);
    if (into_concat) w = laidOut(std::move(w), &src_blocks, &dst_blocks);
    wino = adoptWhole(std::move(w));
  }
  bool blocked = false;
  if (!wino && blocked_fits) blocked = adoptWhole(laidOut(step, &src_blocks, &dst_blocks));
  // A first layer over a few channels (an RGB image) whose readers, through a pooling
  // step, take channel blocks writes them, reading the image as it comes: no reorder
  // of the input to channels-last, nor of the pooled output to blocks. Float16
  // SqueezeNet at two threads: its first convolution about as fast (165 -> 153-170
  // us), two reorders of 40 and 52 us gone (docs/backends.md, "Layout decisions
  // measured").
  if (!wino && !blocked && !spec.transposed && !bf16 && !first_layer && spec.groups == 1 && two_d &&
      spec.in_shape[1] <= 4 && c_out % 16 == 0 && !mb_.polymorphic() &&
      readersTakeChannelBlocks(chain_out)) {
    const memory::desc image = plainDesc(spec.in_shape);
    blocked = adoptWhole(laidOut(step, &image, &dst_blocks));
  }
  // A 1x1 convolution whose input its producer wrote in channel blocks (a Concat
  // written in place, a Winograd convolution) reads them so: oneDNN's blocked 1x1
  // kernel runs as fast as its channels-last one, and the reorder goes (float16
  // SqueezeNet's classifier at two threads: 470 us and a 36 us reorder -> 448 us).
  if (!wino && !blocked && !spec.transposed && !bf16 && !first_layer && spec.groups == 1 && pointwise(spec) &&
      two_d && spec.in_shape[1] % 16 == 0 && !mb_.polymorphic() &&
      sameDesc(primary(x).md, src_blocks))
    blocked = adoptWhole(laidOut(step, &src_blocks, nullptr));
  if (!wino && !blocked && !channelsLastConv(step, spec, first_layer || bf16, chain, fixed, pd, k))
    k = fitChain(step, chain, fixed, pd);
  chain.resize(k);
  recordChosenLayouts(step, pd);
  mb_.chosenWeights(w_id, folded, step.find(DNNL_ARG_WEIGHTS)->md);

  Arg* src = step.find(DNNL_ARG_SRC);
  src->index = get(x, src->md).buffer;
  Arg* w = step.find(DNNL_ARG_WEIGHTS);
  if (bn_pos) {
    w->index = mb_.derive(w_id, w_from, folded_w.data(), w->md, false);
    *step.find(DNNL_ARG_BIAS) = mb_.embed(DNNL_ARG_BIAS, folded_b.data(), plainDesc({c_out}), absorbed);
  } else {
    if (sameDesc(w->md, w_from) && isPlainDense(w_from)) {
      *w = mb_.borrow(DNNL_ARG_WEIGHTS, w_id, w_from);
      w->chosen = true;
    } else {
      w->index = mb_.derive(w_id, w_from, constData(node.inputs[1]), w->md, true);
    }
    if (has_bias)
      *step.find(DNNL_ARG_BIAS) = mb_.borrow(DNNL_ARG_BIAS, constOf(node.inputs[2]), plainDesc({c_out}));
  }
  finishAnchor(step, pos, chain, out);
}

// A step with one source and a destination of `dst_dims` (pooling, resampling): the
// source in the layout its producer wrote (a blocked conv output stays blocked) unless
// oneDNN refuses it there (then row-major), the destination in the layout oneDNN
// prefers.
void FunctionLowering::emitWindowStep(Step step, size_t pos, ValueId x, ValueId out,
                                      const std::vector<int64_t>& dst_dims) {
  place(out, windowStep(std::move(step), pos, x, dst_dims, elementType(out)));
}

Loc FunctionLowering::windowStep(Step step, size_t pos, ValueId x, const std::vector<int64_t>& dst_dims,
                                 memory::data_type dst_type) {
  Loc src = primary(x);
  step.args.push_back(bufferArg(DNNL_ARG_SRC, src.buffer, src.md));
  step.args.push_back(Arg{DNNL_ARG_DST, ArgSource::kBuffer, 0, withDataType(anyDesc(dst_dims), dst_type), true});
  dnnl::primitive_desc_base pd;
  try {
    pd = makePrimitiveDesc(step, cpuEngine());
  } catch (const dnnl::error&) {
    src = plain(x);
    step.args[0] = bufferArg(DNNL_ARG_SRC, src.buffer, src.md);
    pd = makePrimitiveDesc(step, cpuEngine());
  }
  recordChosenLayouts(step, pd);
  consume(pos);
  Arg* dst = step.find(DNNL_ARG_DST);
  dst->index = newBuffer(dst->md);
  const Loc written{uint32_t(dst->index), dst->md};
  fn_.steps.push_back(std::move(step));
  return written;
}

Step poolStep(const PoolSpec& spec, std::string label) {
  Step step;
  step.kind = StepKind::kPooling;
  step.label = std::move(label);
  step.alg = int32_t(spec.alg);
  step.kernel = spec.kernel;
  step.strides = spec.strides;
  step.dilates = spec.dilates;
  step.pad_l = spec.pad_l;
  step.pad_r = spec.pad_r;
  return step;
}

void FunctionLowering::lowerPool(size_t pos) {
  const ir::Node& node = nodeAt(pos);
  const PoolSpec spec = decoded(decodePool(g_, node, nullptr), pos);
  if (emitChannelMean(pos, spec) || emitInt8MaxPoolStep(pos, spec)) return;
  emitWindowStep(poolStep(spec, labelOf(pos, {})), pos, node.inputs[0], node.outputs[0], shapeOf(node.outputs[0]));
}

// A float32 1x1 convolution over one position of a batch of one, with constant weights
// (squeeze-excitation's FCs, [1, C, 1, 1] -> [1, C', 1, 1]), and a Relu, Sigmoid or
// SiLU after it: the module's own matrix-vector product (StepKind::kMatVec), its
// weights derived once (emitMatVecStep). oneDNN 2.6 took about 9 us a call for EfficientNet-B0's, mostly outside its
// arithmetic (32 calls, 0.29 ms of a 7.5 ms run at one thread). Static regions only (a
// replay would need oneDNN's layout of the same weights at another batch size); not
// before a BatchNormalization (folded on the oneDNN path).
bool FunctionLowering::emitMatVec(size_t pos, const ConvSpec& spec) {
  const ir::Node& node = nodeAt(pos);
  if (mb_.polymorphic() || bf16_ || spec.transposed || spec.groups != 1 || !pointwise(spec) ||
      spec.in_shape.size() < 3 || spec.in_shape[0] != 1 || spec.out_shape.size() != spec.in_shape.size())
    return false;
  for (size_t i = 2; i < spec.in_shape.size(); ++i)
    if (spec.in_shape[i] != 1 || spec.out_shape[i] != 1) return false;
  const ValueId x = node.inputs[0], out = node.outputs[0];
  if (elementType(x) != memory::data_type::f32 || !isConstant(node.inputs[1]) ||
      elementType(node.inputs[1]) != memory::data_type::f32 ||
      (spec.has_bias && (!isConstant(node.inputs[2]) || elementType(node.inputs[2]) != memory::data_type::f32)))
    return false;
  std::vector<ChainItem> fused;
  const std::optional<int32_t> act = matVecActivation(out, fused);
  if (!act) return false;
  emitMatVecStep(pos, x, spec.in_shape, constOf(node.inputs[1]), convWeights(spec).onnx,
                 exactInHalf(constData(node.inputs[1]), spec.in_shape[1] * spec.out_shape[1]),
                 spec.has_bias ? node.inputs[2] : ir::kNoValue, spec.out_shape, *act, fused);
  return true;
}

std::optional<int32_t> FunctionLowering::matVecActivation(ValueId out, std::vector<ChainItem>& fused) const {
  if (auto gated = gatedAfter(out); gated && gated->alg == dnnl::algorithm::eltwise_swish) {
    ChainItem item;
    item.pos = gated->mul;
    item.extra = {gated->gate};
    fused.push_back(item);
    return int32_t(dnnl::algorithm::eltwise_swish);
  }
  if (std::optional<size_t> next = soleConsumer(out)) {
    const ir::Node& n = nodeAt(*next);
    if (classify(n) == OpClass::kBatchNorm) return std::nullopt;
    if (n.domain.empty() && n.inputs.size() == 1 && n.outputs.size() == 1 &&
        (n.op_type == "Relu" || n.op_type == "Sigmoid")) {
      ChainItem item;
      item.pos = *next;
      fused.push_back(item);
      return int32_t(n.op_type == "Relu" ? dnnl::algorithm::eltwise_relu : dnnl::algorithm::eltwise_logistic);
    }
  }
  return 0;
}

bool exactInHalf(const float* w, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (ir::halfToFloat(ir::floatToHalf(w[i])) != w[i]) return false;
  return true;
}

// The weights are derived into blocks of outputs, each [K][B] (matVecWeightsDesc); in
// float16 when float16 holds every value (a float16 model's, converted to float32 at
// compile time): the same products from half the bytes, which is what a
// matrix-vector product is bound by.
void FunctionLowering::emitMatVecStep(size_t pos, ValueId x, const std::vector<int64_t>& in_dims, ir::ConstId w,
                                      const memory::desc& w_from, bool half, ValueId bias,
                                      const std::vector<int64_t>& out_dims, int32_t act,
                                      const std::vector<ChainItem>& fused) {
  const int64_t o = out_dims[1];
  const float* data = reinterpret_cast<const float*>(g_.constants.get(w).bytes.data);
  const memory::desc stored =
      matVecWeightsDesc(w_from.dims(), half ? memory::data_type::f16 : memory::data_type::f32);
  Step step;
  step.kind = StepKind::kMatVec;
  step.alg = act;
  step.label = labelOf(pos, fused);
  const memory::desc in = plainDesc(in_dims), result = plainDesc(out_dims);
  step.args.push_back(bufferArg(DNNL_ARG_SRC, get(x, in).buffer, in));
  step.args.push_back(Arg{DNNL_ARG_WEIGHTS, ArgSource::kConstant, mb_.derive(w, w_from, data, stored, true), stored,
                          false});
  if (bias != ir::kNoValue) step.args.push_back(mb_.borrow(DNNL_ARG_BIAS, constOf(bias), plainDesc({o})));
  consume(pos);
  for (const ChainItem& c : fused) consumeItem(c);
  const uint32_t d = newBuffer(result);
  step.args.push_back(bufferArg(DNNL_ARG_DST, d, result));
  fn_.steps.push_back(std::move(step));
  place(fused.empty() ? nodeAt(pos).outputs[0] : nodeAt(fused.back().pos).outputs[0], Loc{d, result});
}

// A global average pool (a squeeze-excitation block's squeeze) over a channels-last
// float32 tensor: the module's own kernel (dnnl_kernels.h), the mean into a dense
// [N, C, 1...] buffer.
bool FunctionLowering::emitChannelMean(size_t pos, const PoolSpec& spec) {
  const ir::Node& node = nodeAt(pos);
  const ValueId x = node.inputs[0];
  const std::vector<int64_t> in = shapeOf(x), out = shapeOf(node.outputs[0]);
  if (in.size() < 3 || out.size() != in.size() || elementType(x) != memory::data_type::f32 ||
      (spec.alg != dnnl::algorithm::pooling_avg_include_padding && spec.alg != dnnl::algorithm::pooling_avg_exclude_padding))
    return false;
  for (size_t i = 2; i < in.size(); ++i) {
    const size_t k = i - 2;
    if (out[i] != 1 || k >= spec.kernel.size() || spec.kernel[k] != in[i] || spec.pad_l[k] != 0 || spec.pad_r[k] != 0 ||
        (k < spec.dilates.size() && spec.dilates[k] != 0))
      return false;
  }
  const Loc src = primary(x);
  if (!isChannelsLastDense(src.md)) return false;
  consume(pos);
  const memory::desc mean = plainDesc(out);
  const uint32_t d = newBuffer(mean);
  // Right after the swish step that wrote x (a SiLU before squeeze-excitation): that
  // step writes the mean too, each block summed while it is in the core's cache.
  if (!fn_.steps.empty()) {
    Step& last = fn_.steps.back();
    const Arg* wrote = last.find(DNNL_ARG_DST);
    if (last.kind == StepKind::kSwish && !last.find(DNNL_ARG_DST_1) && wrote && wrote->index == src.buffer &&
        sameDesc(wrote->md, src.md)) {
      last.label += "+" + labelOf(pos, {});
      last.args.push_back(bufferArg(DNNL_ARG_DST_1, d, mean));
      place(node.outputs[0], Loc{d, mean});
      return true;
    }
  }
  Step step;
  step.kind = StepKind::kChannelMean;
  step.label = labelOf(pos, {});
  step.args.push_back(bufferArg(DNNL_ARG_SRC, src.buffer, src.md));
  step.args.push_back(bufferArg(DNNL_ARG_DST, d, mean));
  fn_.steps.push_back(std::move(step));
  place(node.outputs[0], Loc{d, mean});
  return true;
}

// A MaxPool over int8 values in a dense channels-last layout: the module's own kernel
// (oneDNN 2.6's int8 max pooling takes 3-5x its float32 pooling's time).
bool FunctionLowering::emitInt8MaxPoolStep(size_t pos, const PoolSpec& spec) {
  const ir::Node& node = nodeAt(pos);
  const ValueId x = node.inputs[0];
  const memory::data_type t = elementType(x);
  if ((t != memory::data_type::u8 && t != memory::data_type::s8) || spec.alg != dnnl::algorithm::pooling_max)
    return false;
  const Loc src = primary(x);
  const std::vector<int64_t> out = shapeOf(node.outputs[0]);
  if (out.size() != 4 || !int8MaxPoolFits(src.md, spec)) return false;
  Step step = poolStep(spec, labelOf(pos, {}));
  step.kind = StepKind::kInt8MaxPool;
  step.alg = 0;
  step.args.push_back(bufferArg(DNNL_ARG_SRC, src.buffer, src.md));
  const memory::desc dst(memory::dims(out.begin(), out.end()), t, memory::format_tag::acdb);
  step.args.push_back(bufferArg(DNNL_ARG_DST, 0, dst));
  try {
    checkOwnKernelStep(step, "MaxPool '" + node.name + "'");  // what the loader will check
  } catch (const Error&) {
    return false;  // a window the own kernel does not take: oneDNN's pooling
  }
  consume(pos);
  const uint32_t d = newBuffer(dst);
  step.find(DNNL_ARG_DST)->index = d;
  fn_.steps.push_back(std::move(step));
  place(node.outputs[0], Loc{d, dst});
  return true;
}

// Whether the own int8 max pool takes `spec` over a source in layout `md`.
bool int8MaxPoolFits(const memory::desc& md, const PoolSpec& spec) {
  if (!isChannelsLastDense(md) || md.data.ndims != 4 || spec.kernel.size() != 2) return false;
  for (int64_t d : spec.dilates)
    if (d != 0) return false;
  for (size_t i = 0; i < 2; ++i)
    if (spec.pad_l[i] >= spec.kernel[i] || spec.strides[i] < 1) return false;
  return true;
}

void FunctionLowering::lowerResample(size_t pos) {
  const ir::Node& node = nodeAt(pos);
  const ResampleSpec spec = decoded(decodeResize(g_, node, nullptr), pos);
  const ValueId x = node.inputs[0], out = node.outputs[0];
  Step step;
  step.kind = StepKind::kResampling;
  step.label = labelOf(pos, {});
  step.alg = int32_t(spec.alg);
  emitWindowStep(std::move(step), pos, x, out, spec.dst_dims);
}

}  // namespace partita::dnnl_backend
