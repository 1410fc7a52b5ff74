#include "backend/dnnl/dnnl_module.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>
#include <cstdlib>
#include <cstring>
#include <map>

#include "backend/dnnl/dnnl_kernels.h"
#include "backend/dnnl/dnnl_memory_desc.h"
#include "backend/dnnl/dnnl_primitive.h"
#include "backend/dnnl/dnnl_replay.h"
#include "kernels/op_util.h"
#include "runtime/executor.h"
#include "runtime/profile.h"
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
  // One step's arguments as oneDNN's C API takes them (built once: executing through
  // the C++ API's map would build this array, allocating, on every call), and for the
  // own kernels each one's data where it never moves (a constant, the arena, the
  // scratchpad; null for a region input or output, bound anew every run): asking
  // oneDNN for a memory's handle was a library call per argument, 0.4 % of the
  // dynamic-int8 encoder's run.
  struct StepArgs {
    std::vector<dnnl::memory> memories;  // owns the handles c_args point to
    std::vector<dnnl_exec_arg_t> c_args;
    std::vector<void*> fixed;
    void add(int key, const dnnl::memory& m, void* data) {
      memories.push_back(m);
      c_args.push_back({key, m.get()});
      fixed.push_back(data);
    }
  };
  runtime::ArenaMemory storage;
  std::byte* scratch = nullptr;  // the scratchpad area after the arena
  size_t scratch_bytes = 0;
  dnnl::stream stream;
  std::vector<std::vector<StepArgs>> args;     // [function][step]
  std::vector<std::vector<Binding>> bindings;  // [function]
  // [function][step]: the arguments of the one-thread primitives (their own
  // scratchpads), built at the first run on a team of one; empty until then.
  std::vector<std::vector<StepArgs>> serial_args;
};

// Takes an idle workspace of a pool (or makes one) and gives it back when destroyed.
class DnnlModule::WorkspaceLease {
 public:
  template <typename Make>
  WorkspaceLease(WorkspacePool& pool, const Make& make) : pool_(pool) {
    {
      std::lock_guard<std::mutex> lock(pool.mutex);
      if (!pool.idle.empty()) {
        ws_ = std::move(pool.idle.back());
        pool.idle.pop_back();
        return;
      }
      ++pool.created;
    }
    ws_ = make();
  }
  ~WorkspaceLease() {
    std::lock_guard<std::mutex> lock(pool_.mutex);
    pool_.idle.push_back(std::move(ws_));
  }
  Workspace& operator*() const { return *ws_; }

 private:
  WorkspacePool& pool_;
  std::unique_ptr<Workspace> ws_;
};

