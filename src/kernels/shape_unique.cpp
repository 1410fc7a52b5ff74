// Unique (opset 11): the distinct elements of a tensor (no axis: flattened) or the
// distinct slices along an axis, sorted ascending or in order of first occurrence, with
// each one's first index, the inverse map and the counts. The output sizes depend on
// the data: inference computes them when the input's value is known.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <vector>

#include "kernels/op_util.h"
#include "kernels/shape_common.h"
#include "kernels/shape_ops.h"

namespace partita::kernels::shape {

namespace {

struct UniqueResult {
  std::vector<int64_t> first;    // per unique slice: the index of its first occurrence
  std::vector<int64_t> inverse;  // per input slice: its unique slice
  std::vector<int64_t> counts;
};

// Slices along `axis` (or single elements when axis < 0) compared by value.
template <typename Ctx>
UniqueResult uniqueOf(const Ctx& c, const ir::Tensor& x, int64_t axis, bool sorted) {
  const size_t es = ir::dtypeSize(x.dtype);
  int64_t outer = 1, n = x.numel(), inner = 1;
  if (axis >= 0) {
    n = x.shape[size_t(axis)];
    for (int64_t i = 0; i < axis; ++i) outer *= x.shape[size_t(i)];
    for (size_t i = size_t(axis) + 1; i < x.rank(); ++i) inner *= x.shape[i];
  }
  const auto* base = static_cast<const std::byte*>(x.data);
  // Compares slices a and b element by element in the element type's order.
  auto cmp = [&](int64_t a, int64_t b) -> int {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const std::byte* pa = base + size_t((o * n + a) * inner + i) * es;
        const std::byte* pb = base + size_t((o * n + b) * inner + i) * es;
        int r = 0;
        PARTITA_DISPATCH_ALL(x.dtype, "Unique", {
          T va, vb;
          std::memcpy(&va, pa, sizeof(T));
          std::memcpy(&vb, pb, sizeof(T));
          r = va < vb ? -1 : (vb < va ? 1 : 0);
        });
        if (r != 0) return r;
      }
    return 0;
  };
  if (x.dtype == ir::DType::kFloat16 || x.dtype == ir::DType::kBFloat16)
    c.fail("dtype " + std::string(ir::dtypeName(x.dtype)) + " is not supported");
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return cmp(a, b) < 0; });
  // Groups of equal slices in sorted order; each group's first member is its first occurrence.
  std::vector<int64_t> group_of(static_cast<size_t>(n));
  std::vector<int64_t> group_first, group_count;
  for (size_t k = 0; k < order.size(); ++k) {
    if (k == 0 || cmp(order[k - 1], order[k]) != 0) {
      group_first.push_back(order[k]);
      group_count.push_back(0);
    }
    group_of[size_t(order[k])] = int64_t(group_first.size()) - 1;
    ++group_count.back();
  }
  std::vector<int64_t> rank(group_first.size());  // group -> output position
  std::iota(rank.begin(), rank.end(), 0);
  if (!sorted) {
    std::vector<int64_t> by_first(group_first.size());
    std::iota(by_first.begin(), by_first.end(), 0);
    std::sort(by_first.begin(), by_first.end(),
              [&](int64_t a, int64_t b) { return group_first[size_t(a)] < group_first[size_t(b)]; });
    for (size_t pos = 0; pos < by_first.size(); ++pos) rank[size_t(by_first[pos])] = int64_t(pos);
  }
  UniqueResult r;
  r.first.resize(group_first.size());
  r.counts.resize(group_first.size());
  for (size_t g = 0; g < group_first.size(); ++g) {
    r.first[size_t(rank[g])] = group_first[g];
    r.counts[size_t(rank[g])] = group_count[g];
  }
  r.inverse.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) r.inverse[size_t(i)] = rank[size_t(group_of[size_t(i)])];
  return r;
}

template <typename Ctx>
int64_t uniqueAxis(const Ctx& c, int64_t rank) {
  if (!c.attrs().has("axis")) return -1;
  return normalizeAxis(c.attrs().getInt("axis", 0), rank, "Unique node '" + c.node.name + "': axis");
}

void inferUnique(InferContext& c) {
  const ir::TensorType& x = c.input(0);
  if (c.outputs.size() > 4) c.fail("has at most 4 outputs");
  const ir::Tensor* v = c.value(0);
  ir::Dim count{}, slices{};
  int64_t axis = -1;
  if (x.has_rank) axis = uniqueAxis(c, int64_t(x.rank()));
  else if (c.attrs().has("axis")) v = nullptr;
  if (v) {
    UniqueResult r = uniqueOf(c, *v, axis, c.attrs().getInt("sorted", 1) != 0);
    count = ir::Dim::known(int64_t(r.first.size()));
    slices = ir::Dim::known(int64_t(r.inverse.size()));
  } else if (x.has_rank && axis >= 0) {
    slices = x.dims[size_t(axis)];
  } else if (x.isStatic()) {
    slices = ir::Dim::known(x.numel());
  }
  if (axis >= 0 && x.has_rank) {
    ir::TensorType y = x;
    y.dims[size_t(axis)] = count;
    c.outputs[0] = y;
  } else {
    c.outputs[0] = ir::TensorType{x.dtype, true, {count}};
  }
  if (c.outputs.size() > 1) c.outputs[1] = ir::TensorType{ir::DType::kInt64, true, {count}};
  if (c.outputs.size() > 2) c.outputs[2] = ir::TensorType{ir::DType::kInt64, true, {slices}};
  if (c.outputs.size() > 3) c.outputs[3] = ir::TensorType{ir::DType::kInt64, true, {count}};
}

void runUnique(KernelContext& c) {
  const ir::Tensor& x = c.inputs[0];
  const int64_t axis = uniqueAxis(c, int64_t(x.rank()));
  UniqueResult r = uniqueOf(c, x, axis, c.attrs().getInt("sorted", 1) != 0);
  const ir::Tensor& y = c.outputs[0];
  const size_t es = ir::dtypeSize(x.dtype);
  int64_t outer = 1, n = x.numel(), inner = 1;
  if (axis >= 0) {
    n = x.shape[size_t(axis)];
    for (int64_t i = 0; i < axis; ++i) outer *= x.shape[size_t(i)];
    for (size_t i = size_t(axis) + 1; i < x.rank(); ++i) inner *= x.shape[i];
  }
  const int64_t m = int64_t(r.first.size());
  if (y.numel() != outer * m * inner) c.fail("output " + ir::shapeStr(y.shape) + " does not hold the unique values");
  const auto* src = static_cast<const std::byte*>(x.data);
  auto* dst = static_cast<std::byte*>(y.data);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t k = 0; k < m; ++k)
      std::memcpy(dst + size_t((o * m + k) * inner) * es, src + size_t((o * n + r.first[size_t(k)]) * inner) * es,
                  size_t(inner) * es);
  auto put = [&](size_t out, const std::vector<int64_t>& v) {
    if (out >= c.outputs.size() || !c.outputs[out].defined()) return;
    if (c.outputs[out].numel() != int64_t(v.size())) c.fail("output " + std::to_string(out) + " has the wrong size");
    std::copy(v.begin(), v.end(), c.outputs[out].as<int64_t>());
  };
  put(1, r.first);
  put(2, r.inverse);
  put(3, r.counts);
}

}  // namespace

void registerUniqueOps(OpRegistry& r) { r.add("Unique", {inferUnique, runUnique}); }

}  // namespace partita::kernels::shape
