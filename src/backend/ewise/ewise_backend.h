// The ewise backend, compile side: claims float32 elementwise ops (binary arithmetic,
// activations, math functions, Clip) whose non-constant operands all have the node's
// own static shape, and compiles each region -- a chain or tree of them -- into one
// function of an "ewise" module (ewise_program.h) that makes one pass over memory.
// Constant operands that broadcast into the shape are embedded in the blob when small
// (declared `embed`; the linker then stores them nowhere else unless another module
// borrows them) and borrowed from the weight store otherwise.
#pragma once

#include <memory>

#include "backend/backend.h"

namespace partita::backend {

std::unique_ptr<Backend> makeEwiseBackend();

}  // namespace partita::backend