namespace {

[[noreturn]] void invalid(const std::string& msg) {
  throw Error(ErrorCode::kInvalidArtifact, "dnnl module: " + msg);
}

// Checks that constant `id` in the store is exactly what the step reads.
void checkConstant(const runtime::ConstStore& store,
                   const std::map<ir::ConstId, runtime::ConstUseKind>& declared, ir::ConstId id,
                   const memory::desc& md, const std::string& where) {
  auto use = declared.find(id);
  if (use == declared.end() || use->second == runtime::ConstUseKind::kEmbed)
    invalid(where + " reads constant " + std::to_string(id) +
            ", which the module did not declare as borrowed or derived");
  if (!store.has(id))
    invalid(where + " needs constant " + std::to_string(id) + ", which is not in the weight store");
  const ir::Tensor& t = store.get(id);
  const std::string& layout = store.layout(id);
  size_t bytes = store.bytes(id).size;
  // float32 (bfloat16 layouts in a float32 container); int8 weights (derived s8 layouts,
  // in an int8 container) and their int32 bias; a mat_vec's float16 weights
  const ir::DType want = md.data.data_type == dnnl_s8 || md.data.data_type == dnnl_u8 ? ir::DType::kInt8
                         : md.data.data_type == dnnl_s32                             ? ir::DType::kInt32
                         : md.data.data_type == dnnl_f16                             ? ir::DType::kFloat16
                                                                                     : ir::DType::kFloat32;
  if (t.dtype != want)
    invalid(where + ": constant " + std::to_string(id) + " is " + std::string(ir::dtypeName(t.dtype)) + ", not " +
            std::string(ir::dtypeName(want)));
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

DnnlModule::DnnlModule(size_t shape_cache) : instances_(shape_cache) {}
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

  std::shared_ptr<DnnlModule> m(new DnnlModule(runtime::shapeCacheEntries(ctx.shape_cache)));
  m->blob_ = ctx.blob;
  m->store_ = ctx.store;
  for (const runtime::ConstUse& u : ctx.uses) m->declared_[u.id] = u.kind;
  m->embedded_ = ctx.blob.data + program.embedded_offset;
  m->threads_ = ctx.threads;
  // Another thread count than at compile time: the layouts are used as recorded
  // (fallbackSteps() counts steps oneDNN would have laid out otherwise).
  m->recorded_threads_ = recorded_threads;
  m->threads_mismatch_ = recorded_threads != 0 && recorded_threads != ctx.threads;
  m->poly_.resize(program.functions.size());
  for (size_t f = 0; f < program.functions.size(); ++f) {
    const Function& fn = program.functions[f];
    LoadedFunction lf = m->loadFunction(fn, "function " + std::to_string(f));
    m->fallback_steps_ += lf.fallback_steps;
    if (fn.poly) {
      // The region graph must check, and give at the representative shapes what the
      // stored steps read and write.
      const PolyFunction& p = *fn.poly;
      const std::string where = "function " + std::to_string(f) + " (shape-polymorphic)";
      try {
        p.graph.verify();
      } catch (const Error& e) {
        invalid(where + ": its region graph does not check: " + e.what());
      }
      ir::Graph at;
      try {
        at = regionAt(p.graph, p.representative);
      } catch (const Error& e) {
        invalid(where + ": its region graph does not infer at the representative shapes: " + e.what());
      }
      auto inst = std::make_shared<Instance>();
      inst->inputs = p.representative;
      for (ir::ValueId out : at.outputs) inst->outputs.push_back(at.typeOf(out).staticShape());
      for (const Buffer& b : fn.buffers) {
        if (b.kind == BufferKind::kTemp) continue;
        const ir::TensorType& t = at.typeOf(b.kind == BufferKind::kInput ? at.inputs[b.index] : at.outputs[b.index]);
        if (t.dtype != ir::DType::kFloat32 || uint64_t(t.numel()) * sizeof(float) != b.bytes)
          invalid(where + ": " + (b.kind == BufferKind::kInput ? "input " : "output ") + std::to_string(b.index) +
                  " is " + t.str() + " at the representative shapes, its buffer has " + std::to_string(b.bytes) +
                  " bytes");
      }
      inst->lf = lf;
      m->poly_[f] = Poly{fn.poly, std::move(inst)};
    } else {
      m->arena_bytes_ = std::max(m->arena_bytes_, lf.arena_bytes);
      m->scratch_bytes_ = std::max(m->scratch_bytes_, lf.scratch_bytes);
    }
    m->functions_.push_back(std::move(lf));
  }
  return m;
}

namespace {

// A step's primitive, as created for this machine.
struct CreatedPrimitive {
  dnnl::primitive_desc_base pd;
  dnnl::primitive primitive;
  int threads = 1;  // the team size it was created for, and runs with
  bool fell_back = false;  // oneDNN preferred another layout than the recorded one
};

std::string stepWhere(const std::string& fn_where, size_t s, const Step& step) {
  return fn_where + " step " + std::to_string(s) + " (" + stepKindName(step.kind) + " '" + step.label + "')";
}

CreatedPrimitive createPrimitive(const Step& step, const std::string& where) {
  const dnnl::engine& eng = cpuEngine();
  for (const Arg& a : step.args)
    if (a.md.data.format_kind == dnnl_format_kind_wino && (!a.chosen || a.key != DNNL_ARG_WEIGHTS ||
                                                          step.kind != StepKind::kConvolution))
      throw Error(ErrorCode::kInvalidArtifact,
                  "dnnl module: " + where + " has a Winograd layout that is not its convolution's chosen weights");
  CreatedPrimitive c;
  try {
    c.pd = makePrimitiveDesc(step, eng);
  } catch (const dnnl::error& e) {
    throw Error(ErrorCode::kUnsupported, "dnnl module: oneDNN cannot create " + where + ": " + e.what());
  }
  // oneDNN's choice of layout depends on the CPU and on the thread count, so a
  // loader may prefer another layout than the compiler recorded. The derived
  // weights in the file have the recorded one: ask oneDNN for a primitive over
  // exactly that layout (maybe another implementation), never reorder at load.
  if (std::string mismatch = chosenLayoutMismatch(step, c.pd); !mismatch.empty()) {
    // A Winograd weights layout is taken only as oneDNN makes it here: its fields are
    // oneDNN's internals, which a primitive created over a recorded one would trust.
    // (Only a convolution's weights may be in it: checked above.)
    if (const Arg* w = step.find(DNNL_ARG_WEIGHTS); w && w->md.data.format_kind == dnnl_format_kind_wino)
      throw Error(ErrorCode::kUnsupported, "dnnl module: " + where + ": " + mismatch +
                                               " (Winograd weights); recompile the model for this machine");
    Step fixed = step;
    for (Arg& a : fixed.args) a.chosen = false;
    try {
      c.pd = makePrimitiveDesc(fixed, eng);
    } catch (const dnnl::error& e) {
      throw Error(ErrorCode::kUnsupported, "dnnl module: " + where + ": " + mismatch +
                                               ", and oneDNN has no implementation for the recorded layout (" +
                                               e.what() + "); recompile the model for this machine");
    }
    c.fell_back = true;
  }
  c.primitive = dnnl::primitive(c.pd.get());
  return c;
}

// Whether `fn`'s temporaries add up to at most `bound` bytes. The sum stops once past
// it: readProgram caps each buffer at 1 TiB, so it cannot wrap.
bool temporariesAtMost(const Function& fn, uint64_t bound) {
  uint64_t total = 0;
  for (const Buffer& b : fn.buffers)
    if (b.kind == BufferKind::kTemp && !b.view && (total += b.bytes) > bound) return false;
  return true;
}

// Creates the primitives of `steps` on up to `threads` threads: creating one
// generates its JIT kernels, most of a load's time, and the steps are independent.
// Each step is created for stepThreads() OpenMP threads, since oneDNN fixes a
// primitive's team size when it is created. The first failing step (in step order)
// is the error, whichever thread met it.
std::vector<CreatedPrimitive> createPrimitives(const std::vector<Step>& steps, const std::string& fn_where,
                                               int threads) {
  std::vector<CreatedPrimitive> created(steps.size());
  std::vector<std::exception_ptr> errors(steps.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t s = next++; s < steps.size(); s = next++) {
      const int step_threads = stepThreads(steps[s], threads);
      omp_set_num_threads(step_threads);
      try {
        if (!isOwnKernel(steps[s].kind))  // partita's code: nothing to create
          created[s] = createPrimitive(steps[s], stepWhere(fn_where, s, steps[s]));
        created[s].threads = step_threads;
      } catch (...) {
        errors[s] = std::current_exception();
      }
    }
  };
  const size_t helpers = std::min(size_t(std::max(threads, 1) - 1), steps.size() > 1 ? steps.size() - 1 : 0);
  std::vector<std::thread> pool;
  pool.reserve(helpers);
  for (size_t t = 0; t < helpers; ++t) pool.emplace_back(work);
  work();
  omp_set_num_threads(threads);  // this thread's runs use the module's count
  for (std::thread& t : pool) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
  return created;
}

}  // namespace

