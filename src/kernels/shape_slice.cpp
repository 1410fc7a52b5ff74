// Host Slice: starts/ends/axes/steps from attributes before opset 10 and from inputs
// from 10, clamped as ONNX says (shape_slice.h); negative steps walk backwards. The
// kernel is one strided copy, so every dtype works.
#include <optional>
#include <string>
#include <vector>

#include "kernels/op_registry.h"
#include "kernels/op_util.h"
#include "kernels/shape_common.h"
#include "kernels/shape_ops.h"
#include "kernels/shape_slice.h"
#include "kernels/shape_strided_copy.h"

namespace partita::kernels::shape {

namespace {

using ir::Dim;
using ir::DType;
using ir::TensorType;

// The parameters as far as inference knows the values of their inputs.
std::optional<SliceParams> sliceParams(const InferContext& c) {
  return readSliceParams(c.node, [&](size_t i) { return knownInts(c, i); });
}

void inferSlice(InferContext& c) {
  const TensorType& in = c.input(0);
  if (!in.has_rank) {
    c.outputs[0] = TensorType::unranked(in.dtype);
    return;
  }
  std::optional<SliceParams> p = sliceParams(c);
  if (!p) {
    // Which axes are sliced may still be known: then only those dims are unknown.
    std::vector<Dim> dims = in.dims;
    std::optional<std::vector<int64_t>> axes;
    if (c.hasInput(3)) {
      axes = knownInts(c, 3);
    } else if (std::optional<int64_t> n = staticLength(c, 1)) {
      axes.emplace();
      for (int64_t i = 0; i < *n; ++i) axes->push_back(i);
    }
    if (axes) {
      for (int64_t a : *axes) dims[size_t(axisIn(c, a, int64_t(in.rank())))] = Dim{};
    } else {
      for (Dim& d : dims) d = Dim{};
    }
    c.outputs[0] = ranked(in.dtype, std::move(dims));
    return;
  }
  std::vector<int64_t> known(in.rank());
  for (size_t k = 0; k < in.rank(); ++k) known[k] = in.dims[k].isKnown() ? in.dims[k].value : -1;
  std::vector<SliceAxis> plan = planSlice(c, *p, known);
  std::vector<Dim> dims = in.dims;
  for (size_t k = 0; k < dims.size(); ++k)
    if (plan[k].sliced) dims[k] = plan[k].len >= 0 ? Dim::known(plan[k].len) : Dim{};
  c.outputs[0] = ranked(in.dtype, std::move(dims));
}

void runSlice(KernelContext& c) {
  const ir::Tensor& in = c.inputs[0];
  const ir::Tensor& out = c.outputs[0];
  std::optional<SliceParams> p = readSliceParams(c.node, [&](size_t i) {
    return c.hasInput(i) ? std::optional(readInts(c.inputs[i])) : std::nullopt;
  });
  if (!p) c.fail("starts and ends must be given");
  std::vector<SliceAxis> plan = planSlice(c, *p, in.shape);
  std::vector<int64_t> in_strides = stridesOf(in.shape), src(in.rank()), shape(in.rank());
  int64_t offset = 0;
  for (size_t k = 0; k < in.rank(); ++k) {
    shape[k] = plan[k].len;
    // With two or more elements |step| is below the dim, so the product fits; with one
    // the stride is never used (and a huge step times the stride could overflow).
    src[k] = plan[k].len > 1 ? in_strides[k] * plan[k].step : 0;
    offset += plan[k].start * in_strides[k];
  }
  if (shape != out.shape)
    c.fail("output shape " + ir::shapeStr(out.shape) + " does not match " + ir::shapeStr(shape));
  if (out.numel() == 0) return;
  const size_t es = ir::dtypeSize(in.dtype);
  copyStridedToDense(bytesOf(out), bytesOf(in) + offset * int64_t(es), src, shape, es);
}

}  // namespace

void registerSliceOps(OpRegistry& r) {
  r.add("Slice", {inferSlice, runSlice});
}

}  // namespace partita::kernels::shape
