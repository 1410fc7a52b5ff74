// Lowering of the int8 ops: QLinearConv on oneDNN's int8 convolution (u8/s8 source
// with its zero point, s8 weights derived once into the layout oneDNN chooses, int32
// bias, output scales x_scale * w_scale[c] / y_scale, u8/s8 destination with its zero
// point), and QuantizeLinear / DequantizeLinear between int8 and float32 values as
// reorders with an output scale and a zero point. Activations stay int8 between int8
// steps (in whatever layout the producer wrote them).
#include "backend/dnnl/dnnl_function_lowering.h"

#include <cfloat>
#include <cmath>

#include "backend/dnnl/dnnl_decode_util.h"
#include "backend/dnnl/dnnl_patterns.h"

#include "backend/dnnl/dnnl_module.h"
#include "backend/dnnl/dnnl_primitive.h"

namespace partita::dnnl_backend {

using ir::ValueId;
using dt = memory::data_type;

memory::data_type FunctionLowering::elementType(ValueId v) const {
  switch (g_.typeOf(v).dtype) {
    case ir::DType::kUInt8:
      return dt::u8;
    case ir::DType::kInt8:
      return dt::s8;
    case ir::DType::kInt32:
      return dt::s32;
    default:
      return dt::f32;
  }
}

// A QDQ residual block's tail after a QLinearConv y (what a static quantizer writes
// for ResNet's `relu(conv2(h) + skip)`):
//   DequantizeLinear(y) + DequantizeLinear(skip_q) -> [Q -> DQ pair] -> [Relu] ->
//   QuantizeLinear -> out
// computed as one int8 binary step (emitQResidual). (A sum post-op of the convolution
// would save that step, but oneDNN 2.6's int8 convolutions then lose y's saturation:
// a clip post-op before the sum comes out after it.)
struct FunctionLowering::QResidual {
  std::vector<ChainItem> chain;
  ValueId skip = ir::kNoValue, skip_float = ir::kNoValue;  // skip_q and its DequantizeLinear
  size_t skip_dq = 0;
  float skip_scale = 1, out_scale_inv = 1;
  int32_t skip_zero_point = 0, out_zero_point = 0;
  memory::data_type out_type = memory::data_type::u8;
  bool relu = false;
  // The ranges y and the sum saturate to (real values; the sum's: none without a pair).
  float y_lo = 0, y_hi = 0, sum_lo = -INFINITY, sum_hi = INFINITY;
};

std::optional<FunctionLowering::QResidual> FunctionLowering::qResidualAfter(size_t pos, const QConvSpec& q) const {
  auto standalone = [&](std::optional<size_t> p, bool quantize) -> std::optional<QuantizeSpec> {
    if (!p) return std::nullopt;
    const ir::Node& n = nodeAt(*p);
    if (n.op_type != (quantize ? "QuantizeLinear" : "DequantizeLinear") || !n.domain.empty()) return std::nullopt;
    if (quantize && decodeEltwise(g_, n, nullptr)) return std::nullopt;  // a pair
    std::optional<QuantizeSpec> s = decodeQuantize(g_, n, nullptr);
    if (!s || s->quantize != quantize) return std::nullopt;
    return s;
  };
  const ValueId y = nodeAt(pos).outputs[0];
  const std::optional<size_t> dq_pos = soleConsumer(y);
  const std::optional<QuantizeSpec> dq = standalone(dq_pos, false);
  // The DequantizeLinear must read y with the scale and zero point it was written with.
  if (!dq || dq->scale != q.y_scale || dq->zero_point != q.dst_zero_point) return std::nullopt;
  const ValueId y_float = nodeAt(*dq_pos).outputs[0];
  const std::optional<size_t> add_pos = soleConsumer(y_float);
  if (!add_pos) return std::nullopt;
  const ir::Node& add = nodeAt(*add_pos);
  if (add.op_type != "Add" || !add.domain.empty() || add.inputs.size() != 2 || add.inputs[0] == add.inputs[1])
    return std::nullopt;
  const ValueId other = add.inputs[0] == y_float ? add.inputs[1] : add.inputs[0];
  if (isConstant(other) || shapeOf(other) != shapeOf(y_float) || shapeOf(add.outputs[0]) != shapeOf(y_float))
    return std::nullopt;
  const ir::NodeId skip_dq = g_.value(other).producer;
  auto skip_it = skip_dq == ir::kNoNode ? pos_of_.end() : pos_of_.find(skip_dq);
  if (skip_it == pos_of_.end()) return std::nullopt;
  const std::optional<QuantizeSpec> skip = standalone(skip_it->second, false);
  const ValueId skip_q = g_.nodes[size_t(skip_dq)].inputs[0];
  if (!skip || !available(skip_q) || isConstant(skip_q)) return std::nullopt;

  QResidual r;
  const float qmin = q.dst_type == memory::data_type::u8 ? 0.0f : -128.0f;
  r.y_lo = q.y_scale * (qmin - float(q.dst_zero_point));
  r.y_hi = q.y_scale * (qmin + 255.0f - float(q.dst_zero_point));
  r.skip = skip_q;
  r.skip_float = other;
  r.skip_dq = skip_it->second;
  r.skip_scale = skip->scale;
  r.skip_zero_point = skip->zero_point;
  ChainItem sum;
  sum.pos = *add_pos;
  sum.extra = {*dq_pos};
  sum.sum_addend = skip_q;
  r.chain.push_back(sum);
  ValueId cur = add.outputs[0];
  std::optional<size_t> next = soleConsumer(cur);
  if (next && nodeAt(*next).op_type == "QuantizeLinear" && decodeEltwise(g_, nodeAt(*next), nullptr)) {
    std::optional<FakeQuantMatch> m = matchFakeQuant(g_, r_.nodes[*next]);
    auto it = m ? pos_of_.find(m->dequantize) : pos_of_.end();
    if (it == pos_of_.end() || done_[it->second]) return std::nullopt;
    r.sum_lo = m->scale * m->lo;
    r.sum_hi = m->scale * m->hi;
    ChainItem pair;
    pair.pos = it->second;
    pair.extra = {*next};
    r.chain.push_back(pair);
    cur = nodeAt(it->second).outputs[0];
    next = soleConsumer(cur);
  }
  if (next && nodeAt(*next).op_type == "Relu" && nodeAt(*next).domain.empty()) {
    ChainItem relu;
    relu.pos = *next;
    r.chain.push_back(relu);
    r.relu = true;
    cur = nodeAt(*next).outputs[0];
    next = soleConsumer(cur);
  }
  // The final QuantizeLinear may start a pair (its DequantizeLinear then reads the
  // convolution's int8 output as a reorder of its own).
  std::optional<QuantizeSpec> out;
  if (next && nodeAt(*next).op_type == "QuantizeLinear" && nodeAt(*next).domain.empty())
    out = decodeQuantize(g_, nodeAt(*next), nullptr);
  if (!out || !out->quantize) return std::nullopt;
  ChainItem quantize;
  quantize.pos = *next;
  r.chain.push_back(quantize);
  r.out_scale_inv = out->scale;
  r.out_zero_point = out->zero_point;
  r.out_type = out->int_type;
  return r;
}

Step qconvStep(const QConvSpec& q) {
  const ConvSpec& spec = q.conv;
  Step step;
  step.kind = StepKind::kConvolution;
  step.strides = spec.strides;
  step.dilates = spec.dilates;
  step.pad_l = spec.pad_l;
  step.pad_r = spec.pad_r;
  step.args.push_back(Arg{DNNL_ARG_SRC, ArgSource::kBuffer, 0, withDataType(anyDesc(spec.in_shape), q.src_type), true});
  step.args.push_back(
      Arg{DNNL_ARG_WEIGHTS, ArgSource::kConstant, 0, withDataType(anyDesc(convWeights(spec).dims), dt::s8), true});
  if (q.bias != ir::kNoValue)
    step.args.push_back(
        Arg{DNNL_ARG_BIAS, ArgSource::kConstant, 0, withDataType(plainDesc({spec.out_shape[1]}), dt::s32), false});
  step.args.push_back(Arg{DNNL_ARG_DST, ArgSource::kBuffer, 0, withDataType(anyDesc(spec.out_shape), q.dst_type), true});
  // int8 accumulators (plus the int32 bias) times x_scale * w_scale[c] / y_scale.
  for (float ws : q.w_scales) step.quant.output_scales.push_back(q.x_scale * ws / q.y_scale);
  step.quant.scale_dim = 1;
  step.quant.src_zero_point = q.src_zero_point;
  step.quant.dst_zero_point = q.dst_zero_point;
  return step;
}

namespace {

// Whether oneDNN has a fast (not `ref`) implementation of `step`, an int8 `what`; if
// not, `why` says which way it has none.
bool fastInt8(const Step& step, const std::string& what, std::string* why) {
  try {
    if (isReference(makePrimitiveDesc(step, cpuEngine())))
      return noBool(why, "oneDNN has only its reference int8 " + what + " for it");
    return true;
  } catch (const dnnl::error&) {
    return noBool(why, "oneDNN has no int8 " + what + " for it");
  }
}

}  // namespace

bool qconvImplemented(const QConvSpec& q, std::string* why) { return fastInt8(qconvStep(q), "convolution", why); }

void FunctionLowering::lowerQConv(size_t pos) {
  const ir::Node& node = nodeAt(pos);
  const QConvSpec q = decoded(decodeQLinearConv(g_, node, nullptr), pos);
  if (std::optional<QMatMulSpec> product = asMatrixProduct(q); product && emitQMatMul(pos, *product)) return;
  if (channels_last_rows_.count(node.inputs[0]))
    internal("QLinearConv '" + node.name + "' reads a channels-last Flatten but is no int8 matrix product");
  const ConvSpec& spec = q.conv;
  const ValueId x = node.inputs[0], out = node.outputs[0];
  const ir::ConstId w_id = constOf(q.weights);
  const memory::desc w_from = withDataType(convWeights(spec).onnx, dt::s8);
  const memory::desc bias_md = withDataType(plainDesc({spec.out_shape[1]}), dt::s32);
  // What reads y decides what the convolution writes: int8 (the default), or float32
  // for a MaxPool (pooled in float32, then rounded into int8) or for a
  // DequantizeLinear (y's step rounding done by post-ops).
  const std::optional<size_t> pooled = int8MaxPoolAfter(out);
  const std::optional<QResidual> res = pooled ? std::nullopt : qResidualAfter(pos, q);
  const std::optional<size_t> dequantize = pooled || res ? std::nullopt : dequantizeAfter(out, q);
  Step step = qconvStep(q);
  dnnl::primitive_desc_base pd;
  bool float_dst = false;
  // An int8 y that oneDNN writes channels-last is pooled by the module's own int8
  // max pool (lowerPool), a quarter of the bytes of the float32 way and no reorder.
  bool pool = pooled.has_value(), int8_pool = false;
  if (pooled) try {
      pd = makePrimitiveDesc(step, cpuEngine());
      int8_pool = !isReference(pd) && int8MaxPoolFits(pd.query_md(dnnl::query::exec_arg_md, DNNL_ARG_DST),
                                                      decoded(decodePool(g_, nodeAt(*pooled), nullptr), *pooled));
      pool = !int8_pool;
    } catch (const dnnl::error&) {
    }
  if (pool || dequantize) {
    Step f = step;
    const float zero = float(q.dst_zero_point);
    f.find(DNNL_ARG_DST)->md = withDataType(f.find(DNNL_ARG_DST)->md, dt::f32);
    f.quant.dst_zero_point = 0;
    const int32_t linear = int32_t(dnnl::algorithm::eltwise_linear);
    if (pool) {
      // y's real-valued integers before rounding and saturation, which commute with max.
      if (zero != 0) f.post_ops.push_back(PostOp{PostOp::Kind::kEltwise, linear, 1.0f, zero, 1.0f});
    } else {
      // y_scale * (saturate(round(acc * s) + zero) - zero)
      const float lo = q.dst_type == dt::u8 ? -zero : -128.0f - zero;
      f.post_ops.push_back(PostOp{PostOp::Kind::kEltwise, int32_t(dnnl::algorithm::eltwise_round), 0, 0, 1.0f});
      f.post_ops.push_back(PostOp{PostOp::Kind::kEltwise, int32_t(dnnl::algorithm::eltwise_clip), lo, lo + 255.0f, 1.0f});
      f.post_ops.push_back(PostOp{PostOp::Kind::kEltwise, linear, q.y_scale, 0.0f, 1.0f});
    }
    try {
      pd = makePrimitiveDesc(f, cpuEngine());
      if (!isReference(pd)) {
        step = std::move(f);
        float_dst = true;
      }
    } catch (const dnnl::error&) {
    }
  }
  if (!float_dst && !int8_pool) pd = makePrimitiveDesc(step, cpuEngine());
  recordChosenLayouts(step, pd);

  Arg* src = step.find(DNNL_ARG_SRC);
  src->index = get(x, src->md).buffer;
  Arg* w = step.find(DNNL_ARG_WEIGHTS);
  w->index = mb_.derive(w_id, w_from, g_.constants.get(w_id).bytes.data, w->md, true);
  if (q.bias != ir::kNoValue) *step.find(DNNL_ARG_BIAS) = mb_.borrow(DNNL_ARG_BIAS, constOf(q.bias), bias_md);
  std::vector<ChainItem> chain;
  if (float_dst && dequantize) {
    ChainItem dq;
    dq.pos = *dequantize;
    chain.push_back(dq);
  }
  finishAnchor(step, pos, chain, out);
  if (float_dst && pool) emitInt8MaxPool(*pooled, out, q.dst_type);
  if (res) emitQResidual(*res, out, q);
}

// A MaxPool over int8 y that nothing else reads. oneDNN 2.6's int8 max pooling is
// slow (jit_int: 0.37-0.48 ms over [100,16,28,28], 3-5x its float32 pooling).
std::optional<size_t> FunctionLowering::int8MaxPoolAfter(ValueId y) const {
  const std::optional<size_t> p = soleConsumer(y);
  if (!p) return std::nullopt;
  const ir::Node& n = nodeAt(*p);
  if (n.op_type != "MaxPool" || !n.domain.empty() || n.outputs.size() != 1) return std::nullopt;
  const std::optional<PoolSpec> spec = decodePool(g_, n, nullptr);
  if (!spec || spec->alg != dnnl::algorithm::pooling_max) return std::nullopt;
  return p;
}

// The standalone DequantizeLinear that reads y, and only it, with y's own scale and
// zero point.
std::optional<size_t> FunctionLowering::dequantizeAfter(ValueId y, const QConvSpec& q) const {
  const std::optional<size_t> p = soleConsumer(y);
  if (!p) return std::nullopt;
  const ir::Node& n = nodeAt(*p);
  if (n.op_type != "DequantizeLinear" || !n.domain.empty()) return std::nullopt;
  const std::optional<QuantizeSpec> dq = decodeQuantize(g_, n, nullptr);
  if (!dq || dq->quantize || dq->scale != q.y_scale || dq->zero_point != q.dst_zero_point) return std::nullopt;
  return p;
}

// The MaxPool at `pos` over y written in float32 (its integers before rounding), then
// rounded and saturated into `int_type` by one reorder: max commutes with both.
void FunctionLowering::emitInt8MaxPool(size_t pos, ValueId y, memory::data_type int_type) {
  const ir::Node& node = nodeAt(pos);
  const ValueId out = node.outputs[0];
  const Loc pooled = windowStep(poolStep(decoded(decodePool(g_, node, nullptr), pos), labelOf(pos, {})), pos, y,
                                shapeOf(out), dt::f32);
  place(out, emitReorder(pooled, withDataType(pooled.md, int_type), node.name + ": to int8"));
}

Step qmatmulStep(const QMatMulSpec& q) {
  Step step;
  step.kind = StepKind::kMatMul;
  step.args.push_back(Arg{DNNL_ARG_SRC, ArgSource::kBuffer, 0, withDataType(plainDesc({q.rows, q.k}), q.src_type), false});
  step.args.push_back(Arg{DNNL_ARG_WEIGHTS, ArgSource::kConstant, 0, withDataType(anyDesc({q.k, q.n}), dt::s8), true});
  if (q.bias != ir::kNoValue)
    step.args.push_back(Arg{DNNL_ARG_BIAS, ArgSource::kConstant, 0, withDataType(plainDesc({1, q.n}), dt::s32), false});
  step.args.push_back(Arg{DNNL_ARG_DST, ArgSource::kBuffer, 0, withDataType(plainDesc({q.rows, q.n}), q.dst_type), false});
  step.quant.output_scales = q.output_scales;
  step.quant.scale_dim = 1;
  step.quant.src_zero_point = q.src_zero_point;
  step.quant.dst_zero_point = q.dst_zero_point;
  return step;
}

bool qmatmulImplemented(const QMatMulSpec& q, std::string* why) { return fastInt8(qmatmulStep(q), "matmul", why); }

void FunctionLowering::lowerQMatMul(size_t pos) {
  if (!emitQMatMul(pos, decoded(decodeQMatMul(g_, nodeAt(pos), nullptr), pos)))
    internal("no int8 matmul for '" + nodeAt(pos).name + "', which the claim accepted");
}

// An int8 matrix product on oneDNN's int8 matmul. A QLinearConv's [N, K, 1, 1]
// weights are read as [K, N]: its 1x1 int8 convolution over [M, K, 1, 1] is 3-5x
// slower at these shapes (brgconv_1x1 at M 100, K 1568, N 128: 0.28 ms; the matmul
// 0.05-0.1 ms). False when oneDNN has no fast int8 matmul for it.
bool FunctionLowering::emitQMatMul(size_t pos, const QMatMulSpec& q) {
  const ir::Node& node = nodeAt(pos);
  Step step = qmatmulStep(q);
  try {
    dnnl::primitive_desc_base pd = makePrimitiveDesc(step, cpuEngine());
    if (isReference(pd)) return false;
    recordChosenLayouts(step, pd);
  } catch (const dnnl::error&) {
    return false;
  }
  step.find(DNNL_ARG_SRC)->index = plain(node.inputs[0]).buffer;
  Arg* w = step.find(DNNL_ARG_WEIGHTS);
  const ir::ConstId w_id = constOf(q.weights);
  const memory::desc w_from =
      withDataType(q.weights_nk ? withStrides({q.k, q.n}, {1, q.k}) : plainDesc({q.k, q.n}), dt::s8);
  const auto* from = reinterpret_cast<const int8_t*>(g_.constants.get(w_id).bytes.data);
  if (auto rows = channels_last_rows_.find(node.inputs[0]); rows != channels_last_rows_.end()) {
    // A channels-last Flatten's rows (flattenIntoWeights).
    const auto [C, H, W] = rows->second;
    if (C * H * W != q.k) internal("QLinearConv '" + node.name + "' reads rows it does not fit");
    std::vector<int8_t> permuted;
    if (mb_.computes()) permuted = channelsLastRows(from, rows->second, q.n, q.weights_nk);
    w->index = mb_.derive(w_id, w_from, permuted.data(), w->md, false);
  } else {
    w->index = mb_.derive(w_id, w_from, from, w->md, true);
  }
  if (q.bias != ir::kNoValue)
    *step.find(DNNL_ARG_BIAS) = mb_.borrow(DNNL_ARG_BIAS, constOf(q.bias), step.find(DNNL_ARG_BIAS)->md);
  std::vector<ChainItem> chain;
  finishAnchor(step, pos, chain, node.outputs[0]);
  return true;
}

// The residual tail as one int8 binary step over y and the skip, both int8 in y's
// layout: a * (y - y_zero) + b * (skip - skip_zero) in units of the output step (a, b:
// the source scales), saturated to the sum's range, Relu, the output zero point,
// rounded once and saturated into the output's type. Only the sum's rounding is
// skipped (half a step of the sum's scale).
void FunctionLowering::emitQResidual(const QResidual& r, ValueId y, const QConvSpec& q) {
  const float a = q.y_scale * r.out_scale_inv, b = r.skip_scale * r.out_scale_inv;
  const float shift = -(a * float(q.dst_zero_point) + b * float(r.skip_zero_point));
  Step step;
  step.kind = StepKind::kBinary;
  step.alg = int32_t(dnnl::algorithm::binary_add);
  step.quant.output_scales = {a, b};
  step.quant.scale_dim = kSourceScales;
  const int32_t linear = int32_t(dnnl::algorithm::eltwise_linear);
  const bool relu_then_zero = r.relu && r.out_zero_point != 0;  // two linear post-ops: not fused
  if (relu_then_zero) return;
  step.post_ops.push_back(
      PostOp{PostOp::Kind::kEltwise, linear, 1.0f, shift + (r.relu ? 0.0f : float(r.out_zero_point)), 1.0f});
  if (std::isfinite(r.sum_lo)) {
    const float z = r.relu ? 0.0f : float(r.out_zero_point);
    step.post_ops.push_back(PostOp{PostOp::Kind::kEltwise, int32_t(dnnl::algorithm::eltwise_clip),
                                   r.sum_lo * r.out_scale_inv + z, r.sum_hi * r.out_scale_inv + z, 1.0f});
  }
  if (r.relu) step.post_ops.push_back(PostOp{PostOp::Kind::kEltwise, int32_t(dnnl::algorithm::eltwise_relu), 0, 0, 1.0f});
  const Loc src0 = primary(y);
  const Loc src1 = get(r.skip, withDataType(src0.md, elementType(r.skip)));
  const memory::desc dst_md = withDataType(src0.md, r.out_type);
  step.args.push_back(bufferArg(DNNL_ARG_SRC_0, src0.buffer, src0.md));
  step.args.push_back(bufferArg(DNNL_ARG_SRC_1, src1.buffer, src1.md));
  step.args.push_back(bufferArg(DNNL_ARG_DST, 0, dst_md));
  try {
    if (isReference(makePrimitiveDesc(step, cpuEngine()))) return;
  } catch (const dnnl::error&) {
    return;  // the tail stays as it is: DequantizeLinear, Add, ... as float steps
  }
  step.label = labelOf(r.chain.front().pos, r.chain);
  for (const ChainItem& c : r.chain) consumeItem(c);
  // The skip's float value, read only by the Add absorbed here, is never made.
  if (deferred_.count(r.skip_float) && remaining_[r.skip_float] == 0) {
    deferred_.erase(r.skip_float);
    consume(r.skip_dq);
  }
  const uint32_t dst = newBuffer(dst_md);
  step.find(DNNL_ARG_DST)->index = dst;
  fn_.steps.push_back(std::move(step));
  place(nodeAt(r.chain.back().pos).outputs[0], Loc{dst, dst_md});
}

void FunctionLowering::lowerQuantize(size_t pos) {
  const ir::Node& node = nodeAt(pos);
  if (node.op_type == "DequantizeLinear") {  // made when something reads it (locsOf)
    done_[pos] = true;
    deferred_[node.outputs[0]] = pos;
    return;
  }
  emitQuantize(pos);
}

void FunctionLowering::emitQuantize(size_t pos) {
  const ir::Node& node = nodeAt(pos);
  const QuantizeSpec q = decoded(decodeQuantize(g_, node, nullptr), pos);
  const ValueId x = node.inputs[0], out = node.outputs[0];
  // The destination in the source's layout (a blocked int8 convolution output stays
  // blocked) with the other element type.
  const Loc src = primary(x);
  const memory::desc dst_md = withDataType(src.md, elementType(out));
  Step step;
  step.kind = StepKind::kReorder;
  step.label = labelOf(pos, {});
  step.quant.output_scales = {q.scale};
  (q.quantize ? step.quant.dst_zero_point : step.quant.src_zero_point) = q.zero_point;
  step.args.push_back(bufferArg(DNNL_ARG_SRC, src.buffer, src.md));
  consume(pos);
  place(out, emitIntoNewBuffer(std::move(step), dst_md, dst_md));
  keepRowOrder(x, out);  // per tensor: element by element
}

// DynamicQuantizeLinear with its DequantizeLinear(y, 1, zero point), as ONNX computes
// it (scale = (max(x, 0) - min(x, 0)) / 255, zero point = round(clip(-min(x, 0) /
// scale, 0, 255)), y = saturate(round(x / scale) + zero point)): one step of the
// module's own kernel (dynamicQuantize, dnnl_kernels.h) writing y, the scale, and the
// zero point as float32 and int32 one-element buffers. As six oneDNN steps (two
// reductions, three binary steps on one element, a reorder) it cost the dynamic-int8
// encoder about 10 us a MatMul, mostly per-step overhead.
// The DequantizeLinear's output, y - zero, is what int8 matmuls read as y with a
// run-time source zero point (lowerMatMul); its float32 value is made only for a float
// reader (emitCentred). (An all-zero x gives scale FLT_MIN instead of ONNX Runtime's
// 1: its integers and the products with them are 0 either way.)
void FunctionLowering::lowerDynamicQuantize(size_t pos) {
  const ir::Node& node = nodeAt(pos);
  std::optional<DynamicQuantizeMatch> m = matchDynamicQuantize(g_, r_.nodes[pos], nullptr);
  auto dq_it = m ? pos_of_.find(m->dequantize) : pos_of_.end();
  if (dq_it == pos_of_.end() || done_[dq_it->second])
    throw Error(ErrorCode::kUnsupported, "dnnl backend: DynamicQuantizeLinear '" + node.name +
                                             "' is taken only with its DequantizeLinear; the pair was split");
  const size_t dq_pos = dq_it->second;
  const ValueId x = node.inputs[0];
  const std::vector<int64_t> dims = shapeOf(x);
  const memory::desc one = plainDesc({1}), one_s32 = withDataType(one, dt::s32);
  const memory::desc flat = plainDesc({ir::shapeNumel(dims)}), q_md = withDataType(flat, dt::u8);
  Step step;
  step.kind = StepKind::kDynamicQuantize;
  step.label = labelOf(pos, {}) + "+" + nodeAt(dq_pos).name;
  const uint32_t q = newBuffer(q_md), scale = newBuffer(one), zero = newBuffer(one), zero_s32 = newBuffer(one_s32);
  step.args = {bufferArg(DNNL_ARG_SRC, plain(x).buffer, flat), bufferArg(DNNL_ARG_DST, q, q_md),
               bufferArg(kDynamicScaleArg, scale, one), bufferArg(kDynamicZeroArg, zero, one),
               bufferArg(kDynamicZeroS32Arg, zero_s32, one_s32)};
  const std::string label = step.label;
  fn_.steps.push_back(std::move(step));
  consume(pos);
  consume(dq_pos);
  const ValueId centred = nodeAt(dq_pos).outputs[0];
  dynamic_[centred] = DynamicInt8{Loc{q, withDataType(plainDesc(dims), dt::u8)}, zero, zero_s32, one, label};
  if (node.hasOutput(1)) place(node.outputs[1], Loc{scale, plainDesc(shapeOf(node.outputs[1]))});
}

// y - zero point in float32 (exact: integers below 2^8), for a reader that is not an
// int8 matmul: a reorder with the run-time source zero point.
void FunctionLowering::emitCentred(ValueId v) {
  const DynamicInt8& d = dynamic_.at(v);
  const memory::desc f32 = withDataType(d.q.md, dt::f32);
  Step step;
  step.kind = StepKind::kReorder;
  step.label = d.label;
  step.args = {bufferArg(DNNL_ARG_SRC, d.q.buffer, d.q.md),
               bufferArg(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, d.zero_s32, withDataType(d.one, dt::s32))};
  place(v, emitIntoNewBuffer(std::move(step), f32, f32));
}

bool FunctionLowering::int8Weights(ValueId b) {
  if (std::optional<memory::desc> stored = mb_.storedWeights(constOf(b), false))
    return stored->data.data_type == dnnl_s8;
  if (!mb_.computes() || g_.typeOf(b).dtype != ir::DType::kFloat32) return false;
  const float* w = constData(b);
  const int64_t n = ir::shapeNumel(shapeOf(b));
  for (int64_t i = 0; i < n; ++i)
    if (!(w[i] >= -128.0f && w[i] <= 127.0f) || w[i] != std::nearbyint(w[i])) return false;
  return true;
}

}  // namespace partita::dnnl_backend
