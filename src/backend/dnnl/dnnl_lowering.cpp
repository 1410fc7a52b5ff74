#include "backend/dnnl/dnnl_lowering.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "backend/constant_uses.h"
#include "backend/dnnl/dnnl_memory_desc.h"
#include "backend/dnnl/dnnl_module.h"
#include "backend/dnnl/dnnl_claims.h"
#include "backend/dnnl/dnnl_decode.h"
#include "backend/dnnl/dnnl_patterns.h"
#include "backend/dnnl/dnnl_primitive.h"
#include "backend/dnnl/dnnl_program.h"
#include "kernels/op_util.h"
#include "partita/error.h"

namespace partita::dnnl_backend {

namespace {

using dnnl::algorithm;
using ir::ValueId;
using runtime::ConstUse;
using runtime::ConstUseKind;

constexpr size_t kMaxPostOps = 6;

[[noreturn]] void internal(const std::string& msg) {
  throw Error(ErrorCode::kInternal, "dnnl backend: " + msg);
}

memory::desc withStrides(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
  return memory::desc(memory::dims(dims.begin(), dims.end()), memory::data_type::f32,
                      memory::dims(strides.begin(), strides.end()));
}

std::vector<int64_t> dimsOf(const memory::desc& md) {
  memory::dims d = md.dims();
  return std::vector<int64_t>(d.begin(), d.end());
}

// The module being built: program, and (through backend::ConstantUses) its constant
// uses, embedded bytes and derived constants.
class ModuleBuilder {
 public:
  ModuleBuilder(const ir::Graph& g, backend::ConstantSink& sink) : g_(g), uses_(sink) {}

  const ir::Graph& graph() const { return g_; }
  Program& program() { return program_; }

  Arg borrow(int key, ir::ConstId id, const memory::desc& md) {
    if (md.get_size() != g_.constants.get(id).nbytes()) internal("borrowed constant size mismatch");
    uses_.borrow(id);
    return Arg{key, ArgSource::kConstant, id, md, false};
  }

  // Bakes `data` into the blob; `absorbed` are the constants it was computed from.
  Arg embed(int key, const void* data, const memory::desc& md, const std::vector<ir::ConstId>& absorbed) {
    uint64_t offset = uses_.embed(data, md.get_size(), absorbed);
    return Arg{key, ArgSource::kEmbedded, offset, md, false};
  }

  // Reorders `data` (laid out as `from`; the values of constant `source`, or values
  // computed from it) into `to` and hands the result to the sink as a derived constant.
  ir::ConstId derive(ir::ConstId source, const memory::desc& from, const void* data, const memory::desc& to,
                     bool same_values_as_source) {
    const std::string layout = layoutString(to);
    const std::pair<ir::ConstId, std::string> key{source, layout + "|" + layoutString(from)};
    if (same_values_as_source) {
      auto it = derived_.find(key);
      if (it != derived_.end()) return it->second;
    }
    std::vector<std::byte> bytes(to.get_size(), std::byte{0});  // padding stays zero
    const dnnl::engine& eng = cpuEngine();
    dnnl::memory src(from, eng, const_cast<void*>(data));
    dnnl::memory dst(to, eng, bytes.data());
    dnnl::stream stream(eng);
    dnnl::reorder(src, dst).execute(stream, src, dst);
    stream.wait();
    // The shape of a derived constant is the padded shape of its layout: numel * 4 == bytes.
    std::vector<int64_t> shape(to.data.padded_dims, to.data.padded_dims + to.data.ndims);
    if (size_t(ir::shapeNumel(shape)) * sizeof(float) != bytes.size())
      shape = {int64_t(bytes.size() / sizeof(float))};
    std::string name = g_.constants.get(source).name + ".dnnl." + formatTag(to);
    ir::ConstId id = uses_.derive(source, std::move(name), ir::DType::kFloat32, std::move(shape),
                                  Bytes::fromVector(std::move(bytes)), layout);
    if (same_values_as_source) derived_[key] = id;
    return id;
  }

  backend::ModuleImage finish() {
    program_.embedded = uses_.takeEmbedded(/*padded_end=*/false);
    backend::ModuleImage image;
    image.kind = kModuleKind;
    image.blob = writeProgram(program_);
    image.uses = uses_.uses();
    image.num_functions = uint32_t(program_.functions.size());
    return image;
  }

 private:
  const ir::Graph& g_;
  Program program_;
  backend::ConstantUses uses_;
  std::map<std::pair<ir::ConstId, std::string>, ir::ConstId> derived_;
};

// Where a value's bytes are during the function: a buffer and the layout they have.
struct Loc {
  uint32_t buffer = 0;
  memory::desc md;
};

// A node fused into the step of an anchor (Conv, ConvTranspose, MatMul, Gemm, binary).
struct ChainItem {
  size_t pos = 0;             // region position of the fused node (its output continues the chain)
  std::vector<size_t> extra;  // other nodes the item absorbs (SiLU: the Sigmoid before the Mul)
  std::vector<PostOp> ops;
  ValueId sum_addend = ir::kNoValue;  // a kSum post-op: the value added into dst
  ValueId operand = ir::kNoValue;     // a kBinary post-op: its second operand
  memory::desc operand_md;
  float operand_scale = 1;  // Gemm's beta on C
};

class FunctionLowering {
 public:
  FunctionLowering(ModuleBuilder& mb, const backend::Region& r)
      : mb_(mb), g_(mb.graph()), r_(r), graph_uses_(g_.useCounts()) {}

