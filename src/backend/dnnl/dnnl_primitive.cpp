#include "backend/dnnl/dnnl_primitive.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "backend/dnnl/dnnl_memory_desc.h"
#include "partita/error.h"

namespace partita::dnnl_backend {

namespace {

using dnnl::algorithm;
using dnnl::prop_kind;

// The descriptor an argument is created with: `any` for layouts oneDNN chooses.
memory::desc requested(const Step& s, int key) {
  const Arg* a = s.find(key);
  if (!a) return memory::desc();
  return a->chosen ? anyDesc(a->md) : a->md;
}

memory::desc required(const Step& s, int key) {
  const Arg* a = s.find(key);
  if (!a)
    throw Error(ErrorCode::kInvalidArtifact, std::string("dnnl step '") + s.label + "' (" +
                                                 stepKindName(s.kind) + ") lacks argument " +
                                                 std::to_string(key));
  return a->chosen ? anyDesc(a->md) : a->md;
}

dnnl::primitive_attr attributes(const Step& s) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  // int8: fixed output scales (oneDNN 2.6's int8 convolutions take no run-time ones)
  // and zero points, set only where nonzero (a source zero point rules out brgconv).
  if (s.quant.scale_dim == kSourceScales && s.quant.output_scales.size() == 2) {
    attr.set_scales(DNNL_ARG_SRC_0, 0, {s.quant.output_scales[0]});
    attr.set_scales(DNNL_ARG_SRC_1, 0, {s.quant.output_scales[1]});
  } else if (!s.quant.output_scales.empty())
    attr.set_output_scales(s.quant.output_scales.size() > 1 ? 1 << s.quant.scale_dim : 0, s.quant.output_scales);
  if (s.quant.src_zero_point != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {s.quant.src_zero_point});
  // A run-time source zero point (dynamic int8): one int32 read from its argument.
  if (const Arg* zp = s.find(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC)) {
    if (s.quant.src_zero_point != 0 || zp->md.data.data_type != dnnl_s32 || zp->md.get_size() != sizeof(int32_t))
      throw Error(ErrorCode::kInvalidArtifact, std::string("dnnl step '") + s.label + "' (" + stepKindName(s.kind) +
                                                   ") has a run-time source zero point that is not one int32");
    attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
  }
  if (s.quant.dst_zero_point != 0) attr.set_zero_points(DNNL_ARG_DST, 0, {s.quant.dst_zero_point});
  if (s.post_ops.empty()) return attr;
  dnnl::post_ops ops;
  for (size_t i = 0; i < s.post_ops.size(); ++i) {
    const PostOp& p = s.post_ops[i];
    switch (p.kind) {
      case PostOp::Kind::kEltwise:
        ops.append_eltwise(p.scale, algorithm(p.alg), p.alpha, p.beta);
        break;
      case PostOp::Kind::kSum:
        // beta: the sum's zero point, an int32 (a blob's may be any float).
        if (!(p.beta >= -2147483648.0f && p.beta < 2147483648.0f) || p.beta != std::nearbyint(p.beta))
          throw Error(ErrorCode::kInvalidArtifact, "dnnl step '" + s.label + "': sum post-op " + std::to_string(i) +
                                                       " has zero point " + std::to_string(p.beta) +
                                                       ", not an int32");
        if (p.beta != 0)
          ops.append_sum(p.scale, int32_t(p.beta), memory::data_type::undef);
        else
          ops.append_sum(p.scale);
        break;
      case PostOp::Kind::kBinary:
        ops.append_binary(algorithm(p.alg),
                          required(s, DNNL_ARG_ATTR_MULTIPLE_POST_OP(int(i)) | DNNL_ARG_SRC_1));
        break;
    }
  }
  attr.set_post_ops(ops);
  return attr;
}

dnnl::memory::dims dims(const std::vector<int64_t>& v) { return dnnl::memory::dims(v.begin(), v.end()); }

// oneDNN 2.6 does not range-check the axis of concat, softmax or logsoftmax (a blob's
// axis past the rank reads outside the descriptor's dims inside libdnnl): checked here.
int checkedAxis(const Step& s, const memory::desc& md) {
  const int rank = md.data.ndims;
  if (s.axis < 0 || s.axis >= rank)
    throw Error(ErrorCode::kInvalidArtifact, std::string("dnnl step '") + s.label + "' (" + stepKindName(s.kind) +
                                                 ") has axis " + std::to_string(s.axis) + " for rank " +
                                                 std::to_string(rank));
  return int(s.axis);
}

// Concat's sources: each of the destination's rank, equal to it off the axis, their
// extents along it summing to the destination's.
std::vector<memory::desc> concatSources(const Step& s, const memory::desc& dst, int axis) {
  std::vector<memory::desc> srcs;
  int64_t along = 0;
  for (int i = 0;; ++i) {
    const Arg* a = s.find(DNNL_ARG_MULTIPLE_SRC + i);
    if (!a) break;
    const memory::desc& m = a->md;
    bool fits = m.data.ndims == dst.data.ndims;
    for (int d = 0; fits && d < m.data.ndims; ++d)
      fits = d == axis ? m.data.dims[d] >= 0 : m.data.dims[d] == dst.data.dims[d];
    if (fits) along += m.data.dims[axis];
    if (!fits || along > dst.data.dims[axis])
      throw Error(ErrorCode::kInvalidArtifact, std::string("dnnl step '") + s.label + "' (concat): source " +
                                                   std::to_string(i) + " " + layoutString(m) +
                                                   " does not fit destination " + layoutString(dst) +
                                                   " on axis " + std::to_string(axis));
    srcs.push_back(m);
  }
  if (srcs.empty() || along != dst.data.dims[axis])
    throw Error(ErrorCode::kInvalidArtifact, std::string("dnnl step '") + s.label +
                                                 "' (concat): sources do not add up to the destination " +
                                                 layoutString(dst));
  return srcs;
}

// An RNN step: the cell kind in `alg`, the direction in `axis` (one direction or
// bidirectional_concat),
// vanilla_rnn's activation in `flags` with `alpha` and `beta`.
dnnl::primitive_desc_base rnnDesc(const Step& s, const dnnl::primitive_attr& attr, const dnnl::engine& eng) {
  auto bad = [&](const std::string& what) {
    return Error(ErrorCode::kInvalidArtifact, "dnnl step '" + s.label + "' (rnn): " + what);
  };
  if (s.axis != dnnl_unidirectional_left2right && s.axis != dnnl_unidirectional_right2left &&
      s.axis != dnnl_bidirectional_concat)
    throw bad("direction " + std::to_string(s.axis) + " is not one-directional or bidirectional_concat");
  const auto dir = dnnl::rnn_direction(s.axis);
  const prop_kind inference = prop_kind::forward_inference;
  const memory::desc src_layer = required(s, DNNL_ARG_SRC_LAYER), src_iter = requested(s, DNNL_ARG_SRC_ITER),
                     wl = required(s, DNNL_ARG_WEIGHTS_LAYER), wi = required(s, DNNL_ARG_WEIGHTS_ITER),
                     bias = requested(s, DNNL_ARG_BIAS), dst_layer = required(s, DNNL_ARG_DST_LAYER),
                     dst_iter = requested(s, DNNL_ARG_DST_ITER);
  switch (algorithm(s.alg)) {
    case algorithm::vanilla_lstm: {
      dnnl::lstm_forward::desc d(inference, dir, src_layer, src_iter, requested(s, DNNL_ARG_SRC_ITER_C), wl, wi,
                                 requested(s, DNNL_ARG_WEIGHTS_PEEPHOLE), memory::desc(), bias, dst_layer, dst_iter,
                                 requested(s, DNNL_ARG_DST_ITER_C));
      return dnnl::lstm_forward::primitive_desc(d, attr, eng);
    }
    case algorithm::vanilla_gru: {
      dnnl::gru_forward::desc d(inference, dir, src_layer, src_iter, wl, wi, bias, dst_layer, dst_iter);
      return dnnl::gru_forward::primitive_desc(d, attr, eng);
    }
    case algorithm::lbr_gru: {
      dnnl::lbr_gru_forward::desc d(inference, dir, src_layer, src_iter, wl, wi, bias, dst_layer, dst_iter);
      return dnnl::lbr_gru_forward::primitive_desc(d, attr, eng);
    }
    case algorithm::vanilla_rnn: {
      const auto act = algorithm(s.flags);
      if (act != algorithm::eltwise_tanh && act != algorithm::eltwise_relu && act != algorithm::eltwise_logistic)
        throw bad("activation " + std::to_string(s.flags) + " is not tanh, relu or logistic");
      dnnl::vanilla_rnn_forward::desc d(inference, act, dir, src_layer, src_iter, wl, wi, bias, dst_layer, dst_iter,
                                        dnnl::rnn_flags::undef, s.alpha, s.beta);
      return dnnl::vanilla_rnn_forward::primitive_desc(d, attr, eng);
    }
    default:
      throw bad("cell kind " + std::to_string(s.alg) + " is not an RNN cell");
  }
}

// A sliding-window step's lists (strides, dilations, pads and, for pooling, the
// kernel) as long as its source's and destination's spatial rank, at least 1: oneDNN
// 2.6's C++ descriptors check their lengths against the source's rank, then take the
// first element's address, which for a rank-2 source is an empty list's (found by the
// artifact fuzzer: a pooling step over [N, C]).
void checkWindowLists(const Step& s, const char* what, bool with_kernel) {
  const int src_rank = required(s, DNNL_ARG_SRC).data.ndims, dst_rank = required(s, DNNL_ARG_DST).data.ndims;
  const size_t sp = size_t(std::max(src_rank - 2, 0));
  if (sp < 1 || dst_rank != src_rank || s.strides.size() != sp || s.dilates.size() != sp || s.pad_l.size() != sp ||
      s.pad_r.size() != sp || (with_kernel && s.kernel.size() != sp))
    throw Error(ErrorCode::kInvalidArtifact, std::string("dnnl step '") + s.label + "' (" + what +
                                                 ") has windows that do not fit its source's rank " +
                                                 std::to_string(src_rank));
}

}  // namespace

