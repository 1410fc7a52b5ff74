#include "backend/dnnl/dnnl_module.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <unordered_map>

#include "backend/dnnl/dnnl_memory_desc.h"
#include "backend/dnnl/dnnl_primitive.h"
#include "kernels/op_util.h"
#include "runtime/executor.h"
#include "partita/error.h"
#include "runtime/memory_plan.h"
#include "runtime/team_wait.h"

namespace partita::dnnl_backend {

const dnnl::engine& cpuEngine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

struct DnnlModule::Workspace {
  struct Binding {
    dnnl::memory memory;
    bool input = true;
    uint32_t index = 0;
  };
  runtime::ArenaMemory storage;
  dnnl::stream stream;
  std::vector<std::vector<std::unordered_map<int, dnnl::memory>>> args;  // [function][step]
  std::vector<std::vector<Binding>> bindings;                            // [function]
};

// Takes an idle workspace (or makes one) and gives it back when destroyed.
class DnnlModule::WorkspaceLease {
 public:
  explicit WorkspaceLease(const DnnlModule& m) : m_(m) {
    {
      std::lock_guard<std::mutex> lock(m.mutex_);
      if (!m.idle_.empty()) {
        ws_ = std::move(m.idle_.back());
        m.idle_.pop_back();
        return;
      }
      ++m.created_;
    }
    ws_ = m.newWorkspace();
  }
  ~WorkspaceLease() {
    std::lock_guard<std::mutex> lock(m_.mutex_);
    m_.idle_.push_back(std::move(ws_));
  }
  Workspace& operator*() const { return *ws_; }

