// Losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (opsets 12 and 13),
// every reduction (none, sum, mean) with optional class weights and ignore_index.
// Input is [N, C, d1..dk], the target [N, d1..dk]; computed in double.
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/float_io.h"
#include "kernels/nn_ops.h"
#include "kernels/op_util.h"

namespace partita::kernels {

namespace {

enum class LossReduction { kNone, kSum, kMean };

template <typename Ctx>
LossReduction lossReduction(const Ctx& c) {
  std::string r = c.attrs().getString("reduction", "mean");
  if (r == "none") return LossReduction::kNone;
  if (r == "sum") return LossReduction::kSum;
  if (r == "mean") return LossReduction::kMean;
  c.fail("unknown reduction '" + r + "' (none, sum or mean)");
}

// Shared by both ops: input 0 scores/log-probabilities, 1 the target, 2 the weights.
void inferLoss(InferContext& c, bool sce) {
  checkArity(c, 2, 3);
  fio::requireFloat(c, 0, "input");
  fio::requireIndex(c, 1, "target");
  fio::requireFloat(c, 2, "weight");
  const ir::TensorType& x = c.input(0);
  const ir::TensorType& t = c.input(1);
  if (c.hasInput(2) && c.input(2).dtype != x.dtype) c.fail("weight's dtype differs from the input's");
  if (x.has_rank && x.rank() < 2) c.fail("input must have rank >= 2 ([N, C, ...]), got " + x.str());
  if (x.has_rank && t.has_rank) {
    if (t.rank() + 1 != x.rank()) c.fail("target " + t.str() + " must have rank one less than input " + x.str());
    for (size_t i = 0; i < t.rank(); ++i) {
      const ir::Dim& a = x.dims[i == 0 ? 0 : i + 1];
      const ir::Dim& b = t.dims[i];
      if (a.isKnown() && b.isKnown() && a.value != b.value)
        c.fail("target " + t.str() + " does not match input " + x.str());
    }
  }
  if (c.hasInput(2) && c.input(2).has_rank && c.input(2).rank() != 1) c.fail("weight must be 1-D");
  const LossReduction red = lossReduction(c);
  if (red == LossReduction::kNone) {
    if (t.has_rank) {
      ir::TensorType out = t;
      out.dtype = x.dtype;
      if (x.has_rank)  // known dims of either
        for (size_t i = 0; i < out.rank(); ++i)
          if (!out.dims[i].isKnown()) out.dims[i] = x.dims[i == 0 ? 0 : i + 1];
      c.outputs[0] = out;
    } else if (x.has_rank) {
      ir::TensorType out{x.dtype, true, {}};
      for (size_t i = 0; i < x.rank(); ++i)
        if (i != 1) out.dims.push_back(x.dims[i]);
      c.outputs[0] = out;
    } else {
      c.outputs[0] = ir::TensorType::unranked(x.dtype);
    }
  } else {
    c.outputs[0] = ir::TensorType{x.dtype, true, {}};
  }
  if (sce && c.outputs.size() > 1) c.outputs[1] = x;
}

void inferNll(InferContext& c) { inferLoss(c, false); }
void inferSce(InferContext& c) { inferLoss(c, true); }

// The loss of log-probabilities `logp` ([N, C, D] flattened, D the product of d1..dk)
// against `target` ([N, D]), written to output 0.
void nllLoss(KernelContext& c, const std::vector<double>& logp, const std::vector<int64_t>& shape) {
  const ir::Tensor& target = c.inputs[1];
  const int64_t n = shape[0], classes = shape[1];
  int64_t d = 1;
  for (size_t i = 2; i < shape.size(); ++i) d *= shape[i];
  if (target.numel() != n * d)
    c.fail("target " + ir::shapeStr(target.shape) + " does not match input " + ir::shapeStr(shape));
  std::vector<double> weight;
  if (c.hasInput(2)) {
    weight = fio::read(c, c.inputs[2], "weight");
    if (int64_t(weight.size()) != classes)
      c.fail("weight has " + std::to_string(weight.size()) + " values for " + std::to_string(classes) + " classes");
  }
  const bool has_ignore = c.attrs().has("ignore_index");
  const int64_t ignore = c.attrs().getInt("ignore_index", 0);
  std::vector<double> loss(size_t(n * d));
  double weight_sum = 0;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t j = 0; j < d; ++j) {
      const int64_t i = b * d + j;
      const int64_t cls = int64_t(fio::get(target, i));
      if (has_ignore && cls == ignore) {
        loss[size_t(i)] = 0;
        continue;
      }
      if (cls < 0 || cls >= classes)
        c.fail("target value " + std::to_string(cls) + " is out of range [0, " + std::to_string(classes) + ")");
      const double w = weight.empty() ? 1.0 : weight[size_t(cls)];
      loss[size_t(i)] = -logp[size_t((b * classes + cls) * d + j)] * w;
      weight_sum += w;
    }
  const LossReduction red = lossReduction(c);
  if (red == LossReduction::kNone) {
    fio::write(c, c.outputs[0], loss);
    return;
  }
  double sum = 0;
  for (double v : loss) sum += v;
  if (red == LossReduction::kMean) sum /= weight_sum;  // 0/0 is NaN, as ONNX's reference gives
  fio::write(c, c.outputs[0], {sum});
}

void runNll(KernelContext& c) {
  const ir::Tensor& x = c.inputs[0];
  if (x.rank() < 2) c.fail("input must have rank >= 2");
  nllLoss(c, fio::read(c, x, "input"), x.shape);
}

void runSce(KernelContext& c) {
  const ir::Tensor& x = c.inputs[0];
  if (x.rank() < 2) c.fail("input must have rank >= 2");
  std::vector<double> v = fio::read(c, x, "scores");
  const int64_t n = x.shape[0], classes = x.shape[1];
  int64_t d = 1;
  for (size_t i = 2; i < x.rank(); ++i) d *= x.shape[i];
  // log_softmax over the class axis
  for (int64_t b = 0; b < n; ++b)
    for (int64_t j = 0; j < d; ++j) {
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t k = 0; k < classes; ++k) m = std::max(m, v[size_t((b * classes + k) * d + j)]);
      double s = 0;
      for (int64_t k = 0; k < classes; ++k) s += std::exp(v[size_t((b * classes + k) * d + j)] - m);
      const double lse = m + std::log(s);
      for (int64_t k = 0; k < classes; ++k) v[size_t((b * classes + k) * d + j)] -= lse;
    }
  if (c.outputs.size() > 1 && c.outputs[1].defined()) fio::write(c, c.outputs[1], v);
  nllLoss(c, v, x.shape);
}

}  // namespace

void registerLossOps(OpRegistry& r) {
  r.add("NegativeLogLikelihoodLoss", {inferNll, runNll});
  r.add("SoftmaxCrossEntropyLoss", {inferSce, runSce});
}

}  // namespace partita::kernels
