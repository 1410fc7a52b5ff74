// The dnnl backend's claim (ONNX Runtime's GetCapability): which op family a node
// belongs to, and whether oneDNN computes it exactly with the types, attributes and
// constant inputs it has in the graph. A node the claim accepts is one the lowering can
// always compile alone, in any region.
#pragma once

#include <string>

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
  kResample,   // Resize, Upsample (nearest and linear, where oneDNN's resampling is exact)
  kReduce,     // ReduceMean, ReduceSum, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2, ReduceSumSquare
  kRecurrent,  // LSTM, GRU, RNN (one direction, default activations)
  kQConv,      // QLinearConv (oneDNN's int8 convolution)
  kQMatMul,    // QLinearMatMul, MatMulInteger over constant int8 weights (oneDNN's int8 matmul)
  kDynamicQuantize,  // DynamicQuantizeLinear with its DequantizeLinear(y, 1, zero point)
};
OpClass classify(const ir::Node& n);

bool supportsNode(const ir::Graph& g, const ir::Node& n, std::string* why = nullptr);

// A node some of whose values have symbolic dims (ranks known): the claim at the
// representative shape (`rep`, same ids) and what must hold whatever sizes the
// symbolic dims take: a MatMul's second operand fixed, no tensor attributes (the
// run-time half stores the region as a graph). A node the claim takes here may still
// meet a shape at run time that oneDNN cannot compute (e.g. two run-time operands
// that broadcast against each other): the module then says so
// (docs/dynamic_shapes.md).
bool supportsPolymorphicNode(const ir::Graph& g, const ir::Graph& rep, ir::NodeId node, std::string* why = nullptr);

}  // namespace partita::dnnl_backend
