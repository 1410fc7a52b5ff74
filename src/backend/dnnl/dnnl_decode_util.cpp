#include "backend/dnnl/dnnl_decode_util.h"

#include "backend/dnnl/dnnl_decode.h"
#include "kernels/op_util.h"

namespace partita::dnnl_backend {

std::nullopt_t no(std::string* why, const std::string& msg) {
  if (why) *why = msg;
  return std::nullopt;
}

bool noBool(std::string* why, const std::string& msg) {
  if (why) *why = msg;
  return false;
}

bool isDenseF32(const ir::Graph& g, ir::ValueId v, std::string* why, const char* what) {
  const ir::TensorType& t = g.typeOf(v);
  if (t.dtype != ir::DType::kFloat32) return noBool(why, std::string(what) + " is not float32");
  if (!t.isStatic()) return noBool(why, std::string(what) + " has no static shape");
  if (t.rank() > kMaxRank) return noBool(why, std::string(what) + " has rank above 12");
  if (t.numel() <= 0) return noBool(why, std::string(what) + " is empty");
  return true;
}

std::vector<int64_t> shapeOf(const ir::Graph& g, ir::ValueId v) { return g.typeOf(v).staticShape(); }

bool onlyFirstOutput(const ir::Node& n, std::string* why) {
  if (n.outputs.empty() || n.outputs[0] == ir::kNoValue) return noBool(why, "no output");
  for (size_t i = 1; i < n.outputs.size(); ++i)
    if (n.outputs[i] != ir::kNoValue) return noBool(why, "optional output " + std::to_string(i) + " is used");
  return true;
}

bool unaryShape(const ir::Graph& g, const ir::Node& n, std::string* why) {
  if (!n.hasInput(0)) return noBool(why, "input 0 missing");
  return onlyFirstOutput(n, why) && isDenseF32(g, n.inputs[0], why, "input") &&
         isDenseF32(g, n.outputs[0], why, "output");
}

std::optional<std::vector<int64_t>> constantInts(const ir::Graph& g, ir::ValueId v) {
  if (!isConstant(g, v)) return std::nullopt;
  const ir::Constant& c = constantOf(g, v);
  if (!c.layout.empty() || (c.dtype != ir::DType::kInt64 && c.dtype != ir::DType::kInt32))
    return std::nullopt;
  return kernels::readInts(c.view());
}

std::optional<int64_t> normalizedAxis(int64_t axis, int64_t rank, std::string* why) {
  return hostOr(why, [&] { return kernels::normalizeAxis(axis, rank, "axis"); });
}

std::vector<int64_t> padLeft(const std::vector<int64_t>& shape, size_t rank) {
  std::vector<int64_t> out(rank > shape.size() ? rank - shape.size() : 0, 1);
  out.insert(out.end(), shape.begin(), shape.end());
  return out;
}

}  // namespace partita::dnnl_backend
