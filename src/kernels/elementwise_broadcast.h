// Loops for elementwise host kernels: N inputs broadcast (numpy rules) to one output.
//
// A BroadcastPlan drops the output's size-1 dimensions and merges neighbours that every
// input walks contiguously, so a same-shape op becomes one flat loop and a per-channel
// op ([N,C,H,W] with [C,1,1]) becomes rows of H*W with a constant operand. The
// innermost loop is instantiated for each pattern of "this input moves / stays put"
// so the compiler vectorises it; large outputs are split across OpenMP threads.
#pragma once

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/op_registry.h"
#include "kernels/op_util.h"
#include "ir/tensor.h"

namespace partita::kernels::elementwise {

// Work (elements times a per-element cost) above which a loop is split across threads.
inline constexpr int64_t kParallelWork = int64_t(1) << 16;

// Relative per-element costs passed to the loops.
inline constexpr int64_t kCheap = 1;       // add, compare, select
inline constexpr int64_t kMedium = 4;      // division, polynomial exp
inline constexpr int64_t kExpensive = 16;  // libm calls

template <size_t N>
struct BroadcastPlan {
  std::vector<int64_t> dims;                    // collapsed output dims, never empty
  std::array<std::vector<int64_t>, N> strides;  // per input, in elements; 0 along broadcast dims
  int64_t numel = 0;
};

// Plans the walk of `out` over inputs of the given shapes. Returns nothing when an
// input does not broadcast to `out`.
template <size_t N>
std::optional<BroadcastPlan<N>> planBroadcast(const std::vector<int64_t>& out,
                                              const std::array<const std::vector<int64_t>*, N>& in) {
  const size_t rank = out.size();
  std::array<std::vector<int64_t>, N> full;  // strides aligned with `out`
  for (size_t k = 0; k < N; ++k) {
    const std::vector<int64_t>& s = *in[k];
    if (s.size() > rank) return std::nullopt;
    full[k].assign(rank, 0);
    int64_t stride = 1;
    for (size_t j = s.size(); j-- > 0;) {
      const size_t d = j + rank - s.size();
      if (s[j] != out[d] && s[j] != 1) return std::nullopt;
      full[k][d] = (s[j] == 1) ? 0 : stride;
      stride *= s[j];
    }
  }
  BroadcastPlan<N> p;
  p.numel = ir::shapeNumel(out);
  for (size_t d = 0; d < rank; ++d) {
    if (out[d] == 1) continue;
    bool merge = !p.dims.empty();
    for (size_t k = 0; merge && k < N; ++k) merge = p.strides[k].back() == full[k][d] * out[d];
    if (merge) {
      p.dims.back() *= out[d];
      for (size_t k = 0; k < N; ++k) p.strides[k].back() = full[k][d];
    } else {
      p.dims.push_back(out[d]);
      for (size_t k = 0; k < N; ++k) p.strides[k].push_back(full[k][d]);
    }
  }
  if (p.dims.empty()) {
    p.dims.push_back(1);
    for (size_t k = 0; k < N; ++k) p.strides[k].push_back(0);
  }
  return p;
}

// Calls body(out_offset, in_offsets, count) for each contiguous run of output elements
// in [begin, end); within a run input k advances by its innermost stride (0 or 1).
template <size_t N, class Body>
void runRange(const BroadcastPlan<N>& p, int64_t begin, int64_t end, Body& body) {
  const size_t rank = p.dims.size();
  const size_t last = rank - 1;
  const int64_t inner = p.dims[last];
  std::vector<int64_t> idx(rank);
  std::array<int64_t, N> off{};
  int64_t rem = begin;
  for (size_t d = rank; d-- > 0;) {
    idx[d] = rem % p.dims[d];
    rem /= p.dims[d];
    for (size_t k = 0; k < N; ++k) off[k] += idx[d] * p.strides[k][d];
  }
  int64_t pos = begin;
  while (pos < end) {
    const int64_t n = std::min(inner - idx[last], end - pos);
    body(pos, off, n);
    pos += n;
    if (pos >= end) break;
    // The run reached the end of a row: rewind it and carry into the outer dims.
    for (size_t k = 0; k < N; ++k) off[k] -= idx[last] * p.strides[k][last];
    idx[last] = 0;
    for (size_t d = last; d-- > 0;) {
      ++idx[d];
      for (size_t k = 0; k < N; ++k) off[k] += p.strides[k][d];
      if (idx[d] < p.dims[d]) break;
      for (size_t k = 0; k < N; ++k) off[k] -= p.dims[d] * p.strides[k][d];
      idx[d] = 0;
    }
  }
}

// Number of threads for `numel` elements of the given cost.
inline int threadsFor(int64_t numel, int64_t cost) {
  if (numel * cost <= kParallelWork) return 1;
  const int64_t by_size = numel / 4096 + 1;
  return int(std::min<int64_t>(omp_get_max_threads(), by_size));
}

template <size_t N, class Body>
void forEachRun(const BroadcastPlan<N>& p, int64_t cost, Body&& body) {
  if (p.numel <= 0) return;
  const int threads = threadsFor(p.numel, cost);
  if (threads <= 1) {
    runRange(p, 0, p.numel, body);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    // Chunk edges on multiples of 64 elements keep vector loads aligned.
    auto edge = [&](int64_t i) {
      return i == nt ? p.numel : std::min(p.numel, (p.numel * i / nt) & ~int64_t(63));
    };
    runRange(p, edge(t), edge(t + 1), body);
  }
}

// Calls fn(std::integral_constant<unsigned, mask>) with the runtime `mask` as a
// compile-time constant (mask < 2^N).
template <size_t N, unsigned M = 0, class Fn>
inline void withMask(unsigned mask, Fn&& fn) {
  if constexpr (M + 1 < (1u << N)) {
    if (mask != M) return withMask<N, M + 1>(mask, fn);
  }
  fn(std::integral_constant<unsigned, M>{});
}

// out[i] = f(in0[i0], in1[i1], ...) with numpy broadcasting of every input to out's
// shape. `O` and `In...` are the C++ element types of the output and inputs. Fails the
// node (kInvalidArgument) when an input does not broadcast to the output.
template <class O, class... In, class F>
void broadcastMap(const KernelContext& c, const ir::Tensor& out,
                  const std::array<const ir::Tensor*, sizeof...(In)>& in, int64_t cost, F f) {
  constexpr size_t N = sizeof...(In);
  std::array<const std::vector<int64_t>*, N> shapes;
  for (size_t k = 0; k < N; ++k) shapes[k] = &in[k]->shape;
  std::optional<BroadcastPlan<N>> plan = planBroadcast<N>(out.shape, shapes);
  if (!plan) {
    std::string msg = "input shapes";
    for (size_t k = 0; k < N; ++k) msg += " " + ir::shapeStr(in[k]->shape);
    c.fail(msg + " do not broadcast to the output shape " + ir::shapeStr(out.shape));
  }
  unsigned mask = 0;
  for (size_t k = 0; k < N; ++k) mask |= (plan->strides[k].back() != 0 ? 1u : 0u) << k;
  O* po = out.as<O>();
  auto bases = [&]<size_t... K>(std::index_sequence<K...>) {
    return std::make_tuple(static_cast<const In*>(in[K]->data)...);
  }
  (std::index_sequence_for<In...>{});

  withMask<N>(mask, [&](auto mask_c) {
    constexpr unsigned kMask = decltype(mask_c)::value;
    auto run = [&](int64_t o, const std::array<int64_t, N>& off, int64_t n) {
      [&]<size_t... K>(std::index_sequence<K...>) {
        auto ptrs = std::make_tuple((std::get<K>(bases) + off[K])...);
        O* z = po + o;
        for (int64_t i = 0; i < n; ++i) z[i] = f(std::get<K>(ptrs)[((kMask >> K) & 1u) ? i : 0]...);
      }
      (std::index_sequence_for<In...>{});
    };
    forEachRun(*plan, cost, run);
  });
}

// out[i] = f(in[i]) over same-shaped dense tensors.
template <class O, class I, class F>
void unaryMap(const ir::Tensor& in, const ir::Tensor& out, int64_t cost, F f) {
  const I* x = in.as<const I>();
  O* y = out.as<O>();
  const int64_t n = out.numel();
  const int threads = threadsFor(n, cost);
  if (threads <= 1) {
    for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
}

}  // namespace partita::kernels::elementwise
