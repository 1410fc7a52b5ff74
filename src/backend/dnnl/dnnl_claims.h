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
};
OpClass classify(const ir::Node& n);

bool supportsNode(const ir::Graph& g, const ir::Node& n, std::string* why = nullptr);

}  // namespace partita::dnnl_backend
