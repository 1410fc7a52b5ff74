#include "partita/model.h"

#include "kernels/op_util.h"
#include "runtime/graph_executor.h"

namespace partita {

namespace {
IoInfo describe(const ir::Value& v) {
  IoInfo info;
  info.name = v.name;
  info.dtype = v.type.dtype;
  for (const ir::Dim& d : v.type.dims) info.shape.push_back(d.isKnown() ? d.value : -1);
  return info;
}
}  // namespace

Model::Model(std::shared_ptr<const runtime::GraphExecutor> executor) : executor_(std::move(executor)) {
  const ir::Graph& g = executor_->graph();
  for (ir::ValueId v : g.inputs) inputs_.push_back(describe(g.value(v)));
  for (ir::ValueId v : g.outputs) outputs_.push_back(describe(g.value(v)));
}

size_t Model::plannedActivationBytes() const { return executor_->plannedActivationBytes(); }

struct Session::State {
  std::unique_ptr<runtime::GraphExecutor::RunState> run;
};

Session::Session(std::shared_ptr<const Model> model)
    : model_(std::move(model)), state_(std::make_unique<State>()) {
  state_->run = model_->executor().newRunState();
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

void setNumThreads(int threads) { kernels::setKernelThreads(threads); }

}  // namespace partita