 private:
  const DnnlModule& m_;
  std::unique_ptr<Workspace> ws_;
};

namespace {

[[noreturn]] void invalid(const std::string& msg) {
  throw Error(ErrorCode::kInvalidArtifact, "dnnl module: " + msg);
}

std::string stepName(const Step& s, size_t fn, size_t index) {
  return "function " + std::to_string(fn) + " step " + std::to_string(index) + " (" + stepKindName(s.kind) +
         " '" + s.label + "')";
}

// Checks that constant `id` in the store is exactly what the step reads.
void checkConstant(const runtime::ModuleLoadContext& ctx,
                   const std::map<ir::ConstId, runtime::ConstUseKind>& declared, ir::ConstId id,
                   const memory::desc& md, const std::string& where) {
  auto use = declared.find(id);
  if (use == declared.end() || use->second == runtime::ConstUseKind::kEmbed)
    invalid(where + " reads constant " + std::to_string(id) +
            ", which the module did not declare as borrowed or derived");
  if (!ctx.store->has(id))
    invalid(where + " needs constant " + std::to_string(id) + ", which is not in the weight store");
  const ir::Tensor& t = ctx.store->get(id);
  const std::string& layout = ctx.store->layout(id);
  size_t bytes = ctx.store->bytes(id).size;
  if (t.dtype != ir::DType::kFloat32) invalid(where + ": constant " + std::to_string(id) + " is not float32");
  if (md.data.offset0 != 0 || bytes != md.get_size())
    invalid(where + ": constant " + std::to_string(id) + " has " + std::to_string(bytes) +
            " bytes, the primitive reads " + std::to_string(extentBytes(md)) + " from its start");
  if (layout.empty()) {
    if (!isPlainDense(md))
      invalid(where + ": constant " + std::to_string(id) + " is row-major but the primitive reads layout " +
              layoutString(md));
  } else if (layout != layoutTag(md)) {
    invalid(where + ": constant " + std::to_string(id) + " has layout '" + layout +
            "' but the primitive reads '" + layoutTag(md) + "' (" + layoutString(md) + ")");
  }
}

// Checks the assumptions that must hold here; returns the recorded thread count (0 if none).
int checkAssumptions(const runtime::ModuleLoadContext& ctx) {
  int threads = 0;
  for (const auto& [key, value] : ctx.assumptions) {
    std::string here;
    const char* what = nullptr;
    if (key == kAssumeVersion) {
      here = dnnlVersionString();
      what = "oneDNN version";
    } else if (key == kAssumeIsa) {
      here = effectiveIsaName();
      what = "CPU ISA";
    } else if (key == kAssumeThreads) {
      char* end = nullptr;
      long n = std::strtol(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || n < 1 || n > runtime::kMaxThreads)
        invalid("assumption threads = '" + value + "' is not a thread count");
      threads = int(n);
      continue;
    } else {
      continue;  // a key a newer compiler writes that this loader does not know
    }
    if (value != here)
      throw Error(ErrorCode::kUnsupported, std::string("dnnl module: compiled for ") + what + " " + value +
                                               ", but this machine has " + what + " " + here +
                                               "; its derived weight layouts may not fit here: recompile the "
                                               "model on or for this machine");
  }
  return threads;
}

}  // namespace

DnnlModule::~DnnlModule() = default;

std::shared_ptr<DnnlModule> DnnlModule::load(const runtime::ModuleLoadContext& ctx) {
  try {
    return loadChecked(ctx);
  } catch (const dnnl::error& e) {
    // Parameters that passed the blob checks but that oneDNN refuses (a corrupted blob).
    throw Error(ErrorCode::kInvalidArtifact,
                std::string("dnnl module: oneDNN rejects the blob's parameters: ") + e.what());
  }
}

std::shared_ptr<DnnlModule> DnnlModule::loadChecked(const runtime::ModuleLoadContext& ctx) {
  if (!ctx.store) throw Error(ErrorCode::kInternal, "dnnl module: loaded without a weight store");
  const int recorded_threads = checkAssumptions(ctx);
  Program program = readProgram(ctx.blob.data, ctx.blob.size);
  // oneDNN fixes a primitive's thread count when it is created: create them with the
  // count runs will use (as the compiler did when it chose the layouts).
  omp_set_num_threads(ctx.threads);
  std::map<ir::ConstId, runtime::ConstUseKind> declared;
  for (const runtime::ConstUse& u : ctx.uses) declared[u.id] = u.kind;

  std::shared_ptr<DnnlModule> m(new DnnlModule());
  m->blob_ = ctx.blob;
  // Another thread count than at compile time: the layouts are used as recorded
  // (fallbackSteps() counts steps oneDNN would have laid out otherwise).
  m->recorded_threads_ = recorded_threads;
  m->threads_mismatch_ = recorded_threads != 0 && recorded_threads != ctx.threads;
  const dnnl::engine& eng = cpuEngine();
  const std::byte* embedded = ctx.blob.data + program.embedded_offset;
  m->functions_.resize(program.functions.size());
  for (size_t f = 0; f < program.functions.size(); ++f) {
    Function& fn = program.functions[f];
    LoadedFunction& lf = m->functions_[f];
    lf.num_inputs = fn.num_inputs;
    lf.num_outputs = fn.num_outputs;
    lf.buffers = fn.buffers;
    std::vector<int32_t> first(fn.buffers.size(), -1), last(fn.buffers.size(), -1);
    for (size_t s = 0; s < fn.steps.size(); ++s) {
      const Step& step = fn.steps[s];
      const std::string where = stepName(step, f, s);
      dnnl::primitive_desc_base pd;
      try {
        pd = makePrimitiveDesc(step, eng);
      } catch (const dnnl::error& e) {
        throw Error(ErrorCode::kUnsupported, "dnnl module: oneDNN cannot create " + where + ": " + e.what());
      }
      // oneDNN's choice of layout depends on the CPU and on the thread count, so a
      // loader may prefer another layout than the compiler recorded. The derived
      // weights in the file have the recorded one: ask oneDNN for a primitive over
      // exactly that layout (maybe another implementation), never reorder at load.
      bool fell_back = false;
      if (std::string mismatch = chosenLayoutMismatch(step, pd); !mismatch.empty()) {
        Step fixed = step;
        for (Arg& a : fixed.args) a.chosen = false;
        try {
          pd = makePrimitiveDesc(fixed, eng);
        } catch (const dnnl::error& e) {
          throw Error(ErrorCode::kUnsupported, "dnnl module: " + where + ": " + mismatch +
                                                   ", and oneDNN has no implementation for the recorded layout (" +
                                                   e.what() + "); recompile the model for this machine");
        }
        fell_back = true;
      }
      LoadedStep ls;
      ls.recorded_layout_kept = fell_back;
      m->fallback_steps_ += fell_back ? 1 : 0;
      ls.kind = step.kind;
      ls.label = step.label;
      ls.implementation = implementationName(pd);
      ls.post_ops = step.post_ops.size();
      ls.primitive = dnnl::primitive(pd.get());
      ls.scratchpad = pd.scratchpad_desc();
      m->scratch_bytes_ = std::max(m->scratch_bytes_, ls.scratchpad.get_size());
      for (const Arg& a : step.args) {
        LoadedArg la;
        la.key = a.key;
        la.source = a.source;
        la.md = a.md;
        switch (a.source) {
          case ArgSource::kBuffer:
            la.buffer = uint32_t(a.index);
            if (first[a.index] < 0) first[a.index] = int32_t(s);
            last[a.index] = int32_t(s);
            break;
          case ArgSource::kConstant: {
            la.constant = ir::ConstId(a.index);
            checkConstant(ctx, declared, la.constant, a.md, where);
            // Read-only: oneDNN never writes weights, biases or statistics of inference primitives.
            la.memory = dnnl::memory(a.md, eng, ctx.store->get(la.constant).data);
            break;
          }
          case ArgSource::kEmbedded:
            la.memory = dnnl::memory(a.md, eng, const_cast<std::byte*>(embedded + a.index));
            break;
        }
        ls.args.push_back(std::move(la));
      }
      lf.steps.push_back(std::move(ls));
    }
    // Region-local buffers share one arena by lifetime. A buffer whose layout has
    // padding keeps its bytes to itself: primitives expect the padding to stay zero.
    std::vector<runtime::BufferRequest> requests;
    std::vector<size_t> which;
    const int32_t end = int32_t(fn.steps.size());
    for (size_t b = 0; b < fn.buffers.size(); ++b) {
      if (fn.buffers[b].kind != BufferKind::kTemp || first[b] < 0) continue;
      if (fn.buffers[b].zero_padded)
        requests.push_back({size_t(fn.buffers[b].bytes), 0, end});
      else
        requests.push_back({size_t(fn.buffers[b].bytes), first[b], last[b]});
      which.push_back(b);
    }
    runtime::MemoryPlan plan = runtime::planMemory(requests);
    lf.offsets.assign(fn.buffers.size(), 0);
    for (size_t i = 0; i < which.size(); ++i) lf.offsets[which[i]] = plan.offsets[i];
    m->arena_bytes_ = std::max(m->arena_bytes_, plan.arena_bytes);
  }
  m->arena_bytes_ =
      (m->arena_bytes_ + runtime::kArenaAlignment - 1) / runtime::kArenaAlignment * runtime::kArenaAlignment;
  return m;
}

std::unique_ptr<DnnlModule::Workspace> DnnlModule::newWorkspace() const {
  const dnnl::engine& eng = cpuEngine();
  auto ws = std::make_unique<Workspace>();
  // Zero-filled: the padding of blocked layouts starts (and stays) zero.
  ws->storage = runtime::ArenaMemory(arena_bytes_ + scratch_bytes_);
  std::byte* arena = ws->storage.data();
  std::byte* scratch = arena + arena_bytes_;
  ws->stream = dnnl::stream(eng);
  ws->args.resize(functions_.size());
  ws->bindings.resize(functions_.size());
  for (size_t f = 0; f < functions_.size(); ++f) {
    const LoadedFunction& lf = functions_[f];
    for (const LoadedStep& ls : lf.steps) {
      std::unordered_map<int, dnnl::memory> args;
      for (const LoadedArg& la : ls.args) {
        if (la.source != ArgSource::kBuffer) {
          args.emplace(la.key, la.memory);
          continue;
        }
        const Buffer& b = lf.buffers[la.buffer];
        if (b.kind == BufferKind::kTemp) {
          args.emplace(la.key, dnnl::memory(la.md, eng, arena + lf.offsets[la.buffer]));
        } else {
          dnnl::memory mem(la.md, eng, DNNL_MEMORY_NONE);
          ws->bindings[f].push_back({mem, b.kind == BufferKind::kInput, b.index});
          args.emplace(la.key, mem);
        }
      }
      if (ls.scratchpad.get_size() > 0)
        args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(ls.scratchpad, eng, scratch));
      ws->args[f].push_back(std::move(args));
    }
  }
  return ws;
}

