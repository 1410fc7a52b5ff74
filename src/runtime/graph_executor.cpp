#include "runtime/graph_executor.h"

#include <omp.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>

#include "kernels/control_flow.h"
#include "kernels/op_util.h"
#include "partita/error.h"
#include "runtime/control_flow.h"
#include "runtime/graph_validate.h"
#include "runtime/team_wait.h"

namespace partita::runtime {

namespace {
std::vector<IoSpec> ioSpecs(const ir::Graph& g, const std::vector<ir::ValueId>& ids) {
  std::vector<IoSpec> out;
  for (ir::ValueId v : ids) out.push_back({g.value(v).name, g.value(v).type});
  return out;
}

std::string madeBy(const ir::Graph& g, ir::ValueId v, const ir::Node& node) {
  return "value '" + g.value(v).name + "' (made by " + node.op_type + " node '" + node.name + "')";
}

// Whether a value made at run time has the type the steps after it were compiled for:
// its dtype, and its rank and known dims when the static type has them.
bool fits(const ir::TensorType& actual, const ir::TensorType& compiled) {
  if (compiled.dtype != ir::DType::kUndefined && actual.dtype != compiled.dtype) return false;
  if (!actual.isTensor() || !compiled.isTensor()) return kernels::kindsFit(compiled, actual);
  if (!compiled.has_rank) return true;
  if (actual.rank() != compiled.rank()) return false;
  for (size_t i = 0; i < compiled.rank(); ++i)
    if (compiled.dims[i].isKnown() && actual.dims[i].value != compiled.dims[i].value) return false;
  return true;
}
// Whether a node reads or makes a sequence or optional.
bool touchesAggregates(const ir::Graph& g, const ir::Node& node) {
  for (const auto* ids : {&node.inputs, &node.outputs})
    for (ir::ValueId v : *ids)
      if (v != ir::kNoValue && !g.typeOf(v).isTensor()) return true;
  return false;
}
}  // namespace

GraphExecutor::GraphExecutor(std::shared_ptr<const ir::Graph> graph, std::shared_ptr<const ConstStore> store,
                             std::vector<std::shared_ptr<const RuntimeModule>> modules, RunOptions options)
    : Executor(ioSpecs(*graph, graph->inputs), ioSpecs(*graph, graph->outputs), options),
      graph_(std::move(graph)),
      store_(std::move(store)),
      modules_(std::move(modules)),
      plans_(shapeCacheEntries(options.shape_cache)) {
  const ir::Graph& g = *graph_;
  const size_t nvalues = g.values.size();
  placement_.assign(nvalues, Placement::kUnused);
  offset_.assign(nvalues, 0);
  last_use_.assign(nvalues, -1);

  for (ir::ValueId in : g.inputs) placement_[size_t(in)] = Placement::kInput;
  for (size_t v = 0; v < nvalues; ++v)
    if (g.values[v].isConstant()) placement_[v] = Placement::kConstant;

  // Every host node checked as the importer checks it, before anything runs.
  const std::vector<bool> dynamic = validateGraph(g, *store_, options.limits);
  // A module's own workspace (a dnnl module's temporaries and scratchpad, whose sizes
  // its blob declares) is held to the same limit as any one value: a file cannot make
  // a session map and zero more than the caller allows.
  for (size_t m = 0; m < modules_.size(); ++m)
    if (modules_[m] && modules_[m]->scratchpadBytes() > options.limits.max_bytes)
      throw Error(ErrorCode::kInvalidModel,
                  "module " + std::to_string(m) + " (" + std::string(modules_[m]->kind()) + "): its workspace of " +
                      std::to_string(modules_[m]->scratchpadBytes()) + " bytes is over the limit of " +
                      std::to_string(options.limits.max_bytes) + " (TensorLimits::max_bytes)");
  steps_.resize(g.nodes.size());
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const ir::Node& node = g.nodes[n];
    if (isCallNode(node)) {
      int64_t m = node.attrs.getInt("module", -1);
      if (m < 0 || size_t(m) >= modules_.size())
        throw Error(ErrorCode::kInvalidArtifact, "call node '" + node.name + "' refers to module " + std::to_string(m) +
                                                     " but the model has " + std::to_string(modules_.size()));
      steps_[n].module = modules_[size_t(m)].get();
      steps_[n].call_details = std::make_shared<Step::CallDetails>();
      steps_[n].function = uint32_t(node.attrs.getInt("function", 0));
    } else if (node.hasSubgraphs()) {
      // If, Loop, Scan: their subgraphs become executors of their own (validated as
      // this graph is, planned once).
      flows_.push_back(ControlFlow::create(node, graph_, store_, modules_, options));
      steps_[n].flow = flows_.back().get();
    } else {
      const kernels::OpDef* op = kernels::OpRegistry::global().find(node.domain, node.op_type);
      // Sequences and optionals go through the op's value kernel (their length is data).
      const bool values = op && op->run_values && (!op->hasKernel() || touchesAggregates(g, node));
      if (!op || (!op->hasKernel() && !values))
        throw Error(ErrorCode::kUnsupported,
                    "no host kernel for op " + node.op_type + " (node '" + node.name + "')");
      steps_[n].op = op;
      steps_[n].values = values;
    }
    for (ir::ValueId in : node.inputs)
      if (in != ir::kNoValue) last_use_[size_t(in)] = int32_t(n);
    // Dynamic when an input or output has no static shape, or when the step's own
    // inference does not give the static type recorded for it (validateGraph): then
    // its outputs are checked at run time against what the later steps were built for.
    steps_[n].dynamic = dynamic[n] || steps_[n].values;
    any_dynamic_ |= steps_[n].dynamic;
    if (steps_[n].module && dynamic[n] && !steps_[n].module->shapePolymorphic(steps_[n].function))
      throw Error(ErrorCode::kInvalidArtifact, "call node '" + node.name +
                                                   "' has values of unknown shape, but function " +
                                                   std::to_string(steps_[n].function) + " of module " +
                                                   std::to_string(node.attrs.getInt("module", -1)) +
                                                   " was compiled for fixed shapes");
  }
  for (ir::ValueId out : g.outputs) last_use_[size_t(out)] = int32_t(steps_.size());

