// Decoding MatMul (numpy broadcasting of batch dimensions, 1-D operands) and Gemm
// (transposed operands, alpha, beta, the forms of C) into one oneDNN matmul.
#include "backend/dnnl/dnnl_decode.h"

#include <algorithm>

#include "backend/dnnl/dnnl_decode_util.h"

namespace partita::dnnl_backend {

std::optional<MatMulSpec> decodeMatMul(const ir::Graph& g, const ir::Node& n, std::string* why) {
  MatMulSpec s;
  s.is_gemm = n.op_type == "Gemm";
  if (!onlyFirstOutput(n, why) || !n.hasInput(0) || !n.hasInput(1)) return no(why, "bad inputs");
  if (!isDenseF32(g, n.inputs[0], why, "A") || !isDenseF32(g, n.inputs[1], why, "B") ||
      !isDenseF32(g, n.outputs[0], why, "output"))
    return std::nullopt;
  for (size_t i = 0; i < 2; ++i)
    if (isConstant(g, n.inputs[i]) && !constantOf(g, n.inputs[i]).layout.empty())
      return no(why, "operand has a packed layout");
  std::vector<int64_t> a = shapeOf(g, n.inputs[0]), b = shapeOf(g, n.inputs[1]), y = shapeOf(g, n.outputs[0]);
  if (s.is_gemm) {
    if (n.inputs.size() > 3) return no(why, "bad inputs");
    if (a.size() != 2 || b.size() != 2) return no(why, "Gemm operands must be 2-D");
    s.trans_a = n.attrs.getInt("transA", 0) != 0;
    s.trans_b = n.attrs.getInt("transB", 0) != 0;
    s.alpha = n.attrs.getFloat("alpha", 1.0f);
    s.beta = n.attrs.getFloat("beta", 1.0f);
    int64_t m = s.trans_a ? a[1] : a[0], k = s.trans_a ? a[0] : a[1];
    int64_t kb = s.trans_b ? b[1] : b[0], nn = s.trans_b ? b[0] : b[1];
    if (k != kb || y != std::vector<int64_t>{m, nn}) return no(why, "Gemm shapes do not agree");
    s.a_dims = {m, k};
    s.b_dims = {k, nn};
    s.dst_dims = {m, nn};
    if (s.alpha != 1.0f && !isConstant(g, n.inputs[1])) return no(why, "Gemm alpha with a non-constant B");
    if (n.hasInput(2)) {
      ir::ValueId c = n.inputs[2];
      if (!isDenseF32(g, c, why, "C")) return std::nullopt;
      std::vector<int64_t> cs = shapeOf(g, c);
      if (!ir::broadcastsInto(cs, y)) return no(why, "C does not broadcast to the output");
      if (isConstant(g, c) && !constantOf(g, c).layout.empty()) return no(why, "C has a packed layout");
      if (!isConstant(g, c) && padLeft(cs, 2) != y && s.beta != 1.0f)
        return no(why, "non-constant broadcast C with beta != 1");
    }
    return s;
  }
  if (n.inputs.size() != 2) return no(why, "bad inputs");
  // numpy matmul: 1-D operands get a unit dimension that the output drops.
  std::vector<int64_t> a2 = a.size() == 1 ? std::vector<int64_t>{1, a[0]} : a;
  std::vector<int64_t> b2 = b.size() == 1 ? std::vector<int64_t>{b[0], 1} : b;
  size_t rank = std::max(a2.size(), b2.size());
  if (rank > kMaxRank) return no(why, "rank above 12");
  a2 = padLeft(a2, rank);
  b2 = padLeft(b2, rank);
  if (a2[rank - 1] != b2[rank - 2]) return no(why, "MatMul inner dimensions differ");
  std::vector<int64_t> d(rank);
  for (size_t i = 0; i + 2 < rank; ++i) {
    if (a2[i] != b2[i] && a2[i] != 1 && b2[i] != 1) return no(why, "batch dimensions do not broadcast");
    d[i] = std::max(a2[i], b2[i]);
  }
  d[rank - 2] = a2[rank - 2];
  d[rank - 1] = b2[rank - 1];
  if (ir::shapeNumel(d) != ir::shapeNumel(y)) return no(why, "output shape");
  s.a_dims = a2;
  s.b_dims = b2;
  s.dst_dims = d;
  return s;
}
}  // namespace partita::dnnl_backend
