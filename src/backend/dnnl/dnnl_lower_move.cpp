// Lowering of the ops that only place data: Concat (in the producers' common layout
// when they share one), views (no step: the output names the input's bytes),
// Transpose / Slice (one reorder from a strided view of the input, in whatever
// unblocked order of dims it is) and the channel shuffle (one reorder between two
// strided views).
#include "backend/dnnl/dnnl_function_lowering.h"

#include <set>
#include <string>

#include "backend/dnnl/dnnl_claims.h"
#include "backend/dnnl/dnnl_module.h"
#include "backend/dnnl/dnnl_primitive.h"
#include "kernels/shape_common.h"

namespace partita::dnnl_backend {

using ir::ValueId;

namespace {

bool passesThrough(OpClass c) { return c == OpClass::kEltwise || c == OpClass::kBatchNorm; }

}  // namespace

memory::desc channelBlocks(const std::vector<int64_t>& dims) {
  return memory::desc(memory::dims(dims.begin(), dims.end()), memory::data_type::f32, memory::format_tag::aBcd16b);
}

std::optional<size_t> FunctionLowering::convBehind(ValueId v) const {
  for (int hop = 0; hop < 3; ++hop) {
    const ir::NodeId producer = g_.value(v).producer;
    auto it = pos_of_.find(producer);
    if (producer == ir::kNoNode || it == pos_of_.end()) return std::nullopt;
    const ir::Node& n = nodeAt(it->second);
    const OpClass c = classify(n);
    if (c == OpClass::kConv) return it->second;
    if (hop == 2 || !passesThrough(c) || n.inputs.empty() || n.outputs.size() != 1) return std::nullopt;
    v = n.inputs[0];
    auto readers = consumers_.find(v);  // lowered or not
    if (isConstant(v) || graph_uses_[size_t(v)] != 1 || readers == consumers_.end() ||
        readers->second != std::vector<size_t>{it->second})
      return std::nullopt;
  }
  return std::nullopt;
}

std::optional<size_t> FunctionLowering::concatAhead(size_t conv) const {
  ValueId v = nodeAt(conv).outputs[0];
  for (int hop = 0; hop < 3; ++hop) {
    const std::optional<size_t> next = soleConsumer(v);
    if (!next) return std::nullopt;
    const ir::Node& n = nodeAt(*next);
    const OpClass c = classify(n);
    if (c == OpClass::kConcat) return concatInPlaceShape(*next) ? next : std::nullopt;
    if (hop == 2 || !passesThrough(c) || n.inputs.empty() || n.inputs[0] != v || n.outputs.size() != 1)
      return std::nullopt;
    v = n.outputs[0];
  }
  return std::nullopt;
}

bool FunctionLowering::concatInPlaceShape(size_t pos) const {
  const ir::Node& node = nodeAt(pos);
  if (mb_.polymorphic() || node.inputs.size() < 2 || node.outputs.size() != 1) return false;
  const std::optional<int64_t> axis = decodeConcat(g_, node, nullptr);
  const std::vector<int64_t> out = shapeOf(node.outputs[0]);
  if (!axis || *axis != 1 || out.size() != 4 || out[0] != 1 || elementType(node.outputs[0]) != memory::data_type::f32)
    return false;
  std::set<ValueId> seen;
  for (ValueId in : node.inputs) {
    if (in == ir::kNoValue || isConstant(in) || !seen.insert(in).second || soleConsumer(in) != pos) return false;
    const std::vector<int64_t> s = shapeOf(in);
    if (s.size() != 4 || s[1] % 16 != 0 || elementType(in) != memory::data_type::f32) return false;
    const std::optional<size_t> conv = convBehind(in);
    if (!conv) return false;
    const std::optional<ConvSpec> spec = decodeConv(g_, nodeAt(*conv), nullptr);
    if (!spec || spec->transposed || spec->groups != 1 || spec->weight_shape.size() != 4 ||
        spec->in_shape.size() != 4 || spec->in_shape[1] % 16 != 0)
      return false;
    const bool pointwise = spec->weight_shape[2] == 1 && spec->weight_shape[3] == 1;
    if (!pointwise && !(winograd_ && !bf16_ && winogradShape(*spec))) return false;
  }
  return true;
}

// The producers wrote each input in channel blocks into a buffer no other step
// touches; those buffers become views into the output's.
bool FunctionLowering::lowerConcatInPlace(size_t pos) {
  if (!concatInPlaceShape(pos)) return false;
  const ir::Node& node = nodeAt(pos);
  std::vector<uint32_t> parts;
  for (ValueId in : node.inputs) {
    if (!locs_.count(in)) return false;
    const Loc& l = locs_.at(in).front();
    const Buffer& b = fn_.buffers[l.buffer];
    if (!sameDesc(l.md, channelBlocks(shapeOf(in))) || b.kind != BufferKind::kTemp || b.view || b.zero_padded ||
        b.bytes != l.md.get_size())
      return false;
    for (uint32_t p : parts)
      if (p == l.buffer) return false;
    // Written by one step and touched by no other.
    int writers = 0, others = 0;
    for (const Step& s : fn_.steps)
      for (const Arg& a : s.args)
        if (a.source == ArgSource::kBuffer && a.index == l.buffer) ++(a.key == DNNL_ARG_DST ? writers : others);
    if (writers != 1 || others != 0) return false;
    parts.push_back(l.buffer);
  }
  const memory::desc md = channelBlocks(shapeOf(node.outputs[0]));
  consume(pos);
  const uint32_t whole = newBuffer(md);
  uint64_t offset = 0;
  for (uint32_t p : parts) {
    Buffer& b = fn_.buffers[p];
    b.view = true;
    b.index = whole;
    b.offset = offset;
    offset += b.bytes;
  }
  place(node.outputs[0], Loc{whole, md});
  return true;
}

void FunctionLowering::lowerConcat(size_t pos) {
  if (lowerConcatInPlace(pos)) return;
  const ir::Node& node = nodeAt(pos);
  const int64_t axis = decoded(decodeConcat(g_, node, nullptr), pos);
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
    step.axis = axis;
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
    // oneDNN 2.6 concatenates blocked sources whose channels are padded (58 channels
    // in blocks of 16) only with its reference code: row-major sources then.
    if (use_primary && isReference(pd)) throw dnnl::error(dnnl_unimplemented, "ref");
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

void FunctionLowering::lowerView(size_t pos) {
  const ir::Node& node = nodeAt(pos);
  const ValueId x = node.inputs[0], out = node.outputs[0];
  if (node.op_type == "Identity" || node.op_type == "Dropout") {
    std::vector<Loc> same = locsOf(x);
    consume(pos);
    for (const Loc& l : same) place(out, l);
    return;
  }
  if (lowerShuffle(pos) || flattenIntoWeights(pos)) return;
  const Loc src = plain(x);
  consume(pos);
  place(out, Loc{src.buffer, withDataType(plainDesc(shapeOf(out)), elementType(out))});
  keepRowOrder(x, out);  // the Reshape to [M, K, 1, 1] before an int8 product (int8ProductAfter)
}

void FunctionLowering::keepRowOrder(ValueId from, ValueId to) {
  if (auto rows = channels_last_rows_.find(from); rows != channels_last_rows_.end())
    channels_last_rows_[to] = rows->second;
}

// A classifier's Flatten after its last convolution: the channels-last bytes, read in
// their own order as the matrix product's rows, against weights whose rows the
// compiler put in that order (the demo CNN's fc1: a 52 us reorder a batch at one
// thread gone; docs/backends.md). Static regions only: a replay has no weights to
// permute.
bool FunctionLowering::flattenIntoWeights(size_t pos) {
  const ir::Node& node = nodeAt(pos);
  if (node.op_type != "Flatten" || mb_.polymorphic()) return false;
  const ValueId x = node.inputs[0], out = node.outputs[0];
  const std::vector<int64_t> xs = shapeOf(x), ys = shapeOf(out);
  if (xs.size() != 4 || ys.size() != 2 || ys[0] != xs[0] || elementType(x) != memory::data_type::f32) return false;
  const Loc src = primary(x);
  if (!isChannelsLastDense(src.md)) return false;
  const std::optional<size_t> reader = soleConsumer(out);
  if (!reader) return false;
  const ir::Node& mm = nodeAt(*reader);
  if (!mm.domain.empty() || mm.inputs[0] != out) return false;
  if (mm.op_type == "MatMul" || mm.op_type == "Gemm") {
    if (mm.inputs[1] == out || !isConstant(mm.inputs[1]) || elementType(mm.inputs[1]) != memory::data_type::f32)
      return false;
    const std::optional<MatMulSpec> spec = decodeMatMul(g_, mm, nullptr);
    if (!spec || spec->trans_a || spec->a_dims != ys) return false;
  } else if (!int8ProductAfter(*reader, ys)) {
    return false;
  }
  consume(pos);
  place(out, Loc{src.buffer, plainDesc(ys)});
  channels_last_rows_[out] = {xs[1], xs[2], xs[3]};
  return true;
}

// A static int8 model's classifier: QuantizeLinear (per tensor: it keeps the order of
// the elements) at `pos`, a Reshape to [M, K, 1, 1], and the QLinearConv that is a
// matrix product (what fuseQuantizedOps makes of a quantized Gemm) on oneDNN's int8
// matmul (emitQMatMul permutes its int8 weights' rows).
bool FunctionLowering::int8ProductAfter(size_t pos, const std::vector<int64_t>& rows) const {
  const ir::Node& q = nodeAt(pos);
  if (q.op_type != "QuantizeLinear") return false;
  const std::optional<QuantizeSpec> qs = decodeQuantize(g_, q, nullptr);
  if (!qs || !qs->quantize) return false;
  const std::optional<size_t> reshape = soleConsumer(q.outputs[0]);
  if (!reshape || nodeAt(*reshape).op_type != "Reshape" || nodeAt(*reshape).inputs[0] != q.outputs[0] ||
      shapeOf(nodeAt(*reshape).outputs[0]) != std::vector<int64_t>{rows[0], rows[1], 1, 1})
    return false;
  const std::optional<size_t> conv = soleConsumer(nodeAt(*reshape).outputs[0]);
  if (!conv || nodeAt(*conv).op_type != "QLinearConv" || nodeAt(*conv).inputs[0] != nodeAt(*reshape).outputs[0])
    return false;
  const std::optional<QConvSpec> qc = decodeQLinearConv(g_, nodeAt(*conv), nullptr);
  if (!qc) return false;
  const std::optional<QMatMulSpec> product = asMatrixProduct(*qc);
  return product && product->rows == rows[0] && product->k == rows[1] && qmatmulImplemented(*product, nullptr);
}

Loc FunctionLowering::unblocked(ValueId v) {
  const std::vector<int64_t> shape = shapeOf(v);
  for (const Loc& l : locsOf(v))
    if (isDenseUnblocked(l.md) && dimsOf(l.md) == shape) return l;
  // Row-major bytes may be recorded with other dims (a MatMul's folded batch): the
  // value's own dims over them.
  return Loc{plain(v).buffer, plainDesc(shape)};
}

void FunctionLowering::lowerMove(size_t pos) {
  const ir::Node& node = nodeAt(pos);
  const MoveSpec spec = decoded(decodeMove(g_, node, nullptr), pos);
  const ValueId x = node.inputs[0], out = node.outputs[0];
  const Loc src = unblocked(x);
  const std::vector<int64_t> s = elementStrides(src.md);
  std::vector<int64_t> strides;
  int64_t offset = 0;
  for (size_t i = 0; i < spec.dims.size(); ++i) {
    strides.push_back(s[size_t(spec.axes[i])]);
    offset += spec.starts[i] * s[i];
  }
  memory::desc view = withStrides(spec.dims, strides);
  view.data.offset0 = offset;
  if (isPlainDense(view)) {
    // The input's bytes as they are (a transpose that moves only dims of size 1, as a
    // batch-1 encoder's [S, 1, H] <-> [1, S, H] does; a slice of everything): a view.
    consume(pos);
    place(out, Loc{src.buffer, withDataType(plainDesc(spec.dims), elementType(out))});
    return;
  }
  // A window keeps its source's order of dims (a channels-last slice stays
  // channels-last, a plain copy); a transpose writes row-major, but for a float32
  // matrix product's computed weights whose source rows run along the last dim
  // (attention's keys, K^T of [seq, heads, dim] bytes): the last two dims swapped, a
  // copy that reads and writes runs of `dim` floats (lowerMatMul takes it as it is).
  memory::desc dst_md = node.op_type == "Slice" ? denseLike(src.md, spec.dims) : plainDesc(spec.dims);
  const size_t r = spec.dims.size();
  if (node.op_type == "Transpose" && r >= 2 && strides[r - 1] > strides[r - 2] &&
      elementType(out) == memory::data_type::f32) {
    const std::optional<size_t> reader = soleConsumer(out);
    if (reader && nodeAt(*reader).op_type == "MatMul" && nodeAt(*reader).domain.empty() &&
        nodeAt(*reader).inputs.size() == 2 && nodeAt(*reader).inputs[1] == out && nodeAt(*reader).inputs[0] != out)
      dst_md = lastTwoSwapped(spec.dims);
  }
  Step step;
  step.kind = StepKind::kReorder;
  step.label = labelOf(pos, {});
  step.args.push_back(bufferArg(DNNL_ARG_SRC, src.buffer, view));
  consume(pos);
  place(out, emitIntoNewBuffer(std::move(step), dst_md, dst_md));
}

// Reshape splitting one axis into (g, m), Transpose swapping those two, Reshape
// merging them back (ShuffleNet's channel shuffle): element i*m + j of the axis moves
// to j*g + i. As three ops that is a reorder to row-major, a transposing copy and
// often a reorder back; here it is one reorder between two strided views over bytes in
// the input's order of dims (a channels-last input stays channels-last).
bool FunctionLowering::lowerShuffle(size_t pos) {
  const ir::Node& split = nodeAt(pos);
  if (split.op_type != "Reshape") return false;
  const ValueId x = split.inputs[0], y = split.outputs[0];
  const std::vector<int64_t> xd = shapeOf(x), yd = shapeOf(y);
  if (yd.size() != xd.size() + 1) return false;
  size_t a = 0;
  while (a < xd.size() && xd[a] == yd[a]) ++a;
  if (a >= xd.size() || yd[a] * yd[a + 1] != xd[a]) return false;
  for (size_t i = a + 1; i < xd.size(); ++i)
    if (xd[i] != yd[i + 1]) return false;
  const std::optional<size_t> t = soleConsumer(y);
  if (!t || nodeAt(*t).op_type != "Transpose" || nodeAt(*t).inputs.size() != 1) return false;
  const std::vector<int64_t> perm = kernels::shape::transposePerm(nodeAt(*t).attrs, yd.size());
  if (perm.size() != yd.size()) return false;
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != int64_t(i == a ? a + 1 : i == a + 1 ? a : i)) return false;
  const ValueId z = nodeAt(*t).outputs[0];
  const std::optional<size_t> r = soleConsumer(z);
  if (!r || nodeAt(*r).op_type != "Reshape" || nodeAt(*r).inputs[0] != z) return false;
  const ValueId out = nodeAt(*r).outputs[0];
  if (shapeOf(out) != xd) return false;

  const int64_t g = yd[a], m = yd[a + 1];
  const Loc src = unblocked(x);
  const memory::desc dst_md = denseLike(src.md, xd);
  const std::vector<int64_t> s = elementStrides(src.md), d = elementStrides(dst_md);
  std::vector<int64_t> dims, src_strides, dst_strides;
  for (size_t i = 0; i < xd.size(); ++i) {
    if (i != a) {
      dims.push_back(xd[i]);
      src_strides.push_back(s[i]);
      dst_strides.push_back(d[i]);
      continue;
    }
    dims.insert(dims.end(), {m, g});  // (j, i)
    src_strides.insert(src_strides.end(), {s[i], s[i] * m});
    dst_strides.insert(dst_strides.end(), {d[i] * g, d[i]});
  }
  Step step;
  step.kind = StepKind::kReorder;
  step.label = labelOf(pos, {}) + "+" + nodeAt(*t).name + "+" + nodeAt(*r).name;
  step.args.push_back(bufferArg(DNNL_ARG_SRC, src.buffer, withStrides(dims, src_strides)));
  consume(pos);
  consume(*t);
  consume(*r);
  place(out, emitIntoNewBuffer(std::move(step), dst_md, withStrides(dims, dst_strides)));
  return true;
}

}  // namespace partita::dnnl_backend
