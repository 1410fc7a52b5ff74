// Compile half of the dnnl backend: lowers each region (a connected set of ONNX nodes
// the backend claimed) into a Function of oneDNN primitive steps, fusing post-ops
// (bias, activations, residual sums, constant operands) and folding inference
// BatchNormalization into a preceding Conv. oneDNN chooses the weight layouts
// (format `any`); the weights are reordered here, once, and added to the graph's
// constant pool as derived constants.
#pragma once

#include <vector>

#include "backend/backend.h"
#include "runtime/module.h"

namespace partita::dnnl_backend {

// Function i of the image computes regions[i]. Adds derived constants to g.constants.
runtime::ModuleImage compileRegions(ir::Graph& g, const std::vector<backend::Region>& regions);

}  // namespace partita::dnnl_backend