  std::vector<BufferRequest> requests;
  std::vector<ir::ValueId> planned;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    for (ir::ValueId out : g.nodes[n].outputs) {
      if (out == ir::kNoValue) continue;
      if (steps_[n].dynamic) {
        placement_[size_t(out)] = Placement::kDynamic;
        continue;
      }
      placement_[size_t(out)] = Placement::kArena;
      const ir::TensorType& t = g.typeOf(out);
      int32_t last = std::max(last_use_[size_t(out)], int32_t(n));
      requests.push_back({size_t(t.numel()) * ir::dtypeSize(t.dtype), int32_t(n), last});
      planned.push_back(out);
    }
  }
  plan_ = planMemory(requests);
  for (size_t i = 0; i < planned.size(); ++i) offset_[size_t(planned[i])] = plan_.offsets[i];
}

GraphExecutor::~GraphExecutor() = default;

size_t GraphExecutor::mappedArenaBytes() const {
  size_t bytes = arenaMappedBytes(plannedActivationBytes());
  for (const auto& m : modules_) bytes += arenaMappedBytes(m->scratchpadBytes());
  return bytes;
}

size_t GraphExecutor::dynamicSteps() const {
  size_t n = 0;
  for (const Step& s : steps_) n += s.dynamic;
  return n;
}

std::unique_ptr<GraphExecutor::RunState> GraphExecutor::newRunState() const {
  auto state = std::make_unique<RunState>();
  state->arena_storage = ArenaMemory(plan_.arena_bytes);
  state->arena = state->arena_storage.data();
  // Constants and planned intermediates are bound here, once per state: a run only
  // writes inputs and data-dependent values into the table.
  const ir::Graph& g = *graph_;
  state->values.resize(g.values.size());
  for (size_t v = 0; v < g.values.size(); ++v) {
    if (placement_[v] == Placement::kConstant) state->values[v] = store_->get(g.values[v].constant);
    if (placement_[v] == Placement::kArena) {
      const ir::TensorType& t = g.values[v].type;
      state->values[v] = ir::Tensor{t.dtype, t.staticShape(), static_cast<std::byte*>(state->arena) + offset_[v]};
    }
  }
  state->flows.resize(steps_.size());
  for (size_t n = 0; n < steps_.size(); ++n)
    if (steps_[n].flow) state->flows[n] = steps_[n].flow->newState();
  return state;
}

