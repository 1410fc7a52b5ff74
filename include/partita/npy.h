// NumPy .npy files (format versions 1.0-3.0, little-endian, C order) to and from
// tensors, for feeding a Session and saving its outputs. Errors name the file and what
// is wrong.
#pragma once

#include <cstddef>
#include <string>

#include "partita/tensor.h"

namespace partita {

// Reads only a regular file (a FIFO or device is refused, not waited on); the header's
// shape must be plain integers and describe exactly the bytes that follow it, at most
// 2^40 of them.
Tensor readNpy(const std::string& path);
// The same parser and checks over .npy bytes already in memory; `name` stands for the
// file in messages.
Tensor readNpyBytes(const void* data, size_t size, const std::string& name);
// Writes atomically (base/atomic_file.h): the file appears complete or not at all, and
// an existing target that is not a writable regular file is refused.
void writeNpy(const std::string& path, const TensorView& t);

}  // namespace partita
