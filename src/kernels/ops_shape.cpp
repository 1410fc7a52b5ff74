// Host shape and data-movement ops. They move bytes without looking at them, so each
// kernel works for every dtype (element size from dtypeSize); the strided copies live
// in shape_strided_copy.cpp and the gather/scatter family in shape_indexing.cpp.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "kernels/op_registry.h"
#include "kernels/op_util.h"
#include "kernels/shape_common.h"
#include "kernels/shape_strided_copy.h"
#include "partita/error.h"

namespace partita::kernels {

namespace {

using ir::Dim;
using ir::DType;
using ir::TensorType;
using shape::axisIn;
using shape::bytesOf;
using shape::knownInts;
using shape::ranked;
using shape::staticLength;

// Output 0 holds the bytes of input 0 under another shape (Reshape, Flatten, Squeeze...).
void copyInput(KernelContext& c) {
  const ir::Tensor& in = c.inputs[0];
  const ir::Tensor& out = c.outputs[0];
  if (in.nbytes() != out.nbytes())
    c.fail("input " + std::string(ir::dtypeName(in.dtype)) + ir::shapeStr(in.shape) +
           " does not fit output " + ir::shapeStr(out.shape));
  if (in.data != out.data && in.nbytes()) std::memcpy(out.data, in.data, in.nbytes());
}

// The product of dims[begin, end): known when all are; one symbolic dim times ones keeps
// its symbol; unknown otherwise.
Dim productOf(const std::vector<Dim>& dims, size_t begin, size_t end) {
  int64_t known = 1;
  const Dim* unknown = nullptr;
  int unknowns = 0;
  for (size_t i = begin; i < end; ++i) {
    if (dims[i].isKnown()) {
      known *= dims[i].value;
    } else {
      unknown = &dims[i];
      ++unknowns;
    }
  }
  if (unknowns == 0) return Dim::known(known);
  if (known == 0) return Dim::known(0);
  if (unknowns == 1 && known == 1) return *unknown;
  return Dim{};
}

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

// ---------------------------------------------------------------------------------------
// Reshape, Flatten, Squeeze, Unsqueeze: new shape, same bytes.

// The size a -1 entry stands for when inference can tell, else an unknown dim: known
// products divide, and symbols present on both sides cancel.
Dim inferMinusOne(const TensorType& in, const std::vector<Dim>& out, size_t minus_one) {
  if (!in.has_rank) return Dim{};
  int64_t in_known = 1, out_known = 1;
  std::multiset<std::string> symbols;
  for (const Dim& d : in.dims) {
    if (d.isKnown()) {
      in_known *= d.value;
    } else {
      if (d.symbol.empty()) return Dim{};
      symbols.insert(d.symbol);
    }
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (i == minus_one) continue;
    if (out[i].isKnown()) {
      out_known *= out[i].value;
      continue;
    }
    auto it = out[i].symbol.empty() ? symbols.end() : symbols.find(out[i].symbol);
    if (it == symbols.end()) return Dim{};
    symbols.erase(it);
  }
  if (out_known == 0 || in_known % out_known != 0) return Dim{};
  int64_t rest = in_known / out_known;
  if (symbols.empty()) return Dim::known(rest);
  if (symbols.size() == 1 && rest == 1) return Dim::symbolic(*symbols.begin());
  return Dim{};
}

void inferReshape(InferContext& c) {
  const TensorType& in = c.input(0);
  std::optional<std::vector<int64_t>> shape = knownInts(c, 1);
  if (!shape) {
    std::optional<int64_t> n = staticLength(c, 1);
    c.outputs[0] = n ? ranked(in.dtype, std::vector<Dim>(size_t(*n))) : TensorType::unranked(in.dtype);
    return;
  }
  const bool allowzero = c.opset() >= 14 && c.attrs().getInt("allowzero", 0) != 0;
  std::vector<Dim> dims;
  std::optional<size_t> minus_one;
  bool has_zero = false;
  for (size_t i = 0; i < shape->size(); ++i) {
    int64_t s = (*shape)[i];
    if (s == -1) {
      if (minus_one) c.fail("the shape holds more than one -1");
      minus_one = i;
      dims.emplace_back();
    } else if (s < -1) {
      c.fail("invalid shape entry " + std::to_string(s));
    } else if (s == 0 && !allowzero) {
      if (in.has_rank && i >= in.rank())
        c.fail("shape entry " + std::to_string(i) + " is 0 (copy) but the input has rank " +
               std::to_string(in.rank()));
      dims.push_back(in.has_rank ? in.dims[i] : Dim{});
    } else {
      if (s == 0) has_zero = true;
      dims.push_back(Dim::known(s));
    }
  }
  if (minus_one && has_zero) c.fail("with allowzero=1 the shape cannot hold both 0 and -1");
  if (minus_one) dims[*minus_one] = inferMinusOne(in, dims, *minus_one);
  const int64_t in_numel = in.numel();
  if (in_numel >= 0) {
    TensorType out = ranked(in.dtype, dims);
    if (minus_one && !dims[*minus_one].isKnown() && out.rank() > 0) {
      // Every other dim known but the -1 could not divide: the shapes cannot match.
      bool others_known = true;
      for (size_t i = 0; i < dims.size(); ++i)
        others_known = others_known && (i == *minus_one || dims[i].isKnown());
      if (others_known) c.fail("cannot reshape " + in.str() + " to " + ir::shapeStr(*shape));
    }
    if (out.isStatic() && out.numel() != in_numel) c.fail("cannot reshape " + in.str() + " to " + out.str());
  }
  c.outputs[0] = ranked(in.dtype, std::move(dims));
}

void inferFlatten(InferContext& c) {
  const TensorType& in = c.input(0);
  if (!in.has_rank) {
    c.outputs[0] = ranked(in.dtype, {Dim{}, Dim{}});
    return;
  }
  int64_t rank = int64_t(in.rank());
  int64_t axis = c.attrs().getInt("axis", 1);
  if (c.opset() < 11 && axis < 0) c.fail("negative axis needs opset 11");
  axis = axisIn(c, axis, rank, /*inclusive=*/true);
  c.outputs[0] =
      ranked(in.dtype, {productOf(in.dims, 0, size_t(axis)), productOf(in.dims, size_t(axis), in.rank())});
}

// Squeeze/Unsqueeze axes: the attribute before opset 13, input 1 from 13. Returns
// nothing when the axes are an input whose value is unknown; `given` tells whether any
// axes were given at all.
std::optional<std::vector<int64_t>> squeezeAxes(const InferContext& c, bool& given) {
  if (c.opset() < 13) {
    given = c.attrs().has("axes");
    return c.attrs().getInts("axes");
  }
  given = c.hasInput(1);
  if (!given) return std::vector<int64_t>{};
  return knownInts(c, 1);
}

void inferSqueeze(InferContext& c) {
  const TensorType& in = c.input(0);
  bool given = false;
  std::optional<std::vector<int64_t>> axes = squeezeAxes(c, given);
  if (!in.has_rank) {
    c.outputs[0] = TensorType::unranked(in.dtype);
    return;
  }
  const int64_t rank = int64_t(in.rank());
  if (!axes) {
    std::optional<int64_t> n = staticLength(c, 1);
    c.outputs[0] = n && *n <= rank ? ranked(in.dtype, std::vector<Dim>(size_t(rank - *n)))
                                   : TensorType::unranked(in.dtype);
    return;
  }
  std::vector<bool> drop(size_t(rank), false);
  if (!given) {
    for (size_t i = 0; i < in.rank(); ++i) {
      if (!in.dims[i].isKnown()) {
        c.outputs[0] = TensorType::unranked(in.dtype);
        return;
      }
      drop[i] = in.dims[i].value == 1;
    }
  }
  for (int64_t a : *axes) {
    size_t k = size_t(axisIn(c, a, rank));
    if (drop[k]) c.fail("axis " + std::to_string(a) + " is listed twice");
    if (in.dims[k].isKnown() && in.dims[k].value != 1)
      c.fail("cannot squeeze axis " + std::to_string(a) + " of size " + std::to_string(in.dims[k].value));
    drop[k] = true;
  }
  std::vector<Dim> dims;
  for (size_t i = 0; i < in.rank(); ++i)
    if (!drop[i]) dims.push_back(in.dims[i]);
  c.outputs[0] = ranked(in.dtype, std::move(dims));
}

void inferUnsqueeze(InferContext& c) {
  const TensorType& in = c.input(0);
  bool given = false;
  std::optional<std::vector<int64_t>> axes = squeezeAxes(c, given);
  if (!given) c.fail("axes are required");
  if (!in.has_rank) {
    c.outputs[0] = TensorType::unranked(in.dtype);
    return;
  }
  if (!axes) {
    std::optional<int64_t> n = staticLength(c, 1);
    c.outputs[0] =
        n ? ranked(in.dtype, std::vector<Dim>(in.rank() + size_t(*n))) : TensorType::unranked(in.dtype);
    return;
  }
  const int64_t out_rank = int64_t(in.rank() + axes->size());
  std::vector<bool> inserted(size_t(out_rank), false);
  for (int64_t a : *axes) {
    size_t k = size_t(axisIn(c, a, out_rank));
    if (inserted[k]) c.fail("axis " + std::to_string(a) + " is listed twice");
    inserted[k] = true;
  }
  std::vector<Dim> dims;
  size_t next = 0;
  for (size_t k = 0; k < size_t(out_rank); ++k) dims.push_back(inserted[k] ? Dim::known(1) : in.dims[next++]);
  c.outputs[0] = ranked(in.dtype, std::move(dims));
}

// ---------------------------------------------------------------------------------------
// Transpose

std::vector<int64_t> transposePerm(const ir::AttributeMap& attrs, size_t rank) {
  std::vector<int64_t> perm = attrs.getInts("perm");
  if (perm.empty() && !attrs.has("perm"))
    for (size_t i = 0; i < rank; ++i) perm.push_back(int64_t(rank - 1 - i));
  return perm;
}

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
// Concat and Split

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
      total += t.dims[axis].value;
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
    if (!shape::isIndexType(split->dtype)) c.fail("split must be int64");
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
    sum += s;
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

// ---------------------------------------------------------------------------------------
// Slice

struct SliceParams {
  std::vector<int64_t> starts, ends, axes, steps;
  bool axes_given = false;
};

// Reads Slice's starts/ends/axes/steps: attributes before opset 10, inputs from 10.
// Returns nothing when some needed value is unknown (inference only).
std::optional<SliceParams> sliceParams(const InferContext& c) {
  SliceParams p;
  if (c.opset() < 10) {
    p.starts = c.attrs().getInts("starts");
    p.ends = c.attrs().getInts("ends");
    p.axes_given = c.attrs().has("axes");
    p.axes = c.attrs().getInts("axes");
    return p;
  }
  auto starts = knownInts(c, 1), ends = knownInts(c, 2);
  if (!starts || !ends) return std::nullopt;
  p.starts = *starts;
  p.ends = *ends;
  if (c.hasInput(3)) {
    auto axes = knownInts(c, 3);
    if (!axes) return std::nullopt;
    p.axes = *axes;
    p.axes_given = true;
  }
  if (c.hasInput(4)) {
    auto steps = knownInts(c, 4);
    if (!steps) return std::nullopt;
    p.steps = *steps;
  }
  return p;
}

struct SliceAxis {
  int64_t start = 0, step = 1, len = -1;  // len -1: unknown (unknown input dim)
  bool sliced = false;
};

// Resolves the parameters against `dims` (-1 for unknown) following ONNX's clamping.
template <typename Ctx>
std::vector<SliceAxis> planSlice(const Ctx& c, SliceParams p, const std::vector<int64_t>& dims) {
  const int64_t rank = int64_t(dims.size());
  const size_t n = p.starts.size();
  if (p.ends.size() != n) c.fail("starts and ends have different lengths");
  if (!p.axes_given)
    for (size_t i = 0; i < n; ++i) p.axes.push_back(int64_t(i));
  if (p.steps.empty()) p.steps.assign(n, 1);
  if (p.axes.size() != n || p.steps.size() != n)
    c.fail("starts, ends, axes and steps have different lengths");
  std::vector<SliceAxis> plan(dims.size());
  for (size_t k = 0; k < dims.size(); ++k) plan[k].len = dims[k];
  for (size_t i = 0; i < n; ++i) {
    const size_t k = size_t(axisIn(c, p.axes[i], rank));
    SliceAxis& a = plan[k];
    if (a.sliced) c.fail("axis " + std::to_string(p.axes[i]) + " is listed twice");
    a.sliced = true;
    a.step = p.steps[i];
    if (a.step == 0) c.fail("slice step cannot be 0");
    const int64_t d = dims[k];
    if (d < 0) {
      a.len = -1;
      continue;
    }
    int64_t s = p.starts[i], e = p.ends[i];
    if (s < 0) s += d;
    if (e < 0) e += d;
    if (a.step > 0) {
      s = std::clamp<int64_t>(s, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
      a.len = e > s ? (e - s + a.step - 1) / a.step : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, d - 1);
      e = std::clamp<int64_t>(e, -1, d - 1);
      a.len = s > e ? (s - e + (-a.step) - 1) / (-a.step) : 0;
    }
    a.start = a.len > 0 ? s : 0;
  }
  return plan;
}

void inferSlice(InferContext& c) {
  const TensorType& in = c.input(0);
  if (!in.has_rank) {
    c.outputs[0] = TensorType::unranked(in.dtype);
    return;
  }
  std::optional<SliceParams> p = sliceParams(c);
  if (!p) {
    // Which axes are sliced may still be known: then only those dims are unknown.
    std::vector<Dim> dims = in.dims;
    std::optional<std::vector<int64_t>> axes;
    if (c.hasInput(3)) {
      axes = knownInts(c, 3);
    } else if (std::optional<int64_t> n = staticLength(c, 1)) {
      axes.emplace();
      for (int64_t i = 0; i < *n; ++i) axes->push_back(i);
    }
    if (axes) {
      for (int64_t a : *axes) dims[size_t(axisIn(c, a, int64_t(in.rank())))] = Dim{};
    } else {
      for (Dim& d : dims) d = Dim{};
    }
    c.outputs[0] = ranked(in.dtype, std::move(dims));
    return;
  }
  std::vector<int64_t> known(in.rank());
  for (size_t k = 0; k < in.rank(); ++k) known[k] = in.dims[k].isKnown() ? in.dims[k].value : -1;
  std::vector<SliceAxis> plan = planSlice(c, *p, known);
  std::vector<Dim> dims = in.dims;
  for (size_t k = 0; k < dims.size(); ++k)
    if (plan[k].sliced) dims[k] = plan[k].len >= 0 ? Dim::known(plan[k].len) : Dim{};
  c.outputs[0] = ranked(in.dtype, std::move(dims));
}

void runSlice(KernelContext& c) {
  const ir::Tensor& in = c.inputs[0];
  const ir::Tensor& out = c.outputs[0];
  SliceParams p;
  if (c.opset() < 10) {
    p.starts = c.attrs().getInts("starts");
    p.ends = c.attrs().getInts("ends");
    p.axes_given = c.attrs().has("axes");
    p.axes = c.attrs().getInts("axes");
  } else {
    p.starts = readInts(c.inputs[1]);
    p.ends = readInts(c.inputs[2]);
    if (c.hasInput(3)) {
      p.axes = readInts(c.inputs[3]);
      p.axes_given = true;
    }
    if (c.hasInput(4)) p.steps = readInts(c.inputs[4]);
  }
  std::vector<SliceAxis> plan = planSlice(c, p, in.shape);
  std::vector<int64_t> in_strides = stridesOf(in.shape), src(in.rank()), shape(in.rank());
  int64_t offset = 0;
  for (size_t k = 0; k < in.rank(); ++k) {
    shape[k] = plan[k].len;
    src[k] = in_strides[k] * plan[k].step;
    offset += plan[k].start * in_strides[k];
  }
  if (shape != out.shape)
    c.fail("output shape " + ir::shapeStr(out.shape) + " does not match " + ir::shapeStr(shape));
  if (out.numel() == 0) return;
  const size_t es = ir::dtypeSize(in.dtype);
  copyStridedToDense(bytesOf(out), bytesOf(in) + offset * int64_t(es), src, shape, es);
}

// ---------------------------------------------------------------------------------------
// Expand and Tile

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
      dims[i] = Dim::known(dims[i].isKnown() ? dims[i].value * r : 0);
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
    if (out.shape[i] != in.shape[i] * repeats[i]) c.fail("output shape does not match the repeats");
    shape.insert(shape.end(), {repeats[i], in.shape[i]});
    src.insert(src.end(), {0, in_strides[i]});
  }
  if (out.numel() == 0) return;
  copyStridedToDense(bytesOf(out), bytesOf(in), src, shape, ir::dtypeSize(in.dtype));
}

