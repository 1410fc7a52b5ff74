// Registration of the unary elementwise ops (elementwise_unary.cpp), called by
// registerElementwiseOps.
#pragma once

#include "kernels/op_registry.h"

namespace partita::kernels::elementwise {

// Abs, Neg, Sign, Relu, math functions, activations, IsNaN/IsInf, Not, Clip.
void registerUnaryOps(OpRegistry& r);

}  // namespace partita::kernels::elementwise
