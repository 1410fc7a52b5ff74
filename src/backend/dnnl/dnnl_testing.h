// Test support for the dnnl backend: the generic helpers of backend_testing.h plus
// questions about the dnnl regions of a compiled graph.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "backend/backend_testing.h"
#include "backend/dnnl/dnnl_program.h"
#include "partita/error.h"

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

// A dnnl module blob's version (the u32 after its magic).
inline uint32_t blobVersion(const std::vector<std::byte>& blob) {
  uint32_t version = 0;
  std::memcpy(&version, blob.data() + 4, 4);
  return version;
}

// The text of the error that reading `blob` marked as version `version` gives, or
// "read" when it is read.
inline std::string readAsVersion(std::vector<std::byte> blob, uint32_t version) {
  std::memcpy(blob.data() + 4, &version, 4);
  try {
    readProgram(blob.data(), blob.size());
    return "read";
  } catch (const Error& e) {
    return e.what();
  }
}

}  // namespace partita::dnnl_backend::testing
