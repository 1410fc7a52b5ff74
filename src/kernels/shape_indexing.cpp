// Host gather/scatter ops: Gather, GatherElements, GatherND, ScatterElements (and its
// opset 9-10 name Scatter), ScatterND and Compress. Data moves as bytes, so every dtype
// works; indices may be int32 or int64 and negative indices count from the end. Only
// the scatter reductions (add, mul, max, min) look at values.
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels/shape_common.h"
#include "kernels/shape_ops.h"
#include "partita/error.h"

namespace partita::kernels::shape {

namespace {

using ir::Dim;
using ir::DType;
using ir::TensorType;

constexpr int64_t kParallelBytes = int64_t(1) << 18;

// Calls f(std::integral_constant<size_t, ES>) with the element size as a constant for the
// usual sizes, so per-element memcpy calls compile to single moves.
template <typename F>
void withElemSize(size_t es, F&& f) {
  switch (es) {
    case 1:
      f(std::integral_constant<size_t, 1>{});
      break;
    case 2:
      f(std::integral_constant<size_t, 2>{});
      break;
    case 4:
      f(std::integral_constant<size_t, 4>{});
      break;
    case 8:
      f(std::integral_constant<size_t, 8>{});
      break;
    default:
      throw Error(ErrorCode::kUnsupported, "element size " + std::to_string(es) + " not supported");
  }
}

template <typename Ctx>
void requireIndices(const Ctx& c, DType t, const char* what) {
  if (t != DType::kUndefined && !isIndexType(t))
    c.fail(std::string(what) + " must be int32 or int64, got " + std::string(ir::dtypeName(t)));
}

// Advances a row-major multi-index over `shape`.
inline void nextIndex(std::vector<int64_t>& pos, const std::vector<int64_t>& shape) {
  for (size_t k = pos.size(); k-- > 0;) {
    if (++pos[k] < shape[k]) return;
    pos[k] = 0;
  }
}

// ---------------------------------------------------------------------------------------
// Gather

void inferGather(InferContext& c) {
  const TensorType& data = c.input(0);
  const TensorType& idx = c.input(1);
  requireIndices(c, idx.dtype, "indices");
  if (!data.has_rank || !idx.has_rank) {
    c.outputs[0] = TensorType::unranked(data.dtype);
    return;
  }
  if (data.rank() == 0) c.fail("data must have rank 1 or more");
  const size_t axis = size_t(axisIn(c, c.attrs().getInt("axis", 0), int64_t(data.rank())));
  std::vector<Dim> dims(data.dims.begin(), data.dims.begin() + int64_t(axis));
  dims.insert(dims.end(), idx.dims.begin(), idx.dims.end());
  dims.insert(dims.end(), data.dims.begin() + int64_t(axis) + 1, data.dims.end());
  c.outputs[0] = ranked(data.dtype, std::move(dims));
}

void runGather(KernelContext& c) {
  const ir::Tensor& data = c.inputs[0];
  const ir::Tensor& indices = c.inputs[1];
  const ir::Tensor& out = c.outputs[0];
  requireIndices(c, indices.dtype, "indices");
  const int64_t axis = axisIn(c, c.attrs().getInt("axis", 0), int64_t(data.rank()));
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < axis; ++k) outer *= data.shape[size_t(k)];
  for (size_t k = size_t(axis) + 1; k < data.rank(); ++k) inner *= data.shape[k];
  const int64_t dim = data.shape[size_t(axis)];
  const int64_t n = indices.numel();
  if (out.numel() != outer * n * inner || out.dtype != data.dtype) c.fail("output shape does not match");
  std::vector<int64_t> idx(static_cast<size_t>(n));
  IndexView view(indices);
  for (int64_t k = 0; k < n; ++k) idx[size_t(k)] = indexIn(c, view[k], dim);

  const int64_t row = inner * int64_t(ir::dtypeSize(data.dtype));
  const std::byte* src = bytesOf(data);
  std::byte* dst = bytesOf(out);
  const int64_t rows = outer * n;
  const bool parallel = rows * row >= kParallelBytes;
#pragma omp parallel for if (parallel)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t o = r / n, k = r % n;
    std::memcpy(dst + r * row, src + (o * dim + idx[size_t(k)]) * row, size_t(row));
  }
}