void DnnlModule::run(uint32_t fn, const std::vector<ir::Tensor>& inputs,
                     const std::vector<ir::Tensor>& outputs) const {
  if (fn >= functions_.size())
    throw Error(ErrorCode::kInternal, "dnnl module: function " + std::to_string(fn) + " of " +
                                          std::to_string(functions_.size()) + " called");
  const LoadedFunction& lf = functions_[fn];
  if (inputs.size() != lf.num_inputs || outputs.size() != lf.num_outputs)
    throw Error(ErrorCode::kInternal,
                "dnnl module: function " + std::to_string(fn) + " takes " + std::to_string(lf.num_inputs) +
                    " inputs and " + std::to_string(lf.num_outputs) + " outputs, called with " +
                    std::to_string(inputs.size()) + " and " + std::to_string(outputs.size()));
  for (const Buffer& b : lf.buffers) {
    if (b.kind == BufferKind::kTemp) continue;
    const ir::Tensor& t = b.kind == BufferKind::kInput ? inputs[b.index] : outputs[b.index];
    if (t.dtype != ir::DType::kFloat32 || t.nbytes() != b.bytes)
      throw Error(ErrorCode::kInternal, "dnnl module: function " + std::to_string(fn) + " " +
                                            (b.kind == BufferKind::kInput ? "input " : "output ") +
                                            std::to_string(b.index) + " must be float32 of " +
                                            std::to_string(b.bytes) + " bytes, got " +
                                            std::string(ir::dtypeName(t.dtype)) + ir::shapeStr(t.shape));
  }
  WorkspaceLease lease(*this);
  Workspace& ws = *lease;
  for (Workspace::Binding& b : ws.bindings[fn])
    b.memory.set_data_handle(b.input ? inputs[b.index].data : outputs[b.index].data);
  size_t s = 0;
  try {
    for (; s < lf.steps.size(); ++s) {
      runtime::teamWaitCheckpoint();
      lf.steps[s].primitive.execute(ws.stream, ws.args[fn][s]);
    }
    ws.stream.wait();
  } catch (const dnnl::error& e) {
    throw Error(ErrorCode::kInternal,
                "dnnl module: function " + std::to_string(fn) + " step " + std::to_string(s) + " ('" +
                    (s < lf.steps.size() ? lf.steps[s].label : "") + "') failed: " + e.what());
  }
}

std::vector<DnnlModule::StepInfo> DnnlModule::steps(uint32_t fn) const {
  std::vector<StepInfo> out;
  for (const LoadedStep& ls : functions_.at(fn).steps)
    out.push_back({ls.kind, ls.label, ls.implementation, ls.post_ops});
  return out;
}

std::vector<std::pair<ir::ConstId, const void*>> DnnlModule::constantHandles() const {
  std::vector<std::pair<ir::ConstId, const void*>> out;
  for (const LoadedFunction& lf : functions_)
    for (const LoadedStep& ls : lf.steps)
      for (const LoadedArg& la : ls.args)
        if (la.source == ArgSource::kConstant) out.emplace_back(la.constant, la.memory.get_data_handle());
  return out;
}

size_t DnnlModule::workspacesCreated() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return created_;
}

runtime::ModuleKind dnnlModuleKind() {
  return {kModuleKind, [](const runtime::ModuleLoadContext& ctx) -> std::shared_ptr<runtime::RuntimeModule> {
            return DnnlModule::load(ctx);
          }};
}

}  // namespace partita::dnnl_backend
