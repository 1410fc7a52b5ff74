// Tensors as the API sees them.
//   TensorView: a typed, shaped view over bytes someone else owns (a mapped artifact,
//               an activation arena, a caller's buffer). Copying it copies the view.
//   Tensor:     owns its bytes (64-byte aligned heap storage); copying copies them.
// Layout is dense row-major.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "partita/dtype.h"

namespace partita {

int64_t numelOf(const std::vector<int64_t>& shape);

struct TensorView {
  DType dtype = DType::kUndefined;
  std::vector<int64_t> shape;
  void* data = nullptr;

  bool defined() const { return dtype != DType::kUndefined; }
  size_t rank() const { return shape.size(); }
  int64_t numel() const { return numelOf(shape); }
  size_t nbytes() const { return size_t(numel()) * dtypeSize(dtype); }
  int64_t dim(int i) const { return shape[size_t(i < 0 ? i + int(shape.size()) : i)]; }

  template <typename T>
  T* as() const { return static_cast<T*>(data); }
};

class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, std::vector<int64_t> shape);  // zero-filled
  Tensor(const Tensor& other);
  Tensor& operator=(const Tensor& other);
  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;

  // A tensor holding a copy of `view`'s bytes.
  static Tensor copyOf(const TensorView& view);

  const TensorView& view() const { return view_; }
  TensorView& view() { return view_; }
  DType dtype() const { return view_.dtype; }
  const std::vector<int64_t>& shape() const { return view_.shape; }
  void* data() const { return view_.data; }
  int64_t numel() const { return view_.numel(); }
  size_t nbytes() const { return view_.nbytes(); }

  template <typename T>
  T* as() const { return view_.as<T>(); }

 private:
  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, Free> storage_;
  TensorView view_;
};

}  // namespace partita
