#include "runtime/graph_executor.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include <omp.h>

#include "kernels/op_util.h"
#include "runtime/graph_validate.h"
#include "runtime/team_wait.h"
#include "partita/error.h"

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
  if (!compiled.has_rank) return true;
  if (actual.rank() != compiled.rank()) return false;
  for (size_t i = 0; i < compiled.rank(); ++i)
    if (compiled.dims[i].isKnown() && actual.dims[i].value != compiled.dims[i].value) return false;
  return true;
}
}  // namespace

GraphExecutor::GraphExecutor(std::shared_ptr<const ir::Graph> graph, std::shared_ptr<const ConstStore> store,
                             std::vector<std::shared_ptr<const RuntimeModule>> modules, RunOptions options)
    : Executor(ioSpecs(*graph, graph->inputs), ioSpecs(*graph, graph->outputs), options),
      graph_(std::move(graph)),
      store_(std::move(store)),
      modules_(std::move(modules)) {
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
  steps_.resize(g.nodes.size());
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const ir::Node& node = g.nodes[n];
    if (isCallNode(node)) {
      int64_t m = node.attrs.getInt("module", -1);
      if (m < 0 || size_t(m) >= modules_.size())
        throw Error(ErrorCode::kInvalidArtifact, "call node '" + node.name + "' refers to module " + std::to_string(m) +
                                                     " but the model has " + std::to_string(modules_.size()));
      steps_[n].module = modules_[size_t(m)].get();
      steps_[n].function = uint32_t(node.attrs.getInt("function", 0));
    } else {
      const kernels::OpDef* op = kernels::OpRegistry::global().find(node.domain, node.op_type);
      if (!op || !op->hasKernel())
        throw Error(ErrorCode::kUnsupported,
                    "no host kernel for op " + node.op_type + " (node '" + node.name + "')");
      steps_[n].op = op;
    }
    for (ir::ValueId in : node.inputs)
      if (in != ir::kNoValue) last_use_[size_t(in)] = int32_t(n);
    // Dynamic when an input or output has no static shape, or when the step's own
    // inference does not give the static type recorded for it (validateGraph): then
    // its outputs are checked at run time against what the later steps were built for.
    steps_[n].dynamic = dynamic[n];
    if (steps_[n].module && dynamic[n])
      throw Error(ErrorCode::kUnsupported, "call node '" + node.name + "' has values of unknown shape");
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
  return state;
}

std::vector<ir::OwnedTensor> GraphExecutor::run(ExecutorState& state, const std::vector<ir::Tensor>& inputs) const {
  auto* s = dynamic_cast<RunState*>(&state);
  if (!s) throw Error(ErrorCode::kInternal, "graph executor given another executor's state");
  return run(*s, inputs);
}

std::vector<ir::OwnedTensor> GraphExecutor::run(RunState& state, const std::vector<ir::Tensor>& inputs) const {
  const ir::Graph& g = *graph_;
  if (inputs.size() != g.inputs.size())
    throw Error(ErrorCode::kInvalidArgument, "the model takes " + std::to_string(g.inputs.size()) +
                                                 " inputs but " + std::to_string(inputs.size()) + " were given");
  // The team size of this model's runs: OpenMP's per-thread setting, so sessions of
  // models with different thread counts can run in one process.
  omp_set_num_threads(options().threads);
  // Whether the team's idle threads spin or sleep during this run (team_wait.h).
  const TeamWaitScope wait(options().threads);
  auto& values = state.values;
  state.dynamic.clear();

  for (size_t i = 0; i < inputs.size(); ++i) {
    checkInput(i, inputs[i]);
    values[size_t(g.inputs[i])] = inputs[i];
  }
  const StoreConstants constants(*store_);

  for (size_t n = 0; n < steps_.size(); ++n) {
    const ir::Node& node = g.nodes[n];
    try {
      teamWaitCheckpoint();
      runStep(state, n, constants);
    } catch (const std::bad_alloc&) {
      // A kernel's scratch or a data-dependent value the machine cannot hold.
      throw Error(ErrorCode::kInvalidArgument, node.op_type + " node '" + node.name + "': out of memory");
    }
  }

  std::vector<ir::OwnedTensor> outputs;
  outputs.reserve(g.outputs.size());
  for (ir::ValueId out : g.outputs) {
    const ir::Tensor& t = values[size_t(out)];
    outputs.emplace_back(t.dtype, t.shape);
    if (t.nbytes()) std::memcpy(outputs.back().data(), t.data, t.nbytes());
  }
  return outputs;
}

void GraphExecutor::runStep(RunState& state, size_t n, const kernels::ConstResolver& constants) const {
  const ir::Graph& g = *graph_;
  const ir::Node& node = g.nodes[n];
  auto& values = state.values;
  kernels::KernelContext ctx{node, &constants, {}, {}, options().threads};
  ctx.inputs.reserve(node.inputs.size());
  for (ir::ValueId in : node.inputs) ctx.inputs.push_back(in == ir::kNoValue ? ir::Tensor{} : values[size_t(in)]);
  if (steps_[n].dynamic) {
    std::vector<ir::TensorType> in_types;
    std::vector<const ir::Tensor*> in_values;
    for (const ir::Tensor& t : ctx.inputs) {
      in_types.push_back(t.defined() ? ir::typeOf(t) : ir::TensorType{});
      in_values.push_back(t.defined() ? &t : nullptr);
    }
    std::vector<ir::TensorType> out_types =
        kernels::inferNode(node, in_types, in_values, &constants, options().limits, &g);
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
  if (steps_[n].module)
    steps_[n].module->run(steps_[n].function, ctx.inputs, ctx.outputs);
  else
    steps_[n].op->run(ctx);
}

}  // namespace partita::runtime
