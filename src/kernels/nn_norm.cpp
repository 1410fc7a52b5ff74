// Normalisations: BatchNormalization (inference, and training statistics), Instance-
// Normalization, LayerNormalization and LRN. Statistics accumulate in double.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <type_traits>
#include <vector>

#include "kernels/elementwise_cast.h"
#include "kernels/nn_ops.h"
#include "kernels/nn_window.h"
#include "kernels/op_util.h"

namespace partita::kernels {

namespace {

bool floatLike(ir::DType t) {
  return t == ir::DType::kUndefined || t == ir::DType::kFloat32 || t == ir::DType::kFloat64 ||
         t == ir::DType::kFloat16 || t == ir::DType::kBFloat16;
}

// Reads a float-like tensor's values as doubles.
std::vector<double> readValues(const KernelContext& c, const ir::Tensor& t, const char* what) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  switch (t.dtype) {
    case ir::DType::kFloat32:
      for (size_t i = 0; i < out.size(); ++i) out[i] = t.as<const float>()[i];
      break;
    case ir::DType::kFloat64:
      for (size_t i = 0; i < out.size(); ++i) out[i] = t.as<const double>()[i];
      break;
    case ir::DType::kFloat16:
      for (size_t i = 0; i < out.size(); ++i) out[i] = ir::halfToFloat(t.as<const uint16_t>()[i]);
      break;
    case ir::DType::kBFloat16:
      for (size_t i = 0; i < out.size(); ++i) out[i] = ir::bfloat16ToFloat(t.as<const uint16_t>()[i]);
      break;
    default:
      c.fail(std::string(what) + " must be a float tensor, got " + std::string(ir::dtypeName(t.dtype)));
  }
  return out;
}

// Writes doubles into a float32/float64 tensor.
void writeValues(const KernelContext& c, const ir::Tensor& t, const std::vector<double>& v) {
  if (!t.defined()) return;
  if (size_t(t.numel()) != v.size()) c.fail("output " + ir::shapeStr(t.shape) + " has the wrong size");
  switch (t.dtype) {
    case ir::DType::kFloat32:
      for (size_t i = 0; i < v.size(); ++i) t.as<float>()[i] = float(v[i]);
      break;
    case ir::DType::kFloat64:
      for (size_t i = 0; i < v.size(); ++i) t.as<double>()[i] = v[i];
      break;
    default:
      unsupportedNode(c.node, "output dtype " + std::string(ir::dtypeName(t.dtype)) + " is not supported");
  }
}

// Broadcasts `t` (numpy rules, aligned right) to `shape`; returns the values as doubles.
std::vector<double> expandValues(const KernelContext& c, const ir::Tensor& t,
                                 const std::vector<int64_t>& shape, const char* what) {
  std::vector<double> v = readValues(c, t, what);
  const int64_t total = ir::shapeNumel(shape);
  if (int64_t(v.size()) == total && (t.shape == shape || t.rank() <= shape.size())) {
    bool same = true;  // same numel with a compatible shape (e.g. [C] vs [1, C]) needs no expansion
    for (size_t i = 0; i < t.rank(); ++i)
      if (t.shape[t.rank() - 1 - i] != shape[shape.size() - 1 - i]) same = false;
    if (same) return v;
  }
  if (t.rank() > shape.size()) c.fail(std::string(what) + " " + ir::shapeStr(t.shape) + " has too many dims");
  std::vector<int64_t> ts(shape.size(), 1);
  std::copy(t.shape.begin(), t.shape.end(), ts.begin() + long(shape.size() - t.rank()));
  for (size_t i = 0; i < shape.size(); ++i)
    if (ts[i] != 1 && ts[i] != shape[i])
      c.fail(std::string(what) + " " + ir::shapeStr(t.shape) + " does not broadcast to " +
             ir::shapeStr(shape));
  std::vector<int64_t> tstr = stridesOf(ts);
  std::vector<double> out(static_cast<size_t>(total));
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t i = 0; i < total; ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < shape.size(); ++d) off += ts[d] == 1 ? 0 : idx[d] * tstr[d];
    out[size_t(i)] = v[size_t(off)];
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

// ---- BatchNormalization ---------------------------------------------------------------

bool batchNormTraining(const ir::Node& node) {
  if (node.opset >= 14) return node.attrs.getInt("training_mode", 0) != 0;
  for (size_t i = 1; i < node.outputs.size(); ++i)
    if (node.hasOutput(i)) return true;
  return false;
}

void inferBatchNorm(InferContext& c) {
  const ir::TensorType& x = c.input(0);
  if (!floatLike(x.dtype)) c.fail("input must be a float tensor, got " + std::string(ir::dtypeName(x.dtype)));
  if (x.has_rank && x.rank() < 2) c.fail("input must have rank >= 2, got " + x.str());
  for (size_t i = 1; i < 5; ++i)
    if (!c.node.hasInput(i)) c.fail("input " + std::to_string(i) + " is required");
  c.outputs[0] = x;
  for (size_t i = 1; i < c.outputs.size(); ++i) {
    const ir::TensorType& stat =
        c.input(i % 2 == 1 ? 3 : 4);  // means like input_mean, variances like input_var
    c.outputs[i] = stat;
    c.outputs[i].dtype = c.input(3).dtype;
  }
}

template <typename T>
void batchNormApply(const T* x, T* y, int64_t n, int64_t ch, int64_t size, const std::vector<double>& a,
                    const std::vector<double>& b, bool per_element) {
  const int64_t planes = n * ch;
#pragma omp parallel for schedule(static) if (planes > 1 && planes * size > 65536)
  for (int64_t p = 0; p < planes; ++p) {
    const int64_t cc = p % ch;
    const T* xp = x + p * size;
    T* yp = y + p * size;
    if (per_element) {
      const double* ap = a.data() + cc * size;
      const double* bp = b.data() + cc * size;
      for (int64_t i = 0; i < size; ++i) yp[i] = T(double(xp[i]) * ap[i] + bp[i]);
    } else {
      const T av = T(a[size_t(cc)]), bv = T(b[size_t(cc)]);
      for (int64_t i = 0; i < size; ++i) yp[i] = xp[i] * av + bv;
    }
  }
}

template <typename T>
void batchNormTyped(KernelContext& c) {
  const ir::Tensor& xt = c.inputs[0];
  if (xt.rank() < 2) c.fail("input must have rank >= 2");
  const int64_t n = xt.shape[0], ch = xt.shape[1];
  const int64_t size = (n * ch) == 0 ? 0 : xt.numel() / (n * ch);
  const double eps = c.attrs().getFloat("epsilon", 1e-5f);
  std::vector<double> scale = readValues(c, c.inputs[1], "scale");
  std::vector<double> bias = readValues(c, c.inputs[2], "B");
  std::vector<double> mean = readValues(c, c.inputs[3], "mean");
  std::vector<double> var = readValues(c, c.inputs[4], "var");
  // Opsets 7-8 with spatial=0 carry one parameter per element of a [C, D1, ...] plane.
  const bool per_element =
      c.opset() < 9 && c.attrs().getInt("spatial", 1) == 0 && size > 1 && int64_t(scale.size()) == ch * size;
  const size_t count = size_t(per_element ? ch * size : ch);
  for (const auto* v : {&scale, &bias, &mean, &var})
    if (v->size() != count) c.fail("scale, B, mean and var must have " + std::to_string(count) + " values");
  const T* x = xt.as<const T>();
  T* y = c.outputs[0].as<T>();

  if (batchNormTraining(c.node)) {
    if (per_element) unsupportedNode(c.node, "training statistics with spatial=0 are not supported");
    const double momentum = c.attrs().getFloat("momentum", 0.9f);
    std::vector<double> bmean(static_cast<size_t>(ch)), bvar(static_cast<size_t>(ch));
#pragma omp parallel for schedule(static) if (ch > 1 && xt.numel() > 65536)
    for (int64_t cc = 0; cc < ch; ++cc) {
      double sum = 0, sq = 0;
      for (int64_t b = 0; b < n; ++b) {
        const T* xp = x + (b * ch + cc) * size;
        for (int64_t i = 0; i < size; ++i) sum += double(xp[i]);
      }
      const double cnt = double(n * size), mu = cnt > 0 ? sum / cnt : 0;
      for (int64_t b = 0; b < n; ++b) {
        const T* xp = x + (b * ch + cc) * size;
        for (int64_t i = 0; i < size; ++i) sq += (double(xp[i]) - mu) * (double(xp[i]) - mu);
      }
      bmean[size_t(cc)] = mu;
      bvar[size_t(cc)] = cnt > 0 ? sq / cnt : 0;
    }
    std::vector<double> a(static_cast<size_t>(ch)), b(static_cast<size_t>(ch)),
        rmean(static_cast<size_t>(ch)), rvar(static_cast<size_t>(ch));
    for (size_t i = 0; i < size_t(ch); ++i) {
      a[i] = scale[i] / std::sqrt(bvar[i] + eps);
      b[i] = bias[i] - bmean[i] * a[i];
      rmean[i] = mean[i] * momentum + bmean[i] * (1 - momentum);
      rvar[i] = var[i] * momentum + bvar[i] * (1 - momentum);
    }
    batchNormApply(x, y, n, ch, size, a, b, false);
    const std::vector<double>* outs[] = {&rmean, &rvar, &bmean, &bvar};
    for (size_t o = 1; o < c.outputs.size() && o <= 4; ++o) writeValues(c, c.outputs[o], *outs[o - 1]);
    return;
  }
  std::vector<double> a(count), b(count);
  for (size_t i = 0; i < count; ++i) {
    a[i] = scale[i] / std::sqrt(var[i] + eps);
    b[i] = bias[i] - mean[i] * a[i];
  }
  batchNormApply(x, y, n, ch, size, a, b, per_element);
}

void runBatchNorm(KernelContext& c) {
  if (elementwise::anyHalfLike(c)) return elementwise::runThroughFloat(c, runBatchNorm);
  switch (c.inputs[0].dtype) {
    case ir::DType::kFloat32:
      batchNormTyped<float>(c);
      break;
    case ir::DType::kFloat64:
      batchNormTyped<double>(c);
      break;
    default:
      unsupportedNode(c.node, "dtype " + std::string(ir::dtypeName(c.inputs[0].dtype)) + " is not supported");
  }
}

// ---- InstanceNormalization --------------------------------------------------------------

void inferSameFloat(InferContext& c) {
  const ir::TensorType& x = c.input(0);
  if (!floatLike(x.dtype)) c.fail("input must be a float tensor, got " + std::string(ir::dtypeName(x.dtype)));
  c.outputs[0] = x;
}

void inferInstanceNorm(InferContext& c) {
  checkArity(c, 3, 3);  // the kernel reads scale and bias
  inferSameFloat(c);
}

template <typename T>
void instanceNormTyped(KernelContext& c) {
  const ir::Tensor& xt = c.inputs[0];
  if (xt.rank() < 2) c.fail("input must have rank >= 2");
  const int64_t n = xt.shape[0], ch = xt.shape[1];
  const int64_t size = (n * ch) == 0 ? 0 : xt.numel() / (n * ch);
  const double eps = c.attrs().getFloat("epsilon", 1e-5f);
  std::vector<double> scale = readValues(c, c.inputs[1], "scale");
  std::vector<double> bias = readValues(c, c.inputs[2], "B");
  if (int64_t(scale.size()) != ch || int64_t(bias.size()) != ch)
    c.fail("scale and B must have one value per channel");
  const T* x = xt.as<const T>();
  T* y = c.outputs[0].as<T>();
  const int64_t planes = n * ch;
#pragma omp parallel for schedule(static) if (planes > 1 && planes * size > 32768)
  for (int64_t p = 0; p < planes; ++p) {
    const T* xp = x + p * size;
    T* yp = y + p * size;
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < size; ++i) sum += double(xp[i]);
    const double mu = size > 0 ? sum / double(size) : 0;
    for (int64_t i = 0; i < size; ++i) sq += (double(xp[i]) - mu) * (double(xp[i]) - mu);
    const double var = size > 0 ? sq / double(size) : 0;
    const double a = scale[size_t(p % ch)] / std::sqrt(var + eps);
    const T av = T(a), bv = T(bias[size_t(p % ch)] - mu * a);
    for (int64_t i = 0; i < size; ++i) yp[i] = xp[i] * av + bv;
  }
}

