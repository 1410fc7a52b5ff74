#include "kernels/known_values.h"

#include <set>
#include <string>

#include "partita/error.h"

namespace partita::kernels {

bool isShapeOf(const ir::Node& node) {
  return node.domain.empty() && (node.op_type == "Shape" || node.op_type == "Size");
}

bool isShapeOp(const ir::Node& node) {
  static const std::set<std::string> kOps = {"Shape", "Size", "Gather", "Unsqueeze", "Squeeze", "Concat", "Slice",
                                             "Cast",  "Add",  "Sub",    "Mul",       "Div",     "Mod",    "Max",
                                             "Min",   "Neg",  "Abs",    "Floor",     "Ceil",    "Identity"};
  return node.domain.empty() && kOps.count(node.op_type) > 0;
}

std::vector<ir::OwnedTensor> evaluateKnown(const ir::Node& node, const std::vector<ir::TensorType>& in_types,
                                           const std::vector<const ir::Tensor*>& in_values,
                                           const std::vector<ir::TensorType>& out_types,
                                           const ConstResolver* constants) {
  const bool shape_of = isShapeOf(node) && !in_types.empty() && in_types[0].isStatic();
  bool all_known = true;
  for (size_t i = 0; i < in_types.size(); ++i)
    all_known &= in_types[i].dtype == ir::DType::kUndefined || (i < in_values.size() && in_values[i]);
  if (!shape_of && !all_known) return {};
  const OpDef* op = OpRegistry::global().find(node.domain, node.op_type);
  if (!op || !op->hasKernel()) return {};
  for (size_t o = 0; o < node.outputs.size(); ++o)
    if (node.outputs[o] != ir::kNoValue &&
        (o >= out_types.size() || !out_types[o].isStatic() || out_types[o].numel() > kMaxKnownElements))
      return {};
  KernelContext ctx{node, constants, {}, {}, 1};
  for (size_t i = 0; i < in_types.size(); ++i) {
    if (shape_of && i == 0) {  // Shape and Size read their input's shape only
      ctx.inputs.push_back(ir::Tensor{in_types[0].dtype, in_types[0].staticShape(), nullptr});
      continue;
    }
    ctx.inputs.push_back(i < in_values.size() && in_values[i] ? *in_values[i] : ir::Tensor{});
  }
  std::vector<ir::OwnedTensor> out;
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    if (node.outputs[o] == ir::kNoValue) {
      out.emplace_back();
      ctx.outputs.emplace_back();
      continue;
    }
    out.emplace_back(out_types[o].dtype, out_types[o].staticShape());
    ctx.outputs.push_back(out.back().view());
  }
  try {
    op->run(ctx);
  } catch (const Error&) {
    return {};
  }
  return out;
}

void readKnownAsConstants(ir::Graph& g, const std::vector<bool>& from, const std::vector<ir::Tensor>& known,
                          const std::string& suffix) {
  std::vector<ir::ValueId> as_constant(g.values.size(), ir::kNoValue);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    if (from[n]) continue;
    for (ir::ValueId& in : g.nodes[n].inputs) {
      if (in == ir::kNoValue || size_t(in) >= known.size() || !known[size_t(in)].data) continue;
      const ir::NodeId p = g.value(in).producer;
      if (p == ir::kNoNode || !from[size_t(p)]) continue;
      if (as_constant[size_t(in)] == ir::kNoValue) {
        const std::string name = g.value(in).name + suffix;
        as_constant[size_t(in)] = g.addConstantValue(name, g.constants.addCopy(name, known[size_t(in)]));
      }
      in = as_constant[size_t(in)];
    }
  }
}

}  // namespace partita::kernels