// ---------------------------------------------------------------------------------------
// Pad

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
    const int64_t grow = full[k] + full[size_t(rank) + k];
    if (grow == 0) continue;
    if (!dims[k].isKnown()) {
      dims[k] = Dim{};
      continue;
    }
    const int64_t d = dims[k].value + grow;
    if (d < 0) c.fail("pads make dimension " + std::to_string(k) + " negative");
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
    const int64_t want = in.shape[size_t(k)] + full[size_t(k)] + full[size_t(rank + k)];
    if (out.shape[size_t(k)] != want) c.fail("output shape does not match the pads");
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

// ---------------------------------------------------------------------------------------
// Shape, Size, ConstantOfShape, Range

std::pair<int64_t, int64_t> shapeRange(const ir::AttributeMap& attrs, int opset, int64_t rank) {
  int64_t start = opset >= 15 ? attrs.getInt("start", 0) : 0;
  int64_t end = opset >= 15 ? attrs.getInt("end", rank) : rank;
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  return {start, std::max(start, end)};
}

void inferShape(InferContext& c) {
  const TensorType& in = c.input(0);
  if (!in.has_rank) {
    c.outputs[0] = ranked(DType::kInt64, {Dim{}});
    return;
  }
  auto [start, end] = shapeRange(c.attrs(), c.opset(), int64_t(in.rank()));
  c.outputs[0] = TensorType::of(DType::kInt64, {end - start});
}

