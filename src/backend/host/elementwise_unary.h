// Registration of the unary elementwise ops (elementwise_unary.cpp), called by
// registerElementwiseOps.
#pragma once

#include "backend/host/op_registry.h"

namespace partita::host::elementwise {

// Abs, Neg, Sign, Relu, math functions, activations, IsNaN/IsInf, Not, Clip.
void registerUnaryOps(OpRegistry& r);

}  // namespace partita::host::elementwise
