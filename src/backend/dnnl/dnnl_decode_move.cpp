// Decoding the ops that only place data: Concat, the views that change no bytes
// (Flatten, Reshape, Squeeze, Unsqueeze, Identity, inference Dropout) and the moves a
// reorder computes from a strided view of the input (Transpose, unit-step Slice, read
// with the host's kernels/shape_slice.h).
#include "backend/dnnl/dnnl_decode.h"

#include "backend/dnnl/dnnl_decode_util.h"
#include "kernels/op_util.h"
#include "kernels/shape_common.h"
#include "kernels/shape_slice.h"

namespace partita::dnnl_backend {

std::optional<int64_t> decodeConcat(const ir::Graph& g, const ir::Node& n, std::string* why) {
  if (!onlyFirstOutput(n, why) || n.inputs.size() < 2) return no(why, "fewer than two inputs");
  if (!isDenseF32(g, n.outputs[0], why, "output")) return std::nullopt;
  std::vector<int64_t> y = shapeOf(g, n.outputs[0]);
  int64_t rank = int64_t(y.size());
  if (rank < 1) return no(why, "scalar");
  std::optional<int64_t> axis = normalizedAxis(n.attrs.getInt("axis", rank == 1 ? 0 : 1), rank, why);
  if (!axis) return std::nullopt;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    if (!n.hasInput(i) || !isDenseF32(g, n.inputs[i], why, "input"))
      return no(why, "inputs must be non-empty float32");
    if (shapeOf(g, n.inputs[i]).size() != size_t(rank)) return no(why, "rank mismatch");
    if (isConstant(g, n.inputs[i]) && !constantOf(g, n.inputs[i]).layout.empty())
      return no(why, "packed layout");
  }
  return axis;
}

bool decodeView(const ir::Graph& g, const ir::Node& n, std::string* why) {
  // float32, or uint8/int8 kept as they are (an int8 Gemm's operand viewed as a 1x1
  // convolution's, passes::fuseQuantizedOps)
  const auto int8 = [&](ir::ValueId v) {
    const ir::TensorType& t = g.typeOf(v);
    return (t.dtype == ir::DType::kUInt8 || t.dtype == ir::DType::kInt8) && t.isStatic() && t.numel() > 0 &&
           t.rank() <= kMaxRank;
  };
  const bool int8_view = n.hasInput(0) && onlyFirstOutput(n, nullptr) && int8(n.inputs[0]) && int8(n.outputs[0]) &&
                         g.typeOf(n.inputs[0]).dtype == g.typeOf(n.outputs[0]).dtype;
  if (!int8_view && !unaryShape(g, n, why)) return false;
  if (ir::shapeNumel(shapeOf(g, n.inputs[0])) != ir::shapeNumel(shapeOf(g, n.outputs[0])))
    return noBool(why, "element count changes");
  const std::string& op = n.op_type;
  if (op == "Dropout") {
    // Inference: an identity unless training_mode is a constant true.
    if (n.attrs.getInt("is_test", 1) == 0 && n.opset < 7) return noBool(why, "training Dropout");
    if (n.hasInput(2)) {
      ir::ValueId t = n.inputs[2];
      if (!isConstant(g, t)) return noBool(why, "training_mode not constant");
      const ir::Constant& c = constantOf(g, t);
      if (c.nbytes() < 1 || c.bytes.data[0] != std::byte{0}) return noBool(why, "training Dropout");
    }
    return true;
  }
  // Shape / axes operands must be constants: their value is already in the output type.
  for (size_t i = 1; i < n.inputs.size(); ++i)
    if (n.hasInput(i) && !isConstant(g, n.inputs[i])) return noBool(why, "non-constant shape operand");
  return true;
}

std::optional<MoveSpec> decodeMove(const ir::Graph& g, const ir::Node& n, std::string* why) {
  if (!onlyFirstOutput(n, why) || !n.hasInput(0)) return no(why, "bad inputs");
  if (!isDenseF32(g, n.inputs[0], why, "input") || !isDenseF32(g, n.outputs[0], why, "output"))
    return std::nullopt;
  std::vector<int64_t> x = shapeOf(g, n.inputs[0]), y = shapeOf(g, n.outputs[0]);
  const size_t rank = x.size();
  if (rank == 0 || y.size() != rank) return no(why, "rank");
  MoveSpec s;
  s.dims = y;
  s.starts.assign(rank, 0);
  if (n.op_type == "Transpose") {
    if (n.inputs.size() != 1) return no(why, "bad inputs");
    std::vector<int64_t> perm = kernels::shape::transposePerm(n.attrs, rank);
    if (perm.size() != rank) return no(why, "perm rank");
    std::vector<bool> seen(rank, false);
    for (size_t i = 0; i < rank; ++i) {
      if (perm[i] < 0 || perm[i] >= int64_t(rank) || seen[size_t(perm[i])]) return no(why, "bad perm");
      seen[size_t(perm[i])] = true;
      if (y[i] != x[size_t(perm[i])]) return no(why, "output shape");
    }
    s.axes = perm;
    return s;
  }
  // Slice: unit steps only, so the output is a window of the input.
  std::optional<kernels::shape::SliceParams> params =
      kernels::shape::readSliceParams(n, [&](size_t i) { return constantInts(g, n.inputs[i]); });
  if (!params) return no(why, "non-constant slice parameters");
  auto plan = hostOr(why, [&] { return kernels::shape::planSlice(NodeRefusal{n}, *params, x); });
  if (!plan) return std::nullopt;
  for (size_t i = 0; i < rank; ++i) {
    if ((*plan)[i].step != 1) return no(why, "slice step other than 1");
    if ((*plan)[i].len != y[i]) return no(why, "output shape");
    s.axes.push_back(int64_t(i));
    s.starts[i] = (*plan)[i].start;
  }
  return s;
}
}  // namespace partita::dnnl_backend
