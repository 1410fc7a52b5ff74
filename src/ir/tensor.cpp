#include "ir/tensor.h"

#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "ir/limits.h"
#include "partita/error.h"

namespace partita {

int64_t numelOf(const std::vector<int64_t>& shape) { return ir::shapeNumel(shape); }

size_t nbytesOf(DType dtype, const std::vector<int64_t>& shape) {
  std::optional<uint64_t> bytes = ir::checkedNbytes(dtype, shape);
  if (!bytes)
    throw Error(ErrorCode::kInvalidArgument, std::string(ir::dtypeName(dtype)) + ir::shapeStr(shape) +
                                                 " has a negative dimension or more bytes than 64 bits count");
  return size_t(*bytes);
}

void Tensor::Free::operator()(void* p) const { std::free(p); }

Tensor::Tensor(DType dtype, std::vector<int64_t> shape) : Tensor(dtype, std::move(shape), Unfilled{}) {
  std::memset(view_.data, 0, view_.nbytes());
}

Tensor::Tensor(DType dtype, std::vector<int64_t> shape, Unfilled) {
  view_.dtype = dtype;
  view_.shape = std::move(shape);
  const size_t bytes = view_.nbytes();
  size_t rounded = bytes > SIZE_MAX - 63 ? 0 : (bytes + 63) / 64 * 64;
  if (bytes == 0) rounded = 64;
  if (rounded) storage_.reset(std::aligned_alloc(64, rounded));
  if (!storage_)
    throw Error(ErrorCode::kInvalidArgument, "out of memory: cannot allocate " + std::to_string(bytes) +
                                                 " bytes for a tensor of type " + std::string(ir::dtypeName(dtype)) +
                                                 ir::shapeStr(view_.shape));
  std::memset(static_cast<std::byte*>(storage_.get()) + bytes, 0, rounded - bytes);
  view_.data = storage_.get();
}

Tensor::Tensor(const Tensor& other) : Tensor(other.dtype(), other.shape(), Unfilled{}) {
  if (other.nbytes()) std::memcpy(view_.data, other.data(), other.nbytes());
}

Tensor& Tensor::operator=(const Tensor& other) {
  if (this != &other) *this = Tensor(other);
  return *this;
}

Tensor Tensor::copyOf(const TensorView& v) {
  Tensor t(v.dtype, v.shape, Unfilled{});
  if (v.nbytes()) std::memcpy(t.data(), v.data, v.nbytes());
  return t;
}

}  // namespace partita