void runInstanceNorm(KernelContext& c) {
  if (elementwise::anyHalfLike(c)) return elementwise::runThroughFloat(c, runInstanceNorm);
  switch (c.inputs[0].dtype) {
    case ir::DType::kFloat32:
      instanceNormTyped<float>(c);
      break;
    case ir::DType::kFloat64:
      instanceNormTyped<double>(c);
      break;
    default:
      unsupportedNode(c.node, "dtype " + std::string(ir::dtypeName(c.inputs[0].dtype)) + " is not supported");
  }
}

// ---- LayerNormalization --------------------------------------------------------------

ir::DType stashType(const ir::Node& node) {
  const int64_t st = node.attrs.getInt("stash_type", 1);
  if (st == 1) return ir::DType::kFloat32;
  if (st == 11) return ir::DType::kFloat64;
  if (st == 16) return ir::DType::kBFloat16;
  failNode(node, "unknown stash_type " + std::to_string(st));
}

void inferLayerNorm(InferContext& c) {
  checkArity(c, 2, 3);  // the kernel reads scale (and bias when given)
  const ir::TensorType& x = c.input(0);
  if (!floatLike(x.dtype)) c.fail("input must be a float tensor, got " + std::string(ir::dtypeName(x.dtype)));
  c.outputs[0] = x;
  const ir::DType st = stashType(c.node);
  for (size_t i = 1; i < c.outputs.size(); ++i) {
    if (!x.has_rank) {
      c.outputs[i] = ir::TensorType::unranked(st);
      continue;
    }
    const int64_t axis = normalizeAxis(c.attrs().getInt("axis", -1), int64_t(x.rank()), "LayerNormalization");
    ir::TensorType t = x;
    t.dtype = st;
    for (size_t d = size_t(axis); d < t.rank(); ++d) t.dims[d] = ir::Dim::known(1);
    c.outputs[i] = t;
  }
}

