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

// What a value is: a tensor, a sequence of tensors (ONNX seq(tensor(T)): one element
// type, element shapes that may differ), or an optional (of a tensor or a sequence).
// The numbers are written into artifacts (docs/format.md, "Graphs").
enum class ValueKind : uint8_t { kTensor = 0, kSequence = 1, kOptional = 2 };

// A value's type. For a tensor: its element type and shape. For a sequence: the
// element type and what every element's shape has in common (merged as
// kernels::mergeTypes merges; unranked when nothing is known). For an optional: the
// same for what it holds (`inner`: a tensor or a sequence).
struct TensorType {
  DType dtype = DType::kUndefined;
  bool has_rank = false;  // false: the rank itself is unknown
  std::vector<Dim> dims;
  ValueKind kind = ValueKind::kTensor;
  ValueKind inner = ValueKind::kTensor;  // kOptional: what it holds (kTensor or kSequence)

  static TensorType of(DType t, const std::vector<int64_t>& shape);
  static TensorType unranked(DType t) { return TensorType{t, false, {}}; }

  // A sequence of `element`s; an optional holding `contents` (a tensor or sequence type).
  static TensorType sequenceOf(const TensorType& element);
  static TensorType optionalOf(const TensorType& contents);

  bool isTensor() const { return kind == ValueKind::kTensor; }
  // A sequence's element type, or an optional's contents (itself for a tensor).
  TensorType contents() const;
  // A sequence's element type (an optional of a sequence: its sequence's element type).
  TensorType element() const;

  size_t rank() const { return dims.size(); }
  bool isStatic() const;                     // a tensor with its rank and every dimension known
  std::vector<int64_t> staticShape() const;  // requires isStatic()
  int64_t numel() const;  // -1 unless static
  // "float32[1,3,N,224]", "int64[?]", "float32[*]"; "seq(float32[*])",
  // "optional(seq(int64[?]))".
  std::string str() const;
  // For messages: "a float32 tensor", "a sequence of float32 tensors", "an optional
  // float32 tensor", "an optional sequence of float32 tensors".
  std::string kindStr() const;
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
