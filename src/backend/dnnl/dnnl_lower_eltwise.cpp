// Lowering of the elementwise ops: eltwise steps (in place when nothing reads the
// input afterwards; SiLU as swish, Gelu as gelu_erf), binary steps with their post-op
// chains, PRelu.
#include "backend/dnnl/dnnl_function_lowering.h"

#include <cmath>
#include <utility>

#include "backend/dnnl/dnnl_claims.h"
#include "backend/dnnl/dnnl_module.h"
#include "backend/dnnl/dnnl_primitive.h"
#include "partita/error.h"

namespace partita::dnnl_backend {

using dnnl::algorithm;
using ir::ValueId;

void FunctionLowering::lowerEltwise(size_t pos) {
  const ir::Node& node = nodeAt(pos);
  std::optional<std::vector<EltwiseOp>> ops = decodeEltwise(g_, node, nullptr);
  // QuantizeLinear / DequantizeLinear between int8 and float32 values (not a pair)
  if (!ops && (node.op_type == "QuantizeLinear" || node.op_type == "DequantizeLinear") &&
      decodeQuantize(g_, node, nullptr))
    return lowerQuantize(pos);
  if (!ops && node.op_type == "Erf")
    throw Error(ErrorCode::kUnsupported,
                "dnnl backend: Erf '" + node.name +
                    "' is taken only inside a Gelu; its pattern was split (by --allow/--deny?)");
  if (!ops && node.op_type == "DequantizeLinear")
    throw Error(ErrorCode::kUnsupported, "dnnl backend: DequantizeLinear '" + node.name +
                                             "' is taken only with its QuantizeLinear; the pair was split");
  if (!ops) internal("eltwise '" + node.name + "' not supported");
  std::vector<ChainItem> fused;
  if (node.op_type == "QuantizeLinear") {  // the pair: its DequantizeLinear goes with it
    ChainItem item;
    item.pos = fakeQuantTail(ir::NodeId(&node - g_.nodes.data()));
    fused.push_back(item);
  }
  // Sigmoid(x) * x: one swish over x; HardSigmoid(x) * x: one hardswish.
  if (node.op_type == "Sigmoid" || node.op_type == "HardSigmoid")
    if (auto gated = gatedAfter(node.inputs[0]); gated && gated->gate == pos) {
      ops = std::vector<EltwiseOp>{{gated->alg, gated->alg == algorithm::eltwise_swish ? 1.0f : 0.0f, 0.0f}};
      ChainItem item;
      item.pos = gated->mul;
      fused.push_back(item);
    }
  emitEltwise(node.inputs[0], *ops, pos, fused);
}

// SiLU (oneDNN's swish with alpha 1) over float32 runs as the module's own kernel
// (dnnl_kernels.h).
static bool ownSwish(const EltwiseOp& op, const memory::desc& md) {
  return op.alg == algorithm::eltwise_swish && op.alpha == 1.0f && md.data.data_type == dnnl_f32 &&
         md.data.offset0 == 0;
}

// Eltwise steps over `x` computing the node at `pos` and the nodes `fused` after it,
// in place when nothing reads `x` afterwards (oneDNN eltwise allows src == dst).
void FunctionLowering::emitEltwise(ValueId x, const std::vector<EltwiseOp>& ops, size_t pos,
                                   const std::vector<ChainItem>& fused) {
  const std::string label = labelOf(pos, fused);
  const ValueId out = fused.empty() ? nodeAt(pos).outputs[0] : nodeAt(fused.back().pos).outputs[0];
  const Loc src = primary(x);
  consume(pos);
  for (const ChainItem& c : fused) consumeItem(c);
  uint32_t dst = bufferDead(src.buffer) ? src.buffer : newBuffer(src.md);
  for (size_t i = 0; i < ops.size(); ++i) {
    Step step;
    step.kind = StepKind::kEltwise;
    step.label = label;
    step.alg = int32_t(ops[i].alg);
    step.alpha = ops[i].alpha;
    step.beta = ops[i].beta;
    step.args.push_back(bufferArg(DNNL_ARG_SRC, i == 0 ? src.buffer : dst, src.md));
    step.args.push_back(bufferArg(DNNL_ARG_DST, dst, src.md));
    if (ownSwish(ops[i], src.md)) {
      step.kind = StepKind::kSwish;
      step.alg = 0;
      step.alpha = step.beta = 0;
    } else {
      makePrimitiveDesc(step, cpuEngine());
    }
    fn_.steps.push_back(std::move(step));
  }
  place(out, Loc{dst, src.md});
}

bool FunctionLowering::prescaleIntoMatMul(size_t pos) {
  const ir::Node& node = nodeAt(pos);
  if ((node.op_type != "Div" && node.op_type != "Mul") || !node.domain.empty() || node.inputs.size() != 2 ||
      node.outputs.size() != 1 || computed_prescales_.count(pos))
    return false;
  ValueId x = node.inputs[0], c = node.inputs[1];
  if (node.op_type == "Mul" && isConstant(x)) std::swap(x, c);
  const ValueId out = node.outputs[0];
  if (x == ir::kNoValue || c == ir::kNoValue || isConstant(x) || !isConstant(c) ||
      g_.typeOf(c).dtype != ir::DType::kFloat32 || ir::shapeNumel(shapeOf(c)) != 1 ||
      elementType(x) != memory::data_type::f32 || shapeOf(x) != shapeOf(out) || dynamic_.count(x) ||
      deferred_.count(x) || prescaled_.count(x))
    return false;
  const std::optional<size_t> reader = soleConsumer(out);
  if (!reader) return false;
  const ir::Node& mm = nodeAt(*reader);
  const bool by_product = mm.op_type == "MatMul" && mm.domain.empty() && classify(mm) == OpClass::kMatMul &&
                          mm.inputs.size() == 2 && mm.inputs[0] != mm.inputs[1] && !isConstant(mm.inputs[0]) &&
                          !isConstant(mm.inputs[1]);
  const bool by_post_op = ir::shapeNumel(shapeOf(out)) == 1 && (mm.op_type == "Mul" || mm.op_type == "Div") &&
                          mm.domain.empty() && classify(mm) == OpClass::kBinary;
  if (!by_product && !by_post_op) return false;
  const float v = constData(c)[0];
  const float factor = node.op_type == "Div" ? 1.0f / v : v;
  if (!std::isfinite(factor)) return false;
  done_[pos] = true;  // its input is consumed with the MatMul
  prescaled_[out] = Prescaled{x, factor, pos};
  return true;
}

void FunctionLowering::lowerBinary(size_t pos) {
  if (prescaleIntoMatMul(pos)) return;
  const ir::Node& node = nodeAt(pos);
  const algorithm alg = decoded(decodeBinary(g_, node, nullptr), pos);
  // A scale before a Softmax along the last dim: taken by its softmax_rows step.
  for (ValueId in : node.inputs)
    if (auto scaled = softmaxScaleOf(in); scaled && scaled->first == pos) {
      const std::optional<size_t> softmax = soleConsumer(node.outputs[0]);
      return lowerSoftmax(*softmax, scaled);
    }
  // The Div that starts a Gelu: one gelu_erf over its input.
  if (node.op_type == "Div")
    if (auto gelu = geluAfter(node.inputs[0]); gelu && gelu->first[0] == pos) {
      ChainItem item;
      item.pos = gelu->second;
      item.extra.assign(gelu->first.begin() + 1, gelu->first.end());  // Erf, Add, Mul
      emitEltwise(node.inputs[0], {{algorithm::eltwise_gelu_erf, 0, 0}}, pos, {item});
      return;
    }
  const ValueId out = node.outputs[0];
  const std::vector<int64_t> y = shapeOf(out);
  ValueId a = node.inputs[0], b = node.inputs[1];
  if (padLeft(shapeOf(a), y.size()) != y) std::swap(a, b);  // decodeBinary allowed this only when commutative
  const bool b_full = padLeft(shapeOf(b), y.size()) == y;

  // Layouts: the first operand as it is; a full-size second operand in the same
  // layout, a broadcast one row-major. If oneDNN declines, everything row-major.
  auto build = [&](bool force_plain, Step& step) {
    step = Step{};
    step.kind = StepKind::kBinary;
    step.alg = int32_t(alg);
    memory::desc src0_md;
    if (isConstant(a)) {
      src0_md = plainDesc(y);
    } else {
      src0_md = force_plain ? plainDesc(y) : primary(a).md;
      if (dimsOf(src0_md) != plainDesc(y).dims()) src0_md = plainDesc(y);
    }
    memory::desc src1_md = plainDesc(padLeft(shapeOf(b), y.size()));
    if (b_full && !isConstant(b)) src1_md = src0_md;
    step.args.push_back(Arg{DNNL_ARG_SRC_0, ArgSource::kBuffer, 0, src0_md, false});
    step.args.push_back(Arg{DNNL_ARG_SRC_1, ArgSource::kBuffer, 0, src1_md, false});
    step.args.push_back(Arg{DNNL_ARG_DST, ArgSource::kBuffer, 0, src0_md, false});
  };
  // Post-ops: activations, constant operands, and a full-size operand computed
  // earlier (a bias Add then the residual Add of an encoder layer: one step).
  std::vector<ChainItem> chain = collectChain(out, false, true, true);
  if (chain.empty() && emitScaleChannels(pos, alg, a, b)) return;
  Step step;
  dnnl::primitive_desc_base pd;
  size_t k = 0;
  try {
    build(false, step);
    k = fitChain(step, chain, 0, pd);
    // A blocked first operand with a broadcast second one can leave oneDNN only its
    // reference loops (a 1x64x24x32 aBcd16b tensor times a scalar): row-major then.
    if (isReference(pd)) throw dnnl::error(dnnl_unimplemented, "reference binary");
  } catch (const dnnl::error&) {
    build(true, step);
    k = fitChain(step, chain, 0, pd);
  }
  chain.resize(k);
  step.label = labelOf(pos, chain);

  Arg* s0 = step.find(DNNL_ARG_SRC_0);
  Arg* s1 = step.find(DNNL_ARG_SRC_1);
  if (isConstant(a))
    *s0 = constantArg(DNNL_ARG_SRC_0, a, s0->md);
  else
    s0->index = isPlainDense(s0->md) ? plain(a).buffer : get(a, s0->md).buffer;
  if (isConstant(b))
    *s1 = constantArg(DNNL_ARG_SRC_1, b, s1->md);
  else
    s1->index = isPlainDense(s1->md) ? plain(b).buffer : get(b, s1->md).buffer;
  consume(pos);
  for (const ChainItem& c : chain) consumeItem(c);
  bindPostOpOperands(step, chain);
  s0 = step.find(DNNL_ARG_SRC_0);
  Arg* dst = step.find(DNNL_ARG_DST);
  // In place over the first operand when nothing reads it afterwards (nor as the
  // second operand or a post-op's).
  bool in_place = s0->source == ArgSource::kBuffer && bufferDead(uint32_t(s0->index));
  for (const Arg& a : step.args)
    if (&a != s0 && a.key != DNNL_ARG_DST && a.source == ArgSource::kBuffer && a.index == s0->index) in_place = false;
  uint32_t d = in_place ? uint32_t(s0->index) : newBuffer(dst->md);
  dst->index = d;
  ValueId final_value = chain.empty() ? out : nodeAt(chain.back().pos).outputs[0];
  place(final_value, Loc{d, dst->md});
  fn_.steps.push_back(std::move(step));
}

// A squeeze-excitation block's Mul: a channels-last float32 tensor times computed
// per-channel factors ([N or 1, C, 1...]), nothing fused after it. The module's own
// kernel (dnnl_kernels.h), in place when nothing reads the tensor afterwards.
bool FunctionLowering::emitScaleChannels(size_t pos, algorithm alg, ValueId a, ValueId b) {
  const std::vector<int64_t> y = shapeOf(nodeAt(pos).outputs[0]);
  if (alg != algorithm::binary_mul || isConstant(a) || isConstant(b) || y.size() < 3 || shapeOf(a) != y ||
      elementType(a) != memory::data_type::f32 || elementType(b) != memory::data_type::f32)
    return false;
  const std::vector<int64_t> s = padLeft(shapeOf(b), y.size());
  for (size_t i = 2; i < y.size(); ++i)
    if (s[i] != 1) return false;
  if (s[1] != y[1] || !(s[0] == 1 || s[0] == y[0])) return false;
  const Loc x = primary(a);
  if (!isChannelsLastDense(x.md)) return false;
  Step step;
  step.kind = StepKind::kScaleChannels;
  step.label = labelOf(pos, {});
  const uint32_t factors = plain(b).buffer;
  step.args.push_back(bufferArg(DNNL_ARG_SRC_0, x.buffer, x.md));
  step.args.push_back(bufferArg(DNNL_ARG_SRC_1, factors, plainDesc(s)));
  consume(pos);
  const bool in_place = bufferDead(x.buffer) && factors != x.buffer;
  const uint32_t d = in_place ? x.buffer : newBuffer(x.md);
  step.args.push_back(bufferArg(DNNL_ARG_DST, d, x.md));
  fn_.steps.push_back(std::move(step));
  place(nodeAt(pos).outputs[0], Loc{d, x.md});
  return true;
}

void FunctionLowering::lowerPrelu(size_t pos) {
  const ir::Node& node = nodeAt(pos);
  if (!decodePrelu(g_, node, nullptr)) internal("PRelu '" + node.name + "' not supported");
  const ValueId x = node.inputs[0], slope = node.inputs[1], out = node.outputs[0];
  const std::vector<int64_t> xs = shapeOf(x);
  const memory::desc w_md = plainDesc(padLeft(shapeOf(slope), xs.size()));
  auto build = [&](const Loc& src, Step& step) {
    step = Step{};
    step.kind = StepKind::kPrelu;
    step.label = labelOf(pos, {});
    step.args.push_back(bufferArg(DNNL_ARG_SRC, src.buffer, src.md));
    step.args.push_back(Arg{DNNL_ARG_WEIGHTS, ArgSource::kConstant, 0, w_md, false});
    step.args.push_back(bufferArg(DNNL_ARG_DST, 0, src.md));
  };
  Step step;
  Loc src = primary(x);
  if (dimsOf(src.md) != plainDesc(xs).dims()) src = plain(x);
  build(src, step);
  try {
    makePrimitiveDesc(step, cpuEngine());
  } catch (const dnnl::error&) {
    src = plain(x);
    src.md = plainDesc(xs);
    build(src, step);
    makePrimitiveDesc(step, cpuEngine());
  }
  *step.find(DNNL_ARG_WEIGHTS) = constantArg(DNNL_ARG_WEIGHTS, slope, w_md);
  consume(pos);
  uint32_t dst = newBuffer(src.md);
  step.find(DNNL_ARG_DST)->index = dst;
  fn_.steps.push_back(std::move(step));
  place(out, Loc{dst, src.md});
}

}  // namespace partita::dnnl_backend
