// How the dnnl backend reads single ONNX nodes into oneDNN terms. Each decode
// function returns nullopt when the node (its types, attributes and constant inputs,
// for its opset) is outside what oneDNN computes exactly; `why` (when given) then says
// what. The claim (dnnl_claims.h) accepts a node when its decoder does; the lowering
// decodes it again to compile it. Implemented by family in dnnl_decode_*.cpp.
#pragma once

#include <dnnl.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "kernels/nn_recurrent.h"

namespace partita::dnnl_backend {

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
  // Output dim i reads input dim axes[i] from starts[i] on (Transpose: a permutation
  // from 0; Slice: the identity from the window's start), so the source is a strided
  // view of the input's bytes in whatever non-blocked layout they are.
  std::vector<int64_t> dims, axes, starts;
};

struct ResampleSpec {
  dnnl::algorithm alg;  // resampling_nearest or resampling_linear
  std::vector<int64_t> src_dims, dst_dims;
};

struct ReduceSpec {
  dnnl::algorithm alg;
  float p = 0;
  std::vector<int64_t> src_dims, dst_dims;  // dst: reduced dims are 1 (keepdims form)
};

// LSTM, GRU, RNN on oneDNN's RNN primitive (one layer, one direction).
struct RnnSpec {
  kernels::RecurrentKind kind = kernels::RecurrentKind::kLstm;
  dnnl::algorithm cell = dnnl::algorithm::vanilla_lstm;  // vanilla_rnn, vanilla_lstm, vanilla_gru, lbr_gru
  dnnl::algorithm activation = dnnl::algorithm::eltwise_tanh;  // vanilla_rnn's f
  dnnl::rnn_direction direction = dnnl::rnn_direction::unidirectional_left2right;
  int64_t directions = 1;  // 2: bidirectional_concat (oneDNN's rows hold both directions)
  int64_t layout = 0;  // ONNX's: 1 puts the batch first (oneDNN's ntc)
  int64_t seq = 0, batch = 0, input = 0, hidden = 0;
  int64_t gates = 1;       // oneDNN's gates per cell: RNN 1, GRU 3, LSTM 4
  int64_t bias_gates = 1;  // lbr_gru: 4 (the candidate's recurrent bias apart)
};

// QLinearConv on oneDNN's int8 convolution: u8/s8 source with a zero point, s8
// weights (zero point 0) with one scale or one per output channel, int32 bias, u8/s8
// destination with a zero point. output_scales = x_scale * w_scale[c] / y_scale.
struct QConvSpec {
  ConvSpec conv;
  dnnl::memory::data_type src_type, dst_type;
  int32_t src_zero_point = 0, dst_zero_point = 0;
  float x_scale = 1, y_scale = 1;
  std::vector<float> w_scales;  // one, or one per output channel
  ir::ValueId weights = ir::kNoValue, bias = ir::kNoValue;
};

// QLinearMatMul and MatMulInteger over constant int8 weights on oneDNN's int8 matmul:
// a [.., M, K] (its rows one GEMM) times b [K, N] (s8, zero point 0), or a QLinearConv
// that is a matrix product (weights stored [N, K, 1, 1]). QLinearMatMul: output scales
// a_scale * b_scale[n] / y_scale, u8/s8 output with a zero point; MatMulInteger:
// int32 output, no scales.
struct QMatMulSpec {
  int64_t rows = 0, k = 0, n = 0;
  dnnl::memory::data_type src_type, dst_type;
  int32_t src_zero_point = 0, dst_zero_point = 0;
  std::vector<float> output_scales;  // empty, one, or one per column
  ir::ValueId weights = ir::kNoValue, bias = ir::kNoValue;
  bool weights_nk = false;  // stored [N, K] (a QLinearConv's), else [K, N]
};

