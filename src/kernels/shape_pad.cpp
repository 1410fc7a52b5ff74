// Host Pad in constant, reflect, edge and wrap modes: pads (and the constant) from
// attributes before opset 11 and from inputs from 11, with opset 18's optional axes.
// Moves bytes, so every dtype works; the pre-11 float constant is converted to the
// input's dtype.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "kernels/op_registry.h"
#include "kernels/op_util.h"
#include "kernels/shape_common.h"
#include "kernels/shape_ops.h"
#include "kernels/shape_strided_copy.h"
#include "partita/error.h"

namespace partita::kernels::shape {

namespace {

using ir::Dim;
using ir::DType;
using ir::TensorType;

// Stores `v` converted to `dtype` at dst (one element).
void storeScalar(double v, DType dtype, std::byte* dst) {
  auto put = [&](auto x) { std::memcpy(dst, &x, sizeof(x)); };
  switch (dtype) {
    case DType::kFloat32:
      put(float(v));
      break;
    case DType::kFloat64:
      put(v);
      break;
    case DType::kFloat16:
      put(ir::floatToHalf(float(v)));
      break;
    case DType::kBFloat16:
      put(ir::floatToBfloat16(float(v)));
      break;
    case DType::kInt8:
      put(int8_t(v));
      break;
    case DType::kInt16:
      put(int16_t(v));
      break;
    case DType::kInt32:
      put(int32_t(v));
      break;
    case DType::kInt64:
      put(int64_t(v));
      break;
    case DType::kUInt8:
      put(uint8_t(v));
      break;
    case DType::kUInt16:
      put(uint16_t(v));
      break;
    case DType::kUInt32:
      put(uint32_t(v));
      break;
    case DType::kUInt64:
      put(uint64_t(v));
      break;
    case DType::kBool:
      put(uint8_t(v != 0));
      break;
    default:
      throw Error(ErrorCode::kUnsupported,
                  "cannot store a scalar of dtype " + std::string(ir::dtypeName(dtype)));
  }
}

enum class PadMode { kConstant, kReflect, kEdge, kWrap };

template <typename Ctx>
PadMode padMode(const Ctx& c) {
  std::string m = c.attrs().getString("mode", "constant");
  if (m == "constant") return PadMode::kConstant;
  if (m == "reflect") return PadMode::kReflect;
  if (m == "edge") return PadMode::kEdge;
  if (m == "wrap") return PadMode::kWrap;
  c.fail("unknown mode '" + m + "'");
}

// Expands pads given for `axes` (opset 18's optional input) to one begin/end pair per
// dimension: [b0, b1, ..., e0, e1, ...].
template <typename Ctx>
std::vector<int64_t> fullPads(const Ctx& c, const std::vector<int64_t>& pads,
                              const std::vector<int64_t>* axes, int64_t rank) {
  if (!axes) {
    if (int64_t(pads.size()) != 2 * rank)
      c.fail("pads has " + std::to_string(pads.size()) + " entries for rank " + std::to_string(rank));
    return pads;
  }
  if (pads.size() != 2 * axes->size()) c.fail("pads does not match axes");
  std::vector<int64_t> full(size_t(2 * rank), 0);
  for (size_t i = 0; i < axes->size(); ++i) {
    size_t k = size_t(axisIn(c, (*axes)[i], rank));
    full[k] = pads[i];
    full[size_t(rank) + k] = pads[axes->size() + i];
  }
  return full;
}

void inferPad(InferContext& c) {
  const TensorType& in = c.input(0);
  padMode(c);
  if (!in.has_rank) {
    c.outputs[0] = TensorType::unranked(in.dtype);
    return;
  }
  const int64_t rank = int64_t(in.rank());
  std::optional<std::vector<int64_t>> pads, axes;
  bool axes_unknown = false;
  if (c.opset() < 11) {
    if (!c.attrs().has("pads")) c.fail("the pads attribute is required");
    pads = c.attrs().getInts("pads");
  } else {
    pads = knownInts(c, 1);
    if (c.hasInput(3)) {
      axes = knownInts(c, 3);
      axes_unknown = !axes;
    }
  }
  if (!pads || axes_unknown) {
    c.outputs[0] = ranked(in.dtype, std::vector<Dim>(in.rank()));
    return;
  }
  std::vector<int64_t> full = fullPads(c, *pads, axes ? &*axes : nullptr, rank);
  std::vector<Dim> dims = in.dims;
  for (size_t k = 0; k < dims.size(); ++k) {
    const int64_t grow = addDims(c, full[k], full[size_t(rank) + k]);
    if (grow == 0) continue;
    if (!dims[k].isKnown()) {
      dims[k] = Dim{};
      continue;
    }
    const int64_t d = addDims(c, dims[k].value, grow);
    if (d < 0)
      c.fail("pads " + std::to_string(full[k]) + " and " + std::to_string(full[size_t(rank) + k]) +
             " make dimension " + std::to_string(k) + " (" + std::to_string(dims[k].value) + ") negative: " +
             std::to_string(d));
    dims[k] = Dim::known(d);
  }
  c.outputs[0] = ranked(in.dtype, std::move(dims));
}

// For one axis: the input index each output index reads, or -1 for the constant.
std::vector<int64_t> padMap(PadMode mode, int64_t in_dim, int64_t out_dim, int64_t before) {
  std::vector<int64_t> map(static_cast<size_t>(out_dim));
  for (int64_t o = 0; o < out_dim; ++o) {
    int64_t x = o - before;
    if (x >= 0 && x < in_dim) {
      map[size_t(o)] = x;
      continue;
    }
    switch (mode) {
      case PadMode::kConstant:
        x = -1;
        break;
      case PadMode::kEdge:
        x = std::clamp<int64_t>(x, 0, in_dim - 1);
        break;
      case PadMode::kWrap:
        x = ((x % in_dim) + in_dim) % in_dim;
        break;
      case PadMode::kReflect:
        if (in_dim == 1) {
          x = 0;
        } else {
          const int64_t period = 2 * (in_dim - 1);
          x = ((x % period) + period) % period;
          if (x >= in_dim) x = period - x;
        }
        break;
    }
    map[size_t(o)] = x;
  }
  return map;
}

void runPad(KernelContext& c) {
  const ir::Tensor& in = c.inputs[0];
  const ir::Tensor& out = c.outputs[0];
  const PadMode mode = padMode(c);
  const int64_t rank = int64_t(in.rank());
  const size_t es = ir::dtypeSize(in.dtype);
  std::vector<int64_t> pads;
  std::vector<std::byte> value(es, std::byte{0});
  std::optional<std::vector<int64_t>> axes;
  if (c.opset() < 11) {
    pads = c.attrs().getInts("pads");
    storeScalar(c.attrs().getFloat("value", 0.f), in.dtype, value.data());
  } else {
    pads = readInts(c.inputs[1]);
    if (c.hasInput(2)) {
      const ir::Tensor& v = c.inputs[2];
      if (v.dtype != in.dtype) c.fail("constant_value must have the input's dtype");
      if (v.numel() >= 1) std::memcpy(value.data(), v.data, es);
    }
    if (c.hasInput(3)) axes = readInts(c.inputs[3]);
  }
  std::vector<int64_t> full = fullPads(c, pads, axes ? &*axes : nullptr, rank);
  for (int64_t k = 0; k < rank; ++k) {
    const int64_t want = addDims(c, in.shape[size_t(k)], addDims(c, full[size_t(k)], full[size_t(rank + k)]));
    if (want < 0 || out.shape[size_t(k)] != want) c.fail("output shape does not match the pads");
  }
  if (out.numel() == 0) return;
  if (rank == 0) {
    std::memcpy(out.data, in.data, es);
    return;
  }
  const bool in_empty = in.numel() == 0;
  if (in_empty && mode != PadMode::kConstant) c.fail("cannot pad an empty input in this mode");
  std::vector<std::vector<int64_t>> maps;
  for (int64_t k = 0; k < rank; ++k)
    maps.push_back(padMap(mode, in.shape[size_t(k)], out.shape[size_t(k)], full[size_t(k)]));

  // The last axis as runs: copies of consecutive input elements, or constant fills.
  struct Run {
    int64_t out_begin, len, src;  // src -1: constant
  };
  std::vector<Run> runs;
  const std::vector<int64_t>& last = maps.back();
  for (int64_t o = 0; o < int64_t(last.size()); ++o) {
    const int64_t s = in_empty ? -1 : last[size_t(o)];
    if (!runs.empty()) {
      Run& r = runs.back();
      if ((s < 0 && r.src < 0) || (s >= 0 && r.src >= 0 && s == r.src + r.len)) {
        ++r.len;
        continue;
      }
    }
    runs.push_back({o, 1, s});
  }

  const std::vector<int64_t> in_strides = stridesOf(in.shape);
  const int64_t row_len = out.shape.back();
  const int64_t rows = out.numel() / row_len;
  const std::byte* src = bytesOf(in);
  std::byte* dst = bytesOf(out);
  const int64_t ies = int64_t(es);
  auto do_row = [&](int64_t row) {
    std::byte* d = dst + row * row_len * ies;
    int64_t offset = 0, rest = row;
    bool constant = in_empty;
    for (int64_t k = rank - 2; k >= 0 && !constant; --k) {
      const int64_t i = rest % out.shape[size_t(k)];
      rest /= out.shape[size_t(k)];
      const int64_t m = maps[size_t(k)][size_t(i)];
      if (m < 0) constant = true;
      offset += m * in_strides[size_t(k)];
    }
    if (constant) {
      fillElements(d, value.data(), row_len, es);
      return;
    }
    for (const Run& r : runs) {
      if (r.src < 0)
        fillElements(d + r.out_begin * ies, value.data(), r.len, es);
      else
        std::memcpy(d + r.out_begin * ies, src + (offset + r.src) * ies, size_t(r.len * ies));
    }
  };
  const bool parallel = out.numel() * ies >= (int64_t(1) << 18);
#pragma omp parallel for if (parallel)
  for (int64_t row = 0; row < rows; ++row) do_row(row);
}

}  // namespace

void registerPadOps(OpRegistry& r) {
  r.add("Pad", {inferPad, runPad, 21});
}

}  // namespace partita::kernels::shape