dnnl::primitive_desc_base makePrimitiveDesc(const Step& s, const dnnl::engine& eng) {
  const dnnl::primitive_attr attr = attributes(s);
  switch (s.kind) {
    case StepKind::kReorder:
      return dnnl::reorder::primitive_desc(eng, required(s, DNNL_ARG_SRC), eng, required(s, DNNL_ARG_DST),
                                           attr);
    case StepKind::kConvolution: {
      checkWindowLists(s, "convolution", false);
      {
        const memory::desc dst = required(s, DNNL_ARG_DST), w = required(s, DNNL_ARG_WEIGHTS);
        const int rank = dst.data.ndims, sp = rank - 2;
        // (checkWindowLists checked the lists against sp. Grouped weights have one dim
        // more in front: the kernel is their last sp dims.)
        if (w.data.ndims < sp)
          throw Error(ErrorCode::kInvalidArtifact, std::string("dnnl step '") + s.label +
                                                       "' (convolution) has weights of rank " +
                                                       std::to_string(w.data.ndims) + " for " + std::to_string(sp) +
                                                       " spatial dims");
        const std::vector<int64_t> out(dst.data.dims + 2, dst.data.dims + rank);
        const std::vector<int64_t> kernel(w.data.dims + w.data.ndims - sp, w.data.dims + w.data.ndims);
        if (std::string why = convTablesBound(out, kernel, s.dilates, s.pad_l, s.pad_r); !why.empty())
          throw Error(ErrorCode::kInvalidArtifact, std::string("dnnl step '") + s.label + "' (convolution): " + why);
      }
      // Direct (alg 0 in blobs before Winograd steps existed) or Winograd.
      const algorithm conv_alg = s.alg == int32_t(algorithm::convolution_winograd) ? algorithm::convolution_winograd
                                                                                    : algorithm::convolution_direct;
      if (s.alg != 0 && s.alg != int32_t(algorithm::convolution_direct) && s.alg != int32_t(conv_alg))
        throw Error(ErrorCode::kInvalidArtifact, std::string("dnnl step '") + s.label +
                                                     "' (convolution) has an unknown algorithm " + std::to_string(s.alg));
      dnnl::convolution_forward::desc d(prop_kind::forward_inference, conv_alg,
                                        required(s, DNNL_ARG_SRC), required(s, DNNL_ARG_WEIGHTS),
                                        requested(s, DNNL_ARG_BIAS), required(s, DNNL_ARG_DST),
                                        dims(s.strides), dims(s.dilates), dims(s.pad_l), dims(s.pad_r));
      return dnnl::convolution_forward::primitive_desc(d, attr, eng);
    }
    case StepKind::kDeconvolution: {
      checkWindowLists(s, "deconvolution", false);
      {
        const memory::desc dst = required(s, DNNL_ARG_DST);
        const std::vector<int64_t> out(dst.data.dims + 2, dst.data.dims + dst.data.ndims);
        if (std::string why = convPositionsBound(out); !why.empty())
          throw Error(ErrorCode::kInvalidArtifact, std::string("dnnl step '") + s.label + "' (deconvolution): " + why);
      }
      dnnl::deconvolution_forward::desc d(prop_kind::forward_inference, algorithm::deconvolution_direct,
                                          required(s, DNNL_ARG_SRC), required(s, DNNL_ARG_WEIGHTS),
                                          requested(s, DNNL_ARG_BIAS), required(s, DNNL_ARG_DST),
                                          dims(s.strides), dims(s.dilates), dims(s.pad_l), dims(s.pad_r));
      return dnnl::deconvolution_forward::primitive_desc(d, attr, eng);
    }
    case StepKind::kMatMul: {
      dnnl::matmul::desc d(required(s, DNNL_ARG_SRC), required(s, DNNL_ARG_WEIGHTS),
                           requested(s, DNNL_ARG_BIAS), required(s, DNNL_ARG_DST));
      return dnnl::matmul::primitive_desc(d, attr, eng);
    }
    case StepKind::kPooling: {
      checkWindowLists(s, "pooling", true);
      if (std::string why = poolWorkBound(dimsOf(required(s, DNNL_ARG_DST)), s.kernel); !why.empty())
        throw Error(ErrorCode::kInvalidArtifact, std::string("dnnl step '") + s.label + "' (pooling): " + why);
      dnnl::pooling_v2_forward::desc d(prop_kind::forward_inference, algorithm(s.alg),
                                       required(s, DNNL_ARG_SRC), required(s, DNNL_ARG_DST), dims(s.strides),
                                       dims(s.kernel), dims(s.dilates), dims(s.pad_l), dims(s.pad_r));
      return dnnl::pooling_v2_forward::primitive_desc(d, attr, eng);
    }
    case StepKind::kEltwise: {
      dnnl::eltwise_forward::desc d(prop_kind::forward_inference, algorithm(s.alg), required(s, DNNL_ARG_SRC),
                                    s.alpha, s.beta);
      return dnnl::eltwise_forward::primitive_desc(d, attr, eng);
    }
    case StepKind::kBinary: {
      dnnl::binary::desc d(algorithm(s.alg), required(s, DNNL_ARG_SRC_0), required(s, DNNL_ARG_SRC_1),
                           required(s, DNNL_ARG_DST));
      return dnnl::binary::primitive_desc(d, attr, eng);
    }
    case StepKind::kSoftmax: {
      const memory::desc src = required(s, DNNL_ARG_SRC);
      dnnl::softmax_forward::desc d(prop_kind::forward_inference, src, checkedAxis(s, src));
      return dnnl::softmax_forward::primitive_desc(d, attr, eng);
    }
    case StepKind::kLogSoftmax: {
      const memory::desc src = required(s, DNNL_ARG_SRC);
      dnnl::logsoftmax_forward::desc d(prop_kind::forward_inference, src, checkedAxis(s, src));
      return dnnl::logsoftmax_forward::primitive_desc(d, attr, eng);
    }
    case StepKind::kLayerNorm: {
      dnnl::layer_normalization_forward::desc d(prop_kind::forward_inference, required(s, DNNL_ARG_SRC),
                                                s.epsilon, dnnl::normalization_flags(s.flags));
      return dnnl::layer_normalization_forward::primitive_desc(d, attr, eng);
    }
    case StepKind::kBatchNorm: {
      dnnl::batch_normalization_forward::desc d(prop_kind::forward_inference, required(s, DNNL_ARG_SRC),
                                                s.epsilon, dnnl::normalization_flags(s.flags));
      return dnnl::batch_normalization_forward::primitive_desc(d, attr, eng);
    }
    case StepKind::kConcat: {
      const memory::desc dst = required(s, DNNL_ARG_DST);
      const int axis = checkedAxis(s, dst);
      return dnnl::concat::primitive_desc(dst, axis, concatSources(s, dst, axis), eng, attr);
    }
    case StepKind::kReduction: {
      dnnl::reduction::desc d(algorithm(s.alg), required(s, DNNL_ARG_SRC), required(s, DNNL_ARG_DST), s.alpha,
                              s.beta);
      return dnnl::reduction::primitive_desc(d, attr, eng);
    }
    case StepKind::kResampling: {
      const memory::desc dst = required(s, DNNL_ARG_DST);
      for (int i = 2; i < dst.data.ndims; ++i)
        if (dst.data.dims[i] > kMaxResamplingExtent)
          throw Error(ErrorCode::kInvalidArtifact, std::string("dnnl step '") + s.label +
                                                       "' (resampling): output dimension " + std::to_string(i) +
                                                       " is " + std::to_string(dst.data.dims[i]) + ", above " +
                                                       std::to_string(kMaxResamplingExtent));
      dnnl::resampling_forward::desc d(prop_kind::forward_inference, algorithm(s.alg), required(s, DNNL_ARG_SRC),
                                       required(s, DNNL_ARG_DST));
      return dnnl::resampling_forward::primitive_desc(d, attr, eng);
    }
    case StepKind::kRnn:
      return rnnDesc(s, attr, eng);
    case StepKind::kDynamicQuantize:  // partita's own kernels (dnnl_kernels.h)
    case StepKind::kSwish:
    case StepKind::kScaleChannels:
    case StepKind::kChannelMean:
    case StepKind::kInt8MaxPool:
    case StepKind::kAddLayerNorm:
    case StepKind::kSoftmaxRows:
    case StepKind::kBiasGelu:
    case StepKind::kAddRowCopy:
    case StepKind::kMatVec:
      throw dnnl::error(dnnl_unimplemented, "not a oneDNN primitive");
    case StepKind::kPrelu: {
      dnnl::prelu_forward::desc d(prop_kind::forward_inference, required(s, DNNL_ARG_SRC),
                                  required(s, DNNL_ARG_WEIGHTS));
      return dnnl::prelu_forward::primitive_desc(d, attr, eng);
    }
  }
  throw Error(ErrorCode::kInvalidArtifact, "dnnl step '" + s.label + "' has an unknown kind");
}

