// Lowering of the sliding-window ops: Conv and ConvTranspose (weights reordered into
// the layout oneDNN chooses, an inference BatchNormalization right after a Conv folded
// into its weights and bias, post-ops fused) and pooling.
#include "backend/dnnl/dnnl_function_lowering.h"

#include <cmath>

#include "backend/dnnl/dnnl_claims.h"
#include "backend/dnnl/dnnl_module.h"
#include "backend/dnnl/dnnl_primitive.h"
#include "kernels/op_util.h"

namespace partita::dnnl_backend {

using ir::ValueId;

void FunctionLowering::lowerConv(size_t pos) {
  const ir::Node& node = nodeAt(pos);
  const ConvSpec spec = decoded(decodeConv(g_, node, nullptr), pos);
  const ValueId x = node.inputs[0], out = node.outputs[0];
  const ir::ConstId w_id = constOf(node.inputs[1]);
  const int64_t G = spec.groups;
  std::vector<int64_t> kernel(spec.weight_shape.begin() + 2, spec.weight_shape.end());
  const int64_t K = ir::shapeNumel(kernel);
  int64_t c_in = spec.in_shape[1], c_out = spec.out_shape[1];

  // oneDNN's weight dims ([G,] O, I, spatial) and the ONNX layout as strides over them.
  std::vector<int64_t> w_dims, w_strides;
  if (!spec.transposed) {
    w_dims = {c_out / G, c_in / G};
    w_strides = {(c_in / G) * K, K};
  } else {  // ONNX: [C_in, C_out / G, k...] = [G, C_in / G, C_out / G, k...]
    w_dims = {c_out / G, c_in / G};
    w_strides = {K, (c_out / G) * K};
  }
  if (G > 1) {
    w_dims.insert(w_dims.begin(), G);
    w_strides.insert(w_strides.begin(), (c_in / G) * (c_out / G) * K);
  }
  const std::vector<int64_t> kstr = kernels::stridesOf(kernel);
  w_dims.insert(w_dims.end(), kernel.begin(), kernel.end());
  w_strides.insert(w_strides.end(), kstr.begin(), kstr.end());
  const memory::desc w_from = withStrides(w_dims, w_strides);

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
  if (first_layer)
    step.args.push_back(Arg{DNNL_ARG_SRC, ArgSource::kBuffer, 0, plainDesc(spec.in_shape), false});
  else
    step.args.push_back(Arg{DNNL_ARG_SRC, ArgSource::kBuffer, 0, anyDesc(spec.in_shape), true});
  // A replay reads the weights in the layout the compiler stored them in.
  const bool folded = bn_pos.has_value();
  if (std::optional<memory::desc> stored = mb_.storedWeights(w_id, folded))
    step.args.push_back(Arg{DNNL_ARG_WEIGHTS, ArgSource::kConstant, 0, *stored, false});
  else
    step.args.push_back(Arg{DNNL_ARG_WEIGHTS, ArgSource::kConstant, 0, anyDesc(w_dims), true});
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
  size_t k = fitChain(step, chain, bn_pos ? 1 : 0, pd);
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

void FunctionLowering::lowerPool(size_t pos) {
  const ir::Node& node = nodeAt(pos);
  const PoolSpec spec = decoded(decodePool(g_, node, nullptr), pos);
  const ValueId x = node.inputs[0], out = node.outputs[0];
  Step step;
  step.kind = StepKind::kPooling;
  step.label = labelOf(pos, {});
  step.alg = int32_t(spec.alg);
  step.kernel = spec.kernel;
  step.strides = spec.strides;
  step.dilates = spec.dilates;
  step.pad_l = spec.pad_l;
  step.pad_r = spec.pad_r;
  Loc src = primary(x);
  step.args.push_back(Arg{DNNL_ARG_SRC, ArgSource::kBuffer, src.buffer, src.md, false});
  step.args.push_back(Arg{DNNL_ARG_DST, ArgSource::kBuffer, 0, anyDesc(shapeOf(out)), true});
  dnnl::primitive_desc_base pd;
  try {
    pd = makePrimitiveDesc(step, cpuEngine());
  } catch (const dnnl::error&) {
    src = plain(x);
    step.args[0] = Arg{DNNL_ARG_SRC, ArgSource::kBuffer, src.buffer, src.md, false};
    pd = makePrimitiveDesc(step, cpuEngine());
  }
  recordChosenLayouts(step, pd);
  consume(pos);
  Arg* dst = step.find(DNNL_ARG_DST);
  dst->index = newBuffer(dst->md);
  place(out, Loc{uint32_t(dst->index), dst->md});
  fn_.steps.push_back(std::move(step));
}

}  // namespace partita::dnnl_backend
