// The steps of the graph executor that run subgraphs: If, Loop and Scan.
//
// Each subgraph is a GraphExecutor of its own over the same ConstStore and modules
// (one weight store), built once with the model: its memory is planned once, not per
// iteration. A node's outer-scope values arrive as its last inputs (ir::Graph::
// captures) and are passed on as the subgraph's last inputs; nothing is looked up by
// name at run time.
//
// - If runs one branch; an output planned in the outer arena with the branch's static
//   shape is made there directly (GraphExecutor::runBody targets), else copied once.
// - Loop and Scan keep two states of their body and alternate between them, so the
//   values one iteration makes are the next one's inputs without a copy; a value that
//   would be overwritten by the iteration reading it (an input passed straight
//   through) is copied first. Shapes may change from one iteration to the next.
// - Loop's scan outputs are gathered per iteration and written once at the end;
//   Scan's outputs are allocated once (their shape is known from the first iteration)
//   and each iteration's element is written in place (made there directly when its
//   axis is the outer one), as are Scan's inputs read in place.
// docs/control_flow.md describes the whole path.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "ir/graph.h"
#include "ir/tensor.h"
#include "runtime/const_store.h"
#include "runtime/executor.h"
#include "runtime/module.h"
#include "runtime/profile.h"

namespace partita::runtime {

// Gives output `o`'s buffer for the dtype and shape the step made: its planned place
// (checked against the shape) or memory allocated for this run; an undefined tensor
// for an omitted output.
using OutputAllocator = std::function<ir::Tensor(size_t o, ir::DType dtype, const std::vector<int64_t>& shape)>;
// Passes on output `o` when it is a sequence or optional (a boxed value, ir/aggregate.h):
// the outer value becomes the same immutable aggregate, shared, not copied.
using AggregateOutput = std::function<void(size_t o, const ir::Tensor& boxed)>;

class ControlFlow {
 public:
  virtual ~ControlFlow() = default;
  virtual std::unique_ptr<ExecutorState> newState() const = 0;
  // Runs the node once. `inputs` are the node's inputs (undefined for an omitted one),
  // its outer-scope values last; `planned` holds per output its planned buffer when
  // the outer graph planned it (else undefined); every tensor output is obtained from
  // `allocate` exactly once, every sequence or optional output given to `pass`. With
  // `profile`, every run of a subgraph is an event (cat "subgraph") below the node's,
  // and the subgraph's steps events below that, with the branch or the iteration in
  // their args.
  virtual void run(ExecutorState& state, const std::vector<ir::Tensor>& inputs,
                   const std::vector<ir::Tensor>& planned, const OutputAllocator& allocate,
                   const AggregateOutput& pass, ProfileSink* profile = nullptr) const = 0;

  // The step for `node` (If, Loop or Scan); its subgraphs stay alive with `graph`.
  static std::unique_ptr<ControlFlow> create(const ir::Node& node, const std::shared_ptr<const ir::Graph>& graph,
                                             const std::shared_ptr<const ConstStore>& store,
                                             const std::vector<std::shared_ptr<const RuntimeModule>>& modules,
                                             const RunOptions& options);
};

}  // namespace partita::runtime
