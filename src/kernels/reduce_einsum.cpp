// Einsum. The equation is parsed into integer labels (letters, and one label per
// ellipsis dimension, right-aligned across operands as numpy broadcasts). Operands are
// contracted left to right: each pairwise step packs both sides into [batch, M, K] and
// [batch, K, N] (summing labels no one else needs, taking diagonals through strides)
// and multiplies with BLAS for float32/float64. One operand reduces to a permuted sum.
#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels/reduce_common.h"

namespace partita::kernels {

namespace {

using namespace reduce;

constexpr int kEllipsisBase = 52;  // labels 0..51 are letters

struct EinsumSpec {
  std::vector<std::vector<int>> inputs;  // one label per dimension of each input
  std::vector<int> output;
};

int letterLabel(char ch) {
  if (ch >= 'a' && ch <= 'z') return ch - 'a';
  if (ch >= 'A' && ch <= 'Z') return 26 + (ch - 'A');
  return -1;
}

[[noreturn]] void badEquation(const std::string& eq, const std::string& why) {
  throw Error(ErrorCode::kInvalidModel, "equation '" + eq + "': " + why);
}

// Parses one term into letter labels with kEllipsis marking where "..." stood.
constexpr int kEllipsis = -2;
std::vector<int> parseTerm(const std::string& eq, const std::string& term) {
  std::vector<int> out;
  bool seen_ellipsis = false;
  for (size_t i = 0; i < term.size(); ++i) {
    if (term[i] == '.') {
      if (term.compare(i, 3, "...") != 0 || seen_ellipsis) badEquation(eq, "malformed ellipsis");
      seen_ellipsis = true;
      out.push_back(kEllipsis);
      i += 2;
      continue;
    }
    int l = letterLabel(term[i]);
    if (l < 0) badEquation(eq, std::string("unexpected character '") + term[i] + "'");
    out.push_back(l);
  }
  return out;
}

EinsumSpec parseEinsum(const std::string& equation, const std::vector<size_t>& ranks) {
  std::string eq;
  for (char ch : equation)
    if (ch != ' ') eq.push_back(ch);
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<std::vector<int>> terms;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    terms.push_back(parseTerm(equation, lhs.substr(start, comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != ranks.size())
    badEquation(equation,
                std::to_string(terms.size()) + " terms for " + std::to_string(ranks.size()) + " inputs");

  EinsumSpec spec;
  size_t max_ellipsis = 0;
  std::vector<int> count(kEllipsisBase, 0);
  for (size_t t = 0; t < terms.size(); ++t) {
    const auto& term = terms[t];
    bool has_ellipsis = std::count(term.begin(), term.end(), kEllipsis) > 0;
    size_t letters = term.size() - (has_ellipsis ? 1 : 0);
    if (ranks[t] < letters || (!has_ellipsis && ranks[t] != letters))
      badEquation(equation, "term " + std::to_string(t) + " does not match an input of rank " +
                                std::to_string(ranks[t]));
    size_t width = ranks[t] - letters;
    max_ellipsis = std::max(max_ellipsis, width);
    std::vector<int> labels;
    for (int l : term) {
      if (l != kEllipsis) {
        labels.push_back(l);
        ++count[size_t(l)];
        continue;
      }
      labels.push_back(kEllipsis);  // expanded below, once max_ellipsis is known
    }
    spec.inputs.push_back(std::move(labels));
  }
  // Expand ellipses, right-aligned: an input with w ellipsis dims takes the last w.
  for (size_t t = 0; t < spec.inputs.size(); ++t) {
    std::vector<int> expanded;
    size_t letters =
        spec.inputs[t].size() - size_t(std::count(spec.inputs[t].begin(), spec.inputs[t].end(), kEllipsis));
    size_t width = ranks[t] - letters;
    for (int l : spec.inputs[t]) {
      if (l != kEllipsis) {
        expanded.push_back(l);
        continue;
      }
      for (size_t j = max_ellipsis - width; j < max_ellipsis; ++j) expanded.push_back(kEllipsisBase + int(j));
    }
    spec.inputs[t] = std::move(expanded);
  }
  if (arrow == std::string::npos) {
    for (size_t j = 0; j < max_ellipsis; ++j) spec.output.push_back(kEllipsisBase + int(j));
    // Letters used exactly once, in character order ('A'..'Z' before 'a'..'z').
    for (int l = 26; l < 52; ++l)
      if (count[size_t(l)] == 1) spec.output.push_back(l);
    for (int l = 0; l < 26; ++l)
      if (count[size_t(l)] == 1) spec.output.push_back(l);
    return spec;
  }
  for (int l : parseTerm(equation, eq.substr(arrow + 2))) {
    if (l == kEllipsis) {
      for (size_t j = 0; j < max_ellipsis; ++j) spec.output.push_back(kEllipsisBase + int(j));
      continue;
    }
    if (count[size_t(l)] == 0) badEquation(equation, "an output label appears in no input");
    spec.output.push_back(l);
  }
  std::vector<int> sorted = spec.output;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    badEquation(equation, "an output label is repeated");
  return spec;
}

int numLabels(const EinsumSpec& spec) {
  int n = kEllipsisBase;
  for (const auto& in : spec.inputs)
    for (int l : in) n = std::max(n, l + 1);
  return n;
}

void inferEinsum(InferContext& c) {
  ir::DType dtype = c.input(0).dtype;
  c.outputs[0] = ir::TensorType::unranked(dtype);
  std::vector<size_t> ranks;
  for (size_t i = 0; i < c.numInputs(); ++i) {
    if (!c.input(i).has_rank) return;
    ranks.push_back(c.input(i).rank());
  }
  EinsumSpec spec;
  try {
    spec = parseEinsum(c.attrs().getString("equation", ""), ranks);
  } catch (const Error& e) {
    c.fail(e.what());
  }
  // A label's size: a known size other than 1 wins; 1 when every use is 1; else unknown.
  std::vector<ir::Dim> size(size_t(numLabels(spec)), ir::Dim::known(1));
  std::vector<bool> unknown(size.size(), false);
  for (size_t i = 0; i < spec.inputs.size(); ++i)
    for (size_t d = 0; d < spec.inputs[i].size(); ++d) {
      const ir::Dim& dim = c.input(i).dims[d];
      size_t l = size_t(spec.inputs[i][d]);
      if (!dim.isKnown()) {
        unknown[l] = true;
        continue;
      }
      if (dim.value == 1) continue;
      if (size[l].value != 1 && size[l].value != dim.value)
        c.fail("label sizes " + std::to_string(size[l].value) + " and " + std::to_string(dim.value) +
               " conflict");
      size[l] = dim;
    }
  ir::TensorType out{dtype, true, {}};
  for (int l : spec.output)
    out.dims.push_back(unknown[size_t(l)] && size[size_t(l)].value == 1 ? ir::Dim{} : size[size_t(l)]);
  c.outputs[0] = std::move(out);
}

// A loop nest: sizes and the source strides of each level.
struct Nest {
  std::vector<int64_t> size, stride;
  int64_t count() const {
    int64_t n = 1;
    for (int64_t s : size) n *= s;
    return n;
  }
};

// Calls body(offset) for every position of the nest, row-major.
template <typename F>
void forEachOffset(const Nest& nest, F&& body) {
  const size_t r = nest.size.size();
  if (r == 0) {
    body(int64_t(0));
    return;
  }
  if (nest.count() == 0) return;
  std::vector<int64_t> idx(r, 0);
  const int64_t last = nest.size[r - 1], last_stride = nest.stride[r - 1];
  int64_t off = 0;
  for (;;) {
    for (int64_t i = 0; i < last; ++i) body(off + i * last_stride);
    size_t d = r - 1;
    for (; d-- > 0;) {
      off += nest.stride[d];
      if (++idx[d] < nest.size[d]) break;
      off -= nest.stride[d] * nest.size[d];
      idx[d] = 0;
    }
    if (d == size_t(-1)) return;
  }
}

// An operand during contraction: data with a stride per label (0 when broadcast).
template <typename S>
struct Operand {
  const S* data = nullptr;
  std::vector<int> labels;  // unique
  std::vector<int64_t> strides;

  int64_t strideOf(int l) const {
    for (size_t i = 0; i < labels.size(); ++i)
      if (labels[i] == l) return strides[i];
    return -1;
  }
  bool has(int l) const { return strideOf(l) >= 0; }
};

// dest (contiguous, in `order`) = the operand summed over `summed`.
template <typename S, typename C>
void sumPermute(const Operand<S>& a, const std::vector<int>& order, const std::vector<int>& summed,
                const std::vector<int64_t>& sizes, C* dest) {
  Nest outer, inner;
  for (int l : order) {
    outer.size.push_back(sizes[size_t(l)]);
    outer.stride.push_back(a.strideOf(l));
  }
  for (int l : summed) {
    inner.size.push_back(sizes[size_t(l)]);
    inner.stride.push_back(a.strideOf(l));
  }
  int64_t d = 0;
  if (inner.size.empty()) {
    forEachOffset(outer, [&](int64_t base) { dest[d++] = C(Elem<S>::load(a.data[base])); });
    return;
  }
  forEachOffset(outer, [&](int64_t base) {
    C acc = 0;
    forEachOffset(inner, [&](int64_t off) { acc += C(Elem<S>::load(a.data[base + off])); });
    dest[d++] = acc;
  });
}

// True when `a` is laid out contiguously in `order` with nothing to sum.
template <typename S>
bool isContiguous(const Operand<S>& a, const std::vector<int>& order, const std::vector<int64_t>& sizes) {
  if (order.size() != a.labels.size()) return false;
  int64_t expect = 1;
  for (size_t i = order.size(); i-- > 0;) {
    int64_t sz = sizes[size_t(order[i])];
    if (sz != 1 && a.strideOf(order[i]) != expect) return false;
    expect *= sz;
  }
  return true;
}

// Packs `a` into `order` (summing `summed`) unless it already is; returns the data.
template <typename S, typename C>
const C* packed(const Operand<S>& a, const std::vector<int>& order, const std::vector<int>& summed,
                const std::vector<int64_t>& sizes, std::vector<C>& storage) {
  if constexpr (std::is_same_v<S, C>)
    if (summed.empty() && isContiguous(a, order, sizes)) return a.data;
  int64_t n = 1;
  for (int l : order) n *= sizes[size_t(l)];
  storage.resize(size_t(n));
  sumPermute(a, order, summed, sizes, storage.data());
  return storage.data();
}

// out[b] = A[b] (m x k) * B[b] (k x n), all row-major and contiguous.
template <typename C>
void batchedGemm(const C* a, const C* b, C* out, int64_t batch, int64_t m, int64_t k, int64_t n) {
  if (batch * m * n == 0) return;
  if (k == 0) {
    std::fill(out, out + batch * m * n, C(0));
    return;
  }
  for (int64_t i = 0; i < batch; ++i) {
    const C* ai = a + i * m * k;
    const C* bi = b + i * k * n;
    C* oi = out + i * m * n;
    if constexpr (std::is_same_v<C, float>) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(m), int(n), int(k), 1.0f, ai, int(k), bi,
                  int(n), 0.0f, oi, int(n));
    } else if constexpr (std::is_same_v<C, double>) {
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(m), int(n), int(k), 1.0, ai, int(k), bi,
                  int(n), 0.0, oi, int(n));
    } else {
      // Integer types have no BLAS; a plain i-k-j loop.
      std::fill(oi, oi + m * n, C(0));
      for (int64_t r = 0; r < m; ++r)
        for (int64_t p = 0; p < k; ++p) {
          const C av = ai[r * k + p];
          for (int64_t col = 0; col < n; ++col) oi[r * n + col] += av * bi[p * n + col];
        }
    }
  }
}

template <typename S>
Operand<S> viewOf(const ir::Tensor& t, const std::vector<int>& labels, const std::vector<int64_t>& sizes) {
  Operand<S> op;
  op.data = t.as<S>();
  std::vector<int64_t> strides = stridesOf(t.shape);
  for (size_t d = 0; d < labels.size(); ++d) {
    // A dim of 1 against a larger label size broadcasts: stride 0.
    int64_t s = (t.shape[d] == 1 && sizes[size_t(labels[d])] != 1) ? 0 : strides[d];
    auto it = std::find(op.labels.begin(), op.labels.end(), labels[d]);
    if (it == op.labels.end()) {
      op.labels.push_back(labels[d]);
      op.strides.push_back(s);
    } else {
      op.strides[size_t(it - op.labels.begin())] += s;  // a repeated label walks the diagonal
    }
  }
  return op;
}

template <typename T>
void einsumTyped(KernelContext& c, const EinsumSpec& spec, const std::vector<int64_t>& sizes) {
  using C = typename Elem<T>::Compute;
  T* y = c.outputs[0].as<T>();
  const size_t num = c.inputs.size();
  std::vector<Operand<T>> inputs;
  for (size_t i = 0; i < num; ++i) inputs.push_back(viewOf<T>(c.inputs[i], spec.inputs[i], sizes));
  const int nlabels = int(sizes.size());

  // Labels needed after operand t: the output's and those of operands t+1...
  auto neededAfter = [&](size_t t) {
    std::vector<bool> need(size_t(nlabels), false);
    for (int l : spec.output) need[size_t(l)] = true;
    for (size_t j = t + 1; j < num; ++j)
      for (int l : inputs[j].labels) need[size_t(l)] = true;
    return need;
  };

  auto finish = [&](const auto& op) {
    std::vector<int> summed;
    for (int l : op.labels)
      if (std::find(spec.output.begin(), spec.output.end(), l) == spec.output.end()) summed.push_back(l);
    using SrcT = std::remove_cv_t<std::remove_pointer_t<decltype(op.data)>>;
    if constexpr (std::is_same_v<T, C>) {
      sumPermute<SrcT, C>(op, spec.output, summed, sizes, y);
    } else {
      std::vector<C> tmp(size_t(c.outputs[0].numel()));
      sumPermute<SrcT, C>(op, spec.output, summed, sizes, tmp.data());
      for (size_t i = 0; i < tmp.size(); ++i) y[i] = Elem<T>::store(tmp[i]);
    }
  };
  if (num == 1) {
    finish(inputs[0]);
    return;
  }

  // Left fold. `cur` is either input 0 (type T) or an intermediate (type C).
  std::vector<C> cur_storage, a_pack, b_pack;
  Operand<C> cur;
  bool cur_is_input = true;
  for (size_t t = 1; t < num; ++t) {
    const Operand<T>& b = inputs[t];
    std::vector<bool> need = neededAfter(t);
    std::vector<int> curLabels = cur_is_input ? inputs[0].labels : cur.labels;
    std::vector<int> batch, m, k, n, a_sum, b_sum;
    for (int l : curLabels) {
      bool in_b = b.has(l), needed = need[size_t(l)];
      if (in_b && needed)
        batch.push_back(l);
      else if (in_b)
        k.push_back(l);
      else if (needed)
        m.push_back(l);
      else
        a_sum.push_back(l);
    }
    for (int l : b.labels) {
      if (std::find(curLabels.begin(), curLabels.end(), l) != curLabels.end()) continue;
      (need[size_t(l)] ? n : b_sum).push_back(l);
    }
    auto prod = [&](const std::vector<int>& ls) {
      int64_t p = 1;
      for (int l : ls) p *= sizes[size_t(l)];
      return p;
    };
    std::vector<int> a_order = batch, b_order = batch, result = batch;
    a_order.insert(a_order.end(), m.begin(), m.end());
    a_order.insert(a_order.end(), k.begin(), k.end());
    b_order.insert(b_order.end(), k.begin(), k.end());
    b_order.insert(b_order.end(), n.begin(), n.end());
    result.insert(result.end(), m.begin(), m.end());
    result.insert(result.end(), n.begin(), n.end());

    const C* ap = cur_is_input ? packed(inputs[0], a_order, a_sum, sizes, a_pack)
                               : packed(cur, a_order, a_sum, sizes, a_pack);
    const C* bp = packed(b, b_order, b_sum, sizes, b_pack);
    std::vector<C> out(size_t(prod(result)));
    batchedGemm(ap, bp, out.data(), prod(batch), prod(m), prod(k), prod(n));
    cur_storage = std::move(out);
    cur = Operand<C>{cur_storage.data(), result, {}};
    cur.strides.assign(result.size(), 0);
    int64_t s = 1;
    for (size_t i = result.size(); i-- > 0;) {
      cur.strides[i] = s;
      s *= sizes[size_t(result[i])];
    }
    cur_is_input = false;
  }
  finish(cur);
}

void runEinsum(KernelContext& c) {
  std::vector<size_t> ranks;
  for (const ir::Tensor& t : c.inputs) ranks.push_back(t.rank());
  EinsumSpec spec;
  try {
    spec = parseEinsum(c.attrs().getString("equation", ""), ranks);
  } catch (const Error& e) {
    c.fail(e.what());
  }
  std::vector<int64_t> sizes(size_t(numLabels(spec)), 1);
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    if (c.inputs[i].dtype != c.inputs[0].dtype) c.fail("all inputs must have the same dtype");
    for (size_t d = 0; d < spec.inputs[i].size(); ++d) {
      int64_t dim = c.inputs[i].shape[d];
      int64_t& s = sizes[size_t(spec.inputs[i][d])];
      if (dim == 1) continue;
      if (s != 1 && s != dim)
        c.fail("label sizes " + std::to_string(s) + " and " + std::to_string(dim) + " conflict");
      s = dim;
    }
  }
  PARTITA_DISPATCH_NUMERIC(c.inputs[0].dtype, c.node.op_type, einsumTyped<T>(c, spec, sizes));
}

}  // namespace

void registerEinsumOp(OpRegistry& r) { r.add("Einsum", {inferEinsum, runEinsum}); }

}  // namespace partita::kernels