namespace {
// Appends "float32[1,3,224,224]" (without a stream: this runs for every profiled step).
void appendType(std::string& s, const ir::Tensor& t) {
  s += ir::dtypeName(t.dtype);
  s += '[';
  char buf[24];
  for (size_t d = 0; d < t.shape.size(); ++d) {
    if (d) s += ',';
    s.append(buf, std::to_chars(buf, buf + sizeof buf, t.shape[d]).ptr);
  }
  s += ']';
}

// "float32[1,3,224,224], int64[2]" for the values a node reads or makes ("" for an
// omitted optional one).
std::string shapesOf(const std::vector<ir::ValueId>& ids, const std::vector<ir::Tensor>& values) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ", ";
    if (ids[i] == ir::kNoValue) continue;
    const ir::Tensor& t = values[size_t(ids[i])];
    if (ir::isBoxed(t))  // a sequence or optional: its kind and what its elements share
      s += ir::unbox(t).type().str();
    else
      appendType(s, t);
  }
  return s;
}

std::string joined(const std::vector<std::string>& v) {
  size_t size = v.size();
  for (const std::string& x : v) size += x.size();
  std::string s;
  s.reserve(size);
  for (const std::string& x : v) {
    if (!s.empty()) s += ',';
    s += x;
  }
  return s;
}
}  // namespace

namespace {
// Ends a run's profile event with its details (after the clock stopped).
void endRunEvent(std::optional<ProfileScope>& run_event, const std::vector<ir::Tensor>& inputs, int threads,
                 size_t steps) {
  if (!run_event) return;
  run_event->end();
  run_event->arg("executor", std::string(GraphExecutor::kKind));
  run_event->arg("threads", std::to_string(threads));
  run_event->arg("steps", std::to_string(steps));
  std::string shapes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i) shapes += ", ";
    appendType(shapes, inputs[i]);
  }
  run_event->arg("inputs", std::move(shapes));
}
}  // namespace

std::vector<ir::OwnedTensor> GraphExecutor::run(ExecutorState& state, const std::vector<ir::Tensor>& inputs,
                                                ProfileSink* profile) const {
  std::vector<ir::OwnedTensor> outputs;
  runInto(state, inputs, outputs, profile);
  return outputs;
}

void GraphExecutor::runInto(ExecutorState& state, const std::vector<ir::Tensor>& inputs,
                            std::vector<ir::OwnedTensor>& outputs, ProfileSink* profile) const {
  auto* s = dynamic_cast<RunState*>(&state);
  if (!s) throw Error(ErrorCode::kInternal, "graph executor given another executor's state");
  runInto(*s, inputs, outputs, profile);
}

std::vector<RunValue> GraphExecutor::runValues(ExecutorState& state,
                                               const std::vector<ir::Tensor>& inputs) const {
  auto* s = dynamic_cast<RunState*>(&state);
  if (!s) throw Error(ErrorCode::kInternal, "graph executor given another executor's state");
  omp_set_num_threads(options().threads);
  const TeamWaitScope wait(options().threads);
  execute(*s, inputs, nullptr, nullptr);
  const ir::Graph& g = *graph_;
  std::vector<RunValue> out(g.outputs.size());
  for (size_t o = 0; o < g.outputs.size(); ++o) {
    const ir::Tensor& t = s->values[size_t(g.outputs[o])];
    if (ir::isBoxed(t))
      out[o].aggregate = ir::shareBoxed(t);
    else
      out[o].tensor = ir::OwnedTensor::copyOf(t);
  }
  return out;
}

std::vector<ir::OwnedTensor> GraphExecutor::run(RunState& state, const std::vector<ir::Tensor>& inputs,
                                                ProfileSink* profile) const {
  std::vector<ir::OwnedTensor> outputs;
  runInto(state, inputs, outputs, profile);
  return outputs;
}

