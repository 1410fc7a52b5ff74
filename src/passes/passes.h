// Graph passes, run in order by the compiler (src/passes/pipeline.cpp):
//   inferShapes     every value gets a type; nodes whose inputs are all constant are
//                   evaluated with the host kernels and become constants (folding)
//   eliminateDead   nodes and constants that no graph output depends on are dropped
// Each pass leaves the graph verified (Graph::verify()).
#pragma once

#include <cstddef>

#include "ir/graph.h"

namespace partita::passes {

struct FoldOptions {
  // Folding is skipped when a node's outputs would exceed this many bytes and are
  // larger than its inputs (e.g. Expand of a scalar to a big tensor).
  size_t max_growth_bytes = 1 << 20;
};

void inferShapes(ir::Graph& g, const FoldOptions& options = {});
void eliminateDead(ir::Graph& g);

// Compacts the graph: drops dead nodes and unused values, renumbers, and removes
// pool constants no value or attribute refers to.
void compact(ir::Graph& g);

}  // namespace partita::passes
