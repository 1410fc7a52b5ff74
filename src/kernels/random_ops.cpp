// Random ops: Bernoulli (opset 15), RandomUniform, RandomNormal, RandomUniformLike,
// RandomNormalLike (opset 1) and Multinomial (opset 7). With the `seed` attribute the
// draws come from a Mersenne twister seeded with it at every run, so every run draws
// the same numbers (ONNX Runtime seeds once per session and draws on; neither matches
// the other's or ONNX's reference numbers). Without it each run draws fresh ones. These
// ops are never folded into constants (OpDef::deterministic).
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/float_io.h"
#include "kernels/nn_ops.h"
#include "kernels/op_util.h"

namespace partita::kernels {

namespace {

std::mt19937_64 generator(const KernelContext& c) {
  std::mt19937_64 gen;
  if (c.attrs().has("seed")) gen.seed(uint64_t(int64_t(c.attrs().getFloat("seed", 0))));
  else gen.seed(std::random_device{}());
  return gen;
}

// The `dtype` attribute as a float type (default `def`).
ir::DType floatDtype(const InferContext& c, ir::DType def) {
  if (!c.attrs().has("dtype")) return def;
  const int64_t t = c.attrs().getInt("dtype", 0);
  ir::DType d = ir::dtypeFromOnnx(t);
  if (!fio::isFloatType(d)) c.fail("dtype " + std::to_string(t) + " is not a float type");
  return d;
}

void inferBernoulli(InferContext& c) {
  checkArity(c, 1, 1);
  fio::requireFloat(c, 0, "input");
  ir::TensorType out = c.input(0);
  if (c.attrs().has("dtype")) {
    const int64_t t = c.attrs().getInt("dtype", 0);
    out.dtype = ir::dtypeFromOnnx(t);
    if (out.dtype == ir::DType::kUndefined) c.fail("dtype " + std::to_string(t) + " is not a type partita supports");
  }
  c.outputs[0] = out;
}

void runBernoulli(KernelContext& c) {
  const ir::Tensor& p = c.inputs[0];
  const ir::Tensor& y = c.outputs[0];
  std::mt19937_64 gen = generator(c);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  const int64_t n = p.numel();
  for (int64_t i = 0; i < n; ++i) {
    const double prob = fio::get(p, i);
    if (!(prob >= 0 && prob <= 1)) c.fail("probability " + std::to_string(prob) + " is outside [0, 1]");
    const double v = uniform(gen) < prob ? 1.0 : 0.0;
    if (y.dtype == ir::DType::kBool) y.as<bool>()[i] = v != 0;
    else if (fio::isFloatType(y.dtype) || y.dtype == ir::DType::kInt32 || y.dtype == ir::DType::kInt64) fio::set(y, i, v);
    else PARTITA_DISPATCH_ALL(y.dtype, "Bernoulli", y.as<T>()[i] = T(v));
  }
}

// RandomUniform / RandomNormal: the shape attribute; *Like: the input's shape.
template <bool kLike>
void inferRandom(InferContext& c) {
  if (kLike) {
    checkArity(c, 1, 1);
    const ir::TensorType& x = c.input(0);
    ir::TensorType out = x;
    out.dtype = floatDtype(c, fio::isFloatType(x.dtype) ? x.dtype : ir::DType::kUndefined);
    if (out.dtype == ir::DType::kUndefined) c.fail("needs a float dtype attribute for a non-float input");
    c.outputs[0] = out;
    return;
  }
  if (c.numInputs() != 0) c.fail("takes no inputs");
  if (!c.attrs().has("shape")) c.fail("attribute shape is required");
  std::vector<int64_t> shape = c.attrs().getInts("shape");
  for (int64_t d : shape)
    if (d < 0) c.fail("shape has a negative dimension");
  c.outputs[0] = ir::TensorType::of(floatDtype(c, ir::DType::kFloat32), shape);
}

template <bool kNormal>
void runRandom(KernelContext& c) {
  const ir::Tensor& y = c.outputs[0];
  std::mt19937_64 gen = generator(c);
  const int64_t n = y.numel();
  if constexpr (kNormal) {
    std::normal_distribution<double> d(c.attrs().getFloat("mean", 0), c.attrs().getFloat("scale", 1));
    for (int64_t i = 0; i < n; ++i) fio::set(y, i, d(gen));
  } else {
    const double lo = c.attrs().getFloat("low", 0), hi = c.attrs().getFloat("high", 1);
    if (!(lo <= hi)) c.fail("low is above high");
    std::uniform_real_distribution<double> d(lo, hi);
    for (int64_t i = 0; i < n; ++i) fio::set(y, i, d(gen));
  }
}

// Multinomial: sample_size draws per row from the softmax of the row's (unnormalised
// log-probability) values.
void inferMultinomial(InferContext& c) {
  checkArity(c, 1, 1);
  fio::requireFloat(c, 0, "input");
  const ir::TensorType& x = c.input(0);
  if (x.has_rank && x.rank() != 2) c.fail("input must be [batch, classes], got " + x.str());
  const int64_t samples = c.attrs().getInt("sample_size", 1);
  if (samples < 1) c.fail("sample_size must be positive");
  const int64_t t = c.attrs().getInt("dtype", 6);
  ir::DType d = ir::dtypeFromOnnx(t);
  if (d != ir::DType::kInt32 && d != ir::DType::kInt64) c.fail("dtype must be int32 or int64");
  c.outputs[0] = ir::TensorType{d, true, {x.has_rank ? x.dims[0] : ir::Dim{}, ir::Dim::known(samples)}};
}

void runMultinomial(KernelContext& c) {
  const ir::Tensor& x = c.inputs[0];
  const ir::Tensor& y = c.outputs[0];
  if (x.rank() != 2 || x.shape[1] < 1) c.fail("input must be [batch, classes] with at least one class");
  const int64_t batch = x.shape[0], classes = x.shape[1], samples = y.shape[1];
  std::vector<double> v = fio::read(c, x, "input"), cdf(static_cast<size_t>(classes));
  std::mt19937_64 gen = generator(c);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  for (int64_t b = 0; b < batch; ++b) {
    const double* row = v.data() + b * classes;
    double m = row[0], total = 0;
    for (int64_t k = 1; k < classes; ++k) m = std::max(m, row[k]);
    for (int64_t k = 0; k < classes; ++k) cdf[size_t(k)] = total += std::exp(row[k] - m);
    for (int64_t s = 0; s < samples; ++s) {
      const double u = uniform(gen) * total;
      int64_t k = int64_t(std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
      if (k >= classes) k = classes - 1;
      fio::set(y, b * samples + s, double(k));
    }
  }
}

}  // namespace

void registerRandomOps(OpRegistry& r) {
  // newest 17: unchanged since (Bernoulli 15, the others 1 and 7); not deterministic.
  r.add("Bernoulli", {inferBernoulli, runBernoulli, 17, false});
  r.add("RandomUniform", {inferRandom<false>, runRandom<false>, 17, false});
  r.add("RandomNormal", {inferRandom<false>, runRandom<true>, 17, false});
  r.add("RandomUniformLike", {inferRandom<true>, runRandom<false>, 17, false});
  r.add("RandomNormalLike", {inferRandom<true>, runRandom<true>, 17, false});
  r.add("Multinomial", {inferMultinomial, runMultinomial, 17, false});
}

}  // namespace partita::kernels
