#include "partita/model.h"

#include "runtime/executor.h"
#include "runtime/team_wait.h"

namespace partita {

namespace {
IoInfo describe(const runtime::IoSpec& v) {
  IoInfo info;
  info.name = v.name;
  info.dtype = v.type.dtype;
  for (const ir::Dim& d : v.type.dims) {
    info.shape.push_back(d.isKnown() ? d.value : -1);
    info.dim_names.push_back(d.isKnown() ? std::string() : d.symbol);
  }
  return info;
}
}  // namespace

ThreadRuntimeInfo threadRuntimeInfo() {
  const runtime::TeamWaitInfo info = runtime::teamWaitInfo();
  return {info.runtime, info.policy};
}

Model::Model(std::shared_ptr<const runtime::Executor> executor) : executor_(std::move(executor)) {
  for (const runtime::IoSpec& in : executor_->inputs()) inputs_.push_back(describe(in));
  for (const runtime::IoSpec& out : executor_->outputs()) outputs_.push_back(describe(out));
}

size_t Model::plannedActivationBytes() const { return executor_->plannedActivationBytes(); }
int Model::threads() const { return executor_->options().threads; }

struct Session::State {
  std::unique_ptr<runtime::ExecutorState> run;
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

void Session::run() {
  const auto& ins = model_->inputs();
  for (size_t i = 0; i < ins.size(); ++i)
    if (!bound_[i]) throw Error(ErrorCode::kInvalidArgument, "input '" + ins[i].name + "' was not set");
  outputs_ = model_->executor().run(*state_->run, inputs_);
}

const Tensor& Session::output(const std::string& name) const {
  const auto& outs = model_->outputs();
  for (size_t i = 0; i < outs.size(); ++i)
    if (outs[i].name == name) {
      if (i >= outputs_.size()) throw Error(ErrorCode::kInvalidArgument, "output '" + name + "' is not computed yet: call run() first");
      return outputs_[i];
    }
  throw Error(ErrorCode::kInvalidArgument, "the model has no output named '" + name + "'");
}

}  // namespace partita
