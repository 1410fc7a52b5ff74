// Bernoulli (opset 15): 1 with each input element's probability, else 0, in the
// `dtype` attribute's type (default: the input's). With the `seed` attribute the draws
// are reproducible run to run (a Mersenne twister seeded with it; other runtimes draw
// other numbers from the same seed); without it each run draws fresh ones.
#include <random>
#include <vector>

#include "kernels/float_io.h"
#include "kernels/nn_ops.h"
#include "kernels/op_util.h"

namespace partita::kernels {

namespace {

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
  std::mt19937_64 gen;
  if (c.attrs().has("seed")) gen.seed(uint64_t(int64_t(c.attrs().getFloat("seed", 0))));
  else gen.seed(std::random_device{}());
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

}  // namespace

void registerRandomOps(OpRegistry& r) { r.add("Bernoulli", {inferBernoulli, runBernoulli}); }

}  // namespace partita::kernels
