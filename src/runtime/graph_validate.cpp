#include "runtime/graph_validate.h"

#include "kernels/control_flow.h"
#include "partita/error.h"
#include "runtime/graph_executor.h"

namespace partita::runtime {

namespace {

std::string madeBy(const ir::Graph& g, ir::ValueId v, const ir::Node& node) {
  return "value '" + g.value(v).name + "' (made by " + node.op_type + " node '" + node.name + "')";
}

// The recorded type agrees with the inferred one: same dtype and rank where both say,
// and equal sizes where both know a dim.
bool agrees(const ir::TensorType& recorded, const ir::TensorType& inferred) {
  if (inferred.dtype != ir::DType::kUndefined && recorded.dtype != inferred.dtype) return false;
  // An optional recorded as what it holds, or the other way (passes::inferShapes lets a
  // declaration narrow an optional; the run checks the value made).
  if (inferred.dtype != ir::DType::kUndefined && !kernels::kindsFit(recorded, inferred) &&
      !kernels::kindsFit(inferred, recorded))
    return false;
  if (!recorded.has_rank || !inferred.has_rank) return true;
  if (recorded.rank() != inferred.rank()) return false;
  for (size_t d = 0; d < recorded.rank(); ++d)
    if (recorded.dims[d].isKnown() && inferred.dims[d].isKnown() && recorded.dims[d].value != inferred.dims[d].value)
      return false;
  return true;
}

}  // namespace

std::vector<bool> validateGraph(const ir::Graph& g, const ConstStore& store, const ir::TensorLimits& limits) {
  // A tensor input without an element type would be bound to whatever a caller passes:
  // no kernel could tell how many bytes its elements take.
  for (ir::ValueId in : g.inputs)
    if (g.typeOf(in).isTensor() && g.typeOf(in).dtype == ir::DType::kUndefined)
      throw Error(ErrorCode::kInvalidArtifact, "graph input '" + g.value(in).name + "' has no element type");
  const StoreConstants constants(store);
  std::vector<bool> dynamic(g.nodes.size(), false);
  std::vector<ir::TensorType> in_types;
  std::vector<const ir::Tensor*> in_values;
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const ir::Node& node = g.nodes[n];
    bool all_static = true;
    for (ir::ValueId in : node.inputs)
      if (in != ir::kNoValue && !g.typeOf(in).isStatic()) all_static = false;
    for (ir::ValueId out : node.outputs)
      if (out != ir::kNoValue && !g.typeOf(out).isStatic()) all_static = false;
    if (isCallNode(node)) {
      // A module runs tensors only: a sequence or optional never crosses into one.
      for (const auto* ids : {&node.inputs, &node.outputs})
        for (ir::ValueId v : *ids)
          if (v != ir::kNoValue && !g.typeOf(v).isTensor())
            throw Error(ErrorCode::kInvalidArtifact,
                        "call node '" + node.name + "' passes '" + g.value(v).name + "', which is " +
                            g.typeOf(v).kindStr() + ", to a module (modules take tensors only)");
      for (ir::ValueId out : node.outputs)
        if (out != ir::kNoValue) ir::checkLimits(g.typeOf(out), limits, ErrorCode::kInvalidModel, madeBy(g, out, node));
      dynamic[n] = !all_static;
      continue;
    }
    // Every planned or declared type within the limits, before anything is sized by it.
    for (ir::ValueId out : node.outputs)
      if (out != ir::kNoValue) ir::checkLimits(g.typeOf(out), limits, ErrorCode::kInvalidModel, madeBy(g, out, node));
    in_types.clear();
    in_values.clear();
    for (ir::ValueId in : node.inputs) {
      in_types.push_back(in == ir::kNoValue ? ir::TensorType{} : g.typeOf(in));
      const ir::Value* v = in == ir::kNoValue ? nullptr : &g.value(in);
      in_values.push_back(v && v->isConstant() ? &store.get(v->constant) : nullptr);
    }
    std::vector<ir::TensorType> inferred;
    try {
      inferred = kernels::inferNode(node, in_types, in_values, &constants, limits, &g);
    } catch (const Error& e) {
      throw Error(ErrorCode::kInvalidArtifact, std::string("the graph does not check: ") + e.what());
    }
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      ir::ValueId out = node.outputs[o];
      if (out == ir::kNoValue) continue;
      const ir::TensorType& recorded = g.typeOf(out);
      if (!agrees(recorded, inferred[o]))
        throw Error(ErrorCode::kInvalidArtifact, madeBy(g, out, node) + " is typed " + recorded.str() +
                                                     " but its inputs make " + inferred[o].str());
      // A recorded static shape that inference cannot confirm is checked at run time.
      if (!inferred[o].isStatic()) all_static = false;
    }
    dynamic[n] = !all_static;
  }
  return dynamic;
}

}  // namespace partita::runtime
