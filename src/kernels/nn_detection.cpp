// Detection heads: NonMaxSuppression (opsets 10, 11) and RoiAlign (10; 16 added
// coordinate_transformation_mode, default half_pixel). NonMaxSuppression's output
// count depends on the data, so inference runs the selection when every input value is
// known (at run time, or when folding constants) and leaves it unknown otherwise.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kernels/float_io.h"
#include "kernels/nn_ops.h"
#include "kernels/op_util.h"

namespace partita::kernels {

namespace {

// ---- NonMaxSuppression ------------------------------------------------------------

// Selected (batch, class, box) triples, in ONNX's order: batch, class, then decreasing
// score (ties: lower box index first).
template <typename Ctx>
std::vector<int64_t> nmsSelect(const Ctx& c, const ir::Tensor& boxes, const ir::Tensor& scores,
                               const ir::Tensor* max_out, const ir::Tensor* iou_t, const ir::Tensor* score_t) {
  if (boxes.rank() != 3 || boxes.shape[2] != 4) c.fail("boxes must be [batches, boxes, 4], got " + ir::shapeStr(boxes.shape));
  if (scores.rank() != 3 || scores.shape[0] != boxes.shape[0] || scores.shape[2] != boxes.shape[1])
    c.fail("scores " + ir::shapeStr(scores.shape) + " do not match boxes " + ir::shapeStr(boxes.shape));
  auto scalar = [&](const ir::Tensor* t, const char* what, double def) {
    if (!t) return def;
    if (t->numel() != 1) c.fail(std::string(what) + " must hold one value, got " + ir::shapeStr(t->shape));
    return fio::read(c, *t, what, true)[0];
  };
  const int64_t max_boxes = int64_t(scalar(max_out, "max_output_boxes_per_class", 0));
  const double iou_threshold = scalar(iou_t, "iou_threshold", 0);
  const bool has_score_threshold = score_t != nullptr;
  const double score_threshold = scalar(score_t, "score_threshold", 0);
  if (iou_threshold < 0 || iou_threshold > 1) c.fail("iou_threshold must be in [0, 1]");
  const bool center = c.attrs().getInt("center_point_box", 0) != 0;
  const int64_t batches = boxes.shape[0], count = boxes.shape[1], classes = scores.shape[1];
  std::vector<double> bv = fio::read(c, boxes, "boxes"), sv = fio::read(c, scores, "scores");
  std::vector<int64_t> out;
  if (max_boxes <= 0) return out;
  // Corners (y1, x1, y2, x2) with y1 <= y2 and x1 <= x2.
  auto corners = [&](int64_t b, int64_t i, double r[4]) {
    const double* p = bv.data() + (b * count + i) * 4;
    if (center) {
      r[0] = p[1] - p[3] / 2;
      r[1] = p[0] - p[2] / 2;
      r[2] = p[1] + p[3] / 2;
      r[3] = p[0] + p[2] / 2;
    } else {
      r[0] = std::min(p[0], p[2]);
      r[1] = std::min(p[1], p[3]);
      r[2] = std::max(p[0], p[2]);
      r[3] = std::max(p[1], p[3]);
    }
  };
  auto suppresses = [&](int64_t b, int64_t i, int64_t j) {
    double a[4], o[4];
    corners(b, i, a);
    corners(b, j, o);
    const double area_a = (a[2] - a[0]) * (a[3] - a[1]), area_o = (o[2] - o[0]) * (o[3] - o[1]);
    if (area_a <= 0 || area_o <= 0) return false;
    const double ih = std::min(a[2], o[2]) - std::max(a[0], o[0]);
    const double iw = std::min(a[3], o[3]) - std::max(a[1], o[1]);
    if (ih <= 0 || iw <= 0) return false;
    const double inter = ih * iw;
    return inter / (area_a + area_o - inter) > iou_threshold;
  };
  std::vector<int64_t> order, kept;
  for (int64_t b = 0; b < batches; ++b)
    for (int64_t k = 0; k < classes; ++k) {
      const double* s = sv.data() + (b * classes + k) * count;
      order.clear();
      for (int64_t i = 0; i < count; ++i)
        if (!has_score_threshold || s[i] > score_threshold) order.push_back(i);
      std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return s[x] > s[y]; });
      kept.clear();
      for (int64_t i : order) {
        if (int64_t(kept.size()) >= max_boxes) break;
        bool drop = false;
        for (int64_t j : kept)
          if (suppresses(b, i, j)) {
            drop = true;
            break;
          }
        if (drop) continue;
        kept.push_back(i);
        out.insert(out.end(), {b, k, i});
      }
    }
  return out;
}

