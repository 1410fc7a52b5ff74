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

// The element count and byte size of a dense tensor. Throw Error(kInvalidArgument) for
// a negative dimension or a count that overflows 64 bits.
int64_t numelOf(const std::vector<int64_t>& shape);
size_t nbytesOf(DType dtype, const std::vector<int64_t>& shape);

// What a model may ask for: every tensor it describes (inputs, constants, values, the
// outputs of data-dependent steps) has at most `max_rank` dimensions and at most
// `max_bytes` bytes, counting a dimension of 0 as 1 (so the strides and offsets of
// even an empty tensor fit). Set per model: CompileOptions::limits, LoadOptions::limits.
// The defaults are far above any real model and far below 64-bit overflow.
struct TensorLimits {
  uint64_t max_bytes = uint64_t(1) << 40;  // 1 TiB
  size_t max_rank = 16;
};

struct TensorView {
  DType dtype = DType::kUndefined;
  std::vector<int64_t> shape;
  void* data = nullptr;

  bool defined() const { return dtype != DType::kUndefined; }
  size_t rank() const { return shape.size(); }
  int64_t numel() const { return numelOf(shape); }
  size_t nbytes() const { return nbytesOf(dtype, shape); }
  int64_t dim(int i) const { return shape[size_t(i < 0 ? i + int(shape.size()) : i)]; }

  template <typename T>
  T* as() const { return static_cast<T*>(data); }
};

class Tensor {
 public:
  Tensor() = default;
  // Zero-filled. Throws Error(kInvalidArgument) for a shape whose size overflows 64
  // bits and when the memory cannot be had.
  Tensor(DType dtype, std::vector<int64_t> shape);
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
  // Only the bytes past the end are zeroed: the caller writes every byte of the data
  // (a copy; a model's output copied out of a run: no memset of megabytes first).
  struct Unfilled {};
  Tensor(DType dtype, std::vector<int64_t> shape, Unfilled);
  std::unique_ptr<void, Free> storage_;
  TensorView view_;
};

}  // namespace partita