DnnlModule::LoadedFunction DnnlModule::loadFunction(const Function& fn, const std::string& fn_where) const {
  const dnnl::engine& eng = cpuEngine();
  LoadedFunction lf;
  lf.num_inputs = fn.num_inputs;
  lf.num_outputs = fn.num_outputs;
  lf.buffers = fn.buffers;
  if (threads_ > 1 && runtime::teamWaitMayRunAlone()) lf.program = fn.steps;
  std::vector<CreatedPrimitive> created = createPrimitives(fn.steps, fn_where, threads_);
  std::vector<int32_t> first(fn.buffers.size(), -1), last(fn.buffers.size(), -1);
  for (size_t s = 0; s < fn.steps.size(); ++s) {
    const Step& step = fn.steps[s];
    const std::string where = stepWhere(fn_where, s, step);
    const dnnl::primitive_desc_base& pd = created[s].pd;
    const bool fell_back = created[s].fell_back;
    LoadedStep ls;
    ls.recorded_layout_kept = fell_back;
    lf.fallback_steps += fell_back ? 1 : 0;
    ls.kind = step.kind;
    ls.label = step.label;
    ls.implementation = isOwnKernel(step.kind) ? ownKernelName(step.kind) : implementationName(pd);
    ls.post_ops = step.post_ops.size();
    ls.primitive = created[s].primitive;
    ls.threads = created[s].threads;
    if (!isOwnKernel(step.kind)) ls.scratchpad = pd.scratchpad_desc();
    if (step.kind == StepKind::kInt8MaxPool)  // two of each (checkOwnKernelStep)
      ls.window = {step.kernel[0], step.kernel[1], step.strides[0], step.strides[1], step.pad_l[0], step.pad_l[1]};
    ls.epsilon = step.epsilon;
    ls.alpha = step.alpha;
    ls.alg = step.alg;
    lf.scratch_bytes = std::max(lf.scratch_bytes, ls.scratchpad.get_size());
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
          checkConstant(*store_, declared_, la.constant, a.md, where);
          // Read-only: oneDNN never writes weights, biases or statistics of inference primitives.
          la.memory = dnnl::memory(a.md, eng, store_->get(la.constant).data);
          break;
        }
        case ArgSource::kEmbedded:
          la.memory = dnnl::memory(a.md, eng, const_cast<std::byte*>(embedded_ + a.index));
          break;
      }
      ls.args.push_back(std::move(la));
    }
    if (step.kind == StepKind::kConcat) {  // (its primitive, made above, checked the arguments)
      std::vector<memory::desc> srcs;
      for (int i = 0; const Arg* a = step.find(DNNL_ARG_MULTIPLE_SRC + i); ++i) srcs.push_back(a->md);
      ls.concat = planPlainConcat(srcs, step.find(DNNL_ARG_DST)->md, int(step.axis));
      if (ls.concat) ls.implementation = "partita:concat";
    }
    const Arg* from = step.find(DNNL_ARG_SRC);
    const Arg* to = step.find(DNNL_ARG_DST);
    if (step.kind == StepKind::kReorder && step.quant.empty() && step.post_ops.empty() && from && to) {
      ls.transpose = planPlainTranspose(from->md, to->md);
      if (ls.transpose) ls.implementation = "partita:transpose";
    }
    if (step.kind == StepKind::kReorder && !step.quant.empty()) {
      ls.quantize = planQuantizeCopy(step);
      if (ls.quantize) ls.implementation = "partita:quantize";
    }
    if (step.kind == StepKind::kPooling) {  // (its primitive, made above, checked the arguments)
      ls.max_pool = planFloatMaxPool(step);
      if (ls.max_pool) ls.implementation = "partita:max_pool";
    }
    if (step.kind == StepKind::kMatMul) {  // (its primitive, made above, checked the arguments)
      ls.int_matmul = planIntMatMul(step);
      if (ls.int_matmul) ls.implementation = "partita:int8_matmul";
      ls.float_matmul = planFloatMatMul(step);
      if (ls.float_matmul) ls.implementation = "partita:matmul";
    }
    lf.steps.push_back(std::move(ls));
  }
  // Region-local buffers share one arena by lifetime. A buffer whose layout has
  // padding keeps its bytes to itself: primitives expect the padding to stay zero.
  // On a team, so does every buffer when all of them fit in kPrivateBuffersBytes:
  // each primitive splits its work between the threads its own way, so bytes one step
  // wrote and a later one reuses mostly sit in the other core's cache, and moving
  // them cost the demo CNN a third of its two-thread run (1.37 -> 0.90 ms), while
  // buffers of their own are written by the same thread run after run. Larger sets
  // keep sharing: they do not stay in the caches anyway (MobileNetV2, 26 MB of
  // buffers, ran 7 % slower without), and at one thread sharing costs nothing.
  const bool private_buffers = threads_ > 1 && temporariesAtMost(fn, kPrivateBuffersBytes);
  // A view's uses are its parent's (readProgram checked that parents are no views).
  for (size_t b = 0; b < fn.buffers.size(); ++b) {
    const Buffer& v = fn.buffers[b];
    if (!v.view || first[b] < 0) continue;
    if (first[v.index] < 0 || first[b] < first[v.index]) first[v.index] = first[b];
    last[v.index] = std::max(last[v.index], last[b]);
  }
  std::vector<runtime::BufferRequest> requests;
  std::vector<size_t> which;
  const int32_t end = int32_t(fn.steps.size());
  for (size_t b = 0; b < fn.buffers.size(); ++b) {
    if (fn.buffers[b].kind != BufferKind::kTemp || fn.buffers[b].view || first[b] < 0) continue;
    if (fn.buffers[b].zero_padded || private_buffers)
      requests.push_back({size_t(fn.buffers[b].bytes), 0, end});
    else
      requests.push_back({size_t(fn.buffers[b].bytes), first[b], last[b]});
    which.push_back(b);
  }
  runtime::MemoryPlan plan = runtime::planMemory(requests);
  lf.offsets.assign(fn.buffers.size(), 0);
  for (size_t i = 0; i < which.size(); ++i) lf.offsets[which[i]] = plan.offsets[i];
  for (size_t b = 0; b < fn.buffers.size(); ++b)
    if (fn.buffers[b].view) lf.offsets[b] = lf.offsets[fn.buffers[b].index] + fn.buffers[b].offset;
  lf.arena_bytes =
      (plan.arena_bytes + runtime::kArenaAlignment - 1) / runtime::kArenaAlignment * runtime::kArenaAlignment;
  return lf;
}

std::unique_ptr<DnnlModule::Workspace> DnnlModule::newWorkspace(const std::vector<const LoadedFunction*>& functions,
                                                                 size_t arena_bytes, size_t scratch_bytes) const {
  const dnnl::engine& eng = cpuEngine();
  auto ws = std::make_unique<Workspace>();
  // Zero-filled: the padding of blocked layouts starts (and stays) zero.
  ws->storage = runtime::ArenaMemory(arena_bytes + scratch_bytes);
  std::byte* arena = ws->storage.data();
  std::byte* scratch = arena + arena_bytes;
  ws->scratch = scratch;
  ws->scratch_bytes = scratch_bytes;
  ws->stream = dnnl::stream(eng);
  ws->args.resize(functions.size());
  ws->bindings.resize(functions.size());
  ws->serial_args.resize(functions.size());
  for (size_t f = 0; f < functions.size(); ++f) {
    if (!functions[f]) continue;
    const LoadedFunction& lf = *functions[f];
    for (const LoadedStep& ls : lf.steps) {
      Workspace::StepArgs args;
      for (const LoadedArg& la : ls.args) {
        if (la.source != ArgSource::kBuffer) {
          args.add(la.key, la.memory, la.memory.get_data_handle());
          continue;
        }
        const Buffer& b = lf.buffers[la.buffer];
        if (b.kind == BufferKind::kTemp) {
          args.add(la.key, dnnl::memory(la.md, eng, arena + lf.offsets[la.buffer]), arena + lf.offsets[la.buffer]);
        } else {
          dnnl::memory mem(la.md, eng, DNNL_MEMORY_NONE);
          ws->bindings[f].push_back({mem, b.kind == BufferKind::kInput, b.index});
          args.add(la.key, mem, nullptr);
        }
      }
      if (ls.scratchpad.get_size() > 0)
        args.add(DNNL_ARG_SCRATCHPAD, dnnl::memory(ls.scratchpad, eng, scratch), scratch);
      ws->args[f].push_back(std::move(args));
    }
  }
  return ws;
}

