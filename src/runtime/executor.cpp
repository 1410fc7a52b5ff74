#include "runtime/executor.h"

#include "kernels/control_flow.h"
#include "partita/error.h"

namespace partita::runtime {

void checkThreads(int threads) {
  if (threads < 1 || threads > kMaxThreads)
    throw Error(ErrorCode::kInvalidArgument, "threads must be between 1 and " + std::to_string(kMaxThreads) +
                                                 ", not " + std::to_string(threads));
}

Executor::Executor(std::vector<IoSpec> inputs, std::vector<IoSpec> outputs, RunOptions options)
    : inputs_(std::move(inputs)), outputs_(std::move(outputs)), options_(options) {
  checkThreads(options_.threads);
  for (const IoSpec& io : inputs_)
    ir::checkLimits(io.type, options_.limits, ErrorCode::kInvalidModel, "input '" + io.name + "'");
  for (const IoSpec& io : outputs_)
    ir::checkLimits(io.type, options_.limits, ErrorCode::kInvalidModel, "output '" + io.name + "'");
}

void Executor::runInto(ExecutorState& state, const std::vector<ir::Tensor>& inputs,
                       std::vector<ir::OwnedTensor>& outputs, ProfileSink* profile) const {
  outputs = run(state, inputs, profile);
}

std::vector<RunValue> Executor::runValues(ExecutorState& state, const std::vector<ir::Tensor>& inputs) const {
  std::vector<RunValue> out;
  for (ir::OwnedTensor& t : run(state, inputs)) out.push_back({std::move(t), nullptr});
  return out;
}

void Executor::checkInput(size_t index, const ir::Tensor& t) const {
  const IoSpec& spec = inputs_.at(index);
  const ir::TensorType& want = spec.type;
  if (!want.isTensor() || ir::isBoxed(t)) {
    // A sequence or optional: the kind and element type must fit (its elements' shapes
    // are data, checked by the ops that read them).
    const ir::TensorType got = ir::isBoxed(t) ? ir::unbox(t).kindType() : ir::typeOf(t);
    if (!kernels::kindsFit(want, got) || (want.dtype != ir::DType::kUndefined && got.dtype != want.dtype))
      throw Error(ErrorCode::kInvalidArgument, "input '" + spec.name + "' is " + want.kindStr() +
                                                   " but got " +
                                                   (ir::isBoxed(t) ? got.kindStr() : got.str()));
    return;
  }
  ir::checkLimits(ir::typeOf(t), options_.limits, ErrorCode::kInvalidArgument, "input '" + spec.name + "'");
  if (t.dtype != want.dtype)
    throw Error(ErrorCode::kInvalidArgument, "input '" + spec.name + "' must be " + want.str() + " but got " +
                                                 std::string(ir::dtypeName(t.dtype)) + ir::shapeStr(t.shape));
  if (!want.has_rank) return;
  bool ok = t.shape.size() == want.rank();
  for (size_t i = 0; ok && i < want.rank(); ++i)
    if (want.dims[i].isKnown() && want.dims[i].value != t.shape[i]) ok = false;
  if (!ok)
    throw Error(ErrorCode::kInvalidArgument, "input '" + spec.name + "' must have shape " + want.str() +
                                                 " but got " + std::string(ir::dtypeName(t.dtype)) +
                                                 ir::shapeStr(t.shape));
}

}  // namespace partita::runtime