// ---------------------------------------------------------------------------------------
// GatherElements

void inferGatherElements(InferContext& c) {
  const TensorType& data = c.input(0);
  const TensorType& idx = c.input(1);
  requireIndices(c, idx.dtype, "indices");
  if (!idx.has_rank) {
    c.outputs[0] = TensorType::unranked(data.dtype);
    return;
  }
  if (data.has_rank) {
    if (data.rank() != idx.rank())
      c.fail("data " + data.str() + " and indices " + idx.str() + " differ in rank");
    const size_t axis = size_t(axisIn(c, c.attrs().getInt("axis", 0), int64_t(data.rank())));
    for (size_t k = 0; k < data.rank(); ++k)
      if (k != axis && data.dims[k].isKnown() && idx.dims[k].isKnown() && idx.dims[k].value > data.dims[k].value)
        c.fail("indices " + idx.str() + " are wider than data " + data.str() + " on dimension " + std::to_string(k));
  }
  c.outputs[0] = ranked(data.dtype, idx.dims);
}

// GatherElements and ScatterElements read (write) data at the indices' positions on
// every dimension but the axis: the indices may not be wider there.
template <typename Ctx>
void requireWithin(const Ctx& c, const ir::Tensor& indices, const ir::Tensor& data, size_t axis) {
  for (size_t k = 0; k < data.rank(); ++k)
    if (k != axis && indices.shape[k] > data.shape[k])
      c.fail("indices " + ir::shapeStr(indices.shape) + " are wider than data " + ir::shapeStr(data.shape) +
             " on dimension " + std::to_string(k));
}

void runGatherElements(KernelContext& c) {
  const ir::Tensor& data = c.inputs[0];
  const ir::Tensor& indices = c.inputs[1];
  const ir::Tensor& out = c.outputs[0];
  requireIndices(c, indices.dtype, "indices");
  if (data.rank() != indices.rank() || out.shape != indices.shape || out.dtype != data.dtype)
    c.fail("shapes do not match");
  const size_t axis = size_t(axisIn(c, c.attrs().getInt("axis", 0), int64_t(data.rank())));
  requireWithin(c, indices, data, axis);
  const std::vector<int64_t> ds = stridesOf(data.shape);
  const int64_t dim = data.shape[axis];
  const int64_t n = indices.numel();
  IndexView idx(indices);
  withElemSize(ir::dtypeSize(data.dtype), [&](auto es_c) {
    constexpr size_t es = decltype(es_c)::value;
    std::vector<int64_t> pos(indices.rank(), 0);
    for (int64_t i = 0; i < n; ++i, nextIndex(pos, indices.shape)) {
      int64_t offset = 0;
      for (size_t k = 0; k < pos.size(); ++k)
        if (k != axis) offset += pos[k] * ds[k];
      offset += indexIn(c, idx[i], dim) * ds[axis];
      std::memcpy(bytesOf(out) + i * int64_t(es), bytesOf(data) + offset * int64_t(es), es);
    }
  });
}

// ---------------------------------------------------------------------------------------
// GatherND

void inferGatherND(InferContext& c) {
  const TensorType& data = c.input(0);
  const TensorType& idx = c.input(1);
  requireIndices(c, idx.dtype, "indices");
  if (!data.has_rank || !idx.has_rank || idx.rank() == 0 || !idx.dims.back().isKnown()) {
    c.outputs[0] = TensorType::unranked(data.dtype);
    return;
  }
  const int64_t b = c.attrs().getInt("batch_dims", 0);
  const int64_t r = int64_t(data.rank()), q = int64_t(idx.rank()), m = idx.dims.back().value;
  if (b < 0 || b >= std::min(r, q)) c.fail("batch_dims " + std::to_string(b) + " is out of range");
  if (m < 1 || m > r - b) c.fail("indices' last dimension " + std::to_string(m) + " is out of range");
  std::vector<Dim> dims(idx.dims.begin(), idx.dims.end() - 1);
  for (int64_t k = 0; k < b; ++k)
    if (!dims[size_t(k)].isKnown()) dims[size_t(k)] = data.dims[size_t(k)];
  dims.insert(dims.end(), data.dims.begin() + (b + m), data.dims.end());
  c.outputs[0] = ranked(data.dtype, std::move(dims));
}