  Function run();

 private:
  const ir::Node& nodeAt(size_t pos) const { return g_.nodes[size_t(r_.nodes[pos])]; }
  std::vector<int64_t> shapeOf(ValueId v) const { return g_.typeOf(v).staticShape(); }
  bool isConstant(ValueId v) const { return g_.value(v).isConstant(); }
  ir::ConstId constOf(ValueId v) const { return g_.value(v).constant; }
  const float* constData(ValueId v) const {
    return reinterpret_cast<const float*>(g_.constants.get(constOf(v)).bytes.data);
  }
  bool available(ValueId v) const { return isConstant(v) || locs_.count(v) != 0; }

  uint32_t newBuffer(const memory::desc& md) {
    fn_.buffers.push_back(Buffer{BufferKind::kTemp, 0, md.get_size(), hasPadding(md)});
    buffer_values_.emplace_back();
    return uint32_t(fn_.buffers.size() - 1);
  }
  void place(ValueId v, const Loc& loc) {
    locs_[v].push_back(loc);
    buffer_values_[loc.buffer].push_back(v);
  }
  const Loc& primary(ValueId v) const {
    auto it = locs_.find(v);
    if (it == locs_.end() || it->second.empty())
      internal("value '" + g_.value(v).name + "' used before it is computed");
    return it->second.front();
  }
  bool bufferDead(uint32_t b) const {
    if (fn_.buffers[b].kind != BufferKind::kTemp) return false;
    for (ValueId v : buffer_values_[b])
      if (remaining_.at(v) > 0) return false;
    return true;
  }
  void consume(size_t pos) {
    done_[pos] = true;
    std::set<ValueId> seen;
    for (ValueId in : nodeAt(pos).inputs)
      if (in != ir::kNoValue && !isConstant(in) && seen.insert(in).second) --remaining_[in];
  }
  void consumeItem(const ChainItem& c) {
    for (size_t q : c.extra) consume(q);
    consume(c.pos);
  }
  // x * Sigmoid(x) (SiLU) where x has no other use: returns {Sigmoid, Mul} positions.
  std::optional<std::pair<size_t, size_t>> siluAfter(ValueId x) const {
    if (graph_uses_[size_t(x)] != 2) return std::nullopt;
    auto it = consumers_.find(x);
    if (it == consumers_.end() || it->second.size() != 2) return std::nullopt;
    for (int k = 0; k < 2; ++k) {
      size_t sp = it->second[size_t(k)], mp = it->second[size_t(1 - k)];
      const ir::Node &sig = nodeAt(sp), &mul = nodeAt(mp);
      if (done_[sp] || done_[mp] || sig.op_type != "Sigmoid" || mul.op_type != "Mul" || !sig.domain.empty() ||
          !mul.domain.empty())
        continue;
      if (soleConsumer(sig.outputs[0]) != mp) continue;
      bool operands = (mul.inputs[0] == x && mul.inputs[1] == sig.outputs[0]) ||
                      (mul.inputs[1] == x && mul.inputs[0] == sig.outputs[0]);
      if (operands && decodeBinary(g_, mul, nullptr) && decodeEltwise(g_, sig, nullptr))
        return std::make_pair(sp, mp);
    }
    return std::nullopt;
  }
  // Gelu over `x` when all five nodes are in this region and not lowered yet:
  // {Div, Erf, Add, Mul} positions and the final Mul's position.
  std::optional<std::pair<std::vector<size_t>, size_t>> geluAfter(ValueId x) const {
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
  // The only consumer of `v` when it has exactly one use and that use is a node of
  // this region not yet lowered.
  std::optional<size_t> soleConsumer(ValueId v) const {
    if (graph_uses_[size_t(v)] != 1) return std::nullopt;
    auto it = consumers_.find(v);
    if (it == consumers_.end() || it->second.size() != 1 || done_[it->second[0]]) return std::nullopt;
    return it->second[0];
  }

  Loc emitReorder(const Loc& src, const memory::desc& dst_md, const std::string& label) {
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
  Loc get(ValueId v, const memory::desc& want) {
    for (const Loc& l : locs_.at(v))
      if (sameDesc(l.md, want)) return l;
    Loc l = emitReorder(primary(v), want, "to " + formatTag(want) + ": " + g_.value(v).name);
    place(v, l);
    return l;
  }
  // `v` in row-major order (the returned md has the dims of whichever layout it came from).
  Loc plain(ValueId v) {
    for (const Loc& l : locs_.at(v))
      if (isPlainDense(l.md)) return l;
    const Loc& p = primary(v);
    Loc l = emitReorder(p, plainDesc(dimsOf(p.md)), "to row-major: " + g_.value(v).name);
    place(v, l);
    return l;
  }
  Arg bufferArg(int key, uint32_t buffer, const memory::desc& md) const {
    return Arg{key, ArgSource::kBuffer, buffer, md, false};
  }
  // A constant operand: embedded when it is one element, borrowed otherwise.
  Arg constantArg(int key, ValueId v, const memory::desc& md) {
    if (ir::shapeNumel(shapeOf(v)) == 1) return mb_.embed(key, constData(v), md, {constOf(v)});
    return mb_.borrow(key, constOf(v), md);
  }
  std::string labelOf(size_t pos, const std::vector<ChainItem>& chain) const {
    std::string s = nodeAt(pos).name.empty() ? nodeAt(pos).op_type : nodeAt(pos).name;
    for (const ChainItem& c : chain)
      for (size_t q : c.extra) s += "+" + (nodeAt(q).name.empty() ? nodeAt(q).op_type : nodeAt(q).name);
    for (const ChainItem& c : chain)
      if (c.pos != pos) s += "+" + (nodeAt(c.pos).name.empty() ? nodeAt(c.pos).op_type : nodeAt(c.pos).name);
    return s;
  }

  std::vector<ChainItem> collectChain(ValueId out, bool allow_sum, bool allow_binary);
  size_t fitChain(Step& step, const std::vector<ChainItem>& chain, size_t fixed,
                  dnnl::primitive_desc_base& pd);
  void finishAnchor(Step& step, size_t pos, std::vector<ChainItem>& chain, ValueId anchor_out);

  void lowerConv(size_t pos);
  void lowerMatMul(size_t pos);
  void lowerPool(size_t pos);
  void lowerEltwise(size_t pos);
  void emitEltwise(ValueId x, const std::vector<EltwiseOp>& ops, size_t pos,
                   const std::vector<ChainItem>& fused);
  void lowerBinary(size_t pos);
  void lowerSoftmax(size_t pos);
  void lowerLayerNorm(size_t pos);
  void lowerBatchNorm(size_t pos);
  void lowerConcat(size_t pos);
  void lowerPrelu(size_t pos);
  void lowerView(size_t pos);
  void lowerMove(size_t pos);
  void lowerReduce(size_t pos);
  void lowerLayerNormPattern(const LayerNormMatch& ln, const std::vector<size_t>& parts);
  void bindOutputs();

  ModuleBuilder& mb_;
  const ir::Graph& g_;
  const backend::Region& r_;
  std::vector<int> graph_uses_;
  Function fn_;
  std::vector<bool> done_;
  std::unordered_map<ValueId, std::vector<Loc>> locs_;  // front(): where the producer wrote it
  std::unordered_map<ValueId, int> remaining_;          // consumers not lowered yet (+1: region output)
  std::vector<std::vector<ValueId>> buffer_values_;     // every value that lived in each buffer
  std::unordered_map<ValueId, std::vector<size_t>> consumers_;
  std::unordered_map<ir::NodeId, size_t> pos_of_;  // region position of each node
};

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
    if (g_.typeOf(v).dtype != ir::DType::kFloat32 || !g_.typeOf(v).isStatic())
      internal("region input '" + g_.value(v).name + "' is not a statically shaped float32 tensor");
    memory::desc md = plainDesc(shapeOf(v));
    fn_.buffers.push_back(Buffer{BufferKind::kInput, uint32_t(i), md.get_size(), false});
    buffer_values_.emplace_back();
    place(v, Loc{uint32_t(fn_.buffers.size() - 1), md});
  }
  for (size_t p = 0; p < n; ++p) {
    if (done_[p]) continue;
    const ir::Node& node = nodeAt(p);
    switch (classify(node)) {
      case OpClass::kConv:
        lowerConv(p);
        break;
      case OpClass::kMatMul:
        lowerMatMul(p);
        break;
      case OpClass::kPool:
        lowerPool(p);
        break;
      case OpClass::kEltwise:
        lowerEltwise(p);
        break;
      case OpClass::kBinary:
        lowerBinary(p);
        break;
      case OpClass::kSoftmax:
        lowerSoftmax(p);
        break;
      case OpClass::kLayerNorm:
        lowerLayerNorm(p);
        break;
      case OpClass::kBatchNorm:
        lowerBatchNorm(p);
        break;
      case OpClass::kConcat:
        lowerConcat(p);
        break;
      case OpClass::kPrelu:
        lowerPrelu(p);
        break;
      case OpClass::kView:
        lowerView(p);
        break;
      case OpClass::kMove:
        lowerMove(p);
        break;
      case OpClass::kReduce:
        lowerReduce(p);
        break;
      case OpClass::kNone:
        internal("node '" + node.name + "' (" + node.op_type + ") is not supported");
    }
  }
  bindOutputs();
  return std::move(fn_);
}

// Greedily follows the single-use chain after an anchor's output: activations become
// eltwise post-ops, an Add of a value computed earlier a sum post-op (the residual),
// and constant (or earlier) operands of binary ops binary post-ops.
std::vector<ChainItem> FunctionLowering::collectChain(ValueId out, bool allow_sum, bool allow_binary) {
  std::vector<ChainItem> chain;
  ValueId cur = out;
  size_t num_ops = 0;
  while (num_ops < kMaxPostOps) {
    if (auto silu = siluAfter(cur)) {
      ChainItem item;
      item.pos = silu->second;
      item.extra = {silu->first};
      item.ops.push_back(PostOp{PostOp::Kind::kEltwise, int32_t(algorithm::eltwise_swish), 1.0f, 0, 1.0f});
      num_ops += 1;
      cur = nodeAt(silu->second).outputs[0];
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
    if (cls == OpClass::kEltwise) {
      auto ops = decodeEltwise(g_, node, nullptr);
      if (!ops) break;
      for (const EltwiseOp& e : *ops)
        item.ops.push_back(PostOp{PostOp::Kind::kEltwise, int32_t(e.alg), e.alpha, e.beta, 1.0f});
    } else if (cls == OpClass::kBinary && allow_binary) {
      auto alg = decodeBinary(g_, node, nullptr);
      if (!alg) break;
      bool first = node.inputs[0] == cur;
      ValueId other = first ? node.inputs[1] : node.inputs[0];
      if (other == cur || shapeOf(node.outputs[0]) != shapeOf(cur)) break;
      bool commutative = *alg != algorithm::binary_sub && *alg != algorithm::binary_div;
      if (!first && !commutative) break;
      if (!available(other)) break;
      std::vector<int64_t> os = shapeOf(other);
      if (*alg == algorithm::binary_add && allow_sum && !isConstant(other) && os == shapeOf(cur)) {
        item.ops.push_back(PostOp{PostOp::Kind::kSum, 0, 0, 0, 1.0f});
        item.sum_addend = other;
        allow_sum = false;
      } else {
        if (!isConstant(other) && ir::shapeNumel(os) == ir::shapeNumel(shapeOf(cur)))
          break;  // full-size: use sum
        item.ops.push_back(PostOp{PostOp::Kind::kBinary, int32_t(*alg), 0, 0, 1.0f});
        item.operand = other;
        item.operand_md = plainDesc(padLeft(os, shapeOf(cur).size()));
      }
    } else {
      break;
    }
    num_ops += item.ops.size();
    if (num_ops > kMaxPostOps) break;
    cur = node.outputs[0];
    chain.push_back(std::move(item));
  }
  return chain;
}

// Finds the longest prefix of `chain` (at least `fixed` items) oneDNN implements as
// post-ops of `step`; leaves the step with those post-ops and returns the prefix length.
size_t FunctionLowering::fitChain(Step& step, const std::vector<ChainItem>& chain, size_t fixed,
                                  dnnl::primitive_desc_base& pd) {
  const Step base = step;
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
      return k;
    } catch (const dnnl::error&) {
      if (k == fixed) throw;
    }
  }
  return fixed;
}

// Common tail of anchors: consumes the fused nodes, binds post-op operands and the
// destination (in place over a dead residual when the layouts agree), emits the step.
void FunctionLowering::finishAnchor(Step& step, size_t pos, std::vector<ChainItem>& chain,
                                    ValueId anchor_out) {
  step.label = labelOf(pos, chain);
  consume(pos);
  for (const ChainItem& c : chain)
    if (c.pos != pos) consumeItem(c);
  // Post-op operands, in post-op order.
  size_t op_index = 0;
  ValueId addend = ir::kNoValue;
  for (const ChainItem& c : chain)
    for (const PostOp& op : c.ops) {
      int key = DNNL_ARG_ATTR_MULTIPLE_POST_OP(int(op_index)) | DNNL_ARG_SRC_1;
      if (op.kind == PostOp::Kind::kBinary) {
        Arg* a = step.find(key);
        if (isConstant(c.operand)) {
          if (c.operand_scale != 1.0f) {
            std::vector<float> scaled(constData(c.operand),
                                      constData(c.operand) + ir::shapeNumel(shapeOf(c.operand)));
            for (float& x : scaled) x *= c.operand_scale;
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
    for (const Loc& l : locs_.at(addend))
      if (fits(l.md) && bufferDead(l.buffer) && !reads.count(l.buffer)) {
        dst_buffer = l.buffer;
        in_place = true;
        break;
      }
    if (!in_place) {
      Loc from = primary(addend);
      if (isPlainDense(from.md) && isPlainDense(dst_md) && numElements(from.md) == numElements(dst_md))
        from.md = plainDesc(dimsOf(dst_md));
      dst_buffer = emitReorder(from, dst_md, "residual copy: " + g_.value(addend).name).buffer;
    }
  } else {
    dst_buffer = newBuffer(dst_md);
  }
  dst->index = dst_buffer;
  ValueId final_value = chain.empty() ? anchor_out : nodeAt(chain.back().pos).outputs[0];
  place(final_value, Loc{dst_buffer, dst_md});
  fn_.steps.push_back(std::move(step));
}

void FunctionLowering::lowerConv(size_t pos) {
  const ir::Node& node = nodeAt(pos);
  std::optional<ConvSpec> spec = decodeConv(g_, node, nullptr);
  if (!spec) internal("Conv '" + node.name + "' not supported");
  const ValueId x = node.inputs[0], out = node.outputs[0];
  const ir::ConstId w_id = constOf(node.inputs[1]);
  const int64_t G = spec->groups;
  std::vector<int64_t> kernel(spec->weight_shape.begin() + 2, spec->weight_shape.end());
  const int64_t K = ir::shapeNumel(kernel);
  int64_t c_in = spec->in_shape[1], c_out = spec->out_shape[1];

  // oneDNN's weight dims ([G,] O, I, spatial) and the ONNX layout as strides over them.
  std::vector<int64_t> w_dims, w_strides;
  if (!spec->transposed) {
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
  if (!spec->transposed) {
    std::optional<size_t> next = soleConsumer(out);
    if (next && classify(nodeAt(*next)) == OpClass::kBatchNorm) {
      const ir::Node& bn = nodeAt(*next);
      std::optional<NormSpec> ns = decodeBatchNorm(g_, bn, nullptr);
      if (ns && bn.inputs[0] == out) {
        bn_pos = next;
        const float *gamma = constData(bn.inputs[1]), *beta = constData(bn.inputs[2]);
        const float *mean = constData(bn.inputs[3]), *var = constData(bn.inputs[4]);
        const float* w = constData(node.inputs[1]);
        const float* b = spec->has_bias ? constData(node.inputs[2]) : nullptr;
        const int64_t per_oc = ir::shapeNumel(spec->weight_shape) / c_out;
        folded_w.resize(size_t(c_out * per_oc));
        folded_b.resize(size_t(c_out));
        for (int64_t oc = 0; oc < c_out; ++oc) {
          float scale = gamma[oc] / std::sqrt(var[oc] + ns->epsilon);
          for (int64_t i = 0; i < per_oc; ++i) folded_w[size_t(oc * per_oc + i)] = w[oc * per_oc + i] * scale;
          folded_b[size_t(oc)] = ((b ? b[oc] : 0.0f) - mean[oc]) * scale + beta[oc];
        }
        for (size_t i = 1; i < 5; ++i) absorbed.push_back(constOf(bn.inputs[i]));
        if (spec->has_bias) absorbed.push_back(constOf(node.inputs[2]));
        cur = bn.outputs[0];
      }
    }
  }

  Step step;
  step.kind = spec->transposed ? StepKind::kDeconvolution : StepKind::kConvolution;
  step.strides = spec->strides;
  step.dilates = spec->dilates;
  step.pad_l = spec->pad_l;
  step.pad_r = spec->pad_r;
  // A convolution over one input channel (a grayscale image's first layer) reads its
  // input in the plain layout: oneDNN has dedicated kernels for that case, where with
  // `any` it picks a blocked-layout one (the demo CNN's conv: 0.44 -> 0.19 ms a batch
  // at 1 thread; whole model 1.75 -> 1.48 ms, and 1.47 -> 1.39 ms at 2 threads). The
  // 3-channel first layers of the ImageNet models gain nothing at 1 thread and lose
  // 1-5 % at 2, so they keep `any`.
  const bool first_layer = !spec->transposed && spec->groups == 1 && spec->in_shape.size() == 4 &&
                           spec->in_shape[1] == 1;
  if (first_layer)
    step.args.push_back(Arg{DNNL_ARG_SRC, ArgSource::kBuffer, 0, plainDesc(spec->in_shape), false});
  else
    step.args.push_back(Arg{DNNL_ARG_SRC, ArgSource::kBuffer, 0, anyDesc(spec->in_shape), true});
  step.args.push_back(Arg{DNNL_ARG_WEIGHTS, ArgSource::kConstant, 0, anyDesc(w_dims), true});
  const bool has_bias = spec->has_bias || bn_pos;
  if (has_bias) step.args.push_back(Arg{DNNL_ARG_BIAS, ArgSource::kConstant, 0, plainDesc({c_out}), false});
  step.args.push_back(Arg{DNNL_ARG_DST, ArgSource::kBuffer, 0, anyDesc(spec->out_shape), true});

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

void FunctionLowering::lowerMatMul(size_t pos) {
  const ir::Node& node = nodeAt(pos);
  std::optional<MatMulSpec> spec = decodeMatMul(g_, node, nullptr);
  if (!spec) internal("MatMul '" + node.name + "' not supported");
  const ValueId a = node.inputs[0], b = node.inputs[1], out = node.outputs[0];
  // A batch of rows against one matrix: fold the batch into M (same bytes; one large
  // GEMM instead of many thin ones, e.g. [128,1,256] x [256,768]).
  const std::vector<int64_t> full_dst = spec->dst_dims;
  bool collapsed = false;
  if (!spec->is_gemm && spec->dst_dims.size() > 2) {
    const size_t r = spec->dst_dims.size();
    bool b_single = true;
    for (size_t i = 0; i + 2 < r; ++i) b_single &= spec->b_dims[i] == 1;
    if (b_single) {
      const int64_t k = spec->a_dims[r - 1], n = spec->dst_dims[r - 1];
      const int64_t rows = ir::shapeNumel(spec->dst_dims) / n;
      spec->a_dims = {rows, k};
      spec->b_dims = {k, n};
      spec->dst_dims = {rows, n};
      collapsed = true;
    }
  }
  auto operandDesc = [&](const std::vector<int64_t>& dims, bool transposed) {
    if (!transposed) return plainDesc(dims);
    // Stored as [cols, rows]: swap the last two strides.
    return withStrides(dims, {1, dims[0]});
  };
  const memory::desc a_md = operandDesc(spec->a_dims, spec->trans_a);
  const memory::desc b_md = operandDesc(spec->b_dims, spec->trans_b);

  Step step;
  step.kind = StepKind::kMatMul;
  step.args.push_back(Arg{DNNL_ARG_SRC, ArgSource::kBuffer, 0, a_md, false});
  const bool const_b = isConstant(b);
  step.args.push_back(Arg{DNNL_ARG_WEIGHTS, const_b ? ArgSource::kConstant : ArgSource::kBuffer, 0,
                          const_b ? anyDesc(spec->b_dims) : b_md, const_b});
  step.args.push_back(Arg{DNNL_ARG_DST, ArgSource::kBuffer, 0, plainDesc(spec->dst_dims), false});

  // Gemm's C: a bias when it is a row vector, else a sum or binary post-op.
  std::vector<ChainItem> chain;
  bool c_is_bias = false;
  if (spec->is_gemm && node.hasInput(2)) {
    ValueId c = node.inputs[2];
    std::vector<int64_t> cs = padLeft(shapeOf(c), 2);
    ChainItem item;
    item.pos = pos;
    if (isConstant(c) && cs[0] == 1 && cs[1] == spec->dst_dims[1]) {
      c_is_bias = true;
      step.args.push_back(Arg{DNNL_ARG_BIAS, ArgSource::kConstant, 0, plainDesc(cs), false});
    } else if (!isConstant(c) && cs == spec->dst_dims) {
      item.ops.push_back(PostOp{PostOp::Kind::kSum, 0, 0, 0, spec->beta});
      item.sum_addend = c;
      chain.push_back(item);
    } else {
      item.ops.push_back(PostOp{PostOp::Kind::kBinary, int32_t(algorithm::binary_add), 0, 0, 1.0f});
      item.operand = c;
      item.operand_md = plainDesc(cs);
      item.operand_scale = spec->beta;
      chain.push_back(item);
    }
  }
  const size_t fixed = chain.size();
  bool has_sum = fixed && chain[0].sum_addend != ir::kNoValue;
  std::vector<ChainItem> more = collectChain(out, !has_sum, true);
  if (collapsed) {
    // Post-op operands in the folded 2-D shape: a scalar, a row, or the full output.
    const int64_t n = spec->dst_dims[1];
    for (size_t i = 0; i < more.size(); ++i) {
      if (more[i].operand == ir::kNoValue) continue;
      std::vector<int64_t> os = padLeft(shapeOf(more[i].operand), full_dst.size());
      bool row = true;
      for (size_t d = 0; d + 1 < os.size(); ++d) row &= os[d] == 1;
      if (row && (os.back() == n || os.back() == 1)) {
        more[i].operand_md = plainDesc({1, os.back()});
      } else if (os == full_dst) {
        more[i].operand_md = plainDesc(spec->dst_dims);
      } else {
        more.resize(i);
        break;
      }
    }
  }
  chain.insert(chain.end(), more.begin(), more.end());
  dnnl::primitive_desc_base pd;
  size_t k = fitChain(step, chain, fixed, pd);
  chain.resize(k);
  recordChosenLayouts(step, pd);

  step.find(DNNL_ARG_SRC)->index = plain(a).buffer;
  Arg* w = step.find(DNNL_ARG_WEIGHTS);
  if (const_b) {
    const ir::ConstId b_id = constOf(b);
    if (spec->alpha != 1.0f) {
      std::vector<float> scaled(constData(b), constData(b) + ir::shapeNumel(shapeOf(b)));
      for (float& v : scaled) v *= spec->alpha;
      w->index = mb_.derive(b_id, b_md, scaled.data(), w->md, false);
    } else if (sameDesc(w->md, b_md) && isPlainDense(b_md)) {
      *w = mb_.borrow(DNNL_ARG_WEIGHTS, b_id, b_md);
      w->chosen = true;
    } else {
      w->index = mb_.derive(b_id, b_md, constData(b), w->md, true);
    }
  } else {
    w->index = plain(b).buffer;
  }
  if (c_is_bias) {
    ValueId c = node.inputs[2];
    Arg* bias = step.find(DNNL_ARG_BIAS);
    if (spec->beta == 1.0f) {
      *bias = mb_.borrow(DNNL_ARG_BIAS, constOf(c), bias->md);
    } else {
      std::vector<float> scaled(constData(c), constData(c) + ir::shapeNumel(shapeOf(c)));
      for (float& v : scaled) v *= spec->beta;
      *bias = mb_.embed(DNNL_ARG_BIAS, scaled.data(), bias->md, {constOf(c)});
    }
  }
  finishAnchor(step, pos, chain, out);
}

void FunctionLowering::lowerPool(size_t pos) {
  const ir::Node& node = nodeAt(pos);
  std::optional<PoolSpec> spec = decodePool(g_, node, nullptr);
  if (!spec) internal("pooling '" + node.name + "' not supported");
  const ValueId x = node.inputs[0], out = node.outputs[0];
  Step step;
  step.kind = StepKind::kPooling;
  step.label = labelOf(pos, {});
  step.alg = int32_t(spec->alg);
  step.kernel = spec->kernel;
  step.strides = spec->strides;
  step.dilates = spec->dilates;
  step.pad_l = spec->pad_l;
  step.pad_r = spec->pad_r;
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

void FunctionLowering::lowerEltwise(size_t pos) {
  const ir::Node& node = nodeAt(pos);
  std::optional<std::vector<EltwiseOp>> ops = decodeEltwise(g_, node, nullptr);
  if (!ops && node.op_type == "Erf")
    throw Error(ErrorCode::kUnsupported,
                "dnnl backend: Erf '" + node.name +
                    "' is taken only inside a Gelu; its pattern was split (by --allow/--deny?)");
  if (!ops) internal("eltwise '" + node.name + "' not supported");
  std::vector<ChainItem> fused;
  // Sigmoid(x) * x: one swish over x.
  if (node.op_type == "Sigmoid")
    if (auto silu = siluAfter(node.inputs[0]); silu && silu->first == pos) {
      ops = std::vector<EltwiseOp>{{algorithm::eltwise_swish, 1.0f, 0.0f}};
      ChainItem item;
      item.pos = silu->second;
      fused.push_back(item);
    }
  emitEltwise(node.inputs[0], *ops, pos, fused);
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
    makePrimitiveDesc(step, cpuEngine());
    fn_.steps.push_back(std::move(step));
  }
  place(out, Loc{dst, src.md});
}

void FunctionLowering::lowerBinary(size_t pos) {
  const ir::Node& node = nodeAt(pos);
  std::optional<algorithm> alg = decodeBinary(g_, node, nullptr);
  if (!alg) internal("binary '" + node.name + "' not supported");
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
    step.alg = int32_t(*alg);
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
  Step step;
  std::vector<ChainItem> chain = collectChain(out, false, false);
  dnnl::primitive_desc_base pd;
  size_t k = 0;
  try {
    build(false, step);
    k = fitChain(step, chain, 0, pd);
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
  Arg* dst = step.find(DNNL_ARG_DST);
  // In place over the first operand when nothing reads it afterwards.
  uint32_t d = (s0->source == ArgSource::kBuffer && bufferDead(uint32_t(s0->index)) &&
                !(s1->source == ArgSource::kBuffer && s1->index == s0->index))
                   ? uint32_t(s0->index)
                   : newBuffer(dst->md);
  dst->index = d;
  ValueId final_value = chain.empty() ? out : nodeAt(chain.back().pos).outputs[0];
  place(final_value, Loc{d, dst->md});
  fn_.steps.push_back(std::move(step));
}

void FunctionLowering::lowerSoftmax(size_t pos) {
  const ir::Node& node = nodeAt(pos);
  std::optional<SoftmaxSpec> spec = decodeSoftmax(g_, node, nullptr);
  if (!spec) internal("softmax '" + node.name + "' not supported");
  const ValueId x = node.inputs[0], out = node.outputs[0];
  const Loc src = plain(x);
  const memory::desc md = plainDesc(spec->dims);
  Step step;
  step.kind = spec->log ? StepKind::kLogSoftmax : StepKind::kSoftmax;
  step.label = labelOf(pos, {});
  step.axis = spec->axis;
  consume(pos);
  uint32_t dst = newBuffer(md);
  step.args.push_back(bufferArg(DNNL_ARG_SRC, src.buffer, md));
  step.args.push_back(bufferArg(DNNL_ARG_DST, dst, md));
  makePrimitiveDesc(step, cpuEngine());
  fn_.steps.push_back(std::move(step));
  place(out, Loc{dst, plainDesc(shapeOf(out))});
}

void FunctionLowering::lowerLayerNorm(size_t pos) {
  const ir::Node& node = nodeAt(pos);
  std::optional<NormSpec> spec = decodeLayerNorm(g_, node, nullptr);
  if (!spec) internal("LayerNormalization '" + node.name + "' not supported");
  const ValueId x = node.inputs[0], out = node.outputs[0];
  const Loc src = plain(x);
  const memory::desc md = plainDesc(spec->dims);
  const memory::desc param_md = plainDesc({spec->dims[1]});
  Step step;
  step.kind = StepKind::kLayerNorm;
  step.label = labelOf(pos, {});
  step.epsilon = spec->epsilon;
  step.flags = uint32_t(dnnl::normalization_flags::use_scale);
  step.args.push_back(bufferArg(DNNL_ARG_SRC, src.buffer, md));
  step.args.push_back(mb_.borrow(DNNL_ARG_SCALE, constOf(node.inputs[1]), param_md));
  if (node.hasInput(2)) {
    step.flags |= uint32_t(dnnl::normalization_flags::use_shift);
    step.args.push_back(mb_.borrow(DNNL_ARG_SHIFT, constOf(node.inputs[2]), param_md));
  }
  consume(pos);
  uint32_t dst = newBuffer(md);
  step.args.push_back(bufferArg(DNNL_ARG_DST, dst, md));
  makePrimitiveDesc(step, cpuEngine());
  fn_.steps.push_back(std::move(step));
  place(out, Loc{dst, plainDesc(shapeOf(out))});
}

void FunctionLowering::lowerBatchNorm(size_t pos) {
  const ir::Node& node = nodeAt(pos);
  std::optional<NormSpec> spec = decodeBatchNorm(g_, node, nullptr);
  if (!spec) internal("BatchNormalization '" + node.name + "' not supported");
  const ValueId x = node.inputs[0], out = node.outputs[0];
  const memory::desc param_md = plainDesc({spec->dims[1]});
  auto build = [&](const Loc& src, Step& step) {
    step = Step{};
    step.kind = StepKind::kBatchNorm;
    step.label = labelOf(pos, {});
    step.epsilon = spec->epsilon;
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

void FunctionLowering::lowerConcat(size_t pos) {
  const ir::Node& node = nodeAt(pos);
  std::optional<int64_t> axis = decodeConcat(g_, node, nullptr);
  if (!axis) internal("Concat '" + node.name + "' not supported");
  const ValueId out = node.outputs[0];
  // Keep the producers' layout when all inputs share one, else go row-major.
  std::string common;
  bool same = true;
  for (ValueId in : node.inputs) {
    std::string tag = isConstant(in) ? "const" : formatTag(primary(in).md);
    if (common.empty()) common = tag;
    same &= tag == common && tag != "const" && dimsOf(primary(in).md) == shapeOf(in);
  }
  auto build = [&](bool use_primary, Step& step) {
    step = Step{};
    step.kind = StepKind::kConcat;
    step.label = labelOf(pos, {});
    step.axis = *axis;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      ValueId in = node.inputs[i];
      memory::desc md = use_primary ? primary(in).md : plainDesc(shapeOf(in));
      step.args.push_back(Arg{DNNL_ARG_MULTIPLE_SRC + int(i), ArgSource::kBuffer, 0, md, false});
    }
    step.args.push_back(Arg{DNNL_ARG_DST, ArgSource::kBuffer, 0, anyDesc(shapeOf(out)), true});
  };
  Step step;
  dnnl::primitive_desc_base pd;
  bool use_primary = same;
  build(use_primary, step);
  try {
    pd = makePrimitiveDesc(step, cpuEngine());
  } catch (const dnnl::error&) {
    if (!use_primary) throw;
    use_primary = false;
    build(false, step);
    pd = makePrimitiveDesc(step, cpuEngine());
  }
  recordChosenLayouts(step, pd);
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    ValueId in = node.inputs[i];
    Arg* a = step.find(DNNL_ARG_MULTIPLE_SRC + int(i));
    if (isConstant(in))
      *a = mb_.borrow(a->key, constOf(in), a->md);
    else
      a->index = use_primary ? primary(in).buffer : plain(in).buffer;
  }
  consume(pos);
  Arg* dst = step.find(DNNL_ARG_DST);
  dst->index = newBuffer(dst->md);
  place(out, Loc{uint32_t(dst->index), dst->md});
  fn_.steps.push_back(std::move(step));
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

void FunctionLowering::lowerView(size_t pos) {
  const ir::Node& node = nodeAt(pos);
  const ValueId x = node.inputs[0], out = node.outputs[0];
  if (node.op_type == "Identity" || node.op_type == "Dropout") {
    std::vector<Loc> same = locs_.at(x);
    consume(pos);
    for (const Loc& l : same) place(out, l);
    return;
  }
  const Loc src = plain(x);
  consume(pos);
  place(out, Loc{src.buffer, plainDesc(shapeOf(out))});
}

void FunctionLowering::lowerMove(size_t pos) {
  const ir::Node& node = nodeAt(pos);
  std::optional<MoveSpec> spec = decodeMove(g_, node, nullptr);
  if (!spec) internal(node.op_type + " '" + node.name + "' not supported");
  const ValueId x = node.inputs[0], out = node.outputs[0];
  const Loc src = plain(x);
  memory::desc view = withStrides(spec->dims, spec->strides);
  view.data.offset0 = spec->offset;
  const memory::desc dst_md = plainDesc(spec->dims);
  consume(pos);
  Step step;
  step.kind = StepKind::kReorder;
  step.label = labelOf(pos, {});
  uint32_t dst = newBuffer(dst_md);
  step.args.push_back(bufferArg(DNNL_ARG_SRC, src.buffer, view));
  step.args.push_back(bufferArg(DNNL_ARG_DST, dst, dst_md));
  makePrimitiveDesc(step, cpuEngine());
  fn_.steps.push_back(std::move(step));
  place(out, Loc{dst, plainDesc(shapeOf(out))});
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
  std::optional<ReduceSpec> spec = decodeReduce(g_, node, nullptr);
  if (!spec) internal(node.op_type + " '" + node.name + "' not supported");
  const ValueId x = node.inputs[0], out = node.outputs[0];
  const Loc src = plain(x);
  const memory::desc src_md = plainDesc(spec->src_dims), dst_md = plainDesc(spec->dst_dims);
  consume(pos);
  Step step;
  step.kind = StepKind::kReduction;
  step.label = labelOf(pos, {});
  step.alg = int32_t(spec->alg);
  step.alpha = spec->p;
  uint32_t dst = newBuffer(dst_md);
  step.args.push_back(bufferArg(DNNL_ARG_SRC, src.buffer, src_md));
  step.args.push_back(bufferArg(DNNL_ARG_DST, dst, dst_md));
  makePrimitiveDesc(step, cpuEngine());
  fn_.steps.push_back(std::move(step));
  place(out, Loc{dst, plainDesc(shapeOf(out))});
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
  uint32_t dst = newBuffer(md);
  step.args.push_back(bufferArg(DNNL_ARG_DST, dst, md));
  makePrimitiveDesc(step, cpuEngine());
  fn_.steps.push_back(std::move(step));
  place(ln.y, Loc{dst, plainDesc(shapeOf(ln.y))});
}

// Region outputs are row-major in the caller's tensors. A temporary that already holds
// an output row-major becomes that output (no copy); otherwise a reorder writes it.
void FunctionLowering::bindOutputs() {
  std::vector<bool> taken(fn_.buffers.size(), false);
  for (size_t i = 0; i < r_.outputs.size(); ++i) {
    ValueId v = r_.outputs[i];
    if (!locs_.count(v)) internal("region output '" + g_.value(v).name + "' was never computed");
    const int64_t numel = ir::shapeNumel(shapeOf(v));
    bool bound = false;
    for (const Loc& l : locs_.at(v)) {
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
    Loc l = emitReorder(p, plainDesc(dimsOf(p.md)), "output: " + g_.value(v).name);
    fn_.buffers[l.buffer].kind = BufferKind::kOutput;
    fn_.buffers[l.buffer].index = uint32_t(i);
    taken.resize(fn_.buffers.size(), false);
    taken[l.buffer] = true;
  }
}

}  // namespace

backend::ModuleImage compileRegions(const ir::Graph& g, const std::vector<backend::Region>& regions,
                                    backend::ConstantSink& sink) {
  // oneDNN tunes implementations to the thread count: the compiler driver has set
  // this thread's OpenMP team size to the one runs will use (CompileOptions::threads).
  ModuleBuilder mb(g, sink);
  for (const backend::Region& r : regions) {
    FunctionLowering lowering(mb, r);
    try {
      mb.program().functions.push_back(lowering.run());
    } catch (const dnnl::error& e) {
      throw Error(ErrorCode::kInternal,
                  std::string("dnnl backend: oneDNN rejected a region it was given: ") + e.what());
    }
  }
  backend::ModuleImage image = mb.finish();
  // What the recorded layouts were chosen for: checked by DnnlModule::load.
  image.assumptions = layoutAssumptions(omp_get_max_threads());
  return image;
}

}  // namespace partita::dnnl_backend
