// Post-op fusion: the nodes after an anchor step (Conv, ConvTranspose, MatMul, Gemm,
// binary) that oneDNN computes inside that step. An activation becomes an eltwise
// post-op, SiLU a swish, x * HardSigmoid(x) a hardswish and Gelu a gelu_erf one, an Add of a value computed earlier a
// sum post-op written in place over that value (a residual), and an operand that is
// constant or already computed a binary post-op.
#include "backend/dnnl/dnnl_function_lowering.h"

#include <omp.h>

#include <cmath>
#include <set>

#include "backend/dnnl/dnnl_claims.h"
#include "backend/dnnl/dnnl_module.h"
#include "backend/dnnl/dnnl_primitive.h"

namespace partita::dnnl_backend {

using dnnl::algorithm;
using ir::ValueId;

namespace {

// The most post-ops collectChain gathers for one step.
constexpr size_t kMaxPostOps = 6;

// oneDNN 2.6's brgemm kernels compute every eltwise_linear post-op of one primitive
// with the alpha and beta of the first (seen with a quantize-dequantize pair after a
// convolution): an item whose linear op differs from one already in the chain ends it.
}  // namespace

bool linearClash(const std::vector<ChainItem>& chain, const ChainItem& item) {
  const int32_t linear = int32_t(dnnl::algorithm::eltwise_linear);
  for (const PostOp& p : item.ops) {
    if (p.kind != PostOp::Kind::kEltwise || p.alg != linear) continue;
    for (const ChainItem& c : chain)
      for (const PostOp& q : c.ops)
        if (q.kind == PostOp::Kind::kEltwise && q.alg == linear && (q.alpha != p.alpha || q.beta != p.beta))
          return true;
  }
  return false;
}

// The only consumer of `v` when it has exactly one use and that use is a node of
// this region not yet lowered.
std::optional<size_t> FunctionLowering::soleConsumer(ValueId v) const {
  if (graph_uses_[size_t(v)] != 1) return std::nullopt;
  auto it = consumers_.find(v);
  if (it == consumers_.end() || it->second.size() != 1 || done_[it->second[0]]) return std::nullopt;
  return it->second[0];
}

// A dynamic-int8 MatMul's output Mul reads the product of the activation's and the
// weights' scales, a one-element value whose Mul may come after the MatMul in node
// order (ONNX Runtime's quantizer writes it so): computing it first lets the Mul, the
// bias Add and what follows fuse into the matmul (the encoder: 3 steps fewer a linear
// layer). Only values of at most a row (kMaxEarlyElements) are moved: nothing that
// costs time or memory is computed earlier than it was.
bool FunctionLowering::lowerOperandEarly(ValueId v) {
  constexpr int64_t kMaxEarlyElements = 4096;
  if (lowering_early_) return false;  // one level: the anchor waiting for this is not lowered yet
  const ir::NodeId producer = g_.value(v).producer;
  auto it = producer == ir::kNoNode ? pos_of_.end() : pos_of_.find(producer);
  if (it == pos_of_.end() || done_[it->second] || !g_.typeOf(v).isStatic() ||
      ir::shapeNumel(shapeOf(v)) > kMaxEarlyElements)
    return false;
  const ir::Node& node = nodeAt(it->second);
  if (node.outputs.size() != 1) return false;
  for (ValueId in : node.inputs)
    if (in != ir::kNoValue && !available(in)) return false;
  lowering_early_ = true;
  try {
    lowerNode(it->second);
  } catch (...) {
    lowering_early_ = false;
    throw;
  }
  lowering_early_ = false;
  return available(v);
}

// x * Sigmoid(x) or x * HardSigmoid(x) (alpha 1/6, beta 1/2) where x has no other use:
// the gate's and the Mul's positions, and the one oneDNN activation they make.
std::optional<FunctionLowering::GatedMatch> FunctionLowering::gatedAfter(ValueId x) const {
  if (graph_uses_[size_t(x)] != 2) return std::nullopt;
  auto it = consumers_.find(x);
  if (it == consumers_.end() || it->second.size() != 2) return std::nullopt;
  for (int k = 0; k < 2; ++k) {
    size_t sp = it->second[size_t(k)], mp = it->second[size_t(1 - k)];
    const ir::Node &gate = nodeAt(sp), &mul = nodeAt(mp);
    if (done_[sp] || done_[mp] || mul.op_type != "Mul" || !gate.domain.empty() || !mul.domain.empty()) continue;
    algorithm alg;
    if (gate.op_type == "Sigmoid") {
      alg = algorithm::eltwise_swish;
    } else if (gate.op_type == "HardSigmoid" &&
               std::abs(gate.attrs.getFloat("alpha", 0.2f) - 1.0f / 6.0f) < 1e-7f &&
               gate.attrs.getFloat("beta", 0.5f) == 0.5f) {
      alg = algorithm::eltwise_hardswish;
    } else {
      continue;
    }
    if (soleConsumer(gate.outputs[0]) != mp) continue;
    bool operands = (mul.inputs[0] == x && mul.inputs[1] == gate.outputs[0]) ||
                    (mul.inputs[1] == x && mul.inputs[0] == gate.outputs[0]);
    if (operands && decodeBinary(g_, mul, nullptr) && decodeEltwise(g_, gate, nullptr))
      return GatedMatch{sp, mp, alg};
  }
  return std::nullopt;
}

// Gelu over `x` when all five nodes are in this region and not lowered yet:
// {Div, Erf, Add, Mul} positions and the final Mul's position.
std::optional<std::pair<std::vector<size_t>, size_t>> FunctionLowering::geluAfter(ValueId x) const {
  std::optional<GeluMatch> m = matchGelu(g_, x);
  if (!m) return std::nullopt;
  std::vector<size_t> parts;
  for (ir::NodeId id : {m->div, m->erf, m->add, m->mul}) {
    auto it = pos_of_.find(id);
    if (it == pos_of_.end() || done_[it->second]) return std::nullopt;
    parts.push_back(it->second);
  }
  auto it = pos_of_.find(m->half);
  if (it == pos_of_.end() || done_[it->second]) return std::nullopt;
  return std::make_pair(parts, it->second);
}

// Greedily follows the single-use chain after an anchor's output: activations become
// eltwise post-ops, an Add of a value computed earlier a sum post-op (the residual),
// and constant (or earlier) operands of binary ops binary post-ops.
std::vector<ChainItem> FunctionLowering::collectChain(ValueId out, bool allow_sum, bool allow_binary,
                                                      bool full_binary) {
  std::vector<ChainItem> chain;
  ValueId cur = out;
  size_t num_ops = 0;
  while (num_ops < kMaxPostOps) {
    if (auto gated = gatedAfter(cur)) {
      // SiLU is a step of its own, the module's own swish kernel (emitEltwise): oneDNN
      // 2.6 computes a swish post-op as slowly as its own eltwise step (EfficientNet-B0:
      // convolutions 7.37 -> 5.30 ms a run without it, eltwise steps +2.01 ms), and
      // the own kernel takes about 25 % less (EfficientNet-B0 8.7-9.6 -> 8.1-8.5 ms at
      // one thread, 7.05-7.20 -> 6.67-6.89 ms at two, side by side).
      if (gated->alg == algorithm::eltwise_swish) break;
      ChainItem item;
      item.pos = gated->mul;
      item.extra = {gated->gate};
      const float alpha = gated->alg == algorithm::eltwise_swish ? 1.0f : 0.0f;
      item.ops.push_back(PostOp{PostOp::Kind::kEltwise, int32_t(gated->alg), alpha, 0, 1.0f});
      num_ops += 1;
      cur = nodeAt(gated->mul).outputs[0];
      chain.push_back(std::move(item));
      continue;
    }
    if (auto gelu = geluAfter(cur)) {
      ChainItem item;
      item.pos = gelu->second;
      item.extra = gelu->first;
      item.ops.push_back(PostOp{PostOp::Kind::kEltwise, int32_t(algorithm::eltwise_gelu_erf), 0, 0, 1.0f});
      num_ops += 1;
      cur = nodeAt(gelu->second).outputs[0];
      chain.push_back(std::move(item));
      continue;
    }
    std::optional<size_t> next = soleConsumer(cur);
    if (!next) break;
    const ir::Node& node = nodeAt(*next);
    ChainItem item;
    item.pos = *next;
    OpClass cls = classify(node);
    if (node.op_type == "QuantizeLinear" && node.domain.empty()) {
      // A quantize-dequantize pair: four eltwise ops; the chain goes on after the
      // DequantizeLinear.
      auto ops = decodeEltwise(g_, node, nullptr);
      if (!ops) break;
      std::optional<FakeQuantMatch> m = matchFakeQuant(g_, ir::NodeId(&node - g_.nodes.data()));
      auto it = pos_of_.find(m->dequantize);
      if (it == pos_of_.end() || done_[it->second]) break;
      item.extra = {*next};
      item.pos = it->second;
      // linear(1/s), round, clip; the final multiplication by s is the clip's output
      // scale: oneDNN 2.6's brgemm convolution gives wrong results for a chain with
      // two eltwise_linear post-ops (the second one computed with the first's alpha).
      for (size_t k = 0; k + 1 < ops->size(); ++k) {
        const EltwiseOp& e = (*ops)[k];
        item.ops.push_back(PostOp{PostOp::Kind::kEltwise, int32_t(e.alg), e.alpha, e.beta, 1.0f});
      }
      item.ops.back().scale = ops->back().alpha;
      num_ops += item.ops.size();
      if (num_ops > kMaxPostOps || linearClash(chain, item)) break;
      cur = nodeAt(item.pos).outputs[0];
      chain.push_back(std::move(item));
      continue;
    }
    if (cls == OpClass::kEltwise) {
      auto ops = decodeEltwise(g_, node, nullptr);
      if (!ops) break;
      for (const EltwiseOp& e : *ops)
        item.ops.push_back(PostOp{PostOp::Kind::kEltwise, int32_t(e.alg), e.alpha, e.beta, 1.0f});
    } else if (cls == OpClass::kBinary && allow_binary) {
      auto alg = decodeBinary(g_, node, nullptr);
      if (!alg) break;
      if (auto scaled = softmaxScaleOf(cur); scaled && scaled->first == *next) break;  // the softmax's
      bool first = node.inputs[0] == cur;
      ValueId other = first ? node.inputs[1] : node.inputs[0];
      if (other == cur || shapeOf(node.outputs[0]) != shapeOf(cur)) break;
      bool commutative = *alg != algorithm::binary_sub && *alg != algorithm::binary_div;
      if (!first && !commutative) break;
      if (!available(other) && !lowerOperandEarly(other)) break;
      std::vector<int64_t> os = shapeOf(other);
      if (*alg == algorithm::binary_add && allow_sum && !isConstant(other) && os == shapeOf(cur)) {
        item.ops.push_back(PostOp{PostOp::Kind::kSum, 0, 0, 0, 1.0f});
        item.sum_addend = other;
        allow_sum = false;
      } else {
        if (!isConstant(other) && ir::shapeNumel(os) == ir::shapeNumel(shapeOf(cur)) && !full_binary)
          break;  // full-size: use sum
        item.ops.push_back(PostOp{PostOp::Kind::kBinary, int32_t(*alg), 0, 0, 1.0f});
        item.operand = other;
        item.operand_md = plainDesc(padLeft(os, shapeOf(cur).size()));
        // A one-element x * f that prescaleIntoMatMul left uncomputed (a dynamic-int8
        // MatMul's activation scale times its weights' scale): times (or over) x, then
        // times f (or 1 / f) as a linear op; its node goes with the item.
        auto p = prescaled_.find(other);
        if (p != prescaled_.end() && (*alg == algorithm::binary_mul || *alg == algorithm::binary_div)) {
          item.operand = p->second.x;
          item.ops.push_back(PostOp{PostOp::Kind::kEltwise, int32_t(algorithm::eltwise_linear),
                                    *alg == algorithm::binary_mul ? p->second.factor : 1.0f / p->second.factor, 0.0f,
                                    1.0f});
          item.extra.push_back(p->second.pos);
        }
      }
    } else {
      break;
    }
    num_ops += item.ops.size();
    if (num_ops > kMaxPostOps || linearClash(chain, item)) break;
    cur = node.outputs[0];
    chain.push_back(std::move(item));
  }
  return chain;
}

// The region position of the DequantizeLinear of the quantize-dequantize pair starting
// at QuantizeLinear `q` (claimed together, so in this region unless --allow/--deny
// split them).
size_t FunctionLowering::fakeQuantTail(ir::NodeId q) const {
  std::optional<FakeQuantMatch> m = matchFakeQuant(g_, q);
  auto it = m ? pos_of_.find(m->dequantize) : pos_of_.end();
  if (it == pos_of_.end() || done_[it->second])
    throw Error(ErrorCode::kUnsupported, "dnnl backend: QuantizeLinear '" + g_.nodes[size_t(q)].name +
                                             "' is taken only with its DequantizeLinear; the pair was split");
  return it->second;
}

// Finds the longest prefix of `chain` (at least `fixed` items) oneDNN implements as
// post-ops of `step`; leaves the step with those post-ops and returns the prefix length.
size_t FunctionLowering::fitChain(Step& step, const std::vector<ChainItem>& chain, size_t fixed,
                                  dnnl::primitive_desc_base& pd) {
  const Step base = step;
  // Layouts chosen for the team the step will run with (stepOnOneThread, as at load).
  const OmpThreadsScope team(stepThreads(base, omp_get_max_threads()));
  for (size_t k = chain.size() + 1; k-- > fixed;) {
    step = base;
    for (size_t i = 0; i < k; ++i)
      for (const PostOp& op : chain[i].ops) {
        if (op.kind == PostOp::Kind::kBinary)
          step.args.push_back(Arg{DNNL_ARG_ATTR_MULTIPLE_POST_OP(int(step.post_ops.size())) | DNNL_ARG_SRC_1,
                                  ArgSource::kBuffer, 0, chain[i].operand_md, false});
        step.post_ops.push_back(op);
      }
    try {
      pd = makePrimitiveDesc(step, cpuEngine());
      // Post-ops only oneDNN's reference loops take (e.g. round on some kernels) are
      // not worth their cost: a shorter chain, the rest as steps of their own.
      if (k > fixed && isReference(pd)) continue;
      return k;
    } catch (const dnnl::error&) {
      if (k == fixed) throw;
    }
  }
  return fixed;
}

// Common tail of anchors: consumes the fused nodes, binds post-op operands and the
// destination (in place over a dead residual when the layouts agree), emits the step.
ValueId FunctionLowering::bindPostOpOperands(Step& step, const std::vector<ChainItem>& chain) {
  size_t op_index = 0;
  ValueId addend = ir::kNoValue;
  for (const ChainItem& c : chain)
    for (const PostOp& op : c.ops) {
      int key = DNNL_ARG_ATTR_MULTIPLE_POST_OP(int(op_index)) | DNNL_ARG_SRC_1;
      if (op.kind == PostOp::Kind::kBinary) {
        Arg* a = step.find(key);
        if (isConstant(c.operand)) {
          if (c.operand_scale != 1.0f) {
            std::vector<float> scaled;
            if (mb_.computes()) {
              scaled.assign(constData(c.operand), constData(c.operand) + ir::shapeNumel(shapeOf(c.operand)));
              for (float& x : scaled) x *= c.operand_scale;
            }
            *a = mb_.embed(key, scaled.data(), a->md, {constOf(c.operand)});
          } else {
            *a = constantArg(key, c.operand, a->md);
          }
        } else {
          a->index = plain(c.operand).buffer;
        }
      }
      if (op.kind == PostOp::Kind::kSum) addend = c.sum_addend;
      ++op_index;
    }
  return addend;
}

void FunctionLowering::finishAnchor(Step& step, size_t pos, std::vector<ChainItem>& chain,
                                    ValueId anchor_out) {
  step.label = labelOf(pos, chain);
  consume(pos);
  for (const ChainItem& c : chain)
    if (c.pos != pos) consumeItem(c);
  const ValueId addend = bindPostOpOperands(step, chain);
  Arg* dst = step.find(DNNL_ARG_DST);
  const memory::desc dst_md = dst->md;
  uint32_t dst_buffer = 0;
  if (addend != ir::kNoValue) {
    std::set<uint64_t> reads;
    for (const Arg& a : step.args)
      if (a.source == ArgSource::kBuffer && a.key != DNNL_ARG_DST) reads.insert(a.index);
    // Row-major bytes are the same whatever dims describe them (a folded MatMul's 2-D dst).
    auto fits = [&](const memory::desc& md) {
      return sameDesc(md, dst_md) ||
             (isPlainDense(md) && isPlainDense(dst_md) && numElements(md) == numElements(dst_md));
    };
    bool in_place = false;
    for (const Loc& l : locsOf(addend))
      if (fits(l.md) && bufferDead(l.buffer) && !reads.count(l.buffer)) {
        dst_buffer = l.buffer;
        in_place = true;
        break;
      }
    if (!in_place) {
      Loc from = primary(addend);
      if (isPlainDense(from.md) && isPlainDense(dst_md) && numElements(from.md) == numElements(dst_md))
        from.md = withDataType(plainDesc(dimsOf(dst_md)), memory::data_type(from.md.data.data_type));
      dst_buffer = emitReorder(from, dst_md, "residual copy: " + g_.value(addend).name).buffer;
    }
  } else {
    dst_buffer = newBuffer(dst_md);
  }
  dst->index = dst_buffer;
  ValueId final_value = chain.empty() || chain.back().on_operand ? anchor_out : nodeAt(chain.back().pos).outputs[0];
  place(final_value, Loc{dst_buffer, dst_md});
  fn_.steps.push_back(std::move(step));
}

}  // namespace partita::dnnl_backend
