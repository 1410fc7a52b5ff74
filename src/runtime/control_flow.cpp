#include "runtime/control_flow.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "kernels/control_flow.h"
#include "partita/error.h"
#include "runtime/graph_executor.h"

namespace partita::runtime {

namespace {

std::string describe(const ir::Node& node) { return node.op_type + " node '" + node.name + "'"; }

[[noreturn]] void failRun(const ir::Node& node, const std::string& msg) {
  throw Error(ErrorCode::kInvalidArgument, describe(node) + ": " + msg);
}

std::shared_ptr<const ir::Graph> subgraphOf(const ir::Node& node, const char* attr) {
  const ir::Attribute* a = node.attrs.find(attr);
  if (!a || a->kind != ir::Attribute::Kind::kGraph || !a->graph)
    throw Error(ErrorCode::kInvalidArtifact, describe(node) + " has no graph attribute '" + attr + "'");
  return a->graph;
}

// One subgraph's executor, with errors made while building it named by the node.
std::unique_ptr<GraphExecutor> bodyExecutor(const ir::Node& node, const char* attr,
                                            const std::shared_ptr<const ConstStore>& store,
                                            const std::vector<std::shared_ptr<const RuntimeModule>>& modules,
                                            const RunOptions& options) {
  try {
    return std::make_unique<GraphExecutor>(subgraphOf(node, attr), store, modules, options);
  } catch (const Error& e) {
    throw Error(e.code(), describe(node) + " subgraph '" + attr + "': " + e.what());
  }
}

// A value that must hold one element of `dtype` (a condition, a trip count).
void checkScalar(const ir::Node& node, const ir::Tensor& t, ir::DType dtype, const std::string& what) {
  if (t.dtype != dtype || t.numel() != 1)
    failRun(node, what + " must be one " + std::string(ir::dtypeName(dtype)) + " but is " +
                      std::string(ir::dtypeName(t.dtype)) + ir::shapeStr(t.shape));
}

void copyInto(const ir::Tensor& dst, const ir::Tensor& src) {
  if (dst.defined() && dst.data != src.data && src.nbytes()) std::memcpy(dst.data, src.data, src.nbytes());
}

// Runs `body`, subgraph `subgraph` of `node` (in a loop, as iteration `iteration`;
// else -1), with errors named by the node and the iteration. Profiled: the run is an
// event "NODE/SUBGRAPH" (cat "subgraph", args "iteration" or "branch") one level below
// the node's step, the body's steps below it with the same args.
const std::vector<ir::Tensor>& runNamed(const GraphExecutor& body, GraphExecutor::RunState& state,
                                        const std::vector<ir::Tensor>& inputs, const std::vector<void*>* targets,
                                        const ir::Node& node, const char* subgraph, int64_t iteration,
                                        ProfileSink* profile) {
  try {
    if (!profile) return body.runBody(state, inputs, targets);
    std::vector<std::pair<std::string, std::string>> context;
    if (iteration >= 0)
      context.emplace_back("iteration", std::to_string(iteration));
    else
      context.emplace_back("branch", subgraph);
    const std::string& of = node.name.empty() ? node.op_type : node.name;
    context.emplace_back("subgraph_of", of);
    const ProfileSink::Nest below_node(*profile, 1, context);
    ProfileScope event(*profile, of + "/" + subgraph, "subgraph", 1);
    const ProfileSink::Nest below_event(*profile, 1, {});
    return body.runBody(state, inputs, targets, profile);
  } catch (const Error& e) {
    throw Error(e.code(), describe(node) + " " + (iteration >= 0 ? "iteration " + std::to_string(iteration) : subgraph) +
                              ": " + e.what());
  }
}

// Two states of one body, used in turn: the values one iteration makes stay where they
// are while the next iteration, on the other state, reads them.
struct BodyStates final : ExecutorState {
  std::unique_ptr<GraphExecutor::RunState> states[2];
  std::vector<ir::OwnedTensor> owned;  // carried values copied out of a state about to be reused
  std::vector<ir::AggregatePtr> kept;  // carried sequences and optionals (shared, never copied)
  GraphExecutor::RunState& get(const GraphExecutor& body, size_t i) {
    if (!states[i % 2]) states[i % 2] = body.newRunState();
    return *states[i % 2];
  }
};

// Before `state` runs again: carried values still in it (an input passed straight
// through, or the iteration counter) move to memory of their own; copies no carried
// value refers to any more are freed.
void keepCarried(BodyStates& s, const GraphExecutor& body, const GraphExecutor::RunState& state,
                 std::vector<ir::Tensor>& carried, const void* scratch_begin, const void* scratch_end) {
  const auto lo = reinterpret_cast<uintptr_t>(scratch_begin), hi = reinterpret_cast<uintptr_t>(scratch_end);
  // A carried sequence or optional is immutable: keeping a reference keeps it.
  std::vector<ir::AggregatePtr> kept;
  for (const ir::Tensor& v : carried)
    if (ir::isBoxed(v)) kept.push_back(ir::shareBoxed(v));
  s.kept = std::move(kept);
  for (ir::Tensor& v : carried) {
    if (ir::isBoxed(v)) continue;
    const auto p = reinterpret_cast<uintptr_t>(v.data);
    const bool in_scratch = p >= lo && p < hi;
    if (!body.owns(state, v.data) && !in_scratch) continue;
    s.owned.push_back(ir::OwnedTensor::copyOf(v));
    v = s.owned.back().view();
  }
  std::erase_if(s.owned, [&](const ir::OwnedTensor& t) {
    return std::none_of(carried.begin(), carried.end(), [&](const ir::Tensor& v) { return v.data == t.data(); });
  });
}

// A shape for a scan output of zero iterations: the body's type with unknown dims 0.
std::vector<int64_t> emptyElementShape(const ir::TensorType& t) {
  std::vector<int64_t> shape;
  for (const ir::Dim& d : t.dims) shape.push_back(d.isKnown() ? d.value : 0);
  return shape;
}

class IfFlow final : public ControlFlow {
 public:
  IfFlow(const ir::Node& node, const std::shared_ptr<const ConstStore>& store,
         const std::vector<std::shared_ptr<const RuntimeModule>>& modules, const RunOptions& options)
      : node_(node),
        then_(bodyExecutor(node, "then_branch", store, modules, options)),
        else_(bodyExecutor(node, "else_branch", store, modules, options)) {}

