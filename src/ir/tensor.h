// The IR's names for the public tensor types (include/partita/tensor.h):
// ir::Tensor is a view, ir::OwnedTensor owns its bytes.
#pragma once

#include "ir/dtype.h"
#include "ir/type.h"
#include "partita/tensor.h"

namespace partita::ir {

using Tensor = partita::TensorView;
using OwnedTensor = partita::Tensor;

inline TensorType typeOf(const Tensor& t) { return TensorType::of(t.dtype, t.shape); }

}  // namespace partita::ir