void GraphExecutor::runInto(RunState& state, const std::vector<ir::Tensor>& inputs,
                            std::vector<ir::OwnedTensor>& outputs, ProfileSink* profile) const {
  for (const IoSpec& out : Executor::outputs())
    if (!out.type.isTensor())
      throw Error(ErrorCode::kUnsupported, "output '" + out.name + "' is " + out.type.kindStr() +
                                               "; this way of running a model returns tensors only");
  std::optional<ProfileScope> run_event;
  if (profile) run_event.emplace(*profile, "run", "run", 0);
  // The team size of this model's runs: OpenMP's per-thread setting, so sessions of
  // models with different thread counts can run in one process.
  omp_set_num_threads(options().threads);
  // Whether the team's idle threads spin or sleep during this run (team_wait.h).
  const TeamWaitScope wait(options().threads);
  execute(state, inputs, profile, nullptr);
  collectOutputs(state, outputs);
  endRunEvent(run_event, inputs, options().threads, steps_.size());
}

const std::vector<ir::Tensor>& GraphExecutor::runBody(RunState& state, const std::vector<ir::Tensor>& inputs,
                                                      const std::vector<void*>* targets, ProfileSink* profile) const {
  execute(state, inputs, profile, targets);
  const ir::Graph& g = *graph_;
  state.outputs.resize(g.outputs.size());
  for (size_t o = 0; o < g.outputs.size(); ++o) state.outputs[o] = state.values[size_t(g.outputs[o])];
  // Planned outputs made in a target go back to their places for the next run.
  if (targets)
    for (size_t o = 0; o < targets->size() && o < g.outputs.size(); ++o) {
      const ir::ValueId out = g.outputs[o];
      if ((*targets)[o] && placement_[size_t(out)] == Placement::kArena)
        state.values[size_t(out)].data = static_cast<std::byte*>(state.arena) + offset_[size_t(out)];
    }
  return state.outputs;
}

bool GraphExecutor::owns(const RunState& state, const void* p) const {
  if (!p) return false;
  auto within = [p](const void* base, size_t size) {
    auto b = reinterpret_cast<uintptr_t>(base), q = reinterpret_cast<uintptr_t>(p);
    return base && q >= b && q < b + size;
  };
  if (within(state.arena, plan_.arena_bytes) || within(state.shape_arena.data(), state.shape_arena.size())) return true;
  for (const ir::OwnedTensor& t : state.dynamic)
    if (within(t.data(), t.nbytes())) return true;
  return false;
}

void GraphExecutor::execute(RunState& state, const std::vector<ir::Tensor>& inputs, ProfileSink* profile,
                            const std::vector<void*>* targets) const {
  const ir::Graph& g = *graph_;
  if (inputs.size() != g.inputs.size())
    throw Error(ErrorCode::kInvalidArgument, "the model takes " + std::to_string(g.inputs.size()) +
                                                 " inputs but " + std::to_string(inputs.size()) + " were given");
  auto& values = state.values;
  state.dynamic.clear();
  state.aggregates.clear();

  for (size_t i = 0; i < inputs.size(); ++i) {
    checkInput(i, inputs[i]);
    values[size_t(g.inputs[i])] = inputs[i];
  }
  // A body output planned in this graph's arena can be made where the caller wants it.
  if (targets)
    for (size_t o = 0; o < targets->size() && o < g.outputs.size(); ++o) {
      const ir::ValueId out = g.outputs[o];
      if ((*targets)[o] && placement_[size_t(out)] == Placement::kArena) values[size_t(out)].data = (*targets)[o];
    }
  const StoreConstants constants(*store_);

  // Symbolic dims: the plan of this input-shape signature, or a first run that makes it.
  std::shared_ptr<const ShapePlan> plan;
  if (any_dynamic_) {
    plan = plans_.find(0, inputs);
    if (!plan) {
      state.plan = nullptr;  // the discovery run binds values to run-time storage
      plans_.insert(0, inputs, discover(state, constants, profile));
      return;
    }
    if (state.plan != plan) bindPlan(state, plan);
  }
  runSteps(state, constants, plan.get(), profile);
}

void GraphExecutor::runSteps(RunState& state, const kernels::ConstResolver& constants, const ShapePlan* plan,
                             ProfileSink* profile) const {
  const ir::Graph& g = *graph_;
  for (size_t n = 0; n < steps_.size(); ++n) {
    const ir::Node& node = g.nodes[n];
    try {
      teamWaitCheckpoint();
      const bool planned = plan && plan->step_planned[n];
      if (profile)
        runStepProfiled(state, n, constants, planned, *profile);
      else
        runStep(state, n, constants, planned, nullptr);
    } catch (const std::bad_alloc&) {
      // A kernel's scratch or a data-dependent value the machine cannot hold.
      throw Error(ErrorCode::kInvalidArgument, node.op_type + " node '" + node.name + "': out of memory");
    }
  }
}