std::string convPositionsBound(const std::vector<int64_t>& out_spatial) {
  int64_t positions = 1;
  for (int64_t d : out_spatial)
    if (d < 0 || __builtin_mul_overflow(positions, d, &positions) || positions > kMaxConvPositions)
      return "more than " + std::to_string(kMaxConvPositions) + " output positions (" + ir::shapeStr(out_spatial) +
             "), the bound of the time oneDNN takes to make its primitive";
  return {};
}

std::string convTablesBound(const std::vector<int64_t>& out_spatial, const std::vector<int64_t>& kernel,
                            const std::vector<int64_t>& dilates, const std::vector<int64_t>& pad_l,
                            const std::vector<int64_t>& pad_r) {
  if (std::string why = convPositionsBound(out_spatial); !why.empty()) return why;
  for (size_t i = 0; i < out_spatial.size(); ++i) {
    if (out_spatial[i] > kMaxConvExtent)
      return "output size " + std::to_string(out_spatial[i]) + " on spatial dim " + std::to_string(i) +
             " is above " + std::to_string(kMaxConvExtent) + ", the bound of oneDNN's convolution tables";
    // The dilated kernel's extent (0, refused, for values no layer has: a blob's may be any).
    const int64_t k = i < kernel.size() ? kernel[i] : 0, d = i < dilates.size() ? dilates[i] : -1;
    const int64_t e = k < 1 || k > kMaxConvExtent || d < 0 || d > kMaxConvExtent ? 0 : (k - 1) * (d + 1) + 1;
    const int64_t l = i < pad_l.size() ? pad_l[i] : 0, r = i < pad_r.size() ? pad_r[i] : 0;
    if (e < 1 || l > e || r > e)
      return "padding " + std::to_string(l) + ", " + std::to_string(r) + " on spatial dim " + std::to_string(i) +
             " is wider than the kernel's extent " + std::to_string(e);
  }
  return {};
}

