// Ops that place values by index: OneHot, Trilu and EyeLike. They move elements without
// arithmetic, so kernels work on the element's bytes (1, 2, 4 or 8 wide).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/reduce_common.h"

namespace partita::kernels {

namespace {

using namespace reduce;

// An unsigned integer type as wide as the element.
template <size_t kSize>
struct Word;
template <>
struct Word<1> {
  using type = uint8_t;
};
template <>
struct Word<2> {
  using type = uint16_t;
};
template <>
struct Word<4> {
  using type = uint32_t;
};
template <>
struct Word<8> {
  using type = uint64_t;
};

template <typename F>
void dispatchWidth(ir::DType dtype, const std::string& what, F&& f) {
  switch (ir::dtypeSize(dtype)) {
    case 1:
      f(Word<1>{});
      break;
    case 2:
      f(Word<2>{});
      break;
    case 4:
      f(Word<4>{});
      break;
    case 8:
      f(Word<8>{});
      break;
    default:
      throw Error(ErrorCode::kUnsupported,
                  what + ": dtype " + std::string(ir::dtypeName(dtype)) + " not supported");
  }
}

// The value 1 of `dtype`, as bytes in a uint64 (little-endian, low bytes used).
uint64_t oneBits(ir::DType dtype) {
  switch (dtype) {
    case ir::DType::kFloat32:
      return std::bit_cast<uint32_t>(1.0f);
    case ir::DType::kFloat64:
      return std::bit_cast<uint64_t>(1.0);
    case ir::DType::kFloat16:
      return ir::floatToHalf(1.0f);
    case ir::DType::kBFloat16:
      return ir::floatToBfloat16(1.0f);
    default:
      return 1;
  }
}

// ---- OneHot(indices, depth, values[off, on]) ----

int64_t oneHotDepth(const ir::Tensor& depth) {
  if (depth.numel() != 1)
    throw Error(ErrorCode::kInvalidModel,
                "depth must hold exactly one value, got shape " + ir::shapeStr(depth.shape));
  double d = readScalar(depth);
  if (!(d >= 1)) throw Error(ErrorCode::kInvalidModel, "depth must be positive, got " + std::to_string(d));
  // Past 2^62 the cast would be undefined, and no tensor could have that dim anyway.
  if (!(d < 0x1p62)) throw Error(ErrorCode::kInvalidModel, "depth " + std::to_string(d) + " is too large");
  return int64_t(d);
}

void inferOneHot(InferContext& c) {
  const ir::TensorType& indices = c.input(0);
  ir::DType dtype = c.input(2).dtype;
  c.outputs[0] = ir::TensorType::unranked(dtype);
  if (!indices.has_rank) return;
  int64_t axis = 0;
  ir::Dim depth{};
  try {
    axis = normalizeAxis(c.attrs().getInt("axis", -1), int64_t(indices.rank()), "axis", true);
    if (const ir::Tensor* d = c.value(1)) depth = ir::Dim::known(oneHotDepth(*d));
  } catch (const Error& e) {
    c.fail(e.what());
  }
  ir::TensorType out{dtype, true, indices.dims};
  out.dims.insert(out.dims.begin() + axis, depth);
  c.outputs[0] = std::move(out);
}

void runOneHot(KernelContext& c) {
  const ir::Tensor& indices = c.inputs[0];
  const ir::Tensor& values = c.inputs[2];
  ir::Tensor& y = c.outputs[0];
  int64_t axis = 0, depth = 0;
  try {
    axis = normalizeAxis(c.attrs().getInt("axis", -1), int64_t(indices.rank()), "axis", true);
    depth = oneHotDepth(c.inputs[1]);
  } catch (const Error& e) {
    c.fail(e.what());
  }
  if (values.numel() != 2)
    c.fail("values must hold [off_value, on_value], got shape " + ir::shapeStr(values.shape));
  AxisSplit s;  // over the indices: [outer, inner] around the inserted axis
  for (int64_t i = 0; i < int64_t(indices.rank()); ++i)
    (i < axis ? s.outer : s.inner) *= indices.shape[size_t(i)];
  s.n = depth;
  if (y.numel() != mulDims(c, mulDims(c, s.outer, s.n), s.inner))
    c.fail("output shape " + ir::shapeStr(y.shape) + " does not match");
  if (y.dtype != values.dtype) c.fail("the output's dtype does not match values'");
  std::vector<int64_t> idx(size_t(indices.numel()));
  for (size_t i = 0; i < idx.size(); ++i) {
    double v = readScalar(indices, int64_t(i));
    // Non-finite or beyond any depth: out of range, so the row stays all off.
    idx[i] = std::isfinite(v) && std::fabs(v) < 0x1p62 ? int64_t(v) : depth;
  }
  dispatchWidth(y.dtype, c.node.op_type, [&](auto w) {
    using W = typename decltype(w)::type;
    const W off = values.as<W>()[0], on = values.as<W>()[1];
    W* out = y.as<W>();
    std::fill(out, out + y.numel(), off);
    for (int64_t o = 0; o < s.outer; ++o)
      for (int64_t i = 0; i < s.inner; ++i) {
        int64_t v = idx[size_t(o * s.inner + i)];
        if (v < 0) v += depth;
        if (v < 0 || v >= depth) continue;
        out[(o * depth + v) * s.inner + i] = on;
      }
  });
}

// ---- Trilu(input, k) with `upper` ----

void inferTrilu(InferContext& c) {
  sameAsInput(c);
  const ir::TensorType& x = c.input(0);
  if (x.has_rank && x.rank() < 2) c.fail("the input must have rank >= 2, got " + x.str());
}

void runTrilu(KernelContext& c) {
  const ir::Tensor& x = c.inputs[0];
  ir::Tensor& y = c.outputs[0];
  if (x.rank() < 2) c.fail("the input must have rank >= 2, got " + ir::shapeStr(x.shape));
  int64_t k = 0;
  if (c.hasInput(1)) {
    if (c.inputs[1].numel() != 1) c.fail("k must hold exactly one value");
    k = readInts(c.inputs[1])[0];
  }
  const bool upper = c.attrs().getInt("upper", 1) != 0;
  const int64_t rows = x.dim(-2), cols = x.dim(-1);
  const int64_t batches = rows * cols != 0 ? x.numel() / (rows * cols) : 0;
  dispatchWidth(x.dtype, c.node.op_type, [&](auto w) {
    using W = typename decltype(w)::type;
    const W* in = x.as<W>();
    W* out = y.as<W>();
#pragma omp parallel for if (x.numel() > (1 << 16)) schedule(static)
    for (int64_t r = 0; r < batches * rows; ++r) {
      const int64_t i = r % rows;
      const W* xr = in + r * cols;
      W* yr = out + r * cols;
      // upper keeps j - i >= k; lower keeps j - i <= k.
      for (int64_t j = 0; j < cols; ++j) {
        bool keep = upper ? (j - i >= k) : (j - i <= k);
        yr[j] = keep ? xr[j] : W(0);
      }
    }
  });
}

// ---- EyeLike(input) with `dtype` and `k` ----

ir::DType eyeLikeDType(const InferContext& c) {
  if (!c.attrs().has("dtype")) return c.input(0).dtype;
  int64_t t = c.attrs().getInt("dtype", 0);
  ir::DType d = ir::dtypeFromOnnx(t);
  if (d == ir::DType::kUndefined) c.fail("unsupported dtype " + std::to_string(t));
  return d;
}

void inferEyeLike(InferContext& c) {
  const ir::TensorType& x = c.input(0);
  c.outputs[0] = x;
  c.outputs[0].dtype = eyeLikeDType(c);
  if (x.has_rank && x.rank() != 2) c.fail("the input must have rank 2, got " + x.str());
}

void runEyeLike(KernelContext& c) {
  ir::Tensor& y = c.outputs[0];
  if (y.rank() != 2) c.fail("the input must have rank 2, got " + ir::shapeStr(y.shape));
  const int64_t k = c.attrs().getInt("k", 0);
  const int64_t rows = y.shape[0], cols = y.shape[1];
  const uint64_t one = oneBits(y.dtype);
  dispatchWidth(y.dtype, c.node.op_type, [&](auto w) {
    using W = typename decltype(w)::type;
    W* out = y.as<W>();
    std::fill(out, out + y.numel(), W(0));
    // Rows whose diagonal entry i + k lies in [0, cols), without forming i + k for a
    // k that would overflow.
    const bool none = k >= cols || k <= -rows;
    const int64_t first = none ? 0 : std::max<int64_t>(0, -k);
    const int64_t last = none ? 0 : std::min(rows, cols - k);
    for (int64_t i = first; i < last; ++i) out[i * cols + i + k] = W(one);
  });
}

}  // namespace

void registerMatrixOps(OpRegistry& r) {
  r.add("OneHot", {inferOneHot, runOneHot});
  r.add("Trilu", {inferTrilu, runTrilu});
  r.add("EyeLike", {inferEyeLike, runEyeLike});
}

}  // namespace partita::kernels