void DnnlModule::run(uint32_t fn, const std::vector<ir::Tensor>& inputs,
                     const std::vector<ir::Tensor>& outputs) const {
  runWith(fn, inputs, outputs, nullptr);
}

void DnnlModule::runProfiled(uint32_t fn, const std::vector<ir::Tensor>& inputs,
                             const std::vector<ir::Tensor>& outputs, runtime::ProfileSink& profile) const {
  runWith(fn, inputs, outputs, &profile);
}

namespace {
// The name of argument `key` of a step of `kind` in profile events.
std::string argName(StepKind kind, int key, bool quantized) {
  if (kind == StepKind::kDynamicQuantize && key != DNNL_ARG_SRC && key != DNNL_ARG_DST)
    return key == kDynamicScaleArg ? "scale" : key == kDynamicZeroArg ? "zero_point" : "zero_point_s32";
  if (kind == StepKind::kAddRowCopy) {
    if (key == DNNL_ARG_SRC_1) return "bias";
    for (int i = 0; i < kMaxRowCopies; ++i) {
      if (key == DNNL_ARG_MULTIPLE_SRC + i) return "view_" + std::to_string(i);
      if (key == kRowCopyDst[i] && !quantized) return "dst_" + std::to_string(i);
    }
  }
  if (kind == StepKind::kAddLayerNorm || kind == StepKind::kBiasGelu || kind == StepKind::kAddRowCopy) {
    if (kind == StepKind::kBiasGelu && key == DNNL_ARG_SRC_1) return "bias";
    if (key >= DNNL_ARG_MULTIPLE_SRC && key < DNNL_ARG_MULTIPLE_SRC + kMaxLayerNormAddends)
      return "addend_" + std::to_string(key - DNNL_ARG_MULTIPLE_SRC);
    if (key == kQuantizedResultArg) return "quantized";
    if (key == kDynamicScaleArg) return "quantized_scale";
    if (key == kDynamicZeroArg) return "quantized_zero_point";
    if (key == kDynamicZeroS32Arg) return "quantized_zero_point_s32";
  }
  switch (key) {
    case DNNL_ARG_SRC: return "src";
    case DNNL_ARG_SRC_1: return kind == StepKind::kRnn ? "src_iter" : "src_1";  // DNNL_ARG_SRC_ITER
    case DNNL_ARG_WEIGHTS: return "weights";
    case DNNL_ARG_BIAS: return "bias";
    case DNNL_ARG_DST: return "dst";
    case DNNL_ARG_MEAN: return "mean";
    case DNNL_ARG_VARIANCE: return "variance";
    case DNNL_ARG_SCALE: return "scale";
    case DNNL_ARG_SHIFT: return "shift";
    case DNNL_ARG_SRC_ITER_C: return "src_iter_c";
    case DNNL_ARG_WEIGHTS_ITER: return "weights_iter";
    case DNNL_ARG_WEIGHTS_PEEPHOLE: return "weights_peephole";
    case DNNL_ARG_DST_ITER: return "dst_iter";
    case DNNL_ARG_DST_ITER_C: return "dst_iter_c";
    default:
      if (key >= DNNL_ARG_ATTR_MULTIPLE_POST_OP_BASE)  // DNNL_ARG_ATTR_MULTIPLE_POST_OP(i) | DNNL_ARG_SRC_1
        return "post_op_" + std::to_string(key / DNNL_ARG_ATTR_MULTIPLE_POST_OP_BASE - 1) + "_src_1";
      if (key >= DNNL_ARG_MULTIPLE_SRC && key < DNNL_ARG_MULTIPLE_DST)
        return "src_" + std::to_string(key - DNNL_ARG_MULTIPLE_SRC);
      return "arg_" + std::to_string(key);
  }
}

// A primitive's details for its profile event: kind, implementation, post-ops, and
// each argument as "f32[1,64,56,56] aBcd16b" (element type, logical dims, layout tag).
// Made once, when a profiled run first reports the primitive (a run that is not
// profiled never pays for it).
std::vector<std::pair<std::string, std::string>> describeStep(StepKind kind, const std::string& implementation,
                                                              size_t post_ops,
                                                              const std::vector<std::pair<int, memory::desc>>& args) {
  std::vector<std::pair<std::string, std::string>> out = {
      {"backend", kModuleKind}, {"kind", stepKindName(kind)}, {"impl", implementation}};
  if (post_ops) out.emplace_back("post_ops", std::to_string(post_ops));
  bool quantized = false;  // (a step with a quantized result names its scale and zero points so)
  for (const auto& arg : args) quantized |= arg.first == kQuantizedResultArg;
  for (const auto& [key, md] : args) {
    std::string dims;
    for (int64_t d : dimsOf(md)) dims += (dims.empty() ? "" : ",") + std::to_string(d);
    out.emplace_back(argName(kind, key, quantized), std::string(dataTypeName(md)) + "[" + dims + "] " + formatTag(md));
  }
  return out;
}
}  // namespace

void DnnlModule::runWith(uint32_t fn, const std::vector<ir::Tensor>& inputs, const std::vector<ir::Tensor>& outputs,
                         runtime::ProfileSink* profile) const {
  if (fn >= functions_.size())
    throw Error(ErrorCode::kInternal, "dnnl module: function " + std::to_string(fn) + " of " +
                                          std::to_string(functions_.size()) + " called");
  if (poly_[fn].program) {
    runPolymorphic(fn, inputs, outputs, profile);
    return;
  }
  const LoadedFunction& lf = functions_[fn];
  if (inputs.size() != lf.num_inputs || outputs.size() != lf.num_outputs)
    throw Error(ErrorCode::kInternal,
                "dnnl module: function " + std::to_string(fn) + " takes " + std::to_string(lf.num_inputs) +
                    " inputs and " + std::to_string(lf.num_outputs) + " outputs, called with " +
                    std::to_string(inputs.size()) + " and " + std::to_string(outputs.size()));
  for (const Buffer& b : lf.buffers) {
    if (b.kind == BufferKind::kTemp) continue;
    const ir::Tensor& t = b.kind == BufferKind::kInput ? inputs[b.index] : outputs[b.index];
    // float32, int8 values between int8 primitives (QLinearConv's input and output), or
    // int32 (MatMulInteger's output)
    const bool typed = t.dtype == ir::DType::kFloat32 || t.dtype == ir::DType::kUInt8 || t.dtype == ir::DType::kInt8 ||
                       (t.dtype == ir::DType::kInt32 && b.kind == BufferKind::kOutput);
    if (!typed || t.nbytes() != b.bytes)
      throw Error(ErrorCode::kInternal, "dnnl module: function " + std::to_string(fn) + " " +
                                            (b.kind == BufferKind::kInput ? "input " : "output ") +
                                            std::to_string(b.index) + " must be float32, uint8, int8 (or an int32 output) of " +
                                            std::to_string(b.bytes) + " bytes, got " +
                                            std::string(ir::dtypeName(t.dtype)) + ir::shapeStr(t.shape));
  }
  WorkspaceLease lease(workspaces_, [&] {
    std::vector<const LoadedFunction*> fixed;
    for (size_t f = 0; f < functions_.size(); ++f) fixed.push_back(poly_[f].program ? nullptr : &functions_[f]);
    return newWorkspace(fixed, arena_bytes_, scratch_bytes_);
  });
  execute(lf, *lease, fn, fn, inputs, outputs, profile);
}