std::string poolWorkBound(const std::vector<int64_t>& dst_dims, const std::vector<int64_t>& kernel) {
  uint64_t work = 1;
  auto times = [&](int64_t v) {
    if (v < 0 || (v > 0 && work > uint64_t(kMaxPoolWindowElements) / uint64_t(v))) return false;
    work *= uint64_t(v);
    return work <= uint64_t(kMaxPoolWindowElements);
  };
  bool ok = true;
  for (int64_t d : dst_dims) ok = ok && times(d);
  for (int64_t k : kernel) ok = ok && times(k);
  if (ok) return {};
  return "its windows hold more than " + std::to_string(kMaxPoolWindowElements) +
         " elements in all (outputs times kernel), which oneDNN's reference pooling visits one by one";
}

void recordChosenLayouts(Step& s, const dnnl::primitive_desc_base& pd) {
  for (Arg& a : s.args)
    if (a.chosen) a.md = pd.query_md(dnnl::query::exec_arg_md, a.key);
}

std::string chosenLayoutMismatch(const Step& s, const dnnl::primitive_desc_base& pd) {
  for (const Arg& a : s.args) {
    if (!a.chosen) continue;
    memory::desc want = pd.query_md(dnnl::query::exec_arg_md, a.key);
    if (!sameDesc(want, a.md))
      return "argument " + std::to_string(a.key) + " was compiled for layout " + layoutString(a.md) +
             " but oneDNN on this machine wants " + layoutString(want);
  }
  return {};
}

