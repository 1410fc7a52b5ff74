// Checked counts of tensor elements and bytes, and the limits a model's tensors must
// keep (partita::TensorLimits, include/partita/tensor.h: 2^40 bytes and rank 16 by
// default). Every count made from a shape a file, a flag or a data-dependent op gave
// goes through these, so no count wraps: an overflow or a broken limit is an error
// that names the tensor (and the node making it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/type.h"
#include "partita/error.h"
#include "partita/tensor.h"

namespace partita::ir {

using partita::TensorLimits;

// Elements of `shape`; nothing for a negative dimension or a count over INT64_MAX.
std::optional<int64_t> checkedNumel(const std::vector<int64_t>& shape);
// Bytes of dtype[shape]; nothing for a negative dimension or a size over INT64_MAX.
std::optional<uint64_t> checkedNbytes(DType dtype, const std::vector<int64_t>& shape);

// Why `type` breaks `limits`, or "" when it keeps them: a rank over max_rank, a
// negative dimension, or more than max_bytes bytes (the known dimensions' product, a 0
// counted as 1, times the element size; so strides fit too, even of an empty tensor).
std::string limitViolation(const TensorType& type, const TensorLimits& limits);
// Throws Error(code, "<what>: <violation>") when `type` breaks `limits`.
void checkLimits(const TensorType& type, const TensorLimits& limits, ErrorCode code, const std::string& what);

}  // namespace partita::ir
