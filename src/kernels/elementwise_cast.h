// Element type conversion for the host elementwise kernels: Cast/CastLike, and running
// float16/bfloat16 tensors through the float32 kernels.
#pragma once

#include <cstdint>

#include "kernels/op_registry.h"
#include "ir/tensor.h"

namespace partita::kernels::elementwise {

inline constexpr int64_t kOnnxString = 8;

bool isHalfLike(ir::DType t);  // float16 or bfloat16

// Converts every element of `src` into `dst` (same number of elements, any dtypes).
// Float to integer truncates toward zero and wraps modulo the target width like numpy
// on x86 (through int64); NaN becomes 0; anything nonzero (and NaN) becomes true.
// To float16 rounds to nearest even; to bfloat16 truncates (ONNX's reference).
void castElements(const ir::Tensor& src, const ir::Tensor& dst);

// Runs `body` on a context whose float16/bfloat16 inputs and outputs are replaced by
// float32 copies, then rounds the float32 outputs back into `c`'s outputs.
void runThroughFloat(KernelContext& c, KernelFn body);

// Whether any input or output of `c` is float16/bfloat16: such a node runs its float32
// kernel through runThroughFloat (the host's kernels compute in float32 or wider).
bool anyHalfLike(const KernelContext& c);

}  // namespace partita::kernels::elementwise
