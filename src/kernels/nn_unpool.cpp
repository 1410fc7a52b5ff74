// MaxUnpool (opsets 9, 11): scatters each value of X to the position its index (as
// MaxPool's Indices output gives it: flat over the whole output tensor) names in a
// zero-filled output, whose spatial size is output_shape when given, else
// (in - 1) * stride + kernel - pads.
#include <cstring>
#include <vector>

#include "kernels/nn_ops.h"
#include "kernels/op_util.h"

namespace partita::kernels {

namespace {

template <typename Ctx>
std::vector<int64_t> unpoolShape(const Ctx& c, const std::vector<int64_t>& in, const ir::Tensor* output_shape) {
  const size_t nd = in.size() - 2;
  std::vector<int64_t> kernel = c.attrs().getInts("kernel_shape");
  if (kernel.size() != nd) c.fail("kernel_shape must have " + std::to_string(nd) + " values");
  std::vector<int64_t> strides = c.attrs().getInts("strides", std::vector<int64_t>(nd, 1));
  std::vector<int64_t> pads = c.attrs().getInts("pads", std::vector<int64_t>(2 * nd, 0));
  if (strides.size() != nd || pads.size() != 2 * nd) c.fail("strides or pads do not match the input rank");
  std::vector<int64_t> out = {in[0], in[1]};
  for (size_t i = 0; i < nd; ++i) {
    if (kernel[i] < 1 || strides[i] < 1 || pads[i] < 0 || pads[nd + i] < 0)
      c.fail("kernel_shape, strides and pads must be positive");
    int64_t v = addDims(c, mulDims(c, in[i + 2] - 1, strides[i]), kernel[i]) - pads[i] - pads[nd + i];
    if (v < 0) c.fail("the output would have a negative size");
    out.push_back(v);
  }
  if (output_shape) {
    std::vector<int64_t> given = readInts(*output_shape);
    if (given.size() != in.size()) c.fail("output_shape must have " + std::to_string(in.size()) + " values");
    for (size_t i = 0; i < given.size(); ++i)
      if (given[i] < 0) c.fail("output_shape has a negative value");
    return given;
  }
  return out;
}

void inferMaxUnpool(InferContext& c) {
  checkArity(c, 2, 3);
  const ir::TensorType& x = c.input(0);
  if (x.has_rank && x.rank() < 3) c.fail("X must be [N, C, D1, ...], got " + x.str());
  if (c.input(1).dtype != ir::DType::kInt64) c.fail("I must be int64");
  if (!c.attrs().has("kernel_shape")) c.fail("attribute kernel_shape is required");
  if (x.has_rank && x.rank() != c.attrs().getInts("kernel_shape").size() + 2)
    c.fail("kernel_shape does not match X " + x.str());
  const bool shape_known = !c.hasInput(2) || c.value(2);
  if (!x.isStatic() || !shape_known) {
    c.outputs[0] = x.has_rank ? ir::TensorType{x.dtype, true, std::vector<ir::Dim>(x.rank())}
                              : ir::TensorType::unranked(x.dtype);
    return;
  }
  c.outputs[0] = ir::TensorType::of(x.dtype, unpoolShape(c, x.staticShape(), c.hasInput(2) ? c.value(2) : nullptr));
}

void runMaxUnpool(KernelContext& c) {
  const ir::Tensor& x = c.inputs[0];
  const ir::Tensor& idx = c.inputs[1];
  const ir::Tensor& y = c.outputs[0];
  if (x.rank() < 3 || y.rank() != x.rank()) c.fail("X must be [N, C, D1, ...], got " + ir::shapeStr(x.shape));
  if (idx.numel() != x.numel()) c.fail("I must have X's shape");
  const size_t es = ir::dtypeSize(x.dtype);
  std::memset(y.data, 0, y.nbytes());
  // The indices count positions of the default output (MaxPool's input); with
  // output_shape they keep their coordinates in a (larger) output.
  const std::vector<int64_t> base = unpoolShape(c, x.shape, nullptr);
  const int64_t total = ir::shapeNumel(base);
  const auto* src = static_cast<const std::byte*>(x.data);
  auto* dst = static_cast<std::byte*>(y.data);
  const int64_t* ind = idx.as<const int64_t>();
  const std::vector<int64_t> ystr = stridesOf(y.shape);
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (ind[i] < 0 || ind[i] >= total)
      c.fail("index " + std::to_string(ind[i]) + " is outside the output " + ir::shapeStr(base));
    int64_t rest = ind[i], at = 0;
    for (size_t d = base.size(); d-- > 0;) {
      const int64_t v = rest % base[d];
      rest /= base[d];
      if (v >= y.shape[d])
        c.fail("index " + std::to_string(ind[i]) + " falls outside output_shape " + ir::shapeStr(y.shape));
      at += v * ystr[d];
    }
    std::memcpy(dst + size_t(at) * es, src + size_t(i) * es, es);
  }
}

}  // namespace

void registerUnpoolOps(OpRegistry& r) { r.add("MaxUnpool", {inferMaxUnpool, runMaxUnpool}); }

}  // namespace partita::kernels
