// Sequence and optional values at run time (ir::ValueKind kSequence / kOptional).
//
// An Aggregate is immutable once made and shared: an op that makes a new sequence
// from an old one (SequenceInsert, SequenceErase) shares the element tensors it keeps,
// and passing a sequence through If, Loop or Identity shares the whole value. Its
// length is data, so it lives outside the planned activation arena: its elements are
// heap tensors of their own, freed when the last value referring to them is gone.
//
// The executor's value table holds tensor views (ir::Tensor), and a sequence or
// optional travels through it *boxed*: a view whose shape is {kBoxedDim} and whose
// data points to the Aggregate. The graph's types say statically which values are
// boxed, and kernels::inferNode refuses a non-tensor value at any op that does not
// take one, so no kernel sees a box as a tensor; should one ever try, the negative
// dimension makes numel() and nbytes() throw rather than read the Aggregate's bytes.
#pragma once

#include <memory>
#include <vector>

#include "ir/tensor.h"
#include "ir/type.h"

namespace partita::ir {

using SharedTensor = std::shared_ptr<const OwnedTensor>;

struct Aggregate : std::enable_shared_from_this<Aggregate> {
  ValueKind kind = ValueKind::kSequence;  // kSequence or kOptional
  ValueKind inner = ValueKind::kTensor;   // kOptional: holds a tensor or a sequence
  DType dtype = DType::kUndefined;        // of the elements (or of the tensor held)
  bool present = true;                    // kOptional: whether it holds a value
  // A sequence's elements; an optional's tensor (one) or its sequence's elements.
  std::vector<SharedTensor> tensors;

  // The type it has: kind and dtype, and the shape its elements share (merged).
  TensorType type() const;
  // Its kind and dtype only (elements unranked): what a run checks, in O(1).
  TensorType kindType() const;
};
using AggregatePtr = std::shared_ptr<const Aggregate>;

// The dimension that marks a boxed view (never a real tensor's: dims are >= 0).
inline constexpr int64_t kBoxedDim = -1;

inline Tensor box(const Aggregate& a) { return Tensor{a.dtype, {kBoxedDim}, const_cast<Aggregate*>(&a)}; }
inline bool isBoxed(const Tensor& t) { return t.shape.size() == 1 && t.shape[0] == kBoxedDim; }
// The aggregate a boxed view points to (Error(kInternal) for a tensor view).
const Aggregate& unbox(const Tensor& t);
// Shared ownership of a boxed view's aggregate.
inline AggregatePtr shareBoxed(const Tensor& t) { return unbox(t).shared_from_this(); }

// The type of a run-time value: ir::typeOf for a tensor, Aggregate::type for a box.
TensorType runtimeTypeOf(const Tensor& t);

}  // namespace partita::ir
