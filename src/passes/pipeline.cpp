#include "passes/pipeline.h"

#include "passes/passes.h"

namespace partita::passes {

PipelineReport optimize(ir::Graph& g, const PipelineOptions& options) {
  PipelineReport report;
  g.verify();
  if (options.fuse_quantized) fuseQuantizedOps(g);
  FoldOptions fold;
  if (!options.fold_constants) fold.max_growth_bytes = 0;
  fold.limits = options.limits;
  inferShapes(g, fold);
  // Each round's better-known shapes may let the next fold more (a -1 that becomes a
  // number makes the Shape of the Reshape's output known).
  for (int round = 0; round < 64 && foldReshapeTargets(g) > 0; ++round) inferShapes(g, fold);
  eliminateDead(g);
  if (options.lower_half) {
    report.half_nodes_lowered = lowerHalfPrecision(g).nodes_retyped;
    if ((report.half_nodes_lowered > 0) + (lowerIntegerCompute(g) > 0)) {
      inferShapes(g, fold);
      eliminateDead(g);
    }
  }
  return report;
}

}  // namespace partita::passes