void runShape(KernelContext& c) {
  const ir::Tensor& in = c.inputs[0];
  auto [start, end] = shapeRange(c.attrs(), c.opset(), int64_t(in.rank()));
  const ir::Tensor& out = c.outputs[0];
  if (out.numel() != end - start) c.fail("output has the wrong length");
  for (int64_t i = start; i < end; ++i) out.as<int64_t>()[i - start] = in.shape[size_t(i)];
}

void inferSize(InferContext& c) { c.outputs[0] = TensorType::of(DType::kInt64, {}); }

void runSize(KernelContext& c) { c.outputs[0].as<int64_t>()[0] = c.inputs[0].numel(); }

// ConstantOfShape's fill value: the "value" tensor attribute, float32 0 by default.
template <typename Ctx>
ir::Tensor fillValue(const Ctx& c) {
  static float zero = 0.f;
  ir::ConstId id = c.attrs().getTensor("value");
  if (id == ir::kNoConst) return ir::Tensor{DType::kFloat32, {1}, &zero};
  if (!c.constants) c.fail("no constant resolver for the value attribute");
  ir::Tensor t = c.constants->constant(id);
  if (t.numel() != 1) c.fail("value must hold exactly one element");
  return t;
}

void inferConstantOfShape(InferContext& c) {
  const DType dtype = fillValue(c).dtype;
  std::optional<std::vector<int64_t>> shape = knownInts(c, 0);
  if (!shape) {
    std::optional<int64_t> n = staticLength(c, 0);
    c.outputs[0] = n ? ranked(dtype, std::vector<Dim>(size_t(*n))) : TensorType::unranked(dtype);
    return;
  }
  for (int64_t s : *shape)
    if (s < 0) c.fail("negative dimension " + std::to_string(s));
  c.outputs[0] = TensorType::of(dtype, *shape);
}

