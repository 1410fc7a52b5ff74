#include "kernels/op_util.h"

#include <omp.h>

#include <algorithm>
#include <utility>

#include "ir/dtype.h"

namespace partita::kernels {

namespace {
thread_local int t_split_threads = 0;  // 0: the team size
}  // namespace

int splitThreads() {
  if (omp_in_parallel()) return 1;
  return t_split_threads > 0 ? t_split_threads : omp_get_max_threads();
}

int setSplitThreads(int threads) { return std::exchange(t_split_threads, threads); }

bool broadcastTypes(const ir::TensorType& a, const ir::TensorType& b, ir::TensorType& out) {
  out.dtype = a.dtype;
  if (!a.has_rank || !b.has_rank) {
    out.has_rank = false;
    out.dims.clear();
    return true;
  }
  size_t rank = std::max(a.rank(), b.rank());
  out.has_rank = true;
  out.dims.assign(rank, ir::Dim{});
  for (size_t i = 0; i < rank; ++i) {
    const ir::Dim one = ir::Dim::known(1);
    const ir::Dim& da = i < rank - a.rank() ? one : a.dims[i - (rank - a.rank())];
    const ir::Dim& db = i < rank - b.rank() ? one : b.dims[i - (rank - b.rank())];
    if (da.isKnown() && db.isKnown()) {
      if (da.value != db.value && da.value != 1 && db.value != 1) return false;
      out.dims[i] = ir::Dim::known(da.value == 1 ? db.value : da.value);
    } else if (da.isKnown() && da.value == 1) {
      out.dims[i] = db;
    } else if (db.isKnown() && db.value == 1) {
      out.dims[i] = da;
    } else if (!da.isKnown() && !db.isKnown() && da.symbol == db.symbol && !da.symbol.empty()) {
      out.dims[i] = da;
    } else if (da.isKnown()) {
      out.dims[i] = da;  // the other must be equal at run time
    } else if (db.isKnown()) {
      out.dims[i] = db;
    } else {
      out.dims[i] = ir::Dim{};
    }
  }
  return true;
}

std::vector<int64_t> broadcastShapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      throw Error(ErrorCode::kInvalidArgument,
                  "shapes " + ir::shapeStr(a) + " and " + ir::shapeStr(b) + " cannot broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int64_t normalizeAxis(int64_t axis, int64_t rank, const std::string& what, bool inclusive) {
  int64_t limit = inclusive ? rank + 1 : rank;
  int64_t a = axis < 0 ? axis + limit : axis;
  if (a < 0 || a >= limit)
    throw Error(ErrorCode::kInvalidModel, what + ": axis " + std::to_string(axis) +
                                              " is out of range for rank " + std::to_string(rank));
  return a;
}

std::vector<int64_t> readInts(const ir::Tensor& t) {
  std::vector<int64_t> out(size_t(t.numel()));
  switch (t.dtype) {
    case ir::DType::kInt64:
      for (size_t i = 0; i < out.size(); ++i) out[i] = t.as<int64_t>()[i];
      break;
    case ir::DType::kInt32:
      for (size_t i = 0; i < out.size(); ++i) out[i] = t.as<int32_t>()[i];
      break;
    default:
      throw Error(ErrorCode::kInvalidModel,
                  "expected an int32 or int64 tensor, got " + std::string(ir::dtypeName(t.dtype)));
  }
  return out;
}

double readScalar(const ir::Tensor& t, int64_t index) {
  switch (t.dtype) {
    case ir::DType::kFloat32: return t.as<float>()[index];
    case ir::DType::kFloat64: return t.as<double>()[index];
    case ir::DType::kFloat16: return ir::halfToFloat(t.as<uint16_t>()[index]);
    case ir::DType::kBFloat16: return ir::bfloat16ToFloat(t.as<uint16_t>()[index]);
    case ir::DType::kInt8: return t.as<int8_t>()[index];
    case ir::DType::kInt16: return t.as<int16_t>()[index];
    case ir::DType::kInt32: return t.as<int32_t>()[index];
    case ir::DType::kInt64: return double(t.as<int64_t>()[index]);
    case ir::DType::kUInt8: return t.as<uint8_t>()[index];
    case ir::DType::kUInt16: return t.as<uint16_t>()[index];
    case ir::DType::kUInt32: return t.as<uint32_t>()[index];
    case ir::DType::kUInt64: return double(t.as<uint64_t>()[index]);
    case ir::DType::kBool: return t.as<bool>()[index] ? 1.0 : 0.0;
    default: throw Error(ErrorCode::kInvalidModel, "cannot read a scalar of this dtype");
  }
}

std::vector<int64_t> stridesOf(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int64_t i = int64_t(shape.size()) - 2; i >= 0; --i) s[size_t(i)] = s[size_t(i + 1)] * shape[size_t(i + 1)];
  return s;
}

}  // namespace partita::kernels
