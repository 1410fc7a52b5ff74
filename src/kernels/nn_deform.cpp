// Col2Im (opset 18): sums sliding blocks [N, C * prod(block), L] back into an image
// [N, C, image...] (the inverse of im2col, overlaps added), any number of spatial
// dims. DeformConv (opset 19): 2-D convolution whose taps sit at learnt offsets from
// the regular grid (sampled bilinearly, zero outside) and are weighted by an optional
// mask. Both compute in double.
#include <cmath>
#include <vector>

#include "kernels/float_io.h"
#include "kernels/nn_ops.h"
#include "kernels/nn_window.h"
#include "kernels/op_util.h"

namespace partita::kernels {

namespace {

// ---- Col2Im -----------------------------------------------------------------------

struct Col2ImGeometry {
  std::vector<int64_t> image, block, dil, pads, strides, blocks;  // blocks: per dim count
  int64_t block_size = 1, block_count = 1;
};

template <typename Ctx>
Col2ImGeometry col2imGeometry(const Ctx& c, const std::vector<int64_t>& image, const std::vector<int64_t>& block) {
  Col2ImGeometry g;
  const size_t nd = image.size();
  if (nd == 0 || block.size() != nd) c.fail("image_shape and block_shape must have the same, non-zero length");
  g.image = image;
  g.block = block;
  g.dil = c.attrs().getInts("dilations", std::vector<int64_t>(nd, 1));
  g.pads = c.attrs().getInts("pads", std::vector<int64_t>(2 * nd, 0));
  g.strides = c.attrs().getInts("strides", std::vector<int64_t>(nd, 1));
  if (g.dil.size() != nd || g.pads.size() != 2 * nd || g.strides.size() != nd)
    c.fail("dilations, pads and strides must match the " + std::to_string(nd) + " spatial dims");
  for (size_t i = 0; i < nd; ++i) {
    if (image[i] < 1 || block[i] < 1 || g.dil[i] < 1 || g.strides[i] < 1 || g.pads[i] < 0 || g.pads[nd + i] < 0)
      c.fail("image_shape, block_shape, dilations and strides must be positive, pads non-negative");
    const int64_t span = addDims(c, mulDims(c, g.dil[i], block[i] - 1), 1);
    const int64_t padded = addDims(c, addDims(c, image[i], g.pads[i]), g.pads[nd + i]);
    if (padded < span) c.fail("a block is larger than the padded image");
    g.blocks.push_back((padded - span) / g.strides[i] + 1);
    g.block_size = mulDims(c, g.block_size, block[i]);
    g.block_count = mulDims(c, g.block_count, g.blocks.back());
  }
  return g;
}

void inferCol2Im(InferContext& c) {
  checkArity(c, 3, 3);
  fio::requireIndex(c, 1, "image_shape");
  fio::requireIndex(c, 2, "block_shape");
  const ir::TensorType& x = c.input(0);
  if (x.has_rank && x.rank() != 3) c.fail("input must be [N, C * prod(block_shape), L], got " + x.str());
  const ir::Tensor* image = c.value(1);
  const ir::Tensor* block = c.value(2);
  if (!image || !block) {
    c.outputs[0] = ir::TensorType::unranked(x.dtype);
    return;
  }
  Col2ImGeometry g = col2imGeometry(c, readInts(*image), readInts(*block));
  ir::Dim ch{};
  if (x.has_rank && x.dims[1].isKnown()) {
    if (x.dims[1].value % g.block_size != 0)
      c.fail("dimension 1 (" + std::to_string(x.dims[1].value) + ") is not a multiple of the block size " +
             std::to_string(g.block_size));
    ch = ir::Dim::known(x.dims[1].value / g.block_size);
  }
  if (x.has_rank && x.dims[2].isKnown() && x.dims[2].value != g.block_count)
    c.fail("dimension 2 (" + std::to_string(x.dims[2].value) + ") is not the number of blocks " +
           std::to_string(g.block_count));
  ir::TensorType out{x.dtype, true, {x.has_rank ? x.dims[0] : ir::Dim{}, ch}};
  for (int64_t d : g.image) out.dims.push_back(ir::Dim::known(d));
  c.outputs[0] = out;
}

void runCol2Im(KernelContext& c) {
  const ir::Tensor& x = c.inputs[0];
  Col2ImGeometry g = col2imGeometry(c, readInts(c.inputs[1]), readInts(c.inputs[2]));
  const size_t nd = g.image.size();
  const int64_t n = x.shape[0], ch = x.shape[1] / g.block_size;
  if (x.shape[1] % g.block_size != 0 || x.shape[2] != g.block_count) c.fail("input does not match the blocks");
  int64_t image_size = 1;
  for (int64_t d : g.image) image_size *= d;
  std::vector<double> in = fio::read(c, x, "input"), out(size_t(n * ch * image_size), 0.0);
  std::vector<int64_t> k(nd), b(nd);
  for (int64_t s = 0; s < n; ++s)
    for (int64_t cc = 0; cc < ch; ++cc)
      for (int64_t kk = 0; kk < g.block_size; ++kk) {
        int64_t rest = kk;
        for (size_t i = nd; i-- > 0;) k[i] = rest % g.block[i], rest /= g.block[i];
        const double* row = in.data() + ((s * ch + cc) * g.block_size + kk) * g.block_count;
        double* img = out.data() + (s * ch + cc) * image_size;
        for (int64_t l = 0; l < g.block_count; ++l) {
          rest = l;
          int64_t at = 0;
          bool inside = true;
          for (size_t i = nd; i-- > 0;) {
            b[i] = rest % g.blocks[i];
            rest /= g.blocks[i];
          }
          for (size_t i = 0; i < nd && inside; ++i) {
            const int64_t p = b[i] * g.strides[i] - g.pads[i] + k[i] * g.dil[i];
            if (p < 0 || p >= g.image[i]) inside = false;
            at = at * g.image[i] + p;
          }
          if (inside) img[at] += row[l];
        }
      }
  fio::write(c, c.outputs[0], out);
}

// ---- DeformConv -------------------------------------------------------------------

struct DeformGeometry {
  int64_t kh = 0, kw = 0, sh = 1, sw = 1, dh = 1, dw = 1, pt = 0, pl = 0, pb = 0, pr = 0;
  int64_t group = 1, offset_group = 1;
};

template <typename Ctx>
DeformGeometry deformGeometry(const Ctx& c, int64_t wkh, int64_t wkw) {
  DeformGeometry g;
  std::vector<int64_t> k = c.attrs().getInts("kernel_shape", {wkh, wkw});
  std::vector<int64_t> s = c.attrs().getInts("strides", {1, 1}), d = c.attrs().getInts("dilations", {1, 1});
  std::vector<int64_t> p = c.attrs().getInts("pads", {0, 0, 0, 0});
  if (k.size() != 2 || s.size() != 2 || d.size() != 2 || p.size() != 4)
    c.fail("only 2-D deformable convolution is supported");
  g.kh = k[0], g.kw = k[1], g.sh = s[0], g.sw = s[1], g.dh = d[0], g.dw = d[1];
  g.pt = p[0], g.pl = p[1], g.pb = p[2], g.pr = p[3];
  g.group = c.attrs().getInt("group", 1);
  g.offset_group = c.attrs().getInt("offset_group", 1);
  if (g.kh < 1 || g.kw < 1 || g.sh < 1 || g.sw < 1 || g.dh < 1 || g.dw < 1 || g.group < 1 || g.offset_group < 1 ||
      g.pt < 0 || g.pl < 0 || g.pb < 0 || g.pr < 0)
    c.fail("kernel_shape, strides, dilations, group and offset_group must be positive, pads non-negative");
  if ((wkh >= 0 && wkh != g.kh) || (wkw >= 0 && wkw != g.kw)) c.fail("kernel_shape does not match W");
  return g;
}

int64_t deformOut(int64_t in, int64_t k, int64_t s, int64_t d, int64_t p0, int64_t p1) {
  return (in + p0 + p1 - ((k - 1) * d + 1)) / s + 1;
}

void inferDeformConv(InferContext& c) {
  checkArity(c, 3, 5);
  for (size_t i : {0, 1, 2, 3, 4}) fio::requireFloat(c, i, "input " + std::to_string(i));
  const ir::TensorType &x = c.input(0), &w = c.input(1);
  if (x.has_rank && x.rank() != 4) unsupportedNode(c.node, "only 2-D deformable convolution is supported");
  if (w.has_rank && w.rank() != 4) c.fail("W must be [M, C/group, kH, kW], got " + w.str());
  auto known = [](const ir::TensorType& t, size_t i) {
    return t.has_rank && t.dims[i].isKnown() ? t.dims[i].value : int64_t(-1);
  };
  DeformGeometry g = deformGeometry(c, known(w, 2), known(w, 3));
  if (known(x, 1) >= 0 && known(w, 1) >= 0 && known(x, 1) != known(w, 1) * g.group)
    c.fail("X's channels " + std::to_string(known(x, 1)) + " are not W's " + std::to_string(known(w, 1)) +
           " times group " + std::to_string(g.group));
  ir::Dim oh{}, ow{};
  if (known(x, 2) >= 0) {
    const int64_t v = deformOut(known(x, 2), g.kh, g.sh, g.dh, g.pt, g.pb);
    if (v < 1) c.fail("the kernel does not fit the padded input");
    oh = ir::Dim::known(v);
  }
  if (known(x, 3) >= 0) {
    const int64_t v = deformOut(known(x, 3), g.kw, g.sw, g.dw, g.pl, g.pr);
    if (v < 1) c.fail("the kernel does not fit the padded input");
    ow = ir::Dim::known(v);
  }
  c.outputs[0] = ir::TensorType{x.dtype, true, {x.has_rank ? x.dims[0] : ir::Dim{}, w.has_rank ? w.dims[0] : ir::Dim{}, oh, ow}};
}

void runDeformConv(KernelContext& c) {
  const ir::Tensor &xt = c.inputs[0], &wt = c.inputs[1], &ot = c.inputs[2];
  if (xt.rank() != 4 || wt.rank() != 4) c.fail("X and W must be 4-D");
  DeformGeometry g = deformGeometry(c, wt.shape[2], wt.shape[3]);
  const int64_t n = xt.shape[0], ic = xt.shape[1], ih = xt.shape[2], iw = xt.shape[3];
  const int64_t oc = wt.shape[0], icg = wt.shape[1];
  const int64_t oh = deformOut(ih, g.kh, g.sh, g.dh, g.pt, g.pb), ow = deformOut(iw, g.kw, g.sw, g.dw, g.pl, g.pr);
  if (ic != icg * g.group || oc % g.group != 0 || ic % g.offset_group != 0)
    c.fail("channels do not divide into group / offset_group");
  const int64_t taps = g.kh * g.kw;
  if (ot.shape != std::vector<int64_t>{n, g.offset_group * taps * 2, oh, ow})
    c.fail("offset must be " + ir::shapeStr({n, g.offset_group * taps * 2, oh, ow}) + ", got " + ir::shapeStr(ot.shape));
  std::vector<double> x = fio::read(c, xt, "X"), w = fio::read(c, wt, "W"), off = fio::read(c, ot, "offset");
  std::vector<double> bias, mask;
  if (c.hasInput(3)) {
    bias = fio::read(c, c.inputs[3], "B");
    if (int64_t(bias.size()) != oc) c.fail("B must have one value per output channel");
  }
  if (c.hasInput(4)) {
    mask = fio::read(c, c.inputs[4], "mask");
    if (int64_t(mask.size()) != n * g.offset_group * taps * oh * ow) c.fail("mask does not match the offsets");
  }
  const int64_t ocg = oc / g.group, ic_per_og = ic / g.offset_group;
  // Sampled input values per (batch, input channel, tap, output position), then a GEMM-like sum.
  std::vector<double> cols(size_t(ic * taps * oh * ow));
  std::vector<double> out(size_t(n * oc * oh * ow));
  auto sample = [&](const double* plane, double y, double xx) {
    if (!(y > -2.0 && y < double(ih) + 1 && xx > -2.0 && xx < double(iw) + 1)) return 0.0;  // and NaN
    const double fy = std::floor(y), fx = std::floor(xx);
    const int64_t y0 = int64_t(fy), x0 = int64_t(fx);
    const double ly = y - fy, lx = xx - fx;
    double v = 0;
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 2; ++b) {
        const int64_t yy = y0 + a, xc = x0 + b;
        if (yy < 0 || yy >= ih || xc < 0 || xc >= iw) continue;
        v += (a ? ly : 1 - ly) * (b ? lx : 1 - lx) * plane[yy * iw + xc];
      }
    return v;
  };
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t ci = 0; ci < ic; ++ci) {
      const int64_t og = ci / ic_per_og;
      const double* plane = x.data() + (b * ic + ci) * ih * iw;
      for (int64_t t = 0; t < taps; ++t) {
        const int64_t ky = t / g.kw, kx = t % g.kw;
        const double* oy = off.data() + ((b * g.offset_group + og) * taps * 2 + t * 2) * oh * ow;
        const double* ox = oy + oh * ow;
        const double* m = mask.empty() ? nullptr : mask.data() + ((b * g.offset_group + og) * taps + t) * oh * ow;
        double* col = cols.data() + (ci * taps + t) * oh * ow;
        for (int64_t i = 0; i < oh; ++i)
          for (int64_t j = 0; j < ow; ++j) {
            const int64_t p = i * ow + j;
            const double y = double(i * g.sh - g.pt + ky * g.dh) + oy[p];
            const double xx = double(j * g.sw - g.pl + kx * g.dw) + ox[p];
            col[p] = sample(plane, y, xx) * (m ? m[p] : 1.0);
          }
      }
    }
    for (int64_t o = 0; o < oc; ++o) {
      const int64_t grp = o / ocg;
      double* dst = out.data() + (b * oc + o) * oh * ow;
      for (int64_t p = 0; p < oh * ow; ++p) dst[p] = bias.empty() ? 0.0 : bias[size_t(o)];
      for (int64_t k = 0; k < icg; ++k) {
        const int64_t ci = grp * icg + k;
        for (int64_t t = 0; t < taps; ++t) {
          const double wv = w[size_t((o * icg + k) * taps + t)];
          const double* col = cols.data() + (ci * taps + t) * oh * ow;
          for (int64_t p = 0; p < oh * ow; ++p) dst[p] += wv * col[p];
        }
      }
    }
  }
  fio::write(c, c.outputs[0], out);
}

}  // namespace

void registerDeformOps(OpRegistry& r) {
  r.add("Col2Im", {inferCol2Im, runCol2Im, 18});
  r.add("DeformConv", {inferDeformConv, runDeformConv, 19});
}

}  // namespace partita::kernels
