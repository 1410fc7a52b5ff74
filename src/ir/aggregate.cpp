#include "ir/aggregate.h"

#include "partita/error.h"

namespace partita::ir {

TensorType Aggregate::type() const {
  // The shape the elements share: each dim where they all agree, else unknown.
  TensorType elem = TensorType::unranked(dtype);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::vector<int64_t>& s = tensors[i]->shape();
    if (i == 0) {
      elem = TensorType::of(dtype, s);
    } else if (elem.has_rank && elem.rank() == s.size()) {
      for (size_t d = 0; d < s.size(); ++d)
        if (elem.dims[d].value != s[d]) elem.dims[d] = Dim{};
    } else {
      elem = TensorType::unranked(dtype);
    }
  }
  if (kind == ValueKind::kSequence) return TensorType::sequenceOf(elem);
  if (inner == ValueKind::kSequence) return TensorType::optionalOf(TensorType::sequenceOf(elem));
  return TensorType::optionalOf(elem);
}

TensorType Aggregate::kindType() const {
  const TensorType elem = TensorType::unranked(dtype);
  if (kind == ValueKind::kSequence) return TensorType::sequenceOf(elem);
  return TensorType::optionalOf(inner == ValueKind::kSequence ? TensorType::sequenceOf(elem) : elem);
}

const Aggregate& unbox(const Tensor& t) {
  if (!isBoxed(t) || !t.data)
    throw Error(ErrorCode::kInternal, "a " + std::string(dtypeName(t.dtype)) + shapeStr(t.shape) +
                                          " tensor where a sequence or optional value was expected");
  return *static_cast<const Aggregate*>(t.data);
}

TensorType runtimeTypeOf(const Tensor& t) { return isBoxed(t) ? unbox(t).type() : typeOf(t); }

}  // namespace partita::ir
