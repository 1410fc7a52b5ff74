// Slice as ONNX defines it: reading starts/ends/axes/steps (attributes before opset
// 10, inputs from 10) and resolving them against the input's dims with ONNX's
// clamping. The one reading of Slice: the host's Slice (shape_slice.cpp) and the dnnl
// backend's claim (a Slice as a strided view) both use it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "kernels/shape_common.h"

namespace partita::kernels::shape {

struct SliceParams {
  std::vector<int64_t> starts, ends, axes, steps;
  bool axes_given = false;
};

// Reads the node's Slice parameters. From opset 10 they are inputs 1..4, whose values
// `ints(i)` gives (std::optional<std::vector<int64_t>>, nothing when not known; it is
// asked only for inputs the node has). Returns nothing when a needed value is unknown.
template <typename IntsOf>
std::optional<SliceParams> readSliceParams(const ir::Node& node, const IntsOf& ints) {
  SliceParams p;
  if (node.opset < 10) {
    p.starts = node.attrs.getInts("starts");
    p.ends = node.attrs.getInts("ends");
    p.axes_given = node.attrs.has("axes");
    p.axes = node.attrs.getInts("axes");
    return p;
  }
  if (!node.hasInput(1) || !node.hasInput(2)) return std::nullopt;
  std::optional<std::vector<int64_t>> starts = ints(1), ends = ints(2);
  if (!starts || !ends) return std::nullopt;
  p.starts = *starts;
  p.ends = *ends;
  if (node.hasInput(3)) {
    std::optional<std::vector<int64_t>> axes = ints(3);
    if (!axes) return std::nullopt;
    p.axes = *axes;
    p.axes_given = true;
  }
  if (node.hasInput(4)) {
    std::optional<std::vector<int64_t>> steps = ints(4);
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
// Refuses inconsistent parameters through `c.fail` (an InferContext, a KernelContext,
// or anything with a [[noreturn]] fail(const std::string&) const).
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
    if (a.step > 0) {
      s = std::clamp<int64_t>(s, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
      a.len = e > s ? (e - s - 1) / a.step + 1 : 0;  // ceil(span / step), for any step
    } else {
      s = std::clamp<int64_t>(s, 0, d - 1);
      e = std::clamp<int64_t>(e, -1, d - 1);
      a.len = s > e ? int64_t(uint64_t(s - e - 1) / (uint64_t(0) - uint64_t(a.step)) + 1) : 0;
    }
    a.start = a.len > 0 ? s : 0;
  }
  return plan;
}

}  // namespace partita::kernels::shape
