#include "passes/pipeline.h"

#include "passes/passes.h"

namespace partita::passes {

void optimize(ir::Graph& g, const PipelineOptions& options) {
  g.verify();
  FoldOptions fold;
  if (!options.fold_constants) fold.max_growth_bytes = 0;
  fold.limits = options.limits;
  inferShapes(g, fold);
  eliminateDead(g);
  if (options.lower_half && (lowerHalfPrecision(g).nodes_retyped > 0) + (lowerIntegerCompute(g) > 0)) {
    inferShapes(g, fold);
    eliminateDead(g);
  }
}

}  // namespace partita::passes
