#include "kernels/op_registry.h"

#include <limits>
#include <string_view>
#include <unordered_map>
#include <vector>

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

void ValueKernelContext::fail(const std::string& msg) const {
  throw Error(ErrorCode::kInvalidArgument, describe(node) + ": " + msg);
}

const OpRegistry& OpRegistry::global() {
  static const OpRegistry registry = [] {
    OpRegistry r;
    registerNnOps(r);
    registerElementwiseOps(r);
    registerReduceOps(r);
    registerShapeOps(r);
    registerControlFlowOps(r);
    registerSequenceOps(r);
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

namespace {
struct Arity {
  const char* op;
  int since, min_in, max_in, min_out, max_out;
};
constexpr Arity kArity[] = {
#include "kernels/op_arity.inc"
};

// The schema version of `op_type` that applies at `opset`: the newest at or below it.
const Arity* findSchema(const std::string& domain, const std::string& op_type, int opset) {
  if (!domain.empty() && domain != "ai.onnx") return nullptr;
  static const std::unordered_map<std::string_view, std::vector<const Arity*>> by_op = [] {
    std::unordered_map<std::string_view, std::vector<const Arity*>> m;
    for (const Arity& a : kArity) m[a.op].push_back(&a);
    return m;
  }();
  auto it = by_op.find(op_type);
  if (it == by_op.end()) return nullptr;
  const Arity* found = nullptr;
  for (const Arity* a : it->second)
    if (a->since <= opset && (!found || a->since > found->since)) found = a;
  return found;
}

}  // namespace

int schemaVersion(const std::string& domain, const std::string& op_type, int opset) {
  const Arity* a = findSchema(domain, op_type, opset);
  return a ? a->since : 0;
}

std::string unimplementedVersion(const OpDef& def, const ir::Node& node) {
  if (!node.domain.empty() && node.domain != "ai.onnx") return {};
  const int since = schemaVersion(node.domain, node.op_type, node.opset);
  if (since == 0) {
    // An op ONNX defines only from a later opset (e.g. Gelu, from 20).
    const int first = schemaVersion(node.domain, node.op_type, std::numeric_limits<int>::max());
    if (first == 0) return {};
    int oldest = first;
    for (int v = first; v > 0; v = schemaVersion(node.domain, node.op_type, v - 1)) oldest = v;
    return node.op_type + " is not an op of opset " + std::to_string(node.opset) + " (ONNX added it in opset " +
           std::to_string(oldest) + ")";
  }
  if (since <= def.newest) return {};
  return "opset " + std::to_string(node.opset) + " gives it " + node.op_type + "'s opset-" + std::to_string(since) +
         " definition, which partita does not implement (it implements " + node.op_type + " up to the opset-" +
         std::to_string(schemaVersion(node.domain, node.op_type, def.newest)) + " definition)";
}

void checkArity(const ir::Node& node) {
  const Arity* found = findSchema(node.domain, node.op_type, node.opset);
  if (!found) return;
  auto count = [&](std::string what, size_t n, int lo, int hi) {
    if (n == 1) what.pop_back();  // "1 input"
    if (int64_t(n) >= lo && int64_t(n) <= hi) return;
    std::string range = lo == hi ? std::to_string(lo)
                        : hi == std::numeric_limits<int>::max() ? "at least " + std::to_string(lo)
                                                                 : std::to_string(lo) + " to " + std::to_string(hi);
    throw Error(ErrorCode::kInvalidModel, describe(node) + ": has " + std::to_string(n) + " " + what + ", opset " +
                                              std::to_string(node.opset) + " allows " + range);
  };
  // A control-flow node's outer-scope values (ir::Node::numCaptures) are not ONNX inputs.
  count("inputs", node.numFormalInputs(), found->min_in, found->max_in);
  count("outputs", node.outputs.size(), found->min_out, found->max_out);
}

std::vector<ir::TensorType> inferNode(const ir::Node& node, const std::vector<ir::TensorType>& inputs,
                                      const std::vector<const ir::Tensor*>& values,
                                      const ConstResolver* constants, const ir::TensorLimits& limits,
                                      const ir::Graph* graph) {
  const OpDef* def = OpRegistry::global().find(node.domain, node.op_type);
  if (!def)
    throw Error(ErrorCode::kUnsupported, "unsupported op " + node.op_type + " (node '" + node.name + "')");
  if (std::string why = unimplementedVersion(*def, node); !why.empty())
    throw Error(ErrorCode::kUnsupported, describe(node) + ": " + why);
  checkArity(node);
  InferContext ctx{node, inputs, values, std::vector<ir::TensorType>(node.outputs.size()), constants, limits,
                   graph};
  // Every op makes at least one output, and inference writes it first.
  if (node.outputs.empty()) ctx.fail("has no outputs");
  // Sequences and optionals reach only the ops made for them (OpDef::takesAnyKind).
  if (!def->takesAnyKind())
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].isTensor()) continue;
      const std::string name = graph && i < node.inputs.size() && node.inputs[i] != ir::kNoValue
                                   ? " ('" + graph->value(node.inputs[i]).name + "')"
                                   : "";
      ctx.fail("input " + std::to_string(i) + name + " is " + inputs[i].kindStr() + ", but " + node.op_type +
               " takes tensors only");
    }
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
