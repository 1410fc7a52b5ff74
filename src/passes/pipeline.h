// The compiler's pass pipeline from an imported graph to one ready to link or run.
#pragma once

#include "ir/graph.h"
#include "ir/limits.h"

namespace partita::passes {

struct PipelineOptions {
  bool fold_constants = true;
  ir::TensorLimits limits;  // the sizes and ranks values may have (TensorLimits)
};

// Shape inference with constant folding, then dead-code elimination; verifies.
void optimize(ir::Graph& g, const PipelineOptions& options = {});

}  // namespace partita::passes