void inferNms(InferContext& c) {
  checkArity(c, 2, 5);
  fio::requireFloat(c, 0, "boxes");
  fio::requireFloat(c, 1, "scores");
  ir::Dim selected{};
  bool known = c.value(0) && c.value(1);
  for (size_t i = 2; i < c.numInputs(); ++i)
    if (c.hasInput(i) && !c.value(i)) known = false;
  if (known) {
    auto opt = [&](size_t i) { return c.hasInput(i) ? c.value(i) : nullptr; };
    selected = ir::Dim::known(int64_t(nmsSelect(c, *c.value(0), *c.value(1), opt(2), opt(3), opt(4)).size() / 3));
  }
  c.outputs[0] = ir::TensorType{ir::DType::kInt64, true, {selected, ir::Dim::known(3)}};
}

void runNms(KernelContext& c) {
  auto opt = [&](size_t i) { return c.hasInput(i) ? &c.inputs[i] : nullptr; };
  std::vector<int64_t> sel = nmsSelect(c, c.inputs[0], c.inputs[1], opt(2), opt(3), opt(4));
  const ir::Tensor& y = c.outputs[0];
  if (y.numel() != int64_t(sel.size())) c.fail("output " + ir::shapeStr(y.shape) + " does not hold the selection");
  std::copy(sel.begin(), sel.end(), y.as<int64_t>());
}

// ---- RoiAlign ---------------------------------------------------------------------

void inferRoiAlign(InferContext& c) {
  checkArity(c, 3, 3);
  fio::requireFloat(c, 0, "X");
  fio::requireFloat(c, 1, "rois");
  fio::requireIndex(c, 2, "batch_indices");
  const ir::TensorType& x = c.input(0);
  const ir::TensorType& rois = c.input(1);
  if (x.has_rank && x.rank() != 4) c.fail("X must be [N, C, H, W], got " + x.str());
  if (rois.has_rank && (rois.rank() != 2 || (rois.dims[1].isKnown() && rois.dims[1].value != 4)))
    c.fail("rois must be [num_rois, 4], got " + rois.str());
  std::string mode = c.attrs().getString("mode", "avg");
  if (mode != "avg" && mode != "max") c.fail("unknown mode '" + mode + "' (avg or max)");
  if (c.opset() >= 16) {
    std::string ctm = c.attrs().getString("coordinate_transformation_mode", "half_pixel");
    if (ctm != "half_pixel" && ctm != "output_half_pixel")
      c.fail("unknown coordinate_transformation_mode '" + ctm + "'");
  }
  const int64_t oh = c.attrs().getInt("output_height", 1), ow = c.attrs().getInt("output_width", 1);
  if (oh < 1 || ow < 1) c.fail("output_height and output_width must be positive");
  if (c.attrs().getInt("sampling_ratio", 0) < 0) c.fail("sampling_ratio must be >= 0");
  c.outputs[0] = ir::TensorType{x.dtype,
                                true,
                                {rois.has_rank ? rois.dims[0] : ir::Dim{}, x.has_rank ? x.dims[1] : ir::Dim{},
                                 ir::Dim::known(oh), ir::Dim::known(ow)}};
}

