#include "ir/type.h"

#include <algorithm>
#include <optional>
#include <sstream>

#include "ir/limits.h"
#include "partita/error.h"

namespace partita::ir {

TensorType TensorType::of(DType t, const std::vector<int64_t>& shape) {
  TensorType tt{t, true, {}};
  tt.dims.reserve(shape.size());
  for (int64_t d : shape) tt.dims.push_back(Dim::known(d));
  return tt;
}

TensorType TensorType::sequenceOf(const TensorType& element) {
  TensorType t = element;
  t.kind = ValueKind::kSequence;
  t.inner = ValueKind::kTensor;
  return t;
}

TensorType TensorType::optionalOf(const TensorType& contents) {
  TensorType t = contents;
  t.kind = ValueKind::kOptional;
  t.inner = contents.kind == ValueKind::kSequence ? ValueKind::kSequence : ValueKind::kTensor;
  return t;
}

TensorType TensorType::contents() const {
  TensorType t = *this;
  t.kind = kind == ValueKind::kOptional ? inner : ValueKind::kTensor;
  t.inner = ValueKind::kTensor;
  return t;
}

TensorType TensorType::element() const {
  TensorType t = *this;
  t.kind = ValueKind::kTensor;
  t.inner = ValueKind::kTensor;
  return t;
}

bool TensorType::isStatic() const {
  if (kind != ValueKind::kTensor || !has_rank) return false;
  for (const Dim& d : dims)
    if (!d.isKnown()) return false;
  return true;
}

std::vector<int64_t> TensorType::staticShape() const {
  std::vector<int64_t> s;
  s.reserve(dims.size());
  for (const Dim& d : dims) s.push_back(d.value);
  return s;
}

int64_t TensorType::numel() const {
  if (!isStatic()) return -1;
  return shapeNumel(staticShape());
}

std::string TensorType::str() const {
  if (kind == ValueKind::kSequence) return "seq(" + element().str() + ")";
  if (kind == ValueKind::kOptional) return "optional(" + contents().str() + ")";
  std::ostringstream os;
  os << dtypeName(dtype);
  if (!has_rank) {
    os << "[*]";
    return os.str();
  }
  os << '[';
  const size_t shown = std::min(dims.size(), kMaxDimsShown);
  for (size_t i = 0; i < shown; ++i) {
    if (i) os << ',';
    if (dims[i].isKnown())
      os << dims[i].value;
    else
      os << (dims[i].symbol.empty() ? "?" : dims[i].symbol);
  }
  if (shown < dims.size()) os << ",... rank " << dims.size();
  os << ']';
  return os.str();
}

std::string TensorType::kindStr() const {
  const std::string elem = std::string(dtypeName(dtype));
  switch (kind) {
    case ValueKind::kTensor:
      return "a " + elem + " tensor";
    case ValueKind::kSequence:
      return "a sequence of " + elem + " tensors";
    case ValueKind::kOptional:
      return inner == ValueKind::kSequence ? "an optional sequence of " + elem + " tensors"
                                           : "an optional " + elem + " tensor";
  }
  return "a value of unknown kind";
}

int64_t shapeNumel(const std::vector<int64_t>& shape) {
  std::optional<int64_t> n = checkedNumel(shape);
  if (!n)
    throw Error(ErrorCode::kInvalidArgument, "shape " + shapeStr(shape) +
                                                 " has a negative dimension or more elements than 64 bits count");
  return *n;
}

bool broadcastsInto(const std::vector<int64_t>& shape, const std::vector<int64_t>& out) {
  if (shape.size() > out.size()) return false;
  const size_t lead = out.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1 && shape[d] != out[lead + d]) return false;
  return true;
}

std::string shapeStr(const std::vector<int64_t>& shape) {
  std::ostringstream os;
  os << '[';
  const size_t shown = std::min(shape.size(), kMaxDimsShown);
  for (size_t i = 0; i < shown; ++i) os << (i ? "," : "") << shape[i];
  if (shown < shape.size()) os << ",... rank " << shape.size();
  os << ']';
  return os.str();
}

}  // namespace partita::ir
