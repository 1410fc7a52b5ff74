#include "ir/tensor.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace partita {

int64_t numelOf(const std::vector<int64_t>& shape) { return ir::shapeNumel(shape); }

void Tensor::Free::operator()(void* p) const { std::free(p); }

Tensor::Tensor(DType dtype, std::vector<int64_t> shape) {
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

Tensor::Tensor(const Tensor& other) : Tensor(other.dtype(), other.shape()) {
  if (other.nbytes()) std::memcpy(view_.data, other.data(), other.nbytes());
}

Tensor& Tensor::operator=(const Tensor& other) {
  if (this != &other) *this = Tensor(other);
  return *this;
}

Tensor Tensor::copyOf(const TensorView& v) {
  Tensor t(v.dtype, v.shape);
  if (v.nbytes()) std::memcpy(t.data(), v.data, v.nbytes());
  return t;
}

}  // namespace partita
