#include "runtime/executor.h"

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

void Executor::checkInput(size_t index, const ir::Tensor& t) const {
  const IoSpec& spec = inputs_.at(index);
  const ir::TensorType& want = spec.type;
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