const DnnlModule::SerialSteps& DnnlModule::serialSteps(const LoadedFunction& lf, uint32_t fn) const {
  SerialSteps& ss = *lf.serial;
  std::call_once(ss.made, [&] {
    ss.primitives.resize(lf.steps.size());
    ss.scratchpads.resize(lf.steps.size());
    const OmpThreadsScope one(1);
    for (size_t s = 0; s < lf.steps.size() && s < lf.program.size(); ++s) {
      if (lf.steps[s].threads <= 1 || isOwnKernel(lf.steps[s].kind)) continue;  // own kernels: any team
      try {
        CreatedPrimitive c = createPrimitive(lf.program[s], stepWhere("function " + std::to_string(fn), s, lf.program[s]));
        ss.scratchpads[s] = c.pd.scratchpad_desc();
        ss.primitives[s] = c.primitive;
        ++serial_created_;
      } catch (const std::exception&) {
        // Made for the module's threads at load, so this does not happen; if it did,
        // the step's own primitive runs (right, on its own team size).
      }
    }
  });
  return ss;
}

namespace {

// The arguments of the one-thread primitives of a function: the workspace's, with
// each scratchpad described as that primitive's (same memory, at the scratch area).
// A step whose primitive is missing, or needs more scratch than the workspace has,
// keeps no arguments here (its own primitive runs).
template <typename StepArgs>
std::vector<StepArgs> serialArgs(const std::vector<StepArgs>& args, const std::vector<dnnl::primitive>& primitives,
                                 const std::vector<memory::desc>& scratchpads, std::byte* scratch,
                                 size_t scratch_bytes) {
  std::vector<StepArgs> out(args.size());
  for (size_t s = 0; s < args.size() && s < primitives.size(); ++s) {
    if (!primitives[s] || scratchpads[s].get_size() > scratch_bytes) continue;
    for (size_t i = 0; i < args[s].c_args.size(); ++i)
      if (args[s].c_args[i].arg != DNNL_ARG_SCRATCHPAD)
        out[s].add(args[s].c_args[i].arg, args[s].memories[i], args[s].fixed[i]);
    if (scratchpads[s].get_size() > 0)
      out[s].add(DNNL_ARG_SCRATCHPAD, dnnl::memory(scratchpads[s], cpuEngine(), scratch), scratch);
  }
  return out;
}

}  // namespace

