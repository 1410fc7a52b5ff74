// NumPy .npy files (format versions 1.0-3.0, little-endian, C order) to and from
// tensors, for feeding a Session and saving its outputs. Errors name the file and what
// is wrong.
#pragma once

#include <string>

#include "partita/tensor.h"

namespace partita {

Tensor readNpy(const std::string& path);
// Writes atomically enough for outputs: a temp file in the same directory, then rename.
void writeNpy(const std::string& path, const TensorView& t);

}  // namespace partita
