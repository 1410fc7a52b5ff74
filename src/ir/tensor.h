// Tensor: a typed, shaped view over bytes that someone else owns (a mapped file, an
// activation arena, a caller's buffer). Copying a Tensor copies the view, not the data.
// Layout is dense row-major.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "ir/dtype.h"
#include "ir/type.h"

namespace partita::ir {

struct Tensor {
  DType dtype = DType::kUndefined;
  std::vector<int64_t> shape;
  void* data = nullptr;

  bool defined() const { return dtype != DType::kUndefined; }
  size_t rank() const { return shape.size(); }
  int64_t numel() const { return shapeNumel(shape); }
  size_t nbytes() const { return size_t(numel()) * dtypeSize(dtype); }
  int64_t dim(int i) const { return shape[size_t(i < 0 ? i + int(shape.size()) : i)]; }
  TensorType type() const { return TensorType::of(dtype, shape); }

  template <typename T>
  T* as() const { return static_cast<T*>(data); }
};

// OwnedTensor: a Tensor with its own heap storage (64-byte aligned). Used for
// caller-facing inputs and outputs, folded constants and dynamic-shape values.
class OwnedTensor {
 public:
  OwnedTensor() = default;
  OwnedTensor(DType dtype, std::vector<int64_t> shape);
  OwnedTensor(const OwnedTensor& other);
  OwnedTensor& operator=(const OwnedTensor& other);
  OwnedTensor(OwnedTensor&&) noexcept = default;
  OwnedTensor& operator=(OwnedTensor&&) noexcept = default;

  const Tensor& view() const { return view_; }
  Tensor& view() { return view_; }
  DType dtype() const { return view_.dtype; }
  const std::vector<int64_t>& shape() const { return view_.shape; }
  void* data() const { return view_.data; }
  size_t nbytes() const { return view_.nbytes(); }

  template <typename T>
  T* as() const { return view_.as<T>(); }

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> storage_;
  Tensor view_;
};

}  // namespace partita::ir
