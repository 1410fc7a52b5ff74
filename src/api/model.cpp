#include "partita/model.h"

#include <algorithm>

#include "runtime/executor.h"
#include "runtime/profile.h"
#include "runtime/team_wait.h"

namespace partita {

namespace {
IoInfo describe(const runtime::IoSpec& v) {
  IoInfo info;
  info.name = v.name;
  info.dtype = v.type.dtype;
  if (!v.type.isTensor()) info.non_tensor = v.type.kindStr();
  for (const ir::Dim& d : v.type.dims) {
    info.shape.push_back(d.isKnown() ? d.value : -1);
    info.dim_names.push_back(d.isKnown() ? std::string() : d.symbol);
  }
  return info;
}
}  // namespace

ThreadRuntimeInfo threadRuntimeInfo() {
  const runtime::TeamWaitInfo info = runtime::teamWaitInfo();
  return {info.runtime, info.policy, runtime::libraryServing("libdnnl.so", "GOMP_parallel")};
}

Model::Model(std::shared_ptr<const runtime::Executor> executor, const std::vector<std::string>& module_kinds)
    : executor_(std::move(executor)) {
  for (const runtime::IoSpec& in : executor_->inputs()) inputs_.push_back(describe(in));
  for (const runtime::IoSpec& out : executor_->outputs()) outputs_.push_back(describe(out));
  for (const std::string& kind : module_kinds)
    if (std::find(backends_.begin(), backends_.end(), kind) == backends_.end()) backends_.push_back(kind);
}

size_t Model::plannedActivationBytes() const { return executor_->plannedActivationBytes(); }
int Model::threads() const { return executor_->options().threads; }

struct Session::State {
  std::unique_ptr<runtime::ExecutorState> run;
  runtime::ProfileSink profile;
  bool profiling = false;
};

Session::Session(std::shared_ptr<const Model> model)
    : model_(std::move(model)), state_(std::make_unique<State>()) {
  state_->run = model_->executor().newState();
  inputs_.resize(model_->inputs().size());
  bound_.assign(model_->inputs().size(), false);
}

Session::~Session() = default;

void Session::setInput(const std::string& name, const Tensor& tensor) { setInput(name, tensor.view()); }

void Session::setInput(const std::string& name, const TensorView& view) {
  const auto& ins = model_->inputs();
  for (size_t i = 0; i < ins.size(); ++i) {
    if (ins[i].name != name) continue;
    model_->executor().checkInput(i, view);
    inputs_[i] = view;
    bound_[i] = true;
    return;
  }
  std::string known;
  for (const IoInfo& in : ins) known += (known.empty() ? "" : ", ") + in.name;
  throw Error(ErrorCode::kInvalidArgument, "the model has no input named '" + name + "' (inputs: " + known + ")");
}

void Session::clearInputs() { std::fill(bound_.begin(), bound_.end(), false); }

void Session::run() {
  const auto& ins = model_->inputs();
  for (size_t i = 0; i < ins.size(); ++i)
    if (!bound_[i]) throw Error(ErrorCode::kInvalidArgument, "input '" + ins[i].name + "' was not set");
  // The last run's output tensors are reused when the shapes agree (no allocation).
  model_->executor().runInto(*state_->run, inputs_, outputs_, state_->profiling ? &state_->profile : nullptr);
}

std::vector<Tensor> Session::takeOutputs() {
  std::vector<Tensor> taken = std::move(outputs_);
  outputs_.clear();
  return taken;
}

void Session::enableProfiling(bool on) { state_->profiling = on; }
bool Session::profiling() const { return state_->profiling; }
const std::vector<ProfileEvent>& Session::profileEvents() const { return state_->profile.events(); }
void Session::clearProfile() { state_->profile.clear(); }

const Tensor& Session::output(const std::string& name) const {
  const auto& outs = model_->outputs();
  for (size_t i = 0; i < outs.size(); ++i)
    if (outs[i].name == name) {
      if (i >= outputs_.size())
        throw Error(ErrorCode::kInvalidArgument,
                    "output '" + name + "' is not available: call run() first (takeOutputs() hands them over)");
      return outputs_[i];
    }
  throw Error(ErrorCode::kInvalidArgument, "the model has no output named '" + name + "'");
}

}  // namespace partita
