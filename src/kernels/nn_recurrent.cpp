// LSTM, GRU and RNN on the host: every attribute of opsets 1-14 (directions,
// sequence_lens, initial states, peepholes, clip, activations with alpha/beta,
// input_forget, linear_before_reset, layout), float32 and float64.
//
// The input projection of every timestep (and both directions) is one GEMM
// [seq*batch, input] x W^T with the biases folded in; each step is one product of the
// hidden state by R^T (two for GRU without linear_before_reset, whose candidate gate
// reads r * H; on R packed once per run for up to 8 rows, see stepProduct, else BLAS)
// and the gate arithmetic, row by row. Two directions run on two threads when the
// kernel has them.
//
// sequence_lens as ONNX Runtime reads it: batch entry b runs its first len[b] steps
// (reverse: from step len[b] - 1 down to 0); Y is zero past len[b]; Y_h (and Y_c) of an
// entry with len[b] = 0 is zero.
#include "kernels/nn_recurrent.h"

#include <omp.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <exception>
#include <vector>

#include "kernels/elementwise_math.h"
#include "kernels/nn_gemm.h"
#include "kernels/nn_ops.h"
#include "kernels/nn_window.h"
#include "kernels/op_util.h"
#include "partita/error.h"

namespace partita::kernels {

// ---- attributes ------------------------------------------------------------------------

namespace {

struct ActivationName {
  const char* name;
  RecurrentActivation::Fn fn;
  bool uses_alpha, uses_beta;
  float alpha, beta;  // defaults: those of the ONNX op of that name
};

constexpr ActivationName kActivations[] = {
    {"relu", RecurrentActivation::Fn::kRelu, false, false, 0, 0},
    {"tanh", RecurrentActivation::Fn::kTanh, false, false, 0, 0},
    {"sigmoid", RecurrentActivation::Fn::kSigmoid, false, false, 0, 0},
    {"affine", RecurrentActivation::Fn::kAffine, true, true, 1.0f, 0.0f},
    {"leakyrelu", RecurrentActivation::Fn::kLeakyRelu, true, false, 0.01f, 0},
    {"thresholdedrelu", RecurrentActivation::Fn::kThresholdedRelu, true, false, 1.0f, 0},
    {"scaledtanh", RecurrentActivation::Fn::kScaledTanh, true, true, 1.0f, 1.0f},
    {"hardsigmoid", RecurrentActivation::Fn::kHardSigmoid, true, true, 0.2f, 0.5f},
    {"elu", RecurrentActivation::Fn::kElu, true, false, 1.0f, 0},
    {"softsign", RecurrentActivation::Fn::kSoftsign, false, false, 0, 0},
    {"softplus", RecurrentActivation::Fn::kSoftplus, false, false, 0, 0},
};

std::string lower(std::string s) {
  for (char& ch : s) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

}  // namespace

bool RecurrentAttrs::defaultActivations() const {
  using Fn = RecurrentActivation::Fn;
  for (int64_t d = 0; d < num_directions; ++d)
    for (size_t k = 0; k < perDirection(); ++k) {
      Fn want = kind == RecurrentKind::kRnn ? Fn::kTanh : k == 0 ? Fn::kSigmoid : Fn::kTanh;
      if (activation(d, k).fn != want) return false;
    }
  return true;
}

bool readRecurrentAttrs(const ir::Node& node, RecurrentAttrs& a, std::string& why) {
  const ir::AttributeMap& at = node.attrs;
  if (node.op_type == "LSTM") {
    a.kind = RecurrentKind::kLstm;
    a.gates = 4;
  } else if (node.op_type == "GRU") {
    a.kind = RecurrentKind::kGru;
    a.gates = 3;
  } else if (node.op_type == "RNN") {
    a.kind = RecurrentKind::kRnn;
    a.gates = 1;
  } else {
    why = "not a recurrent op";
    return false;
  }
  const std::string dir = at.getString("direction", "forward");
  if (dir == "forward") {
    a.direction = RecurrentDirection::kForward;
  } else if (dir == "reverse") {
    a.direction = RecurrentDirection::kReverse;
  } else if (dir == "bidirectional") {
    a.direction = RecurrentDirection::kBidirectional;
  } else {
    why = "direction must be forward, reverse or bidirectional, got '" + dir + "'";
    return false;
  }
  a.num_directions = a.direction == RecurrentDirection::kBidirectional ? 2 : 1;
  a.hidden = at.has("hidden_size") ? at.getInt("hidden_size", 0) : -1;
  if (at.has("hidden_size") && a.hidden < 0) {
    why = "hidden_size must not be negative, got " + std::to_string(a.hidden);
    return false;
  }
  a.layout = at.getInt("layout", 0);
  if (a.layout != 0 && a.layout != 1) {
    why = "layout must be 0 or 1, got " + std::to_string(a.layout);
    return false;
  }
  if (a.layout != 0 && node.opset < 14) {
    why = "layout is an attribute of opset 14 on, the model is opset " + std::to_string(node.opset);
    return false;
  }
  a.has_clip = at.has("clip");
  a.clip = at.getFloat("clip", 0);
  if (a.has_clip && !(a.clip > 0)) {
    why = "clip must be positive, got " + std::to_string(a.clip);
    return false;
  }
  a.input_forget = a.kind == RecurrentKind::kLstm && at.getInt("input_forget", 0) != 0;
  a.linear_before_reset = a.kind == RecurrentKind::kGru && at.getInt("linear_before_reset", 0) != 0;

  const size_t per = a.perDirection();
  std::vector<std::string> names;
  if (at.has("activations")) names = at.getStrings("activations");
  if (names.empty()) {
    if (a.kind == RecurrentKind::kRnn) names = {"Tanh"};
    if (a.kind == RecurrentKind::kGru) names = {"Sigmoid", "Tanh"};
    if (a.kind == RecurrentKind::kLstm) names = {"Sigmoid", "Tanh", "Tanh"};
  }
  if (names.size() == per && a.num_directions == 2) {  // one list for both directions
    std::vector<std::string> both = names;
    both.insert(both.end(), names.begin(), names.end());
    names = both;
  }
  if (names.size() != per * size_t(a.num_directions)) {
    why = "activations lists " + std::to_string(names.size()) + " functions, " + node.op_type + " with direction " +
          dir + " takes " + std::to_string(per * size_t(a.num_directions));
    return false;
  }
  // activation_alpha / activation_beta are consumed in order by the functions that
  // take them; a function whose value is not in the list gets its op's default.
  const std::vector<float> alphas = at.getFloats("activation_alpha");
  const std::vector<float> betas = at.getFloats("activation_beta");
  size_t next_alpha = 0, next_beta = 0;
  a.activations.clear();
  for (const std::string& name : names) {
    const ActivationName* found = nullptr;
    for (const ActivationName& k : kActivations)
      if (lower(name) == k.name) found = &k;
    if (!found) {
      why = "unknown activation '" + name +
            "' (expected Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, "
            "Softsign or Softplus)";
      return false;
    }
    RecurrentActivation act{found->fn, found->alpha, found->beta};
    if (found->uses_alpha && next_alpha < alphas.size()) act.alpha = alphas[next_alpha++];
    if (found->uses_beta && next_beta < betas.size()) act.beta = betas[next_beta++];
    a.activations.push_back(act);
  }
  return true;
}

RecurrentAttrs readRecurrentAttrs(const ir::Node& node) {
  RecurrentAttrs a;
  std::string why;
  if (!readRecurrentAttrs(node, a, why)) failNode(node, why);
  return a;
}

namespace {

// ---- inference -----------------------------------------------------------------------

bool recurrentDType(ir::DType t) { return t == ir::DType::kFloat32 || t == ir::DType::kFloat64; }

void inferRecurrent(InferContext& c) {
  RecurrentAttrs a;
  std::string why;
  if (!readRecurrentAttrs(c.node, a, why)) c.fail(why);
  const bool lstm = a.kind == RecurrentKind::kLstm;
  const char* names[] = {"X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"};
  for (size_t i = 0; i < 3; ++i)
    if (!c.hasInput(i)) c.fail(std::string("input ") + names[i] + " is missing");
  const ir::TensorType& x = c.input(kRecX);
  if (x.dtype != ir::DType::kUndefined && !recurrentDType(x.dtype))
    c.fail("X has dtype " + std::string(ir::dtypeName(x.dtype)) + ", only float32 and float64 are supported");
  for (size_t i = 0; i < c.numInputs() && i < 8; ++i) {
    if (!c.hasInput(i) || i == kRecSequenceLens) continue;
    const ir::TensorType& t = c.input(i);
    if (t.dtype != x.dtype) c.fail(std::string(names[i]) + " is " + t.str() + " but X is " + x.str());
  }
  if (c.hasInput(kRecSequenceLens)) {
    const ir::DType t = c.input(kRecSequenceLens).dtype;
    if (t != ir::DType::kInt32 && t != ir::DType::kInt64)
      c.fail("sequence_lens must be int32, got " + c.input(kRecSequenceLens).str());
  }
  auto rank = [&](size_t i, size_t want) {
    const ir::TensorType& t = c.input(i);
    if (t.has_rank && t.rank() != want)
      c.fail(std::string(names[i]) + " must have rank " + std::to_string(want) + ", got " + t.str());
  };
  rank(kRecX, 3);
  rank(kRecW, 3);
  rank(kRecR, 3);
  const ir::TensorType& r = c.input(kRecR);
  const ir::Dim unknown{};
  ir::Dim hidden = a.hidden >= 0 ? ir::Dim::known(a.hidden) : r.has_rank ? r.dims[2] : unknown;
  const ir::Dim seq = x.has_rank ? x.dims[a.layout ? 1 : 0] : unknown;
  const ir::Dim batch = x.has_rank ? x.dims[a.layout ? 0 : 1] : unknown;
  const ir::Dim input = x.has_rank ? x.dims[2] : unknown;
  const ir::Dim nd = ir::Dim::known(a.num_directions);
  auto gatesTimes = [&](int64_t k) {
    return hidden.isKnown() ? ir::Dim::known(mulDims(c, hidden.value, k * a.gates)) : unknown;
  };
  // Each input's dims against what X, hidden_size and the direction say.
  auto expect = [&](size_t i, const std::vector<ir::Dim>& want) {
    if (!c.hasInput(i)) return;
    const ir::TensorType& t = c.input(i);
    if (!t.has_rank) return;
    bool ok = t.rank() == want.size();
    for (size_t k = 0; ok && k < want.size(); ++k)
      if (t.dims[k].isKnown() && want[k].isKnown() && t.dims[k].value != want[k].value) ok = false;
    if (ok) return;
    std::string shape = "[";
    for (size_t k = 0; k < want.size(); ++k)
      shape += (k ? "," : "") + (want[k].isKnown() ? std::to_string(want[k].value) : std::string("?"));
    c.fail(std::string(names[i]) + " is " + t.str() + ", expected " + shape + "]");
  };
  expect(kRecW, {nd, gatesTimes(1), input});
  expect(kRecR, {nd, gatesTimes(1), hidden});
  expect(kRecB, {nd, gatesTimes(2)});
  expect(kRecSequenceLens, {batch});
  const std::vector<ir::Dim> state = a.layout ? std::vector<ir::Dim>{batch, nd, hidden}
                                              : std::vector<ir::Dim>{nd, batch, hidden};
  expect(kRecInitialH, state);
  if (lstm) {
    expect(kRecInitialC, state);
    expect(kRecP, {nd, hidden.isKnown() ? ir::Dim::known(mulDims(c, hidden.value, 3)) : unknown});
  }
  if (c.numInputs() > (lstm ? 8u : 6u)) c.fail("has too many inputs");
  if (c.outputs.size() > (lstm ? 3u : 2u)) c.fail("has too many outputs");
  const ir::TensorType y{x.dtype, true,
                         a.layout ? std::vector<ir::Dim>{batch, seq, nd, hidden}
                                  : std::vector<ir::Dim>{seq, nd, batch, hidden}};
  const ir::TensorType yh{x.dtype, true, state};
  for (size_t o = 0; o < c.outputs.size(); ++o) c.outputs[o] = o == kRecY ? y : yh;
}

// ---- kernel --------------------------------------------------------------------------

template <typename T>
void clipInPlace(T* v, int64_t n, T bound) {
  for (int64_t j = 0; j < n; ++j) v[j] = v[j] > bound ? bound : (v[j] < -bound ? -bound : v[j]);
}

template <typename T>
void activate(const RecurrentActivation& act, T* v, int64_t n) {
  using elementwise::expOf;
  using elementwise::tanhOf;
  using Fn = RecurrentActivation::Fn;
  const T alpha = T(act.alpha), beta = T(act.beta);
  switch (act.fn) {
    case Fn::kRelu:
      for (int64_t j = 0; j < n; ++j) v[j] = v[j] > T(0) ? v[j] : T(0);
      break;
    case Fn::kTanh:
      for (int64_t j = 0; j < n; ++j) v[j] = tanhOf(v[j]);
      break;
    case Fn::kSigmoid:
      for (int64_t j = 0; j < n; ++j) v[j] = T(1) / (T(1) + expOf(-v[j]));
      break;
    case Fn::kAffine:
      for (int64_t j = 0; j < n; ++j) v[j] = alpha * v[j] + beta;
      break;
    case Fn::kLeakyRelu:
      for (int64_t j = 0; j < n; ++j) v[j] = v[j] >= T(0) ? v[j] : alpha * v[j];
      break;
    case Fn::kThresholdedRelu:
      for (int64_t j = 0; j < n; ++j) v[j] = v[j] > alpha ? v[j] : T(0);
      break;
    case Fn::kScaledTanh:
      for (int64_t j = 0; j < n; ++j) v[j] = alpha * tanhOf(beta * v[j]);
      break;
    case Fn::kHardSigmoid:
      for (int64_t j = 0; j < n; ++j) v[j] = std::min(T(1), std::max(T(0), alpha * v[j] + beta));
      break;
    case Fn::kElu:
      for (int64_t j = 0; j < n; ++j) v[j] = v[j] >= T(0) ? v[j] : alpha * (expOf(v[j]) - T(1));
      break;
    case Fn::kSoftsign:
      for (int64_t j = 0; j < n; ++j) v[j] = v[j] / (T(1) + std::fabs(v[j]));
      break;
    case Fn::kSoftplus:  // log(1 + e^x), without overflow for large x
      for (int64_t j = 0; j < n; ++j) v[j] = v[j] > T(0) ? v[j] + std::log1p(std::exp(-v[j])) : std::log1p(std::exp(v[j]));
      break;
  }
}

template <typename T>
void gemm(bool parallel, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
          int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  if (parallel)
    gemmParallel(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  else
    gemmSerial(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// The per-step product of the state rows by R^T: C[m, n] = A[m, k] x R[n, k]^T. BLAS
// packs R on every call, which for a few rows costs as much as the product (an LSTM
// of hidden 256 at batch 4 took 3x ONNX Runtime's time). So up to kFewRows rows, R is
// packed once per run into panels of R^T, kPanelCols columns wide and stored one
// after the other (each streams past contiguously), and the product runs panel by
// panel with its sums in registers, split over the threads by panels when large.
// More rows go to BLAS.
constexpr int64_t kFewRows = 8;

template <typename T>
constexpr int64_t kPanelCols = 4 * 64 / int64_t(sizeof(T));  // four 512-bit vectors

template <typename T>
struct PackedR {
  const T* r = nullptr;  // the rows [n, k] as they are (for BLAS)
  int64_t n = 0, k = 0, panels = 0;
  std::vector<T> data;  // panels x [k, W], then the last n - panels * W columns as [k, rest]

  void pack(const T* rows, int64_t n_, int64_t k_, bool few) {
    r = rows;
    n = n_;
    k = k_;
    if (!few) return;
    constexpr int64_t W = kPanelCols<T>;
    panels = n / W;
    const int64_t rest = n - panels * W;
    data.resize(size_t(n * k));
    for (int64_t q = 0; q < panels; ++q)
      for (int64_t j = 0; j < W; ++j) {
        const T* src = rows + (q * W + j) * k;
        T* dst = data.data() + q * k * W + j;
        for (int64_t p = 0; p < k; ++p) dst[p * W] = src[p];
      }
    T* tail = data.data() + panels * k * W;
    for (int64_t j = 0; j < rest; ++j) {
      const T* src = rows + (panels * W + j) * k;
      for (int64_t p = 0; p < k; ++p) tail[p * rest + j] = src[p];
    }
  }
};

template <typename T, int R>
void panel(int64_t k, const T* a, int64_t lda, const T* b, T* c, int64_t ldc) {
  constexpr int64_t W = kPanelCols<T>;
  T acc[R][W] = {};
  for (int64_t p = 0; p < k; ++p) {
    const T* row = b + p * W;
    for (int r = 0; r < R; ++r) {
      const T av = a[r * lda + p];
#pragma omp simd
      for (int64_t j = 0; j < W; ++j) acc[r][j] += av * row[j];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int64_t j = 0; j < W; ++j) c[r * ldc + j] = acc[r][j];
}

template <typename T>
void stepProduct(bool parallel, int64_t m, const PackedR<T>& b, const T* a, int64_t lda, T* c, int64_t ldc) {
  const int64_t n = b.n, k = b.k;
  if (m > kFewRows) {
    gemm<T>(parallel, false, true, m, n, k, T(1), a, lda, b.r, k, T(0), c, ldc);
    return;
  }
  constexpr int64_t W = kPanelCols<T>;
  const bool split = parallel && b.panels > 1 && m * n * k >= (int64_t(1) << 18) && omp_get_max_threads() > 1;
#pragma omp parallel for schedule(static) if (split)
  for (int64_t q = 0; q < b.panels; ++q) {
    const T* bq = b.data.data() + q * k * W;
    for (int64_t i0 = 0; i0 < m; i0 += 4) {
      const T* ai = a + i0 * lda;
      T* ci = c + i0 * ldc + q * W;
      switch (std::min<int64_t>(4, m - i0)) {
        case 1: panel<T, 1>(k, ai, lda, bq, ci, ldc); break;
        case 2: panel<T, 2>(k, ai, lda, bq, ci, ldc); break;
        case 3: panel<T, 3>(k, ai, lda, bq, ci, ldc); break;
        default: panel<T, 4>(k, ai, lda, bq, ci, ldc); break;
      }
    }
  }
  const int64_t j0 = b.panels * W, rest = n - j0;  // the columns past the last panel
  const T* tail = b.data.data() + j0 * k;
  for (int64_t i = 0; i < m; ++i) {
    T* ci = c + i * ldc + j0;
    std::fill(ci, ci + rest, T(0));
    for (int64_t p = 0; p < k; ++p) {
      const T av = a[i * lda + p];
      const T* row = tail + p * rest;
      for (int64_t j = 0; j < rest; ++j) ci[j] += av * row[j];
    }
  }
}

template <typename T>
struct Recurrence {
  Recurrence(const KernelContext& ctx, const RecurrentAttrs& attrs) : c(ctx), a(attrs) {}
  const KernelContext& c;
  const RecurrentAttrs& a;
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, gh = 0, nd = 1;
  const T *x = nullptr, *w = nullptr, *r = nullptr, *b = nullptr, *h0 = nullptr, *c0 = nullptr, *p = nullptr;
  T *y = nullptr, *yh = nullptr, *yc = nullptr;
  std::vector<int64_t> lens;
  int64_t max_len = 0;
  std::vector<T> xw;  // [seq*batch rows (X's order), nd * gh]: X W^T + biases

  int64_t xRow(int64_t t, int64_t bi) const { return a.layout ? bi * seq + t : t * batch + bi; }
  T* yAt(int64_t t, int64_t d, int64_t bi) const {
    return y + (a.layout ? ((bi * seq + t) * nd + d) : ((t * nd + d) * batch + bi)) * hidden;
  }
  int64_t stateAt(int64_t d, int64_t bi) const { return (a.layout ? bi * nd + d : d * batch + bi) * hidden; }

  void project(bool parallel) {
    const int64_t rows = seq * batch, cols = nd * gh;
    xw.assign(size_t(rows * cols), T(0));
    if (b) {
      // Wb + Rb, except GRU's candidate gate with linear_before_reset, whose Rb goes
      // inside r * (H R^T + Rb).
      std::vector<T> bias(static_cast<size_t>(cols));
      for (int64_t d = 0; d < nd; ++d)
        for (int64_t j = 0; j < gh; ++j) {
          const T* bd = b + d * 2 * gh;
          const bool inside = a.linear_before_reset && j >= 2 * hidden;
          bias[size_t(d * gh + j)] = bd[j] + (inside ? T(0) : bd[gh + j]);
        }
      for (int64_t row = 0; row < rows; ++row) std::copy(bias.begin(), bias.end(), xw.begin() + row * cols);
    }
    gemm<T>(parallel, false, true, rows, cols, input, T(1), x, input, w, input, b ? T(1) : T(0), xw.data(), cols);
  }

  void direction(int64_t d, bool parallel) {
    const bool reverse = a.direction == RecurrentDirection::kReverse || d == 1;
    const T* rd = r + d * gh * hidden;
    const T* rbh = b && a.linear_before_reset ? b + d * 2 * gh + gh + 2 * hidden : nullptr;
    const T* pd = p ? p + d * 3 * hidden : nullptr;
    const bool lstm = a.kind == RecurrentKind::kLstm, gru = a.kind == RecurrentKind::kGru;
    std::vector<T> h(size_t(batch * hidden), T(0)), cell(lstm ? size_t(batch * hidden) : 0, T(0));
    std::vector<T> gates(size_t(batch * gh)), tmp(size_t(batch * hidden));
    // R packed for the per-step products: all gates, or (GRU without
    // linear_before_reset) z and r, then h apart.
    const bool few = batch <= kFewRows;
    const bool split_h = a.kind == RecurrentKind::kGru && !a.linear_before_reset;
    PackedR<T> r_main, r_h;
    r_main.pack(rd, split_h ? 2 * hidden : gh, hidden, few);
    if (split_h) r_h.pack(rd + 2 * hidden * hidden, hidden, hidden, few);
    for (int64_t bi = 0; bi < batch; ++bi) {
      if (h0) std::copy(h0 + stateAt(d, bi), h0 + stateAt(d, bi) + hidden, h.begin() + bi * hidden);
      if (c0) std::copy(c0 + stateAt(d, bi), c0 + stateAt(d, bi) + hidden, cell.begin() + bi * hidden);
    }
    const T clip = T(a.clip);
    const RecurrentActivation& f = a.activation(d, 0);
    const RecurrentActivation* g = a.kind == RecurrentKind::kRnn ? nullptr : &a.activation(d, 1);
    const RecurrentActivation* hact = lstm ? &a.activation(d, 2) : nullptr;
    auto clipped = [&](T* v, int64_t n) {
      if (a.has_clip) clipInPlace(v, n, clip);
    };
    const int64_t H = hidden;
    for (int64_t s = 0; s < max_len; ++s) {
      // gates = H_{t-1} R^T (GRU without linear_before_reset: z and r only).
      stepProduct<T>(parallel, batch, r_main, h.data(), H, gates.data(), gh);
      auto stepOf = [&](int64_t bi) { return reverse ? lens[size_t(bi)] - 1 - s : s; };
      if (gru && !a.linear_before_reset) {
        // z, r first; then (r * H_{t-1}) Rh^T for every row at once.
        for (int64_t bi = 0; bi < batch; ++bi) {
          T* gz = gates.data() + bi * gh;
          T* hb = h.data() + bi * H;
          T* rh = tmp.data() + bi * H;
          if (s >= lens[size_t(bi)]) {
            std::fill(rh, rh + H, T(0));
            continue;
          }
          const T* xr = xw.data() + xRow(stepOf(bi), bi) * nd * gh + d * gh;
#pragma omp simd
          for (int64_t j = 0; j < 2 * H; ++j) gz[j] += xr[j];
          clipped(gz, 2 * H);
          activate(f, gz, 2 * H);
#pragma omp simd
          for (int64_t j = 0; j < H; ++j) rh[j] = gz[H + j] * hb[j];
        }
        stepProduct<T>(parallel, batch, r_h, tmp.data(), H, gates.data() + 2 * H, gh);
      }
      for (int64_t bi = 0; bi < batch; ++bi) {
        if (s >= lens[size_t(bi)]) continue;
        const int64_t t = stepOf(bi);
        const T* xr = xw.data() + xRow(t, bi) * nd * gh + d * gh;
        T* gt = gates.data() + bi * gh;
        T* hb = h.data() + bi * H;
        if (a.kind == RecurrentKind::kRnn) {
#pragma omp simd
          for (int64_t j = 0; j < H; ++j) hb[j] = gt[j] + xr[j];
          clipped(hb, H);
          activate(f, hb, H);
        } else if (gru) {
          T* gz = gt;
          T* gr = gt + H;
          T* gc = gt + 2 * H;
          if (a.linear_before_reset) {
#pragma omp simd
            for (int64_t j = 0; j < 2 * H; ++j) gz[j] += xr[j];
            clipped(gz, 2 * H);
            activate(f, gz, 2 * H);
#pragma omp simd
            for (int64_t j = 0; j < H; ++j) gc[j] = xr[2 * H + j] + gr[j] * (gc[j] + (rbh ? rbh[j] : T(0)));
          } else {
#pragma omp simd
            for (int64_t j = 0; j < H; ++j) gc[j] += xr[2 * H + j];
          }
          clipped(gc, H);
          activate(*g, gc, H);
#pragma omp simd
          for (int64_t j = 0; j < H; ++j) hb[j] = (T(1) - gz[j]) * gc[j] + gz[j] * hb[j];
        } else {  // LSTM, gates i, o, f, c
          T* gi = gt;
          T* go = gt + H;
          T* gf = gt + 2 * H;
          T* gc = gt + 3 * H;
          T* cb = cell.data() + bi * H;
#pragma omp simd
          for (int64_t j = 0; j < H; ++j) {
            gi[j] += xr[j];
            gf[j] += xr[2 * H + j];
            gc[j] += xr[3 * H + j];
          }
          if (pd)
#pragma omp simd
            for (int64_t j = 0; j < H; ++j) {
              gi[j] += pd[j] * cb[j];
              gf[j] += pd[2 * H + j] * cb[j];
            }
          clipped(gi, H);
          activate(f, gi, H);
          if (a.input_forget) {
#pragma omp simd
            for (int64_t j = 0; j < H; ++j) gf[j] = T(1) - gi[j];
          } else {
            clipped(gf, H);
            activate(f, gf, H);
          }
          clipped(gc, H);
          activate(*g, gc, H);
#pragma omp simd
          for (int64_t j = 0; j < H; ++j) cb[j] = gf[j] * cb[j] + gi[j] * gc[j];
#pragma omp simd
          for (int64_t j = 0; j < H; ++j) go[j] += xr[H + j] + (pd ? pd[H + j] * cb[j] : T(0));
          clipped(go, H);
          activate(f, go, H);
          T* ct = tmp.data() + bi * H;
          std::copy(cb, cb + H, ct);
          activate(*hact, ct, H);
#pragma omp simd
          for (int64_t j = 0; j < H; ++j) hb[j] = go[j] * ct[j];
        }
        if (y) std::copy(hb, hb + H, yAt(t, d, bi));
      }
    }
    for (int64_t bi = 0; bi < batch; ++bi) {
      const bool empty = lens[size_t(bi)] == 0;
      if (yh) {
        T* dst = yh + stateAt(d, bi);
        if (empty) std::fill(dst, dst + H, T(0));
        else std::copy(h.begin() + bi * H, h.begin() + (bi + 1) * H, dst);
      }
      if (yc) {
        T* dst = yc + stateAt(d, bi);
        if (empty) std::fill(dst, dst + H, T(0));
        else std::copy(cell.begin() + bi * H, cell.begin() + (bi + 1) * H, dst);
      }
    }
  }
};

template <typename T>
void runRecurrentTyped(KernelContext& c, const RecurrentAttrs& a) {
  const bool lstm = a.kind == RecurrentKind::kLstm;
  const ir::Tensor& xt = c.inputs[kRecX];
  const ir::Tensor& wt = c.inputs[kRecW];
  const ir::Tensor& rt = c.inputs[kRecR];
  auto input = [&](size_t i) -> const ir::Tensor* {
    if (!c.hasInput(i)) return nullptr;
    if (c.inputs[i].dtype != xt.dtype && i != kRecSequenceLens) c.fail("inputs have different dtypes");
    return &c.inputs[i];
  };
  if (xt.rank() != 3 || rt.rank() != 3) c.fail("X and R must have rank 3");
  Recurrence<T> rec(c, a);
  rec.seq = xt.shape[a.layout ? 1 : 0];
  rec.batch = xt.shape[a.layout ? 0 : 1];
  rec.input = xt.shape[2];
  rec.hidden = a.hidden >= 0 ? a.hidden : rt.shape[2];
  rec.nd = a.num_directions;
  rec.gh = mulDims(c, rec.hidden, a.gates);
  const int64_t nd = rec.nd, gh = rec.gh, H = rec.hidden, batch = rec.batch;
  auto check = [&](const ir::Tensor* t, const char* name, const std::vector<int64_t>& want) {
    if (t && t->shape != want)
      c.fail(std::string(name) + " is " + ir::shapeStr(t->shape) + ", expected " + ir::shapeStr(want));
  };
  check(&wt, "W", {nd, gh, rec.input});
  check(&rt, "R", {nd, gh, H});
  const ir::Tensor* bt = input(kRecB);
  check(bt, "B", {nd, mulDims(c, gh, 2)});
  const std::vector<int64_t> state = a.layout ? std::vector<int64_t>{batch, nd, H} : std::vector<int64_t>{nd, batch, H};
  const ir::Tensor* h0 = input(kRecInitialH);
  check(h0, "initial_h", state);
  const ir::Tensor* c0 = lstm ? input(kRecInitialC) : nullptr;
  check(c0, "initial_c", state);
  const ir::Tensor* pt = lstm ? input(kRecP) : nullptr;
  check(pt, "P", {nd, mulDims(c, H, 3)});
  rec.x = xt.as<const T>();
  rec.w = wt.as<const T>();
  rec.r = rt.as<const T>();
  rec.b = bt ? bt->as<const T>() : nullptr;
  rec.h0 = h0 ? h0->as<const T>() : nullptr;
  rec.c0 = c0 ? c0->as<const T>() : nullptr;
  rec.p = pt ? pt->as<const T>() : nullptr;
  rec.lens.assign(size_t(batch), rec.seq);
  if (c.hasInput(kRecSequenceLens)) {
    const ir::Tensor& lt = c.inputs[kRecSequenceLens];
    if (lt.shape != std::vector<int64_t>{batch})
      c.fail("sequence_lens is " + ir::shapeStr(lt.shape) + ", expected [" + std::to_string(batch) + "]");
    rec.lens = readInts(lt);
    for (int64_t len : rec.lens)
      if (len < 0 || len > rec.seq)
        c.fail("sequence_lens holds " + std::to_string(len) + ", outside [0, " + std::to_string(rec.seq) + "]");
  }
  for (int64_t len : rec.lens) rec.max_len = std::max(rec.max_len, len);
  auto output = [&](size_t o, const std::vector<int64_t>& want) -> T* {
    if (o >= c.outputs.size() || !c.outputs[o].defined()) return nullptr;
    if (c.outputs[o].shape != want) c.fail("output " + std::to_string(o) + " has the wrong shape");
    return c.outputs[o].as<T>();
  };
  rec.y = output(kRecY, a.layout ? std::vector<int64_t>{batch, rec.seq, nd, H}
                                 : std::vector<int64_t>{rec.seq, nd, batch, H});
  rec.yh = output(kRecYh, state);
  rec.yc = lstm ? output(kRecYc, state) : nullptr;
  bool ragged = false;  // Y is zero past each entry's length
  for (int64_t len : rec.lens) ragged |= len != rec.seq;
  if (rec.y && ragged) std::fill(rec.y, rec.y + c.outputs[kRecY].numel(), T(0));
  if (rec.seq == 0 || batch == 0) {
    for (T* o : {rec.yh, rec.yc})
      if (o) std::fill(o, o + ir::shapeNumel(state), T(0));
    return;
  }
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  rec.project(threads > 1);
  if (nd == 2 && threads > 1) {
    // The two directions are independent: one thread each, serial GEMMs.
    std::exception_ptr error;
#pragma omp parallel for num_threads(2) schedule(static, 1)
    for (int64_t d = 0; d < 2; ++d) {
      try {
        rec.direction(d, false);
      } catch (...) {
#pragma omp critical
        error = std::current_exception();
      }
    }
    if (error) std::rethrow_exception(error);
  } else {
    for (int64_t d = 0; d < nd; ++d) rec.direction(d, threads > 1);
  }
}

void runRecurrent(KernelContext& c) {
  const RecurrentAttrs a = readRecurrentAttrs(c.node);
  if (c.inputs.size() < 3 || !c.hasInput(kRecX) || !c.hasInput(kRecW) || !c.hasInput(kRecR))
    c.fail("needs inputs X, W and R");
  switch (c.inputs[kRecX].dtype) {
    case ir::DType::kFloat32:
      runRecurrentTyped<float>(c, a);
      break;
    case ir::DType::kFloat64:
      runRecurrentTyped<double>(c, a);
      break;
    default:
      unsupportedNode(c.node, "dtype " + std::string(ir::dtypeName(c.inputs[kRecX].dtype)) + " is not supported");
  }
}

}  // namespace

void registerRecurrentOps(OpRegistry& r) {
  r.add("LSTM", {inferRecurrent, runRecurrent});
  r.add("GRU", {inferRecurrent, runRecurrent});
  r.add("RNN", {inferRecurrent, runRecurrent});
}

}  // namespace partita::kernels
