// Decoding the ops that normalise or reduce along axes: Softmax and LogSoftmax (both
// opsets' axis semantics), LayerNormalization, inference BatchNormalization and the
// Reduce* family.
#include "backend/dnnl/dnnl_decode.h"

#include "backend/dnnl/dnnl_decode_util.h"

namespace partita::dnnl_backend {

using dnnl::algorithm;

std::optional<SoftmaxSpec> decodeSoftmax(const ir::Graph& g, const ir::Node& n, std::string* why) {
  if (!unaryShape(g, n, why)) return std::nullopt;
  SoftmaxSpec s;
  s.log = n.op_type == "LogSoftmax";
  std::vector<int64_t> x = shapeOf(g, n.inputs[0]);
  int64_t rank = int64_t(x.size());
  if (rank == 0) return no(why, "scalar input");
  std::optional<int64_t> axis = normalizedAxis(n.attrs.getInt("axis", n.opset < 13 ? 1 : -1), rank, why);
  if (!axis) return std::nullopt;
  if (n.opset < 13) {
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < rank; ++i) (i < *axis ? outer : inner) *= x[size_t(i)];
    s.dims = {outer, inner};
    s.axis = 1;
  } else {
    s.dims = x;
    s.axis = *axis;
  }
  return s;
}

std::optional<NormSpec> decodeLayerNorm(const ir::Graph& g, const ir::Node& n, std::string* why) {
  if (!onlyFirstOutput(n, why)) return std::nullopt;
  if (!n.hasInput(0) || !n.hasInput(1) || n.inputs.size() > 3) return no(why, "bad inputs");
  if (!isDenseF32(g, n.inputs[0], why, "input") || !isDenseF32(g, n.outputs[0], why, "output"))
    return std::nullopt;
  std::vector<int64_t> x = shapeOf(g, n.inputs[0]);
  int64_t rank = int64_t(x.size());
  std::optional<int64_t> axis = normalizedAxis(n.attrs.getInt("axis", -1), rank, why);
  if (!axis) return std::nullopt;
  if (n.attrs.getInt("stash_type", 1) != 1) return no(why, "stash_type other than float");
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < rank; ++i) (i < *axis ? outer : inner) *= x[size_t(i)];
  for (size_t i = 1; i < n.inputs.size(); ++i) {
    if (!n.hasInput(i)) continue;
    if (!isConstant(g, n.inputs[i]) || !isDenseF32(g, n.inputs[i], why, "scale/bias"))
      return no(why, "scale and bias must be float32 constants");
    if (ir::shapeNumel(shapeOf(g, n.inputs[i])) != inner)
      return no(why, "scale/bias broadcast over the normalized dims");
    if (!constantOf(g, n.inputs[i]).layout.empty()) return no(why, "packed layout");
  }
  NormSpec s;
  s.epsilon = n.attrs.getFloat("epsilon", 1e-5f);
  s.dims = {outer, inner};
  return s;
}

std::optional<NormSpec> decodeBatchNorm(const ir::Graph& g, const ir::Node& n, std::string* why) {
  if (!onlyFirstOutput(n, why) || n.inputs.size() != 5) return no(why, "bad inputs or training outputs");
  if (!isDenseF32(g, n.inputs[0], why, "input") || !isDenseF32(g, n.outputs[0], why, "output"))
    return std::nullopt;
  if (n.attrs.getInt("training_mode", 0) != 0) return no(why, "training mode");
  if (n.opset < 9 && n.attrs.getInt("spatial", 1) != 1) return no(why, "spatial=0");
  std::vector<int64_t> x = shapeOf(g, n.inputs[0]);
  if (x.size() < 2 || x.size() > 5) return no(why, "rank");
  for (size_t i = 1; i < 5; ++i) {
    if (!n.hasInput(i) || !isConstant(g, n.inputs[i]) || !isDenseF32(g, n.inputs[i], why, "parameter"))
      return no(why, "parameters must be float32 constants");
    if (shapeOf(g, n.inputs[i]) != std::vector<int64_t>{x[1]}) return no(why, "parameter shape");
    if (!constantOf(g, n.inputs[i]).layout.empty()) return no(why, "packed layout");
  }
  NormSpec s;
  s.epsilon = n.attrs.getFloat("epsilon", 1e-5f);
  s.dims = x;
  return s;
}

std::optional<ReduceSpec> decodeReduce(const ir::Graph& g, const ir::Node& n, std::string* why) {
  if (!onlyFirstOutput(n, why) || !n.hasInput(0)) return no(why, "bad inputs");
  if (!isDenseF32(g, n.inputs[0], why, "input") || !isDenseF32(g, n.outputs[0], why, "output"))
    return std::nullopt;
  const std::string& op = n.op_type;
  ReduceSpec s;
  if (op == "ReduceMean") s.alg = algorithm::reduction_mean;
  if (op == "ReduceSum") s.alg = algorithm::reduction_sum;
  if (op == "ReduceMax") s.alg = algorithm::reduction_max;
  if (op == "ReduceMin") s.alg = algorithm::reduction_min;
  if (op == "ReduceProd") s.alg = algorithm::reduction_mul;
  if (op == "ReduceL1" || op == "ReduceL2") s.alg = algorithm::reduction_norm_lp_sum;
  if (op == "ReduceSumSquare") s.alg = algorithm::reduction_norm_lp_power_p_sum;
  s.p = op == "ReduceL1" ? 1.0f : 2.0f;
  std::vector<int64_t> x = shapeOf(g, n.inputs[0]);
  const int64_t rank = int64_t(x.size());
  std::vector<int64_t> axes;
  if ((op == "ReduceSum" && n.opset >= 13) || n.opset >= 18) {  // axes as an input
    if (n.hasInput(1)) {
      auto a = constantInts(g, n.inputs[1]);
      if (!a) return no(why, "non-constant axes");
      axes = *a;
    }
    if (axes.empty() && n.attrs.getInt("noop_with_empty_axes", 0) != 0)
      return no(why, "noop_with_empty_axes");
  } else {
    if (n.inputs.size() > 1) return no(why, "bad inputs");
    axes = n.attrs.getInts("axes", {});
  }
  std::vector<bool> reduced(size_t(rank), axes.empty());
  for (int64_t a : axes) {
    std::optional<int64_t> axis = normalizedAxis(a, rank, why);
    if (!axis) return std::nullopt;
    reduced[size_t(*axis)] = true;
  }
  s.src_dims = x.empty() ? std::vector<int64_t>{1} : x;
  s.dst_dims = s.src_dims;
  for (size_t i = 0; i < x.size(); ++i)
    if (reduced[i]) s.dst_dims[i] = 1;
  if (s.src_dims == s.dst_dims) return no(why, "nothing to reduce");
  if (ir::shapeNumel(s.dst_dims) != ir::shapeNumel(shapeOf(g, n.outputs[0]))) return no(why, "output shape");
  return s;
}
}  // namespace partita::dnnl_backend
