#include "backend/dnnl/dnnl_replay.h"

#include "backend/dnnl/dnnl_function_lowering.h"
#include "backend/dnnl/dnnl_memory_desc.h"
#include "ir/limits.h"
#include "kernels/known_values.h"
#include "kernels/op_registry.h"
#include "partita/error.h"

namespace partita::dnnl_backend {

namespace {

std::string shapesText(const std::vector<std::vector<int64_t>>& shapes) {
  std::string s;
  for (size_t i = 0; i < shapes.size(); ++i) s += (i ? ", " : "") + ir::shapeStr(shapes[i]);
  return s;
}

}  // namespace

ir::Graph regionAt(const ir::Graph& region, const std::vector<std::vector<int64_t>>& shapes) {
  ir::Graph g = region;
  if (shapes.size() != g.inputs.size())
    throw Error(ErrorCode::kInvalidArgument, "the region takes " + std::to_string(g.inputs.size()) +
                                                 " inputs, given " + std::to_string(shapes.size()));
  for (size_t i = 0; i < shapes.size(); ++i) {
    ir::Value& v = g.value(g.inputs[i]);
    const ir::TensorType& want = v.type;
    bool fits = want.has_rank && want.rank() == shapes[i].size();
    for (size_t d = 0; fits && d < shapes[i].size(); ++d)
      fits = !want.dims[d].isKnown() || want.dims[d].value == shapes[i][d];
    if (!fits)
      throw Error(ErrorCode::kInvalidArgument, "region input '" + v.name + "' must be " + want.str() + ", not " +
                                                   ir::shapeStr(shapes[i]));
    v.type = ir::TensorType::of(want.dtype, shapes[i]);
    ir::checkLimits(v.type, {}, ErrorCode::kInvalidArgument, "region input '" + v.name + "'");
  }
  // The contents known at these shapes: the constants whose bytes the blob keeps, and
  // the shape computations the region holds (Shape of its values, the arithmetic on
  // it: docs/dynamic_shapes.md), evaluated as the compiler's representative graph is.
  std::vector<ir::Tensor> views(g.values.size());
  std::vector<ir::OwnedTensor> computed;  // their storage stays where it is when moved
  for (size_t v = 0; v < g.values.size(); ++v)
    if (g.values[v].isConstant()) {
      const ir::Constant& c = g.constants.get(g.values[v].constant);
      if (c.bytes.data) views[v] = c.view();
    }
  const kernels::PoolResolver constants(g.constants);
  std::vector<ir::TensorType> in_types;
  std::vector<const ir::Tensor*> in_values;
  std::vector<bool> evaluated(g.nodes.size(), false);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const ir::Node& node = g.nodes[n];
    in_types.clear();
    in_values.clear();
    for (ir::ValueId in : node.inputs) {
      in_types.push_back(in == ir::kNoValue ? ir::TensorType{} : g.typeOf(in));
      in_values.push_back(in != ir::kNoValue && views[size_t(in)].data ? &views[size_t(in)] : nullptr);
    }
    std::vector<ir::TensorType> out;
    try {
      out = kernels::inferNode(node, in_types, in_values, &constants, {}, &g);
    } catch (const Error& e) {
      throw Error(ErrorCode::kInvalidArgument, e.what());
    }
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      if (node.outputs[o] == ir::kNoValue) continue;
      ir::Value& v = g.value(node.outputs[o]);
      if (o >= out.size() || !out[o].isStatic())
        throw Error(ErrorCode::kInvalidArgument, node.op_type + " node '" + node.name + "' (making '" + v.name +
                                                     "'): its shape does not follow from the input shapes");
      v.type = out[o];
    }
    // (A node of these ops over run-time data, such as the product of two scales, is
    // not known: it stays.)
    std::vector<ir::OwnedTensor> known;
    if (kernels::isShapeOp(node)) known = kernels::evaluateKnown(node, in_types, in_values, out, &constants);
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      if (node.outputs[o] == ir::kNoValue) continue;
      if (known.empty() && out[o].numel() == 0)  // (a shape computation may be empty: Shape of a scalar)
        throw Error(ErrorCode::kInvalidArgument, node.op_type + " node '" + node.name + "' (making '" +
                                                     g.value(node.outputs[o]).name + "') would be empty: " +
                                                     out[o].str());
      if (known.empty()) continue;
      views[size_t(node.outputs[o])] = known[o].view();
      computed.push_back(std::move(known[o]));
    }
    evaluated[n] = !known.empty();
  }
  // What the other nodes read of them becomes a constant of this instance (a Reshape's
  // target, as at a fixed shape); the shape computations are then dropped.
  kernels::readKnownAsConstants(g, evaluated, views, "");
  for (ir::ValueId out : g.outputs)
    if (g.value(out).producer != ir::kNoNode && evaluated[size_t(g.value(out).producer)])
      throw Error(ErrorCode::kInvalidArgument, "region output '" + g.value(out).name + "' is a shape computation");
  std::vector<ir::Node> kept;
  for (size_t n = 0; n < g.nodes.size(); ++n)
    if (!evaluated[n]) kept.push_back(std::move(g.nodes[n]));
  g.nodes.clear();
  for (ir::Value& v : g.values) v.producer = ir::kNoNode;
  for (ir::Node& node : kept) g.addNode(std::move(node));
  return g;
}

