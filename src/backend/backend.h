// The backend contract, compile side. A backend
//   - names itself (name());
//   - says which nodes it can take (supports(); ONNX Runtime's GetCapability), and
//     which composite patterns it fuses (patterns(); for people and `inspect`);
//   - compiles the regions the partitioner gave it into one runtime module image:
//     a blob, the number of functions (one per region, in order) and its constant
//     uses by ID: borrow, derive (adding the derived tensor to the graph's pool, with
//     a layout tag) or embed.
// Its run-time half registers a module kind (src/runtime/module.h).
// Adding a backend: a folder src/backend/<name>/ and one line in src/backend/backends.cpp.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "runtime/module.h"

namespace partita::backend {

// A connected, acyclic set of nodes of the main graph given to one backend.
struct Region {
  std::vector<ir::NodeId> nodes;     // topological order (indices into the graph before partitioning)
  std::vector<ir::ValueId> inputs;   // non-constant values the region reads from outside
  std::vector<ir::ValueId> outputs;  // values the region produces that are read outside it
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  virtual bool supports(const ir::Graph& g, ir::NodeId node) const = 0;
  // Composite patterns fused inside a region, e.g. "Conv+Add+Relu".
  virtual std::vector<std::string> patterns() const { return {}; }
  // Compiles `regions` (function i = regions[i]). May add derived constants to
  // `g.constants`; must not otherwise change `g`.
  virtual runtime::ModuleImage compile(ir::Graph& g, const std::vector<Region>& regions) = 0;
};

}  // namespace partita::backend
