// Compile half of the dnnl backend: lowers each region (a connected set of ONNX nodes
// the backend claimed) into a Function of oneDNN primitive steps, fusing post-ops
// (bias, activations, residual sums, constant operands) and folding inference
// BatchNormalization into a preceding Conv. oneDNN chooses the weight layouts
// (format `any`); the weights are reordered here, once, and handed to the
// ConstantSink as derived constants. The module being built is a ModuleBuilder
// (dnnl_module_builder.h); each region is lowered by a FunctionLowering
// (dnnl_function_lowering.h, which lists the files holding its parts).
#pragma once

#include <vector>

#include "backend/backend.h"

namespace partita::dnnl_backend {

// Function i of the image computes regions[i]. Reads `g` only; derived constants go to `sink`.
// `bf16`: static regions' Conv and MatMul compute in bfloat16; `winograd`: static
// regions' 3x3 convolutions may use Winograd's algorithm (FunctionLowering).
backend::ModuleImage compileRegions(const ir::Graph& g, const std::vector<backend::Region>& regions,
                                    backend::ConstantSink& sink, bool bf16 = false, bool winograd = false);

}  // namespace partita::dnnl_backend
