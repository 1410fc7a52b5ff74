// If, Loop and Scan: the layout of their inputs, outputs and subgraphs, and their
// inference (registered like every other op: registerControlFlowOps). They have no
// kernel in the op table: the executor runs their subgraphs (runtime/control_flow.h),
// and the compiler infers the subgraphs' types (passes/infer_shapes.cpp) before this
// inference reads them. docs/control_flow.md describes the whole path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/type.h"

namespace partita::kernels {

// Whether a value of type `value` may be where `slot` is expected: the same kind, or
// `slot` an optional of `value`'s kind (an optional sequence takes a sequence).
bool kindsFit(const ir::TensorType& slot, const ir::TensorType& value);

// The most specific type both `a` and `b` are (same dtype and fitting kinds assumed):
// equal dims kept, the others unknown; a rank mismatch gives an unranked type; an
// optional and what it holds give the optional.
ir::TensorType mergeTypes(const ir::TensorType& a, const ir::TensorType& b);

// Where a Loop's values are: node inputs M, cond, v_initial[N] (+ captures); body
// inputs iter, cond, v[N] (+ captures); body outputs cond, v[N], scan[K]; node outputs
// v_final[N], scan[K].
struct LoopLayout {
  const ir::Graph* body = nullptr;
  size_t num_carried = 0;  // N
  size_t num_scan = 0;     // K
};
// Throws Error(kInvalidModel) naming the node when the counts do not fit together.
LoopLayout loopLayout(const ir::Node& node);

// Where a Scan's values are. Opset 9+: node inputs state[N], scan[M]; opset 8 first
// takes sequence_lens (optional) and every value has a batch dimension 0 (the scan
// axis is then 1). Body inputs state[N], scan element[M]; body outputs state[N],
// scan element[K]; node outputs state[N], scan[K].
struct ScanLayout {
  const ir::Graph* body = nullptr;
  bool batched = false;      // opset 8
  size_t first_state = 0;    // index of the first state input (1 for opset 8)
  size_t num_states = 0;     // N
  size_t num_scan_inputs = 0;   // M
  size_t num_scan_outputs = 0;  // K
  // Per scan input / output: the axis (not yet normalized) and whether it runs in reverse.
  std::vector<int64_t> input_axes, output_axes;
  std::vector<bool> input_reverse, output_reverse;
};
ScanLayout scanLayout(const ir::Node& node);

// Checks that the outer values node input `first_capture + k` and the subgraph's
// capture input k have the same dtype (Error kInvalidModel naming node and value).
void checkCaptures(const ir::Node& node, const std::vector<ir::TensorType>& inputs, const ir::Graph& sub,
                   const std::string& attr);

}  // namespace partita::kernels