void runGatherND(KernelContext& c) {
  const ir::Tensor& data = c.inputs[0];
  const ir::Tensor& indices = c.inputs[1];
  const ir::Tensor& out = c.outputs[0];
  requireIndices(c, indices.dtype, "indices");
  const int64_t b = c.attrs().getInt("batch_dims", 0);
  const int64_t r = int64_t(data.rank()), q = int64_t(indices.rank());
  if (q < 1 || b < 0 || b >= std::min(r, q)) c.fail("batch_dims is out of range");
  const int64_t m = indices.shape.back();
  if (m < 1 || m > r - b) c.fail("indices' last dimension is out of range");
  if (out.dtype != data.dtype) c.fail("the output's dtype does not match the data's");
  int64_t batches = 1, tuples = 1, slice = 1;
  for (int64_t k = 0; k < b; ++k) {
    if (data.shape[size_t(k)] != indices.shape[size_t(k)])
      c.fail("batch dimensions of data and indices differ");
    batches *= data.shape[size_t(k)];
  }
  for (int64_t k = b; k < q - 1; ++k) tuples *= indices.shape[size_t(k)];
  for (int64_t k = b + m; k < r; ++k) slice *= data.shape[size_t(k)];
  if (out.numel() != batches * tuples * slice) c.fail("output shape does not match");
  const std::vector<int64_t> ds = stridesOf(data.shape);
  const int64_t batch_block = b > 0 ? ds[size_t(b - 1)] : data.numel();
  const int64_t row = slice * int64_t(ir::dtypeSize(data.dtype));
  IndexView idx(indices);
  for (int64_t bi = 0; bi < batches; ++bi) {
    for (int64_t t = 0; t < tuples; ++t) {
      const int64_t tuple = bi * tuples + t;
      int64_t offset = bi * batch_block;
      for (int64_t j = 0; j < m; ++j)
        offset += indexIn(c, idx[tuple * m + j], data.shape[size_t(b + j)]) * ds[size_t(b + j)];
      std::memcpy(bytesOf(out) + tuple * row, bytesOf(data) + offset * int64_t(ir::dtypeSize(data.dtype)),
                  size_t(row));
    }
  }
}

// ---------------------------------------------------------------------------------------
// ScatterElements, ScatterND

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

template <typename Ctx>
Reduction reductionOf(const Ctx& c) {
  std::string r = c.attrs().getString("reduction", "none");
  if (r == "none") return Reduction::kNone;
  if (r == "add") return Reduction::kAdd;
  if (r == "mul") return Reduction::kMul;
  if (r == "max") return Reduction::kMax;
  if (r == "min") return Reduction::kMin;
  c.fail("unknown reduction '" + r + "'");
}

template <typename T>
T combine(T a, T b, Reduction r) {
  switch (r) {
    case Reduction::kAdd:
      return T(a + b);
    case Reduction::kMul:
      return T(a * b);
    case Reduction::kMax:
      return std::max(a, b);
    case Reduction::kMin:
      return std::min(a, b);
    case Reduction::kNone:
      break;
  }
  return b;
}

