// Host Reshape, Flatten, Squeeze and Unsqueeze: a new shape over the same bytes. Their
// inference works out the output shape (symbolic dims are kept where they can be); their
// kernel is one copy of the input's bytes (skipped when input and output share memory).
#include <climits>
#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kernels/op_registry.h"
#include "kernels/op_util.h"
#include "kernels/shape_common.h"
#include "kernels/shape_ops.h"

namespace partita::kernels::shape {

namespace {

using ir::Dim;
using ir::DType;
using ir::TensorType;

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
Dim productOf(const InferContext& c, const std::vector<Dim>& dims, size_t begin, size_t end) {
  int64_t known = 1;
  const Dim* unknown = nullptr;
  int unknowns = 0;
  for (size_t i = begin; i < end; ++i) {
    if (dims[i].isKnown()) {
      known = mulDims(c, known, dims[i].value);
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

// The size a -1 entry stands for when inference can tell, else an unknown dim: known
// products divide, and symbols present on both sides cancel.
Dim inferMinusOne(const InferContext& c, const TensorType& in, const std::vector<Dim>& out, size_t minus_one) {
  if (!in.has_rank) return Dim{};
  int64_t in_known = 1, out_known = 1;
  std::multiset<std::string> symbols;
  for (const Dim& d : in.dims) {
    if (d.isKnown()) {
      in_known = mulDims(c, in_known, d.value);
    } else {
      if (d.symbol.empty()) return Dim{};
      symbols.insert(d.symbol);
    }
  }
  for (size_t i = 0; i < out.size(); ++i) {
    if (i == minus_one) continue;
    if (out[i].isKnown()) {
      // A product past int64 can never match the input's: say so rather than wrap.
      if (out[i].value != 0 && out_known > INT64_MAX / out[i].value)
        c.fail("the shape's entries multiply past 64 bits, so no input can be reshaped to it");
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
  // Entries copied from the input's dims (passes::foldReshapeTargets).
  const std::vector<int64_t> from = c.attrs().getInts(kDimsFromInputAttr);
  if (!from.empty() && from.size() != shape->size())
    c.fail(std::string(kDimsFromInputAttr) + " has " + std::to_string(from.size()) + " entries, the shape " +
           std::to_string(shape->size()));
  std::vector<Dim> dims;
  std::optional<size_t> minus_one;
  bool has_zero = false;
  for (size_t i = 0; i < shape->size(); ++i) {
    int64_t s = (*shape)[i];
    if (!from.empty() && from[i] != -1) {
      if (from[i] < -1 || (in.has_rank && from[i] >= int64_t(in.rank())))
        c.fail(std::string(kDimsFromInputAttr) + " entry " + std::to_string(i) + " is " + std::to_string(from[i]) +
               ", the input has rank " + (in.has_rank ? std::to_string(in.rank()) : std::string("?")));
      dims.push_back(in.has_rank ? in.dims[size_t(from[i])] : Dim{});
      continue;
    }
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
  if (minus_one) dims[*minus_one] = inferMinusOne(c, in, dims, *minus_one);
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
    if (out.isStatic()) {
      std::optional<int64_t> out_numel = ir::checkedNumel(out.staticShape());
      if (!out_numel || *out_numel != in_numel) c.fail("cannot reshape " + in.str() + " to " + out.str());
    }
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
      ranked(in.dtype, {productOf(c, in.dims, 0, size_t(axis)), productOf(c, in.dims, size_t(axis), in.rank())});
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

}  // namespace

void registerReshapeOps(OpRegistry& r) {
  r.add("Reshape", {inferReshape, copyInput, 21});
  r.add("Flatten", {inferFlatten, copyInput, 21});
  r.add("Squeeze", {inferSqueeze, copyInput, 21});
  r.add("Unsqueeze", {inferUnsqueeze, copyInput, 21});
}

}  // namespace partita::kernels::shape
