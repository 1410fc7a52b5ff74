#include "ir/tensor.h"

#include <cstdlib>
#include <cstring>

namespace partita::ir {

void OwnedTensor::Free::operator()(void* p) const { std::free(p); }

OwnedTensor::OwnedTensor(DType dtype, std::vector<int64_t> shape) {
  view_.dtype = dtype;
  view_.shape = std::move(shape);
  size_t bytes = view_.nbytes();
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  storage_.reset(std::aligned_alloc(64, rounded));
  if (!storage_) throw std::bad_alloc();
  std::memset(storage_.get(), 0, rounded);
  view_.data = storage_.get();
}

OwnedTensor::OwnedTensor(const OwnedTensor& other) : OwnedTensor(other.dtype(), other.shape()) {
  if (other.nbytes()) std::memcpy(view_.data, other.data(), other.nbytes());
}

OwnedTensor& OwnedTensor::operator=(const OwnedTensor& other) {
  if (this != &other) *this = OwnedTensor(other);
  return *this;
}

}  // namespace partita::ir