  struct State final : ExecutorState {
    std::unique_ptr<GraphExecutor::RunState> then_state, else_state;
  };
  std::unique_ptr<ExecutorState> newState() const override { return std::make_unique<State>(); }

  void run(ExecutorState& state, const std::vector<ir::Tensor>& inputs, const std::vector<ir::Tensor>& planned,
           const OutputAllocator& allocate, const AggregateOutput& pass, ProfileSink* profile) const override {
    auto& s = static_cast<State&>(state);
    checkScalar(node_, inputs.at(0), ir::DType::kBool, "the condition");
    const bool take_then = *inputs[0].as<bool>();
    const GraphExecutor& branch = take_then ? *then_ : *else_;
    auto& st = take_then ? s.then_state : s.else_state;
    if (!st) st = branch.newRunState();
    const std::vector<ir::Tensor> captures(inputs.begin() + 1, inputs.end());
    // Outputs the outer graph planned with the branch's static shape are made in place.
    std::vector<void*> targets(planned.size(), nullptr);
    for (size_t o = 0; o < planned.size() && o < branch.outputs().size(); ++o) {
      const ir::TensorType& t = branch.outputs()[o].type;
      if (planned[o].defined() && t.isStatic() && t.staticShape() == planned[o].shape && t.dtype == planned[o].dtype)
        targets[o] = planned[o].data;
    }
    const auto& outs =
        runNamed(branch, *st, captures, &targets, node_, take_then ? "then_branch" : "else_branch", -1, profile);
    for (size_t o = 0; o < outs.size(); ++o) {
      if (ir::isBoxed(outs[o]))
        pass(o, outs[o]);
      else
        copyInto(allocate(o, outs[o].dtype, outs[o].shape), outs[o]);
    }
  }

