// Convolution pieces shared by the float ops (nn_conv.cpp) and the quantized ones
// (nn_quant.cpp): shape inference, run-time shape checks and the forward kernel.
#pragma once

#include <cstdint>

#include "kernels/nn_window.h"
#include "kernels/op_registry.h"

namespace partita::kernels {

// One convolution's sizes, resolved at run time.
struct ConvShape {
  size_t nd = 0;  // spatial dims (1..3)
  int64_t n = 0, c = 0, m = 0, groups = 1, cg = 0, mg = 0;
  int64_t ksize = 1;  // product of kernel dims
  int64_t in_size = 1, out_size = 1;
  Geometry3 g{};
};

// Output type of a Conv-like node (attributes group, kernel_shape, strides, pads,
// dilations, auto_pad) with input `x` and weights `w`; dtype is x's.
ir::TensorType inferConvOutput(InferContext& c, const ir::TensorType& x, const ir::TensorType& w);

// Checks x [N, C, ...] and w [M, C / group, k...] against the attributes and the
// allocated output c.outputs[0]; fails (kInvalidArgument) naming what is wrong.
ConvShape convShape(KernelContext& c, const ir::Tensor& x, const ir::Tensor& w);

// y = conv(x, w) + bias (bias may be null). Parallel over the kernel threads.
void convForward(const ConvShape& s, const float* x, const float* w, const float* bias, float* y);
void convForward(const ConvShape& s, const double* x, const double* w, const double* bias, double* y);

}  // namespace partita::kernels
