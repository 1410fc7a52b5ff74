// Decoding Resize / Upsample into oneDNN's resampling. The host reads the node
// (kernels/nn_resize.h: mode, coordinate transformation, rounding, sizes or scales);
// what is decided here is where oneDNN's two algorithms compute exactly what ONNX asks:
//   nearest: oneDNN takes source index round((y + 0.5) * in / out - 0.5). For an
//     integer upscale factor k that is floor(y / k) (no ties), which is ONNX's
//     asymmetric + floor (and Resize-10 / Upsample), tf_half_pixel_for_nn + floor,
//     and half_pixel / pytorch_half_pixel with either round_prefer rounding.
//   linear: oneDNN takes source coordinate (y + 0.5) * in / out - 0.5, clamped to the
//     edges: ONNX's half_pixel (pytorch_half_pixel when out > 1), when the scale ONNX
//     uses equals out / in (sizes given, or a scale that makes an exact size).
// N and C keep their sizes; cubic, tf_crop_and_resize, align_corners and
// exclude_outside stay on the host.
#include "backend/dnnl/dnnl_decode.h"

#include "backend/dnnl/dnnl_decode_util.h"
#include "backend/dnnl/dnnl_primitive.h"
#include "kernels/nn_resize.h"

namespace partita::dnnl_backend {

using kernels::ResizeCoord;
using kernels::ResizeMode;
using kernels::ResizeRounding;

std::optional<ResampleSpec> decodeResize(const ir::Graph& g, const ir::Node& n, std::string* why) {
  if (!onlyFirstOutput(n, why) || !isDenseF32(g, n.inputs[0], why, "input") ||
      !isDenseF32(g, n.outputs[0], why, "output"))
    return std::nullopt;
  for (const char* a : {"antialias", "axes", "keep_aspect_ratio_policy"})
    if (n.attrs.has(a)) return no(why, std::string("attribute ") + a);
  if (n.attrs.getInt("exclude_outside", 0) != 0) return no(why, "exclude_outside");
  const std::optional<kernels::ResizeSpec> spec = hostOr(why, [&] { return kernels::readResizeSpec(n); });
  if (!spec) return std::nullopt;
  std::vector<ir::Tensor> held;
  held.reserve(n.inputs.size());
  auto value = [&](size_t i) -> const ir::Tensor* {
    if (!n.hasInput(i) || !isConstant(g, n.inputs[i])) return nullptr;
    held.push_back(constantOf(g, n.inputs[i]).view());
    return &held.back();
  };
  const std::optional<kernels::ResizeTarget> target = hostOr(why, [&] {
    return kernels::readResizeTarget(n, *spec, value, [&](size_t i) { return n.hasInput(i); });
  });
  if (!target) return std::nullopt;
  if (!target->known) return no(why, "sizes or scales not constant");

  ResampleSpec r;
  r.src_dims = shapeOf(g, n.inputs[0]);
  r.dst_dims = shapeOf(g, n.outputs[0]);
  const size_t rank = r.src_dims.size();
  if (rank < 3 || rank > 5 || r.dst_dims.size() != rank) return no(why, "rank outside 3..5");
  if (r.dst_dims[0] != r.src_dims[0] || r.dst_dims[1] != r.src_dims[1])
    return no(why, "resizes the batch or channel dimension");
  for (size_t i = 2; i < rank; ++i) {
    const int64_t in = r.src_dims[i], out = r.dst_dims[i];
    if (out > kMaxResamplingExtent) return no(why, "an output size above oneDNN's resampling tables' bound");
    // The scale ONNX's coordinate transformation uses must be out / in.
    if (target->sizes.empty() && double(in) * target->scales[i] != double(out))
      return no(why, "a scale that does not give an exact size");
    if (spec->mode == ResizeMode::kNearest) {
      if (out % in != 0) return no(why, "nearest resize by a non-integer factor");
      const bool floor_like = spec->rounding == ResizeRounding::kFloor || spec->rounding == ResizeRounding::kSimple;
      const bool round_like =
          spec->rounding == ResizeRounding::kRoundPreferFloor || spec->rounding == ResizeRounding::kRoundPreferCeil;
      const bool ok = (spec->coord == ResizeCoord::kAsymmetric && floor_like) ||
                      (spec->coord == ResizeCoord::kTfHalfPixelForNn && floor_like) ||
                      ((spec->coord == ResizeCoord::kHalfPixel || spec->coord == ResizeCoord::kPytorchHalfPixel) &&
                       round_like);
      if (!ok && out != in) return no(why, "nearest with this coordinate transformation and rounding");
    } else if (spec->mode == ResizeMode::kLinear) {
      const bool ok = spec->coord == ResizeCoord::kHalfPixel ||
                      (spec->coord == ResizeCoord::kPytorchHalfPixel && out > 1);
      if (!ok) return no(why, "linear with this coordinate transformation");
    } else {
      return no(why, "cubic");
    }
  }
  r.alg = spec->mode == ResizeMode::kNearest ? dnnl::algorithm::resampling_nearest
                                             : dnnl::algorithm::resampling_linear;
  return r;
}

}  // namespace partita::dnnl_backend
