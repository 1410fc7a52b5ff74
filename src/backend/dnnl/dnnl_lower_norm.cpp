// Lowering of the ops that normalise or reduce along axes: softmax and logsoftmax,
// layer normalization (the op, and the ten-node pattern exporters write before opset
// 17), inference batch normalization, reductions.
#include "backend/dnnl/dnnl_function_lowering.h"

#include <cmath>

#include "backend/dnnl/dnnl_module.h"
#include "backend/dnnl/dnnl_primitive.h"

namespace partita::dnnl_backend {

using ir::ValueId;

std::optional<std::pair<size_t, float>> FunctionLowering::softmaxScaleOf(ValueId v) const {
  const std::optional<size_t> d = soleConsumer(v);
  if (!d || elementType(v) != memory::data_type::f32) return std::nullopt;
  const ir::Node& n = nodeAt(*d);
  if (!n.domain.empty() || (n.op_type != "Div" && n.op_type != "Mul") || n.inputs.size() != 2 ||
      n.outputs.size() != 1 || n.inputs[0] == n.inputs[1])
    return std::nullopt;
  ValueId c = n.inputs[1];
  if (n.inputs[0] != v) {
    if (n.op_type == "Div") return std::nullopt;
    c = n.inputs[0];
  }
  if (!isConstant(c) || elementType(c) != memory::data_type::f32 || ir::shapeNumel(shapeOf(c)) != 1 ||
      shapeOf(n.outputs[0]) != shapeOf(v) || !constData(c))
    return std::nullopt;
  float f = constData(c)[0];
  int e = 0;
  if (!std::isfinite(f) || f == 0) return std::nullopt;
  if (n.op_type == "Div") {
    if (std::fabs(std::frexp(f, &e)) != 0.5f) return std::nullopt;
    f = 1.0f / f;
  }
  const std::optional<size_t> s = soleConsumer(n.outputs[0]);
  if (!s || nodeAt(*s).op_type != "Softmax" || !nodeAt(*s).domain.empty() || nodeAt(*s).inputs[0] != n.outputs[0])
    return std::nullopt;
  const std::optional<SoftmaxSpec> spec = decodeSoftmax(g_, nodeAt(*s), nullptr);
  if (!spec || spec->log || spec->axis != int64_t(spec->dims.size()) - 1) return std::nullopt;
  return std::make_pair(*d, f);
}

void FunctionLowering::lowerSoftmax(size_t pos, std::optional<std::pair<size_t, float>> scaled) {
  const size_t at = scaled ? scaled->first : pos;  // the node lowered: the scale's, or the Softmax
  const ir::Node& node = nodeAt(pos);
  const SoftmaxSpec spec = decoded(decodeSoftmax(g_, node, nullptr), pos);
  // The value scaled: the Div's or Mul's operand that is not the constant.
  const ir::Node& sn = nodeAt(at);
  const ValueId x = !scaled ? node.inputs[0] : isConstant(sn.inputs[1]) ? sn.inputs[0] : sn.inputs[1];
  const ValueId out = node.outputs[0];
  const Loc src = plain(x);
  const memory::desc md = plainDesc(spec.dims);
  Step step;
  step.kind = spec.log ? StepKind::kLogSoftmax : StepKind::kSoftmax;
  // Along the last dim (attention's scores): the module's own kernel, 1.5-1.9x
  // oneDNN 2.6's (docs/backends.md, step kind 23).
  if (!spec.log && spec.axis == int64_t(spec.dims.size()) - 1) step.kind = StepKind::kSoftmaxRows;
  ChainItem softmax;
  softmax.pos = pos;
  step.label = scaled ? labelOf(at, {softmax}) : labelOf(pos, {});
  step.axis = spec.axis;
  if (scaled) step.alpha = scaled->second;
  step.args.push_back(bufferArg(DNNL_ARG_SRC, src.buffer, md));
  if (scaled) consume(at);
  consume(pos);
  // The own kernel reads each row before it writes it: in place over a source nothing
  // reads afterwards (attention's scores), one [heads, seq, seq] buffer fewer to write.
  emitOverDeadSource(std::move(step), src.buffer, step.kind == StepKind::kSoftmaxRows && sameDesc(src.md, md), md,
                     out);
}

void FunctionLowering::lowerLayerNorm(size_t pos) {
  const ir::Node& node = nodeAt(pos);
  const NormSpec spec = decoded(decodeLayerNorm(g_, node, nullptr), pos);
  const ValueId x = node.inputs[0], out = node.outputs[0];
  const Loc src = plain(x);
  const memory::desc md = plainDesc(spec.dims);
  const memory::desc param_md = plainDesc({spec.dims[1]});
  Step step;
  step.kind = StepKind::kLayerNorm;
  step.label = labelOf(pos, {});
  step.epsilon = spec.epsilon;
  step.flags = uint32_t(dnnl::normalization_flags::use_scale);
  step.args.push_back(bufferArg(DNNL_ARG_SRC, src.buffer, md));
  step.args.push_back(mb_.borrow(DNNL_ARG_SCALE, constOf(node.inputs[1]), param_md));
  if (node.hasInput(2)) {
    step.flags |= uint32_t(dnnl::normalization_flags::use_shift);
    step.args.push_back(mb_.borrow(DNNL_ARG_SHIFT, constOf(node.inputs[2]), param_md));
  }
  consume(pos);
  emitOverDeadSource(std::move(step), src.buffer, true, md, out);
}

void FunctionLowering::lowerBatchNorm(size_t pos) {
  const ir::Node& node = nodeAt(pos);
  const NormSpec spec = decoded(decodeBatchNorm(g_, node, nullptr), pos);
  const ValueId x = node.inputs[0], out = node.outputs[0];
  const memory::desc param_md = plainDesc({spec.dims[1]});
  auto build = [&](const Loc& src, Step& step) {
    step = Step{};
    step.kind = StepKind::kBatchNorm;
    step.label = labelOf(pos, {});
    step.epsilon = spec.epsilon;
    step.flags = uint32_t(dnnl::normalization_flags::use_global_stats | dnnl::normalization_flags::use_scale |
                          dnnl::normalization_flags::use_shift);
    step.args.push_back(bufferArg(DNNL_ARG_SRC, src.buffer, src.md));
    step.args.push_back(bufferArg(DNNL_ARG_DST, 0, src.md));
  };
  Step step;
  Loc src = primary(x);
  build(src, step);
  try {
    makePrimitiveDesc(step, cpuEngine());
  } catch (const dnnl::error&) {
    src = plain(x);
    build(src, step);
    makePrimitiveDesc(step, cpuEngine());
  }
  step.args.push_back(mb_.borrow(DNNL_ARG_SCALE, constOf(node.inputs[1]), param_md));
  step.args.push_back(mb_.borrow(DNNL_ARG_SHIFT, constOf(node.inputs[2]), param_md));
  step.args.push_back(mb_.borrow(DNNL_ARG_MEAN, constOf(node.inputs[3]), param_md));
  step.args.push_back(mb_.borrow(DNNL_ARG_VARIANCE, constOf(node.inputs[4]), param_md));
  consume(pos);
  uint32_t dst = bufferDead(src.buffer) ? src.buffer : newBuffer(src.md);
  step.find(DNNL_ARG_DST)->index = dst;
  fn_.steps.push_back(std::move(step));
  place(out, Loc{dst, src.md});
}

void FunctionLowering::lowerReduce(size_t pos) {
  const ir::Node& node = nodeAt(pos);
  if (std::optional<LayerNormMatch> ln = matchLayerNorm(g_, r_.nodes[pos])) {
    std::vector<size_t> parts;
    for (ir::NodeId id : ln->nodes) {
      auto it = pos_of_.find(id);
      if (it == pos_of_.end() || (done_[it->second] && it->second != pos)) break;
      parts.push_back(it->second);
    }
    if (parts.size() == ln->nodes.size()) {
      lowerLayerNormPattern(*ln, parts);
      return;
    }
  }
  const ReduceSpec spec = decoded(decodeReduce(g_, node, nullptr), pos);
  const ValueId x = node.inputs[0], out = node.outputs[0];
  const Loc src = plain(x);
  Step step;
  step.kind = StepKind::kReduction;
  step.label = labelOf(pos, {});
  step.alg = int32_t(spec.alg);
  step.alpha = spec.p;
  step.args.push_back(bufferArg(DNNL_ARG_SRC, src.buffer, plainDesc(spec.src_dims)));
  consume(pos);
  emitToNewBuffer(std::move(step), plainDesc(spec.dst_dims), out);
}

// A LayerNormalization written out in ten nodes: one oneDNN layer normalization.
void FunctionLowering::lowerLayerNormPattern(const LayerNormMatch& ln, const std::vector<size_t>& parts) {
  const Loc src = plain(ln.x);
  const memory::desc md = plainDesc({ln.outer, ln.inner});
  const memory::desc param_md = plainDesc({ln.inner});
  Step step;
  step.kind = StepKind::kLayerNorm;
  step.label = labelOf(parts.front(), {});
  for (size_t i = 1; i < parts.size(); ++i) step.label += "+" + nodeAt(parts[i]).name;
  step.epsilon = ln.epsilon;
  step.flags = uint32_t(dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift);
  step.args.push_back(bufferArg(DNNL_ARG_SRC, src.buffer, md));
  step.args.push_back(mb_.borrow(DNNL_ARG_SCALE, constOf(ln.gamma), param_md));
  step.args.push_back(mb_.borrow(DNNL_ARG_SHIFT, constOf(ln.beta), param_md));
  for (size_t p : parts) consume(p);
  emitOverDeadSource(std::move(step), src.buffer, true, md, ln.y);
}

}  // namespace partita::dnnl_backend