// A standalone QuantizeLinear (float32 -> u8/s8) or DequantizeLinear (u8/s8 ->
// float32) of a computed value, per tensor with constant scale and zero point: one
// reorder with an output scale and a zero point.
struct QuantizeSpec {
  bool quantize = true;
  float scale = 1;  // what the reorder multiplies by: 1 / y_scale, or x_scale
  int32_t zero_point = 0;
  dnnl::memory::data_type int_type;
};

// QuantizeLinear: the ops of its quantize-dequantize pair (dnnl_patterns.h), which
// computes the DequantizeLinear too.
std::optional<std::vector<EltwiseOp>> decodeEltwise(const ir::Graph& g, const ir::Node& n, std::string* why);
std::optional<dnnl::algorithm> decodeBinary(const ir::Graph& g, const ir::Node& n, std::string* why);
std::optional<ConvSpec> decodeConv(const ir::Graph& g, const ir::Node& n, std::string* why);
// The window of a (Q)Conv over input `x`, constant `weights` and `bias` (or kNoValue),
// output 0; types are the caller's to check.
std::optional<ConvSpec> decodeConvWindow(const ir::Graph& g, const ir::Node& n, ir::ValueId x, ir::ValueId weights,
                                         ir::ValueId bias, std::string* why);
// DynamicQuantizeLinear(x) whose quantized output and zero point are read only by one
// DequantizeLinear(y, 1, zero point) (passes::lowerIntegerCompute writes it before a
// float MatMul/Conv): together, x's integers centred on the zero point,
// clip(round(x / scale), -zero, 255 - zero), and the scale.
struct DynamicQuantizeMatch {
  ir::NodeId dynamic_quantize = ir::kNoNode, dequantize = ir::kNoNode;
};
std::optional<DynamicQuantizeMatch> matchDynamicQuantize(const ir::Graph& g, ir::NodeId node, std::string* why);
std::optional<QConvSpec> decodeQLinearConv(const ir::Graph& g, const ir::Node& n, std::string* why);
// QLinearMatMul or MatMulInteger.
std::optional<QMatMulSpec> decodeQMatMul(const ir::Graph& g, const ir::Node& n, std::string* why);
// A QLinearConv that is a matrix product (1x1 kernel over a 1x1 image, one group, no
// padding: a quantized Gemm as passes::fuseQuantizedOps writes it), as one.
std::optional<QMatMulSpec> asMatrixProduct(const QConvSpec& q);
std::optional<QuantizeSpec> decodeQuantize(const ir::Graph& g, const ir::Node& n, std::string* why);
std::optional<PoolSpec> decodePool(const ir::Graph& g, const ir::Node& n, std::string* why);
std::optional<MatMulSpec> decodeMatMul(const ir::Graph& g, const ir::Node& n, std::string* why);
std::optional<SoftmaxSpec> decodeSoftmax(const ir::Graph& g, const ir::Node& n, std::string* why);
std::optional<NormSpec> decodeLayerNorm(const ir::Graph& g, const ir::Node& n, std::string* why);
std::optional<NormSpec> decodeBatchNorm(const ir::Graph& g, const ir::Node& n, std::string* why);
std::optional<int64_t> decodeConcat(const ir::Graph& g, const ir::Node& n, std::string* why);  // the axis
bool decodePrelu(const ir::Graph& g, const ir::Node& n, std::string* why);
bool decodeView(const ir::Graph& g, const ir::Node& n, std::string* why);
std::optional<MoveSpec> decodeMove(const ir::Graph& g, const ir::Node& n, std::string* why);
std::optional<ResampleSpec> decodeResize(const ir::Graph& g, const ir::Node& n, std::string* why);
std::optional<ReduceSpec> decodeReduce(const ir::Graph& g, const ir::Node& n, std::string* why);
std::optional<RnnSpec> decodeRecurrent(const ir::Graph& g, const ir::Node& n, std::string* why);

// `shape` with leading 1s up to `rank` (oneDNN broadcasting needs equal ranks).
std::vector<int64_t> padLeft(const std::vector<int64_t>& shape, size_t rank);

}  // namespace partita::dnnl_backend
