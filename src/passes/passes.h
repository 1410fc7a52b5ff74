// Graph passes, run in order by the compiler (src/passes/pipeline.cpp):
//   fuseQuantizedOps  (PipelineOptions::fuse_quantized: the dnnl backend is used) QDQ
//                   Conv and MaxPool patterns become QLinearConv and int8 MaxPool,
//                   before inference folds the weights' DequantizeLinear
//   inferShapes     every value gets a type; nodes whose inputs are all constant are
//                   evaluated with the host kernels and become constants (folding).
//                   A declared type (value_info, graph outputs) is a hint: where
//                   inference knows a dimension it wins over a conflicting declaration
//                   (ONNX Runtime's default, lenient merge); where it does not, the
//                   declaration fills the gap, and the executor checks it when the
//                   value is made at run time. A declared dtype other than the
//                   inferred one is an error naming the value (as in ONNX Runtime).
//   foldReshapeTargets  Reshape targets computed from Shape become constants (then
//                   inferShapes again)
//   eliminateDead   nodes and constants that no graph output depends on are dropped
//   lowerHalfPrecision  (CompileOptions::precision fp32 or bf16) float16/bfloat16
//                   compute becomes float32: every default-domain op whose float type
//                   follows its inputs' (not Cast/CastLike, not ops typed by an
//                   attribute or holding subgraphs) reads and makes float32 instead;
//                   a half constant it reads is converted once into a float32 constant
//                   named "<name>:float16->float32" (the original is dropped when
//                   nothing else reads it), other half inputs get a Cast to float32,
//                   and its outputs a Cast back for readers that still want the half
//                   value. Then Cast pairs fold: Cast(to T) of Cast(to U) of a T
//                   value is that value, for float types T and U (U narrower: the
//                   rounding to U is skipped, since the compute is float32 now). Dead
//                   Casts are dropped; a graph output keeps its name and type.
// Each pass leaves the graph verified (Graph::verify()).
#pragma once

#include <cstddef>

#include "ir/graph.h"
#include "ir/limits.h"

namespace partita::passes {

struct FoldOptions {
  // Folding is skipped when a node's outputs would exceed this many bytes and are
  // larger than its inputs (e.g. Expand of a scalar to a big tensor). Element type
  // conversions (Cast, CastLike, DequantizeLinear: a float16 or int8 weight made
  // float32) fold at any size.
  size_t max_growth_bytes = 1 << 20;
  // Every inferred value must keep these (Error kInvalidModel naming value and node).
  ir::TensorLimits limits;
};

void inferShapes(ir::Graph& g, const FoldOptions& options = {});
// Reshape targets computed from Shape (PyTorch's x.view(b, g, c // g, h, w) with
// symbolic b, h, w) become constants, with the input dims they copy in the attribute
// kernels::kDimsFromInputAttr; at most one entry that is neither a number nor a dim of
// the Reshape's input becomes -1. Returns the Reshapes rewritten; run inferShapes and
// eliminateDead after it (reshape_targets.cpp).
size_t foldReshapeTargets(ir::Graph& g);

struct PrecisionReport {
  size_t nodes_retyped = 0;        // nodes now computing in float32
  size_t constants_converted = 0;  // half constants converted to float32
  uint64_t bytes_before = 0, bytes_after = 0;  // of those constants
  size_t casts_added = 0;   // Casts to float32 of half values made elsewhere
  size_t casts_folded = 0;  // Cast pairs removed
};
PrecisionReport lowerHalfPrecision(ir::Graph& g);

// (CompileOptions::precision fp32 or bf16) MatMulInteger / ConvInteger over constant
// weights whose int32 result is read only by a Cast to float32 (the chain ONNX
// Runtime's dynamic quantizer writes) computes in float32: the weights minus their
// zero point become a float32 constant "<name>:int8->float32", the activations minus
// theirs a DequantizeLinear with scale 1 (exact), and a MatMul / Conv writes the
// Cast's output. Products and sums in float32 instead of int32: a relative error
// around 1e-7 * sqrt(K) instead of none, and the backends' float kernels. Returns
// how many nodes it rewrote.
size_t lowerIntegerCompute(ir::Graph& g);
// (PipelineOptions::fuse_quantized; before the first inference, while the
// DequantizeLinear of each int8 weight is still a node) the QDQ patterns of a static
// int8 model become ONNX's quantized ops: DequantizeLinear(x) -> Conv(DequantizeLinear(
// int8 w, per-channel scale, zero 0), [DequantizeLinear(int32 bias, scale
// x_scale * w_scale)]) -> [Relu] -> QuantizeLinear becomes QLinearConv (a Relu only
// where the output zero point is the type's minimum: the saturation is the Relu), and
// DequantizeLinear -> MaxPool -> QuantizeLinear with the same scale and zero point a
// MaxPool of the quantized values; a Gemm (transB, int8 weights [N, K] per row) in the
// Conv pattern becomes Reshape(x_q, [-1, K, 1, 1]) -> 1x1 QLinearConv -> Reshape, and
// so does a MatMul over int8 weights [K, N] (per column) with an optional bias Add
// (any rank of x: the rows; the weights transposed once). The
// int8 kernels then compute them. Graphs with symbolic input dims are left alone
// (oneDNN's int8 path is for fixed shapes). Returns how many patterns it rewrote
// (quantized_ops.cpp).
size_t fuseQuantizedOps(ir::Graph& g);
void eliminateDead(ir::Graph& g);

// Compacts the graph: drops dead nodes and unused values, renumbers, and removes
// pool constants no value or attribute refers to.
void compact(ir::Graph& g);

}  // namespace partita::passes