void GraphExecutor::collectOutputs(const RunState& state, std::vector<ir::OwnedTensor>& outputs) const {
  const ir::Graph& g = *graph_;
  outputs.resize(g.outputs.size());
  for (size_t o = 0; o < g.outputs.size(); ++o) {
    const ir::Tensor& t = state.values[size_t(g.outputs[o])];
    ir::OwnedTensor& to = outputs[o];
    if (to.data() && to.dtype() == t.dtype && to.shape() == t.shape) {
      if (t.nbytes()) std::memcpy(to.data(), t.data, t.nbytes());
    } else {
      to = ir::OwnedTensor::copyOf(t);
    }
  }
}

void GraphExecutor::runStepProfiled(RunState& state, size_t n, const kernels::ConstResolver& constants,
                                    bool planned, ProfileSink& profile) const {
  const ir::Graph& g = *graph_;
  const ir::Node& node = g.nodes[n];
  const Step& step = steps_[n];
  ProfileScope event(profile, node.name.empty() ? node.op_type : node.name, step.module ? "region" : "node", 1);
  runStep(state, n, constants, planned, &profile);
  event.end();
  // The details, formatted after the clock stopped.
  event.reserveArgs(8);
  if (step.module) {
    event.arg("op", std::string(kCallDomain) + "." + kCallOp);
    event.arg("backend", std::string(step.module->kind()));
    event.arg("module", std::to_string(node.attrs.getInt("module", -1)));
    event.arg("function", std::to_string(step.function));
    // The region's ops and nodes, joined once (EfficientNet-B0's one region names 240
    // nodes: joined at every run, they took about 0.2 ms of a profiled run).
    std::call_once(step.call_details->made, [&] {
      if (node.attrs.find("ops")) step.call_details->ops = joined(node.attrs.getStrings("ops"));
      if (node.attrs.find("nodes")) step.call_details->nodes = joined(node.attrs.getStrings("nodes"));
    });
    if (node.attrs.find("ops")) event.arg("ops", step.call_details->ops);
    if (node.attrs.find("nodes")) event.arg("nodes", step.call_details->nodes);
  } else {
    event.arg("op", node.domain.empty() ? node.op_type : node.domain + "." + node.op_type);
    event.arg("backend", "host");
    if (step.dynamic) event.arg("dynamic", "shapes inferred at run time");
  }
  event.arg("inputs", shapesOf(node.inputs, state.values));
  event.arg("outputs", shapesOf(node.outputs, state.values));
}

