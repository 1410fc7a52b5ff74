// Resize (opsets 10, 11, 13, 18, 19) and Upsample (opsets 7..9).
//
// Each axis gets a table mapping every output position to its input taps and weights
// (1 tap for nearest, 2 for linear, 4 for cubic), following ONNX's coordinate
// transformation modes. Nearest is one gather over the whole tensor (any dtype);
// linear and cubic are applied one axis at a time (the n-linear / n-cubic
// interpolation is separable), skipping axes that map one-to-one.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/limits.h"
#include "kernels/elementwise_cast.h"
#include "kernels/nn_ops.h"
#include "kernels/nn_resize.h"
#include "kernels/nn_window.h"
#include "kernels/op_util.h"

namespace partita::kernels {

std::vector<double> readDoubles(const ir::Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = readScalar(t, int64_t(i));
  return v;
}

ResizeSpec readResizeSpec(const ir::Node& node) {
  ResizeSpec s;
  const bool upsample = node.op_type == "Upsample";
  const bool legacy = upsample || node.opset < 11;  // Upsample and Resize-10
  std::string mode = node.attrs.getString("mode", "nearest");
  if (mode == "nearest") {
    s.mode = ResizeMode::kNearest;
  } else if (mode == "linear" || (upsample && mode == "bilinear")) {
    s.mode = ResizeMode::kLinear;
  } else if (mode == "cubic" && !legacy) {
    s.mode = ResizeMode::kCubic;
  } else {
    failNode(node, "unknown mode '" + mode + "'");
  }
  if (legacy) {
    s.coord = ResizeCoord::kAsymmetric;
    s.rounding = ResizeRounding::kSimple;
    if (upsample) {
      s.scales_input = node.opset >= 9 ? 1 : -1;
    } else {
      s.scales_input = 1;
    }
    return s;
  }
  s.roi_input = 1;
  s.scales_input = 2;
  s.sizes_input = 3;
  std::string ctm = node.attrs.getString("coordinate_transformation_mode", "half_pixel");
  if (ctm == "half_pixel") {
    s.coord = ResizeCoord::kHalfPixel;
  } else if (ctm == "pytorch_half_pixel") {
    s.coord = ResizeCoord::kPytorchHalfPixel;
  } else if (ctm == "align_corners") {
    s.coord = ResizeCoord::kAlignCorners;
  } else if (ctm == "asymmetric") {
    s.coord = ResizeCoord::kAsymmetric;
  } else if (ctm == "tf_half_pixel_for_nn") {
    s.coord = ResizeCoord::kTfHalfPixelForNn;
  } else if (ctm == "tf_crop_and_resize") {
    s.coord = ResizeCoord::kTfCropAndResize;
  } else if (ctm == "half_pixel_symmetric" && node.opset >= 19) {
    s.coord = ResizeCoord::kHalfPixelSymmetric;
  } else {
    failNode(node, "unknown coordinate_transformation_mode '" + ctm + "'");
  }
  std::string nm = node.attrs.getString("nearest_mode", "round_prefer_floor");
  if (nm == "round_prefer_floor") {
    s.rounding = ResizeRounding::kRoundPreferFloor;
  } else if (nm == "round_prefer_ceil") {
    s.rounding = ResizeRounding::kRoundPreferCeil;
  } else if (nm == "floor") {
    s.rounding = ResizeRounding::kFloor;
  } else if (nm == "ceil") {
    s.rounding = ResizeRounding::kCeil;
  } else {
    failNode(node, "unknown nearest_mode '" + nm + "'");
  }
  s.cubic_a = node.attrs.getFloat("cubic_coeff_a", -0.75f);
  s.exclude_outside = node.attrs.getInt("exclude_outside", 0) != 0;
  s.extrapolation = node.attrs.getFloat("extrapolation_value", 0.0f);
  if (node.opset >= 18) {
    s.antialias = node.attrs.getInt("antialias", 0) != 0;
    s.axes = node.attrs.getInts("axes");
    std::string keep = node.attrs.getString("keep_aspect_ratio_policy", "stretch");
    if (keep == "stretch") s.keep_aspect = KeepAspect::kStretch;
    else if (keep == "not_larger") s.keep_aspect = KeepAspect::kNotLarger;
    else if (keep == "not_smaller") s.keep_aspect = KeepAspect::kNotSmaller;
    else failNode(node, "unknown keep_aspect_ratio_policy '" + keep + "'");
  }
  return s;
}

void expandResizeTarget(const ir::Node& node, const ResizeSpec& spec, ResizeTarget& t, size_t rank,
                        const std::vector<int64_t>& in) {
  if (!t.known) return;
  std::vector<int64_t> axes;
  if (spec.axes.empty()) {
    for (size_t i = 0; i < rank; ++i) axes.push_back(int64_t(i));
  } else {
    std::vector<bool> seen(rank, false);
    for (int64_t a : spec.axes) {
      const int64_t k = normalizeAxis(a, int64_t(rank), node.op_type + " node '" + node.name + "': axes");
      if (seen[size_t(k)]) failNode(node, "axes lists axis " + std::to_string(k) + " twice");
      seen[size_t(k)] = true;
      axes.push_back(k);
    }
  }
  const size_t n = axes.size();
  if (!t.sizes.empty() && t.sizes.size() != n)
    failNode(node, "sizes has " + std::to_string(t.sizes.size()) + " values for " + std::to_string(n) + " axes");
  if (!t.scales.empty() && t.scales.size() != n)
    failNode(node, "scales has " + std::to_string(t.scales.size()) + " values for " + std::to_string(n) + " axes");
  if (!t.roi.empty() && t.roi.size() != 2 * n)
    failNode(node, "roi has " + std::to_string(t.roi.size()) + " values for " + std::to_string(n) + " axes");
  if (!t.roi.empty() && !spec.axes.empty()) {
    std::vector<double> roi(2 * rank);
    for (size_t i = 0; i < rank; ++i) roi[i] = 0.0, roi[rank + i] = 1.0;
    for (size_t i = 0; i < n; ++i) roi[size_t(axes[i])] = t.roi[i], roi[rank + size_t(axes[i])] = t.roi[n + i];
    t.roi = roi;
  }
  if (!t.scales.empty()) {
    if (!spec.axes.empty()) {
      std::vector<double> scales(rank, 1.0);
      for (size_t i = 0; i < n; ++i) scales[size_t(axes[i])] = t.scales[i];
      t.scales = scales;
    }
    return;
  }
  std::vector<int64_t> sizes(rank, -1);
  for (size_t i = 0; i < rank; ++i) sizes[i] = in[i];
  for (size_t i = 0; i < n; ++i) sizes[size_t(axes[i])] = t.sizes[i];
  if (spec.keep_aspect != KeepAspect::kStretch) {
    // One scale for the listed axes (the smallest or the largest of size / input), the
    // sizes rounded from it; the coordinates use that scale.
    double scale = 0;
    bool first = true;
    for (size_t i = 0; i < n; ++i) {
      const int64_t d = in[size_t(axes[i])];
      if (d <= 0) {
        t.known = false;  // an unknown or empty input dimension: sizes follow at run time
        return;
      }
      const double r = double(t.sizes[i]) / double(d);
      if (first || (spec.keep_aspect == KeepAspect::kNotLarger ? r < scale : r > scale)) scale = r;
      first = false;
    }
    t.scales.assign(rank, 1.0);
    for (size_t i = 0; i < n; ++i) {
      const size_t a = size_t(axes[i]);
      t.scales[a] = scale;
      sizes[a] = int64_t(scale * double(in[a]) + 0.5);
    }
  }
  t.sizes = sizes;
}

namespace {


// Output sizes for known input sizes (-1 where the input size is unknown).
std::vector<int64_t> outputSizes(const ir::Node& node, const ResizeSpec& s, const ResizeTarget& t,
                                 const std::vector<int64_t>& in) {
  const size_t rank = in.size();
  if (!t.sizes.empty()) {
    if (t.sizes.size() != rank) failNode(node, "sizes must have one value per input dimension");
    for (size_t i = 0; i < rank; ++i)
      if (t.sizes[i] < 0 && in[i] >= 0) failNode(node, "sizes must not be negative");
    return t.sizes;  // -1: an unlisted axis (opset 18 axes) of unknown size
  }
  if (t.scales.size() != rank) failNode(node, "scales must have one value per input dimension");
  if (!t.roi.empty() && t.roi.size() != 2 * rank)
    failNode(node, "roi must have 2 values per input dimension");
  std::vector<int64_t> out(rank, -1);
  for (size_t i = 0; i < rank; ++i) {
    if (!(t.scales[i] > 0) || !std::isfinite(t.scales[i])) failNode(node, "scales must be positive and finite");
    if (in[i] < 0) continue;
    double extent = t.roi.empty() ? 1.0 : t.roi[rank + i] - t.roi[i];
    const double size = std::floor(double(in[i]) * extent * t.scales[i]);
    // Converting a double at or past 2^63 (or NaN) to int64 is undefined: refuse first.
    if (!(size < 0x1p62))
      failNode(node, "scale " + std::to_string(t.scales[i]) + " makes dimension " + std::to_string(i) + " (" +
                         std::to_string(in[i]) + ") larger than 64 bits count");
    out[i] = std::max<int64_t>(int64_t(size), 0);
  }
  return out;
}

void inferResize(InferContext& c) {
  const ir::TensorType& x = c.input(0);
  ResizeSpec s = readResizeSpec(c.node);
  ResizeTarget t = readResizeTarget(
      c.node, s, [&](size_t i) { return c.value(i); }, [&](size_t i) { return c.node.hasInput(i); });
  size_t rank = x.rank();
  if (!x.has_rank) {
    if (!t.known || !s.axes.empty()) {
      c.outputs[0] = ir::TensorType::unranked(x.dtype);
      return;
    }
    rank = t.sizes.empty() ? t.scales.size() : t.sizes.size();
  }
  if (rank == 0) c.fail("input must not be a scalar");
  ir::TensorType out{x.dtype, true, std::vector<ir::Dim>(rank)};
  if (s.antialias && s.mode == ResizeMode::kNearest) c.fail("antialias applies to linear and cubic modes only");
  std::vector<int64_t> in(rank, -1);
  if (x.has_rank)
    for (size_t i = 0; i < rank; ++i) in[i] = x.dims[i].isKnown() ? x.dims[i].value : -1;
  expandResizeTarget(c.node, s, t, rank, in);
  if (t.known) {
    std::vector<int64_t> o = outputSizes(c.node, s, t, in);
    for (size_t i = 0; i < rank; ++i) {
      if (o[i] >= 0) {
        out.dims[i] = ir::Dim::known(o[i]);
      } else if (x.has_rank && ((!t.scales.empty() && t.scales[i] == 1.0) || (!t.sizes.empty() && t.sizes[i] < 0)) &&
                 t.roi.empty()) {
        out.dims[i] = x.dims[i];  // unit scale keeps a symbolic dim (an unranked input's: unknown)
      }
    }
  }
  c.outputs[0] = out;
}

// ---- per-axis tables -----------------------------------------------------------------

struct AxisTable {
  int taps = 1;
  int64_t in = 0, out = 0;
  std::vector<int64_t> index;    // out * taps input indices (clamped into range)
  std::vector<double> weight;    // out * taps weights (linear/cubic)
  std::vector<uint8_t> outside;  // per output: 1 when it takes the extrapolation value
  bool identity = false;         // every output reads exactly its own input position
};

double sourceCoordinate(const ResizeSpec& s, double x, double scale, int64_t in, int64_t out,
                        double roi_start, double roi_end) {
  switch (s.coord) {
    case ResizeCoord::kHalfPixelSymmetric: {
      // The output's integer length against the scaled one, centred on the input.
      const double adjustment = double(out) / (scale * double(in));
      const double offset = double(in) / 2 * (1 - adjustment);
      return offset + (x + 0.5) / scale - 0.5;
    }
    case ResizeCoord::kHalfPixel:
      return (x + 0.5) / scale - 0.5;
    case ResizeCoord::kPytorchHalfPixel:
      return out > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
    case ResizeCoord::kAlignCorners: {
      // ONNX's reference scales by the unrounded output length (in * scale).
      const double len = double(in) * scale;
      return len == 1.0 ? 0.0 : x * double(in - 1) / (len - 1.0);
    }
    case ResizeCoord::kAsymmetric:
      return x / scale;
    case ResizeCoord::kTfHalfPixelForNn:
      return (x + 0.5) / scale;
    case ResizeCoord::kTfCropAndResize:
      if (out > 1)
        return roi_start * double(in - 1) + x * (roi_end - roi_start) * double(in - 1) / double(out - 1);
      return 0.5 * (roi_start + roi_end) * double(in - 1);
  }
  return 0;
}

int64_t nearestIndex(const ResizeSpec& s, double xo, double scale) {
  const double fl = std::floor(xo);
  if (xo == fl) return int64_t(fl);
  const double r = xo - fl;
  switch (s.rounding) {
    case ResizeRounding::kRoundPreferFloor:
      return int64_t(r <= 0.5 ? fl : fl + 1);
    case ResizeRounding::kRoundPreferCeil:
      return int64_t(r < 0.5 ? fl : fl + 1);
    case ResizeRounding::kFloor:
      return int64_t(fl);
    case ResizeRounding::kCeil:
      return int64_t(fl + 1);
    case ResizeRounding::kSimple:
      return int64_t(scale < 1.0 ? fl + 1 : fl);  // Resize-10 / Upsample
  }
  return int64_t(fl);
}

void cubicWeights(double r, double a, double* w) {
  auto k = [a](double t) {  // Keys' cubic convolution kernel, t >= 0
    if (t <= 1) return ((a + 2) * t - (a + 3)) * t * t + 1;
    if (t < 2) return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
    return 0.0;
  };
  w[0] = k(r + 1);
  w[1] = k(r);
  w[2] = k(1 - r);
  w[3] = k(2 - r);
}

AxisTable buildTable(const ResizeSpec& s, int64_t in, int64_t out, double scale, double roi_start,
                     double roi_end) {
  AxisTable t;
  t.in = in;
  t.out = out;
  t.taps = s.mode == ResizeMode::kNearest ? 1 : s.mode == ResizeMode::kLinear ? 2 : 4;
  // Antialiasing stretches the filter by 1/scale when downsampling: more taps, each
  // weighted by the kernel at (tap - x) * scale, the weights normalised.
  const bool stretch = s.antialias && s.mode != ResizeMode::kNearest && scale < 1.0;
  int64_t first_tap = s.mode == ResizeMode::kCubic ? -1 : 0;  // relative to floor(x)
  if (stretch) {
    const double first = std::floor((s.mode == ResizeMode::kLinear ? -1.0 : -2.0) / scale) + 1;
    if (!(first > -65536.0))
      throw Error(ErrorCode::kUnsupported, "Resize: antialiasing at scale " + std::to_string(scale) +
                                               " needs a filter over 2^17 taps wide");
    first_tap = int64_t(first);
    t.taps = int(2 - 2 * first_tap);
  }
  t.index.resize(size_t(out * t.taps));
  t.weight.resize(size_t(out * t.taps));
  t.outside.assign(size_t(out), 0);
  bool identity = in == out;
  for (int64_t x = 0; x < out; ++x) {
    const double xo = sourceCoordinate(s, double(x), scale, in, out, roi_start, roi_end);
    int64_t* idx = t.index.data() + x * t.taps;
    double* w = t.weight.data() + x * t.taps;
    if (s.coord == ResizeCoord::kTfCropAndResize && (xo < 0 || xo > double(in - 1))) {
      t.outside[size_t(x)] = 1;
      identity = false;
      for (int k = 0; k < t.taps; ++k) idx[k] = 0, w[k] = 0;
      continue;
    }
    if (s.mode == ResizeMode::kNearest) {
      idx[0] = std::clamp<int64_t>(nearestIndex(s, xo, scale), 0, in - 1);
      w[0] = 1;
      if (idx[0] != x) identity = false;
      continue;
    }
    const double fl = std::floor(xo);
    const double r = xo - fl;
    const int64_t i0 = int64_t(fl);
    if (r != 0 || i0 != x) identity = false;
    if (stretch) {
      double sum = 0;
      for (int k = 0; k < t.taps; ++k) {
        const int64_t rel = first_tap + k;
        idx[k] = i0 + rel;
        const double u = std::fabs((double(rel) - r) * scale);
        if (s.mode == ResizeMode::kLinear) {
          w[k] = std::clamp(1 - u, 0.0, 1.0);
        } else {
          const double a = s.cubic_a;
          w[k] = u <= 1 ? ((a + 2) * u - (a + 3)) * u * u + 1
                 : u < 2 ? ((a * u - 5 * a) * u + 8 * a) * u - 4 * a
                         : 0.0;
        }
        sum += w[k];
      }
      if (sum != 0)
        for (int k = 0; k < t.taps; ++k) w[k] /= sum;
      identity = false;
      if (s.exclude_outside) {
        double kept = 0;
        for (int k = 0; k < t.taps; ++k) {
          if (idx[k] < 0 || idx[k] >= in) w[k] = 0;
          kept += w[k];
        }
        if (kept != 0)
          for (int k = 0; k < t.taps; ++k) w[k] /= kept;
      }
    } else if (s.mode == ResizeMode::kLinear) {
      idx[0] = i0;
      idx[1] = i0 + 1;
      w[0] = 1 - r;
      w[1] = r;
    } else {
      for (int k = 0; k < 4; ++k) idx[k] = i0 - 1 + k;
      cubicWeights(r, s.cubic_a, w);
      if (s.exclude_outside) {
        double sum = 0;
        for (int k = 0; k < 4; ++k) {
          if (idx[k] < 0 || idx[k] >= in) w[k] = 0;
          sum += w[k];
        }
        if (sum != 0)
          for (int k = 0; k < 4; ++k) w[k] /= sum;
      }
    }
    for (int k = 0; k < t.taps; ++k) idx[k] = std::clamp<int64_t>(idx[k], 0, in - 1);
  }
  t.identity = identity;
  return t;
}

// ---- kernels -------------------------------------------------------------------------

// Nearest: one gather over the whole tensor; works for any element type.
template <typename T>
void nearestGather(const ir::Tensor& xt, ir::Tensor& yt, const std::vector<AxisTable>& tables,
                   T extrapolation) {
  const size_t rank = xt.rank();
  const T* x = xt.as<const T>();
  T* y = yt.as<T>();
  std::vector<int64_t> istr = stridesOf(xt.shape);
  // Per axis: input element offset of every output position, or -1 outside.
  std::vector<std::vector<int64_t>> off(rank);
  for (size_t a = 0; a < rank; ++a) {
    off[a].resize(size_t(tables[a].out));
    for (int64_t o = 0; o < tables[a].out; ++o)
      off[a][size_t(o)] = tables[a].outside[size_t(o)] ? -1 : tables[a].index[size_t(o)] * istr[a];
  }
  const int64_t last = yt.shape[rank - 1];
  const int64_t rows = last == 0 ? 0 : yt.numel() / last;
  const std::vector<int64_t>& loff = off[rank - 1];
#pragma omp parallel for schedule(static) if (rows > 1 && yt.numel() > 65536)
  for (int64_t row = 0; row < rows; ++row) {
    int64_t base = 0, rem = row;
    bool outside = false;
    for (size_t a = rank - 1; a-- > 0;) {
      const int64_t n = yt.shape[a];
      const int64_t o = off[a][size_t(rem % n)];
      rem /= n;
      if (o < 0) outside = true;
      base += o;
    }
    T* yr = y + row * last;
    if (outside) {
      std::fill(yr, yr + last, extrapolation);
      continue;
    }
    const T* xr = x + base;
    for (int64_t j = 0; j < last; ++j) yr[j] = loff[size_t(j)] < 0 ? extrapolation : xr[loff[size_t(j)]];
  }
}

// The innermost axis: a TAPS-long dot product per output element.
template <typename T, int TAPS>
void interpolateInnermost(const T* src, T* dst, int64_t outer, const AxisTable& t, const T* w,
                          T extrapolation) {
#pragma omp parallel for schedule(static) if (outer > 1 && outer * t.out * TAPS > 65536)
  for (int64_t o = 0; o < outer; ++o) {
    const T* s = src + o * t.in;
    T* d = dst + o * t.out;
    const int64_t* idx = t.index.data();
    const T* wx = w;
    for (int64_t x = 0; x < t.out; ++x, idx += TAPS, wx += TAPS) {
      T acc = wx[0] * s[idx[0]];
      for (int k = 1; k < TAPS; ++k) acc += wx[k] * s[idx[k]];
      d[x] = acc;
    }
    for (int64_t x = 0; x < t.out; ++x)
      if (t.outside[size_t(x)]) d[x] = extrapolation;
  }
}

// Interpolates along one axis: src [outer, in, inner] -> dst [outer, out, inner].
template <typename T>
void interpolateAxis(const T* src, T* dst, int64_t outer, int64_t inner, const AxisTable& t,
                     T extrapolation) {
  const int taps = t.taps;
  std::vector<T> w(t.weight.begin(), t.weight.end());
  if (inner == 1) {
    switch (taps) {
      case 1:
        interpolateInnermost<T, 1>(src, dst, outer, t, w.data(), extrapolation);
        return;
      case 2:
        interpolateInnermost<T, 2>(src, dst, outer, t, w.data(), extrapolation);
        return;
      case 4:
        interpolateInnermost<T, 4>(src, dst, outer, t, w.data(), extrapolation);
        return;
      default:
        break;  // an antialiasing filter's many taps: the general loop below
    }
  }
  const int64_t lines = outer * t.out;
#pragma omp parallel for schedule(static) if (lines > 1 && lines * inner * taps > 65536)
  for (int64_t line = 0; line < lines; ++line) {
    const int64_t o = line / t.out, x = line % t.out;
    T* d = dst + line * inner;
    if (t.outside[size_t(x)]) {
      std::fill(d, d + inner, extrapolation);
      continue;
    }
    const int64_t* idx = t.index.data() + x * taps;
    const T* wx = w.data() + x * taps;
    const T* s = src + o * t.in * inner;
    const T* s0 = s + idx[0] * inner;
    const T w0 = wx[0];
    for (int64_t j = 0; j < inner; ++j) d[j] = w0 * s0[j];
    for (int k = 1; k < taps; ++k) {
      const T* sk = s + idx[k] * inner;
      const T wk = wx[k];
      if (wk == T(0)) continue;
      for (int64_t j = 0; j < inner; ++j) d[j] += wk * sk[j];
    }
  }
}

template <typename T>
void interpolate(const ir::Tensor& xt, ir::Tensor& yt, const std::vector<AxisTable>& tables,
                 T extrapolation) {
  const size_t rank = xt.rank();
  std::vector<size_t> axes;
  for (size_t a = 0; a < rank; ++a)
    if (!tables[a].identity) axes.push_back(a);
  if (axes.empty()) {
    std::memcpy(yt.data, xt.data, xt.nbytes());
    return;
  }
  // Order the passes by estimated cost: the innermost axis (scalar gathers) is dearer
  // per element than the others (whole rows), and each pass costs its output size.
  auto cost = [&](const std::vector<size_t>& order) {
    std::vector<int64_t> sh = xt.shape;
    double total = 0;
    for (size_t a : order) {
      sh[a] = tables[a].out;
      bool innermost = true;  // inner size 1: scalar gathers
      for (size_t d = a + 1; d < rank; ++d) innermost = innermost && sh[d] == 1;
      double elements = 1;  // in double: an order never taken may pass through a huge shape
      for (int64_t d : sh) elements *= double(d);
      total += elements * tables[a].taps * (innermost ? 4.0 : 1.0);
    }
    return total;
  };
  std::vector<size_t> best = axes;
  double best_cost = cost(axes);
  while (std::next_permutation(axes.begin(), axes.end())) {
    const double c = cost(axes);
    if (c < best_cost) best_cost = c, best = axes;
  }
  axes = best;
  std::vector<int64_t> shape = xt.shape;
  std::unique_ptr<T[]> bufs[2];
  const T* src = xt.as<const T>();
  for (size_t i = 0; i < axes.size(); ++i) {
    const size_t a = axes[i];
    int64_t outer = 1, inner = 1;
    for (size_t d = 0; d < a; ++d) outer *= shape[d];
    for (size_t d = a + 1; d < rank; ++d) inner *= shape[d];
    shape[a] = tables[a].out;
    T* dst;
    if (i + 1 == axes.size()) {
      dst = yt.as<T>();
    } else {
      std::optional<int64_t> n = ir::checkedNumel(shape);
      if (!n) throw Error(ErrorCode::kInvalidArgument, "an intermediate " + ir::shapeStr(shape) + " is too large");
      bufs[i % 2].reset(new T[size_t(*n)]);
      dst = bufs[i % 2].get();
    }
    interpolateAxis(src, dst, outer, inner, tables[a], extrapolation);
    src = dst;
  }
}

void runResize(KernelContext& c) {
  if (elementwise::anyHalfLike(c)) return elementwise::runThroughFloat(c, runResize);
  const ir::Tensor& xt = c.inputs[0];
  ir::Tensor& yt = c.outputs[0];
  ResizeSpec s = readResizeSpec(c.node);
  ResizeTarget t = readResizeTarget(
      c.node, s, [&](size_t i) { return c.hasInput(i) ? &c.inputs[i] : nullptr; },
      [&](size_t i) { return c.hasInput(i); });
  const size_t rank = xt.rank();
  if (rank == 0) c.fail("input must not be a scalar");
  expandResizeTarget(c.node, s, t, rank, xt.shape);
  if (!t.known) c.fail("keep_aspect_ratio_policy needs non-empty input dimensions");
  std::vector<int64_t> out = outputSizes(c.node, s, t, xt.shape);
  if (out != yt.shape) c.fail("output shape " + ir::shapeStr(yt.shape) + " != " + ir::shapeStr(out));
  if (yt.numel() == 0) return;
  if (xt.numel() == 0) c.fail("cannot resize an empty input to a non-empty output");
  std::vector<AxisTable> tables(rank);
  for (size_t a = 0; a < rank; ++a) {
    // With sizes the scale is out / in, unless keep_aspect_ratio_policy fixed it.
    double scale = !t.scales.empty() ? t.scales[a] : double(out[a]) / double(xt.shape[a]);
    double r0 = t.roi.empty() ? 0.0 : t.roi[a], r1 = t.roi.empty() ? 1.0 : t.roi[rank + a];
    tables[a] = buildTable(s, xt.shape[a], out[a], scale, r0, r1);
  }
  if (s.mode == ResizeMode::kNearest) {
    PARTITA_DISPATCH_ALL(xt.dtype, c.node.op_type, nearestGather<T>(xt, yt, tables, T(s.extrapolation)));
    return;
  }
  switch (xt.dtype) {
    case ir::DType::kFloat32:
      interpolate<float>(xt, yt, tables, float(s.extrapolation));
      break;
    case ir::DType::kFloat64:
      interpolate<double>(xt, yt, tables, s.extrapolation);
      break;
    default:
      unsupportedNode(c.node, "linear and cubic modes support float32 and float64, not " +
                                  std::string(ir::dtypeName(xt.dtype)));
  }
}

}  // namespace

void registerResizeOps(OpRegistry& r) {
  r.add("Resize", {inferResize, runResize, 19});
  r.add("Upsample", {inferResize, runResize});
}

}  // namespace partita::kernels
