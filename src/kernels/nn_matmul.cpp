// MatMul (numpy semantics: batched, broadcasting, 1-D operands promoted) and Gemm.
// Float types go through BLAS; integer types use plain loops.
#include "kernels/nn_matmul.h"

#include <omp.h>

#include <algorithm>
#include <vector>

#include "kernels/elementwise_cast.h"
#include "kernels/nn_gemm.h"
#include "kernels/nn_ops.h"
#include "kernels/nn_window.h"
#include "kernels/op_util.h"

namespace partita::kernels {

namespace {

bool matmulDType(ir::DType t) {
  switch (t) {
    case ir::DType::kFloat32:
    case ir::DType::kFloat64:
    case ir::DType::kFloat16:
    case ir::DType::kBFloat16:
    case ir::DType::kInt32:
    case ir::DType::kInt64:
    case ir::DType::kUInt32:
    case ir::DType::kUInt64:
    case ir::DType::kUndefined:
      return true;
    default:
      return false;
  }
}

// ---- MatMul ------------------------------------------------------------------------

void inferMatMul(InferContext& c) {
  const ir::TensorType& a = c.input(0);
  const ir::TensorType& b = c.input(1);
  if (!matmulDType(a.dtype)) c.fail("unsupported dtype " + std::string(ir::dtypeName(a.dtype)));
  if (a.dtype != b.dtype && a.dtype != ir::DType::kUndefined && b.dtype != ir::DType::kUndefined)
    c.fail("operands have different dtypes: " + a.str() + " and " + b.str());
  c.outputs[0] = inferMatMulOutput(c, a, b);
}

template <typename T>
void matmulTyped(KernelContext& c, const ir::Tensor& at, const ir::Tensor& bt, const ir::Tensor& yt) {
  std::vector<int64_t> as = at.shape, bs = bt.shape;
  if (as.empty() || bs.empty()) c.fail("operands must not be scalars");
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  if (bs[bs.size() - 2] != k)
    c.fail("inner dimensions differ: " + ir::shapeStr(at.shape) + " x " + ir::shapeStr(bt.shape));
  std::vector<int64_t> abatch(as.begin(), as.end() - 2), bbatch(bs.begin(), bs.end() - 2);
  std::vector<int64_t> batch = broadcastShapes(abatch, bbatch);
  const int64_t nbatch = ir::shapeNumel(batch);
  if (yt.numel() != nbatch * m * n) c.fail("output shape " + ir::shapeStr(yt.shape) + " is wrong");
  const T* a = at.as<const T>();
  const T* b = bt.as<const T>();
  T* y = yt.as<T>();
  if (nbatch == 0 || m == 0 || n == 0) return;

  // Element offsets of each batch's matrices (0 stride on broadcast dims).
  const size_t r = batch.size();
  std::vector<int64_t> astr(r, 0), bstr(r, 0);
  {
    int64_t sa = m * k, sb = k * n;
    for (size_t i = r; i-- > 0;) {
      const size_t ia = i + abatch.size(), ib = i + bbatch.size();  // index + (own rank - r)
      if (ia >= r && abatch[ia - r] != 1) astr[i] = sa;
      if (ib >= r && bbatch[ib - r] != 1) bstr[i] = sb;
      if (ia >= r) sa *= abatch[ia - r];
      if (ib >= r) sb *= bbatch[ib - r];
    }
  }
  const bool a_full = ir::shapeNumel(abatch) == nbatch, b_single = ir::shapeNumel(bbatch) == 1;
  std::vector<int64_t> aoff(static_cast<size_t>(nbatch)), boff(static_cast<size_t>(nbatch));
  std::vector<int64_t> idx(r, 0);
  for (int64_t i = 0; i < nbatch; ++i) {
    int64_t oa = 0, ob = 0;
    for (size_t d = 0; d < r; ++d) {
      oa += idx[d] * astr[d];
      ob += idx[d] * bstr[d];
    }
    aoff[size_t(i)] = oa;
    boff[size_t(i)] = ob;
    for (size_t d = r; d-- > 0;) {
      if (++idx[d] < batch[d]) break;
      idx[d] = 0;
    }
  }

  if constexpr (std::is_floating_point_v<T>) {
    if (a_full && b_single) {  // one tall GEMM: [batch*M, K] x [K, N]
      gemmParallel(false, false, nbatch * m, n, k, T(1), a, k, b, n, T(0), y, n);
      return;
    }
    const int threads = splitThreads();
    if (nbatch >= threads && threads > 1) {
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < nbatch; ++i)
        gemmSerial(false, false, m, n, k, T(1), a + aoff[size_t(i)], k, b + boff[size_t(i)], n, T(0),
                   y + i * m * n, n);
    } else {
      for (int64_t i = 0; i < nbatch; ++i)
        gemmParallel(false, false, m, n, k, T(1), a + aoff[size_t(i)], k, b + boff[size_t(i)], n, T(0),
                     y + i * m * n, n);
    }
  } else {
    const int64_t rows = nbatch * m;
#pragma omp parallel for schedule(static) if (rows > 1 && rows * n * k > 32768)
    for (int64_t row = 0; row < rows; ++row) {
      const int64_t i = row / m, mi = row % m;
      gemmIntegral<T>(false, false, 1, n, k, T(1), a + aoff[size_t(i)] + mi * k, k, b + boff[size_t(i)], n,
                      T(0), y + row * n, n);
    }
  }
}

void runMatMul(KernelContext& c) {
  if (elementwise::anyHalfLike(c)) return elementwise::runThroughFloat(c, runMatMul);
  if (c.inputs[0].dtype != c.inputs[1].dtype) c.fail("operands have different dtypes");
  matmulForward(c, c.inputs[0], c.inputs[1], c.outputs[0]);
}

// ---- Gemm --------------------------------------------------------------------------

void inferGemm(InferContext& c) {
  const ir::TensorType& a = c.input(0);
  const ir::TensorType& b = c.input(1);
  if (!matmulDType(a.dtype)) c.fail("unsupported dtype " + std::string(ir::dtypeName(a.dtype)));
  if ((a.has_rank && a.rank() != 2) || (b.has_rank && b.rank() != 2))
    c.fail("A and B must be matrices, got " + a.str() + " and " + b.str());
  const bool ta = c.attrs().getInt("transA", 0) != 0, tb = c.attrs().getInt("transB", 0) != 0;
  ir::Dim m = a.has_rank ? a.dims[ta ? 1 : 0] : ir::Dim{};
  ir::Dim ka = a.has_rank ? a.dims[ta ? 0 : 1] : ir::Dim{};
  ir::Dim kb = b.has_rank ? b.dims[tb ? 1 : 0] : ir::Dim{};
  ir::Dim n = b.has_rank ? b.dims[tb ? 0 : 1] : ir::Dim{};
  if (ka.isKnown() && kb.isKnown() && ka.value != kb.value)
    c.fail("inner dimensions differ: " + a.str() + " x " + b.str());
  if (c.hasInput(2) && c.input(2).has_rank) {
    const ir::TensorType& ct = c.input(2);
    if (ct.rank() > 2) c.fail("C must have rank <= 2, got " + ct.str());
    const ir::Dim* cm = ct.rank() == 2 ? &ct.dims[0] : nullptr;
    const ir::Dim* cn = ct.rank() >= 1 ? &ct.dims[ct.rank() - 1] : nullptr;
    auto bad = [](const ir::Dim* d, const ir::Dim& want) {
      return d && d->isKnown() && want.isKnown() && d->value != 1 && d->value != want.value;
    };
    if (bad(cm, m) || bad(cn, n)) c.fail("C " + ct.str() + " does not broadcast to the output");
  }
  c.outputs[0] = ir::TensorType{a.dtype, true, {m, n}};
}

template <typename T>
void gemmTyped(KernelContext& c) {
  const ir::Tensor& at = c.inputs[0];
  const ir::Tensor& bt = c.inputs[1];
  if (at.rank() != 2 || bt.rank() != 2) c.fail("A and B must be matrices");
  const bool ta = c.attrs().getInt("transA", 0) != 0, tb = c.attrs().getInt("transB", 0) != 0;
  const T alpha = T(c.attrs().getFloat("alpha", 1.0f));
  T beta = T(c.attrs().getFloat("beta", 1.0f));
  const int64_t m = at.shape[ta ? 1 : 0], k = at.shape[ta ? 0 : 1], n = bt.shape[tb ? 0 : 1];
  if (bt.shape[tb ? 1 : 0] != k)
    c.fail("inner dimensions differ: " + ir::shapeStr(at.shape) + " x " + ir::shapeStr(bt.shape));
  T* y = c.outputs[0].as<T>();
  if (c.outputs[0].shape != std::vector<int64_t>{m, n}) c.fail("output shape is wrong");
  if (c.hasInput(2) && beta != T(0)) {
    const ir::Tensor& ct = c.inputs[2];
    if (ct.dtype != at.dtype || ct.rank() > 2) c.fail("C must have the dtype of A and rank <= 2");
    const int64_t cm = ct.rank() == 2 ? ct.shape[0] : 1;
    const int64_t cn = ct.rank() >= 1 ? ct.shape.back() : 1;
    if ((cm != 1 && cm != m) || (cn != 1 && cn != n))
      c.fail("C " + ir::shapeStr(ct.shape) + " does not broadcast to [" + std::to_string(m) + "," +
             std::to_string(n) + "]");
    const T* cv = ct.as<const T>();
    for (int64_t i = 0; i < m; ++i) {
      const T* crow = cv + (cm == 1 ? 0 : i) * cn;
      T* yrow = y + i * n;
      if (cn == 1) {
        std::fill(yrow, yrow + n, crow[0]);
      } else {
        std::copy(crow, crow + n, yrow);
      }
    }
  } else {
    beta = T(0);
  }
  const T* a = at.as<const T>();
  const T* b = bt.as<const T>();
  const int64_t lda = at.shape[1], ldb = bt.shape[1];
  if constexpr (std::is_floating_point_v<T>) {
    gemmParallel(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, y, n);
  } else {
#pragma omp parallel for schedule(static) if (m > 1 && m * n * k > 32768)
    for (int64_t i = 0; i < m; ++i)
      gemmIntegral<T>(ta, tb, 1, n, k, alpha, ta ? a + i : a + i * lda, lda, b, ldb, beta, y + i * n, n);
  }
}

void runGemm(KernelContext& c) {
  if (elementwise::anyHalfLike(c)) return elementwise::runThroughFloat(c, runGemm);
  if (c.inputs[0].dtype != c.inputs[1].dtype) c.fail("A and B have different dtypes");
  switch (c.inputs[0].dtype) {
    case ir::DType::kFloat32:
      gemmTyped<float>(c);
      break;
    case ir::DType::kFloat64:
      gemmTyped<double>(c);
      break;
    case ir::DType::kInt32:
      gemmTyped<int32_t>(c);
      break;
    case ir::DType::kInt64:
      gemmTyped<int64_t>(c);
      break;
    case ir::DType::kUInt32:
      gemmTyped<uint32_t>(c);
      break;
    case ir::DType::kUInt64:
      gemmTyped<uint64_t>(c);
      break;
    default:
      unsupportedNode(c.node, "dtype " + std::string(ir::dtypeName(c.inputs[0].dtype)) + " is not supported");
  }
}

}  // namespace

