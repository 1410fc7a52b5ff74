// CenterCropPad (opset 18): each listed axis cropped or zero-padded to the given
// length, centred (an odd difference puts the extra element at the end).
#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "kernels/op_util.h"
#include "kernels/shape_common.h"
#include "kernels/shape_ops.h"

namespace partita::kernels::shape {

namespace {

// The target length of every dimension, or nothing when the shape input is unknown.
template <typename Ctx>
std::vector<int64_t> cropTarget(const Ctx& c, const std::vector<int64_t>& in, const std::vector<int64_t>& shape) {
  const int64_t rank = int64_t(in.size());
  std::vector<int64_t> axes = c.attrs().getInts("axes");
  if (axes.empty())
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
  if (shape.size() != axes.size())
    c.fail("shape has " + std::to_string(shape.size()) + " values for " + std::to_string(axes.size()) + " axes");
  std::vector<int64_t> out = in;
  std::vector<bool> seen(size_t(rank), false);
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t a = normalizeAxis(axes[i], rank, c.node.op_type + " node '" + c.node.name + "': axes");
    if (seen[size_t(a)]) c.fail("axes lists axis " + std::to_string(a) + " twice");
    seen[size_t(a)] = true;
    if (shape[i] < 0) c.fail("shape has a negative value");
    out[size_t(a)] = shape[i];
  }
  return out;
}

void inferCenterCropPad(InferContext& c) {
  checkArity(c, 2, 2);
  const ir::TensorType& x = c.input(0);
  std::optional<std::vector<int64_t>> shape = knownInts(c, 1);
  if (!x.has_rank) {
    c.outputs[0] = ir::TensorType::unranked(x.dtype);
    return;
  }
  if (!shape) {
    c.outputs[0] = ir::TensorType{x.dtype, true, std::vector<ir::Dim>(x.rank())};
    return;
  }
  std::vector<int64_t> in(x.rank(), 0);  // the axes not listed keep their dims below
  std::vector<int64_t> out = cropTarget(c, in, *shape);
  ir::TensorType t = x;
  std::vector<int64_t> axes = c.attrs().getInts("axes");
  if (axes.empty())
    for (size_t i = 0; i < x.rank(); ++i) axes.push_back(int64_t(i));
  for (int64_t a : axes) {
    const size_t k = size_t(a < 0 ? a + int64_t(x.rank()) : a);
    t.dims[k] = ir::Dim::known(out[k]);
  }
  c.outputs[0] = t;
}

void runCenterCropPad(KernelContext& c) {
  const ir::Tensor& x = c.inputs[0];
  const ir::Tensor& y = c.outputs[0];
  std::vector<int64_t> out = cropTarget(c, x.shape, readInts(c.inputs[1]));
  if (out != y.shape) c.fail("output shape " + ir::shapeStr(y.shape) + " != " + ir::shapeStr(out));
  const size_t rank = x.rank(), es = ir::dtypeSize(x.dtype);
  std::memset(y.data, 0, y.nbytes());
  if (rank == 0) {
    std::memcpy(y.data, x.data, es);
    return;
  }
  // Per axis: the first input index copied and the first output index written, and how many.
  std::vector<int64_t> src0(rank), dst0(rank), len(rank);
  for (size_t a = 0; a < rank; ++a) {
    const int64_t in = x.shape[a], o = out[a];
    src0[a] = in > o ? (in - o) / 2 : 0;
    dst0[a] = o > in ? (o - in) / 2 : 0;
    len[a] = std::min(in, o);
  }
  for (int64_t l : len)
    if (l == 0) return;
  std::vector<int64_t> xs = stridesOf(x.shape), ys = stridesOf(y.shape);
  const auto* src = static_cast<const std::byte*>(x.data);
  auto* dst = static_cast<std::byte*>(y.data);
  const int64_t row = len[rank - 1];
  int64_t rows = 1;
  for (size_t a = 0; a + 1 < rank; ++a) rows *= len[a];
  for (int64_t r = 0; r < rows; ++r) {
    int64_t rest = r, so = src0[rank - 1] * xs[rank - 1], d = dst0[rank - 1] * ys[rank - 1];
    for (size_t a = rank - 1; a-- > 0;) {
      const int64_t i = rest % len[a];
      rest /= len[a];
      so += (src0[a] + i) * xs[a];
      d += (dst0[a] + i) * ys[a];
    }
    std::memcpy(dst + size_t(d) * es, src + size_t(so) * es, size_t(row) * es);
  }
}

}  // namespace

void registerCenterCropPadOps(OpRegistry& r) { r.add("CenterCropPad", {inferCenterCropPad, runCenterCropPad, 18}); }

}  // namespace partita::kernels::shape