 private:
  const ir::Node& node_;
  std::unique_ptr<GraphExecutor> then_, else_;
};

class LoopFlow final : public ControlFlow {
 public:
  LoopFlow(const ir::Node& node, const std::shared_ptr<const ConstStore>& store,
           const std::vector<std::shared_ptr<const RuntimeModule>>& modules, const RunOptions& options)
      : node_(node),
        layout_(kernels::loopLayout(node)),
        body_(bodyExecutor(node, "body", store, modules, options)),
        max_iterations_(loopIterationLimit(options.max_loop_iterations)),
        max_bytes_(options.limits.max_bytes) {}

  std::unique_ptr<ExecutorState> newState() const override { return std::make_unique<BodyStates>(); }

  void run(ExecutorState& state, const std::vector<ir::Tensor>& inputs, const std::vector<ir::Tensor>&,
           const OutputAllocator& allocate, const AggregateOutput& pass, ProfileSink* profile) const override {
    auto& s = static_cast<BodyStates&>(state);
    const size_t n_carried = layout_.num_carried, n_scan = layout_.num_scan;
    int64_t trip_count = std::numeric_limits<int64_t>::max();
    if (inputs.at(0).defined()) {
      checkScalar(node_, inputs[0], ir::DType::kInt64, "the trip count M");
      trip_count = *inputs[0].as<int64_t>();
    }
    bool cond = true;
    if (inputs.at(1).defined()) {
      checkScalar(node_, inputs[1], ir::DType::kBool, "the condition");
      cond = *inputs[1].as<bool>();
    }
    // The iteration number and condition the body reads, and what it carries.
    struct Scratch {
      int64_t iter = 0;
      bool cond = false;
    } scratch;
    std::vector<ir::Tensor> body_in(inputs.size());
    body_in[0] = ir::Tensor{ir::DType::kInt64, {}, &scratch.iter};
    body_in[1] = ir::Tensor{ir::DType::kBool, {}, &scratch.cond};
    std::vector<ir::Tensor> carried(inputs.begin() + 2, inputs.begin() + 2 + ptrdiff_t(n_carried));
    std::copy(inputs.begin() + 2 + ptrdiff_t(n_carried), inputs.end(), body_in.begin() + 2 + ptrdiff_t(n_carried));
    for (size_t i = 0; i < n_carried; ++i)
      if (!carried[i].defined()) failRun(node_, "loop-carried value " + std::to_string(i) + " is not given");

    // Scan outputs: each iteration's element appended, written out at the end.
    std::vector<std::vector<std::byte>> gathered(n_scan);
    std::vector<ir::Tensor> element(n_scan);
    s.owned.clear();
    int64_t iter = 0;
    for (; iter < trip_count && cond; ++iter) {
      if (uint64_t(iter) >= max_iterations_)
        failRun(node_, "ran " + std::to_string(max_iterations_) +
                           " iterations and would run more (the limit: LoadOptions::max_loop_iterations, "
                           "PARTITA_MAX_LOOP_ITERATIONS)");
      GraphExecutor::RunState& st = s.get(*body_, size_t(iter));
      keepCarried(s, *body_, st, carried, &scratch, &scratch + 1);
      scratch.iter = iter;
      scratch.cond = cond;
      std::copy(carried.begin(), carried.end(), body_in.begin() + 2);
      const auto& outs = runNamed(*body_, st, body_in, nullptr, node_, "body", iter, profile);
      checkScalar(node_, outs[0], ir::DType::kBool, "body output 0 (the condition)");
      cond = *outs[0].as<bool>();
      for (size_t i = 0; i < n_carried; ++i) carried[i] = outs[1 + i];
      for (size_t k = 0; k < n_scan; ++k) {
        const ir::Tensor& e = outs[1 + n_carried + k];
        if (iter == 0) {
          element[k] = ir::Tensor{e.dtype, e.shape, nullptr};
        } else if (e.shape != element[k].shape || e.dtype != element[k].dtype) {
          failRun(node_, "scan output " + std::to_string(k) + " is " + ir::typeOf(e).str() + " in iteration " +
                             std::to_string(iter) + " but " + ir::typeOf(element[k]).str() +
                             " in iteration 0 (every iteration must make the same shape)");
        }
        const auto* p = static_cast<const std::byte*>(e.data);
        if (e.nbytes() > max_bytes_ - std::min<uint64_t>(max_bytes_, gathered[k].size()))
          failRun(node_, "scan output " + std::to_string(k) + " would be larger than " + std::to_string(max_bytes_) +
                             " bytes after iteration " + std::to_string(iter) + " (TensorLimits::max_bytes)");
        gathered[k].insert(gathered[k].end(), p, p + e.nbytes());
      }
    }
    // The counter and condition are about to go away; a carried value may still be one.
    for (ir::Tensor& v : carried)
      if (reinterpret_cast<uintptr_t>(v.data) >= reinterpret_cast<uintptr_t>(&scratch) &&
          reinterpret_cast<uintptr_t>(v.data) < reinterpret_cast<uintptr_t>(&scratch + 1)) {
        s.owned.push_back(ir::OwnedTensor::copyOf(v));
        v = s.owned.back().view();
      }
    for (size_t i = 0; i < n_carried; ++i) {
      if (ir::isBoxed(carried[i]))
        pass(i, carried[i]);
      else
        copyInto(allocate(i, carried[i].dtype, carried[i].shape), carried[i]);
    }
    for (size_t k = 0; k < n_scan; ++k) {
      std::vector<int64_t> shape = {iter};
      ir::DType dtype = element[k].dtype;
      if (iter == 0) {
        const ir::TensorType& t = body_->outputs()[1 + n_carried + k].type;
        dtype = t.dtype;
        std::vector<int64_t> rest = emptyElementShape(t);
        shape.insert(shape.end(), rest.begin(), rest.end());
      } else {
        shape.insert(shape.end(), element[k].shape.begin(), element[k].shape.end());
      }
      ir::Tensor dst = allocate(n_carried + k, dtype, shape);
      if (dst.defined() && !gathered[k].empty()) std::memcpy(dst.data, gathered[k].data(), gathered[k].size());
    }
    s.owned.clear();
    s.kept.clear();
  }