namespace {

// Whether argument `key` is among a step's arguments.
template <typename StepArgs>
bool hasArg(const StepArgs& a, int key) {
  for (const dnnl_exec_arg_t& e : a.c_args)
    if (e.arg == key) return true;
  return false;
}

// Where argument `key` is among a step's arguments.
template <typename StepArgs>
size_t argIndex(const StepArgs& a, int key) {
  for (size_t i = 0; i < a.c_args.size(); ++i)
    if (a.c_args[i].arg == key) return i;
  throw Error(ErrorCode::kInternal, "dnnl module: an own kernel's argument " + std::to_string(key) + " is unbound");
}

// The memory bound as that argument.
template <typename StepArgs>
dnnl_memory_t argMemory(const StepArgs& a, int key) {
  return a.c_args[argIndex(a, key)].memory;
}

// Its data: where it never moves, as recorded; else (a region input or output) the
// handle bound for this run.
template <typename T, typename StepArgs>
T* argData(const StepArgs& a, int key) {
  const size_t i = argIndex(a, key);
  void* p = a.fixed[i];
  if (!p) dnnl::error::wrap_c_api(dnnl_memory_get_data_handle(a.c_args[i].memory, &p), "could not read a memory's handle");
  return static_cast<T*>(p);
}

// Its descriptor.
template <typename StepArgs>
const dnnl_memory_desc_t* argDesc(const StepArgs& a, int key) {
  const dnnl_memory_desc_t* md = nullptr;
  dnnl::error::wrap_c_api(dnnl_memory_get_memory_desc(argMemory(a, key), &md), "could not read a memory's descriptor");
  return md;
}

// A planned dynamic-int8 matmul over its step's arguments.
template <typename StepArgs>
void runIntMatMul(const IntMatMul& p, const StepArgs& a) {
  const float scale =
      p.scale_post_op >= 0 ? *argData<const float>(a, DNNL_ARG_ATTR_MULTIPLE_POST_OP(p.scale_post_op) | DNNL_ARG_SRC_1)
                           : 1.0f;
  const float* bias =
      p.bias_post_op >= 0 ? argData<const float>(a, DNNL_ARG_ATTR_MULTIPLE_POST_OP(p.bias_post_op) | DNNL_ARG_SRC_1)
                          : nullptr;
  intMatMul(p, argData<const uint8_t>(a, DNNL_ARG_SRC), argData<const int8_t>(a, DNNL_ARG_WEIGHTS),
            *argData<const int32_t>(a, DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC), scale, bias,
            argData<float>(a, DNNL_ARG_DST));
}

// A kAddLayerNorm's or kBiasGelu's quantized result, when the step has one, into the
// kernel's arguments `p`.
template <typename StepArgs, typename KernelArgs>
void bindQuantizedResult(const StepArgs& a, KernelArgs& p) {
  if (!hasArg(a, kQuantizedResultArg)) return;
  p.q = argData<uint8_t>(a, kQuantizedResultArg);
  p.scale = argData<float>(a, kDynamicScaleArg);
  p.zero = argData<float>(a, kDynamicZeroArg);
  p.zero_s32 = argData<int32_t>(a, kDynamicZeroS32Arg);
}

// A kConcat step's block copies (LoadedStep::concat) over its bound arguments (the
// sources' addresses on the stack up to 16 of them: no allocation in a run).
template <typename StepArgs>
void runPlainConcat(const PlainConcat& plan, const StepArgs& a) {
  const size_t n = plan.part_bytes.size();
  std::array<const std::byte*, 16> few;
  std::vector<const std::byte*> many(n > few.size() ? n : 0);
  const std::byte** srcs = n > few.size() ? many.data() : few.data();
  for (size_t i = 0; i < n; ++i) srcs[i] = argData<const std::byte>(a, DNNL_ARG_MULTIPLE_SRC + int(i));
  plainConcat(plan, srcs, argData<std::byte>(a, DNNL_ARG_DST));
}

// `window`: a kInt8MaxPool's kernel, strides and start pads (LoadedStep::window);
// `epsilon`: a kAddLayerNorm's; `alpha`: a kSoftmaxRows' scale (0: none); `alg`: a
// kMatVec's activation (0: none).
template <typename StepArgs>
void runOwnKernel(StepKind kind, const std::array<int64_t, 6>& window, float epsilon, float alpha, int32_t alg,
                  const StepArgs& a) {
  const dnnl_memory_desc_t* src = argDesc(a, DNNL_ARG_SRC);  // DNNL_ARG_SRC_0 too
  // A channels-last [N, C, spatial...] source (checkOwnKernelStep): N rows of
  // `positions` rows of C floats.
  auto positions = [&] {
    int64_t p = 1;
    for (int i = 2; i < src->ndims; ++i) p *= src->dims[i];
    return p;
  };
  switch (kind) {
    case StepKind::kScaleChannels:
      scaleChannels(argData<const float>(a, DNNL_ARG_SRC_0), argData<const float>(a, DNNL_ARG_SRC_1),
                    argData<float>(a, DNNL_ARG_DST), src->dims[0], positions(), src->dims[1],
                    argDesc(a, DNNL_ARG_SRC_1)->dims[0] > 1);
      return;
    case StepKind::kInt8MaxPool: {
      const dnnl_memory_desc_t* dst = argDesc(a, DNNL_ARG_DST);
      MaxPoolWindow p;
      p.n = src->dims[0];
      p.c = src->dims[1];
      p.in_h = src->dims[2];
      p.in_w = src->dims[3];
      p.out_h = dst->dims[2];
      p.out_w = dst->dims[3];
      p.kernel_h = window[0];
      p.kernel_w = window[1];
      p.stride_h = window[2];
      p.stride_w = window[3];
      p.pad_h = window[4];
      p.pad_w = window[5];
      int8MaxPool(argData<const uint8_t>(a, DNNL_ARG_SRC), argData<uint8_t>(a, DNNL_ARG_DST),
                  src->data_type == dnnl_s8, p);
      return;
    }
    case StepKind::kMatVec:  // [1, K, 1...] -> [1, O, 1...] (checkOwnKernelStep)
      matVec(argData<const float>(a, DNNL_ARG_SRC), argData<const void>(a, DNNL_ARG_WEIGHTS),
             argDesc(a, DNNL_ARG_WEIGHTS)->data_type == dnnl_f16,
             hasArg(a, DNNL_ARG_BIAS) ? argData<const float>(a, DNNL_ARG_BIAS) : nullptr,
             argData<float>(a, DNNL_ARG_DST), src->dims[1], argDesc(a, DNNL_ARG_DST)->dims[1], alg);
      return;
    case StepKind::kChannelMean:
      channelMean(argData<const float>(a, DNNL_ARG_SRC), argData<float>(a, DNNL_ARG_DST), src->dims[0], positions(),
                  src->dims[1]);
      return;
    case StepKind::kSwish:
      if (hasArg(a, DNNL_ARG_DST_1)) {  // and the channels' mean (channels-last, dense)
        swishChannelMean(argData<const float>(a, DNNL_ARG_SRC), argData<float>(a, DNNL_ARG_DST),
                         argData<float>(a, DNNL_ARG_DST_1), src->dims[0], positions(), src->dims[1]);
        return;
      }
      // Every float the descriptor spans: padding (zero) stays zero.
      swish(argData<const float>(a, DNNL_ARG_SRC), argData<float>(a, DNNL_ARG_DST),
            int64_t(dnnl_memory_desc_get_size(src) / sizeof(float)));
      return;
    case StepKind::kAddLayerNorm: {
      AddLayerNormArgs p;
      p.x = argData<const float>(a, DNNL_ARG_SRC);
      p.cols = src->dims[src->ndims - 1];
      p.rows = int64_t(dnnl_memory_desc_get_size(src) / sizeof(float)) / p.cols;
      for (int key = DNNL_ARG_MULTIPLE_SRC; p.n_adds < kMaxLayerNormAddends && hasArg(a, key); ++p.n_adds, ++key) {
        p.adds[p.n_adds] = argData<const float>(a, key);
        p.add_is_row[p.n_adds] = dnnl_memory_desc_get_size(argDesc(a, key)) == size_t(p.cols) * sizeof(float);
      }
      p.gamma = argData<const float>(a, DNNL_ARG_SCALE);
      p.beta = argData<const float>(a, DNNL_ARG_SHIFT);
      p.epsilon = epsilon;
      p.y = argData<float>(a, DNNL_ARG_DST);
      bindQuantizedResult(a, p);
      addLayerNorm(p);
      return;
    }
    case StepKind::kBiasGelu: {
      BiasGeluArgs p;
      p.x = argData<const float>(a, DNNL_ARG_SRC);
      p.cols = src->dims[src->ndims - 1];
      p.rows = int64_t(dnnl_memory_desc_get_size(src) / sizeof(float)) / p.cols;
      if (hasArg(a, DNNL_ARG_SRC_1)) p.bias = argData<const float>(a, DNNL_ARG_SRC_1);
      p.y = argData<float>(a, DNNL_ARG_DST);
      bindQuantizedResult(a, p);
      biasGelu(p);
      return;
    }
    case StepKind::kAddRowCopy: {
      StridedCopy copies[kMaxRowCopies];
      const bool quantized = hasArg(a, kQuantizedResultArg);  // (then one view: checkOwnKernelStep)
      int n = 0;
      for (; n < kMaxRowCopies && hasArg(a, DNNL_ARG_MULTIPLE_SRC + n); ++n) {
        const dnnl_memory_desc_t* v = argDesc(a, DNNL_ARG_MULTIPLE_SRC + n);
        const dnnl_memory_desc_t* y = argDesc(a, quantized ? kQuantizedResultArg : kRowCopyDst[n]);
        StridedCopy& c = copies[n];
        c.rank = v->ndims;
        for (int d = 0; d < v->ndims; ++d) {
          c.dims[d] = v->dims[d];
          c.src_strides[d] = v->format_desc.blocking.strides[d];
          c.dst_strides[d] = y->format_desc.blocking.strides[d];
        }
        c.src_offset = v->offset0;
        c.inner = *copyRunDim(dnnl::memory::desc(*v), dnnl::memory::desc(*y));  // (checkOwnKernelStep)
        if (!quantized) c.dst = argData<float>(a, kRowCopyDst[n]);
      }
      const float* x = argData<const float>(a, DNNL_ARG_SRC);
      const float* bias = hasArg(a, DNNL_ARG_SRC_1) ? argData<const float>(a, DNNL_ARG_SRC_1) : nullptr;
      const int64_t cols = src->dims[src->ndims - 1];
      if (quantized)
        addRowCopyQuantized(x, bias, cols, copies[0], argData<uint8_t>(a, kQuantizedResultArg),
                            argData<float>(a, kDynamicScaleArg), argData<float>(a, kDynamicZeroArg),
                            argData<int32_t>(a, kDynamicZeroS32Arg));
      else
        addRowCopy(x, bias, cols, copies, n);
      return;
    }
    case StepKind::kSoftmaxRows: {
      const int64_t cols = src->dims[src->ndims - 1];
      softmaxRows(argData<const float>(a, DNNL_ARG_SRC), argData<float>(a, DNNL_ARG_DST),
                  int64_t(dnnl_memory_desc_get_size(src) / sizeof(float)) / cols, cols, alpha == 0 ? 1.0f : alpha);
      return;
    }
    case StepKind::kDynamicQuantize: {
      int64_t n = 1;
      for (int i = 0; i < src->ndims; ++i) n *= src->dims[i];
      dynamicQuantize(argData<const float>(a, DNNL_ARG_SRC), n, argData<uint8_t>(a, DNNL_ARG_DST),
                      argData<float>(a, kDynamicScaleArg), argData<float>(a, kDynamicZeroArg),
                      argData<int32_t>(a, kDynamicZeroS32Arg));
      return;
    }
    default:
      throw Error(ErrorCode::kInternal, "dnnl module: unknown own kernel");
  }
}

}  // namespace

