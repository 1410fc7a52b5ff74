// Det (opset 11): the determinant of each square matrix in the last two dimensions,
// by LU decomposition with partial pivoting in double.
#include <cmath>
#include <utility>
#include <vector>

#include "kernels/float_io.h"
#include "kernels/reduce_common.h"

namespace partita::kernels {

namespace {

void inferDet(InferContext& c) {
  checkArity(c, 1, 1);
  fio::requireFloat(c, 0, "X");
  const ir::TensorType& x = c.input(0);
  if (!x.has_rank) {
    c.outputs[0] = ir::TensorType::unranked(x.dtype);
    return;
  }
  if (x.rank() < 2) c.fail("X must be [..., M, M], got " + x.str());
  const ir::Dim &a = x.dims[x.rank() - 2], &b = x.dims[x.rank() - 1];
  if (a.isKnown() && b.isKnown() && a.value != b.value) c.fail("X's matrices are not square: " + x.str());
  ir::TensorType out = x;
  out.dims.resize(x.rank() - 2);
  c.outputs[0] = out;
}

void runDet(KernelContext& c) {
  const ir::Tensor& x = c.inputs[0];
  const int64_t m = x.shape[x.rank() - 1];
  if (x.shape[x.rank() - 2] != m) c.fail("X's matrices are not square");
  std::vector<double> v = fio::read(c, x, "X");
  const int64_t count = m == 0 ? x.numel() : x.numel() / (m * m);
  std::vector<double> out(size_t(c.outputs[0].numel()), 1.0);
  if (int64_t(out.size()) != count && m != 0) c.fail("output does not match the batch");
  for (int64_t b = 0; b < int64_t(out.size()) && m > 0; ++b) {
    double* a = v.data() + b * m * m;
    double det = 1;
    for (int64_t k = 0; k < m; ++k) {
      int64_t p = k;
      for (int64_t i = k + 1; i < m; ++i)
        if (std::fabs(a[i * m + k]) > std::fabs(a[p * m + k])) p = i;
      if (a[p * m + k] == 0) {
        det = 0;
        break;
      }
      if (p != k) {
        for (int64_t j = 0; j < m; ++j) std::swap(a[k * m + j], a[p * m + j]);
        det = -det;
      }
      det *= a[k * m + k];
      for (int64_t i = k + 1; i < m; ++i) {
        const double f = a[i * m + k] / a[k * m + k];
        for (int64_t j = k + 1; j < m; ++j) a[i * m + j] -= f * a[k * m + j];
      }
    }
    out[size_t(b)] = det;
  }
  fio::write(c, c.outputs[0], out);
}

}  // namespace

void registerDetOp(OpRegistry& r) { r.add("Det", {inferDet, runDet}); }

}  // namespace partita::kernels
