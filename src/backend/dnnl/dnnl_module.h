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
//
// Shape-polymorphic functions (PolyFunction): load creates the primitives of the
// stored steps, those of the representative input shapes, as for any function. The
// first call at another input shape lowers the region again for it (dnnl_replay.h:
// the weights as stored, never repacked) and creates its primitives; the result -- an
// instance, with its own buffer plan and workspaces -- is kept in a bounded LRU cache
// (ModuleLoadContext::shape_cache entries per function). A call at a cached shape finds
// its instance and workspace without allocating.
#pragma once

#include <array>
#include <atomic>
#include <dnnl.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backend/dnnl/dnnl_kernels.h"
#include "backend/dnnl/dnnl_program.h"
#include "runtime/module.h"
#include "runtime/shape_cache.h"

namespace partita::dnnl_backend {

inline constexpr const char* kModuleKind = "dnnl";
// A function run on a team gives each of its buffers bytes of its own when they add up
// to at most this (loadFunction says why).
inline constexpr size_t kPrivateBuffersBytes = size_t(16) << 20;

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
  // Workspace bytes per concurrent run: region-local activations plus scratchpad
  // (shape-polymorphic functions: at their representative shapes).
  size_t scratchpadBytes() const override;
  // The region temporaries' part of it (functions of fixed shapes).
  size_t arenaBytes() const { return arena_bytes_; }
  bool shapePolymorphic(uint32_t fn) const override;
  // Lowers the function for these shapes on first use (an instance, then cached).
  std::vector<std::vector<int64_t>> outputShapes(uint32_t fn, const std::vector<ir::Tensor>& inputs) const override;

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
  // Shape-polymorphic functions: the input shapes their stored steps are for, the
  // instances made for other shapes so far, cached now, and evicted.
  std::vector<std::vector<int64_t>> representativeShapes(uint32_t fn) const;
  // One-thread primitives made so far for runs on a team of one (for tests).
  size_t serialPrimitivesCreated() const { return serial_created_; }
  size_t instancesCreated() const { return instances_created_; }
  size_t instancesCached() const { return instances_.size(); }
  size_t instanceEvictions() const { return instances_.evictions(); }
  // Steps of the instance of `fn` at these input shapes (created if needed) whose
  // primitive reads its weights in a layout oneDNN would not have chosen for them
  // there (the stored one is used: weights are never repacked at run time).
  size_t instanceFallbackSteps(uint32_t fn, const std::vector<ir::Tensor>& inputs) const;
  // The steps of that instance (their implementations are those of this shape).
  std::vector<StepInfo> instanceSteps(uint32_t fn, const std::vector<ir::Tensor>& inputs) const;

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
    int threads = 1;  // team size it was created for (small steps: 1) and runs with
    // An own kernel's window (kInt8MaxPool): kernel, strides and start pads, 2 each.
    std::array<int64_t, 6> window{};
    float epsilon = 0;  // an own kernel's (kAddLayerNorm)
    float alpha = 0;    // an own kernel's (kSoftmaxRows: its scale, 0 for none)
    int32_t alg = 0;    // an own kernel's (kMatVec: its activation, 0 for none)
    // A kConcat of dense plain tensors: run as block copies, not by its primitive.
    std::optional<PlainConcat> concat;
    // A kReorder between dense plain layouts that is a batch of transposes (NCHW to
    // NHWC): run as the module's own copy, not by its primitive.
    std::optional<PlainTranspose> transpose;
    // A float32 max pooling in a layout the module's own loop takes (planFloatMaxPool):
    // run so, not by its primitive.
    std::optional<MaxPoolWindow> max_pool;
    // A static quantization of float32 to int8 between dense layouts alike
    // (planQuantizeCopy): run so, not by its primitive.
    std::optional<QuantizeCopy> quantize;
    // A dynamic-int8 matmul in the layouts the module's own loop takes (planIntMatMul):
    // run so, not by its primitive.
    std::optional<IntMatMul> int_matmul;
    // A float32 matmul between row-major activations (planFloatMatMul): run so, not
    // by its primitive.
    std::optional<FloatMatMul> float_matmul;
    std::vector<LoadedArg> args;
    dnnl::memory::desc scratchpad;
    // Its profile event's details, made at the first profiled run that reports it.
    struct Described {
      std::once_flag made;
      std::vector<std::pair<std::string, std::string>> args;
    };
    std::shared_ptr<Described> described = std::make_shared<Described>();
  };
  // One-thread primitives of a function's steps, made the first time a run has a team
  // of one (the adaptive wait's block mode) while the module runs with more threads:
  // oneDNN fixes most primitives' team size when it creates them. Null where the step
  // already runs alone or the primitive could not be made (the step's own runs then).
  struct SerialSteps {
    std::once_flag made;
    std::vector<dnnl::primitive> primitives;
    std::vector<dnnl::memory::desc> scratchpads;
  };
  struct LoadedFunction {
    uint32_t num_inputs = 0, num_outputs = 0;
    std::vector<Step> program;  // the steps as recorded, for the one-thread primitives
    std::shared_ptr<SerialSteps> serial = std::make_shared<SerialSteps>();
    std::vector<Buffer> buffers;
    std::vector<size_t> offsets;  // temp buffers: offset in the workspace arena
    std::vector<LoadedStep> steps;
    size_t arena_bytes = 0, scratch_bytes = 0, fallback_steps = 0;
  };
  struct Workspace;
  // Idle workspaces of one layout, taken by a run and given back after it.
  struct WorkspacePool {
    std::mutex mutex;
    std::vector<std::unique_ptr<Workspace>> idle;
    size_t created = 0;
  };
  class WorkspaceLease;
  // A shape-polymorphic function at one input shape.
  struct Instance {
    LoadedFunction lf;
    std::vector<std::vector<int64_t>> inputs, outputs;  // shapes
    WorkspacePool workspaces;
  };
  struct Poly {
    std::shared_ptr<const PolyFunction> program;  // null for a function of fixed shapes
    std::shared_ptr<Instance> representative;     // the stored steps
  };

  explicit DnnlModule(size_t shape_cache);
  static std::shared_ptr<DnnlModule> loadChecked(const runtime::ModuleLoadContext& ctx);
  // Creates the primitives of `fn` (named `where` in messages) over the store's constants.
  LoadedFunction loadFunction(const Function& fn, const std::string& where) const;
  std::unique_ptr<Workspace> newWorkspace(const std::vector<const LoadedFunction*>& functions, size_t arena_bytes,
                                          size_t scratch_bytes) const;
  // run() and runProfiled(): each primitive reported to `profile` when it is not null.
  void runWith(uint32_t fn, const std::vector<ir::Tensor>& inputs, const std::vector<ir::Tensor>& outputs,
               runtime::ProfileSink* profile) const;
  // Executes function `fn` of a workspace made for `lf` (index `slot` there).
  void execute(const LoadedFunction& lf, Workspace& ws, size_t slot, uint32_t fn, const std::vector<ir::Tensor>& inputs,
               const std::vector<ir::Tensor>& outputs, runtime::ProfileSink* profile) const;
  // The one-thread primitives of `lf` (made on first use).
  const SerialSteps& serialSteps(const LoadedFunction& lf, uint32_t fn) const;
  std::shared_ptr<Instance> instance(uint32_t fn, const std::vector<ir::Tensor>& inputs) const;
  std::shared_ptr<Instance> makeInstance(uint32_t fn, const std::vector<std::vector<int64_t>>& shapes) const;
  void runPolymorphic(uint32_t fn, const std::vector<ir::Tensor>& inputs, const std::vector<ir::Tensor>& outputs,
                      runtime::ProfileSink* profile) const;

  Bytes blob_;  // keeps embedded data alive
  std::vector<LoadedFunction> functions_;
  std::vector<Poly> poly_;  // per function
  size_t arena_bytes_ = 0, scratch_bytes_ = 0, fallback_steps_ = 0;
  int recorded_threads_ = 0;
  bool threads_mismatch_ = false;
  mutable WorkspacePool workspaces_;  // for the functions of fixed shapes
  // What instances are made from: the store, the declared constant uses, the blob's
  // embedded data and the thread count.
  const runtime::ConstStore* store_ = nullptr;
  std::map<ir::ConstId, runtime::ConstUseKind> declared_;
  const std::byte* embedded_ = nullptr;
  int threads_ = 1;
  mutable runtime::ShapeCache<Instance> instances_;
  mutable std::atomic<size_t> instances_created_{0};
  mutable std::atomic<size_t> serial_created_{0};
};

}  // namespace partita::dnnl_backend
