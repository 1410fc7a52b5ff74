// Element types of tensors (the enum itself is public: include/partita/dtype.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "partita/dtype.h"

namespace partita::ir {

using partita::DType;

constexpr int kNumDTypes = 14;

using partita::dtypeSize;
using partita::dtypeName;  // "float32", "int64", ...
DType dtypeFromName(std::string_view name);  // kUndefined when unknown
// ONNX TensorProto.DataType numbers (as in model files and "to"/"dtype" attributes)
// -> DType; kUndefined for types partita has no dtype for (string, complex, float8)
// and for unknown numbers.
DType dtypeFromOnnx(int64_t onnx_type);
bool isFloat(DType t);    // float16, bfloat16, float32, float64
bool isInteger(DType t);  // signed or unsigned integers (not bool)

// float16 / bfloat16 <-> float32 conversions (round to nearest even).
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bfloat16ToFloat(uint16_t b);
uint16_t floatToBfloat16(float f);

}  // namespace partita::ir
