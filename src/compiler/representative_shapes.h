// The representative shape of a model with symbolic dims (docs/dynamic_shapes.md):
// the one concrete shape shape-polymorphic regions are compiled for. Backends choose
// their weight layouts (and claim nodes) at it; at run time every other shape reuses
// those layouts.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace partita::backend {

// The value a symbolic dim of a graph input takes when no hint gives it: dim 0 (the
// batch of nearly every model) 1, any other dim 224 (an image side).
inline constexpr int64_t kRepresentativeBatch = 1;
inline constexpr int64_t kRepresentativeSize = 224;
// When some node's inference refuses sides of 224 (a window longer than that), the
// sides double until one refuses fewer, up to this.
inline constexpr int64_t kMaxRepresentativeSize = 224 * 128;
// Nor past this many elements in a graph input, and no probe shape (probeShapes) past
// it either, unless the representative shape already is: compiling at a shape costs
// time with its size (oneDNN 2.6 makes a 1x1 convolution over 200 M positions in 0.4
// s, and a region's lowering makes dozens), and a model that some node refuses at
// every smaller size (a TopK of a billion elements) would else be compiled at sides of
// 28672 (fuzz/findings/onnx: a compile that ran for minutes).
inline constexpr int64_t kMaxRepresentativeElements = int64_t(1) << 24;

// Whether some value of `g` has a dim that is not known (a symbol or unknown).
bool hasSymbolicDims(const ir::Graph& g);

// `g` with each graph input's symbolic dims set -- from `hints` (input name -> full
// shape, which must agree with the input's known dims), else a dim named by an
// earlier input takes the value it took there, else kRepresentativeBatch /
// kRepresentativeSize, doubled while that lets fewer nodes refuse the shape (and no graph
// input passes kMaxRepresentativeElements) -- and every node's output types inferred again from those (no
// folding: the same node and value ids), with the contents known at that shape: those
// of constants and of small values computed from them and from Shape and Size (a
// Reshape's target made of its input's dims); where a node other than a shape
// computation reads such a value, `rep` gives it a constant with its contents at that
// shape in its place (so a backend's claim sees the target it will lower with). A
// value inference cannot size at that
// shape (shapes from data) keeps its symbolic type. Throws Error(kInvalidArgument) for
// a hint naming no input or contradicting its type.
ir::Graph representativeGraph(const ir::Graph& g, const std::map<std::string, std::vector<int64_t>>& hints);

// Per node of `g`: whether it is a *shape computation* (Backend::evaluatesShapeValues):
// Shape or Size of a value with a known rank, or a small node (Gather, Unsqueeze,
// Squeeze, Concat, Slice, Cast, arithmetic; every output static with at most 64
// elements) whose every input is a constant or made by a shape computation.
std::vector<bool> shapeComputations(const ir::Graph& g);

// The shape computations (`shape`: shapeComputations(g)) node `n` reads through its
// inputs, back to Shape and Size and the constants, in graph order; nullopt when they
// are more than kMaxShapeClosure nodes (a model that long is not given to a backend
// region that way: the node stays on the host with them, and no copies are made).
inline constexpr size_t kMaxShapeClosure = 256;
std::optional<std::vector<ir::NodeId>> shapeClosure(const ir::Graph& g, const std::vector<bool>& shape,
                                                    ir::NodeId n);

// Gives every node that reads a value made by shape computations, when those are
// shared with another reader (or a graph output), its own copies of them (the nodes
// its inputs are computed by, back to Shape and the constants), placed right before
// it, so that a backend region can take a node with the computations it reads. Shape
// computations no one reads any more are dropped. At most max(nodes, 4096) nodes are
// copied in all (a hostile model cannot make it quadratic); readers past that keep
// sharing. Returns how many nodes got copies.
size_t privatizeShapeComputations(ir::Graph& g);

// Other shapes of the inputs, for backends to check the choices they make at the
// representative one against (oneDNN's weight layouts: a layout its fast kernels
// take at one size they may refuse at another). Derived from the representative
// graph `rep` of `g`: each symbolic side scaled (x0.57; x1.43 and x1.07; odd x0.43+1
// and x0.58+1; x2.14 and x2.86, cycling over the sides of an input), and dim 0 at 8
// with the sides as they are. Each is a set of hints for representativeGraph.
std::vector<std::map<std::string, std::vector<int64_t>>> probeShapes(const ir::Graph& g, const ir::Graph& rep);

}  // namespace partita::backend
