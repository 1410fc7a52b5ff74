// The backend contract, compile side. A backend
//   - names itself (name());
//   - says which nodes it can take (supports(); ONNX Runtime's GetCapability), and
//     which composite patterns it fuses (patterns(); for people and `inspect`);
//   - compiles the regions the partitioner gave it into one ModuleImage: a blob, the
//     number of functions (one per region, in order) and its constant uses by ID:
//     borrow, derive or embed (built with ConstantUses, src/backend/constant_uses.h).
//     It reads the graph only; the tensors it derives (with a layout tag) go to the
//     ConstantSink, which assigns their IDs; the partitioner adds them to the graph's
//     constant pool after compile returns.
// Its run-time half is a module kind (src/runtime/module.h) listed in src/api/module_kinds.cpp.
// Adding a backend: a folder src/backend/<name>/ and one line in src/compiler/backends.cpp.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/constant_sink.h"
#include "ir/graph.h"
#include "runtime/module.h"

namespace partita::backend {

// What a backend's compile step produces and the linker writes as one module section.
struct ModuleImage {
  std::string kind;  // the runtime module kind that loads it, e.g. "dnnl"
  std::vector<std::byte> blob;
  std::vector<runtime::ConstUse> uses;  // one per ID, ascending
  uint32_t num_functions = 0;
  // What the compiled module assumes of the machine that runs it (e.g. "isa" ->
  // "avx512_core", a library version): written into the artifact, handed back at load.
  std::vector<std::pair<std::string, std::string>> assumptions;
};

// A connected, acyclic set of nodes of the main graph given to one backend.
struct Region {
  std::vector<ir::NodeId> nodes;     // topological order (indices into the graph before partitioning)
  std::vector<ir::ValueId> inputs;   // non-constant values the region reads from outside
  std::vector<ir::ValueId> outputs;  // values the region produces that are read outside it
  // A shape-polymorphic region (some value has symbolic dims): each input's shape in
  // the model's representative shape (compiler/representative_shapes.h), which the
  // backend compiles the region for first. Empty for a region of static values.
  std::vector<std::vector<int64_t>> representative;
  // Other input shapes of a shape-polymorphic region, consistent with one another
  // (each the region's inputs at one probe of the model's inputs: representative
  // shapes scaled; compiler/representative_shapes.h), for a backend to check the
  // choices it makes at the representative shape against.
  std::vector<std::vector<std::vector<int64_t>>> probes;
  bool polymorphic() const { return !representative.empty(); }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  virtual bool supports(const ir::Graph& g, ir::NodeId node) const = 0;
  // Whether the backend takes `node`, some of whose values have symbolic dims, for
  // every shape they may take at run time. `rep` is `g` at the representative shape
  // (every value sized by inference there, same node and value ids); only nodes whose
  // values all have known ranks in `g` and static shapes in `rep` are asked. A backend
  // that takes one compiles its regions' `representative` shapes and runs the others
  // through RuntimeModule::outputShapes. Default: no.
  virtual bool supportsPolymorphic(const ir::Graph& g, const ir::Graph& rep, ir::NodeId node) const { return false; }
  // Whether the backend's shape-polymorphic regions may hold *shape computations*:
  // small values made from Shape and Size of the region's values (or its inputs) and
  // constants only, such as the target of `x.view(seq, batch, -1)` exported with
  // symbolic dims. In `rep` such a value reads as a constant where a node of another
  // kind uses it; the partitioner then puts the nodes that compute it in that node's
  // region, and the backend computes them again at each run-time shape. Default: no
  // (a node reading one is not offered).
  virtual bool evaluatesShapeValues() const { return false; }
  // Why supports() refuses `node`, for error messages (e.g. "input 0 has a symbolic
  // shape"); empty when the backend does not say.
  virtual std::string whyNot(const ir::Graph& g, ir::NodeId node) const { return {}; }
  // The float arithmetic CompileOptions::precision allows for float32 compute: "fp32"
  // (float32 throughout, the default), "fp32-half" (float32 for a model written in
  // float16/bfloat16: algorithms whose error stays below float16's resolution, 2^-11,
  // are allowed, e.g. Winograd convolutions) or "bf16" (heavy ops in bfloat16 where
  // the backend has fast kernels for it). Called once, before compile. Default: ignored.
  virtual void setFloatPrecision(std::string_view precision) {}
  // Composite patterns fused inside a region, e.g. "Conv+Add+Relu".
  virtual std::vector<std::string> patterns() const { return {}; }
  // Compiles `regions` (function i = regions[i]) of `g`, which it only reads. Each
  // tensor it derives goes to `sink`, whose returned ID the image declares as a
  // kDerive use; `g.constants` does not hold it before compile returns.
  virtual ModuleImage compile(const ir::Graph& g, const std::vector<Region>& regions, ConstantSink& sink) = 0;
};

}  // namespace partita::backend