void GraphExecutor::runStep(RunState& state, size_t n, const kernels::ConstResolver& constants, bool planned,
                            ProfileSink* profile) const {
  if (steps_[n].flow) {
    runFlow(state, n, planned, profile);
    return;
  }
  if (steps_[n].values) {
    runValueStep(state, n);
    return;
  }
  const ir::Graph& g = *graph_;
  const ir::Node& node = g.nodes[n];
  auto& values = state.values;
  kernels::KernelContext ctx{node, &constants, {}, {}, options().threads};
  ctx.inputs.reserve(node.inputs.size());
  for (ir::ValueId in : node.inputs) ctx.inputs.push_back(in == ir::kNoValue ? ir::Tensor{} : values[size_t(in)]);
  if (steps_[n].dynamic && !planned) {
    std::vector<ir::TensorType> out_types;
    if (steps_[n].module) {
      // A shape-polymorphic module function: the module says what its inputs make.
      std::vector<std::vector<int64_t>> shapes = steps_[n].module->outputShapes(steps_[n].function, ctx.inputs);
      if (shapes.size() != node.outputs.size())
        throw Error(ErrorCode::kInternal, "call node '" + node.name + "': its module gives " +
                                              std::to_string(shapes.size()) + " output shapes for " +
                                              std::to_string(node.outputs.size()) + " outputs");
      for (size_t o = 0; o < shapes.size(); ++o) {
        ir::DType dtype = node.outputs[o] == ir::kNoValue ? ir::DType::kFloat32 : g.typeOf(node.outputs[o]).dtype;
        out_types.push_back(ir::TensorType::of(dtype, shapes[o]));
        if (node.outputs[o] != ir::kNoValue)
          ir::checkLimits(out_types.back(), options().limits, ErrorCode::kInvalidArgument,
                          madeBy(g, node.outputs[o], node));
      }
    } else {
      std::vector<ir::TensorType> in_types;
      std::vector<const ir::Tensor*> in_values;
      for (const ir::Tensor& t : ctx.inputs) {
        in_types.push_back(t.defined() ? ir::typeOf(t) : ir::TensorType{});
        in_values.push_back(t.defined() ? &t : nullptr);
      }
      out_types = kernels::inferNode(node, in_types, in_values, &constants, options().limits, &g);
    }
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      ir::ValueId out = node.outputs[o];
      if (out == ir::kNoValue) continue;
      if (!out_types[o].isStatic())
        throw Error(ErrorCode::kInternal, madeBy(g, out, node) + ": shape unknown even with all inputs known");
      // The steps after this one were compiled for the value's static type: what the
      // data made must be that (a declared shape is never trusted).
      if (!fits(out_types[o], g.typeOf(out)))
        throw Error(ErrorCode::kInvalidArgument, madeBy(g, out, node) + " is " + out_types[o].str() +
                                                     " at run time, but the model was compiled for " +
                                                     g.typeOf(out).str());
      state.dynamic.emplace_back(out_types[o].dtype, out_types[o].staticShape());
      values[size_t(out)] = state.dynamic.back().view();
    }
  }
  ctx.outputs.reserve(node.outputs.size());
  for (ir::ValueId out : node.outputs) ctx.outputs.push_back(out == ir::kNoValue ? ir::Tensor{} : values[size_t(out)]);
  if (steps_[n].module) {
    if (profile)
      steps_[n].module->runProfiled(steps_[n].function, ctx.inputs, ctx.outputs, *profile);
    else
      steps_[n].module->run(steps_[n].function, ctx.inputs, ctx.outputs);
  } else {
    steps_[n].op->run(ctx);
  }
}

void GraphExecutor::runFlow(RunState& state, size_t n, bool planned, ProfileSink* profile) const {
  const ir::Graph& g = *graph_;
  const ir::Node& node = g.nodes[n];
  auto& values = state.values;
  std::vector<ir::Tensor> inputs;
  inputs.reserve(node.inputs.size());
  for (ir::ValueId in : node.inputs) inputs.push_back(in == ir::kNoValue ? ir::Tensor{} : values[size_t(in)]);
  std::vector<ir::Tensor> planned_out(node.outputs.size());
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    const ir::ValueId out = node.outputs[o];
    if (out != ir::kNoValue && (placement_[size_t(out)] == Placement::kArena || (steps_[n].dynamic && planned)))
      planned_out[o] = values[size_t(out)];
  }
  const OutputAllocator allocate = [&](size_t o, ir::DType dtype, const std::vector<int64_t>& shape) -> ir::Tensor {
    if (o >= node.outputs.size() || node.outputs[o] == ir::kNoValue) return {};
    const ir::ValueId out = node.outputs[o];
    const ir::TensorType made = ir::TensorType::of(dtype, shape);
    if (planned_out[o].defined()) {
      if (planned_out[o].dtype != dtype || planned_out[o].shape != shape)
        throw Error(ErrorCode::kInvalidArgument, madeBy(g, out, node) + " is " + made.str() +
                                                     " at run time, but the model was compiled for " +
                                                     ir::typeOf(planned_out[o]).str());
      return planned_out[o];
    }
    ir::checkLimits(made, options().limits, ErrorCode::kInvalidArgument, madeBy(g, out, node));
    if (!fits(made, g.typeOf(out)))
      throw Error(ErrorCode::kInvalidArgument, madeBy(g, out, node) + " is " + made.str() +
                                                   " at run time, but the model was compiled for " +
                                                   g.typeOf(out).str());
    state.dynamic.emplace_back(dtype, shape);
    values[size_t(out)] = state.dynamic.back().view();
    return values[size_t(out)];
  };
  const AggregateOutput pass = [&](size_t o, const ir::Tensor& boxed) {
    if (o < node.outputs.size() && node.outputs[o] != ir::kNoValue)
      setAggregate(state, node.outputs[o], node, ir::shareBoxed(boxed));
  };
  steps_[n].flow->run(*state.flows[n], inputs, planned_out, allocate, pass, profile);
}

