// Lowering of MatMul and Gemm into one oneDNN matmul: a batch of rows against one
// matrix folded into one GEMM, Gemm's C as bias, sum or binary post-op, alpha and beta
// applied to constants at compile time.
#include "backend/dnnl/dnnl_function_lowering.h"

#include <optional>

#include "backend/dnnl/dnnl_primitive.h"

namespace partita::dnnl_backend {

using dnnl::algorithm;
using ir::ValueId;

namespace {

// Whether `md` (a post-op operand's plain descriptor) is one row of `dst`: all ones
// but its last dim, which is dst's.
bool rowOf(const memory::desc& md, const std::vector<int64_t>& dst) {
  const memory::dims d = md.dims();
  if (d.size() != dst.size() || d.empty() || d.back() != dst.back()) return false;
  for (size_t i = 0; i + 1 < d.size(); ++i)
    if (d[i] != 1) return false;
  return true;
}

}  // namespace

// A product of one row by constant float32 weights that float16 holds exactly (a
// float16 model's classifier: Gemm over [1, K]), with a bias row and a Relu, Sigmoid or
// SiLU after it: the module's own matrix-vector product (StepKind::kMatVec), reading
// the weights in float16, half the bytes oneDNN's matmul reads (MobileNetV2's and
// EfficientNet-B0's 1280 x 1000: 5 MB a run). Static regions only.
bool FunctionLowering::emitMatVecProduct(size_t pos, const MatMulSpec& spec) {
  const ir::Node& node = nodeAt(pos);
  const ValueId a = node.inputs[0], b = node.inputs[1];
  if (mb_.polymorphic() || bf16_ || spec.trans_a || spec.alpha != 1.0f || spec.a_dims.size() != 2 ||
      spec.b_dims.size() != 2 || spec.a_dims[0] != 1 || !isConstant(b) || elementType(a) != memory::data_type::f32 ||
      elementType(b) != memory::data_type::f32 || prescaled_.count(a) || dynamic_.count(a))
    return false;
  // A Flatten of a channels-last tensor (flattenIntoWeights): its rows are in (h, w, c)
  // order, which is the ONNX order only over one position (a global pool's output).
  if (auto rows = channels_last_rows_.find(a); rows != channels_last_rows_.end() && rows->second[1] * rows->second[2] != 1)
    return false;
  const int64_t k = spec.a_dims[1], o = spec.dst_dims[1];
  ValueId bias = ir::kNoValue;
  if (spec.is_gemm && node.hasInput(2)) {
    bias = node.inputs[2];
    if (!isConstant(bias) || spec.beta != 1.0f || elementType(bias) != memory::data_type::f32 ||
        ir::shapeNumel(shapeOf(bias)) != o || padLeft(shapeOf(bias), 2)[0] != 1)
      return false;
  }
  if (!exactInHalf(constData(b), k * o)) return false;  // float32 weights: oneDNN's matmul is as fast
  std::vector<ChainItem> fused;
  const std::optional<int32_t> act = matVecActivation(node.outputs[0], fused);
  if (!act) return false;
  // The weights' bytes as [O, K]: stored [K, N] (each input's row of outputs), or
  // [N, K] under transB.
  const memory::desc w_from = spec.trans_b ? plainDesc({o, k}) : withStrides({o, k}, {1, o});
  emitMatVecStep(pos, a, {1, k}, constOf(b), w_from, true, bias, {1, o}, *act, fused);
  return true;
}

void FunctionLowering::lowerMatMul(size_t pos) {
  const ir::Node& node = nodeAt(pos);
  MatMulSpec spec = decoded(decodeMatMul(g_, node, nullptr), pos);
  if (emitMatVecProduct(pos, spec)) return;
  ValueId a = node.inputs[0], b = node.inputs[1];
  const ValueId out = node.outputs[0];
  // An operand scaled by a constant (prescaleIntoMatMul): the product scaled instead,
  // by a linear post-op first in the chain (attention's Q / sqrt(d): a step fewer).
  std::vector<ChainItem> prescales;
  if (!spec.is_gemm)
    for (ValueId* v : {&a, &b}) {
      auto p = prescaled_.find(*v);
      if (p == prescaled_.end()) continue;
      ChainItem item;
      item.pos = p->second.pos;
      item.on_operand = true;
      item.ops.push_back(PostOp{PostOp::Kind::kEltwise, int32_t(algorithm::eltwise_linear), p->second.factor, 0.0f, 1.0f});
      prescales.push_back(item);
      *v = p->second.x;
      prescaled_.erase(p);
    }
  // A batch of rows against one matrix: fold the batch into M (same bytes; one large
  // GEMM instead of many thin ones, e.g. [128,1,256] x [256,768]).
  const std::vector<int64_t> full_dst = spec.dst_dims;
  bool collapsed = false;
  if (!spec.is_gemm && spec.dst_dims.size() > 2) {
    const size_t r = spec.dst_dims.size();
    bool b_single = true;
    for (size_t i = 0; i + 2 < r; ++i) b_single &= spec.b_dims[i] == 1;
    if (b_single) {
      const int64_t k = spec.a_dims[r - 1], n = spec.dst_dims[r - 1];
      const int64_t rows = ir::shapeNumel(spec.dst_dims) / n;
      spec.a_dims = {rows, k};
      spec.b_dims = {k, n};
      spec.dst_dims = {rows, n};
      collapsed = true;
    }
  }
  auto operandDesc = [&](const std::vector<int64_t>& dims, bool transposed) {
    if (!transposed) return plainDesc(dims);
    // Stored as [cols, rows]: swap the last two strides.
    return withStrides(dims, {1, dims[0]});
  };
  // A Flatten of a channels-last tensor (flattenIntoWeights): rows in (h, w, c) order.
  const auto permuted = channels_last_rows_.find(a);
  if (permuted != channels_last_rows_.end() && (collapsed || spec.trans_a || !isConstant(b)))
    internal("MatMul '" + node.name + "' reads a channels-last Flatten it cannot take");
  const memory::desc a_md = operandDesc(spec.a_dims, spec.trans_a);
  // Computed weights already held with the last two dims swapped (lowerMove writes a
  // transposed copy so): read as they are.
  std::optional<Loc> b_swapped;
  if (!isConstant(b) && !spec.trans_b && spec.b_dims.size() >= 2)
    for (const Loc& l : locsOf(b))
      if (sameDesc(l.md, lastTwoSwapped(spec.b_dims))) b_swapped = l;
  const memory::desc b_md = b_swapped ? b_swapped->md : operandDesc(spec.b_dims, spec.trans_b);

  Step step;
  step.kind = StepKind::kMatMul;
  const bool const_b = isConstant(b);
  const bool scaled_b = spec.alpha != 1.0f;
  // Dynamic int8 (a DynamicQuantizeLinear's centred integers times integer weights):
  // the uint8 integers with their run-time zero point, the weights as s8, int32
  // accumulation written as float32.
  auto dyn = dynamic_.find(a);
  const bool int8 = dyn != dynamic_.end() && const_b && !bf16_ && !spec.trans_a && !scaled_b && int8Weights(b);
  // bfloat16 compute (bf16_): a row-major source and constant weights in bfloat16.
  const bool bf16 = bf16_ && const_b && !spec.trans_a;
  const memory::data_type in_type = bf16 ? memory::data_type::bf16 : memory::data_type::f32;
  const memory::data_type a_type = int8 ? memory::data_type::u8 : in_type;
  const memory::data_type b_type = int8 ? memory::data_type::s8 : in_type;
  step.args.push_back(Arg{DNNL_ARG_SRC, ArgSource::kBuffer, 0, withDataType(a_md, a_type), false});
  if (int8)
    step.args.push_back(bufferArg(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, dyn->second.zero_s32,
                                  withDataType(dyn->second.one, memory::data_type::s32)));
  // A replay reads constant weights in the layout the compiler stored them in.
  std::optional<memory::desc> stored = const_b ? mb_.storedWeights(constOf(b), scaled_b) : std::nullopt;
  if (stored)
    step.args.push_back(Arg{DNNL_ARG_WEIGHTS, ArgSource::kConstant, 0, *stored, false});
  else
    step.args.push_back(Arg{DNNL_ARG_WEIGHTS, const_b ? ArgSource::kConstant : ArgSource::kBuffer, 0,
                            const_b ? withDataType(anyDesc(spec.b_dims), b_type) : b_md, const_b});
  step.args.push_back(Arg{DNNL_ARG_DST, ArgSource::kBuffer, 0, plainDesc(spec.dst_dims), false});

  // Gemm's C: a bias when it is a row vector, else a sum or binary post-op.
  std::vector<ChainItem> chain = prescales;
  bool c_is_bias = false;
  if (spec.is_gemm && node.hasInput(2)) {
    ValueId c = node.inputs[2];
    std::vector<int64_t> cs = padLeft(shapeOf(c), 2);
    ChainItem item;
    item.pos = pos;
    if (isConstant(c) && cs[0] == 1 && cs[1] == spec.dst_dims[1]) {
      c_is_bias = true;
      step.args.push_back(Arg{DNNL_ARG_BIAS, ArgSource::kConstant, 0, plainDesc(cs), false});
    } else if (!isConstant(c) && cs == spec.dst_dims) {
      item.ops.push_back(PostOp{PostOp::Kind::kSum, 0, 0, 0, spec.beta});
      item.sum_addend = c;
      chain.push_back(item);
    } else {
      item.ops.push_back(PostOp{PostOp::Kind::kBinary, int32_t(algorithm::binary_add), 0, 0, 1.0f});
      item.operand = c;
      item.operand_md = plainDesc(cs);
      item.operand_scale = spec.beta;
      chain.push_back(item);
    }
  }
  const size_t fixed = chain.size();
  bool has_sum = fixed > prescales.size() && chain[prescales.size()].sum_addend != ir::kNoValue;
  std::vector<ChainItem> more = collectChain(out, !has_sum, true);
  if (collapsed) {
    // Post-op operands in the folded 2-D shape: a scalar, a row, or the full output.
    const int64_t n = spec.dst_dims[1];
    for (size_t i = 0; i < more.size(); ++i) {
      if (more[i].operand == ir::kNoValue) continue;
      std::vector<int64_t> os = padLeft(shapeOf(more[i].operand), full_dst.size());
      bool row = true;
      for (size_t d = 0; d + 1 < os.size(); ++d) row &= os[d] == 1;
      if (row && (os.back() == n || os.back() == 1)) {
        more[i].operand_md = plainDesc({1, os.back()});
      } else if (os == full_dst) {
        more[i].operand_md = plainDesc(spec.dst_dims);
      } else {
        more.resize(i);
        break;
      }
    }
  }
  // A constant row added first is the matmul's bias; a row-broadcast binary post-op
  // later in the chain ends it. oneDNN 2.6's brgemm matmul applies such an operand
  // slowly (128x256x1024 at one thread: +30 us in float32, +15 us in int8, where the
  // bias argument costs nothing and a binary step of its own 3-10 us).
  std::optional<ValueId> row_bias;
  for (size_t i = 0; i < more.size(); ++i) {
    const ChainItem& item = more[i];
    if (item.operand == ir::kNoValue || ir::shapeNumel(shapeOf(item.operand)) == 1) continue;
    // (Not after a prescale: the bias would be scaled with the product.)
    const bool as_bias = i == 0 && !spec.is_gemm && prescales.empty() && item.ops.size() == 1 &&
                         item.ops[0].alg == int32_t(algorithm::binary_add) && item.operand_scale == 1.0f &&
                         isConstant(item.operand) && rowOf(item.operand_md, spec.dst_dims);
    if (!as_bias) {
      more.resize(i);
      break;
    }
    row_bias = item.operand;
    step.args.push_back(Arg{DNNL_ARG_BIAS, ArgSource::kConstant, 0, item.operand_md, false});
    more[i].ops.clear();
    more[i].operand = ir::kNoValue;
  }
  for (size_t i = 0; i < more.size(); ++i)  // collectChain checked them against each other, not the prescales
    if (linearClash(prescales, more[i])) {
      more.resize(i);
      break;
    }
  chain.insert(chain.end(), more.begin(), more.end());
  dnnl::primitive_desc_base pd;
  size_t k = fitChain(step, chain, fixed + (row_bias ? 1 : 0), pd);  // the bias item stays
  chain.resize(k);
  recordChosenLayouts(step, pd);
  const bool reordered_rows = permuted != channels_last_rows_.end();
  if (const_b) mb_.chosenWeights(constOf(b), scaled_b || reordered_rows, step.find(DNNL_ARG_WEIGHTS)->md);

  // The source row-major in its own dims (the step reads the same bytes as a_md).
  if (int8)
    step.find(DNNL_ARG_SRC)->index = dyn->second.q.buffer;
  else
    step.find(DNNL_ARG_SRC)->index =
        bf16 ? get(a, withDataType(plainDesc(dimsOf(primary(a).md)), in_type)).buffer : plain(a).buffer;
  Arg* w = step.find(DNNL_ARG_WEIGHTS);
  if (const_b) {
    const ir::ConstId b_id = constOf(b);
    if (reordered_rows) {
      // The rows permuted to the Flatten's (h, w, c) order, times alpha.
      std::vector<float> rows;
      if (mb_.computes()) {
        rows = channelsLastRows(constData(b), permuted->second, spec.b_dims[1], spec.trans_b);
        if (scaled_b)
          for (float& v : rows) v *= spec.alpha;
      }
      w->index = mb_.derive(b_id, b_md, rows.data(), w->md, false);
    } else if (scaled_b) {
      std::vector<float> scaled;
      if (mb_.computes()) {
        scaled.assign(constData(b), constData(b) + ir::shapeNumel(shapeOf(b)));
        for (float& v : scaled) v *= spec.alpha;
      }
      w->index = mb_.derive(b_id, b_md, scaled.data(), w->md, false);
    } else if (sameDesc(w->md, b_md) && isPlainDense(b_md)) {
      *w = mb_.borrow(DNNL_ARG_WEIGHTS, b_id, b_md);
      w->chosen = true;
    } else {
      w->index = mb_.derive(b_id, b_md, constData(b), w->md, true);
    }
  } else {
    w->index = b_swapped ? b_swapped->buffer : plain(b).buffer;
  }
  if (row_bias) {
    Arg* bias = step.find(DNNL_ARG_BIAS);
    *bias = mb_.borrow(DNNL_ARG_BIAS, constOf(*row_bias), bias->md);
  }
  if (c_is_bias) {
    ValueId c = node.inputs[2];
    Arg* bias = step.find(DNNL_ARG_BIAS);
    if (spec.beta == 1.0f) {
      *bias = mb_.borrow(DNNL_ARG_BIAS, constOf(c), bias->md);
    } else {
      std::vector<float> scaled;
      if (mb_.computes()) {
        scaled.assign(constData(c), constData(c) + ir::shapeNumel(shapeOf(c)));
        for (float& v : scaled) v *= spec.beta;
      }
      *bias = mb_.embed(DNNL_ARG_BIAS, scaled.data(), bias->md, {constOf(c)});
    }
  }
  finishAnchor(step, pos, chain, out);
}

}  // namespace partita::dnnl_backend
