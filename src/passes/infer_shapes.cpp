#include <algorithm>
#include <cstring>
#include <new>

#include <omp.h>

#include "ir/limits.h"
#include "kernels/op_registry.h"
#include "kernels/op_util.h"
#include "partita/error.h"
#include "passes/passes.h"

namespace partita::passes {

namespace {

std::string producedBy(const ir::Value& v, const ir::Node& node) {
  return "value '" + v.name + "' (made by " + node.op_type + " node '" + node.name + "')";
}

// The declared type of `v` as a hint to what inference found (passes.h has the rule):
// a declared dtype must match; declared dims fill what inference does not know, and
// are ignored where it does (and where the ranks differ).
ir::TensorType mergeDeclared(const ir::TensorType& inferred, const ir::TensorType& declared, const ir::Value& v,
                             const ir::Node& node) {
  if (declared.dtype != ir::DType::kUndefined && inferred.dtype != ir::DType::kUndefined &&
      declared.dtype != inferred.dtype)
    throw Error(ErrorCode::kInvalidModel, producedBy(v, node) + " is declared " + declared.str() + " but is " +
                                              inferred.str());
  if (declared.dtype == ir::DType::kUndefined || !declared.has_rank) return inferred;
  if (!inferred.has_rank) {
    ir::TensorType t = declared;
    t.dtype = inferred.dtype == ir::DType::kUndefined ? declared.dtype : inferred.dtype;
    return t;
  }
  if (inferred.rank() != declared.rank()) return inferred;
  ir::TensorType t = inferred;
  for (size_t i = 0; i < t.rank(); ++i)
    if (!t.dims[i].isKnown() && (declared.dims[i].isKnown() || !declared.dims[i].symbol.empty()))
      t.dims[i] = declared.dims[i];
  return t;
}

bool foldShapeOf(ir::Graph& g, ir::Node& node) {
  // Shape and Size of a statically shaped value are constants even when its data is not.
  if (node.domain != "" || (node.op_type != "Shape" && node.op_type != "Size")) return false;
  if (!node.hasInput(0) || !node.hasOutput(0) || !g.typeOf(node.inputs[0]).isStatic()) return false;
  std::vector<int64_t> shape = g.typeOf(node.inputs[0]).staticShape();
  std::vector<int64_t> data;
  if (node.op_type == "Size") {
    data.push_back(ir::shapeNumel(shape));
  } else {
    int64_t rank = int64_t(shape.size());
    int64_t start = node.attrs.getInt("start", 0), end = node.attrs.getInt("end", rank);
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = std::clamp<int64_t>(start, 0, rank);
    end = std::clamp<int64_t>(end, 0, rank);
    for (int64_t i = start; i < end; ++i) data.push_back(shape[size_t(i)]);
  }
  std::vector<int64_t> out_shape;
  if (node.op_type == "Shape") out_shape.push_back(int64_t(data.size()));
  ir::ConstId c = g.constants.add(g.value(node.outputs[0]).name, ir::DType::kInt64, out_shape,
                                  Bytes::copyOf(data.data(), data.size() * sizeof(int64_t)));
  ir::Value& out = g.value(node.outputs[0]);
  out.constant = c;
  out.producer = ir::kNoNode;
  out.type = ir::TensorType::of(ir::DType::kInt64, out_shape);
  return true;
}

}  // namespace

void inferShapes(ir::Graph& g, const FoldOptions& options) {
  kernels::PoolResolver resolver(g.constants);
  std::vector<bool> folded(g.nodes.size(), false);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    ir::Node& node = g.nodes[n];
    if (foldShapeOf(g, node)) {
      folded[n] = true;
      continue;
    }
    std::vector<ir::TensorType> in_types;
    std::vector<ir::Tensor> const_views;
    std::vector<const ir::Tensor*> in_values;
    const_views.reserve(node.inputs.size());
    bool all_const = true;
    size_t in_bytes = 0;
    for (ir::ValueId in : node.inputs) {
      if (in == ir::kNoValue) {
        in_types.emplace_back();
        in_values.push_back(nullptr);
        continue;
      }
      const ir::Value& v = g.value(in);
      in_types.push_back(v.type);
      if (v.isConstant()) {
        const_views.push_back(g.constants.get(v.constant).view());
        in_values.push_back(&const_views.back());
        in_bytes += const_views.back().nbytes();
      } else {
        in_values.push_back(nullptr);
        all_const = false;
      }
    }
    std::vector<ir::TensorType> out_types =
        kernels::inferNode(node, in_types, in_values, &resolver, options.limits, &g);
    size_t out_bytes = 0;
    bool out_static = true;
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      if (node.outputs[o] == ir::kNoValue) continue;
      ir::Value& out = g.value(node.outputs[o]);
      out.type = mergeDeclared(out_types[o], out.type, out, node);
      ir::checkLimits(out.type, options.limits, ErrorCode::kInvalidModel, producedBy(out, node));
      if (out.type.isStatic())
        out_bytes += size_t(out.type.numel()) * ir::dtypeSize(out.type.dtype);
      else
        out_static = false;
    }
    if (!all_const || !out_static) continue;
    const kernels::OpDef* op = kernels::OpRegistry::global().find(node.domain, node.op_type);
    if (!op || !op->hasKernel()) continue;  // infer-only: a backend runs it
    if (!op->deterministic) continue;       // a random op draws at every run
    // Element type conversions of constants (a float16 or int8 weight made float32)
    // grow only by the element size, and their readers need them constant.
    const bool conversion = node.domain.empty() && (node.op_type == "Cast" || node.op_type == "CastLike" ||
                                                    node.op_type == "DequantizeLinear");
    if (out_bytes > options.max_growth_bytes && out_bytes > in_bytes && !conversion) continue;

    // Evaluate with the host kernel; outputs become constants.
    std::vector<ir::OwnedTensor> results;
    kernels::KernelContext ctx{node, &resolver, {}, {}, omp_get_max_threads()};
    for (size_t i = 0; i < node.inputs.size(); ++i)
      ctx.inputs.push_back(in_values[i] ? *in_values[i] : ir::Tensor{});
    results.reserve(node.outputs.size());
    for (ir::ValueId out : node.outputs) {
      if (out == ir::kNoValue) {
        results.emplace_back();
        ctx.outputs.emplace_back();
        continue;
      }
      const ir::TensorType& t = g.typeOf(out);
      results.emplace_back(t.dtype, t.staticShape());
      ctx.outputs.push_back(results.back().view());
    }
    try {
      op->run(ctx);
    } catch (const std::bad_alloc&) {
      throw Error(ErrorCode::kInvalidModel,
                  node.op_type + " node '" + node.name + "': out of memory while folding it into a constant");
    }
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      if (node.outputs[o] == ir::kNoValue) continue;
      ir::Value& out = g.value(node.outputs[o]);
      out.constant = g.constants.addCopy(out.name, results[o].view());
      out.producer = ir::kNoNode;
    }
    folded[n] = true;
  }
  std::vector<ir::Node> kept;
  kept.reserve(g.nodes.size());
  for (size_t n = 0; n < g.nodes.size(); ++n)
    if (!folded[n]) kept.push_back(std::move(g.nodes[n]));
  g.nodes = std::move(kept);
  for (size_t n = 0; n < g.nodes.size(); ++n)
    for (ir::ValueId out : g.nodes[n].outputs)
      if (out != ir::kNoValue) g.value(out).producer = ir::NodeId(n);
  g.verify();
}

}  // namespace partita::passes