// dst[i] = combine(dst[i], src[i]) for i < n elements of `dtype`.
void reduceInto(std::byte* dst, const std::byte* src, int64_t n, DType dtype, Reduction r) {
  if (r == Reduction::kNone) {
    std::memcpy(dst, src, size_t(n) * ir::dtypeSize(dtype));
    return;
  }
  if (dtype == DType::kFloat16 || dtype == DType::kBFloat16) {
    const bool half = dtype == DType::kFloat16;
    for (int64_t i = 0; i < n; ++i) {
      uint16_t a, b;
      std::memcpy(&a, dst + 2 * i, 2);
      std::memcpy(&b, src + 2 * i, 2);
      float fa = half ? ir::halfToFloat(a) : ir::bfloat16ToFloat(a);
      float fb = half ? ir::halfToFloat(b) : ir::bfloat16ToFloat(b);
      uint16_t v = half ? ir::floatToHalf(combine(fa, fb, r)) : ir::floatToBfloat16(combine(fa, fb, r));
      std::memcpy(dst + 2 * i, &v, 2);
    }
    return;
  }
  PARTITA_DISPATCH_ALL(dtype, "scatter reduction", {
    T* d = reinterpret_cast<T*>(dst);
    const T* s = reinterpret_cast<const T*>(src);
    for (int64_t i = 0; i < n; ++i) d[i] = combine(d[i], s[i], r);
  });
}

void inferScatter(InferContext& c) {
  reductionOf(c);
  requireIndices(c, c.input(1).dtype, "indices");
  if (c.input(2).dtype != ir::DType::kUndefined && c.input(2).dtype != c.input(0).dtype)
    c.fail("updates must have the data's dtype");
  c.outputs[0] = c.input(0);
}

// Scatter outputs are a copy of data with updates written in: same dtypes, same shape.
void requireSameAs(const KernelContext& c, const ir::Tensor& data, const ir::Tensor& updates, const ir::Tensor& out) {
  if (updates.dtype != data.dtype || out.dtype != data.dtype)
    c.fail("updates and the output must have the data's dtype " + std::string(ir::dtypeName(data.dtype)));
  if (out.shape != data.shape)
    c.fail("the output " + ir::shapeStr(out.shape) + " must have the data's shape " + ir::shapeStr(data.shape));
}

void runScatterElements(KernelContext& c) {
  const ir::Tensor& data = c.inputs[0];
  const ir::Tensor& indices = c.inputs[1];
  const ir::Tensor& updates = c.inputs[2];
  const ir::Tensor& out = c.outputs[0];
  requireIndices(c, indices.dtype, "indices");
  const Reduction red = reductionOf(c);
  if (indices.shape != updates.shape || indices.rank() != data.rank())
    c.fail("indices " + ir::shapeStr(indices.shape) + " and updates " + ir::shapeStr(updates.shape) +
           " must have the same shape and the data's rank");
  const size_t axis = size_t(axisIn(c, c.attrs().getInt("axis", 0), int64_t(data.rank())));
  requireSameAs(c, data, updates, out);
  requireWithin(c, indices, data, axis);
  if (out.data != data.data && data.nbytes()) std::memcpy(out.data, data.data, data.nbytes());
  const std::vector<int64_t> os = stridesOf(data.shape);
  const int64_t es = int64_t(ir::dtypeSize(data.dtype));
  const int64_t dim = data.shape[axis];
  IndexView idx(indices);
  std::vector<int64_t> pos(indices.rank(), 0);
  for (int64_t i = 0; i < indices.numel(); ++i, nextIndex(pos, indices.shape)) {
    int64_t offset = 0;
    for (size_t k = 0; k < pos.size(); ++k)
      if (k != axis) offset += pos[k] * os[k];
    offset += indexIn(c, idx[i], dim) * os[axis];
    reduceInto(bytesOf(out) + offset * es, bytesOf(updates) + i * es, 1, data.dtype, red);
  }
}

void runScatterND(KernelContext& c) {
  const ir::Tensor& data = c.inputs[0];
  const ir::Tensor& indices = c.inputs[1];
  const ir::Tensor& updates = c.inputs[2];
  const ir::Tensor& out = c.outputs[0];
  requireIndices(c, indices.dtype, "indices");
  const Reduction red = reductionOf(c);
  if (indices.rank() < 1) c.fail("indices must have rank 1 or more");
  const int64_t k = indices.shape.back();
  if (k < 1 || k > int64_t(data.rank())) c.fail("indices' last dimension is out of range");
  int64_t tuples = indices.numel() / k, slice = 1;
  for (size_t d = size_t(k); d < data.rank(); ++d) slice *= data.shape[d];
  if (updates.numel() != tuples * slice)
    c.fail("updates have the wrong shape " + ir::shapeStr(updates.shape));
  requireSameAs(c, data, updates, out);
  if (out.data != data.data && data.nbytes()) std::memcpy(out.data, data.data, data.nbytes());
  const std::vector<int64_t> ds = stridesOf(data.shape);
  const int64_t es = int64_t(ir::dtypeSize(data.dtype));
  IndexView idx(indices);
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t offset = 0;
    for (int64_t j = 0; j < k; ++j)
      offset += indexIn(c, idx[t * k + j], data.shape[size_t(j)]) * ds[size_t(j)];
    reduceInto(bytesOf(out) + offset * es, bytesOf(updates) + t * slice * es, slice, data.dtype, red);
  }
}

