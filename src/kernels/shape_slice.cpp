// Host Slice: starts/ends/axes/steps from attributes before opset 10 and from inputs
// from 10, clamped as ONNX says; negative steps walk backwards. The kernel is one
// strided copy, so every dtype works.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "kernels/op_registry.h"
#include "kernels/op_util.h"
#include "kernels/shape_common.h"
#include "kernels/shape_ops.h"
#include "kernels/shape_strided_copy.h"

namespace partita::kernels::shape {

namespace {

using ir::Dim;
using ir::DType;
using ir::TensorType;

struct SliceParams {
  std::vector<int64_t> starts, ends, axes, steps;
  bool axes_given = false;
};

// Reads Slice's starts/ends/axes/steps: attributes before opset 10, inputs from 10.
// Returns nothing when some needed value is unknown (inference only).
std::optional<SliceParams> sliceParams(const InferContext& c) {
  SliceParams p;
  if (c.opset() < 10) {
    p.starts = c.attrs().getInts("starts");
    p.ends = c.attrs().getInts("ends");
    p.axes_given = c.attrs().has("axes");
    p.axes = c.attrs().getInts("axes");
    return p;
  }
  auto starts = knownInts(c, 1), ends = knownInts(c, 2);
  if (!starts || !ends) return std::nullopt;
  p.starts = *starts;
  p.ends = *ends;
  if (c.hasInput(3)) {
    auto axes = knownInts(c, 3);
    if (!axes) return std::nullopt;
    p.axes = *axes;
    p.axes_given = true;
  }
  if (c.hasInput(4)) {
    auto steps = knownInts(c, 4);
    if (!steps) return std::nullopt;
    p.steps = *steps;
  }
  return p;
}

struct SliceAxis {
  int64_t start = 0, step = 1, len = -1;  // len -1: unknown (unknown input dim)
  bool sliced = false;
};

// Resolves the parameters against `dims` (-1 for unknown) following ONNX's clamping.
template <typename Ctx>
std::vector<SliceAxis> planSlice(const Ctx& c, SliceParams p, const std::vector<int64_t>& dims) {
  const int64_t rank = int64_t(dims.size());
  const size_t n = p.starts.size();
  if (p.ends.size() != n) c.fail("starts and ends have different lengths");
  if (!p.axes_given)
    for (size_t i = 0; i < n; ++i) p.axes.push_back(int64_t(i));
  if (p.steps.empty()) p.steps.assign(n, 1);
  if (p.axes.size() != n || p.steps.size() != n)
    c.fail("starts, ends, axes and steps have different lengths");
  std::vector<SliceAxis> plan(dims.size());
  for (size_t k = 0; k < dims.size(); ++k) plan[k].len = dims[k];
  for (size_t i = 0; i < n; ++i) {
    const size_t k = size_t(axisIn(c, p.axes[i], rank));
    SliceAxis& a = plan[k];
    if (a.sliced) c.fail("axis " + std::to_string(p.axes[i]) + " is listed twice");
    a.sliced = true;
    a.step = p.steps[i];
    if (a.step == 0) c.fail("slice step cannot be 0");
    const int64_t d = dims[k];
    if (d < 0) {
      a.len = -1;
      continue;
    }
    if (d == 0) {  // nothing to slice (and the clamps below need d >= 1)
      a.len = 0;
      continue;
    }
    int64_t s = p.starts[i], e = p.ends[i];
    if (s < 0) s += d;
    if (e < 0) e += d;
    // Written so that no step, however large, overflows: ceil(span / |step|).
    if (a.step > 0) {
      s = std::clamp<int64_t>(s, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
      a.len = e > s ? (e - s - 1) / a.step + 1 : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, d - 1);
      e = std::clamp<int64_t>(e, -1, d - 1);
      a.len = s > e ? int64_t(uint64_t(s - e - 1) / (uint64_t(0) - uint64_t(a.step)) + 1) : 0;
    }
    a.start = a.len > 0 ? s : 0;
  }
  return plan;
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
  SliceParams p;
  if (c.opset() < 10) {
    p.starts = c.attrs().getInts("starts");
    p.ends = c.attrs().getInts("ends");
    p.axes_given = c.attrs().has("axes");
    p.axes = c.attrs().getInts("axes");
  } else {
    p.starts = readInts(c.inputs[1]);
    p.ends = readInts(c.inputs[2]);
    if (c.hasInput(3)) {
      p.axes = readInts(c.inputs[3]);
      p.axes_given = true;
    }
    if (c.hasInput(4)) p.steps = readInts(c.inputs[4]);
  }
  std::vector<SliceAxis> plan = planSlice(c, p, in.shape);
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
