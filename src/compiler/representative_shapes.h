// The representative shape of a model with symbolic dims (docs/dynamic_shapes.md):
// the one concrete shape shape-polymorphic regions are compiled for. Backends choose
// their weight layouts (and claim nodes) at it; at run time every other shape reuses
// those layouts.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace partita::backend {

// The value a symbolic dim of a graph input takes when no hint gives it: dim 0 (the
// batch of nearly every model) 1, any other dim 224 (an image side).
inline constexpr int64_t kRepresentativeBatch = 1;
inline constexpr int64_t kRepresentativeSize = 224;

// Whether some value of `g` has a dim that is not known (a symbol or unknown).
bool hasSymbolicDims(const ir::Graph& g);

// `g` with each graph input's symbolic dims set -- from `hints` (input name -> full
// shape, which must agree with the input's known dims), else a dim named by an
// earlier input takes the value it took there, else kRepresentativeBatch /
// kRepresentativeSize -- and every node's output types inferred again from those (no
// folding: the same node and value ids). A value inference cannot size at that shape
// (shapes from data) keeps its symbolic type. Throws Error(kInvalidArgument) for a
// hint naming no input or contradicting its type.
ir::Graph representativeGraph(const ir::Graph& g, const std::map<std::string, std::vector<int64_t>>& hints);

}  // namespace partita::backend
