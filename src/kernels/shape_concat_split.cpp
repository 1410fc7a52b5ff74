// Host Concat and Split: joining inputs along an axis and cutting one input into
// outputs along an axis (split sizes from the attribute before opset 13, the input
// from 13, or equal parts with a smaller last one). Bytes move by copyStrided, so every
// dtype works.
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

void inferConcat(InferContext& c) {
  if (!c.attrs().has("axis")) c.fail("the axis attribute is required");
  const DType dtype = c.input(0).dtype;
  const TensorType* first = nullptr;
  bool all_ranked = true;
  for (size_t i = 0; i < c.numInputs(); ++i) {
    if (!c.input(i).has_rank)
      all_ranked = false;
    else if (!first)
      first = &c.input(i);
  }
  if (!first) {
    c.outputs[0] = TensorType::unranked(dtype);
    return;
  }
  const size_t rank = first->rank();
  const size_t axis = size_t(axisIn(c, c.attrs().getInt("axis", 0), int64_t(rank)));
  std::vector<Dim> dims = first->dims;
  int64_t total = 0;
  bool total_known = all_ranked;
  for (size_t i = 0; i < c.numInputs(); ++i) {
    const TensorType& t = c.input(i);
    if (!t.has_rank) continue;
    if (t.rank() != rank)
      c.fail("input " + std::to_string(i) + " has rank " + std::to_string(t.rank()) + ", input 0 has " +
             std::to_string(rank));
    for (size_t k = 0; k < rank; ++k) {
      if (k == axis) continue;
      if (t.dims[k].isKnown() && dims[k].isKnown() && t.dims[k].value != dims[k].value)
        c.fail("inputs disagree on dimension " + std::to_string(k) + ": " + first->str() + " vs " + t.str());
      if (!dims[k].isKnown() && (t.dims[k].isKnown() || dims[k].symbol.empty())) dims[k] = t.dims[k];
    }
    if (t.dims[axis].isKnown())
      total = addDims(c, total, t.dims[axis].value);
    else
      total_known = false;
  }
  dims[axis] = total_known ? Dim::known(total) : Dim{};
  c.outputs[0] = ranked(dtype, std::move(dims));
}

void runConcat(KernelContext& c) {
  const ir::Tensor& out = c.outputs[0];
  const int64_t rank = int64_t(out.rank());
  const int64_t axis = axisIn(c, c.attrs().getInt("axis", 0), rank);
  const size_t es = ir::dtypeSize(out.dtype);
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < axis; ++k) outer *= out.shape[size_t(k)];
  for (int64_t k = axis + 1; k < rank; ++k) inner *= out.shape[size_t(k)];
  const int64_t out_row = out.shape[size_t(axis)] * inner;
  int64_t offset = 0;
  for (const ir::Tensor& in : c.inputs) {
    if (in.rank() != out.rank()) c.fail("inputs have different ranks");
    const int64_t row = in.shape[size_t(axis)] * inner;
    if (offset + row > out_row) c.fail("inputs do not fit the output " + ir::shapeStr(out.shape));
    copyStrided(bytesOf(out) + offset * int64_t(es), {out_row, 1}, bytesOf(in), {row, 1}, {outer, row}, es);
    offset += row;
  }
}

// The sizes of Split's outputs along the axis of length `dim` (-1: unknown). `split` is
// the split input's value (opset 13+) when given and known. Returns nothing when the
// sizes depend on an unknown value.
template <typename Ctx>
std::optional<std::vector<int64_t>> splitSizes(const Ctx& c, size_t outputs, int64_t dim, bool split_input,
                                               const ir::Tensor* split) {
  std::vector<int64_t> sizes;
  if (c.opset() < 13 && c.attrs().has("split")) {
    sizes = c.attrs().getInts("split");
  } else if (c.opset() >= 13 && split_input) {
    if (!split) return std::nullopt;
    if (!isIndexType(split->dtype)) c.fail("split must be int64");
    sizes = readInts(*split);
  } else {
    int64_t n = c.attrs().getInt("num_outputs", int64_t(outputs));
    if (n != int64_t(outputs) || n < 1)
      c.fail("num_outputs is " + std::to_string(n) + " but the node has " + std::to_string(outputs) +
             " outputs");
    if (dim < 0) return std::nullopt;
    // Equal parts; when the axis does not divide, the last part is smaller.
    int64_t chunk = (dim + n - 1) / n;
    sizes.assign(size_t(n), chunk);
    sizes.back() = dim - chunk * (n - 1);
    if (sizes.back() < 0)
      c.fail("cannot split a dimension of " + std::to_string(dim) + " into " + std::to_string(n) + " parts");
    return sizes;
  }
  if (sizes.size() != outputs)
    c.fail("split has " + std::to_string(sizes.size()) + " entries for " + std::to_string(outputs) +
           " outputs");
  int64_t sum = 0;
  for (int64_t s : sizes) {
    if (s < 0) c.fail("negative split size " + std::to_string(s));
    sum = addDims(c, sum, s);
  }
  if (dim >= 0 && sum != dim)
    c.fail("split sizes add up to " + std::to_string(sum) + " but the axis has " + std::to_string(dim));
  return sizes;
}

void inferSplit(InferContext& c) {
  const TensorType& in = c.input(0);
  const size_t outputs = c.outputs.size();
  if (!in.has_rank) {
    for (auto& o : c.outputs) o = TensorType::unranked(in.dtype);
    return;
  }
  const size_t axis = size_t(axisIn(c, c.attrs().getInt("axis", 0), int64_t(in.rank())));
  const int64_t dim = in.dims[axis].isKnown() ? in.dims[axis].value : -1;
  std::optional<std::vector<int64_t>> sizes = splitSizes(c, outputs, dim, c.hasInput(1), c.value(1));
  for (size_t o = 0; o < outputs; ++o) {
    std::vector<Dim> dims = in.dims;
    dims[axis] = sizes ? Dim::known((*sizes)[o]) : Dim{};
    c.outputs[o] = ranked(in.dtype, std::move(dims));
  }
}

void runSplit(KernelContext& c) {
  const ir::Tensor& in = c.inputs[0];
  const int64_t rank = int64_t(in.rank());
  const int64_t axis = axisIn(c, c.attrs().getInt("axis", 0), rank);
  const bool split_input = c.hasInput(1);
  std::optional<std::vector<int64_t>> sizes = splitSizes(c, c.outputs.size(), in.shape[size_t(axis)],
                                                         split_input, split_input ? &c.inputs[1] : nullptr);
  const size_t es = ir::dtypeSize(in.dtype);
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < axis; ++k) outer *= in.shape[size_t(k)];
  for (int64_t k = axis + 1; k < rank; ++k) inner *= in.shape[size_t(k)];
  const int64_t in_row = in.shape[size_t(axis)] * inner;
  int64_t offset = 0;
  for (size_t o = 0; o < c.outputs.size(); ++o) {
    const int64_t row = (*sizes)[o] * inner;
    const ir::Tensor& out = c.outputs[o];
    if (out.defined()) {
      if (out.numel() != outer * row) c.fail("output " + std::to_string(o) + " has the wrong size");
      copyStrided(bytesOf(out), {row, 1}, bytesOf(in) + offset * int64_t(es), {in_row, 1}, {outer, row}, es);
    }
    offset += row;
  }
}

}  // namespace

void registerConcatSplitOps(OpRegistry& r) {
  r.add("Concat", {inferConcat, runConcat});
  r.add("Split", {inferSplit, runSplit, 18});
}

}  // namespace partita::kernels::shape