ir::TensorType inferMatMulOutput(InferContext& c, const ir::TensorType& a, const ir::TensorType& b) {
  if (!a.has_rank || !b.has_rank) return ir::TensorType::unranked(a.dtype);
  if (a.rank() == 0 || b.rank() == 0) c.fail("operands must not be scalars");
  const ir::Dim one = ir::Dim::known(1);
  ir::Dim m = a.rank() >= 2 ? a.dims[a.rank() - 2] : one;
  ir::Dim ka = a.dims[a.rank() - 1];
  ir::Dim kb = b.rank() >= 2 ? b.dims[b.rank() - 2] : b.dims[0];
  ir::Dim n = b.rank() >= 2 ? b.dims[b.rank() - 1] : one;
  if (ka.isKnown() && kb.isKnown() && ka.value != kb.value)
    c.fail("inner dimensions differ: " + a.str() + " x " + b.str());
  ir::TensorType ba{a.dtype, true, {}}, bb{b.dtype, true, {}};
  if (a.rank() > 2) ba.dims.assign(a.dims.begin(), a.dims.end() - 2);
  if (b.rank() > 2) bb.dims.assign(b.dims.begin(), b.dims.end() - 2);
  ir::TensorType out;
  if (!broadcastTypes(ba, bb, out)) c.fail("batch dimensions do not broadcast: " + a.str() + " x " + b.str());
  out.dtype = a.dtype;
  if (a.rank() >= 2) out.dims.push_back(m);
  if (b.rank() >= 2) out.dims.push_back(n);
  return out;
}

void matmulForward(KernelContext& c, const ir::Tensor& a, const ir::Tensor& b, const ir::Tensor& y) {
  switch (a.dtype) {
    case ir::DType::kFloat32:
      matmulTyped<float>(c, a, b, y);
      break;
    case ir::DType::kFloat64:
      matmulTyped<double>(c, a, b, y);
      break;
    case ir::DType::kInt32:
      matmulTyped<int32_t>(c, a, b, y);
      break;
    case ir::DType::kInt64:
      matmulTyped<int64_t>(c, a, b, y);
      break;
    case ir::DType::kUInt32:
      matmulTyped<uint32_t>(c, a, b, y);
      break;
    case ir::DType::kUInt64:
      matmulTyped<uint64_t>(c, a, b, y);
      break;
    default:
      unsupportedNode(c.node, "dtype " + std::string(ir::dtypeName(a.dtype)) + " is not supported");
  }
}

void registerMatMulOps(OpRegistry& r) {
  r.add("MatMul", {inferMatMul, runMatMul});
  r.add("Gemm", {inferGemm, runGemm});
}

}  // namespace partita::kernels
