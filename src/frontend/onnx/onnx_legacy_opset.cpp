#include "frontend/onnx/onnx_legacy_opset.h"

#include <onnx/defs/schema.h>

#include <set>
#include <utility>

#include "frontend/onnx/onnx_tensor_reader.h"
#include "kernels/op_registry.h"

namespace partita::frontend::onnx_import {

LegacyOpsetUpgrader::LegacyOpsetUpgrader(int legacy_opset, ir::Graph& graph, const kernels::OpRegistry& ops,
                                         std::string where, NoteUnsupported note)
    : legacy_opset_(legacy_opset),
      graph_(graph),
      ops_(ops),
      where_(std::move(where)),
      note_(std::move(note)) {}

int64_t LegacyOpsetUpgrader::knownRank(ir::ValueId v) const {
  if (v == ir::kNoValue) return -1;
  const ir::TensorType& t = graph_.typeOf(v);
  return t.has_rank ? int64_t(t.rank()) : -1;
}

ir::ValueId LegacyOpsetUpgrader::appendUnitDims(ir::ValueId v, int64_t extra, const std::string& node_name) {
  const ir::Value& val = graph_.value(v);
  std::string name = val.name + "/" + node_name + "/unsqueezed";
  if (val.isConstant()) {
    const ir::Constant& c = graph_.constants.get(val.constant);
    std::vector<int64_t> shape = c.shape;
    shape.insert(shape.end(), size_t(extra), 1);
    ir::ConstId id = graph_.constants.add(name, c.dtype, shape, c.bytes);  // same bytes, new shape
    return graph_.addConstantValue(name, id);
  }
  int64_t rank = knownRank(v);
  std::vector<int64_t> axes;
  for (int64_t i = 0; i < extra; ++i) axes.push_back(rank + i);
  ir::Node unsqueeze;
  unsqueeze.op_type = "Unsqueeze";
  unsqueeze.opset = kMinOpset;
  unsqueeze.name = node_name + "/unsqueeze";
  unsqueeze.attrs.setInts("axes", axes);
  unsqueeze.inputs = {v};
  ir::TensorType t = val.type;
  t.dims.insert(t.dims.end(), size_t(extra), ir::Dim::known(1));
  ir::ValueId out = graph_.addValue(name, t);
  unsqueeze.outputs = {out};
  if (!ops_.find("", "Unsqueeze")) note_("Unsqueeze", kMinOpset, unsqueeze.name, {});
  graph_.addNode(std::move(unsqueeze));
  return out;
}

void LegacyOpsetUpgrader::upgrade(ir::Node& node, const std::string& key) {
  const onnx::OpSchema* old_schema = onnx::OpSchemaRegistry::Schema(node.op_type, legacy_opset_, "");
  const onnx::OpSchema* new_schema = onnx::OpSchemaRegistry::Schema(node.op_type, kMinOpset, "");
  if (!old_schema || !new_schema) return;  // not an ONNX op (then also not in the registry)
  if (old_schema->SinceVersion() == new_schema->SinceVersion()) return;  // unchanged
  // Ops whose opset-1..6 forms differ from opset 7 only in ways upgradeToOpset7 rewrites.
  static const std::set<std::string> kRewritten = {
      "Add",    "Sub",  "Mul",   "Div",         "Pow",
      "And",    "Or",   "Xor",   "Equal",       "Greater",
      "Less",   "Gemm", "PRelu", "AveragePool", "BatchNormalization",
      "Dropout"};
  if (kRewritten.count(node.op_type)) {
    upgradeToOpset7(node);
    return;
  }
  note_(key, legacy_opset_, node.name,
        "its opset-" + std::to_string(legacy_opset_) + " definition differs from opset " +
            std::to_string(kMinOpset));
}

void LegacyOpsetUpgrader::upgradeToOpset7(ir::Node& node) {
  node.attrs.erase("consumed_inputs");  // an opset-1 memory hint without meaning
  static const std::set<std::string> kLegacyBroadcast = {"Add", "Sub", "Mul",   "Div",     "Pow", "And",
                                                         "Or",  "Xor", "Equal", "Greater", "Less"};
  const std::string& op = node.op_type;
  if (kLegacyBroadcast.count(op)) {
    // Opset 1..6: with broadcast=1 and `axis`, B's dims align with A's starting at axis.
    if (node.attrs.getInt("broadcast", 0) != 0 && node.attrs.has("axis") && node.inputs.size() == 2) {
      int64_t ra = knownRank(node.inputs[0]), rb = knownRank(node.inputs[1]);
      if (ra < 0 || rb < 0)
        unsupported(where_ + op + " node '" + node.name +
                    "' uses legacy (opset < 7) broadcasting with an axis on inputs of unknown rank");
      int64_t axis = node.attrs.getInt("axis", 0);
      if (axis < 0) axis += ra;
      // B's dims must fit A's from `axis` on: 0 <= axis <= ra - rb (ranks are small, so
      // nothing here overflows whatever the attribute holds).
      if (axis < 0 || axis > ra - rb)
        invalid(where_ + op + " node '" + node.name + "': broadcast axis " +
                std::to_string(node.attrs.getInt("axis", 0)) + " does not fit ranks " + std::to_string(ra) +
                " and " + std::to_string(rb));
      const int64_t extra = ra - axis - rb;
      if (extra > 0) node.inputs[1] = appendUnitDims(node.inputs[1], extra, node.name);
    }
    node.attrs.erase("broadcast");
    node.attrs.erase("axis");
  } else if (op == "Gemm") {
    node.attrs.erase("broadcast");  // opset 7 always broadcasts C
  } else if (op == "PRelu" && node.inputs.size() == 2) {
    // Opset 6 applies a 1-D slope per channel (axis 1); numpy broadcasting would
    // align it with the last axis.
    int64_t rx = knownRank(node.inputs[0]);
    const ir::TensorType& st = graph_.typeOf(node.inputs[1]);
    if (rx >= 3 && st.isStatic() && st.rank() == 1 && st.dims[0].value > 1)
      node.inputs[1] = appendUnitDims(node.inputs[1], rx - 2, node.name);
  } else if (op == "BatchNormalization" || op == "Dropout") {
    node.attrs.erase("is_test");
  }
  // AveragePool-7 only adds count_include_pad, whose default (0) is the older behavior.
}

}  // namespace partita::frontend::onnx_import