 private:
  const ir::Node& node_;
  kernels::LoopLayout layout_;
  std::unique_ptr<GraphExecutor> body_;
  uint64_t max_iterations_;
  uint64_t max_bytes_;
};

class ScanFlow final : public ControlFlow {
 public:
  ScanFlow(const ir::Node& node, const std::shared_ptr<const ConstStore>& store,
           const std::vector<std::shared_ptr<const RuntimeModule>>& modules, const RunOptions& options)
      : node_(node), layout_(kernels::scanLayout(node)), body_(bodyExecutor(node, "body", store, modules, options)) {}

  struct State final : ExecutorState {
    BodyStates body;
    std::vector<ir::OwnedTensor> gathered;  // scan input elements along an inner axis
  };
  std::unique_ptr<ExecutorState> newState() const override { return std::make_unique<State>(); }

  // Scan carries tensors only (its inference refuses sequences and optionals).
  void run(ExecutorState& state, const std::vector<ir::Tensor>& inputs, const std::vector<ir::Tensor>&,
           const OutputAllocator& allocate, const AggregateOutput&, ProfileSink* profile) const override {
    auto& s = static_cast<State&>(state);
    const ScanLayoutRun r = prepare(inputs);
    const size_t N = layout_.num_states, M = layout_.num_scan_inputs, K = layout_.num_scan_outputs;
    std::vector<ir::Tensor> body_in(N + M + (inputs.size() - layout_.first_state - N - M));
    std::copy(inputs.begin() + ptrdiff_t(layout_.first_state + N + M), inputs.end(),
              body_in.begin() + ptrdiff_t(N + M));
    s.gathered.resize(M);

    // Final states and scan outputs; allocated as soon as their shapes are known.
    std::vector<ir::Tensor> state_out(N), scan_out(K);
    std::vector<size_t> elem_bytes(K, 0);
    std::vector<int64_t> out_axis(K, 0);
    auto allocateScan = [&](size_t k, const ir::Tensor& e) {
      std::vector<int64_t> shape = e.shape;
      const int64_t rank = int64_t(shape.size());
      if (layout_.batched) {
        shape.insert(shape.begin(), {r.batch, r.seq});
        out_axis[k] = 1;
      } else {
        int64_t a = layout_.output_axes[k] < 0 ? layout_.output_axes[k] + rank + 1 : layout_.output_axes[k];
        if (a < 0 || a > rank)
          failRun(node_, "scan_output_axes " + std::to_string(layout_.output_axes[k]) + " is out of range for rank " +
                             std::to_string(rank + 1));
        shape.insert(shape.begin() + a, r.seq);
        out_axis[k] = a;
      }
      scan_out[k] = allocate(N + k, e.dtype, shape);
      elem_bytes[k] = e.nbytes();
    };
    // Elements planned with a static shape get their buffers before the first iteration.
    for (size_t k = 0; k < K; ++k) {
      const ir::TensorType& t = body_->outputs()[N + k].type;
      if (t.isStatic() || r.seq == 0 || r.batch == 0)
        allocateScan(k, ir::Tensor{t.dtype, t.isStatic() ? t.staticShape() : emptyElementShape(t), nullptr});
    }

    for (int64_t b = 0; b < r.batch; ++b) {
      std::vector<ir::Tensor> carried(N);
      for (size_t i = 0; i < N; ++i) carried[i] = r.batched ? batchSlice(inputs[layout_.first_state + i], b) : inputs[layout_.first_state + i];
      const int64_t len = r.lengths.empty() ? r.seq : r.lengths[size_t(b)];
      s.body.owned.clear();
      for (int64_t t = 0; t < len; ++t) {
        GraphExecutor::RunState& st = s.body.get(*body_, size_t(t));
        keepCarried(s.body, *body_, st, carried, nullptr, nullptr);
        std::copy(carried.begin(), carried.end(), body_in.begin());
        for (size_t j = 0; j < M; ++j) {
          const int64_t idx = layout_.input_reverse[j] ? len - 1 - t : t;
          body_in[N + j] = element(s, j, inputs[layout_.first_state + N + j], r.input_axis[j], b, idx);
        }
        // Scan outputs along the outer axis are made in place (when planned in the body).
        std::vector<void*> targets(N + K, nullptr);
        for (size_t k = 0; k < K; ++k)
          if (scan_out[k].defined() && out_axis[k] == (layout_.batched ? 1 : 0))
            targets[N + k] = outputSlot(scan_out[k], k, elem_bytes[k], b, r.seq, layout_.output_reverse[k] ? len - 1 - t : t);
        const auto& outs = runNamed(*body_, st, body_in, &targets, node_, "body", t, profile);
        for (size_t i = 0; i < N; ++i) carried[i] = outs[i];
        for (size_t k = 0; k < K; ++k) {
          const ir::Tensor& e = outs[N + k];
          if (!scan_out[k].defined() && node_.hasOutput(N + k)) allocateScan(k, e);
          if (!scan_out[k].defined()) continue;
          if (e.nbytes() != elem_bytes[k] || e.dtype != scan_out[k].dtype)
            failRun(node_, "scan output " + std::to_string(k) + " is " + ir::typeOf(e).str() + " in iteration " +
                               std::to_string(t) + ", not the shape of the others");
          writeElement(scan_out[k], e, k, elem_bytes[k], out_axis[k], b, r.seq,
                       layout_.output_reverse[k] ? len - 1 - t : t);
        }
      }
      // Sequences shorter than the longest (opset 8 sequence_lens) leave zeros.
      for (size_t k = 0; k < K; ++k)
        if (scan_out[k].defined())
          for (int64_t t = len; t < r.seq; ++t)
            std::memset(outputSlot(scan_out[k], k, elem_bytes[k], b, r.seq, t), 0, elem_bytes[k]);
      for (size_t i = 0; i < N; ++i) {
        const ir::Tensor& v = carried[i];
        if (!state_out[i].defined()) {
          std::vector<int64_t> shape = v.shape;
          if (r.batched) shape.insert(shape.begin(), r.batch);
          state_out[i] = allocate(i, v.dtype, shape);
          if (!state_out[i].defined()) state_out[i] = ir::Tensor{v.dtype, shape, nullptr};
        }
        if (!state_out[i].data) continue;
        if (v.nbytes() * size_t(r.batched ? r.batch : 1) != state_out[i].nbytes())
          failRun(node_, "state " + std::to_string(i) + " is " + ir::typeOf(v).str() + " in batch " + std::to_string(b) +
                             ", not the shape of the others");
        if (v.nbytes()) std::memmove(static_cast<std::byte*>(state_out[i].data) + size_t(b) * v.nbytes(), v.data, v.nbytes());
      }
    }
    // A batch of 0 (opset 8): the states are empty as given.
    for (size_t i = 0; i < N; ++i)
      if (!state_out[i].defined()) copyInto(allocate(i, inputs[layout_.first_state + i].dtype, inputs[layout_.first_state + i].shape), inputs[layout_.first_state + i]);
  }

