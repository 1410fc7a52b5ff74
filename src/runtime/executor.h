// Executor: what runs a model's program over the shared weight store. Model and
// Session (include/partita/model.h) talk to this interface only; the graph executor
// (graph_executor.h) is its first implementation, and an artifact names the kind of
// executor its program needs (docs/format.md), so a control-flow executor can be
// added beside it without touching Model or Session.
//
// Thread-safety: an Executor is immutable after construction and shared by every
// session of its model; each concurrent run needs its own ExecutorState.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ir/aggregate.h"
#include "ir/limits.h"
#include "ir/tensor.h"
#include "ir/type.h"
#include "runtime/profile.h"

namespace partita::runtime {

// Settings of one model's runs, fixed when the model is loaded (no process globals:
// two models in one process may run at different thread counts).
struct RunOptions {
  int threads = 2;  // kernel threads (the OpenMP team of each run), 1 .. kMaxThreads
  ir::TensorLimits limits = {};  // ranks and sizes of inputs and values (TensorLimits)
  // Models with symbolic dims: how many input shapes the executor keeps an arena plan
  // for, and each shape-polymorphic module its compiled form (0: shapeCacheEntries's
  // default, module.h).
  size_t shape_cache = 0;
  // The most iterations a Loop may run in one run, past which the run fails naming the
  // Loop (a hostile or broken model's endless loop: M omitted and a condition that
  // stays true). 0: loopIterationLimit's default.
  uint64_t max_loop_iterations = 0;
};
inline constexpr int kMaxThreads = 1024;
inline constexpr uint64_t kDefaultMaxLoopIterations = uint64_t(1) << 20;
// `requested` when it is not 0, else the environment variable
// PARTITA_MAX_LOOP_ITERATIONS (a number from 1 to 2^62), else kDefaultMaxLoopIterations.
uint64_t loopIterationLimit(uint64_t requested);

// Throws Error(kInvalidArgument) unless 1 <= threads <= kMaxThreads: the one check for
// every place a thread count comes in (load, compile, an executor).
void checkThreads(int threads);

// A graph input or output: its name and declared type (dims may be symbolic).
struct IoSpec {
  std::string name;
  ir::TensorType type;
};

// A program's output when it may be a sequence or optional (ir/aggregate.h).
struct RunValue {
  ir::OwnedTensor tensor;      // a tensor output
  ir::AggregatePtr aggregate;  // a sequence or optional output (then `tensor` is empty)
};

// Per-run scratch of one executor (activation arena, value table); reused across
// the runs of one session.
class ExecutorState {
 public:
  virtual ~ExecutorState() = default;
};

class Executor {
 public:
  virtual ~Executor() = default;

  // The executor kind an artifact names, e.g. "graph".
  virtual std::string_view kind() const = 0;
  const std::vector<IoSpec>& inputs() const { return inputs_; }
  const std::vector<IoSpec>& outputs() const { return outputs_; }
  const RunOptions& options() const { return options_; }

  virtual std::unique_ptr<ExecutorState> newState() const = 0;
  // Runs the program. `inputs` are in input order and are checked against the declared
  // types (Error kInvalidArgument names the input). Returns the outputs in order.
  // With a `profile` sink the run records its events there (runtime/profile.h);
  // without, it records nothing.
  virtual std::vector<ir::OwnedTensor> run(ExecutorState& state, const std::vector<ir::Tensor>& inputs,
                                           ProfileSink* profile = nullptr) const = 0;
  // As run(), into `outputs`: where it already holds a tensor of an output's dtype and
  // shape (the last run's), the output is copied into it, so that a session's steady
  // runs allocate (and page-fault) nothing for their outputs; other entries are
  // replaced. Here: run()'s result assigned.
  virtual void runInto(ExecutorState& state, const std::vector<ir::Tensor>& inputs,
                       std::vector<ir::OwnedTensor>& outputs, ProfileSink* profile = nullptr) const;
  // Runs a program whose inputs or outputs may be sequences or optionals: an input of
  // such a kind is given boxed (ir::box; the caller keeps the aggregate alive), and
  // such an output comes back as its aggregate. run() refuses those outputs by name.
  virtual std::vector<RunValue> runValues(ExecutorState& state, const std::vector<ir::Tensor>& inputs) const;
  // Bytes of activation memory each state plans ahead (by liveness).
  virtual size_t plannedActivationBytes() const = 0;

  // Checks one input against the declared type of input `index` and the limits;
  // throws Error(kInvalidArgument) naming it.
  void checkInput(size_t index, const ir::Tensor& t) const;

 protected:
  Executor(std::vector<IoSpec> inputs, std::vector<IoSpec> outputs, RunOptions options);

 private:
  std::vector<IoSpec> inputs_, outputs_;
  RunOptions options_;
};

}  // namespace partita::runtime
