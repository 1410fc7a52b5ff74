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
#include "partita/profile.h"
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
  // Empty for a tensor; else what the value is, e.g. "a sequence of float32 tensors" or
  // "an optional float32 tensor" (then dtype and shape describe its elements). Session
  // takes and returns tensors only: a model with such an input or output is refused
  // by name when it runs.
  std::string non_tensor;
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
  // Models compiled with symbolic dims (docs/dynamic_shapes.md): how many distinct
  // input shapes each module function and the executor keep compiled and planned (an
  // LRU cache each). 0: the environment variable PARTITA_SHAPE_CACHE, else 8.
  size_t shape_cache = 0;
  // The most iterations one Loop may run in a run; past it the run fails naming the
  // Loop (a model whose loop would never end). 0: the environment variable
  // PARTITA_MAX_LOOP_ITERATIONS, else 2^20.
  uint64_t max_loop_iterations = 0;
};

// The OpenMP runtime serving this process's kernel threads (oneDNN's too) and how their
// idle threads wait, e.g. {"libomp.so.5", "adaptive"}: docs/threads.md. The policy is
// "adaptive", "spin" or "block" (PARTITA_THREAD_WAIT), or "runtime default (...)" when
// partita leaves it to the runtime (GNU libgomp, or KMP_BLOCKTIME set).
struct ThreadRuntimeInfo {
  std::string openmp_runtime;
  std::string wait_policy;
  // The runtime oneDNN's OpenMP calls go to ("" when libdnnl is not loaded or not known).
  // Another than openmp_runtime when libdnnl was loaded first by something bound to
  // GCC's libgomp (in Python: torch imported before partita): two thread pools, and
  // oneDNN's team follows libgomp's settings (docs/threads.md).
  std::string dnnl_openmp_runtime;
};
ThreadRuntimeInfo threadRuntimeInfo();

class Model {
 public:
  // Loads a .pta artifact (maps it read-only; checks header, manifest and module
  // checksums). Throws Error(kIo / kInvalidArtifact), Error(kInvalidArgument) for
  // bad options.
  static std::shared_ptr<const Model> load(const std::string& path, const LoadOptions& options = {});
  // The same for an artifact's bytes already in memory (`name` stands for the file in
  // messages). The bytes are copied once, into page-aligned memory the model owns; the
  // caller's buffer is not used after this returns.
  static std::shared_ptr<const Model> loadBytes(const void* data, size_t size, const std::string& name,
                                                const LoadOptions& options = {});

  const std::vector<IoInfo>& inputs() const { return inputs_; }
  const std::vector<IoInfo>& outputs() const { return outputs_; }
  // Bytes of the activation arena each Session allocates (planned by liveness).
  size_t plannedActivationBytes() const;
  int threads() const;
  // The external backends whose modules the model calls ("dnnl", "ewise"), each once,
  // in the order of its module table; the host, which runs every other node, is
  // implicit and not listed.
  const std::vector<std::string>& backends() const { return backends_; }
  // The executor that runs the model's program (runtime/executor.h; internal API).
  const runtime::Executor& executor() const { return *executor_; }

  // For the compiler and the loader: wraps a ready executor.
  // `module_kinds`: the kinds of the external modules it calls, in module order.
  explicit Model(std::shared_ptr<const runtime::Executor> executor, const std::vector<std::string>& module_kinds = {});

 private:
  std::shared_ptr<const runtime::Executor> executor_;
  std::vector<IoInfo> inputs_, outputs_;
  std::vector<std::string> backends_;
};

// Whether `data` begins with the signature every .pta file starts with (its first 8
// bytes): tells an artifact from an ONNX model without parsing either.
bool hasArtifactSignature(const void* data, size_t size);

class Session {
 public:
  explicit Session(std::shared_ptr<const Model> model);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const Model& model() const { return *model_; }

  // Binds an input by name. Neither variant copies: the tensor (or the view's bytes)
  // must stay valid until run() returns, so a temporary Tensor does not compile.
  // Throws Error(kInvalidArgument) for an unknown name or a wrong dtype or shape.
  void setInput(const std::string& name, const Tensor& tensor);
  void setInput(const std::string& name, Tensor&& tensor) = delete;
  void setInput(const std::string& name, const TensorView& view);

  // Forgets every bound input (a view's bytes are not read after this).
  void clearInputs();

  // Runs the model. Throws Error(kInvalidArgument) when an input is missing.
  void run();

  // The last run's outputs. The next run() writes its outputs into these tensors
  // where dtype and shape agree (steady runs allocate nothing for them), so a
  // reference kept across runs sees the new values; takeOutputs() to keep them.
  const Tensor& output(const std::string& name) const;
  const std::vector<Tensor>& outputs() const { return outputs_; }
  // Hands the last run's outputs over (in output order) without copying them; until
  // the next run, output() then says there is nothing to read.
  std::vector<Tensor> takeOutputs();

  // Profiling (partita/profile.h, docs/profiling.md). Off by default. While on, each
  // run() appends its events (the run, each step, what modules report inside a step)
  // to profileEvents(); writeTrace() and profileSummary() read them. While off, a run
  // records nothing and allocates nothing for it. Turning it off keeps the events
  // recorded so far; clearProfile() drops them.
  void enableProfiling(bool on = true);
  bool profiling() const;
  const std::vector<ProfileEvent>& profileEvents() const;
  void clearProfile();

 private:
  struct State;
  std::shared_ptr<const Model> model_;
  std::unique_ptr<State> state_;
  std::vector<TensorView> inputs_;
  std::vector<bool> bound_;
  std::vector<Tensor> outputs_;
};

}  // namespace partita
