// GroupNormalization: the channels split into num_groups groups, each group of each
// sample normalised by its own mean and variance, then scaled and shifted. Opset 18
// takes one scale and bias per group (a definition ONNX later deprecated); opset 21 one
// per channel. Statistics in double.
#include <cmath>
#include <vector>

#include "kernels/float_io.h"
#include "kernels/nn_ops.h"
#include "kernels/op_util.h"

namespace partita::kernels {

namespace {

void inferGroupNorm(InferContext& c) {
  checkArity(c, 3, 3);
  fio::requireFloat(c, 0, "X");
  fio::requireFloat(c, 1, "scale");
  fio::requireFloat(c, 2, "bias");
  if (!c.attrs().has("num_groups")) c.fail("attribute num_groups is required");
  const int64_t groups = c.attrs().getInt("num_groups", 1);
  if (groups < 1) c.fail("num_groups must be positive");
  const ir::TensorType& x = c.input(0);
  if (x.has_rank && x.rank() < 2) c.fail("X must be [N, C, ...], got " + x.str());
  const bool per_channel = c.opset() >= 21;
  if (x.has_rank && x.dims[1].isKnown()) {
    const int64_t ch = x.dims[1].value;
    if (ch % groups != 0)
      c.fail(std::to_string(ch) + " channels do not divide into " + std::to_string(groups) + " groups");
    const int64_t want = per_channel ? ch : groups;
    for (size_t i = 1; i < 3; ++i) {
      const ir::TensorType& t = c.input(i);
      if (t.has_rank && (t.rank() != 1 || (t.dims[0].isKnown() && t.dims[0].value != want)))
        c.fail(std::string(i == 1 ? "scale" : "bias") + " must have " + std::to_string(want) + " values (one per " +
               (per_channel ? "channel" : "group") + " at opset " + std::to_string(c.opset()) + "), got " + t.str());
    }
  }
  sameAsInput(c);
}

void runGroupNorm(KernelContext& c) {
  const ir::Tensor& x = c.inputs[0];
  const int64_t groups = c.attrs().getInt("num_groups", 1);
  const double eps = c.attrs().getFloat("epsilon", 1e-5f);
  if (x.rank() < 2) c.fail("X must be [N, C, ...], got " + ir::shapeStr(x.shape));
  const int64_t n = x.shape[0], ch = x.shape[1];
  if (ch % groups != 0) c.fail("channels do not divide into groups");
  int64_t spatial = 1;
  for (size_t i = 2; i < x.rank(); ++i) spatial *= x.shape[i];
  const bool per_channel = c.opset() >= 21;
  std::vector<double> v = fio::read(c, x, "X"), scale = fio::read(c, c.inputs[1], "scale"),
                      bias = fio::read(c, c.inputs[2], "bias");
  const size_t want = size_t(per_channel ? ch : groups);
  if (scale.size() != want || bias.size() != want) c.fail("scale and bias must have " + std::to_string(want) + " values");
  const int64_t per_group = ch / groups, len = per_group * spatial;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t g = 0; g < groups; ++g) {
      double* p = v.data() + (b * ch + g * per_group) * spatial;
      double mean = 0, var = 0;
      for (int64_t i = 0; i < len; ++i) mean += p[i];
      mean /= double(len > 0 ? len : 1);
      for (int64_t i = 0; i < len; ++i) var += (p[i] - mean) * (p[i] - mean);
      var /= double(len > 0 ? len : 1);
      const double inv = 1.0 / std::sqrt(var + eps);
      for (int64_t k = 0; k < per_group; ++k) {
        const size_t at = size_t(per_channel ? g * per_group + k : g);
        for (int64_t i = 0; i < spatial; ++i) {
          double& e = p[k * spatial + i];
          e = (e - mean) * inv * scale[at] + bias[at];
        }
      }
    }
  fio::write(c, c.outputs[0], v);
}

}  // namespace

void registerGroupNormOps(OpRegistry& r) { r.add("GroupNormalization", {inferGroupNorm, runGroupNorm, 21}); }

}  // namespace partita::kernels
