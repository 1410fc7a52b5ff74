// Sampling at coordinates: GridSample (opset 16: 4-D input, modes bilinear / nearest /
// bicubic; opset 20: N-D input, the modes renamed linear / nearest / cubic) and
// AffineGrid (opset 20), which makes the grids GridSample reads. Grid coordinates are
// normalised to [-1, 1], x first (the last spatial axis). Computed in double.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/float_io.h"
#include "kernels/nn_ops.h"
#include "kernels/op_util.h"

namespace partita::kernels {

namespace {

// ---- GridSample -------------------------------------------------------------------

enum class SampleMode { kNearest, kLinear, kCubic };
enum class SamplePad { kZeros, kBorder, kReflection };

template <typename Ctx>
SampleMode sampleMode(const Ctx& c) {
  const bool v20 = c.opset() >= 20;
  std::string m = c.attrs().getString("mode", v20 ? "linear" : "bilinear");
  if (m == "nearest") return SampleMode::kNearest;
  if (m == (v20 ? "linear" : "bilinear")) return SampleMode::kLinear;
  if (m == (v20 ? "cubic" : "bicubic")) return SampleMode::kCubic;
  c.fail("unknown mode '" + m + "' at opset " + std::to_string(c.opset()) +
         (v20 ? " (linear, nearest or cubic)" : " (bilinear, nearest or bicubic)"));
}

template <typename Ctx>
SamplePad samplePad(const Ctx& c) {
  std::string p = c.attrs().getString("padding_mode", "zeros");
  if (p == "zeros") return SamplePad::kZeros;
  if (p == "border") return SamplePad::kBorder;
  if (p == "reflection") return SamplePad::kReflection;
  c.fail("unknown padding_mode '" + p + "' (zeros, border or reflection)");
}

void inferGridSample(InferContext& c) {
  checkArity(c, 2, 2);
  fio::requireFloat(c, 0, "X");
  fio::requireFloat(c, 1, "grid");
  sampleMode(c);
  samplePad(c);
  const ir::TensorType& x = c.input(0);
  const ir::TensorType& g = c.input(1);
  if (x.has_rank && (x.rank() < 3 || (c.opset() < 20 && x.rank() != 4)))
    c.fail(c.opset() < 20 ? "X must be 4-D before opset 20, got " + x.str() : "X must be [N, C, D1, ...]");
  if (g.has_rank && x.has_rank) {
    if (g.rank() != x.rank()) c.fail("grid " + g.str() + " must have the rank of X " + x.str());
    const ir::Dim& last = g.dims.back();
    if (last.isKnown() && last.value != int64_t(x.rank()) - 2)
      c.fail("grid's last dimension must be " + std::to_string(x.rank() - 2) + ", got " + g.str());
  }
  if (!g.has_rank) {
    c.outputs[0] = ir::TensorType::unranked(x.dtype);
    return;
  }
  ir::TensorType out{x.dtype, true, {g.dims[0], x.has_rank ? x.dims[1] : ir::Dim{}}};
  for (size_t i = 1; i + 1 < g.rank(); ++i) out.dims.push_back(g.dims[i]);
  c.outputs[0] = out;
}

// Reflects x into [lo, hi] by bouncing off the nearer border (ONNX's reference).
double reflect(double x, double lo, double hi) {
  const double range = hi - lo;
  if (range <= 0) return lo;
  if (x < lo) {
    const double dx = lo - x;
    const int64_t n = int64_t(dx / range);
    const double r = dx - double(n) * range;
    return n % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    const double dx = x - hi;
    const int64_t n = int64_t(dx / range);
    const double r = dx - double(n) * range;
    return n % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}

void cubicCoeffs(double t, double w[4]) {
  constexpr double a = -0.75;
  const double x0 = t + 1, x1 = t, x2 = 1 - t, x3 = 2 - t;
  w[0] = ((a * x0 - 5 * a) * x0 + 8 * a) * x0 - 4 * a;
  w[1] = ((a + 2) * x1 - (a + 3)) * x1 * x1 + 1;
  w[2] = ((a + 2) * x2 - (a + 3)) * x2 * x2 + 1;
  w[3] = ((a * x3 - 5 * a) * x3 + 8 * a) * x3 - 4 * a;
}

void runGridSample(KernelContext& c) {
  const ir::Tensor& x = c.inputs[0];
  const ir::Tensor& grid = c.inputs[1];
  const SampleMode mode = sampleMode(c);
  const SamplePad pad = samplePad(c);
  const bool align = c.attrs().getInt("align_corners", 0) != 0;
  if (x.rank() < 3) c.fail("X must be [N, C, D1, ...], got " + ir::shapeStr(x.shape));
  const size_t nd = x.rank() - 2;
  if (grid.rank() != x.rank() || grid.shape.back() != int64_t(nd) || grid.shape[0] != x.shape[0])
    c.fail("grid " + ir::shapeStr(grid.shape) + " does not fit X " + ir::shapeStr(x.shape));
  const int64_t n = x.shape[0], ch = x.shape[1];
  std::vector<int64_t> dims(x.shape.begin() + 2, x.shape.end());
  int64_t in_size = 1, out_size = 1;
  for (int64_t d : dims) in_size *= d;
  for (size_t i = 1; i + 1 < grid.rank(); ++i) out_size *= grid.shape[i];
  std::vector<double> lo(nd), hi(nd);
  for (size_t i = 0; i < nd; ++i) {
    lo[i] = align ? 0.0 : -0.5;
    hi[i] = align ? double(dims[i] - 1) : double(dims[i]) - 0.5;
  }
  std::vector<double> xv = fio::read(c, x, "X"), gv = fio::read(c, grid, "grid");
  std::vector<double> out(size_t(n * ch * out_size));
  // Per output point: per spatial dim, the taps (index, weight); an index of -1 reads 0.
  struct Tap {
    int64_t index;
    double weight;
  };
  std::vector<std::vector<Tap>> taps(nd);
  auto mapIndex = [&](int64_t i, size_t d) -> int64_t {
    if (i >= 0 && i < dims[d]) return i;
    switch (pad) {
      case SamplePad::kZeros: return -1;
      case SamplePad::kBorder: return std::clamp<int64_t>(i, 0, dims[d] - 1);
      case SamplePad::kReflection:
        return std::clamp<int64_t>(int64_t(reflect(double(i), lo[d], hi[d])), 0, dims[d] - 1);
    }
    return -1;
  };
  std::vector<int64_t> strides(nd, 1);
  for (size_t d = nd; d-- > 1;) strides[d - 1] = strides[d] * dims[d];
  for (int64_t b = 0; b < n; ++b)
    for (int64_t p = 0; p < out_size; ++p) {
      const double* g = gv.data() + (b * out_size + p) * int64_t(nd);
      for (size_t d = 0; d < nd; ++d) {
        const double v = g[nd - 1 - d];  // the grid lists x (the last axis) first
        double u = align ? (v + 1) / 2 * double(dims[d] - 1) : ((v + 1) * double(dims[d]) - 1) / 2;
        // Far outside (or NaN): a position that reads the padding, in int64 range.
        if (!(u > -double(int64_t(1) << 40) && u < double(int64_t(1) << 40))) u = -double(int64_t(1) << 40);
        if (mode == SampleMode::kNearest) u = std::nearbyint(u);
        // Cubic sampling pads each tap instead (as ONNX Runtime and PyTorch do).
        if (mode != SampleMode::kCubic && (u < lo[d] || u > hi[d])) {
          if (pad == SamplePad::kBorder) u = std::clamp(u, 0.0, double(dims[d] - 1));
          else if (pad == SamplePad::kReflection) u = reflect(u, lo[d], hi[d]);
        }
        taps[d].clear();
        if (mode == SampleMode::kNearest) {
          taps[d].push_back({mapIndex(int64_t(u), d), 1.0});
        } else if (mode == SampleMode::kLinear) {
          const double f = std::floor(u);
          const int64_t i0 = int64_t(f);
          taps[d].push_back({mapIndex(i0, d), 1 - (u - f)});
          taps[d].push_back({mapIndex(i0 + 1, d), u - f});
        } else {
          const double f = std::floor(u);
          const int64_t i0 = int64_t(f);
          double w[4];
          cubicCoeffs(u - f, w);
          for (int k = 0; k < 4; ++k) taps[d].push_back({mapIndex(i0 - 1 + k, d), w[k]});
        }
      }
      // Sum over the tensor product of the taps.
      std::vector<size_t> pick(nd, 0);
      for (int64_t cc = 0; cc < ch; ++cc) out[size_t((b * ch + cc) * out_size + p)] = 0;
      while (true) {
        double w = 1;
        int64_t offset = 0;
        bool inside = true;
        for (size_t d = 0; d < nd; ++d) {
          const Tap& t = taps[d][pick[d]];
          w *= t.weight;
          if (t.index < 0) inside = false;
          else offset += t.index * strides[d];
        }
        if (inside && w != 0)
          for (int64_t cc = 0; cc < ch; ++cc)
            out[size_t((b * ch + cc) * out_size + p)] += w * xv[size_t((b * ch + cc) * in_size + offset)];
        size_t d = nd;
        while (d > 0 && ++pick[d - 1] == taps[d - 1].size()) pick[--d] = 0;
        if (d == 0) break;
      }
    }
  fio::write(c, c.outputs[0], out);
}

// ---- AffineGrid -------------------------------------------------------------------

void inferAffineGrid(InferContext& c) {
  checkArity(c, 2, 2);
  fio::requireFloat(c, 0, "theta");
  fio::requireIndex(c, 1, "size");
  const ir::TensorType& theta = c.input(0);
  if (theta.has_rank && theta.rank() != 3) c.fail("theta must be [N, 2, 3] or [N, 3, 4], got " + theta.str());
  const ir::Tensor* size = c.value(1);
  if (!size) {
    c.outputs[0] = ir::TensorType::unranked(theta.dtype);
    return;
  }
  std::vector<int64_t> s = readInts(*size);
  if (s.size() != 4 && s.size() != 5) c.fail("size must be [N, C, H, W] or [N, C, D, H, W]");
  for (int64_t v : s)
    if (v < 0) c.fail("size has a negative value");
  const int64_t nd = int64_t(s.size()) - 2;
  if (theta.has_rank) {
    const ir::Dim &r = theta.dims[1], &k = theta.dims[2];
    if ((r.isKnown() && r.value != nd) || (k.isKnown() && k.value != nd + 1))
      c.fail("theta " + theta.str() + " does not match a " + std::to_string(nd) + "-D size");
  }
  ir::TensorType out{theta.dtype, true, {ir::Dim::known(s[0])}};
  for (size_t i = 2; i < s.size(); ++i) out.dims.push_back(ir::Dim::known(s[i]));
  out.dims.push_back(ir::Dim::known(nd));
  c.outputs[0] = out;
}

void runAffineGrid(KernelContext& c) {
  const ir::Tensor& theta = c.inputs[0];
  std::vector<int64_t> s = readInts(c.inputs[1]);
  const bool align = c.attrs().getInt("align_corners", 0) != 0;
  if (s.size() != 4 && s.size() != 5) c.fail("size must be [N, C, H, W] or [N, C, D, H, W]");
  const size_t nd = s.size() - 2;
  if (theta.rank() != 3 || theta.shape[0] != s[0] || theta.shape[1] != int64_t(nd) ||
      theta.shape[2] != int64_t(nd) + 1)
    c.fail("theta " + ir::shapeStr(theta.shape) + " does not match size");
  std::vector<double> th = fio::read(c, theta, "theta");
  std::vector<int64_t> dims(s.begin() + 2, s.end());
  int64_t points = 1;
  for (int64_t d : dims) points *= d;
  auto base = [&](int64_t i, int64_t len) {
    if (align) return len > 1 ? -1.0 + 2.0 * double(i) / double(len - 1) : -1.0;
    return -1.0 + (2.0 * double(i) + 1.0) / double(len);
  };
  std::vector<double> out(size_t(s[0] * points * int64_t(nd)));
  std::vector<double> h(nd + 1);
  for (int64_t b = 0; b < s[0]; ++b)
    for (int64_t p = 0; p < points; ++p) {
      int64_t rest = p;
      // homogeneous coordinates, x (the last axis) first
      for (size_t d = nd; d-- > 0;) {
        h[nd - 1 - d] = base(rest % dims[d], dims[d]);
        rest /= dims[d];
      }
      h[nd] = 1;
      for (size_t r = 0; r < nd; ++r) {
        double v = 0;
        for (size_t k = 0; k <= nd; ++k) v += th[size_t(b) * nd * (nd + 1) + r * (nd + 1) + k] * h[k];
        out[size_t((b * points + p) * int64_t(nd)) + r] = v;
      }
    }
  fio::write(c, c.outputs[0], out);
}

}  // namespace

void registerSampleOps(OpRegistry& r) {
  r.add("GridSample", {inferGridSample, runGridSample, 20});
  r.add("AffineGrid", {inferAffineGrid, runAffineGrid, 20});
}

}  // namespace partita::kernels
