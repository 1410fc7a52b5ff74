// How the dnnl backend reads ONNX nodes. Each decode function returns nullopt when
// the node (its types, attributes and constant inputs, for its opset) is outside what
// oneDNN computes exactly; `why` (when given) then says what. supportsNode() is the
// backend's claim: a node it accepts is one the lowering can always compile alone.
#pragma once

#include <dnnl.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace partita::dnnl_backend {

enum class OpClass {
  kNone,
  kConv,       // Conv, ConvTranspose
  kPool,       // MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool
  kMatMul,     // MatMul, Gemm
  kEltwise,    // Relu, Sigmoid, Clip, ... (one or more oneDNN eltwise ops)
  kBinary,     // Add, Sub, Mul, Div, Max, Min
  kSoftmax,    // Softmax, LogSoftmax
  kLayerNorm,  // LayerNormalization
  kBatchNorm,  // BatchNormalization (inference)
  kConcat,     // Concat
  kPrelu,      // PRelu
  kView,       // Flatten, Reshape, Squeeze, Unsqueeze, Identity, Dropout: no computation
  kMove,       // Transpose, Slice: a reorder from a strided view
  kReduce,     // ReduceMean, ReduceSum, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2, ReduceSumSquare
};
OpClass classify(const ir::Node& n);

struct EltwiseOp {
  dnnl::algorithm alg;
  float alpha = 0, beta = 0;
};

struct ConvSpec {
  bool transposed = false;
  int64_t groups = 1;
  std::vector<int64_t> in_shape, weight_shape, out_shape;
  std::vector<int64_t> strides, dilates, pad_l, pad_r;  // dilates in oneDNN's convention (ONNX's - 1)
  bool has_bias = false;
};

struct PoolSpec {
  dnnl::algorithm alg;
  std::vector<int64_t> kernel, strides, dilates, pad_l, pad_r;
};

struct MatMulSpec {
  // src [batch.., M, K] x weights [batch.., K, N] -> dst [batch.., M, N], all of one rank.
  std::vector<int64_t> a_dims, b_dims, dst_dims;
  bool trans_a = false, trans_b = false;  // Gemm: operand stored transposed
  float alpha = 1, beta = 1;
  bool is_gemm = false;
};

struct SoftmaxSpec {
  bool log = false;
  std::vector<int64_t> dims;  // the shape softmax sees (opset < 13: coerced to 2-D)
  int64_t axis = 0;
};

struct NormSpec {
  float epsilon = 1e-5f;
  std::vector<int64_t> dims;  // LayerNormalization: {outer, normalized}
};

struct MoveSpec {
  // The source as oneDNN reads it: output dims over the input's bytes (permuted
  // strides for Transpose, an offset window for Slice).
  std::vector<int64_t> dims, strides;
  int64_t offset = 0;  // in elements
};

struct ReduceSpec {
  dnnl::algorithm alg;
  float p = 0;
  std::vector<int64_t> src_dims, dst_dims;  // dst: reduced dims are 1 (keepdims form)
};

bool supportsNode(const ir::Graph& g, const ir::Node& n, std::string* why = nullptr);

std::optional<std::vector<EltwiseOp>> decodeEltwise(const ir::Graph& g, const ir::Node& n, std::string* why);
std::optional<dnnl::algorithm> decodeBinary(const ir::Graph& g, const ir::Node& n, std::string* why);
std::optional<ConvSpec> decodeConv(const ir::Graph& g, const ir::Node& n, std::string* why);
std::optional<PoolSpec> decodePool(const ir::Graph& g, const ir::Node& n, std::string* why);
std::optional<MatMulSpec> decodeMatMul(const ir::Graph& g, const ir::Node& n, std::string* why);
std::optional<SoftmaxSpec> decodeSoftmax(const ir::Graph& g, const ir::Node& n, std::string* why);
std::optional<NormSpec> decodeLayerNorm(const ir::Graph& g, const ir::Node& n, std::string* why);
std::optional<NormSpec> decodeBatchNorm(const ir::Graph& g, const ir::Node& n, std::string* why);
std::optional<int64_t> decodeConcat(const ir::Graph& g, const ir::Node& n, std::string* why);  // the axis
bool decodePrelu(const ir::Graph& g, const ir::Node& n, std::string* why);
bool decodeView(const ir::Graph& g, const ir::Node& n, std::string* why);
std::optional<MoveSpec> decodeMove(const ir::Graph& g, const ir::Node& n, std::string* why);
std::optional<ReduceSpec> decodeReduce(const ir::Graph& g, const ir::Node& n, std::string* why);

// Gelu as PyTorch exports it: y = (x * (1 + Erf(x / sqrt(2)))) * 0.5, every
// intermediate used once (operands of Add and Mul in either order). oneDNN's
// gelu_erf computes it in one eltwise op; Erf alone is not something oneDNN has.
struct GeluMatch {
  ir::NodeId div, erf, add, mul, half;  // in this order
  ir::ValueId x, y;
};
std::optional<GeluMatch> matchGelu(const ir::Graph& g, ir::ValueId x);

// LayerNormalization as exported before opset 17, over the last axis:
//   m = ReduceMean(x); d = x - m; v = ReduceMean(Pow(d, 2)); n = d / Sqrt(v + eps);
//   y = n * gamma + beta
// with every intermediate used only inside the pattern (d by Pow and Div), gamma and
// beta float32 constants of the last dimension's size, eps a constant scalar.
struct LayerNormMatch {
  std::vector<ir::NodeId> nodes;  // the ten nodes, first ReduceMean first
  ir::ValueId x, y, gamma, beta;
  float epsilon;
  int64_t outer, inner;
};
// `mean` is the first ReduceMean.
std::optional<LayerNormMatch> matchLayerNorm(const ir::Graph& g, ir::NodeId mean);

// `shape` with leading 1s up to `rank` (oneDNN broadcasting needs equal ranks).
std::vector<int64_t> padLeft(const std::vector<int64_t>& shape, size_t rank);

}  // namespace partita::dnnl_backend