 private:
  struct ScanLayoutRun {
    bool batched = false;
    int64_t batch = 1, seq = 0;
    std::vector<int64_t> input_axis;  // normalized
    std::vector<int64_t> lengths;     // opset 8 sequence_lens, per batch
  };

  ScanLayoutRun prepare(const std::vector<ir::Tensor>& inputs) const {
    ScanLayoutRun r;
    r.batched = layout_.batched;
    const size_t N = layout_.num_states, M = layout_.num_scan_inputs;
    if (inputs.size() < layout_.first_state + N + M) failRun(node_, "is missing inputs");
    for (size_t j = 0; j < M; ++j) {
      const ir::Tensor& x = inputs[layout_.first_state + N + j];
      if (!x.defined()) failRun(node_, "scan input " + std::to_string(j) + " is not given");
      const int64_t rank = int64_t(x.rank());
      int64_t axis = layout_.batched ? 1 : (layout_.input_axes[j] < 0 ? layout_.input_axes[j] + rank : layout_.input_axes[j]);
      if (axis < 0 || axis >= rank)
        failRun(node_, "scan input " + std::to_string(j) + " is " + ir::typeOf(x).str() + ", which has no axis " +
                           std::to_string(layout_.batched ? 1 : layout_.input_axes[j]));
      r.input_axis.push_back(axis);
      const int64_t len = x.shape[size_t(axis)];
      if (j > 0 && len != r.seq)
        failRun(node_, "scan inputs have different sequence lengths (" + std::to_string(r.seq) + " and " +
                           std::to_string(len) + ")");
      r.seq = len;
      if (layout_.batched) {
        if (j > 0 && x.shape[0] != r.batch) failRun(node_, "scan inputs have different batch sizes");
        r.batch = x.shape[0];
      }
    }
    if (layout_.batched) {
      for (size_t i = 0; i < N; ++i) {
        const ir::Tensor& v = inputs[layout_.first_state + i];
        if (!v.defined() || v.rank() < 1 || v.shape[0] != r.batch)
          failRun(node_, "state " + std::to_string(i) + " must have the batch size " + std::to_string(r.batch) +
                             " as its first dimension");
      }
      if (inputs[0].defined()) {
        const ir::Tensor& lens = inputs[0];
        if (lens.dtype != ir::DType::kInt32 && lens.dtype != ir::DType::kInt64)
          failRun(node_, "sequence_lens must be int32 or int64");
        std::vector<int64_t> v;
        for (int64_t i = 0; i < lens.numel(); ++i)
          v.push_back(lens.dtype == ir::DType::kInt32 ? lens.as<int32_t>()[i] : lens.as<int64_t>()[i]);
        if (int64_t(v.size()) != r.batch) failRun(node_, "sequence_lens must hold one length per batch");
        for (int64_t l : v)
          if (l < 0 || l > r.seq)
            failRun(node_, "sequence length " + std::to_string(l) + " is outside 0.." + std::to_string(r.seq));
        r.lengths = std::move(v);
      }
    }
    return r;
  }

