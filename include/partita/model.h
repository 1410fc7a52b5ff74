// The run-time C++ API: load a compiled model, create sessions, run.
//
//   auto model = partita::Model::load("resnet18.pta");
//   partita::Session session(model);
//   session.setInput("input", image);       // a partita::Tensor (or a view)
//   session.run();
//   const partita::Tensor& logits = session.output("output");
//
// Ownership and threads: a Model is immutable once loaded and is shared (via
// shared_ptr) by any number of Sessions; its weights exist once, in the mapped file.
// A Session holds its own activation memory and must be used by one thread at a
// time; different Sessions of one Model run concurrently.
// Errors: partita::Error (include/partita/error.h) with a code and a message.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "partita/error.h"
#include "partita/tensor.h"

namespace partita {

namespace runtime {
class Executor;
}

struct IoInfo {
  std::string name;
  DType dtype = DType::kUndefined;
  std::vector<int64_t> shape;         // -1 for a dimension not fixed at compile time
  std::vector<std::string> dim_names;  // per dimension: its symbol ("batch"), or "" when fixed or unnamed
};

// Settings of a loaded model's runs. They belong to the model, not the process: two
// models loaded with different thread counts run side by side in one program.
struct LoadOptions {
  // Kernel threads of each run (an OpenMP team per run, >= 1): the calling thread and
  // threads-1 workers. How idle workers wait (spin, or sleep while other processes hold
  // the cores) is in docs/threads.md and threadRuntimeInfo().
  int threads = 2;
  // The ranks and sizes the model's tensors may have: its declared and planned types
  // are checked at load, data-dependent ones and inputs at every run (TensorLimits:
  // 2^40 bytes and rank 16 unless set).
  TensorLimits limits = {};
};

// The OpenMP runtime serving this process's kernel threads (oneDNN's too) and how their
// idle threads wait, e.g. {"libomp.so.5", "adaptive"}: docs/threads.md. The policy is
// "adaptive", "spin" or "block" (PARTITA_THREAD_WAIT), or "runtime default (...)" when
// partita leaves it to the runtime (GNU libgomp, or KMP_BLOCKTIME set).
struct ThreadRuntimeInfo {
  std::string openmp_runtime;
  std::string wait_policy;
};
ThreadRuntimeInfo threadRuntimeInfo();

class Model {
 public:
  // Loads a .pta artifact (maps it read-only; checks header, manifest and module
  // checksums). Throws Error(kIo / kInvalidArtifact), Error(kInvalidArgument) for
  // bad options.
  static std::shared_ptr<const Model> load(const std::string& path, const LoadOptions& options = {});

  const std::vector<IoInfo>& inputs() const { return inputs_; }
  const std::vector<IoInfo>& outputs() const { return outputs_; }
  // Bytes of the activation arena each Session allocates (planned by liveness).
  size_t plannedActivationBytes() const;
  int threads() const;
  // The executor that runs the model's program (runtime/executor.h; internal API).
  const runtime::Executor& executor() const { return *executor_; }

  // For the compiler and the loader: wraps a ready executor.
  explicit Model(std::shared_ptr<const runtime::Executor> executor);

 private:
  std::shared_ptr<const runtime::Executor> executor_;
  std::vector<IoInfo> inputs_, outputs_;
};

class Session {
 public:
  explicit Session(std::shared_ptr<const Model> model);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const Model& model() const { return *model_; }

  // Binds an input by name. The view variant does not copy: the bytes must stay
  // valid until run() returns. Throws Error(kInvalidArgument) for an unknown name
  // or a wrong dtype or shape.
  void setInput(const std::string& name, const Tensor& tensor);
  void setInput(const std::string& name, const TensorView& view);

  // Runs the model. Throws Error(kInvalidArgument) when an input is missing.
  void run();

  const Tensor& output(const std::string& name) const;
  const std::vector<Tensor>& outputs() const { return outputs_; }

 private:
  struct State;
  std::shared_ptr<const Model> model_;
  std::unique_ptr<State> state_;
  std::vector<TensorView> inputs_;
  std::vector<bool> bound_;
  std::vector<Tensor> outputs_;
};

}  // namespace partita
