// Pieces shared by the host backend's shape and data-movement op files (shape_*.cpp):
// building tensor types, reading integer inputs that may be int32 or int64, checking
// axes and indices against a node's rank and dims, Transpose's permutation. The dnnl
// backend reads Transpose and Slice with them too (so it cannot read them differently).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kernels/op_registry.h"
#include "kernels/op_util.h"

namespace partita::kernels::shape {

inline ir::TensorType ranked(ir::DType dtype, std::vector<ir::Dim> dims) {
  return ir::TensorType{dtype, true, std::move(dims)};
}

inline std::byte* bytesOf(const ir::Tensor& t) { return static_cast<std::byte*>(t.data); }

inline bool isIndexType(ir::DType t) { return t == ir::DType::kInt32 || t == ir::DType::kInt64; }

// The integer value of input `i` when inference knows it (int32 or int64), else nothing.
inline std::optional<std::vector<int64_t>> knownInts(const InferContext& c, size_t i) {
  const ir::Tensor* v = c.value(i);
  if (!v) return std::nullopt;
  if (!isIndexType(v->dtype))
    c.fail("input " + std::to_string(i) + " must be int32 or int64, got " +
           std::string(ir::dtypeName(v->dtype)));
  return readInts(*v);
}

// The length of a 1-D input when its type fixes it (the rank of an unknown shape value,
// or a count of axes): fails when it is over the rank limit, before anything is sized
// by it.
inline std::optional<int64_t> staticLength(const InferContext& c, size_t i) {
  if (!c.hasInput(i)) return std::nullopt;
  const ir::TensorType& t = c.input(i);
  if (!t.has_rank || t.rank() != 1 || !t.dims[0].isKnown()) return std::nullopt;
  if (uint64_t(t.dims[0].value) > c.limits.max_rank)
    c.fail("input " + std::to_string(i) + " has " + std::to_string(t.dims[0].value) +
           " entries, more than the limit of " + std::to_string(c.limits.max_rank) +
           " dimensions (TensorLimits::max_rank)");
  return t.dims[0].value;
}

// Normalises `axis` (negative counts from the back) into [0, rank), or [0, rank] when
// `inclusive` (Flatten), failing through the context (InferContext or KernelContext)
// so the message names the node.
template <typename Ctx>
int64_t axisIn(const Ctx& c, int64_t axis, int64_t rank, bool inclusive = false) {
  int64_t limit = inclusive ? rank + 1 : rank;
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= limit)
    c.fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return a;
}

// Transpose's perm attribute; absent, the reversal of `rank` axes. Not checked here.
inline std::vector<int64_t> transposePerm(const ir::AttributeMap& attrs, size_t rank) {
  std::vector<int64_t> perm = attrs.getInts("perm");
  if (perm.empty() && !attrs.has("perm"))
    for (size_t i = 0; i < rank; ++i) perm.push_back(int64_t(rank - 1 - i));
  return perm;
}

// Reads int32 or int64 index tensors without copying them.
class IndexView {
 public:
  IndexView() = default;
  explicit IndexView(const ir::Tensor& t) : data_(t.data), wide_(t.dtype == ir::DType::kInt64) {}
  int64_t operator[](int64_t i) const {
    return wide_ ? static_cast<const int64_t*>(data_)[i] : int64_t(static_cast<const int32_t*>(data_)[i]);
  }

 private:
  const void* data_ = nullptr;
  bool wide_ = true;
};

// Adds `dim` to a negative index and checks the result lies in [0, dim).
template <typename Ctx>
int64_t indexIn(const Ctx& c, int64_t index, int64_t dim) {
  int64_t i = index < 0 ? index + dim : index;
  if (i < 0 || i >= dim)
    c.fail("index " + std::to_string(index) + " is out of range for a dimension of size " +
           std::to_string(dim));
  return i;
}

}  // namespace partita::kernels::shape
