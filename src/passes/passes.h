// Graph passes, run in order by the compiler (src/passes/pipeline.cpp):
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
// Each pass leaves the graph verified (Graph::verify()).
#pragma once

#include <cstddef>

#include "ir/graph.h"
#include "ir/limits.h"

namespace partita::passes {

struct FoldOptions {
  // Folding is skipped when a node's outputs would exceed this many bytes and are
  // larger than its inputs (e.g. Expand of a scalar to a big tensor).
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
void eliminateDead(ir::Graph& g);

// Compacts the graph: drops dead nodes and unused values, renumbers, and removes
// pool constants no value or attribute refers to.
void compact(ir::Graph& g);

}  // namespace partita::passes