void DnnlModule::execute(const LoadedFunction& lf, Workspace& ws, size_t slot, uint32_t fn,
                         const std::vector<ir::Tensor>& inputs, const std::vector<ir::Tensor>& outputs,
                         runtime::ProfileSink* profile) const {
  for (Workspace::Binding& b : ws.bindings[slot])
    b.memory.set_data_handle(b.input ? inputs[b.index].data : outputs[b.index].data);
  // Small steps run on one thread (stepThreads): oneDNN's simple primitives take the
  // team size of the executing thread, so it is set around them, and the run's own
  // size again when the steps are done or one fails.
  const int run_threads = omp_get_max_threads();
  const OmpThreadsScope restore(run_threads);
  int team = run_threads;
  // A run on a team of one (block mode) while the module was made for more threads:
  // the steps made for the team have one-thread twins.
  const SerialSteps* serial = run_threads == 1 && threads_ > 1 && !lf.program.empty() ? &serialSteps(lf, fn) : nullptr;
  if (serial && ws.serial_args[slot].empty())
    ws.serial_args[slot] = serialArgs(ws.args[slot], serial->primitives, serial->scratchpads, ws.scratch, ws.scratch_bytes);
  size_t s = 0;
  try {
    for (; s < lf.steps.size(); ++s) {
      runtime::teamWaitCheckpoint();
      if (const int want = std::min(lf.steps[s].threads, run_threads); want != team)
        omp_set_num_threads(team = want);
      const bool alone = serial && !ws.serial_args[slot][s].c_args.empty();
      const Workspace::StepArgs& a = alone ? ws.serial_args[slot][s] : ws.args[slot][s];
      const LoadedStep& ls = lf.steps[s];
      // On the CPU engine a primitive has finished when execute returns.
      auto run = [&] {
        if (isOwnKernel(ls.kind)) return runOwnKernel(ls.kind, ls.window, ls.epsilon, ls.alpha, ls.alg, a);
        if (ls.concat) return runPlainConcat(*ls.concat, a);
        if (ls.transpose)
          return plainTranspose(*ls.transpose, argData<const std::byte>(a, DNNL_ARG_SRC), argData<std::byte>(a, DNNL_ARG_DST));
        if (ls.quantize)
          return quantizeCopy(*ls.quantize, argData<const float>(a, DNNL_ARG_SRC), argData<uint8_t>(a, DNNL_ARG_DST));
        if (ls.max_pool)
          return floatMaxPool(argData<const float>(a, DNNL_ARG_SRC), argData<float>(a, DNNL_ARG_DST), *ls.max_pool);
        if (ls.int_matmul) return runIntMatMul(*ls.int_matmul, a);
        if (ls.float_matmul)
          return floatMatMul(*ls.float_matmul, argData<const float>(a, DNNL_ARG_SRC),
                             argData<const float>(a, DNNL_ARG_WEIGHTS), argData<float>(a, DNNL_ARG_DST));
        const dnnl_primitive_t primitive = alone ? serial->primitives[s].get() : ls.primitive.get();
        dnnl::error::wrap_c_api(
            dnnl_primitive_execute(primitive, ws.stream.get(), int(a.c_args.size()), a.c_args.data()),
            "could not execute a primitive");
      };
      if (!profile) {
        run();
        continue;
      }
      runtime::ProfileScope event(*profile, ls.label, "primitive", 2);
      run();
      event.end();
      std::call_once(ls.described->made, [&] {
        std::vector<std::pair<int, memory::desc>> args;
        for (const LoadedArg& la : ls.args) args.emplace_back(la.key, la.md);
        ls.described->args = describeStep(ls.kind, ls.implementation, ls.post_ops, args);
      });
      event.args(ls.described->args);
    }
    ws.stream.wait();
  } catch (const dnnl::error& e) {
    throw Error(ErrorCode::kInternal,
                "dnnl module: function " + std::to_string(fn) + " step " + std::to_string(s) + " ('" +
                    (s < lf.steps.size() ? lf.steps[s].label : "") + "') failed: " + e.what());
  }
}

namespace {

// Steps of a replayed function that read stored weights in a layout oneDNN would not
// choose for them at these shapes (it is asked with the weights left to it): what a
// shape other than the representative one costs in layout.
size_t weightsKept(const Function& fn) {
  size_t kept = 0;
  for (const Step& step : fn.steps) {
    const Arg* w = step.find(DNNL_ARG_WEIGHTS);
    if (!w || w->source != ArgSource::kConstant || w->chosen) continue;
    if (step.kind != StepKind::kConvolution && step.kind != StepKind::kDeconvolution && step.kind != StepKind::kMatMul)
      continue;
    Step probe = step;
    probe.find(DNNL_ARG_WEIGHTS)->chosen = true;
    try {
      dnnl::primitive_desc_base pd = makePrimitiveDesc(probe, cpuEngine());
      if (!sameDesc(pd.query_md(dnnl::query::exec_arg_md, DNNL_ARG_WEIGHTS), w->md)) ++kept;
    } catch (const dnnl::error&) {
      // oneDNN has nothing better to offer than the stored layout.
    }
  }
  return kept;
}

bool sameShapes(const std::vector<std::vector<int64_t>>& shapes, const std::vector<ir::Tensor>& tensors) {
  if (shapes.size() != tensors.size()) return false;
  for (size_t i = 0; i < shapes.size(); ++i)
    if (shapes[i] != tensors[i].shape) return false;
  return true;
}

}  // namespace

