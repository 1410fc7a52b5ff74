// DnnlModule: the run-time half of the dnnl backend (module kind "dnnl").
//
// Load parses the blob, re-creates every primitive once from its stored parameters
// (where oneDNN on this machine would pick another weight layout than the one recorded
// at compile time, over the recorded layout: the derived weights are used as stored)
// and wraps each constant it declared as a dnnl::memory over the store's bytes: zero
// copy, no reorder. Nothing is executed at load.
//
// The module's assumptions (written by the compiler, see layoutAssumptions) are
// checked first: another oneDNN version or another effective CPU ISA than at compile
// time is Error(kUnsupported) (recompile on/for this machine); another thread count
// is allowed (the recorded layouts are used as stored, maybe on slower code) and
// shown by threadsMismatch(). A module without assumptions loads unchecked.
//
// Thread-safety: run() may be called concurrently. Each concurrent call takes a
// workspace (region-local activations + oneDNN scratchpad + a stream and memory
// objects bound to them) from a pool; workspaces are created on demand and reused.
#pragma once

#include <dnnl.hpp>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "backend/dnnl/dnnl_program.h"
#include "runtime/module.h"

namespace partita::dnnl_backend {

inline constexpr const char* kModuleKind = "dnnl";

// The module kind of this backend's run-time half, for the program's list of kinds.
runtime::ModuleKind dnnlModuleKind();

// The CPU engine every dnnl module of the process uses.
const dnnl::engine& cpuEngine();

class DnnlModule final : public runtime::RuntimeModule {
 public:
  // Throws Error(kInvalidArtifact) for a malformed blob or a constant that is missing,
  // undeclared or laid out differently than the blob says; Error(kUnsupported) when
  // oneDNN here would choose other layouts than at compile time and has no
  // implementation for the recorded ones, or when the module's assumptions name another
  // oneDNN version or CPU ISA than this machine's.
  static std::shared_ptr<DnnlModule> load(const runtime::ModuleLoadContext& ctx);
  ~DnnlModule() override;

  void run(uint32_t fn, const std::vector<ir::Tensor>& inputs,
           const std::vector<ir::Tensor>& outputs) const override;
  // Reports one event per primitive (cat "primitive": kind, implementation, arguments).
  void runProfiled(uint32_t fn, const std::vector<ir::Tensor>& inputs, const std::vector<ir::Tensor>& outputs,
                   runtime::ProfileSink& profile) const override;
  std::string_view kind() const override { return kModuleKind; }
  // Workspace bytes per concurrent run: region-local activations plus scratchpad.
  size_t scratchpadBytes() const override { return arena_bytes_ + scratch_bytes_; }

  // Introspection for tests, `inspect` and reports.
  struct StepInfo {
    StepKind kind;
    std::string label;
    std::string implementation;  // e.g. "brgconv:avx512_core"
    size_t post_ops = 0;
  };
  size_t numFunctions() const { return functions_.size(); }
  std::vector<StepInfo> steps(uint32_t fn) const;
  // (ConstId, data handle of the dnnl::memory that wraps it) for every constant argument.
  std::vector<std::pair<ir::ConstId, const void*>> constantHandles() const;
  size_t workspacesCreated() const;
  // Steps whose primitive was created over the recorded weight layout because oneDNN
  // on this machine (or at this thread count) would have chosen another one.
  size_t fallbackSteps() const { return fallback_steps_; }
  // The thread count the layouts were chosen for (the "threads" assumption; 0 when
  // the module records none) and whether it differs from the count it was loaded with.
  int recordedThreads() const { return recorded_threads_; }
  bool threadsMismatch() const { return threads_mismatch_; }

 private:
  struct LoadedArg {
    int key = 0;
    ArgSource source = ArgSource::kBuffer;
    uint32_t buffer = 0;
    ir::ConstId constant = ir::kNoConst;
    dnnl::memory::desc md;
    dnnl::memory memory;  // constants and embedded data: shared by every workspace
  };
  struct LoadedStep {
    StepKind kind;
    std::string label, implementation;
    size_t post_ops = 0;
    bool recorded_layout_kept = false;  // oneDNN here preferred another layout
    dnnl::primitive primitive;
    std::vector<LoadedArg> args;
    dnnl::memory::desc scratchpad;
  };
  struct LoadedFunction {
    uint32_t num_inputs = 0, num_outputs = 0;
    std::vector<Buffer> buffers;
    std::vector<size_t> offsets;  // temp buffers: offset in the workspace arena
    std::vector<LoadedStep> steps;
  };
  struct Workspace;
  class WorkspaceLease;

  DnnlModule() = default;
  static std::shared_ptr<DnnlModule> loadChecked(const runtime::ModuleLoadContext& ctx);
  std::unique_ptr<Workspace> newWorkspace() const;
  // run(), reporting each primitive to `profile` when it is not null.
  void execute(uint32_t fn, const std::vector<ir::Tensor>& inputs, const std::vector<ir::Tensor>& outputs,
               runtime::ProfileSink* profile) const;
  // The profile args of each step of `fn` (kind, implementation, arguments).
  const std::vector<std::vector<std::pair<std::string, std::string>>>& descriptions(uint32_t fn) const;

  Bytes blob_;  // keeps embedded data alive
  std::vector<LoadedFunction> functions_;
  size_t arena_bytes_ = 0, scratch_bytes_ = 0, fallback_steps_ = 0;
  int recorded_threads_ = 0;
  bool threads_mismatch_ = false;
  mutable std::mutex mutex_;
  mutable std::vector<std::unique_ptr<Workspace>> idle_;
  mutable size_t created_ = 0;
  mutable std::once_flag described_;
  mutable std::vector<std::vector<std::vector<std::pair<std::string, std::string>>>> descriptions_;  // [fn][step]
};

}  // namespace partita::dnnl_backend
