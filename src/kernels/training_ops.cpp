// The optimizers of domain ai.onnx.preview.training (version 1): Adagrad, Momentum
// (standard and Nesterov) and Adam. Each takes a learning rate R and a step count T
// (scalars), then n tensors to optimise and their gradients and accumulators, all as
// separate inputs, and returns the n updated tensors followed by the updated
// accumulators. Computed in double, stored in each tensor's float type.
#include <cmath>
#include <vector>

#include "kernels/float_io.h"
#include "kernels/nn_ops.h"
#include "kernels/op_util.h"

namespace partita::kernels {

namespace {

constexpr char kTrainingDomain[] = "ai.onnx.preview.training";

// `groups` tensors per optimised tensor among the inputs after R and T (X, G and the
// accumulators); the outputs are X and the accumulators.
template <int kGroups>
void inferOptimizer(InferContext& c) {
  if (c.numInputs() < 2 + kGroups || (c.numInputs() - 2) % kGroups != 0)
    c.fail("expects R, T and " + std::to_string(kGroups) + " inputs per optimised tensor, got " +
           std::to_string(c.numInputs()) + " inputs");
  const size_t n = (c.numInputs() - 2) / kGroups;
  if (c.outputs.size() != n * (kGroups - 1))
    c.fail("expects " + std::to_string(n * (kGroups - 1)) + " outputs for " + std::to_string(n) +
           " optimised tensors, got " + std::to_string(c.outputs.size()));
  fio::requireFloat(c, 0, "R");
  fio::requireIndex(c, 1, "T");
  for (size_t i = 2; i < c.numInputs(); ++i) fio::requireFloat(c, i, "input " + std::to_string(i));
  for (size_t i = 0; i < n; ++i) {
    const ir::TensorType& x = c.input(2 + i);
    for (int g = 1; g < kGroups; ++g) {
      const ir::TensorType& o = c.input(2 + size_t(g) * n + i);
      if (x.isStatic() && o.isStatic() && x.staticShape() != o.staticShape())
        c.fail("input " + std::to_string(2 + size_t(g) * n + i) + " " + o.str() + " does not match X " + x.str());
    }
    c.outputs[i] = x;  // X_new
    for (int g = 2; g < kGroups; ++g) c.outputs[size_t(g - 1) * n + i] = c.input(2 + size_t(g) * n + i);
  }
}

struct Step {
  double r = 0;
  int64_t t = 0;
};

Step readStep(KernelContext& c) {
  Step s;
  if (c.inputs[0].numel() != 1 || c.inputs[1].numel() != 1) c.fail("R and T must be scalars");
  s.r = fio::get(c.inputs[0], 0);
  s.t = readInts(c.inputs[1])[0];
  return s;
}

// Calls update(x, g, acc..., out...) over each optimised tensor's elements.
template <int kGroups, typename Update>
void runOptimizer(KernelContext& c, Update update) {
  const size_t n = (c.inputs.size() - 2) / kGroups;
  for (size_t i = 0; i < n; ++i) {
    std::vector<std::vector<double>> in(kGroups);
    for (int g = 0; g < kGroups; ++g) {
      in[size_t(g)] = fio::read(c, c.inputs[2 + size_t(g) * n + i], "input");
      if (in[size_t(g)].size() != in[0].size()) c.fail("the inputs of optimised tensor " + std::to_string(i) + " differ in size");
    }
    std::vector<std::vector<double>> out(kGroups - 1, std::vector<double>(in[0].size()));
    for (size_t e = 0; e < in[0].size(); ++e) update(in, out, e);
    for (int g = 0; g + 1 < kGroups; ++g) fio::write(c, c.outputs[size_t(g) * n + i], out[size_t(g)]);
  }
}

void runAdagrad(KernelContext& c) {
  const Step s = readStep(c);
  const double decay = c.attrs().getFloat("decay_factor", 0), eps = c.attrs().getFloat("epsilon", 1e-6f);
  const double norm = c.attrs().getFloat("norm_coefficient", 0);
  const double r = s.r / (1 + double(s.t) * decay);
  runOptimizer<3>(c, [&](auto& in, auto& out, size_t e) {
    const double x = in[0][e], g = norm * x + in[1][e], h = in[2][e] + g * g;
    out[0][e] = x - r * g / (std::sqrt(h) + eps);
    out[1][e] = h;
  });
}

void runMomentum(KernelContext& c) {
  const Step s = readStep(c);
  const double alpha = c.attrs().getFloat("alpha", 0), beta = c.attrs().getFloat("beta", 0);
  const double norm = c.attrs().getFloat("norm_coefficient", 0);
  const std::string mode = c.attrs().getString("mode", "standard");
  if (mode != "standard" && mode != "nesterov") c.fail("unknown mode '" + mode + "' (standard or nesterov)");
  const double beta_t = s.t > 0 ? beta : 1.0;
  const bool nesterov = mode == "nesterov";
  runOptimizer<3>(c, [&](auto& in, auto& out, size_t e) {
    const double x = in[0][e], g = norm * x + in[1][e], v = alpha * in[2][e] + beta_t * g;
    out[0][e] = nesterov ? x - s.r * (g + alpha * v) : x - s.r * v;
    out[1][e] = v;
  });
}

void runAdam(KernelContext& c) {
  const Step s = readStep(c);
  const double alpha = c.attrs().getFloat("alpha", 0.9f), beta = c.attrs().getFloat("beta", 0.999f);
  const double eps = c.attrs().getFloat("epsilon", 1e-6f), norm = c.attrs().getFloat("norm_coefficient", 0);
  const double post = c.attrs().getFloat("norm_coefficient_post", 0);
  const double r = s.t > 0 ? s.r * std::sqrt(1 - std::pow(beta, double(s.t))) / (1 - std::pow(alpha, double(s.t))) : s.r;
  runOptimizer<4>(c, [&](auto& in, auto& out, size_t e) {
    const double x = in[0][e], g = norm * x + in[1][e];
    const double v = alpha * in[2][e] + (1 - alpha) * g, h = beta * in[3][e] + (1 - beta) * g * g;
    out[0][e] = (1 - post) * (x - r * (v / (std::sqrt(h) + eps)));
    out[1][e] = v;
    out[2][e] = h;
  });
}

}  // namespace

void registerTrainingOps(OpRegistry& r) {
  r.add("Adagrad", {inferOptimizer<3>, runAdagrad}, kTrainingDomain);
  r.add("Momentum", {inferOptimizer<3>, runMomentum}, kTrainingDomain);
  r.add("Adam", {inferOptimizer<4>, runAdam}, kTrainingDomain);
}

}  // namespace partita::kernels
