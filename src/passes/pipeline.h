// The compiler's pass pipeline from an imported graph to one ready to link or run.
#pragma once

#include "ir/graph.h"
#include "ir/limits.h"

namespace partita::passes {

struct PipelineOptions {
  bool fold_constants = true;
  ir::TensorLimits limits;  // the sizes and ranks values may have (TensorLimits)
  // lowerHalfPrecision and lowerIntegerCompute after the first inference (then again inferShapes)
  bool lower_half = true;
  // fuseQuantizedOps first: QDQ patterns become QLinearConv / int8 MaxPool (for a
  // backend with int8 kernels; on the host alone the float computation is faster)
  bool fuse_quantized = false;
};

struct PipelineReport {
  size_t half_nodes_lowered = 0;  // float16/bfloat16 nodes now computing in float32
};

// Shape inference with constant folding, then dead-code elimination, then (lower_half)
// float16/bfloat16 compute lowered to float32 and shapes inferred again; verifies.
PipelineReport optimize(ir::Graph& g, const PipelineOptions& options = {});

}  // namespace partita::passes