  // Batch b of a value with a batch dimension 0.
  static ir::Tensor batchSlice(const ir::Tensor& v, int64_t b) {
    ir::Tensor r{v.dtype, std::vector<int64_t>(v.shape.begin() + 1, v.shape.end()), nullptr};
    r.data = static_cast<std::byte*>(v.data) + size_t(b) * r.nbytes();
    return r;
  }

  // Element `idx` of scan input j along `axis` (batch b): a view when nothing is outside
  // the axis, else gathered into the state's buffer for input j.
  ir::Tensor element(State& s, size_t j, const ir::Tensor& x, int64_t axis, int64_t b, int64_t idx) const {
    std::vector<int64_t> shape = x.shape;
    shape.erase(shape.begin() + axis);
    int64_t outer = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= x.shape[size_t(d)];
    if (layout_.batched) {
      shape.erase(shape.begin());
      outer = 1;  // within batch b, the axis is the outer one
    }
    ir::Tensor e{x.dtype, shape, nullptr};
    const size_t inner = e.nbytes() / size_t(std::max<int64_t>(outer, 1));
    const int64_t len = x.shape[size_t(axis)];
    auto* base = static_cast<std::byte*>(x.data) + (layout_.batched ? size_t(b) * size_t(len) * inner : 0);
    if (outer == 1) {
      e.data = base + size_t(idx) * inner;
      return e;
    }
    ir::OwnedTensor& buf = s.gathered[j];
    if (buf.shape() != shape || buf.dtype() != x.dtype) buf = ir::OwnedTensor(x.dtype, shape);
    auto* dst = static_cast<std::byte*>(buf.data());
    for (int64_t o = 0; o < outer; ++o) std::memcpy(dst + size_t(o) * inner, base + (size_t(o) * size_t(len) + size_t(idx)) * inner, inner);
    return buf.view();
  }

