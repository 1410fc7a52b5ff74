// Tensor types: an element type and a shape whose dimensions are either known sizes
// or named symbols (ONNX's dim_param), or wholly unknown.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace partita::ir {

struct Dim {
  int64_t value = -1;  // >= 0 when known
  std::string symbol;  // the symbol's name when value < 0 (may be empty: unknown)

  static Dim known(int64_t v) { return Dim{v, {}}; }
  static Dim symbolic(std::string s) { return Dim{-1, std::move(s)}; }
  bool isKnown() const { return value >= 0; }
  bool operator==(const Dim&) const = default;
};

struct TensorType {
  DType dtype = DType::kUndefined;
  bool has_rank = false;  // false: the rank itself is unknown
  std::vector<Dim> dims;

  static TensorType of(DType t, const std::vector<int64_t>& shape);
  static TensorType unranked(DType t) { return TensorType{t, false, {}}; }

  size_t rank() const { return dims.size(); }
  bool isStatic() const;  // rank and every dimension known
  std::vector<int64_t> staticShape() const;  // requires isStatic()
  int64_t numel() const;  // -1 unless static
  std::string str() const;  // "float32[1,3,N,224]", "int64[?]" or "float32[*]"
  bool operator==(const TensorType&) const = default;
};

// Elements of a static shape; throws Error(kInvalidArgument) for a negative dimension
// or a count over INT64_MAX (ir/limits.h has the non-throwing checkedNumel).
int64_t shapeNumel(const std::vector<int64_t>& shape);
// Numpy broadcasting in one direction: can `shape` be stretched to `out` (each of its
// dimensions, aligned from the right, 1 or equal; its rank at most out's)?
bool broadcastsInto(const std::vector<int64_t>& shape, const std::vector<int64_t>& out);
// "[1,3,224,224]"; past kMaxDimsShown dims "[1,1,...,... rank 1048576]", so a message
// about a hostile shape stays short.
std::string shapeStr(const std::vector<int64_t>& shape);
inline constexpr size_t kMaxDimsShown = 32;

}  // namespace partita::ir
