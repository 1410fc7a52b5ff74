// What Resize (opsets 10, 11, 13, 18, 19) and Upsample (7..9) ask for, read once for the host
// kernel (nn_resize.cpp) and for backends that compute a subset of it (the dnnl
// backend's resampling): the mode, coordinate transformation and rounding, and the
// target (sizes, or scales with a roi).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/tensor.h"
#include "kernels/nn_window.h"
#include "kernels/op_util.h"

namespace partita::kernels {

enum class ResizeMode { kNearest, kLinear, kCubic };
enum class ResizeCoord {
  kHalfPixel,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfHalfPixelForNn,
  kTfCropAndResize,
  kHalfPixelSymmetric  // opset 19
};
enum class KeepAspect { kStretch, kNotLarger, kNotSmaller };  // opset 18
enum class ResizeRounding { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil, kSimple };

struct ResizeSpec {
  ResizeMode mode = ResizeMode::kNearest;
  ResizeCoord coord = ResizeCoord::kHalfPixel;
  ResizeRounding rounding = ResizeRounding::kRoundPreferFloor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  double extrapolation = 0;
  // Input positions of the scales / sizes / roi inputs (-1: not an input of this op).
  int scales_input = -1, sizes_input = -1, roi_input = -1;
  // Opset 18: a filter stretched by 1/scale when linear or cubic downsampling; the axes
  // that scales, sizes and roi list (empty: every axis); how sizes keep the aspect.
  bool antialias = false;
  std::vector<int64_t> axes;
  KeepAspect keep_aspect = KeepAspect::kStretch;
};

// The node's mode, coordinate transformation mode and rounding. Throws (failNode) for
// an unknown mode.
ResizeSpec readResizeSpec(const ir::Node& node);

// Every element of a numeric tensor as a double.
std::vector<double> readDoubles(const ir::Tensor& t);

// What the node asks for: explicit sizes, or scales (with the roi, for crop-and-resize).
struct ResizeTarget {
  bool known = false;
  std::vector<int64_t> sizes;  // non-empty: explicit output sizes
  std::vector<double> scales;  // otherwise: one per axis
  std::vector<double> roi;     // empty or 2 * rank values
};

// Expands a target given for `spec.axes` (Resize-18) to one value per dimension of a
// rank-`rank` input: unlisted axes keep their size (scale 1, roi [0, 1]).
void expandResizeTarget(const ir::Node& node, const ResizeSpec& spec, ResizeTarget& t, size_t rank,
                        const std::vector<int64_t>& in);

// Reads the target from known values (attribute scales for Upsample-7/8). `value(i)`
// returns the value of input i or nullptr; `present(i)` whether input i is given.
template <typename ValueFn, typename PresentFn>
ResizeTarget readResizeTarget(const ir::Node& node, const ResizeSpec& s, ValueFn value, PresentFn present) {
  ResizeTarget t;
  if (node.op_type == "Upsample" && s.scales_input < 0) {
    std::vector<float> f = node.attrs.getFloats("scales");
    if (f.empty()) failNode(node, "attribute scales is required");
    t.scales.assign(f.begin(), f.end());
    t.known = true;
    return t;
  }
  const ir::Tensor* sizes = s.sizes_input >= 0 ? value(size_t(s.sizes_input)) : nullptr;
  const ir::Tensor* scales = value(size_t(s.scales_input));
  const bool sizes_pending = s.sizes_input >= 0 && present(size_t(s.sizes_input)) && !sizes;
  const bool scales_pending = present(size_t(s.scales_input)) && !scales;
  if (s.roi_input >= 0 && s.coord == ResizeCoord::kTfCropAndResize && present(size_t(s.roi_input))) {
    const ir::Tensor* roi = value(size_t(s.roi_input));
    if (!roi) return t;
    t.roi = readDoubles(*roi);
  }
  if (sizes && sizes->numel() > 0) {
    if (scales && scales->numel() > 0) failNode(node, "only one of scales and sizes may be given");
    t.sizes = readInts(*sizes);
    t.known = true;
  } else if (scales && scales->numel() > 0) {
    t.scales = readDoubles(*scales);
    t.known = true;
  } else if (!sizes_pending && !scales_pending) {
    failNode(node, "one of scales and sizes must be given");
  }
  return t;
}

}  // namespace partita::kernels
