// Element access in double for the host ops that compute in double whatever their
// float type (losses, signal processing, sampling, detection): reading a float16,
// bfloat16, float32 or float64 tensor (or an int32/int64 one where an op accepts
// either) and writing one. These ops are small next to the memory they touch, so one
// conversion per element costs nothing that matters.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "kernels/op_registry.h"

namespace partita::kernels::fio {

inline bool isFloatType(ir::DType t) {
  return t == ir::DType::kFloat32 || t == ir::DType::kFloat64 || t == ir::DType::kFloat16 ||
         t == ir::DType::kBFloat16;
}

// Element i of a float or int32/int64 tensor as double.
inline double get(const ir::Tensor& t, int64_t i) {
  switch (t.dtype) {
    case ir::DType::kFloat32: return t.as<const float>()[i];
    case ir::DType::kFloat64: return t.as<const double>()[i];
    case ir::DType::kFloat16: return ir::halfToFloat(t.as<const uint16_t>()[i]);
    case ir::DType::kBFloat16: return ir::bfloat16ToFloat(t.as<const uint16_t>()[i]);
    case ir::DType::kInt32: return t.as<const int32_t>()[i];
    case ir::DType::kInt64: return double(t.as<const int64_t>()[i]);
    default: return 0;
  }
}

inline void set(const ir::Tensor& t, int64_t i, double v) {
  switch (t.dtype) {
    case ir::DType::kFloat32: t.as<float>()[i] = float(v); break;
    case ir::DType::kFloat64: t.as<double>()[i] = v; break;
    case ir::DType::kFloat16: t.as<uint16_t>()[i] = ir::floatToHalf(float(v)); break;
    case ir::DType::kBFloat16: t.as<uint16_t>()[i] = ir::floatToBfloat16(float(v)); break;
    case ir::DType::kInt32: t.as<int32_t>()[i] = int32_t(v); break;
    case ir::DType::kInt64: t.as<int64_t>()[i] = int64_t(v); break;
    default: break;
  }
}

// The whole tensor as doubles; fails through `c` (naming the node) for other dtypes.
template <typename Ctx>
std::vector<double> read(const Ctx& c, const ir::Tensor& t, const std::string& what, bool ints_too = false) {
  if (!isFloatType(t.dtype) &&
      !(ints_too && (t.dtype == ir::DType::kInt32 || t.dtype == ir::DType::kInt64)))
    c.fail(what + " has dtype " + std::string(ir::dtypeName(t.dtype)) + ", which this op does not take");
  std::vector<double> v(size_t(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = get(t, int64_t(i));
  return v;
}

template <typename Ctx>
void write(const Ctx& c, const ir::Tensor& t, const std::vector<double>& v) {
  if (size_t(t.numel()) != v.size())
    c.fail("output " + ir::shapeStr(t.shape) + " does not hold " + std::to_string(v.size()) + " values");
  for (size_t i = 0; i < v.size(); ++i) set(t, int64_t(i), v[i]);
}

// Fails inference unless input i (when present and typed) is one of the float types.
inline void requireFloat(const InferContext& c, size_t i, const std::string& what) {
  if (!c.hasInput(i)) return;
  ir::DType t = c.input(i).dtype;
  if (!isFloatType(t))
    c.fail(what + " must be float16, bfloat16, float32 or float64, got " + std::string(ir::dtypeName(t)));
}

inline void requireIndex(const InferContext& c, size_t i, const std::string& what) {
  if (!c.hasInput(i)) return;
  ir::DType t = c.input(i).dtype;
  if (t != ir::DType::kInt32 && t != ir::DType::kInt64)
    c.fail(what + " must be int32 or int64, got " + std::string(ir::dtypeName(t)));
}

}  // namespace partita::kernels::fio