template <typename T>
void layerNormTyped(KernelContext& c) {
  const ir::Tensor& xt = c.inputs[0];
  const int64_t rank = int64_t(xt.rank());
  if (rank == 0) c.fail("input must not be a scalar");
  const int64_t axis = normalizeAxis(c.attrs().getInt("axis", -1), rank, "LayerNormalization");
  const double eps = c.attrs().getFloat("epsilon", 1e-5f);
  std::vector<int64_t> norm_shape(xt.shape.begin() + axis, xt.shape.end());
  const int64_t cols = ir::shapeNumel(norm_shape);
  const int64_t rows = cols == 0 ? 0 : xt.numel() / cols;
  std::vector<double> scale = expandValues(c, c.inputs[1], norm_shape, "Scale");
  std::vector<double> bias =
      c.hasInput(2) ? expandValues(c, c.inputs[2], norm_shape, "B") : std::vector<double>();
  std::vector<T> scale_t(scale.begin(), scale.end()), bias_t(bias.begin(), bias.end());
  const T* x = xt.as<const T>();
  T* y = c.outputs[0].as<T>();
  std::vector<double> means(static_cast<size_t>(rows)), invs(static_cast<size_t>(rows));
#pragma omp parallel for schedule(static) if (rows > 1 && xt.numel() > 32768)
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cols;
    T* yr = y + r * cols;
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < cols; ++i) sum += double(xr[i]);
    const double mu = sum / double(cols);
    for (int64_t i = 0; i < cols; ++i) sq += (double(xr[i]) - mu) * (double(xr[i]) - mu);
    const double inv = 1.0 / std::sqrt(sq / double(cols) + eps);
    means[size_t(r)] = mu;
    invs[size_t(r)] = inv;
    const T tm = T(mu), ti = T(inv);
    if (bias_t.empty()) {
      for (int64_t i = 0; i < cols; ++i) yr[i] = (xr[i] - tm) * ti * scale_t[size_t(i)];
    } else {
      for (int64_t i = 0; i < cols; ++i) yr[i] = (xr[i] - tm) * ti * scale_t[size_t(i)] + bias_t[size_t(i)];
    }
  }
  if (c.outputs.size() > 1) writeValues(c, c.outputs[1], means);
  if (c.outputs.size() > 2) writeValues(c, c.outputs[2], invs);
}

