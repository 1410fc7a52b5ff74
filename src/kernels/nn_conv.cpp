// Conv and ConvTranspose over 1..3 spatial dims.
//
// Conv: output columns are cut into tiles; a tile is lowered with im2col into a small
// per-thread buffer and multiplied by the group's weights with one single-threaded
// BLAS call, then the bias is added while the tile is still in cache. Tiles (over
// batch x group x columns) are spread over the threads. When there are too few tiles
// to share (small images), the whole image is lowered once and the GEMM is split by
// output channels instead. 1x1 convolutions with unit stride and no padding skip
// im2col; depthwise convolutions (one input channel per group) use a direct loop.
// ConvTranspose: one GEMM per image and group (W^T x X) then col2im.
#include "kernels/nn_conv.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "kernels/elementwise_cast.h"
#include "kernels/nn_gemm.h"
#include "kernels/nn_ops.h"
#include "kernels/nn_window.h"
#include "kernels/op_util.h"

namespace partita::kernels {

namespace {

constexpr size_t kTileBytes = 384 * 1024;  // target size of one im2col tile (fits L2)
constexpr int64_t kMinTileColumns = 64;    // narrower tiles make BLAS repack weights too often

int64_t ceilDiv(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

// Valid range [lo, hi) of output positions o along an axis whose input index is
// o * s + off, for an input of size n and `count` outputs.
void validRange(int64_t off, int64_t s, int64_t n, int64_t count, int64_t& lo, int64_t& hi) {
  lo = std::clamp<int64_t>(ceilDiv(-off, s), 0, count);
  int64_t last = n - 1 - off;
  hi = last < 0 ? 0 : std::min<int64_t>(count, last / s + 1);
  if (hi < lo) hi = lo;
}

void checkFloat(InferContext& c, ir::DType dt) {
  if (dt != ir::DType::kUndefined && dt != ir::DType::kFloat32 && dt != ir::DType::kFloat64 &&
      dt != ir::DType::kFloat16 && dt != ir::DType::kBFloat16)
    c.fail("input must be a float tensor, got " + std::string(ir::dtypeName(dt)));
}

// ---- Conv ----------------------------------------------------------------------

void inferConv(InferContext& c) {
  checkFloat(c, c.input(0).dtype);
  c.outputs[0] = inferConvOutput(c, c.input(0), c.input(1));
  const ir::Dim m = c.outputs[0].has_rank ? c.outputs[0].dims[1] : ir::Dim{};
  if (c.hasInput(2) && c.input(2).has_rank && c.input(2).isStatic() && m.isKnown() &&
      (c.input(2).rank() != 1 || c.input(2).dims[0].value != m.value))
    c.fail("bias " + c.input(2).str() + " must have one value per output channel");
}

// Writes rows [c * K, (c + cg) * K) x columns [j0, j1) of the im2col matrix of one
// image's channel block `x` into `col` (row stride j1 - j0).
template <typename T>
void im2colTile(const T* x, int64_t cg, const Geometry3& g, const std::vector<int64_t>& lo,
                const std::vector<int64_t>& hi, int64_t j0, int64_t j1, T* col) {
  const int64_t width = j1 - j0;
  const int64_t ow_n = g.out[2], oh_n = g.out[1];
  const int64_t in_plane = g.in[0] * g.in[1] * g.in[2];
  T* dst = col;
  for (int64_t ci = 0; ci < cg; ++ci) {
    const T* xc = x + ci * in_plane;
    for (int64_t kd = 0; kd < g.k[0]; ++kd)
      for (int64_t kh = 0; kh < g.k[1]; ++kh)
        for (int64_t kw = 0; kw < g.k[2]; ++kw, dst += width) {
          const int64_t wlo = lo[size_t(kw)], whi = hi[size_t(kw)];
          const int64_t woff = kw * g.d[2] - g.pb[2];
          int64_t j = j0;
          while (j < j1) {
            const int64_t q = j / ow_n;
            const int64_t ow0 = j - q * ow_n;
            const int64_t ow1 = std::min(ow_n, ow0 + (j1 - j));
            T* out = dst + (j - j0) - ow0;  // indexed by ow
            const int64_t od = q / oh_n, oh = q - od * oh_n;
            const int64_t id = od * g.s[0] - g.pb[0] + kd * g.d[0];
            const int64_t ih = oh * g.s[1] - g.pb[1] + kh * g.d[1];
            if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1]) {
              std::fill(out + ow0, out + ow1, T(0));
            } else {
              const T* src = xc + (id * g.in[1] + ih) * g.in[2] + woff;  // indexed by ow * s
              const int64_t a = std::clamp(wlo, ow0, ow1), b = std::clamp(whi, a, ow1);
              std::fill(out + ow0, out + a, T(0));
              if (g.s[2] == 1) {
                std::memcpy(out + a, src + a, size_t(b - a) * sizeof(T));
              } else {
                const int64_t s = g.s[2];
                for (int64_t ow = a; ow < b; ++ow) out[ow] = src[ow * s];
              }
              std::fill(out + b, out + ow1, T(0));
            }
            j += ow1 - ow0;
          }
        }
  }
}

template <typename T>
void addBias(T* y, int64_t rows, int64_t cols, int64_t ld, const T* bias) {
  for (int64_t r = 0; r < rows; ++r) {
    const T b = bias[r];
    T* yr = y + r * ld;
    for (int64_t j = 0; j < cols; ++j) yr[j] += b;
  }
}

// One output plane of a depthwise convolution (a single input channel), 1-2D.
template <typename T>
void depthwisePlane(const T* x, const T* w, T bias, const Geometry3& g, const std::vector<int64_t>& lo,
                    const std::vector<int64_t>& hi, T* y) {
  const int64_t ih_n = g.in[1], iw_n = g.in[2], oh_n = g.out[1], ow_n = g.out[2];
  const int64_t kh_n = g.k[1], kw_n = g.k[2], sw = g.s[2];
  for (int64_t oh = 0; oh < oh_n; ++oh) {
    T* yr = y + oh * ow_n;
    std::fill(yr, yr + ow_n, bias);
    for (int64_t kh = 0; kh < kh_n; ++kh) {
      const int64_t ih = oh * g.s[1] - g.pb[1] + kh * g.d[1];
      if (ih < 0 || ih >= ih_n) continue;
      const T* xr = x + ih * iw_n;
      for (int64_t kw = 0; kw < kw_n; ++kw) {
        const T wv = w[kh * kw_n + kw];
        const T* src = xr + kw * g.d[2] - g.pb[2];
        const int64_t a = lo[size_t(kw)], b = hi[size_t(kw)];
        if (sw == 1) {
          for (int64_t ow = a; ow < b; ++ow) yr[ow] += wv * src[ow];
        } else {
          for (int64_t ow = a; ow < b; ++ow) yr[ow] += wv * src[ow * sw];
        }
      }
    }
  }
}

// The same for a K x K kernel with column stride S (3x3 and 5x5 are what depthwise
// layers use): the K*K taps of each output accumulate in a register, outputs in SIMD lanes. Rows above
// or below the input read `zeros`; columns whose taps leave the input take the checked
// path.
template <typename T, int K, int S>
void depthwisePlaneFixed(const T* x, const T* w, T bias, const Geometry3& g, const std::vector<int64_t>& lo,
                         const std::vector<int64_t>& hi, const T* zeros, T* y) {
  const int64_t ih_n = g.in[1], iw_n = g.in[2], oh_n = g.out[1], ow_n = g.out[2];
  const int64_t dw = g.d[2], pw = g.pb[2];
  int64_t a = 0, b = ow_n;  // interior: every tap inside the input
  for (int kw = 0; kw < K; ++kw) {
    a = std::max(a, lo[size_t(kw)]);
    b = std::min(b, hi[size_t(kw)]);
  }
  if (b < a) b = a;
  T wk[K * K];
  for (int i = 0; i < K * K; ++i) wk[i] = w[i];
  for (int64_t oh = 0; oh < oh_n; ++oh) {
    const T* rows[K];
    for (int kh = 0; kh < K; ++kh) {
      const int64_t ih = oh * g.s[1] - g.pb[1] + kh * g.d[1];
      rows[kh] = (ih < 0 || ih >= ih_n) ? zeros : x + ih * iw_n;
    }
    T* yr = y + oh * ow_n;
    auto checked = [&](int64_t ow) {
      T acc = bias;
      for (int kh = 0; kh < K; ++kh)
        for (int kw = 0; kw < K; ++kw) {
          const int64_t iw = ow * S - pw + kw * dw;
          if (iw >= 0 && iw < iw_n) acc += wk[kh * K + kw] * rows[kh][iw];
        }
      yr[ow] = acc;
    };
    for (int64_t ow = 0; ow < a; ++ow) checked(ow);
    const T* taps[K * K];
    for (int kh = 0; kh < K; ++kh)
      for (int kw = 0; kw < K; ++kw) taps[kh * K + kw] = rows[kh] + kw * dw - pw;
#pragma omp simd
    for (int64_t ow = a; ow < b; ++ow) {
      T acc = bias;
      for (int t = 0; t < K * K; ++t) acc += wk[t] * taps[t][ow * S];
      yr[ow] = acc;
    }
    for (int64_t ow = b; ow < ow_n; ++ow) checked(ow);
  }
}

template <typename T>
using DepthwiseFixedFn = void (*)(const T*, const T*, T, const Geometry3&, const std::vector<int64_t>&,
                                  const std::vector<int64_t>&, const T*, T*);

template <typename T>
DepthwiseFixedFn<T> depthwiseFixedFor(const Geometry3& g) {
  if (g.k[1] != g.k[2]) return nullptr;
  const int64_t k = g.k[2], s = g.s[2];
  if (k == 3 && s == 1) return depthwisePlaneFixed<T, 3, 1>;
  if (k == 3 && s == 2) return depthwisePlaneFixed<T, 3, 2>;
  if (k == 5 && s == 1) return depthwisePlaneFixed<T, 5, 1>;
  if (k == 5 && s == 2) return depthwisePlaneFixed<T, 5, 2>;
  return nullptr;
}

template <typename T>
void convForwardTyped(const ConvShape& s, const T* x, const T* w, const T* bias, T* y) {
  const Geometry3& g = s.g;
  if (s.n == 0 || s.out_size == 0) return;
  if (s.cg == 0 || s.ksize == 0) {  // empty reduction: the output is the bias
    for (int64_t i = 0; i < s.n * s.m; ++i)
      std::fill(y + i * s.out_size, y + (i + 1) * s.out_size, bias ? bias[i % s.m] : T(0));
    return;
  }
  std::vector<int64_t> lo(static_cast<size_t>(g.k[2])), hi(static_cast<size_t>(g.k[2]));
  for (int64_t kw = 0; kw < g.k[2]; ++kw)
    validRange(kw * g.d[2] - g.pb[2], g.s[2], g.in[2], g.out[2], lo[size_t(kw)], hi[size_t(kw)]);

  // Depthwise: one input channel per group; a direct loop beats a K=9 GEMM.
  if (s.cg == 1 && s.nd <= 2) {
    const int64_t planes = s.n * s.m;
    const DepthwiseFixedFn<T> fixed = depthwiseFixedFor<T>(g);
#pragma omp parallel if (planes > 1 && planes * s.out_size * s.ksize > 32768)
    {
      std::vector<T> zeros(fixed ? size_t(g.in[2]) : 0, T(0));
#pragma omp for schedule(static)
      for (int64_t p = 0; p < planes; ++p) {
        const int64_t b = p / s.m, m = p % s.m, grp = m / s.mg;
        const T* xp = x + (b * s.c + grp) * s.in_size;
        const T bv = bias ? bias[m] : T(0);
        if (fixed) {
          fixed(xp, w + m * s.ksize, bv, g, lo, hi, zeros.data(), y + p * s.out_size);
        } else {
          depthwisePlane(xp, w + m * s.ksize, bv, g, lo, hi, y + p * s.out_size);
        }
      }
    }
    return;
  }

  const bool pointwise = s.ksize == 1 && g.s[0] == 1 && g.s[1] == 1 && g.s[2] == 1 && g.pb[0] == 0 &&
                         g.pb[1] == 0 && g.pb[2] == 0 && s.in_size == s.out_size;
  const int64_t kt = s.cg * s.ksize;  // GEMM depth
  const int64_t p_n = s.out_size;
  const int threads = splitThreads();  // the tiles; the team runs them

  int64_t tile = std::max<int64_t>(kMinTileColumns, int64_t(kTileBytes / sizeof(T)) / kt);
  if (pointwise) tile = std::max<int64_t>(tile, 256);
  int64_t tiles = (p_n + tile - 1) / tile;
  const int64_t images = s.n * s.groups;
  if ((images * tiles) % threads != 0 && images * tiles < 4 * threads) {
    // Few tiles: cut more so that every thread gets the same share.
    const int64_t want = (images * tiles + threads - 1) / threads * threads;
    tiles = std::min(p_n, (want + images - 1) / images);
  }
  tile = (p_n + tiles - 1) / tiles;  // equal tiles
  tiles = (p_n + tile - 1) / tile;
  const int64_t items = images * tiles;
  const bool tiled = threads == 1 || (items >= threads && tile >= kMinTileColumns / 2);

  if (tiled) {
#pragma omp parallel if (items > 1 && threads > 1)
    {
      std::unique_ptr<T[]> buf(pointwise ? nullptr : new T[size_t(kt * tile)]);
#pragma omp for schedule(static)
      for (int64_t it = 0; it < items; ++it) {
        const int64_t img = it / tiles, t = it % tiles;
        const int64_t b = img / s.groups, grp = img % s.groups;
        const int64_t j0 = t * tile, j1 = std::min(p_n, j0 + tile);
        const T* xg = x + (b * s.c + grp * s.cg) * s.in_size;
        const T* wg = w + grp * s.mg * kt;
        T* yg = y + (b * s.m + grp * s.mg) * p_n + j0;
        if (pointwise) {
          gemmSerial(false, false, s.mg, j1 - j0, kt, T(1), wg, kt, xg + j0, s.in_size, T(0), yg, p_n);
        } else {
          im2colTile(xg, s.cg, g, lo, hi, j0, j1, buf.get());
          gemmSerial(false, false, s.mg, j1 - j0, kt, T(1), wg, kt, buf.get(), j1 - j0, T(0), yg, p_n);
        }
        if (bias) addBias(yg, s.mg, j1 - j0, p_n, bias + grp * s.mg);
      }
    }
    return;
  }

  // Few, small images: lower each whole image once, split the GEMM by output channels.
  std::unique_ptr<T[]> col(pointwise ? nullptr : new T[size_t(kt * p_n)]);
  for (int64_t img = 0; img < images; ++img) {
    const int64_t b = img / s.groups, grp = img % s.groups;
    const T* xg = x + (b * s.c + grp * s.cg) * s.in_size;
    const T* wg = w + grp * s.mg * kt;
    T* yg = y + (b * s.m + grp * s.mg) * p_n;
    const T* src = xg;
    int64_t ldb = s.in_size;
    if (!pointwise) {
#pragma omp parallel for schedule(static) if (s.cg > 1 && kt * p_n > 65536)
      for (int64_t ci = 0; ci < s.cg; ++ci)
        im2colTile(xg + ci * s.in_size, 1, g, lo, hi, 0, p_n, col.get() + ci * s.ksize * p_n);
      src = col.get();
      ldb = p_n;
    }
    gemmParallel(false, false, s.mg, p_n, kt, T(1), wg, kt, src, ldb, T(0), yg, p_n);
    if (bias) addBias(yg, s.mg, p_n, p_n, bias + grp * s.mg);
  }
}

void runConv(KernelContext& c) {
  if (elementwise::anyHalfLike(c)) return elementwise::runThroughFloat(c, runConv);
  const ir::Tensor& x = c.inputs[0];
  const ir::Tensor& w = c.inputs[1];
  const ir::Tensor* b = c.hasInput(2) ? &c.inputs[2] : nullptr;
  if (w.dtype != x.dtype || (b && b->dtype != x.dtype)) c.fail("inputs must share one dtype");
  ConvShape s = convShape(c, x, w);
  if (b && b->numel() != s.m) c.fail("bias must have one value per output channel");
  switch (x.dtype) {
    case ir::DType::kFloat32:
      convForward(s, x.as<const float>(), w.as<const float>(), b ? b->as<const float>() : nullptr,
                  c.outputs[0].as<float>());
      break;
    case ir::DType::kFloat64:
      convForward(s, x.as<const double>(), w.as<const double>(), b ? b->as<const double>() : nullptr,
                  c.outputs[0].as<double>());
      break;
    default:
      unsupportedNode(c.node, "dtype " + std::string(ir::dtypeName(x.dtype)) + " is not supported");
  }
}

// ---- ConvTranspose ---------------------------------------------------------------

void inferConvTranspose(InferContext& c) {
  const ir::TensorType& x = c.input(0);
  const ir::TensorType& w = c.input(1);
  checkFloat(c, x.dtype);
  if (!x.has_rank && !w.has_rank) {
    c.outputs[0] = ir::TensorType::unranked(x.dtype);
    return;
  }
  const size_t rank = x.has_rank ? x.rank() : w.rank();
  if (rank < 3) c.fail("input must have rank >= 3");
  if (x.has_rank && w.has_rank && w.rank() != x.rank()) c.fail("weights do not match the input rank");
  const size_t nd = rank - 2;
  std::vector<int64_t> dk(nd, -1);
  if (w.has_rank)
    for (size_t i = 0; i < nd; ++i) dk[i] = w.dims[i + 2].isKnown() ? w.dims[i + 2].value : -1;
  Window win = readWindow(c.node, nd, dk);
  const int64_t groups = c.attrs().getInt("group", 1);
  if (groups < 1) c.fail("group must be >= 1");
  if (x.has_rank && w.has_rank && x.dims[1].isKnown() && w.dims[0].isKnown() &&
      x.dims[1].value != w.dims[0].value)
    c.fail("input channels do not match weights " + w.str());
  ir::Dim m = (w.has_rank && w.dims[1].isKnown()) ? ir::Dim::known(mulDims(c, w.dims[1].value, groups)) : ir::Dim{};
  std::vector<int64_t> in = x.has_rank ? spatialDims(x) : std::vector<int64_t>(nd, -1);
  c.outputs[0] = makeType(x.dtype, x.has_rank ? x.dims[0] : ir::Dim{}, m, resolveTransposedWindow(c.node, win, in));
}

// Adds the col2im of `col` (rows m-major then kernel offsets, columns input positions)
// into the planes of output channels [m0, m1).
template <typename T>
void col2imChannel(const T* col, const Geometry3& g, int64_t ksize, const std::vector<int64_t>& lo,
                   const std::vector<int64_t>& hi, int64_t m, T* y) {
  const int64_t in_size = g.in[0] * g.in[1] * g.in[2];
  const T* row = col + m * ksize * in_size;
  for (int64_t kd = 0; kd < g.k[0]; ++kd)
    for (int64_t kh = 0; kh < g.k[1]; ++kh)
      for (int64_t kw = 0; kw < g.k[2]; ++kw, row += in_size) {
        const int64_t a = lo[size_t(kw)], b = hi[size_t(kw)];
        const int64_t woff = kw * g.d[2] - g.pb[2];
        for (int64_t id = 0; id < g.in[0]; ++id) {
          const int64_t od = id * g.s[0] - g.pb[0] + kd * g.d[0];
          if (od < 0 || od >= g.out[0]) continue;
          for (int64_t ih = 0; ih < g.in[1]; ++ih) {
            const int64_t oh = ih * g.s[1] - g.pb[1] + kh * g.d[1];
            if (oh < 0 || oh >= g.out[1]) continue;
            const T* src = row + (id * g.in[1] + ih) * g.in[2];
            T* dst = y + (od * g.out[1] + oh) * g.out[2] + woff;  // indexed by iw * s
            if (g.s[2] == 1) {
              for (int64_t iw = a; iw < b; ++iw) dst[iw] += src[iw];
            } else {
              for (int64_t iw = a; iw < b; ++iw) dst[iw * g.s[2]] += src[iw];
            }
          }
        }
      }
}

template <typename T>
void runConvTransposeTyped(KernelContext& c, const ConvShape& s) {
  const T* x = c.inputs[0].as<const T>();
  const T* w = c.inputs[1].as<const T>();
  const T* bias = c.hasInput(2) ? c.inputs[2].as<const T>() : nullptr;
  T* y = c.outputs[0].as<T>();
  const Geometry3& g = s.g;
  if (s.n == 0 || s.out_size == 0) return;
  // Here cg = input channels per group, mg = output channels per group.
  std::vector<int64_t> lo(static_cast<size_t>(g.k[2])), hi(static_cast<size_t>(g.k[2]));
  for (int64_t kw = 0; kw < g.k[2]; ++kw) {
    // Input positions iw whose output iw * s + off lands inside [0, out).
    validRange(kw * g.d[2] - g.pb[2], g.s[2], g.out[2], g.in[2], lo[size_t(kw)], hi[size_t(kw)]);
  }
  const int64_t rows = s.mg * s.ksize;
  std::vector<T> col(static_cast<size_t>(rows * s.in_size));
  for (int64_t b = 0; b < s.n; ++b) {
    for (int64_t grp = 0; grp < s.groups; ++grp) {
      const T* xg = x + (b * s.c + grp * s.cg) * s.in_size;
      const T* wg = w + grp * s.cg * rows;
      T* yg = y + (b * s.m + grp * s.mg) * s.out_size;
      if (s.cg > 0 && s.in_size > 0)
        gemmParallel(true, false, rows, s.in_size, s.cg, T(1), wg, rows, xg, s.in_size, T(0), col.data(),
                     s.in_size);
      else
        std::fill(col.begin(), col.end(), T(0));
#pragma omp parallel for schedule(static) if (s.mg > 1 && rows * s.in_size > 32768)
      for (int64_t m = 0; m < s.mg; ++m) {
        T* ym = yg + m * s.out_size;
        std::fill(ym, ym + s.out_size, bias ? bias[grp * s.mg + m] : T(0));
        col2imChannel(col.data(), g, s.ksize, lo, hi, m, ym);
      }
    }
  }
}

void runConvTranspose(KernelContext& c) {
  if (elementwise::anyHalfLike(c)) return elementwise::runThroughFloat(c, runConvTranspose);
  const ir::Tensor& x = c.inputs[0];
  const ir::Tensor& w = c.inputs[1];
  if (x.rank() < 3) c.fail("input must have rank >= 3");
  if (w.rank() != x.rank())
    c.fail("weights " + ir::shapeStr(w.shape) + " do not match input " + ir::shapeStr(x.shape));
  if (w.dtype != x.dtype || (c.hasInput(2) && c.inputs[2].dtype != x.dtype))
    c.fail("inputs must share one dtype");
  const size_t nd = x.rank() - 2;
  if (nd > 3) unsupportedNode(c.node, "only 1, 2 or 3 spatial dimensions are supported");
  std::vector<int64_t> wk(w.shape.begin() + 2, w.shape.end());
  Window win = readWindow(c.node, nd, wk);
  if (win.kernel != wk) c.fail("kernel_shape does not match the weights " + ir::shapeStr(w.shape));
  std::vector<int64_t> in(x.shape.begin() + 2, x.shape.end());
  std::vector<int64_t> out = resolveTransposedWindow(c.node, win, in);
  ConvShape s;
  s.nd = nd;
  s.n = x.shape[0];
  s.c = x.shape[1];
  s.groups = c.attrs().getInt("group", 1);
  if (s.groups < 1 || s.c % s.groups != 0 || w.shape[0] != s.c)
    c.fail("channels do not match: input " + ir::shapeStr(x.shape) + ", weights " + ir::shapeStr(w.shape));
  s.m = w.shape[1] * s.groups;
  if (c.hasInput(2) && c.inputs[2].numel() != s.m) c.fail("bias must have one value per output channel");
  s.cg = s.c / s.groups;
  s.mg = w.shape[1];
  s.ksize = ir::shapeNumel(wk);
  s.in_size = ir::shapeNumel(in);
  s.out_size = ir::shapeNumel(out);
  s.g = toGeometry3(win, in, out);
  std::vector<int64_t> want{s.n, s.m};
  want.insert(want.end(), out.begin(), out.end());
  if (c.outputs[0].shape != want)
    c.fail("output shape " + ir::shapeStr(c.outputs[0].shape) + " != " + ir::shapeStr(want));
  switch (x.dtype) {
    case ir::DType::kFloat32:
      runConvTransposeTyped<float>(c, s);
      break;
    case ir::DType::kFloat64:
      runConvTransposeTyped<double>(c, s);
      break;
    default:
      unsupportedNode(c.node, "dtype " + std::string(ir::dtypeName(x.dtype)) + " is not supported");
  }
}

}  // namespace

