// Quantized convolution and matmul: ConvInteger, MatMulInteger (int32 results) and
// QLinearConv, QLinearMatMul (requantized to 8 bits).
//
// Operands are widened to double with their zero points subtracted and go through the
// float kernels (convForward / matmulForward): double keeps every int32 accumulation
// exact (|sum| < 2^53), so results equal integer arithmetic. These ops are correctness
// paths, not the fast path of any model we target.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/nn_conv.h"
#include "kernels/nn_matmul.h"
#include "kernels/nn_ops.h"
#include "kernels/nn_window.h"
#include "kernels/op_util.h"

namespace partita::kernels {

namespace {

bool quantType(ir::DType t) {
  return t == ir::DType::kUInt8 || t == ir::DType::kInt8 || t == ir::DType::kUndefined;
}

// A tensor's values as doubles (any numeric dtype).
std::vector<double> widen(const ir::Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  PARTITA_DISPATCH_ALL(t.dtype, "quantized op", {
    const T* p = t.as<const T>();
    for (size_t i = 0; i < v.size(); ++i) v[i] = double(p[i]);
  });
  return v;
}

// An optional zero point or scale: empty when omitted, else its values, which must be
// one (per tensor) or `per_axis` (per channel / row / column).
std::vector<double> readParam(KernelContext& c, size_t input, int64_t per_axis, const char* what) {
  if (!c.hasInput(input)) return {};
  std::vector<double> v = widen(c.inputs[input]);
  if (v.size() != 1 && int64_t(v.size()) != per_axis)
    c.fail(std::string(what) + " must have 1 or " + std::to_string(per_axis) + " values, got " +
           std::to_string(v.size()));
  return v;
}

double at(const std::vector<double>& v, int64_t i, double def) {
  if (v.empty()) return def;
  return v.size() == 1 ? v[0] : v[size_t(i)];
}

// round-half-to-even, then saturate into the output's 8-bit type.
void requantize(KernelContext& c, const std::vector<double>& acc, const ir::Tensor& y, int64_t rows,
                int64_t cols, const std::vector<double>& row_scale, const std::vector<double>& col_scale,
                double y_scale, double y_zero) {
  if (y_scale == 0) c.fail("y_scale must not be zero");
  const int64_t n = y.numel();
  const bool is_u8 = y.dtype == ir::DType::kUInt8;
  if (!is_u8 && y.dtype != ir::DType::kInt8) c.fail("the output must be uint8 or int8");
  const double lo = is_u8 ? 0 : -128, hi = is_u8 ? 255 : 127;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t col = i % cols, row = (i / cols) % rows;
    const double scale = at(row_scale, row, 1) * at(col_scale, col, 1) / y_scale;
    const double q = std::clamp(std::nearbyint(acc[size_t(i)] * scale) + y_zero, lo, hi);
    if (is_u8)
      y.as<uint8_t>()[i] = uint8_t(q);
    else
      y.as<int8_t>()[i] = int8_t(q);
  }
}

void toInt32(const std::vector<double>& acc, const ir::Tensor& y) {
  int32_t* out = y.as<int32_t>();
  for (size_t i = 0; i < acc.size(); ++i) out[i] = int32_t(std::llround(acc[i]));
}

// ---- convolution ------------------------------------------------------------------

void inferConvInteger(InferContext& c) {
  if (!quantType(c.input(0).dtype) || !quantType(c.input(1).dtype)) c.fail("x and w must be uint8 or int8");
  c.outputs[0] = inferConvOutput(c, c.input(0), c.input(1));
  c.outputs[0].dtype = ir::DType::kInt32;
}

void inferQLinearConv(InferContext& c) {
  if (!quantType(c.input(0).dtype) || !quantType(c.input(3).dtype)) c.fail("x and w must be uint8 or int8");
  c.outputs[0] = inferConvOutput(c, c.input(0), c.input(3));
  c.outputs[0].dtype = c.hasInput(7) ? c.input(7).dtype : c.input(0).dtype;
}

// Runs the convolution of (x - x_zero) and (w - w_zero[m]) plus `bias`; returns the
// accumulators in output order.
std::vector<double> convAccumulate(KernelContext& c, const ConvShape& s, const ir::Tensor& x,
                                   const ir::Tensor& w, const std::vector<double>& x_zero,
                                   const std::vector<double>& w_zero, const std::vector<double>& bias) {
  std::vector<double> xd = widen(x), wd = widen(w);
  const double xz = at(x_zero, 0, 0);
  for (double& v : xd) v -= xz;
  const int64_t per_m = s.m == 0 ? 0 : w.numel() / s.m;
  for (int64_t m = 0; m < s.m; ++m)
    for (int64_t i = 0; i < per_m; ++i) wd[size_t(m * per_m + i)] -= at(w_zero, m, 0);
  std::vector<double> y(static_cast<size_t>(s.n * s.m * s.out_size));
  convForward(s, xd.data(), wd.data(), bias.empty() ? nullptr : bias.data(), y.data());
  return y;
}

void runConvInteger(KernelContext& c) {
  const ir::Tensor& x = c.inputs[0];
  const ir::Tensor& w = c.inputs[1];
  ConvShape s = convShape(c, x, w);
  std::vector<double> xz = readParam(c, 2, 1, "x_zero_point");
  std::vector<double> wz = readParam(c, 3, s.m, "w_zero_point");
  toInt32(convAccumulate(c, s, x, w, xz, wz, {}), c.outputs[0]);
}

void runQLinearConv(KernelContext& c) {
  const ir::Tensor& x = c.inputs[0];
  const ir::Tensor& w = c.inputs[3];
  ConvShape s = convShape(c, x, w);
  std::vector<double> x_scale = readParam(c, 1, 1, "x_scale"), xz = readParam(c, 2, 1, "x_zero_point");
  std::vector<double> w_scale = readParam(c, 4, s.m, "w_scale"), wz = readParam(c, 5, s.m, "w_zero_point");
  std::vector<double> y_scale = readParam(c, 6, 1, "y_scale"), yz = readParam(c, 7, 1, "y_zero_point");
  std::vector<double> bias = readParam(c, 8, s.m, "B");
  if (bias.size() == 1 && s.m != 1) c.fail("B must have one value per output channel");
  std::vector<double> acc = convAccumulate(c, s, x, w, xz, wz, bias);
  // Output [N, M, spatial]: the channel is the "row" of a [N*M, spatial] matrix.
  std::vector<double> row_scale(static_cast<size_t>(s.m));
  for (int64_t m = 0; m < s.m; ++m) row_scale[size_t(m)] = at(x_scale, 0, 1) * at(w_scale, m, 1);
  requantize(c, acc, c.outputs[0], s.m, s.out_size, row_scale, {}, at(y_scale, 0, 1), at(yz, 0, 0));
}

// ---- matmul -----------------------------------------------------------------------

void inferMatMulInteger(InferContext& c) {
  if (!quantType(c.input(0).dtype) || !quantType(c.input(1).dtype)) c.fail("A and B must be uint8 or int8");
  c.outputs[0] = inferMatMulOutput(c, c.input(0), c.input(1));
  c.outputs[0].dtype = ir::DType::kInt32;
}

void inferQLinearMatMul(InferContext& c) {
  if (!quantType(c.input(0).dtype) || !quantType(c.input(3).dtype)) c.fail("a and b must be uint8 or int8");
  c.outputs[0] = inferMatMulOutput(c, c.input(0), c.input(3));
  c.outputs[0].dtype = c.hasInput(7) ? c.input(7).dtype : c.input(0).dtype;
}

struct MatDims {
  int64_t m = 1, n = 1;  // rows of a (1 for a vector), columns of b (1 for a vector)
};

MatDims matDims(const ir::Tensor& a, const ir::Tensor& b) {
  MatDims d;
  if (a.rank() >= 2) d.m = a.shape[a.rank() - 2];
  if (b.rank() >= 2) d.n = b.shape.back();
  return d;
}

// (a - a_zero[row]) @ (b - b_zero[col]) in double; returns the accumulators.
std::vector<double> matmulAccumulate(KernelContext& c, const ir::Tensor& a, const ir::Tensor& b,
                                     const std::vector<double>& a_zero, const std::vector<double>& b_zero) {
  if (a.rank() == 0 || b.rank() == 0) c.fail("operands must not be scalars");
  ir::OwnedTensor ad(ir::DType::kFloat64, a.shape), bd(ir::DType::kFloat64, b.shape);
  std::vector<double> av = widen(a), bv = widen(b);
  const int64_t ak = a.shape.back(), am = a.rank() >= 2 ? a.shape[a.rank() - 2] : 1;
  for (size_t i = 0; i < av.size(); ++i) ad.as<double>()[i] = av[i] - at(a_zero, (int64_t(i) / ak) % am, 0);
  const int64_t bn = b.rank() >= 2 ? b.shape.back() : 1;
  for (size_t i = 0; i < bv.size(); ++i) bd.as<double>()[i] = bv[i] - at(b_zero, int64_t(i) % bn, 0);
  ir::OwnedTensor yd(ir::DType::kFloat64, c.outputs[0].shape);
  matmulForward(c, ad.view(), bd.view(), yd.view());
  return std::vector<double>(yd.as<double>(), yd.as<double>() + yd.numel());
}

void runMatMulInteger(KernelContext& c) {
  const ir::Tensor& a = c.inputs[0];
  const ir::Tensor& b = c.inputs[1];
  MatDims d = matDims(a, b);
  std::vector<double> az = readParam(c, 2, d.m, "a_zero_point");
  std::vector<double> bz = readParam(c, 3, d.n, "b_zero_point");
  toInt32(matmulAccumulate(c, a, b, az, bz), c.outputs[0]);
}

void runQLinearMatMul(KernelContext& c) {
  const ir::Tensor& a = c.inputs[0];
  const ir::Tensor& b = c.inputs[3];
  MatDims d = matDims(a, b);
  std::vector<double> as = readParam(c, 1, d.m, "a_scale"), az = readParam(c, 2, d.m, "a_zero_point");
  std::vector<double> bs = readParam(c, 4, d.n, "b_scale"), bz = readParam(c, 5, d.n, "b_zero_point");
  std::vector<double> ys = readParam(c, 6, 1, "y_scale"), yz = readParam(c, 7, 1, "y_zero_point");
  std::vector<double> acc = matmulAccumulate(c, a, b, az, bz);
  requantize(c, acc, c.outputs[0], d.m, d.n, as, bs, at(ys, 0, 1), at(yz, 0, 0));
}

}  // namespace

void registerQuantOps(OpRegistry& r) {
  r.add("ConvInteger", {inferConvInteger, runConvInteger});
  r.add("QLinearConv", {inferQLinearConv, runQLinearConv});
  r.add("MatMulInteger", {inferMatMulInteger, runMatMulInteger});
  r.add("QLinearMatMul", {inferQLinearMatMul, runQLinearMatMul, 21});
}

}  // namespace partita::kernels
