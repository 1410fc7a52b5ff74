// Host ops that rearrange elements without changing their count: Transpose,
// DepthToSpace (DCR and CRD modes), SpaceToDepth and ReverseSequence. Transpose and the
// depth/space pair are one strided copy each; every dtype works.
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "kernels/op_registry.h"
#include "kernels/op_util.h"
#include "kernels/shape_common.h"
#include "kernels/shape_ops.h"
#include "kernels/shape_strided_copy.h"

namespace partita::kernels::shape {

namespace {

using ir::Dim;
using ir::DType;
using ir::TensorType;

// ---------------------------------------------------------------------------------------
// Transpose

void inferTranspose(InferContext& c) {
  const TensorType& in = c.input(0);
  if (!in.has_rank) {
    std::vector<int64_t> perm = c.attrs().getInts("perm");
    c.outputs[0] =
        perm.empty() ? TensorType::unranked(in.dtype) : ranked(in.dtype, std::vector<Dim>(perm.size()));
    return;
  }
  std::vector<int64_t> perm = transposePerm(c.attrs(), in.rank());
  if (perm.size() != in.rank())
    c.fail("perm has " + std::to_string(perm.size()) + " entries for an input of rank " +
           std::to_string(in.rank()));
  std::vector<bool> seen(perm.size(), false);
  std::vector<Dim> dims;
  for (int64_t p : perm) {
    if (p < 0 || p >= int64_t(perm.size()) || seen[size_t(p)]) c.fail("perm is not a permutation");
    seen[size_t(p)] = true;
    dims.push_back(in.dims[size_t(p)]);
  }
  c.outputs[0] = ranked(in.dtype, std::move(dims));
}

void runTranspose(KernelContext& c) {
  const ir::Tensor& in = c.inputs[0];
  const ir::Tensor& out = c.outputs[0];
  std::vector<int64_t> perm = transposePerm(c.attrs(), in.rank());
  std::vector<int64_t> in_strides = stridesOf(in.shape), src(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) src[k] = in_strides[size_t(perm[k])];
  copyStridedToDense(bytesOf(out), bytesOf(in), src, out.shape, ir::dtypeSize(in.dtype));
}

// ---------------------------------------------------------------------------------------
// DepthToSpace, SpaceToDepth

template <typename Ctx>
int64_t blockSize(const Ctx& c) {
  if (!c.attrs().has("blocksize")) c.fail("the blocksize attribute is required");
  int64_t b = c.attrs().getInt("blocksize", 0);
  if (b < 1) c.fail("blocksize must be positive");
  mulDims(c, b, b);  // blocksize^2 is used everywhere: it must fit
  return b;
}

template <typename Ctx>
bool crdMode(const Ctx& c) {
  std::string mode = c.attrs().getString("mode", "DCR");
  if (mode != "DCR" && mode != "CRD") c.fail("unknown mode '" + mode + "'");
  return mode == "CRD";
}

void inferDepthToSpace(InferContext& c) {
  const TensorType& in = c.input(0);
  const int64_t b = blockSize(c);
  crdMode(c);
  if (!in.has_rank) {
    c.outputs[0] = ranked(in.dtype, std::vector<Dim>(4));
    return;
  }
  if (in.rank() != 4) c.fail("input must have rank 4, got " + in.str());
  auto scale = [&](const Dim& d, int64_t f) { return d.isKnown() ? Dim::known(mulDims(c, d.value, f)) : Dim{}; };
  Dim ch{};
  if (in.dims[1].isKnown()) {
    if (in.dims[1].value % (b * b))
      c.fail("channels " + std::to_string(in.dims[1].value) + " not divisible by blocksize^2");
    ch = Dim::known(in.dims[1].value / (b * b));
  }
  c.outputs[0] = ranked(in.dtype, {in.dims[0], ch, scale(in.dims[2], b), scale(in.dims[3], b)});
}

void runDepthToSpace(KernelContext& c) {
  const ir::Tensor& in = c.inputs[0];
  const ir::Tensor& out = c.outputs[0];
  const int64_t b = blockSize(c);
  if (in.rank() != 4) c.fail("input must have rank 4");
  const int64_t n = in.shape[0], ch = in.shape[1] / (b * b), h = in.shape[2], w = in.shape[3];
  if (out.shape != std::vector<int64_t>{n, ch, mulDims(c, h, b), mulDims(c, w, b)}) c.fail("output shape does not match");
  // Output seen as [n, ch, h, b1, w, b2]; read from the input seen as
  // DCR: [n, b1, b2, ch, h, w] or CRD: [n, ch, b1, b2, h, w].
  const int64_t sw = 1, sh = w, plane = h * w;
  int64_t sb1, sb2, sc;
  if (crdMode(c)) {
    sc = b * b * plane;
    sb1 = b * plane;
    sb2 = plane;
  } else {
    sb1 = b * ch * plane;
    sb2 = ch * plane;
    sc = plane;
  }
  copyStridedToDense(bytesOf(out), bytesOf(in), {in.shape[1] * plane, sc, sh, sb1, sw, sb2},
                     {n, ch, h, b, w, b}, ir::dtypeSize(in.dtype));
}

void inferSpaceToDepth(InferContext& c) {
  const TensorType& in = c.input(0);
  const int64_t b = blockSize(c);
  if (!in.has_rank) {
    c.outputs[0] = ranked(in.dtype, std::vector<Dim>(4));
    return;
  }
  if (in.rank() != 4) c.fail("input must have rank 4, got " + in.str());
  auto shrink = [&](const Dim& d) {
    if (!d.isKnown()) return Dim{};
    if (d.value % b) c.fail("spatial size " + std::to_string(d.value) + " not divisible by blocksize");
    return Dim::known(d.value / b);
  };
  Dim ch = in.dims[1].isKnown() ? Dim::known(mulDims(c, in.dims[1].value, b * b)) : Dim{};
  c.outputs[0] = ranked(in.dtype, {in.dims[0], ch, shrink(in.dims[2]), shrink(in.dims[3])});
}

void runSpaceToDepth(KernelContext& c) {
  const ir::Tensor& in = c.inputs[0];
  const ir::Tensor& out = c.outputs[0];
  const int64_t b = blockSize(c);
  if (in.rank() != 4) c.fail("input must have rank 4");
  const int64_t n = in.shape[0], ch = in.shape[1], h = in.shape[2] / b, w = in.shape[3] / b;
  if (out.shape != std::vector<int64_t>{n, mulDims(c, ch, b * b), h, w}) c.fail("output shape does not match");
  // Output seen as [n, b1, b2, ch, h, w]; the input as [n, ch, h, b1, w, b2].
  const int64_t W = in.shape[3], plane = in.shape[2] * W;
  copyStridedToDense(bytesOf(out), bytesOf(in), {ch * plane, W, 1, plane, b * W, b}, {n, b, b, ch, h, w},
                     ir::dtypeSize(in.dtype));
}

// ---------------------------------------------------------------------------------------
// ReverseSequence

template <typename Ctx>
std::pair<int64_t, int64_t> sequenceAxes(const Ctx& c) {
  int64_t batch = c.attrs().getInt("batch_axis", 1), time = c.attrs().getInt("time_axis", 0);
  if (!((batch == 0 && time == 1) || (batch == 1 && time == 0)))
    c.fail("batch_axis and time_axis must be 0 and 1 in some order");
  return {batch, time};
}

void inferReverseSequence(InferContext& c) {
  checkArity(c, 2, 2);  // the kernel reads sequence_lens
  sequenceAxes(c);
  const TensorType& in = c.input(0);
  if (in.has_rank && in.rank() < 2) c.fail("input must have rank 2 or more");
  c.outputs[0] = in;
}

void runReverseSequence(KernelContext& c) {
  const ir::Tensor& in = c.inputs[0];
  const ir::Tensor& out = c.outputs[0];
  auto [batch_axis, time_axis] = sequenceAxes(c);
  const int64_t batch = in.shape[size_t(batch_axis)], time = in.shape[size_t(time_axis)];
  const std::vector<int64_t> lens = readInts(c.inputs[1]);
  if (int64_t(lens.size()) != batch) c.fail("sequence_lens must have one entry per batch");
  const std::vector<int64_t> strides = stridesOf(in.shape);
  const int64_t sb = strides[size_t(batch_axis)], st = strides[size_t(time_axis)];
  const int64_t inner = strides[1];
  const int64_t es = int64_t(ir::dtypeSize(in.dtype));
  if (in.nbytes()) std::memcpy(out.data, in.data, in.nbytes());
  for (int64_t bi = 0; bi < batch; ++bi) {
    const int64_t len = lens[size_t(bi)];
    if (len < 0 || len > time) c.fail("sequence length " + std::to_string(len) + " is out of range");
    for (int64_t t = 0; t < len; ++t)
      std::memcpy(bytesOf(out) + (bi * sb + t * st) * es, bytesOf(in) + (bi * sb + (len - 1 - t) * st) * es,
                  size_t(inner * es));
  }
}

}  // namespace

void registerPermuteOps(OpRegistry& r) {
  r.add("Transpose", {inferTranspose, runTranspose, 21});
  r.add("DepthToSpace", {inferDepthToSpace, runDepthToSpace});
  r.add("SpaceToDepth", {inferSpaceToDepth, runSpaceToDepth});
  r.add("ReverseSequence", {inferReverseSequence, runReverseSequence});
}

}  // namespace partita::kernels::shape