void GraphExecutor::setAggregate(RunState& state, ir::ValueId out, const ir::Node& node,
                                 ir::AggregatePtr a) const {
  const ir::Graph& g = *graph_;
  const ir::TensorType made = a->kindType();  // the elements' shapes are data: never checked
  if (!fits(made, g.typeOf(out)))
    throw Error(ErrorCode::kInvalidArgument, madeBy(g, out, node) + " is " + made.kindStr() +
                                                 " at run time, but the model was compiled for " +
                                                 g.typeOf(out).kindStr());
  state.values[size_t(out)] = ir::box(*a);
  state.aggregates.push_back(std::move(a));
}

void GraphExecutor::runValueStep(RunState& state, size_t n) const {
  const ir::Graph& g = *graph_;
  const ir::Node& node = g.nodes[n];
  auto& values = state.values;
  kernels::ValueKernelContext ctx{node, {}, {}, {}, {}, options().limits};
  for (ir::ValueId in : node.inputs)
    ctx.inputs.push_back(in == ir::kNoValue ? ir::Tensor{} : values[size_t(in)]);
  for (ir::ValueId out : node.outputs)
    ctx.output_types.push_back(out == ir::kNoValue ? ir::TensorType{} : g.typeOf(out));
  ctx.tensors.resize(node.outputs.size());
  ctx.aggregates.resize(node.outputs.size());
  steps_[n].op->run_values(ctx);
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    const ir::ValueId out = node.outputs[o];
    if (out == ir::kNoValue) continue;
    if (ctx.aggregates[o]) {
      setAggregate(state, out, node, std::move(ctx.aggregates[o]));
      continue;
    }
    const ir::TensorType made = ir::typeOf(ctx.tensors[o].view());
    if (!ctx.tensors[o].view().defined())
      throw Error(ErrorCode::kInternal, madeBy(g, out, node) + " was not made by its kernel");
    ir::checkLimits(made, options().limits, ErrorCode::kInvalidArgument, madeBy(g, out, node));
    if (!fits(made, g.typeOf(out)))
      throw Error(ErrorCode::kInvalidArgument, madeBy(g, out, node) + " is " + made.str() +
                                                   " at run time, but the model was compiled for " +
                                                   g.typeOf(out).str());
    state.dynamic.push_back(std::move(ctx.tensors[o]));
    values[size_t(out)] = state.dynamic.back().view();
  }
}

namespace {

// Whether a node's outputs hold the same contents whenever its inputs do: every op
// but the random ones.
bool deterministic(const ir::Node& node) {
  static const char* const kRandom[] = {"RandomNormal", "RandomNormalLike", "RandomUniform",
                                        "RandomUniformLike", "Multinomial", "Bernoulli"};
  for (const char* r : kRandom)
    if (node.op_type == r) return false;
  return true;
}

}  // namespace