void runConstantOfShape(KernelContext& c) {
  ir::Tensor v = fillValue(c);
  const ir::Tensor& out = c.outputs[0];
  if (out.dtype != v.dtype) c.fail("output dtype does not match the value");
  fillElements(bytesOf(out), bytesOf(v), out.numel(), ir::dtypeSize(out.dtype));
}

// Number of elements of Range(start, limit, delta).
template <typename Ctx>
int64_t rangeLength(const Ctx& c, const ir::Tensor& start, const ir::Tensor& limit, const ir::Tensor& delta) {
  if (start.numel() != 1 || limit.numel() != 1 || delta.numel() != 1)
    c.fail("start, limit and delta must be scalars");
  if (ir::isInteger(start.dtype)) {
    auto as_int = [](const ir::Tensor& t) {
      return t.dtype == DType::kInt64 ? t.as<int64_t>()[0] : int64_t(readScalar(t));
    };
    const int64_t s = as_int(start), l = as_int(limit), d = as_int(delta);
    if (d == 0) c.fail("delta cannot be 0");
    if (d > 0) return l > s ? (l - s + d - 1) / d : 0;
    return s > l ? (s - l + (-d) - 1) / (-d) : 0;
  }
  const double s = readScalar(start), l = readScalar(limit), d = readScalar(delta);
  if (d == 0) c.fail("delta cannot be 0");
  const double n = std::ceil((l - s) / d);
  return n > 0 ? int64_t(n) : 0;
}

