// Small values known before a run: constants, Shape and Size of values whose shape
// is known, and small nodes computed from those (a Reshape's target made of dims, a
// Slice's bounds). The compiler's representative graph and a shape-polymorphic
// region's instance at a run-time shape (the dnnl module) both know them this way.
#pragma once

#include <string>
#include <vector>

#include "ir/tensor.h"
#include "kernels/op_registry.h"

namespace partita::kernels {

// The most elements a value computed this way may have.
inline constexpr int64_t kMaxKnownElements = 4096;

// Whether `node` is an ONNX Shape or Size: it reads its input's shape only.
bool isShapeOf(const ir::Node& node);

// Whether `node` is of an ONNX op that shape computations are made of: Shape, Size,
// and the small integer arithmetic on them (Gather, Unsqueeze, Squeeze, Concat, Slice,
// Cast, Add, Sub, Mul, Div, Mod, Max, Min, Neg, Abs, Floor, Ceil, Identity).
bool isShapeOp(const ir::Node& node);

// `node`'s outputs, when they are known: the node is Shape or Size (ONNX domain) of
// an input whose type is static, or every input it has is known (`in_values[i]`
// non-null), and every output has a static type in `out_types` (the node's inference)
// of at most kMaxKnownElements. Runs the node's host kernel. Empty when the node is
// not known that way or its kernel refuses; an omitted output is an undefined tensor.
std::vector<ir::OwnedTensor> evaluateKnown(const ir::Node& node, const std::vector<ir::TensorType>& in_types,
                                           const std::vector<const ir::Tensor*>& in_values,
                                           const std::vector<ir::TensorType>& out_types,
                                           const ConstResolver* constants);

// Where a node `n` with !from[n] reads a value made by a node `p` with from[p] whose
// contents `known` holds (indexed by value; data set), it reads instead a constant of
// `g` with those contents, one per value, named after it plus `suffix`.
void readKnownAsConstants(ir::Graph& g, const std::vector<bool>& from, const std::vector<ir::Tensor>& known,
                          const std::string& suffix);

}  // namespace partita::kernels