  // Where element t of scan output k starts when its axis is the outer one (batch b).
  static void* outputSlot(const ir::Tensor& out, size_t, size_t elem_bytes, int64_t b, int64_t seq, int64_t t) {
    return static_cast<std::byte*>(out.data) + (size_t(b) * size_t(seq) + size_t(t)) * elem_bytes;
  }

  void writeElement(const ir::Tensor& out, const ir::Tensor& e, size_t k, size_t elem_bytes, int64_t axis, int64_t b,
                    int64_t seq, int64_t t) const {
    if (!elem_bytes) return;
    if (axis == (layout_.batched ? 1 : 0)) {
      void* dst = outputSlot(out, k, elem_bytes, b, seq, t);
      if (dst != e.data) std::memcpy(dst, e.data, elem_bytes);
      return;
    }
    int64_t outer = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= e.shape[size_t(d)];
    const size_t inner = elem_bytes / size_t(std::max<int64_t>(outer, 1));
    auto* dst = static_cast<std::byte*>(out.data);
    const auto* src = static_cast<const std::byte*>(e.data);
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + (size_t(o) * size_t(seq) + size_t(t)) * inner, src + size_t(o) * inner, inner);
  }

  const ir::Node& node_;
  kernels::ScanLayout layout_;
  std::unique_ptr<GraphExecutor> body_;
};

// SequenceMap: the body once per element; sequence inputs give it their element i,
// tensor inputs (and captures) are passed as they are. Every output is a new sequence
// of copies of what the body made (its state is reused by the next element).
class SequenceMapFlow final : public ControlFlow {
 public:
  SequenceMapFlow(const ir::Node& node, const std::shared_ptr<const ConstStore>& store,
                  const std::vector<std::shared_ptr<const RuntimeModule>>& modules, const RunOptions& options)
      : node_(node), body_(bodyExecutor(node, "body", store, modules, options)) {}