std::string implementationName(const dnnl::primitive_desc_base& pd) { return pd.impl_info_str(); }

bool isReference(const dnnl::primitive_desc_base& pd) { return implementationName(pd).rfind("ref", 0) == 0; }

bool stepOnOneThread(const Step& s) {
  auto numel = [&](int key) {
    const Arg* a = s.find(key);
    return a ? numElements(a->md) : int64_t(0);
  };
  const Arg* dst = s.find(DNNL_ARG_DST);
  switch (s.kind) {
    case StepKind::kConvolution:
    case StepKind::kDeconvolution: {
      // Multiply-adds: each destination element reads weights / output channels of them.
      const Arg* w = s.find(DNNL_ARG_WEIGHTS);
      const int64_t out_channels = dst && dst->md.data.ndims > 1 ? dst->md.data.dims[1] : 0;
      if (!w || out_channels <= 0) return false;
      const int64_t per_output = numElements(w->md) / out_channels;
      return per_output > 0 && numel(DNNL_ARG_DST) < (int64_t(1) << 17) / per_output;
    }
    case StepKind::kMatMul: {
      const Arg* src = s.find(DNNL_ARG_SRC);
      if (!src || src->md.data.ndims < 1) return false;
      const int64_t k = src->md.data.dims[src->md.data.ndims - 1];
      return k > 0 && numel(DNNL_ARG_DST) < (int64_t(1) << 17) / k;
    }
    case StepKind::kRnn: {
      const Arg* src = s.find(DNNL_ARG_SRC_LAYER);
      const Arg* wi = s.find(DNNL_ARG_WEIGHTS_ITER);
      if (!src || !wi || src->md.data.ndims != 3 || wi->md.data.ndims != 5) return false;
      const int64_t batch = src->md.data.dims[1], gates = wi->md.data.dims[3], hidden = wi->md.data.dims[4];
      return batch * gates * hidden * hidden < (int64_t(1) << 18);
    }
    case StepKind::kBinary:
      // A plain float binary step (Mul, Add) streams memory and computes nearly
      // nothing: below 2^16 elements two threads saved at most 0.5 us on a quiet
      // machine and lost several times that when other work shared the cores
      // (docs/backends.md). Post-ops and int8 scales add compute.
      if (s.post_ops.empty() && !(s.flags & kQuantizedFlag))
        return numel(DNNL_ARG_DST) < kOneThreadBinaryElements;
      return numel(DNNL_ARG_DST) < kOneThreadElements;
    case StepKind::kAddRowCopy: {
      // Copies (with an add): streams memory as a binary step does; the copies' elements
      // in all.
      int64_t copied = 0;
      for (int i = 0; i < kMaxRowCopies; ++i) copied += numel(DNNL_ARG_MULTIPLE_SRC + i);
      return copied < kOneThreadBinaryElements;
    }
    case StepKind::kDynamicQuantize:
      // Two streaming passes (the range, then the integers): at 2^15 floats one thread
      // took 3.4 us and two 5.1 us; at 2^17 11.5 and 9.3 (partita_bench_kernels
      // dynamic_quantize).
      return numel(DNNL_ARG_SRC) < kOneThreadBinaryElements;
    default:
      return std::max(numel(DNNL_ARG_DST), numel(DNNL_ARG_SRC)) < kOneThreadElements;
  }
}

int stepThreads(const Step& s, int threads) { return threads > 1 && stepOnOneThread(s) ? 1 : threads; }

OmpThreadsScope::OmpThreadsScope(int threads) : saved_(omp_get_max_threads()) {
  if (threads != saved_) omp_set_num_threads(threads);
}

OmpThreadsScope::~OmpThreadsScope() {
  if (omp_get_max_threads() != saved_) omp_set_num_threads(saved_);
}

std::string dnnlVersionString() {
  const dnnl_version_t* v = dnnl_version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

std::string effectiveIsaName() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::all: return "all";
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_mic: return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
  }
  return "dnnl_cpu_isa_" + std::to_string(int(dnnl_get_effective_cpu_isa()));  // a newer oneDNN's value
}

std::vector<std::pair<std::string, std::string>> layoutAssumptions(int threads) {
  return {{kAssumeVersion, dnnlVersionString()}, {kAssumeIsa, effectiveIsaName()},
          {kAssumeThreads, std::to_string(threads)}};
}

}  // namespace partita::dnnl_backend