// ---------------------------------------------------------------------------------------
// Compress

// Indices along the axis (of length `dim`) that `condition` selects.
std::vector<int64_t> selected(const ir::Tensor& condition, int64_t dim) {
  std::vector<int64_t> out;
  const int64_t n = std::min(condition.numel(), dim);
  const auto* cond = static_cast<const uint8_t*>(condition.data);
  for (int64_t i = 0; i < n; ++i)
    if (cond[i]) out.push_back(i);
  return out;
}

void inferCompress(InferContext& c) {
  const TensorType& in = c.input(0);
  const ir::Tensor* cond = c.value(1);
  if (c.input(1).dtype != DType::kBool && c.input(1).dtype != DType::kUndefined)
    c.fail("condition must be bool");
  const bool has_axis = c.attrs().has("axis");
  Dim count{};
  if (!has_axis) {
    const int64_t numel = in.numel();
    if (cond && numel >= 0) count = Dim::known(int64_t(selected(*cond, numel).size()));
    c.outputs[0] = ranked(in.dtype, {count});
    return;
  }
  if (!in.has_rank) {
    c.outputs[0] = TensorType::unranked(in.dtype);
    return;
  }
  const size_t axis = size_t(axisIn(c, c.attrs().getInt("axis", 0), int64_t(in.rank())));
  if (cond && in.dims[axis].isKnown())
    count = Dim::known(int64_t(selected(*cond, in.dims[axis].value).size()));
  std::vector<Dim> dims = in.dims;
  dims[axis] = count;
  c.outputs[0] = ranked(in.dtype, std::move(dims));
}

void runCompress(KernelContext& c) {
  const ir::Tensor& in = c.inputs[0];
  const ir::Tensor& cond = c.inputs[1];
  const ir::Tensor& out = c.outputs[0];
  if (cond.dtype != DType::kBool) c.fail("condition must be bool");
  int64_t outer = 1, dim = in.numel(), inner = 1;
  if (c.attrs().has("axis")) {
    const int64_t axis = axisIn(c, c.attrs().getInt("axis", 0), int64_t(in.rank()));
    for (int64_t k = 0; k < axis; ++k) outer *= in.shape[size_t(k)];
    dim = in.shape[size_t(axis)];
    for (size_t k = size_t(axis) + 1; k < in.rank(); ++k) inner *= in.shape[k];
  }
  const std::vector<int64_t> pick = selected(cond, dim);
  const int64_t n = int64_t(pick.size());
  if (out.numel() != outer * n * inner || out.dtype != in.dtype) c.fail("output shape does not match the condition");
  const int64_t row = inner * int64_t(ir::dtypeSize(in.dtype));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < n; ++j)
      std::memcpy(bytesOf(out) + (o * n + j) * row, bytesOf(in) + (o * dim + pick[size_t(j)]) * row,
                  size_t(row));
}

}  // namespace

void registerIndexingOps(OpRegistry& r) {
  r.add("Gather", {inferGather, runGather});
  r.add("GatherElements", {inferGatherElements, runGatherElements});
  r.add("GatherND", {inferGatherND, runGatherND});
  r.add("ScatterElements", {inferScatter, runScatterElements, 18});
  r.add("Scatter", {inferScatter, runScatterElements});
  r.add("ScatterND", {inferScatter, runScatterND, 18});
  r.add("Compress", {inferCompress, runCompress});
}

}  // namespace partita::kernels::shape
