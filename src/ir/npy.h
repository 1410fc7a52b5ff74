// NumPy .npy files (format versions 1.0-3.0, little-endian, C order) to and from
// owned tensors. Errors name the file and what is wrong.
#pragma once

#include <string>

#include "ir/tensor.h"

namespace partita {

ir::OwnedTensor readNpy(const std::string& path);
// Writes atomically enough for outputs: a temp file in the same directory, then rename.
void writeNpy(const std::string& path, const ir::Tensor& t);

}  // namespace partita
