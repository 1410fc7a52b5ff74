#include "kernels/op_registry.h"

#include "partita/error.h"

namespace partita::kernels {

namespace {
std::string describe(const ir::Node& node) {
  return node.op_type + " node '" + node.name + "'";
}
}  // namespace

void InferContext::fail(const std::string& msg) const {
  std::string outputs;
  size_t named = 0, more = 0;
  if (graph)
    for (ir::ValueId out : node.outputs) {
      if (out == ir::kNoValue) continue;
      if (named++ < 3)
        outputs += (outputs.empty() ? " (making '" : "', '") + graph->value(out).name;
      else
        ++more;
    }
  if (!outputs.empty()) outputs += more ? "' and " + std::to_string(more) + " more)" : "')";
  throw Error(ErrorCode::kInvalidModel, describe(node) + outputs + ": " + msg);
}

void KernelContext::fail(const std::string& msg) const {
  throw Error(ErrorCode::kInvalidArgument, describe(node) + ": " + msg);
}

const OpRegistry& OpRegistry::global() {
  static const OpRegistry registry = [] {
    OpRegistry r;
    registerNnOps(r);
    registerElementwiseOps(r);
    registerReduceOps(r);
    registerShapeOps(r);
    return r;
  }();
  return registry;
}

void OpRegistry::add(const std::string& op_type, OpDef def, const std::string& domain) {
  ops_[{domain, op_type}] = def;
}

const OpDef* OpRegistry::find(const std::string& domain, const std::string& op_type) const {
  const std::string& d = (domain == "ai.onnx") ? std::string() : domain;
  auto it = ops_.find({d, op_type});
  return it == ops_.end() ? nullptr : &it->second;
}

std::vector<std::string> OpRegistry::opTypes() const {
  std::vector<std::string> out;
  for (const auto& [key, def] : ops_) out.push_back(key.first.empty() ? key.second : key.first + "." + key.second);
  return out;
}

std::vector<ir::TensorType> inferNode(const ir::Node& node, const std::vector<ir::TensorType>& inputs,
                                      const std::vector<const ir::Tensor*>& values,
                                      const ConstResolver* constants, const ir::TensorLimits& limits,
                                      const ir::Graph* graph) {
  const OpDef* def = OpRegistry::global().find(node.domain, node.op_type);
  if (!def)
    throw Error(ErrorCode::kUnsupported, "no host kernel for op " + node.op_type + " (node '" + node.name + "')");
  InferContext ctx{node, inputs, values, std::vector<ir::TensorType>(node.outputs.size()), constants, limits,
                   graph};
  // Every op makes at least one output, and inference writes it first.
  if (node.outputs.empty()) ctx.fail("has no outputs");
  def->infer(ctx);
  for (size_t o = 0; o < ctx.outputs.size(); ++o) {
    std::string why = ir::limitViolation(ctx.outputs[o], limits);
    if (why.empty()) continue;
    // With the graph the message names the outputs already; say which one if several.
    ctx.fail(graph && node.outputs.size() == 1 ? why : "output " + std::to_string(o) + ": " + why);
  }
  return std::move(ctx.outputs);
}

}  // namespace partita::kernels
