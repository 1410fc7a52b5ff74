#include "backend/dnnl/dnnl_lowering.h"

#include <omp.h>

#include <map>
#include <memory>
#include <string>

#include "backend/dnnl/dnnl_function_lowering.h"
#include "backend/dnnl/dnnl_module_builder.h"
#include "backend/dnnl/dnnl_primitive.h"
#include "backend/dnnl/dnnl_replay.h"
#include "partita/error.h"

namespace partita::dnnl_backend {

namespace {

// Whether the run-time half needs a region constant's bytes: what the decoders read
// of values (axes, starts, shapes, bounds, exponents: integer constants and
// one-element float ones). Weights are known by their type only.
bool keepsBytes(const ir::Constant& c) {
  if (c.dtype == ir::DType::kFloat32) return ir::shapeNumel(c.shape) <= 1;
  return c.nbytes() <= 65536;
}

// A shape-polymorphic region as a graph of its own (PolyFunction::graph), its
// constants numbered locally; the bytes the run-time half needs go into the blob.
std::shared_ptr<PolyFunction> regionGraph(const ir::Graph& g, const backend::Region& r, ModuleBuilder& mb) {
  auto poly = std::make_shared<PolyFunction>();
  poly->representative = r.representative;
  ir::Graph& rg = poly->graph;
  std::map<ir::ValueId, ir::ValueId> local;
  std::map<ir::ConstId, ir::ConstId> local_const;
  auto map = [&](ir::ValueId v) -> ir::ValueId {
    if (v == ir::kNoValue) return ir::kNoValue;
    auto it = local.find(v);
    if (it != local.end()) return it->second;
    const ir::Value& value = g.value(v);
    ir::Value copy{value.name, value.type, ir::kNoNode, ir::kNoConst};
    if (value.isConstant()) {
      auto c = local_const.find(value.constant);
      if (c == local_const.end()) {
        const ir::Constant& k = g.constants.get(value.constant);
        ir::ConstId id = rg.constants.add(k.name, k.dtype, k.shape, k.bytes, k.layout);
        poly->global.push_back(value.constant);
        poly->bytes_at.push_back(keepsBytes(k) ? int64_t(mb.embedBytes(k.bytes.data, k.nbytes())) : -1);
        c = local_const.emplace(value.constant, id).first;
      }
      copy.constant = c->second;
    }
    rg.values.push_back(std::move(copy));
    return local[v] = ir::ValueId(rg.values.size() - 1);
  };
  for (ir::ValueId in : r.inputs) rg.inputs.push_back(map(in));
  for (ir::NodeId id : r.nodes) {
    ir::Node node = g.nodes[size_t(id)];
    for (const auto& [name, a] : node.attrs.all())
      if (a.kind == ir::Attribute::Kind::kTensor)
        internal("node '" + node.name + "' of a shape-polymorphic region has a tensor attribute");
    for (ir::ValueId& in : node.inputs) in = map(in);
    for (ir::ValueId& out : node.outputs) out = map(out);
    rg.addNode(std::move(node));
  }
  for (ir::ValueId out : r.outputs) rg.outputs.push_back(map(out));
  rg.verify();
  return poly;
}

// Lowers a shape-polymorphic region at its representative shapes (the steps stored in
// the blob; oneDNN chooses the weight layouts there) and records what the run-time
// half's replays need.
Function compilePolymorphic(const ir::Graph& g, const backend::Region& r, ModuleBuilder& mb) {
  std::shared_ptr<PolyFunction> poly = regionGraph(g, r, mb);
  const ir::Graph at = regionAt(poly->graph, r.representative);
  const backend::Region region = wholeRegion(at);
  mb.beginPolymorphic(at, *poly);
  FunctionLowering lowering(at, mb, region);
  Function fn = lowering.run();
  mb.endPolymorphic();
  fn.poly = std::move(poly);
  return fn;
}

}  // namespace

backend::ModuleImage compileRegions(const ir::Graph& g, const std::vector<backend::Region>& regions,
                                    backend::ConstantSink& sink) {
  // oneDNN tunes implementations to the thread count: the compiler driver has set
  // this thread's OpenMP team size to the one runs will use (CompileOptions::threads).
  ModuleBuilder mb(g, sink);
  for (const backend::Region& r : regions) {
    try {
      if (r.polymorphic()) {
        mb.program().functions.push_back(compilePolymorphic(g, r, mb));
      } else {
        FunctionLowering lowering(g, mb, r);
        mb.program().functions.push_back(lowering.run());
      }
    } catch (const dnnl::error& e) {
      throw Error(ErrorCode::kInternal,
                  std::string("dnnl backend: oneDNN rejected a region it was given: ") + e.what());
    }
  }
  backend::ModuleImage image = mb.finish();
  // What the recorded layouts were chosen for: checked by DnnlModule::load.
  image.assumptions = layoutAssumptions(omp_get_max_threads());
  return image;
}

}  // namespace partita::dnnl_backend