backend::Region wholeRegion(const ir::Graph& region) {
  backend::Region r;
  for (size_t n = 0; n < region.nodes.size(); ++n) r.nodes.push_back(ir::NodeId(n));
  r.inputs = region.inputs;
  r.outputs = region.outputs;
  return r;
}

ReplayArgs::ReplayArgs(const PolyFunction& poly)
    : poly_(poly),
      weights_used_(poly.weights.size(), false),
      derived_used_(poly.derived.size(), false),
      embedded_used_(poly.embedded.size(), false) {}

ir::ConstId ReplayArgs::global(ir::ConstId id) const {
  if (id >= poly_.global.size()) internal("region constant " + std::to_string(id) + " out of range");
  return poly_.global[id];
}

// The first record not used yet that `match` accepts, else the first it accepts (a
// record found twice: e.g. the same weights shared by two steps); -1 when none.
template <typename Record, typename Match>
int pick(const std::vector<Record>& records, std::vector<bool>& used, const Match& match) {
  int first = -1;
  for (size_t i = 0; i < records.size(); ++i) {
    if (!match(records[i])) continue;
    if (!used[i]) {
      used[i] = true;
      return int(i);
    }
    if (first < 0) first = int(i);
  }
  return first;
}

Arg ReplayArgs::borrow(int key, ir::ConstId id, const dnnl::memory::desc& md) {
  return Arg{key, ArgSource::kConstant, global(id), md, false};
}

Arg ReplayArgs::embed(int key, const void*, const dnnl::memory::desc& md, const std::vector<ir::ConstId>& absorbed) {
  std::vector<ir::ConstId> globals;
  for (ir::ConstId id : absorbed) globals.push_back(global(id));
  int i = pick(poly_.embedded, embedded_used_, [&](const PolyFunction::Embedded& e) {
    return e.absorbed == globals && sameDesc(e.md, md);
  });
  if (i < 0)
    throw Error(ErrorCode::kUnsupported, "dnnl module: this shape needs bytes computed from constant " +
                                             (globals.empty() ? std::string("?") : std::to_string(globals[0])) +
                                             " in layout " + layoutString(md) + ", which the compiler did not make");
  return Arg{key, ArgSource::kEmbedded, poly_.embedded[size_t(i)].offset, md, false};
}

ir::ConstId ReplayArgs::derive(ir::ConstId source, const dnnl::memory::desc&, const void*,
                               const dnnl::memory::desc& to, bool same_values_as_source) {
  const ir::ConstId g = global(source);
  int i = pick(poly_.derived, derived_used_, [&](const PolyFunction::Derived& d) {
    return d.source == g && d.same_values == same_values_as_source && sameDesc(d.md, to);
  });
  if (i < 0)
    throw Error(ErrorCode::kUnsupported, "dnnl module: this shape needs constant " + std::to_string(g) +
                                             " in layout " + layoutString(to) + ", which the compiler did not store");
  return poly_.derived[size_t(i)].id;
}

std::optional<dnnl::memory::desc> ReplayArgs::storedWeights(ir::ConstId source, bool folded) {
  const ir::ConstId g = global(source);
  int i = pick(poly_.weights, weights_used_,
               [&](const PolyFunction::Weights& w) { return w.source == g && w.folded == folded; });
  if (i < 0) return std::nullopt;
  return poly_.weights[size_t(i)].md;
}

Function replayFunction(const PolyFunction& poly, const std::vector<std::vector<int64_t>>& shapes) {
  ir::Graph g = regionAt(poly.graph, shapes);
  ReplayArgs args(poly);
  const backend::Region region = wholeRegion(g);
  try {
    FunctionLowering lowering(g, args, region);
    return lowering.run();
  } catch (const dnnl::error& e) {
    throw Error(ErrorCode::kUnsupported, "dnnl module: oneDNN cannot compile the region for input shapes " +
                                             shapesText(shapes) + ": " + e.what());
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kUnsupported) throw;
    throw Error(ErrorCode::kUnsupported, "dnnl module: the region cannot be compiled for input shapes " +
                                             shapesText(shapes) + ": " + e.what());
  }
}

}  // namespace partita::dnnl_backend