  struct State final : ExecutorState {
    std::unique_ptr<GraphExecutor::RunState> body;
  };
  std::unique_ptr<ExecutorState> newState() const override { return std::make_unique<State>(); }

  void run(ExecutorState& state, const std::vector<ir::Tensor>& inputs, const std::vector<ir::Tensor>&,
           const OutputAllocator&, const AggregateOutput& pass, ProfileSink* profile) const override {
    auto& s = static_cast<State&>(state);
    if (!s.body) s.body = body_->newRunState();
    const size_t formal = node_.numFormalInputs();
    size_t len = 0;
    for (size_t i = 0; i < formal; ++i) {
      if (!ir::isBoxed(inputs.at(i))) continue;
      const ir::Aggregate& a = ir::unbox(inputs[i]);
      if (a.kind != ir::ValueKind::kSequence)
        failRun(node_, "input " + std::to_string(i) + " is not a sequence");
      if (i > 0 && a.tensors.size() != len)
        failRun(node_, "input " + std::to_string(i) + " holds " + std::to_string(a.tensors.size()) +
                           " tensors but input 0 holds " + std::to_string(len) +
                           " (the sequences must be as long)");
      if (i == 0) len = a.tensors.size();
    }
    std::vector<std::shared_ptr<ir::Aggregate>> outs(node_.outputs.size());
    for (size_t o = 0; o < outs.size(); ++o) {
      outs[o] = std::make_shared<ir::Aggregate>();
      outs[o]->dtype = body_->outputs()[o].type.dtype;
    }
    std::vector<ir::Tensor> body_in(inputs);
    for (size_t e = 0; e < len; ++e) {
      for (size_t i = 0; i < formal; ++i)
        if (ir::isBoxed(inputs[i])) body_in[i] = ir::unbox(inputs[i]).tensors[e]->view();
      // Element e of the sequences is the body's iteration e (in messages and profiles).
      const auto& made = runNamed(*body_, *s.body, body_in, nullptr, node_, "body", int64_t(e), profile);
      for (size_t o = 0; o < outs.size(); ++o) {
        if (made[o].dtype != outs[o]->dtype)
          failRun(node_, "body output " + std::to_string(o) + " is " + ir::typeOf(made[o]).str() + ", not " +
                             std::string(ir::dtypeName(outs[o]->dtype)));
        outs[o]->tensors.push_back(std::make_shared<const ir::OwnedTensor>(ir::OwnedTensor::copyOf(made[o])));
      }
    }
    for (size_t o = 0; o < outs.size(); ++o) pass(o, ir::box(*outs[o]));
  }

 private:
  const ir::Node& node_;
  std::unique_ptr<GraphExecutor> body_;
};

}  // namespace

std::unique_ptr<ControlFlow> ControlFlow::create(const ir::Node& node, const std::shared_ptr<const ir::Graph>&,
                                                 const std::shared_ptr<const ConstStore>& store,
                                                 const std::vector<std::shared_ptr<const RuntimeModule>>& modules,
                                                 const RunOptions& options) {
  if (node.domain.empty() && node.op_type == "If") return std::make_unique<IfFlow>(node, store, modules, options);
  if (node.domain.empty() && node.op_type == "Loop") return std::make_unique<LoopFlow>(node, store, modules, options);
  if (node.domain.empty() && node.op_type == "Scan") return std::make_unique<ScanFlow>(node, store, modules, options);
  if (node.domain.empty() && node.op_type == "SequenceMap")
    return std::make_unique<SequenceMapFlow>(node, store, modules, options);
  throw Error(ErrorCode::kUnsupported,
              describe(node) + " has subgraphs, which only If, Loop, Scan and SequenceMap may have");
}

}  // namespace partita::runtime