void inferRange(InferContext& c) {
  const DType dtype = c.input(0).dtype;
  if (c.value(0) && c.value(1) && c.value(2)) {
    c.outputs[0] = TensorType::of(dtype, {rangeLength(c, *c.value(0), *c.value(1), *c.value(2))});
    return;
  }
  c.outputs[0] = ranked(dtype, {Dim{}});
}

void runRange(KernelContext& c) {
  const ir::Tensor& out = c.outputs[0];
  const int64_t n = rangeLength(c, c.inputs[0], c.inputs[1], c.inputs[2]);
  if (out.numel() != n) c.fail("output has the wrong length");
  switch (out.dtype) {
    case DType::kFloat32: {
      const float s = c.inputs[0].as<float>()[0], d = c.inputs[2].as<float>()[0];
      for (int64_t i = 0; i < n; ++i) out.as<float>()[i] = s + float(i) * d;
      break;
    }
    case DType::kFloat64: {
      const double s = c.inputs[0].as<double>()[0], d = c.inputs[2].as<double>()[0];
      for (int64_t i = 0; i < n; ++i) out.as<double>()[i] = s + double(i) * d;
      break;
    }
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64: {
      auto as_int = [](const ir::Tensor& t) {
        return t.dtype == DType::kInt64 ? t.as<int64_t>()[0] : int64_t(readScalar(t));
      };
      const int64_t s = as_int(c.inputs[0]), d = as_int(c.inputs[2]);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t v = s + i * d;
        if (out.dtype == DType::kInt16) out.as<int16_t>()[i] = int16_t(v);
        if (out.dtype == DType::kInt32) out.as<int32_t>()[i] = int32_t(v);
        if (out.dtype == DType::kInt64) out.as<int64_t>()[i] = v;
      }
      break;
    }
    default:
      throw Error(ErrorCode::kUnsupported,
                  "Range: dtype " + std::string(ir::dtypeName(out.dtype)) + " not supported");
  }
}