// Runs every step, as the first run at this input-shape signature, and finds which
// values' shapes follow from the signature alone: a step's outputs do when its inputs'
// shapes do and its inference, given only the contents that follow from the signature
// too (constants, Shape and Size of such values, and what is computed from those),
// gives the shapes the run made. Those values are planned into one arena; the others
// (shapes from data) stay dynamic.
std::shared_ptr<const GraphExecutor::ShapePlan> GraphExecutor::discover(RunState& state,
                                                                        const kernels::ConstResolver& constants,
                                                                        ProfileSink* profile) const {
  const ir::Graph& g = *graph_;
  auto plan = std::make_shared<ShapePlan>();
  plan->step_planned.assign(steps_.size(), false);
  std::vector<uint8_t> shape_known(g.values.size(), 0), contents_known(g.values.size(), 0);
  for (ir::ValueId in : g.inputs) shape_known[size_t(in)] = 1;
  for (size_t v = 0; v < g.values.size(); ++v)
    if (placement_[v] == Placement::kConstant) shape_known[v] = contents_known[v] = 1;

  std::vector<ir::TensorType> in_types;
  std::vector<const ir::Tensor*> in_values;
  for (size_t n = 0; n < steps_.size(); ++n) {
    const ir::Node& node = g.nodes[n];
    bool inputs_shaped = true, inputs_known = true;
    for (ir::ValueId in : node.inputs) {
      if (in == ir::kNoValue) continue;
      inputs_shaped &= shape_known[size_t(in)] != 0;
      inputs_known &= contents_known[size_t(in)] != 0;
    }
    bool planned = !steps_[n].dynamic;
    std::vector<ir::TensorType> predicted;
    if (steps_[n].values) {
      planned = false;  // sequences and optionals: made at run time, every run
    } else if (steps_[n].dynamic && inputs_shaped) {
      if (steps_[n].module) {
        planned = true;  // a module function's output shapes follow from its input shapes
      } else {
        in_types.clear();
        in_values.clear();
        for (ir::ValueId in : node.inputs) {
          const bool given = in != ir::kNoValue;
          in_types.push_back(given ? ir::runtimeTypeOf(state.values[size_t(in)]) : ir::TensorType{});
          in_values.push_back(given && contents_known[size_t(in)] ? &state.values[size_t(in)] : nullptr);
        }
        try {
          predicted = kernels::inferNode(node, in_types, in_values, &constants, options().limits, &g);
          planned = std::all_of(predicted.begin(), predicted.end(),
                                [](const ir::TensorType& t) { return t.dtype == ir::DType::kUndefined || t.isStatic(); });
        } catch (const Error&) {
          planned = false;  // the full inference below says what is wrong
        }
      }
    }
    try {
      if (profile)
        runStepProfiled(state, n, constants, false, *profile);
      else
        runStep(state, n, constants);
    } catch (const std::bad_alloc&) {
      throw Error(ErrorCode::kInvalidArgument, node.op_type + " node '" + node.name + "': out of memory");
    }
    // What inference predicted without the data must be what the run made.
    if (steps_[n].dynamic && !steps_[n].module && !steps_[n].values)
      for (size_t o = 0; planned && o < node.outputs.size(); ++o) {
        if (node.outputs[o] == ir::kNoValue) continue;
        if (o >= predicted.size() || !predicted[o].isStatic() ||
            predicted[o].staticShape() != state.values[size_t(node.outputs[o])].shape)
          planned = false;
      }
    const bool contents = steps_[n].module == nullptr && steps_[n].flow == nullptr && deterministic(node) &&
                          ((node.domain.empty() && (node.op_type == "Shape" || node.op_type == "Size"))
                               ? node.hasInput(0) && shape_known[size_t(node.inputs[0])] != 0
                               : inputs_known);
    for (ir::ValueId out : node.outputs) {
      if (out == ir::kNoValue) continue;
      shape_known[size_t(out)] = planned;
      contents_known[size_t(out)] = planned && contents;
    }
    if (!steps_[n].dynamic) continue;
    plan->step_planned[n] = planned;
  }

  std::vector<BufferRequest> requests;
  for (size_t n = 0; n < steps_.size(); ++n) {
    if (!steps_[n].dynamic || !plan->step_planned[n]) continue;
    for (ir::ValueId out : g.nodes[n].outputs) {
      if (out == ir::kNoValue) continue;
      const ir::Tensor& t = state.values[size_t(out)];
      requests.push_back({t.nbytes(), int32_t(n), std::max(last_use_[size_t(out)], int32_t(n))});
      plan->values.push_back({out, t.dtype, t.shape, 0});
    }
  }
  MemoryPlan memory = planMemory(requests);
  for (size_t i = 0; i < plan->values.size(); ++i) plan->values[i].offset = memory.offsets[i];
  plan->arena_bytes = memory.arena_bytes;
  return plan;
}

// Binds the values a plan places to the state's arena for them (grown when too small).
void GraphExecutor::bindPlan(RunState& state, const std::shared_ptr<const ShapePlan>& plan) const {
  if (state.shape_arena.size() < plan->arena_bytes) {
    state.shape_arena = ArenaMemory();
    state.shape_arena = ArenaMemory(plan->arena_bytes);
  }
  std::byte* base = state.shape_arena.data();
  for (const ShapePlan::Planned& p : plan->values) {
    ir::Tensor& t = state.values[size_t(p.value)];
    t.dtype = p.dtype;
    t.shape.assign(p.shape.begin(), p.shape.end());
    t.data = base + p.offset;
  }
  state.plan = plan;
}

}  // namespace partita::runtime
