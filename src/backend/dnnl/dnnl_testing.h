// Test support for the dnnl backend: the generic helpers of backend_testing.h plus
// questions about the dnnl regions of a compiled graph.
#pragma once

#include <string>
#include <vector>

#include "backend/backend_testing.h"

namespace partita::dnnl_backend::testing {

using namespace partita::backend::testing;

inline size_t dnnlRegions(const Compiled& c) {
  size_t n = 0;
  for (const auto& r : c.parts.regions) n += r.backend == "dnnl";
  return n;
}

inline std::vector<std::string> dnnlOps(const Compiled& c) {
  std::vector<std::string> ops;
  for (const auto& r : c.parts.regions)
    if (r.backend == "dnnl") ops.insert(ops.end(), r.ops.begin(), r.ops.end());
  return ops;
}

}  // namespace partita::dnnl_backend::testing
