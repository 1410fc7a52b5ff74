// Host ops that produce values from shapes or scalars: Shape (with opset 15's
// start/end), Size, ConstantOfShape and Range.
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/op_registry.h"
#include "kernels/op_util.h"
#include "kernels/shape_common.h"
#include "kernels/shape_ops.h"
#include "kernels/shape_strided_copy.h"
#include "partita/error.h"

namespace partita::kernels::shape {

namespace {

using ir::Dim;
using ir::DType;
using ir::TensorType;

std::pair<int64_t, int64_t> shapeRange(const ir::AttributeMap& attrs, int opset, int64_t rank) {
  int64_t start = opset >= 15 ? attrs.getInt("start", 0) : 0;
  int64_t end = opset >= 15 ? attrs.getInt("end", rank) : rank;
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  return {start, std::max(start, end)};
}

void inferShape(InferContext& c) {
  const TensorType& in = c.input(0);
  if (!in.has_rank) {
    c.outputs[0] = ranked(DType::kInt64, {Dim{}});
    return;
  }
  auto [start, end] = shapeRange(c.attrs(), c.opset(), int64_t(in.rank()));
  c.outputs[0] = TensorType::of(DType::kInt64, {end - start});
}

void runShape(KernelContext& c) {
  const ir::Tensor& in = c.inputs[0];
  auto [start, end] = shapeRange(c.attrs(), c.opset(), int64_t(in.rank()));
  const ir::Tensor& out = c.outputs[0];
  if (out.numel() != end - start) c.fail("output has the wrong length");
  for (int64_t i = start; i < end; ++i) out.as<int64_t>()[i - start] = in.shape[size_t(i)];
}

void inferSize(InferContext& c) { c.outputs[0] = TensorType::of(DType::kInt64, {}); }

void runSize(KernelContext& c) { c.outputs[0].as<int64_t>()[0] = c.inputs[0].numel(); }

// ConstantOfShape's fill value: the "value" tensor attribute, float32 0 by default.
template <typename Ctx>
ir::Tensor fillValue(const Ctx& c) {
  static float zero = 0.f;
  ir::ConstId id = c.attrs().getTensor("value");
  if (id == ir::kNoConst) return ir::Tensor{DType::kFloat32, {1}, &zero};
  if (!c.constants) c.fail("no constant resolver for the value attribute");
  ir::Tensor t = c.constants->constant(id);
  if (t.numel() != 1) c.fail("value must hold exactly one element");
  return t;
}

void inferConstantOfShape(InferContext& c) {
  const DType dtype = fillValue(c).dtype;
  std::optional<std::vector<int64_t>> shape = knownInts(c, 0);
  if (!shape) {
    std::optional<int64_t> n = staticLength(c, 0);
    c.outputs[0] = n ? ranked(dtype, std::vector<Dim>(size_t(*n))) : TensorType::unranked(dtype);
    return;
  }
  for (int64_t s : *shape)
    if (s < 0) c.fail("negative dimension " + std::to_string(s));
  c.outputs[0] = TensorType::of(dtype, *shape);
}

void runConstantOfShape(KernelContext& c) {
  ir::Tensor v = fillValue(c);
  const ir::Tensor& out = c.outputs[0];
  if (out.dtype != v.dtype) c.fail("output dtype does not match the value");
  fillElements(bytesOf(out), bytesOf(v), out.numel(), ir::dtypeSize(out.dtype));
}

// Number of elements of Range(start, limit, delta).
template <typename Ctx>
int64_t rangeLength(const Ctx& c, const ir::Tensor& start, const ir::Tensor& limit, const ir::Tensor& delta) {
  if (start.numel() != 1 || limit.numel() != 1 || delta.numel() != 1)
    c.fail("start, limit and delta must be scalars");
  if (ir::isInteger(start.dtype)) {
    auto as_int = [](const ir::Tensor& t) {
      return t.dtype == DType::kInt64 ? t.as<int64_t>()[0] : int64_t(readScalar(t));
    };
    const int64_t s = as_int(start), l = as_int(limit), d = as_int(delta);
    if (d == 0) c.fail("delta cannot be 0");
    // ceil((l - s) / d) in 128 bits: l - s and the rounding may leave int64.
    const __int128 span = d > 0 ? __int128(l) - s : __int128(s) - l;
    const __int128 step = d > 0 ? __int128(d) : -__int128(d);
    const __int128 n = span > 0 ? (span + step - 1) / step : 0;
    if (n > INT64_MAX) c.fail("Range(" + std::to_string(s) + ", " + std::to_string(l) + ", " + std::to_string(d) +
                              ") has more elements than 64 bits count");
    return int64_t(n);
  }
  const double s = readScalar(start), l = readScalar(limit), d = readScalar(delta);
  if (d == 0) c.fail("delta cannot be 0");
  const double n = std::ceil((l - s) / d);
  if (std::isnan(n) || n >= 0x1p62)
    c.fail("Range(" + std::to_string(s) + ", " + std::to_string(l) + ", " + std::to_string(d) + ") has " +
           (std::isnan(n) ? std::string("no defined length") : "more elements than 64 bits count"));
  return n > 0 ? int64_t(n) : 0;
}

void inferRange(InferContext& c) {
  const DType dtype = c.input(0).dtype;
  if (c.value(0) && c.value(1) && c.value(2)) {
    c.outputs[0] = TensorType::of(dtype, {rangeLength(c, *c.value(0), *c.value(1), *c.value(2))});
    return;
  }
  c.outputs[0] = ranked(dtype, {Dim{}});
}

void runRange(KernelContext& c) {
  const ir::Tensor& out = c.outputs[0];
  const int64_t n = rangeLength(c, c.inputs[0], c.inputs[1], c.inputs[2]);
  if (out.numel() != n) c.fail("output has the wrong length");
  switch (out.dtype) {
    case DType::kFloat32: {
      const float s = c.inputs[0].as<float>()[0], d = c.inputs[2].as<float>()[0];
      for (int64_t i = 0; i < n; ++i) out.as<float>()[i] = s + float(i) * d;
      break;
    }
    case DType::kFloat64: {
      const double s = c.inputs[0].as<double>()[0], d = c.inputs[2].as<double>()[0];
      for (int64_t i = 0; i < n; ++i) out.as<double>()[i] = s + double(i) * d;
      break;
    }
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64: {
      auto as_int = [](const ir::Tensor& t) {
        return t.dtype == DType::kInt64 ? t.as<int64_t>()[0] : int64_t(readScalar(t));
      };
      const int64_t s = as_int(c.inputs[0]), d = as_int(c.inputs[2]);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t v = s + i * d;
        if (out.dtype == DType::kInt16) out.as<int16_t>()[i] = int16_t(v);
        if (out.dtype == DType::kInt32) out.as<int32_t>()[i] = int32_t(v);
        if (out.dtype == DType::kInt64) out.as<int64_t>()[i] = v;
      }
      break;
    }
    default:
      throw Error(ErrorCode::kUnsupported,
                  "Range: dtype " + std::string(ir::dtypeName(out.dtype)) + " not supported");
  }
}

}  // namespace

void registerGenerateOps(OpRegistry& r) {
  r.add("Shape", {inferShape, runShape, 21});
  r.add("Size", {inferSize, runSize, 21});
  r.add("ConstantOfShape", {inferConstantOfShape, runConstantOfShape, 21});
  r.add("Range", {inferRange, runRange});
}

}  // namespace partita::kernels::shape