ir::TensorType inferConvOutput(InferContext& c, const ir::TensorType& x, const ir::TensorType& w) {
  if (!x.has_rank && !w.has_rank) return ir::TensorType::unranked(x.dtype);
  const size_t rank = x.has_rank ? x.rank() : w.rank();
  if (rank < 3) c.fail("input must have rank >= 3, got " + x.str());
  if (x.has_rank && w.has_rank && w.rank() != x.rank())
    c.fail("weights " + w.str() + " do not match the input rank of " + x.str());
  const size_t nd = rank - 2;
  std::vector<int64_t> dk(nd, -1);
  if (w.has_rank)
    for (size_t i = 0; i < nd; ++i) dk[i] = w.dims[i + 2].isKnown() ? w.dims[i + 2].value : -1;
  Window win = readWindow(c.node, nd, dk);
  const int64_t groups = c.attrs().getInt("group", 1);
  if (groups < 1) c.fail("group must be >= 1");
  ir::Dim m = w.has_rank ? w.dims[0] : ir::Dim{};
  if (m.isKnown() && m.value % groups != 0) c.fail("output channels are not divisible by group");
  if (x.has_rank && w.has_rank && x.dims[1].isKnown() && w.dims[1].isKnown() &&
      (x.dims[1].value % groups != 0 || x.dims[1].value / groups != w.dims[1].value))
    c.fail("input channels " + std::to_string(x.dims[1].value) + " do not match weights " + w.str() +
           " with group " + std::to_string(groups));
  std::vector<int64_t> in = x.has_rank ? spatialDims(x) : std::vector<int64_t>(nd, -1);
  std::vector<int64_t> out = resolveWindow(c.node, win, in);
  return makeType(x.dtype, x.has_rank ? x.dims[0] : ir::Dim{}, m, out);
}

