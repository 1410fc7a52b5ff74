// MatMul pieces shared by MatMul (nn_matmul.cpp) and the quantized matmuls
// (nn_quant.cpp).
#pragma once

#include "kernels/op_registry.h"

namespace partita::kernels {

// Output type of numpy-style matmul of `a` and `b` (batch dims broadcast, 1-D operands
// promoted and their added dim dropped); dtype is a's.
ir::TensorType inferMatMulOutput(InferContext& c, const ir::TensorType& a, const ir::TensorType& b);

// y = a @ b, all of one dtype (float32/64 through BLAS; int32/64, uint32/64 by loops).
// Fails naming the shapes when they do not fit.
void matmulForward(KernelContext& c, const ir::Tensor& a, const ir::Tensor& b, const ir::Tensor& y);

}  // namespace partita::kernels
