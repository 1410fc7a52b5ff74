// The compiler's pass pipeline from an imported graph to one ready to link or run.
#pragma once

#include "ir/graph.h"

namespace partita::passes {

struct PipelineOptions {
  bool fold_constants = true;
};

// Shape inference with constant folding, then dead-code elimination; verifies.
void optimize(ir::Graph& g, const PipelineOptions& options = {});

}  // namespace partita::passes