ConvShape convShape(KernelContext& c, const ir::Tensor& x, const ir::Tensor& w) {
  if (x.rank() < 3) c.fail("input must have rank >= 3");
  if (w.rank() != x.rank())
    c.fail("weights " + ir::shapeStr(w.shape) + " do not match input " + ir::shapeStr(x.shape));
  const size_t nd = x.rank() - 2;
  if (nd > 3) unsupportedNode(c.node, "only 1, 2 or 3 spatial dimensions are supported");
  std::vector<int64_t> wk(w.shape.begin() + 2, w.shape.end());
  Window win = readWindow(c.node, nd, wk);
  if (win.kernel != wk) c.fail("kernel_shape does not match the weights " + ir::shapeStr(w.shape));
  std::vector<int64_t> in(x.shape.begin() + 2, x.shape.end());
  std::vector<int64_t> out = resolveWindow(c.node, win, in);
  ConvShape s;
  s.nd = nd;
  s.n = x.shape[0];
  s.c = x.shape[1];
  s.m = w.shape[0];
  s.groups = c.attrs().getInt("group", 1);
  if (s.groups < 1 || s.c % s.groups != 0 || s.m % s.groups != 0 || w.shape[1] != s.c / s.groups)
    c.fail("channels do not match: input " + ir::shapeStr(x.shape) + ", weights " + ir::shapeStr(w.shape) +
           ", group " + std::to_string(s.groups));
  s.cg = s.c / s.groups;
  s.mg = s.m / s.groups;
  s.ksize = ir::shapeNumel(wk);
  s.in_size = ir::shapeNumel(in);
  s.out_size = ir::shapeNumel(out);
  s.g = toGeometry3(win, in, out);
  std::vector<int64_t> want{s.n, s.m};
  want.insert(want.end(), out.begin(), out.end());
  if (c.outputs[0].shape != want)
    c.fail("output shape " + ir::shapeStr(c.outputs[0].shape) + " != " + ir::shapeStr(want));
  return s;
}

void convForward(const ConvShape& s, const float* x, const float* w, const float* bias, float* y) {
  convForwardTyped(s, x, w, bias, y);
}
void convForward(const ConvShape& s, const double* x, const double* w, const double* bias, double* y) {
  convForwardTyped(s, x, w, bias, y);
}

void registerConvOps(OpRegistry& r) {
  r.add("Conv", {inferConv, runConv});
  r.add("ConvTranspose", {inferConvTranspose, runConvTranspose});
}

}  // namespace partita::kernels