void runRoiAlign(KernelContext& c) {
  const ir::Tensor& x = c.inputs[0];
  const ir::Tensor& rois_t = c.inputs[1];
  if (x.rank() != 4 || rois_t.rank() != 2 || rois_t.shape[1] != 4)
    c.fail("X must be [N, C, H, W] and rois [num_rois, 4], got " + ir::shapeStr(x.shape) + " and " +
           ir::shapeStr(rois_t.shape));
  const int64_t n = x.shape[0], ch = x.shape[1], h = x.shape[2], w = x.shape[3];
  const int64_t num = rois_t.shape[0];
  if (c.inputs[2].numel() != num) c.fail("batch_indices has " + std::to_string(c.inputs[2].numel()) + " values for " + std::to_string(num) + " rois");
  std::vector<int64_t> bidx = readInts(c.inputs[2]);
  std::vector<double> xv = fio::read(c, x, "X"), rois = fio::read(c, rois_t, "rois");
  const int64_t oh = c.attrs().getInt("output_height", 1), ow = c.attrs().getInt("output_width", 1);
  const int64_t ratio = c.attrs().getInt("sampling_ratio", 0);
  const double scale = c.attrs().getFloat("spatial_scale", 1.0f);
  const bool is_max = c.attrs().getString("mode", "avg") == "max";
  const bool half_pixel =
      c.opset() >= 16 && c.attrs().getString("coordinate_transformation_mode", "half_pixel") == "half_pixel";
  const double offset = half_pixel ? 0.5 : 0.0;
  std::vector<double> out(size_t(num * ch * oh * ow));
  for (int64_t r = 0; r < num; ++r) {
    const int64_t b = bidx[size_t(r)];
    if (b < 0 || b >= n) c.fail("batch index " + std::to_string(b) + " is out of range [0, " + std::to_string(n) + ")");
    const double* roi = rois.data() + r * 4;
    const double sw = roi[0] * scale - offset, sh = roi[1] * scale - offset;
    const double ew = roi[2] * scale - offset, eh = roi[3] * scale - offset;
    double rw = ew - sw, rh = eh - sh;
    if (!half_pixel) {
      rw = std::max(rw, 1.0);
      rh = std::max(rh, 1.0);
    }
    const double bh = rh / double(oh), bw = rw / double(ow);
    const int64_t gh = ratio > 0 ? ratio : int64_t(std::ceil(rh / double(oh)));
    const int64_t gw = ratio > 0 ? ratio : int64_t(std::ceil(rw / double(ow)));
    const double count = double(std::max<int64_t>(gh * gw, 1));
    for (int64_t cc = 0; cc < ch; ++cc) {
      const double* plane = xv.data() + (b * ch + cc) * h * w;
      for (int64_t py = 0; py < oh; ++py)
        for (int64_t px = 0; px < ow; ++px) {
          double acc = 0;
          bool first = true;
          for (int64_t iy = 0; iy < gh; ++iy) {
            double y = sh + double(py) * bh + (double(iy) + 0.5) * bh / double(gh);
            for (int64_t ix = 0; ix < gw; ++ix) {
              double xx = sw + double(px) * bw + (double(ix) + 0.5) * bw / double(gw);
              double v = 0;
              if (y >= -1.0 && y <= double(h) && xx >= -1.0 && xx <= double(w)) {  // false for NaN
                double yy = std::max(y, 0.0), xc = std::max(xx, 0.0);
                int64_t y0 = int64_t(yy), x0 = int64_t(xc), y1, x1;
                if (y0 >= h - 1) {
                  y0 = y1 = h - 1;
                  yy = double(y0);
                } else {
                  y1 = y0 + 1;
                }
                if (x0 >= w - 1) {
                  x0 = x1 = w - 1;
                  xc = double(x0);
                } else {
                  x1 = x0 + 1;
                }
                const double ly = yy - double(y0), lx = xc - double(x0), hy = 1 - ly, hx = 1 - lx;
                const double v1 = hy * hx * plane[y0 * w + x0], v2 = hy * lx * plane[y0 * w + x1];
                const double v3 = ly * hx * plane[y1 * w + x0], v4 = ly * lx * plane[y1 * w + x1];
                v = is_max ? std::max({v1, v2, v3, v4}) : v1 + v2 + v3 + v4;
              }
              if (is_max) {
                acc = first ? v : std::max(acc, v);
                first = false;
              } else {
                acc += v;
              }
            }
          }
          out[size_t(((r * ch + cc) * oh + py) * ow + px)] = is_max ? acc : acc / count;
        }
    }
  }
  fio::write(c, c.outputs[0], out);
}

}  // namespace

void registerDetectionOps(OpRegistry& r) {
  r.add("NonMaxSuppression", {inferNms, runNms});
  r.add("RoiAlign", {inferRoiAlign, runRoiAlign});
}

}  // namespace partita::kernels
