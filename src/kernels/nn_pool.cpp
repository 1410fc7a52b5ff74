// Pooling: MaxPool (with optional Indices), AveragePool, LpPool over 1..3 spatial
// dims, and the global forms. Every (batch, channel) plane is independent; planes are
// spread over the threads.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/elementwise_cast.h"
#include "kernels/nn_ops.h"
#include "kernels/nn_window.h"
#include "kernels/op_util.h"

namespace partita::kernels {

namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

// Kernel taps [lo, hi) of a window starting at `start` (dilation d, k taps) that fall
// inside [0, n).
inline void tapRange(int64_t start, int64_t k, int64_t d, int64_t n, int64_t& lo, int64_t& hi) {
  lo = start >= 0 ? 0 : std::min<int64_t>(k, ceilDiv(-start, d));
  int64_t last = n - 1 - start;
  hi = last < 0 ? 0 : std::min<int64_t>(k, last / d + 1);
  if (hi < lo) hi = lo;
}

bool floatLike(ir::DType t) {
  return t == ir::DType::kFloat32 || t == ir::DType::kFloat64 || t == ir::DType::kFloat16 ||
         t == ir::DType::kBFloat16;
}

// ---- inference -------------------------------------------------------------------

void inferPool(InferContext& c) {
  const ir::TensorType& x = c.input(0);
  const bool is_max = c.node.op_type == "MaxPool";
  if (x.dtype != ir::DType::kUndefined && !floatLike(x.dtype) &&
      !(is_max && (x.dtype == ir::DType::kInt8 || x.dtype == ir::DType::kUInt8)))
    c.fail("unsupported input dtype " + std::string(ir::dtypeName(x.dtype)));
  if (!c.attrs().has("kernel_shape")) c.fail("attribute kernel_shape is required");
  const size_t nd = c.attrs().getInts("kernel_shape").size();
  if (x.has_rank && x.rank() != nd + 2)
    c.fail("kernel_shape has " + std::to_string(nd) + " dims but the input is " + x.str());
  if (c.node.op_type == "AveragePool" && c.opset() < 19 && c.attrs().has("dilations")) {
    for (int64_t d : c.attrs().getInts("dilations"))
      if (d != 1) c.fail("AveragePool has dilations from opset 19 on, not at opset " + std::to_string(c.opset()));
  }
  Window win = readWindow(c.node, nd, {});
  std::vector<int64_t> in = x.has_rank ? spatialDims(x) : std::vector<int64_t>(nd, -1);
  std::vector<int64_t> out = resolveWindow(c.node, win, in);
  ir::Dim n = x.has_rank ? x.dims[0] : ir::Dim{}, ch = x.has_rank ? x.dims[1] : ir::Dim{};
  c.outputs[0] = makeType(x.dtype, n, ch, out);
  if (c.outputs.size() > 1) c.outputs[1] = makeType(ir::DType::kInt64, n, ch, out);
}

void inferGlobalPool(InferContext& c) {
  const ir::TensorType& x = c.input(0);
  if (x.dtype != ir::DType::kUndefined && !floatLike(x.dtype))
    c.fail("unsupported input dtype " + std::string(ir::dtypeName(x.dtype)));
  if (!x.has_rank) {
    c.outputs[0] = ir::TensorType::unranked(x.dtype);
    return;
  }
  if (x.rank() < 2) c.fail("input must have rank >= 2, got " + x.str());
  c.outputs[0] = makeType(x.dtype, x.dims[0], x.dims[1], std::vector<int64_t>(x.rank() - 2, 1));
}

// ---- kernels ---------------------------------------------------------------------

struct PoolSetup {
  Geometry3 g{};
  int64_t planes = 0, in_size = 0, out_size = 0;
  int64_t channels = 0;
};

PoolSetup setupPool(KernelContext& c, Window& win) {
  const ir::Tensor& x = c.inputs[0];
  const size_t nd = c.attrs().getInts("kernel_shape").size();
  if (x.rank() != nd + 2) c.fail("kernel_shape does not match the input " + ir::shapeStr(x.shape));
  if (nd < 1 || nd > 3) unsupportedNode(c.node, "only 1, 2 or 3 spatial dimensions are supported");
  win = readWindow(c.node, nd, {});
  std::vector<int64_t> in(x.shape.begin() + 2, x.shape.end());
  std::vector<int64_t> out = resolveWindow(c.node, win, in);
  std::vector<int64_t> want{x.shape[0], x.shape[1]};
  want.insert(want.end(), out.begin(), out.end());
  if (c.outputs[0].shape != want)
    c.fail("output shape " + ir::shapeStr(c.outputs[0].shape) + " != " + ir::shapeStr(want));
  PoolSetup s;
  s.g = toGeometry3(win, in, out);
  s.planes = x.shape[0] * x.shape[1];
  s.channels = x.shape[1];
  s.in_size = ir::shapeNumel(in);
  s.out_size = ir::shapeNumel(out);
  return s;
}

enum class Reduce { kMax, kAverage, kSquares, kPowers };

// 1-D and 2-D pooling by kernel taps: for each output row, every tap adds (or maxes)
// a strided input row into the output row, over the columns where that tap lies
// inside the input; the loops run along the output row and vectorise.
template <typename T, Reduce R>
void poolPlanes2d(const T* x, T* y, const PoolSetup& s, bool include_pad, double p_exp) {
  using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const Geometry3& g = s.g;
  const int64_t ih_n = g.in[1], iw_n = g.in[2], oh_n = g.out[1], ow_n = g.out[2];
  const int64_t sw = g.s[2];
  // Nothing to write: no tables sized by the other dims (an empty output's other side
  // may be in the billions: an onnx fuzz finding allocated 2 GB here).
  if (s.planes == 0 || oh_n == 0 || ow_n == 0) return;
  // The kernel columns whose taps land in the input for some output column, kw in
  // [kw0, kw1): 0 <= ow * sw + kw * d - pb < iw for some ow < ow_n. The others add
  // nothing; a kernel as wide as its padding allows (billions) is not walked.
  const int64_t d2 = g.d[2], reach = (ow_n - 1) * sw;
  const int64_t kw0 = std::min(g.k[2], g.pb[2] > reach ? ceilDiv(g.pb[2] - reach, d2) : 0);
  const int64_t kw1 = std::max(kw0, std::min(g.k[2], (iw_n - 1 + g.pb[2]) / d2 + 1));
  std::vector<int64_t> lo(static_cast<size_t>(kw1 - kw0)), hi(static_cast<size_t>(kw1 - kw0));
  for (int64_t kw = kw0; kw < kw1; ++kw) {
    const int64_t off = kw * d2 - g.pb[2], i = kw - kw0;
    lo[size_t(i)] = std::clamp<int64_t>(ceilDiv(-off, sw), 0, ow_n);
    const int64_t last = iw_n - 1 - off;
    hi[size_t(i)] = std::max(lo[size_t(i)], last < 0 ? 0 : std::min<int64_t>(ow_n, last / sw + 1));
  }
  // Divisors of the average: taps per output column and row.
  std::vector<Acc> inv_w(static_cast<size_t>(ow_n)), count_h(static_cast<size_t>(oh_n));
  if constexpr (R == Reduce::kAverage) {
    for (int64_t ow = 0; ow < ow_n; ++ow) {
      const int64_t w0 = ow * sw - g.pb[2];
      int64_t a, b;
      if (include_pad)
        tapRange(w0 + g.pb[2], g.k[2], g.d[2], iw_n + g.pb[2] + g.pe[2], a, b);
      else
        tapRange(w0, g.k[2], g.d[2], iw_n, a, b);
      inv_w[size_t(ow)] = b > a ? Acc(1) / Acc(b - a) : Acc(0);
    }
    for (int64_t oh = 0; oh < oh_n; ++oh) {
      const int64_t h0 = oh * g.s[1] - g.pb[1];
      int64_t a, b;
      if (include_pad)
        tapRange(h0 + g.pb[1], g.k[1], g.d[1], ih_n + g.pb[1] + g.pe[1], a, b);
      else
        tapRange(h0, g.k[1], g.d[1], ih_n, a, b);
      count_h[size_t(oh)] = Acc(b - a);
    }
  }
  const Acc p = Acc(p_exp);
  const int64_t work = s.planes * s.out_size * g.k[1] * g.k[2];
#pragma omp parallel if (s.planes > 1 && work > 32768)
  {
    std::vector<Acc> acc(static_cast<size_t>(ow_n));
#pragma omp for schedule(static)
    for (int64_t pl = 0; pl < s.planes; ++pl) {
      const T* xp = x + pl * s.in_size;
      T* yp = y + pl * s.out_size;
      for (int64_t oh = 0; oh < oh_n; ++oh) {
        Acc* ar = acc.data();
        if constexpr (R == Reduce::kMax) {
          std::fill(ar, ar + ow_n, -std::numeric_limits<Acc>::infinity());
        } else {
          std::fill(ar, ar + ow_n, Acc(0));
        }
        const int64_t h0 = oh * g.s[1] - g.pb[1];
        int64_t hlo, hhi;
        tapRange(h0, g.k[1], g.d[1], ih_n, hlo, hhi);
        for (int64_t kh = hlo; kh < hhi; ++kh) {
          const T* row = xp + (h0 + kh * g.d[1]) * iw_n;
          for (int64_t kw = kw0; kw < kw1; ++kw) {
            const T* src = row + kw * d2 - g.pb[2];  // indexed by ow * sw
            const int64_t a = lo[size_t(kw - kw0)], b = hi[size_t(kw - kw0)];
            for (int64_t ow = a; ow < b; ++ow) {
              const Acc v = Acc(src[ow * sw]);
              if constexpr (R == Reduce::kMax) {
                ar[ow] = v > ar[ow] ? v : ar[ow];
              } else if constexpr (R == Reduce::kAverage) {
                ar[ow] += v;
              } else if constexpr (R == Reduce::kSquares) {
                ar[ow] += v * v;
              } else {
                ar[ow] += std::pow(std::abs(v), p);
              }
            }
          }
        }
        T* yr = yp + oh * ow_n;
        if constexpr (R == Reduce::kMax) {
          for (int64_t ow = 0; ow < ow_n; ++ow) yr[ow] = T(ar[ow]);
        } else if constexpr (R == Reduce::kAverage) {
          const Acc ch = count_h[size_t(oh)];
          const Acc inv = ch > 0 ? Acc(1) / ch : Acc(0);
          for (int64_t ow = 0; ow < ow_n; ++ow) yr[ow] = T(ar[ow] * inv * inv_w[size_t(ow)]);
        } else if constexpr (R == Reduce::kSquares) {
          for (int64_t ow = 0; ow < ow_n; ++ow) yr[ow] = T(std::sqrt(ar[ow]));
        } else {
          for (int64_t ow = 0; ow < ow_n; ++ow) yr[ow] = T(std::pow(ar[ow], Acc(1) / p));
        }
      }
    }
  }
}

// True when the problem has at most 2 spatial dims (depth axis trivial).
bool flat2d(const Geometry3& g) { return g.in[0] == 1 && g.k[0] == 1 && g.out[0] == 1 && g.pb[0] == 0; }

template <typename T>
void maxPoolTyped(KernelContext& c, const PoolSetup& s) {
  const T* x = c.inputs[0].as<const T>();
  T* y = c.outputs[0].as<T>();
  int64_t* idx = c.outputs.size() > 1 && c.outputs[1].defined() ? c.outputs[1].as<int64_t>() : nullptr;
  const bool col_major = c.attrs().getInt("storage_order", 0) != 0;
  const Geometry3& g = s.g;
  if (!idx && flat2d(g)) {
    poolPlanes2d<T, Reduce::kMax>(x, y, s, false, 0);
    return;
  }
  const int64_t work = s.planes * s.out_size * g.k[0] * g.k[1] * g.k[2];
#pragma omp parallel for schedule(static) if (s.planes > 1 && work > 32768)
  for (int64_t p = 0; p < s.planes; ++p) {
    const T* xp = x + p * s.in_size;
    T* yp = y + p * s.out_size;
    int64_t* ip = idx ? idx + p * s.out_size : nullptr;
    int64_t o = 0;
    for (int64_t od = 0; od < g.out[0]; ++od) {
      const int64_t d0 = od * g.s[0] - g.pb[0];
      int64_t dlo, dhi;
      tapRange(d0, g.k[0], g.d[0], g.in[0], dlo, dhi);
      for (int64_t oh = 0; oh < g.out[1]; ++oh) {
        const int64_t h0 = oh * g.s[1] - g.pb[1];
        int64_t hlo, hhi;
        tapRange(h0, g.k[1], g.d[1], g.in[1], hlo, hhi);
        for (int64_t ow = 0; ow < g.out[2]; ++ow, ++o) {
          const int64_t w0 = ow * g.s[2] - g.pb[2];
          int64_t wlo, whi;
          tapRange(w0, g.k[2], g.d[2], g.in[2], wlo, whi);
          T best = std::numeric_limits<T>::lowest();
          if constexpr (std::numeric_limits<T>::has_infinity) best = -std::numeric_limits<T>::infinity();
          int64_t best_at = -1;
          for (int64_t kd = dlo; kd < dhi; ++kd) {
            const int64_t id = d0 + kd * g.d[0];
            for (int64_t kh = hlo; kh < hhi; ++kh) {
              const int64_t ih = h0 + kh * g.d[1];
              const T* row = xp + (id * g.in[1] + ih) * g.in[2];
              for (int64_t kw = wlo; kw < whi; ++kw) {
                const int64_t iw = w0 + kw * g.d[2];
                if (row[iw] > best || best_at < 0) {
                  best = row[iw];
                  best_at =
                      col_major ? (iw * g.in[1] + ih) * g.in[0] + id : (id * g.in[1] + ih) * g.in[2] + iw;
                }
              }
            }
          }
          yp[o] = best;
          if (ip) ip[o] = best_at < 0 ? -1 : p * s.in_size + best_at;
        }
      }
    }
  }
}

void runMaxPool(KernelContext& c) {
  if (elementwise::anyHalfLike(c)) return elementwise::runThroughFloat(c, runMaxPool);
  Window win;
  PoolSetup s = setupPool(c, win);
  if (c.outputs.size() > 1 && c.outputs[1].defined() && c.outputs[1].dtype != ir::DType::kInt64)
    c.fail("Indices must be int64");
  switch (c.inputs[0].dtype) {
    case ir::DType::kFloat32:
      maxPoolTyped<float>(c, s);
      break;
    case ir::DType::kFloat64:
      maxPoolTyped<double>(c, s);
      break;
    case ir::DType::kInt8:
      maxPoolTyped<int8_t>(c, s);
      break;
    case ir::DType::kUInt8:
      maxPoolTyped<uint8_t>(c, s);
      break;
    default:
      unsupportedNode(c.node, "dtype " + std::string(ir::dtypeName(c.inputs[0].dtype)) + " is not supported");
  }
}

// AveragePool (kind 0) and LpPool (kind 1, exponent p).
template <typename T>
void sumPoolTyped(KernelContext& c, const PoolSetup& s, bool lp, double p_exp) {
  using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const T* x = c.inputs[0].as<const T>();
  T* y = c.outputs[0].as<T>();
  const bool include_pad = c.attrs().getInt("count_include_pad", 0) != 0;
  const Geometry3& g = s.g;
  if (flat2d(g)) {
    if (!lp) {
      poolPlanes2d<T, Reduce::kAverage>(x, y, s, include_pad, 0);
    } else if (p_exp == 2) {
      poolPlanes2d<T, Reduce::kSquares>(x, y, s, false, 2);
    } else {
      poolPlanes2d<T, Reduce::kPowers>(x, y, s, false, p_exp);
    }
    return;
  }
  const Acc p = Acc(p_exp);
  const int64_t work = s.planes * s.out_size * g.k[0] * g.k[1] * g.k[2];
#pragma omp parallel for schedule(static) if (s.planes > 1 && work > 32768)
  for (int64_t pl = 0; pl < s.planes; ++pl) {
    const T* xp = x + pl * s.in_size;
    T* yp = y + pl * s.out_size;
    int64_t o = 0;
    for (int64_t od = 0; od < g.out[0]; ++od) {
      const int64_t d0 = od * g.s[0] - g.pb[0];
      int64_t dlo, dhi, dplo, dphi;
      tapRange(d0, g.k[0], g.d[0], g.in[0], dlo, dhi);
      tapRange(d0 + g.pb[0], g.k[0], g.d[0], g.in[0] + g.pb[0] + g.pe[0], dplo, dphi);
      for (int64_t oh = 0; oh < g.out[1]; ++oh) {
        const int64_t h0 = oh * g.s[1] - g.pb[1];
        int64_t hlo, hhi, hplo, hphi;
        tapRange(h0, g.k[1], g.d[1], g.in[1], hlo, hhi);
        tapRange(h0 + g.pb[1], g.k[1], g.d[1], g.in[1] + g.pb[1] + g.pe[1], hplo, hphi);
        for (int64_t ow = 0; ow < g.out[2]; ++ow, ++o) {
          const int64_t w0 = ow * g.s[2] - g.pb[2];
          int64_t wlo, whi, wplo, wphi;
          tapRange(w0, g.k[2], g.d[2], g.in[2], wlo, whi);
          tapRange(w0 + g.pb[2], g.k[2], g.d[2], g.in[2] + g.pb[2] + g.pe[2], wplo, wphi);
          Acc sum = 0;
          for (int64_t kd = dlo; kd < dhi; ++kd) {
            const int64_t id = d0 + kd * g.d[0];
            for (int64_t kh = hlo; kh < hhi; ++kh) {
              const T* row = xp + (id * g.in[1] + h0 + kh * g.d[1]) * g.in[2] + w0;
              if (!lp) {
                for (int64_t kw = wlo; kw < whi; ++kw) sum += Acc(row[kw * g.d[2]]);
              } else if (p == Acc(2)) {
                for (int64_t kw = wlo; kw < whi; ++kw) sum += Acc(row[kw * g.d[2]]) * Acc(row[kw * g.d[2]]);
              } else {
                for (int64_t kw = wlo; kw < whi; ++kw) sum += std::pow(std::abs(Acc(row[kw * g.d[2]])), p);
              }
            }
          }
          if (lp) {
            yp[o] = T(p == Acc(2) ? std::sqrt(sum) : std::pow(sum, Acc(1) / p));
          } else {
            const int64_t count = include_pad ? (dphi - dplo) * (hphi - hplo) * (wphi - wplo)
                                              : (dhi - dlo) * (hhi - hlo) * (whi - wlo);
            yp[o] = count > 0 ? T(sum / Acc(count)) : T(0);
          }
        }
      }
    }
  }
}

void runSumPool(KernelContext& c, bool lp) {
  Window win;
  PoolSetup s = setupPool(c, win);
  const double p = lp ? double(c.attrs().getInt("p", 2)) : 1.0;
  switch (c.inputs[0].dtype) {
    case ir::DType::kFloat32:
      sumPoolTyped<float>(c, s, lp, p);
      break;
    case ir::DType::kFloat64:
      sumPoolTyped<double>(c, s, lp, p);
      break;
    default:
      unsupportedNode(c.node, "dtype " + std::string(ir::dtypeName(c.inputs[0].dtype)) + " is not supported");
  }
}

void runAveragePool(KernelContext& c) {
  if (elementwise::anyHalfLike(c)) return elementwise::runThroughFloat(c, runAveragePool);
  runSumPool(c, false);
}
void runLpPool(KernelContext& c) {
  if (elementwise::anyHalfLike(c)) return elementwise::runThroughFloat(c, runLpPool);
  runSumPool(c, true);
}

enum class GlobalKind { kAverage, kMax, kLp };

template <typename T>
void globalPoolTyped(KernelContext& c, GlobalKind kind) {
  using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;
  const ir::Tensor& xt = c.inputs[0];
  const T* x = xt.as<const T>();
  T* y = c.outputs[0].as<T>();
  const int64_t planes = xt.shape[0] * xt.shape[1];
  const int64_t size = planes == 0 ? 0 : xt.numel() / planes;
  const Acc p = Acc(kind == GlobalKind::kLp ? c.attrs().getInt("p", 2) : 1);
#pragma omp parallel for schedule(static) if (planes > 1 && planes * size > 32768)
  for (int64_t pl = 0; pl < planes; ++pl) {
    const T* xp = x + pl * size;
    if (kind == GlobalKind::kMax) {
      T best = size > 0 ? xp[0] : T(0);
      for (int64_t i = 1; i < size; ++i) best = xp[i] > best ? xp[i] : best;
      y[pl] = best;
    } else if (kind == GlobalKind::kAverage) {
      Acc sum = 0;
      for (int64_t i = 0; i < size; ++i) sum += Acc(xp[i]);
      y[pl] = T(size > 0 ? sum / Acc(size) : Acc(0));
    } else {
      Acc sum = 0;
      for (int64_t i = 0; i < size; ++i) sum += std::pow(std::abs(Acc(xp[i])), p);
      y[pl] = T(std::pow(sum, Acc(1) / p));
    }
  }
}

void runGlobalPool(KernelContext& c, GlobalKind kind) {
  if (c.inputs[0].rank() < 2) c.fail("input must have rank >= 2");
  switch (c.inputs[0].dtype) {
    case ir::DType::kFloat32:
      globalPoolTyped<float>(c, kind);
      break;
    case ir::DType::kFloat64:
      globalPoolTyped<double>(c, kind);
      break;
    default:
      unsupportedNode(c.node, "dtype " + std::string(ir::dtypeName(c.inputs[0].dtype)) + " is not supported");
  }
}

void runGlobalAveragePool(KernelContext& c) {
  if (elementwise::anyHalfLike(c)) return elementwise::runThroughFloat(c, runGlobalAveragePool);
  runGlobalPool(c, GlobalKind::kAverage);
}
void runGlobalMaxPool(KernelContext& c) {
  if (elementwise::anyHalfLike(c)) return elementwise::runThroughFloat(c, runGlobalMaxPool);
  runGlobalPool(c, GlobalKind::kMax);
}
void runGlobalLpPool(KernelContext& c) {
  if (elementwise::anyHalfLike(c)) return elementwise::runThroughFloat(c, runGlobalLpPool);
  runGlobalPool(c, GlobalKind::kLp);
}

}  // namespace

void registerPoolOps(OpRegistry& r) {
  r.add("MaxPool", {inferPool, runMaxPool});
  r.add("AveragePool", {inferPool, runAveragePool, 19});  // 19: dilations
  r.add("LpPool", {inferPool, runLpPool, 18});            // 18: ceil_mode, dilations
  r.add("GlobalAveragePool", {inferGlobalPool, runGlobalAveragePool});
  r.add("GlobalMaxPool", {inferGlobalPool, runGlobalMaxPool});
  r.add("GlobalLpPool", {inferGlobalPool, runGlobalLpPool});
}

}  // namespace partita::kernels