bool DnnlModule::shapePolymorphic(uint32_t fn) const { return fn < poly_.size() && poly_[fn].program != nullptr; }

std::shared_ptr<DnnlModule::Instance> DnnlModule::instance(uint32_t fn, const std::vector<ir::Tensor>& inputs) const {
  if (!shapePolymorphic(fn))
    throw Error(ErrorCode::kUnsupported,
                "dnnl module: function " + std::to_string(fn) + " was compiled for fixed shapes only");
  const Poly& p = poly_[fn];
  if (inputs.size() != p.representative->inputs.size())
    throw Error(ErrorCode::kInvalidArgument, "dnnl module: function " + std::to_string(fn) + " takes " +
                                                 std::to_string(p.representative->inputs.size()) + " inputs, given " +
                                                 std::to_string(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].dtype != ir::DType::kFloat32)
      throw Error(ErrorCode::kInvalidArgument, "dnnl module: function " + std::to_string(fn) + " input " +
                                                   std::to_string(i) + " must be float32, got " +
                                                   std::string(ir::dtypeName(inputs[i].dtype)));
  if (sameShapes(p.representative->inputs, inputs)) return p.representative;
  if (std::shared_ptr<Instance> hit = instances_.find(fn, inputs)) return hit;
  std::vector<std::vector<int64_t>> shapes;
  for (const ir::Tensor& t : inputs) shapes.push_back(t.shape);
  return instances_.insert(fn, inputs, makeInstance(fn, shapes));
}

std::shared_ptr<DnnlModule::Instance> DnnlModule::makeInstance(uint32_t fn,
                                                               const std::vector<std::vector<int64_t>>& shapes) const {
  const PolyFunction& p = *poly_[fn].program;
  const std::string where = "function " + std::to_string(fn) + " at " + [&] {
    std::string s;
    for (size_t i = 0; i < shapes.size(); ++i) s += (i ? ", " : "") + ir::shapeStr(shapes[i]);
    return s;
  }();
  Function lowered;
  ir::Graph at;
  try {
    at = regionAt(p.graph, shapes);
    // Primitives are created for the thread count runs use, as at load.
    omp_set_num_threads(threads_);
    lowered = replayFunction(p, shapes);
  } catch (const Error& e) {
    throw Error(e.code(), "dnnl module: " + where + ": " + e.what());
  }
  auto inst = std::make_shared<Instance>();
  inst->inputs = shapes;
  for (ir::ValueId out : at.outputs) inst->outputs.push_back(at.typeOf(out).staticShape());
  try {
    inst->lf = loadFunction(lowered, where);
    inst->lf.fallback_steps += weightsKept(lowered);
  } catch (const dnnl::error& e) {
    throw Error(ErrorCode::kUnsupported, "dnnl module: oneDNN rejects " + where + ": " + e.what());
  }
  ++instances_created_;
  return inst;
}

std::vector<std::vector<int64_t>> DnnlModule::outputShapes(uint32_t fn, const std::vector<ir::Tensor>& inputs) const {
  return instance(fn, inputs)->outputs;
}

void DnnlModule::runPolymorphic(uint32_t fn, const std::vector<ir::Tensor>& inputs,
                                const std::vector<ir::Tensor>& outputs, runtime::ProfileSink* profile) const {
  std::shared_ptr<Instance> inst = instance(fn, inputs);
  if (outputs.size() != inst->outputs.size())
    throw Error(ErrorCode::kInternal, "dnnl module: function " + std::to_string(fn) + " has " +
                                          std::to_string(inst->outputs.size()) + " outputs, called with " +
                                          std::to_string(outputs.size()));
  for (size_t o = 0; o < outputs.size(); ++o)
    if (outputs[o].dtype != ir::DType::kFloat32 || outputs[o].shape != inst->outputs[o])
      throw Error(ErrorCode::kInvalidArgument,
                  "dnnl module: function " + std::to_string(fn) + " output " + std::to_string(o) + " must be float32" +
                      ir::shapeStr(inst->outputs[o]) + " for these inputs, got " +
                      std::string(ir::dtypeName(outputs[o].dtype)) + ir::shapeStr(outputs[o].shape));
  const LoadedFunction& lf = inst->lf;
  WorkspaceLease lease(inst->workspaces, [&] { return newWorkspace({&lf}, lf.arena_bytes, lf.scratch_bytes); });
  execute(lf, *lease, 0, fn, inputs, outputs, profile);
}

size_t DnnlModule::scratchpadBytes() const {
  size_t bytes = arena_bytes_ + scratch_bytes_;
  for (const Poly& p : poly_)
    if (p.representative) bytes = std::max(bytes, p.representative->lf.arena_bytes + p.representative->lf.scratch_bytes);
  return bytes;
}

std::vector<std::vector<int64_t>> DnnlModule::representativeShapes(uint32_t fn) const {
  if (!shapePolymorphic(fn)) return {};
  return poly_[fn].representative->inputs;
}

size_t DnnlModule::instanceFallbackSteps(uint32_t fn, const std::vector<ir::Tensor>& inputs) const {
  return instance(fn, inputs)->lf.fallback_steps;
}

std::vector<DnnlModule::StepInfo> DnnlModule::steps(uint32_t fn) const {
  std::vector<StepInfo> out;
  for (const LoadedStep& ls : functions_.at(fn).steps)
    out.push_back({ls.kind, ls.label, ls.implementation, ls.post_ops});
  return out;
}

std::vector<DnnlModule::StepInfo> DnnlModule::instanceSteps(uint32_t fn, const std::vector<ir::Tensor>& inputs) const {
  std::vector<StepInfo> out;
  for (const LoadedStep& ls : instance(fn, inputs)->lf.steps)
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
  std::lock_guard<std::mutex> lock(workspaces_.mutex);
  return workspaces_.created;
}

runtime::ModuleKind dnnlModuleKind() {
  return {kModuleKind, [](const runtime::ModuleLoadContext& ctx) -> std::shared_ptr<runtime::RuntimeModule> {
            return DnnlModule::load(ctx);
          }};
}

}  // namespace partita::dnnl_backend
