// GraphExecutor: the Executor (executor.h) of kind "graph": runs an ir::Graph whose
// nodes are host ops or calls into external modules, over a ConstStore.
//
// At construction it decides, for every value, where it lives during a run:
// graph inputs are the caller's tensors, constants are store views (zero copy, bound
// once when a state is made, never looked up again during runs),
// statically shaped intermediates get an offset in one arena planned by liveness,
// and values whose shape depends on data are allocated at run time after
// re-running shape inference with the actual inputs.
//
// Models with symbolic dims (exported with dynamic axes): the values whose shapes
// follow from the input shapes are planned once per input-shape signature (the
// inputs' concrete shapes) into a second arena, and the plan is kept in a bounded
// LRU cache (RunOptions::shape_cache). The first run at a new signature runs every
// such step as a dynamic one and records what it made; later runs at that signature
// bind the plan and run without inference or allocation. Calls into
// shape-polymorphic module functions (RuntimeModule::shapePolymorphic) are steps of
// this kind: the module gives their output shapes. Only steps whose output shapes
// depend on data (NonZero, a Reshape to a computed size) stay dynamic on every run.
//
// Thread-safety: a GraphExecutor is immutable after construction and may be shared;
// each concurrent run needs its own RunState (one per Session).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kernels/op_registry.h"
#include "ir/graph.h"
#include "ir/tensor.h"
#include "runtime/const_store.h"
#include "runtime/executor.h"
#include "runtime/memory_plan.h"
#include "runtime/module.h"
#include "runtime/shape_cache.h"

namespace partita::runtime {

// The op that calls into an external module.
inline constexpr const char* kCallDomain = "partita";
inline constexpr const char* kCallOp = "Call";
inline bool isCallNode(const ir::Node& n) { return n.domain == kCallDomain && n.op_type == kCallOp; }

class ControlFlow;  // control_flow.h

class GraphExecutor final : public Executor {
 public:
  static constexpr std::string_view kKind = "graph";

  // Keeps `graph`, `store` and `modules` alive. Nodes are host ops, or `partita.Call`
  // nodes that call function `function` of `modules[module]`. Throws
  // Error(kUnsupported) for an op with no kernel.
  GraphExecutor(std::shared_ptr<const ir::Graph> graph, std::shared_ptr<const ConstStore> store,
                std::vector<std::shared_ptr<const RuntimeModule>> modules = {}, RunOptions options = {});

  ~GraphExecutor() override;

  std::string_view kind() const override { return kKind; }

  const ir::Graph& graph() const { return *graph_; }
  const ConstStore& store() const { return *store_; }
  const std::vector<std::shared_ptr<const RuntimeModule>>& modules() const { return modules_; }
  size_t plannedActivationBytes() const override { return plan_.arena_bytes; }
  size_t unsharedActivationBytes() const { return plan_.unshared_bytes; }
  // The activation arena and each module's scratch as their arenas are mapped
  // (arenaMappedBytes): the private memory a run adds beyond the weights' 5 %
  // (`partita inspect --run`'s budget).
  size_t mappedArenaBytes() const;
  // Steps that infer their outputs at run time (shapes from data, symbolic dims, or
  // types their own inference could not confirm at load).
  size_t dynamicSteps() const;
  // Input-shape signatures with a cached arena plan, and how many were evicted.
  size_t shapePlansCached() const { return plans_.size(); }
  size_t shapePlanEvictions() const { return plans_.evictions(); }

  // The arena plan of one input-shape signature (symbolic dims only).
  struct ShapePlan {
    struct Planned {
      ir::ValueId value = ir::kNoValue;
      ir::DType dtype = ir::DType::kUndefined;
      std::vector<int64_t> shape;
      size_t offset = 0;
    };
    std::vector<bool> step_planned;  // per step: its outputs are planned here (no inference)
    std::vector<Planned> values;
    size_t arena_bytes = 0;
  };

  // Per-run scratch: the arena and value table. Reused across runs of one session.
  struct RunState final : ExecutorState {
    void* arena = nullptr;
    ArenaMemory arena_storage;
    std::vector<ir::Tensor> values;
    std::vector<ir::OwnedTensor> dynamic;  // storage of data-dependent values
    std::vector<ir::AggregatePtr> aggregates;  // the sequences and optionals of this run (boxed in `values`)
    ArenaMemory shape_arena;               // values planned per input-shape signature
    std::shared_ptr<const ShapePlan> plan;  // the plan `values` is bound to, if any
    std::vector<std::unique_ptr<ExecutorState>> flows;  // per step: a control-flow step's state
    std::vector<ir::Tensor> outputs;        // runBody's outputs: views into this state
  };
  std::unique_ptr<RunState> newRunState() const;
  std::unique_ptr<ExecutorState> newState() const override { return newRunState(); }