// ---------------------------------------------------------------------------------------
// DepthToSpace, SpaceToDepth

template <typename Ctx>
int64_t blockSize(const Ctx& c) {
  if (!c.attrs().has("blocksize")) c.fail("the blocksize attribute is required");
  int64_t b = c.attrs().getInt("blocksize", 0);
  if (b < 1) c.fail("blocksize must be positive");
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
  auto scale = [](const Dim& d, int64_t f) { return d.isKnown() ? Dim::known(d.value * f) : Dim{}; };
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
  if (out.shape != std::vector<int64_t>{n, ch, h * b, w * b}) c.fail("output shape does not match");
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
  Dim ch = in.dims[1].isKnown() ? Dim::known(in.dims[1].value * b * b) : Dim{};
  c.outputs[0] = ranked(in.dtype, {in.dims[0], ch, shrink(in.dims[2]), shrink(in.dims[3])});
}

void runSpaceToDepth(KernelContext& c) {
  const ir::Tensor& in = c.inputs[0];
  const ir::Tensor& out = c.outputs[0];
  const int64_t b = blockSize(c);
  if (in.rank() != 4) c.fail("input must have rank 4");
  const int64_t n = in.shape[0], ch = in.shape[1], h = in.shape[2] / b, w = in.shape[3] / b;
  if (out.shape != std::vector<int64_t>{n, ch * b * b, h, w}) c.fail("output shape does not match");
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

void registerShapeOps(OpRegistry& r) {
  r.add("Reshape", {inferReshape, copyInput});
  r.add("Flatten", {inferFlatten, copyInput});
  r.add("Squeeze", {inferSqueeze, copyInput});
  r.add("Unsqueeze", {inferUnsqueeze, copyInput});
  r.add("Transpose", {inferTranspose, runTranspose});
  r.add("Concat", {inferConcat, runConcat});
  r.add("Split", {inferSplit, runSplit});
  r.add("Slice", {inferSlice, runSlice});
  r.add("Expand", {inferExpand, runExpand});
  r.add("Tile", {inferTile, runTile});
  r.add("Pad", {inferPad, runPad});
  r.add("Shape", {inferShape, runShape});
  r.add("Size", {inferSize, runSize});
  r.add("ConstantOfShape", {inferConstantOfShape, runConstantOfShape});
  r.add("Range", {inferRange, runRange});
  r.add("DepthToSpace", {inferDepthToSpace, runDepthToSpace});
  r.add("SpaceToDepth", {inferSpaceToDepth, runSpaceToDepth});
  r.add("ReverseSequence", {inferReverseSequence, runReverseSequence});
  shape::registerIndexingOps(r);
}

}  // namespace partita::kernels
