// Host Expand (broadcast to a shape) and Tile (repeat along each axis). Both are one
// strided copy that reads repeated elements with source stride 0, so every dtype works.
#include <algorithm>
#include <optional>
#include <string>
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

void inferExpand(InferContext& c) {
  const TensorType& in = c.input(0);
  std::optional<std::vector<int64_t>> shape = knownInts(c, 1);
  if (shape) {
    for (int64_t s : *shape)
      if (s < 0) c.fail("invalid shape entry " + std::to_string(s));
    TensorType out;
    if (!broadcastTypes(in, TensorType::of(in.dtype, *shape), out))
      c.fail("cannot expand " + in.str() + " to " + ir::shapeStr(*shape));
    out.dtype = in.dtype;
    c.outputs[0] = std::move(out);
    return;
  }
  std::optional<int64_t> n = staticLength(c, 1);
  if (!n || !in.has_rank) {
    c.outputs[0] = TensorType::unranked(in.dtype);
    return;
  }
  // A known input dim other than 1 is the result; anything else depends on the shape.
  const size_t rank = std::max(in.rank(), size_t(*n));
  std::vector<Dim> dims(rank);
  for (size_t i = 0; i < in.rank(); ++i) {
    const Dim& d = in.dims[i];
    if (d.isKnown() && d.value != 1) dims[rank - in.rank() + i] = d;
  }
  c.outputs[0] = ranked(in.dtype, std::move(dims));
}

void runExpand(KernelContext& c) {
  const ir::Tensor& in = c.inputs[0];
  const ir::Tensor& out = c.outputs[0];
  if (out.rank() < in.rank()) c.fail("output rank is below the input's");
  const size_t lead = out.rank() - in.rank();
  std::vector<int64_t> in_strides = stridesOf(in.shape), src(out.rank(), 0);
  for (size_t i = 0; i < in.rank(); ++i) {
    const int64_t d = in.shape[i], o = out.shape[lead + i];
    if (d != o && d != 1)
      c.fail("cannot expand " + ir::shapeStr(in.shape) + " to " + ir::shapeStr(out.shape));
    src[lead + i] = d == 1 ? 0 : in_strides[i];
  }
  if (out.numel() == 0) return;
  copyStridedToDense(bytesOf(out), bytesOf(in), src, out.shape, ir::dtypeSize(in.dtype));
}

void inferTile(InferContext& c) {
  const TensorType& in = c.input(0);
  std::optional<std::vector<int64_t>> repeats = knownInts(c, 1);
  if (!in.has_rank) {
    std::optional<int64_t> n =
        repeats ? std::optional<int64_t>(int64_t(repeats->size())) : staticLength(c, 1);
    c.outputs[0] = n ? ranked(in.dtype, std::vector<Dim>(size_t(*n))) : TensorType::unranked(in.dtype);
    return;
  }
  if (!repeats) {
    c.outputs[0] = ranked(in.dtype, std::vector<Dim>(in.rank()));
    return;
  }
  if (repeats->size() != in.rank())
    c.fail("repeats has " + std::to_string(repeats->size()) + " entries for an input of rank " +
           std::to_string(in.rank()));
  std::vector<Dim> dims = in.dims;
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t r = (*repeats)[i];
    if (r < 0) c.fail("negative repeat " + std::to_string(r));
    if (dims[i].isKnown() || r == 0)
      dims[i] = Dim::known(dims[i].isKnown() ? mulDims(c, dims[i].value, r) : 0);
    else if (r != 1)
      dims[i] = Dim{};
  }
  c.outputs[0] = ranked(in.dtype, std::move(dims));
}

void runTile(KernelContext& c) {
  const ir::Tensor& in = c.inputs[0];
  const ir::Tensor& out = c.outputs[0];
  std::vector<int64_t> repeats = readInts(c.inputs[1]);
  if (repeats.size() != in.rank() || out.rank() != in.rank()) c.fail("repeats do not match the input rank");
  // The output seen as [r0, d0, r1, d1, ...]: repeats read the input with stride 0.
  std::vector<int64_t> in_strides = stridesOf(in.shape), shape, src;
  for (size_t i = 0; i < in.rank(); ++i) {
    if (repeats[i] < 0 || out.shape[i] != mulDims(c, in.shape[i], repeats[i]))
      c.fail("output shape does not match the repeats");
    shape.insert(shape.end(), {repeats[i], in.shape[i]});
    src.insert(src.end(), {0, in_strides[i]});
  }
  if (out.numel() == 0) return;
  copyStridedToDense(bytesOf(out), bytesOf(in), src, shape, ir::dtypeSize(in.dtype));
}

}  // namespace

void registerExpandTileOps(OpRegistry& r) {
  r.add("Expand", {inferExpand, runExpand});
  r.add("Tile", {inferTile, runTile});
}

}  // namespace partita::kernels::shape