void runLayerNorm(KernelContext& c) {
  if (elementwise::anyHalfLike(c)) return elementwise::runThroughFloat(c, runLayerNorm);
  switch (c.inputs[0].dtype) {
    case ir::DType::kFloat32:
      layerNormTyped<float>(c);
      break;
    case ir::DType::kFloat64:
      layerNormTyped<double>(c);
      break;
    default:
      unsupportedNode(c.node, "dtype " + std::string(ir::dtypeName(c.inputs[0].dtype)) + " is not supported");
  }
}

// ---- LRN -------------------------------------------------------------------------------

void inferLrn(InferContext& c) {
  if (c.attrs().getInt("size", 0) < 1) c.fail("attribute size must be >= 1");
  inferSameFloat(c);
}

template <typename T>
void lrnTyped(KernelContext& c) {
  const ir::Tensor& xt = c.inputs[0];
  if (xt.rank() < 2) c.fail("input must have rank >= 2");
  const int64_t size_attr = c.attrs().getInt("size", 0);
  if (size_attr < 1) c.fail("attribute size must be >= 1");
  const double alpha = c.attrs().getFloat("alpha", 1e-4f), beta = c.attrs().getFloat("beta", 0.75f);
  const double bias = c.attrs().getFloat("bias", 1.0f);
  const int64_t n = xt.shape[0], ch = xt.shape[1];
  const int64_t size = (n * ch) == 0 ? 0 : xt.numel() / (n * ch);
  const int64_t before = (size_attr - 1) / 2, after = size_attr - 1 - before;
  const T* x = xt.as<const T>();
  T* y = c.outputs[0].as<T>();
  const int64_t planes = n * ch;
  const T k = T(alpha / double(size_attr));
#pragma omp parallel if (planes > 1 && planes * size * size_attr > 32768)
  {
    std::unique_ptr<T[]> acc(new T[size_t(size)]);
#pragma omp for schedule(static)
    for (int64_t p = 0; p < planes; ++p) {
      const int64_t b = p / ch, cc = p % ch;
      std::fill(acc.get(), acc.get() + size, T(0));
      for (int64_t q = std::max<int64_t>(0, cc - before); q <= std::min<int64_t>(ch - 1, cc + after); ++q) {
        const T* xq = x + (b * ch + q) * size;
        for (int64_t i = 0; i < size; ++i) acc[size_t(i)] += xq[i] * xq[i];
      }
      const T* xp = x + p * size;
      T* yp = y + p * size;
      if (beta == 0.75) {  // x^-0.75 = 1 / (sqrt(x) * sqrt(sqrt(x)))
        for (int64_t i = 0; i < size; ++i) {
          const T d = T(bias) + k * acc[size_t(i)];
          const T r = std::sqrt(d);
          yp[i] = xp[i] / (r * std::sqrt(r));
        }
      } else {
        for (int64_t i = 0; i < size; ++i) yp[i] = xp[i] / std::pow(T(bias) + k * acc[size_t(i)], T(beta));
      }
    }
  }
}

void runLrn(KernelContext& c) {
  if (elementwise::anyHalfLike(c)) return elementwise::runThroughFloat(c, runLrn);
  switch (c.inputs[0].dtype) {
    case ir::DType::kFloat32:
      lrnTyped<float>(c);
      break;
    case ir::DType::kFloat64:
      lrnTyped<double>(c);
      break;
    default:
      unsupportedNode(c.node, "dtype " + std::string(ir::dtypeName(c.inputs[0].dtype)) + " is not supported");
  }
}

}  // namespace

void registerNormOps(OpRegistry& r) {
  r.add("BatchNormalization", {inferBatchNorm, runBatchNorm});
  r.add("InstanceNormalization", {inferInstanceNorm, runInstanceNorm});
  r.add("LayerNormalization", {inferLayerNorm, runLayerNorm});
  r.add("LRN", {inferLrn, runLrn});
}

}  // namespace partita::kernels
