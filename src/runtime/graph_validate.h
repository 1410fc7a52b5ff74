// Load-time validation of a graph the executor is about to run: every host node goes
// through the same check the importer's shape inference does (kernels::inferNode:
// arity against the ONNX schema, attribute ranges such as perm, axes, pads, strides
// and kernel shapes, input types), with the recorded input types and the store's
// constant values, and the result must agree with the types the graph records. So an
// artifact is trusted no more than a model: one validation path for both.
#pragma once

#include <vector>

#include "ir/graph.h"
#include "ir/limits.h"
#include "kernels/op_registry.h"
#include "runtime/const_store.h"

namespace partita::runtime {

// Tensor attributes (e.g. ConstantOfShape's value) read through the store.
class StoreConstants final : public kernels::ConstResolver {
 public:
  explicit StoreConstants(const ConstStore& store) : store_(store) {}
  ir::Tensor constant(ir::ConstId id) const override { return store_.get(id); }

 private:
  const ConstStore& store_;
};

// Validates every host node (skipping `partita.Call` nodes, which their modules check
// at load). Returns, per node, whether its output shapes are known only at run time
// (an input or an output without a static shape, by inference or by record).
// Throws Error(kInvalidArtifact) naming the node and the rule when inference refuses
// the node, or when a recorded type contradicts it (another dtype or rank, or another
// value for a dim both know).
std::vector<bool> validateGraph(const ir::Graph& g, const ConstStore& store, const ir::TensorLimits& limits = {});

}  // namespace partita::runtime