  // Runs the graph. `inputs` are in graph input order; their dtypes and shapes are
  // checked against the declared types (Error kInvalidArgument names the input).
  // Returns the outputs in graph output order (copied out of the arena).
  // With `profile`: an event for the run (cat "run"), one per step (cat "node" for a
  // host op, "region" for a module call, which reports its own events inside).
  std::vector<ir::OwnedTensor> run(RunState& state, const std::vector<ir::Tensor>& inputs,
                                   ProfileSink* profile = nullptr) const;
  std::vector<ir::OwnedTensor> run(ExecutorState& state, const std::vector<ir::Tensor>& inputs,
                                   ProfileSink* profile = nullptr) const override;
  void runInto(ExecutorState& state, const std::vector<ir::Tensor>& inputs, std::vector<ir::OwnedTensor>& outputs,
               ProfileSink* profile = nullptr) const override;
  void runInto(RunState& state, const std::vector<ir::Tensor>& inputs, std::vector<ir::OwnedTensor>& outputs,
               ProfileSink* profile = nullptr) const;
  std::vector<RunValue> runValues(ExecutorState& state, const std::vector<ir::Tensor>& inputs) const override;

  // Runs the graph as the body of a control-flow step (control_flow.h), on the
  // caller's thread settings: inputs are checked as run() checks them, and the outputs
  // are left where the steps made them (views into `state`, or an input or constant
  // passed through), valid until the state's next run. `targets`, when given, holds
  // per output a buffer to make it in instead of its planned place (used when the
  // output is planned and statically shaped; the caller compares data pointers).
  // With `profile`, an event per step as run() records them (no run event).
  const std::vector<ir::Tensor>& runBody(RunState& state, const std::vector<ir::Tensor>& inputs,
                                         const std::vector<void*>* targets = nullptr,
                                         ProfileSink* profile = nullptr) const;
  // Whether `p` points into memory `state` reuses in its next run (its arenas and its
  // data-dependent values).
  bool owns(const RunState& state, const void* p) const;

 private:
  enum class Placement : uint8_t { kInput, kConstant, kArena, kDynamic, kUnused };
  struct Step {
    const kernels::OpDef* op = nullptr;     // a host op, or
    const RuntimeModule* module = nullptr;  // a call into an external module
    uint32_t function = 0;
    const ControlFlow* flow = nullptr;      // or an If, Loop or Scan, whose subgraphs it runs
    bool dynamic = false;  // shapes known only at run time
    bool values = false;   // a host op reading or making sequences or optionals: op->run_values
    // A call's profile details, made by the first profiled run that reports it (calls only).
    struct CallDetails {
      std::once_flag made;
      std::string ops, nodes;
    };
    std::shared_ptr<CallDetails> call_details;
  };

  std::shared_ptr<const ir::Graph> graph_;
  std::shared_ptr<const ConstStore> store_;
  std::vector<std::shared_ptr<const RuntimeModule>> modules_;
  std::vector<Step> steps_;
  std::vector<std::unique_ptr<ControlFlow>> flows_;
  std::vector<Placement> placement_;
  std::vector<size_t> offset_;  // arena offset per value (kArena)
  std::vector<int32_t> last_use_;  // last step reading each value; graph outputs: steps_.size()

  // Runs step n: for a dynamic step (unless `planned`), infers its outputs from the
  // actual inputs, checks them against the static types and allocates them; then the
  // kernel or module call. `profile` is passed on to a module call (runProfiled).
  void runStep(RunState& state, size_t n, const kernels::ConstResolver& constants, bool planned = false,
               ProfileSink* profile = nullptr) const;
  // runStep within an event of its own, with the step's op, backend and shapes.
  void runStepProfiled(RunState& state, size_t n, const kernels::ConstResolver& constants, bool planned,
                       ProfileSink& profile) const;
  // The first run at an input-shape signature: runs every step and plans the values
  // whose shapes follow from the signature.
  std::shared_ptr<const ShapePlan> discover(RunState& state, const kernels::ConstResolver& constants,
                                            ProfileSink* profile) const;
  void bindPlan(RunState& state, const std::shared_ptr<const ShapePlan>& plan) const;
  // Binds the inputs and the plan of their signature (or discovers it); then runs the steps.
  void execute(RunState& state, const std::vector<ir::Tensor>& inputs, ProfileSink* profile,
               const std::vector<void*>* targets) const;
  void runSteps(RunState& state, const kernels::ConstResolver& constants, const ShapePlan* plan,
                ProfileSink* profile) const;
  // A control-flow step: its outputs go where the plan put them, or are made at run time.
  void runFlow(RunState& state, size_t n, bool planned, ProfileSink* profile) const;
  // A step through its op's value kernel: its outputs are made at run time.
  void runValueStep(RunState& state, size_t n) const;
  // Makes value `out` of step `node` the aggregate `a` (kept by the state for this run).
  void setAggregate(RunState& state, ir::ValueId out, const ir::Node& node, ir::AggregatePtr a) const;
  void collectOutputs(const RunState& state, std::vector<ir::OwnedTensor>& outputs) const;
  MemoryPlan plan_;
  bool any_dynamic_ = false;
  mutable ShapeCache<const ShapePlan> plans_;
};

}  // namespace partita::runtime
