// Signal processing: HannWindow, HammingWindow, BlackmanWindow, MelWeightMatrix (opset
// 17), DFT (17; 20 moved `axis` to an input) and STFT (17). Complex values are a last
// dimension of 2 (real, imaginary), a real signal a last dimension of 1. Computed in
// double: a radix-2 FFT for power-of-two lengths, otherwise a direct O(n^2) sum over a
// table of twiddles.
#include <cmath>
#include <optional>
#include <utility>
#include <vector>

#include "kernels/float_io.h"
#include "kernels/op_util.h"
#include "kernels/nn_ops.h"

namespace partita::kernels {

namespace {

constexpr double kPi = 3.14159265358979323846;

ir::DType outputDatatype(const InferContext& c, int64_t def) {
  const int64_t t = c.attrs().getInt("output_datatype", def);
  ir::DType d = ir::dtypeFromOnnx(t);
  if (!fio::isFloatType(d) && !(d == ir::DType::kInt32 || d == ir::DType::kInt64 || d == ir::DType::kInt8 ||
                                d == ir::DType::kUInt8 || d == ir::DType::kInt16 || d == ir::DType::kUInt16 ||
                                d == ir::DType::kUInt32 || d == ir::DType::kUInt64))
    c.fail("output_datatype " + std::to_string(t) + " is not a numeric type partita supports");
  return d;
}

// A scalar integer input's value when known.
template <typename Ctx>
std::optional<int64_t> scalarInt(const Ctx& c, const ir::Tensor* v, const std::string& what) {
  if (!v) return std::nullopt;
  if (v->dtype != ir::DType::kInt32 && v->dtype != ir::DType::kInt64)
    c.fail(what + " must be int32 or int64, got " + std::string(ir::dtypeName(v->dtype)));
  if (v->numel() != 1) c.fail(what + " must be a scalar, got " + ir::shapeStr(v->shape));
  return readInts(*v)[0];
}

// ---- windows ----------------------------------------------------------------------

void inferWindow(InferContext& c) {
  checkArity(c, 1, 1);
  ir::DType d = outputDatatype(c, 1);
  std::optional<int64_t> size = scalarInt(c, c.value(0), "size");
  if (size && *size < 0) c.fail("size is negative (" + std::to_string(*size) + ")");
  c.outputs[0] = ir::TensorType{d, true, {size ? ir::Dim::known(*size) : ir::Dim{}}};
}

enum class WindowKind { kHann, kHamming, kBlackman };

template <WindowKind kKind>
void runWindow(KernelContext& c) {
  const int64_t size = *scalarInt(c, &c.inputs[0], "size");
  const bool periodic = c.attrs().getInt("periodic", 1) != 0;
  const double n1 = double(periodic ? size : size - 1);
  const ir::Tensor& y = c.outputs[0];
  for (int64_t i = 0; i < size; ++i) {
    const double a = n1 > 0 ? 2 * kPi * double(i) / n1 : 0;
    double v = 0;
    if constexpr (kKind == WindowKind::kHann) v = 0.5 - 0.5 * std::cos(a);
    if constexpr (kKind == WindowKind::kHamming) v = 25.0 / 46.0 - (21.0 / 46.0) * std::cos(a);
    if constexpr (kKind == WindowKind::kBlackman) v = 0.42 - 0.5 * std::cos(a) + 0.08 * std::cos(2 * a);
    fio::set(y, i, v);
  }
}

// ---- MelWeightMatrix --------------------------------------------------------------

void inferMel(InferContext& c) {
  checkArity(c, 5, 5);
  ir::DType d = outputDatatype(c, 1);
  std::optional<int64_t> bins = scalarInt(c, c.value(0), "num_mel_bins");
  std::optional<int64_t> dft = scalarInt(c, c.value(1), "dft_length");
  if (bins && *bins < 1) c.fail("num_mel_bins must be positive");
  if (dft && *dft < 1) c.fail("dft_length must be positive");
  c.outputs[0] = ir::TensorType{
      d, true, {dft ? ir::Dim::known(*dft / 2 + 1) : ir::Dim{}, bins ? ir::Dim::known(*bins) : ir::Dim{}}};
}

void runMel(KernelContext& c) {
  const int64_t bins = *scalarInt(c, &c.inputs[0], "num_mel_bins");
  const int64_t dft = *scalarInt(c, &c.inputs[1], "dft_length");
  const int64_t rate = *scalarInt(c, &c.inputs[2], "sample_rate");
  if (rate <= 0) c.fail("sample_rate must be positive");
  const double lo = fio::read(c, c.inputs[3], "lower_edge_hertz", true).at(0);
  const double hi = fio::read(c, c.inputs[4], "upper_edge_hertz", true).at(0);
  const int64_t spec_bins = dft / 2 + 1;
  // Edges evenly spaced in mel, mapped back to hertz and to DFT bins (as ONNX's
  // reference does: the bin of f is floor((dft_length + 1) f / sample_rate)).
  const double lo_mel = 2595 * std::log10(1 + lo / 700), hi_mel = 2595 * std::log10(1 + hi / 700);
  const double step = (hi_mel - lo_mel) / double(bins + 2);
  std::vector<int64_t> edge(size_t(bins + 2));
  for (int64_t i = 0; i < bins + 2; ++i) {
    const double hz = 700 * (std::pow(10.0, (double(i) * step + lo_mel) / 2595) - 1);
    edge[size_t(i)] = int64_t(std::floor(double(dft + 1) * hz / double(rate)));
  }
  std::vector<double> out(size_t(spec_bins * bins), 0.0);
  auto at = [&](int64_t row, int64_t col) -> double& {
    if (row < 0 || row >= spec_bins)
      c.fail("a mel band edge falls outside the " + std::to_string(spec_bins) + " spectrogram bins");
    return out[size_t(row * bins + col)];
  };
  for (int64_t i = 0; i < bins; ++i) {
    const int64_t left = edge[size_t(i)], center = edge[size_t(i + 1)], right = edge[size_t(i + 2)];
    if (center == left) {
      at(center, i) = 1;
    } else {
      for (int64_t j = left; j <= center; ++j) at(j, i) = double(j - left) / double(center - left);
    }
    for (int64_t j = center; j < right; ++j) at(j, i) = double(right - j) / double(right - center);
  }
  fio::write(c, c.outputs[0], out);
}

// ---- DFT --------------------------------------------------------------------------

// One transform of length n over `in` (complex, length m <= n, zero-padded), writing
// `out_len` bins: X[k] = sum_j x[j] e^{-+2 pi i jk/n}.
struct Transform {
  int64_t n = 0;
  bool inverse = false;
  std::vector<double> cos_table, sin_table;
  Transform(int64_t n_, bool inv) : n(n_), inverse(inv), cos_table(static_cast<size_t>(n_)), sin_table(static_cast<size_t>(n_)) {
    for (int64_t i = 0; i < n; ++i) {
      const double a = 2 * kPi * double(i) / double(n);
      cos_table[size_t(i)] = std::cos(a);
      sin_table[size_t(i)] = std::sin(a);
    }
  }
  void run(const std::vector<double>& re, const std::vector<double>& im, int64_t m, int64_t out_len,
           std::vector<double>& out_re, std::vector<double>& out_im) const {
    const double sign = inverse ? 1.0 : -1.0;
    if (n >= 2 && (n & (n - 1)) == 0) {
      fft(re, im, m, out_len, out_re, out_im, sign);
      return;
    }
    for (int64_t k = 0; k < out_len; ++k) {
      double sr = 0, si = 0;
      for (int64_t j = 0; j < m; ++j) {
        const size_t t = size_t((j * k) % n);
        const double cr = cos_table[t], ci = sign * sin_table[t];
        sr += re[size_t(j)] * cr - im[size_t(j)] * ci;
        si += re[size_t(j)] * ci + im[size_t(j)] * cr;
      }
      if (inverse) {
        sr /= double(n);
        si /= double(n);
      }
      out_re[size_t(k)] = sr;
      out_im[size_t(k)] = si;
    }
  }
  // A power-of-two length: iterative radix-2 Cooley-Tukey, O(n log n).
  void fft(const std::vector<double>& re, const std::vector<double>& im, int64_t m, int64_t out_len,
           std::vector<double>& out_re, std::vector<double>& out_im, double sign) const {
    std::vector<double> ar(static_cast<size_t>(n), 0.0), ai(static_cast<size_t>(n), 0.0);
    for (int64_t j = 0; j < m; ++j) ar[size_t(j)] = re[size_t(j)], ai[size_t(j)] = im[size_t(j)];
    for (int64_t i = 1, j = 0; i < n; ++i) {  // bit-reversed order
      int64_t bit = n >> 1;
      for (; j & bit; bit >>= 1) j ^= bit;
      j ^= bit;
      if (i < j) {
        std::swap(ar[size_t(i)], ar[size_t(j)]);
        std::swap(ai[size_t(i)], ai[size_t(j)]);
      }
    }
    for (int64_t len = 2; len <= n; len <<= 1) {
      const int64_t half = len / 2, step = n / len;
      for (int64_t i = 0; i < n; i += len)
        for (int64_t k = 0; k < half; ++k) {
          const double wr = cos_table[size_t(k * step)], wi = sign * sin_table[size_t(k * step)];
          const size_t a = size_t(i + k), b = size_t(i + k + half);
          const double vr = ar[b] * wr - ai[b] * wi, vi = ar[b] * wi + ai[b] * wr;
          ar[b] = ar[a] - vr;
          ai[b] = ai[a] - vi;
          ar[a] += vr;
          ai[a] += vi;
        }
    }
    const double scale = inverse ? 1.0 / double(n) : 1.0;
    for (int64_t k = 0; k < out_len; ++k) {
      out_re[size_t(k)] = ar[size_t(k)] * scale;
      out_im[size_t(k)] = ai[size_t(k)] * scale;
    }
  }
};

struct DftSpec {
  int64_t axis = 1;  // normalised, never the last (complex) dimension
  std::optional<int64_t> length;
  bool known = true;  // false: axis or length input not known yet
};

template <typename Ctx>
DftSpec dftSpec(const Ctx& c, int64_t rank, const ir::Tensor* length, const ir::Tensor* axis, bool has_length,
                bool has_axis) {
  DftSpec s;
  int64_t a = c.attrs().getInt("axis", 1);
  if (c.opset() >= 20) {
    a = -2;
    if (has_axis) {
      std::optional<int64_t> v = scalarInt(c, axis, "axis");
      if (!v) s.known = false;
      else a = *v;
    }
  }
  if (has_length) {
    s.length = scalarInt(c, length, "dft_length");
    if (!s.length) s.known = false;
    else if (*s.length < 1) c.fail("dft_length must be positive, got " + std::to_string(*s.length));
  }
  if (rank >= 0 && s.known) {
    // The signal axes are 0..rank-2 (the last dimension holds the complex parts).
    if (a < -rank || a >= rank - 1 || (a < 0 && a + rank == rank - 1))
      c.fail("axis " + std::to_string(a) + " is not a signal axis of a rank-" + std::to_string(rank) + " input");
    s.axis = a < 0 ? a + rank : a;
  }
  return s;
}

void inferDft(InferContext& c) {
  checkArity(c, 1, 3);
  fio::requireFloat(c, 0, "input");
  const ir::TensorType& x = c.input(0);
  const bool inverse = c.attrs().getInt("inverse", 0) != 0, onesided = c.attrs().getInt("onesided", 0) != 0;
  if (inverse && onesided) c.fail("inverse with onesided is not supported");
  if (!x.has_rank) {
    c.outputs[0] = ir::TensorType::unranked(x.dtype);
    return;
  }
  const int64_t rank = int64_t(x.rank());
  if (rank < 3) c.fail("input must be [batch, signal..., 1 or 2], got " + x.str());
  const ir::Dim& last = x.dims.back();
  if (last.isKnown() && last.value != 1 && last.value != 2)
    c.fail("the last dimension must be 1 (real) or 2 (complex), got " + x.str());
  DftSpec s = dftSpec(c, rank, c.value(1), c.value(2), c.hasInput(1), c.hasInput(2));
  ir::TensorType out = x;
  out.dims.back() = ir::Dim::known(2);
  if (!s.known) {
    for (size_t i = 0; i + 1 < out.dims.size(); ++i) out.dims[i] = ir::Dim{};
    out.dims[0] = x.dims[0];
  } else {
    ir::Dim n = s.length ? ir::Dim::known(*s.length) : x.dims[size_t(s.axis)];
    if (onesided) n = n.isKnown() ? ir::Dim::known(n.value / 2 + 1) : ir::Dim{};
    out.dims[size_t(s.axis)] = n;
  }
  c.outputs[0] = out;
}

// Applies one transform along `axis` of a [.., 1|2] tensor of doubles.
void dftAlong(const std::vector<double>& in, const std::vector<int64_t>& shape, int64_t axis, int64_t n,
              int64_t out_len, bool inverse, std::vector<double>& out) {
  const int64_t comps = shape.back();
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= shape[size_t(i)];
  for (size_t i = size_t(axis) + 1; i + 1 < shape.size(); ++i) inner *= shape[i];
  const int64_t len = shape[size_t(axis)], m = std::min(len, n);
  Transform t(n, inverse);
  out.assign(size_t(outer * out_len * inner * 2), 0.0);
  std::vector<double> re(static_cast<size_t>(m)), im(static_cast<size_t>(m)), ore(static_cast<size_t>(out_len)), oim(static_cast<size_t>(out_len));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      for (int64_t j = 0; j < m; ++j) {
        const size_t at = size_t(((o * len + j) * inner + i) * comps);
        re[size_t(j)] = in[at];
        im[size_t(j)] = comps == 2 ? in[at + 1] : 0.0;
      }
      t.run(re, im, m, out_len, ore, oim);
      for (int64_t k = 0; k < out_len; ++k) {
        const size_t at = size_t(((o * out_len + k) * inner + i) * 2);
        out[at] = ore[size_t(k)];
        out[at + 1] = oim[size_t(k)];
      }
    }
}

void runDft(KernelContext& c) {
  const ir::Tensor& x = c.inputs[0];
  const int64_t rank = int64_t(x.rank());
  DftSpec s = dftSpec(c, rank, c.hasInput(1) ? &c.inputs[1] : nullptr, c.hasInput(2) ? &c.inputs[2] : nullptr,
                      c.hasInput(1), c.hasInput(2));
  const bool inverse = c.attrs().getInt("inverse", 0) != 0, onesided = c.attrs().getInt("onesided", 0) != 0;
  if (rank < 3 || (x.shape.back() != 1 && x.shape.back() != 2))
    c.fail("input must be [batch, signal..., 1 or 2], got " + ir::shapeStr(x.shape));
  const int64_t n = s.length ? *s.length : x.shape[size_t(s.axis)];
  if (n < 1) c.fail("the transform length is 0");
  const int64_t out_len = onesided ? n / 2 + 1 : n;
  std::vector<double> out;
  dftAlong(fio::read(c, x, "input"), x.shape, s.axis, n, out_len, inverse, out);
  fio::write(c, c.outputs[0], out);
}

// ---- STFT -------------------------------------------------------------------------

struct StftSpec {
  std::optional<int64_t> step, length;
};

void inferStft(InferContext& c) {
  checkArity(c, 2, 4);
  fio::requireFloat(c, 0, "signal");
  const ir::TensorType& x = c.input(0);
  const bool onesided = c.attrs().getInt("onesided", 1) != 0;
  if (x.has_rank && x.rank() != 3) c.fail("signal must be [batch, length, 1 or 2], got " + x.str());
  std::optional<int64_t> step = scalarInt(c, c.value(1), "frame_step");
  std::optional<int64_t> length;
  if (c.hasInput(3)) length = scalarInt(c, c.value(3), "frame_length");
  if (c.hasInput(2)) {
    const ir::TensorType& w = c.input(2);
    if (w.has_rank && w.rank() != 1) c.fail("window must be 1-D, got " + w.str());
    if (!length && w.has_rank && w.dims[0].isKnown()) length = w.dims[0].value;
  }
  if (!c.hasInput(2) && !c.hasInput(3)) c.fail("needs a window or a frame_length");
  if (step && *step < 1) c.fail("frame_step must be positive");
  if (length && *length < 1) c.fail("frame_length must be positive");
  ir::Dim batch = x.has_rank ? x.dims[0] : ir::Dim{}, frames, bins;
  if (step && length && x.has_rank && x.dims[1].isKnown()) {
    if (x.dims[1].value < *length) c.fail("the signal is shorter than one frame");
    frames = ir::Dim::known((x.dims[1].value - *length) / *step + 1);
  }
  if (length) bins = ir::Dim::known(onesided ? *length / 2 + 1 : *length);
  c.outputs[0] = ir::TensorType{x.dtype, true, {batch, frames, bins, ir::Dim::known(2)}};
}

void runStft(KernelContext& c) {
  const ir::Tensor& x = c.inputs[0];
  if (x.rank() != 3 || (x.shape[2] != 1 && x.shape[2] != 2)) c.fail("signal must be [batch, length, 1 or 2]");
  const int64_t step = *scalarInt(c, &c.inputs[1], "frame_step");
  std::vector<double> window;
  if (c.hasInput(2)) window = fio::read(c, c.inputs[2], "window");
  int64_t length = c.hasInput(3) ? *scalarInt(c, &c.inputs[3], "frame_length") : int64_t(window.size());
  if (!window.empty() && int64_t(window.size()) != length)
    c.fail("window has " + std::to_string(window.size()) + " values but frame_length is " + std::to_string(length));
  const bool onesided = c.attrs().getInt("onesided", 1) != 0;
  const int64_t batch = x.shape[0], total = x.shape[1], comps = x.shape[2];
  if (step < 1 || length < 1 || total < length) c.fail("frame_step/frame_length do not fit the signal");
  const int64_t frames = (total - length) / step + 1, bins = onesided ? length / 2 + 1 : length;
  std::vector<double> sig = fio::read(c, x, "signal"), out(size_t(batch * frames * bins * 2));
  Transform t(length, false);
  std::vector<double> re(static_cast<size_t>(length)), im(static_cast<size_t>(length)), ore(static_cast<size_t>(bins)), oim(static_cast<size_t>(bins));
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t f = 0; f < frames; ++f) {
      for (int64_t j = 0; j < length; ++j) {
        const size_t at = size_t((b * total + f * step + j) * comps);
        const double w = window.empty() ? 1.0 : window[size_t(j)];
        re[size_t(j)] = sig[at] * w;
        im[size_t(j)] = comps == 2 ? sig[at + 1] * w : 0.0;
      }
      t.run(re, im, length, bins, ore, oim);
      for (int64_t k = 0; k < bins; ++k) {
        const size_t at = size_t(((b * frames + f) * bins + k) * 2);
        out[at] = ore[size_t(k)];
        out[at + 1] = oim[size_t(k)];
      }
    }
  fio::write(c, c.outputs[0], out);
}

}  // namespace

void registerSignalOps(OpRegistry& r) {
  r.add("HannWindow", {inferWindow, runWindow<WindowKind::kHann>});
  r.add("HammingWindow", {inferWindow, runWindow<WindowKind::kHamming>});
  r.add("BlackmanWindow", {inferWindow, runWindow<WindowKind::kBlackman>});
  r.add("MelWeightMatrix", {inferMel, runMel});
  r.add("DFT", {inferDft, runDft, 20});
  r.add("STFT", {inferStft, runStft});
}

}  // namespace partita::kernels
