// foldReshapeTargets (passes.h): Reshape targets computed from Shape, rewritten as
// constants plus the input dims they copy.
//
// A PyTorch export of `x.view(b, g, c // g, h, w)` with b, c, h, w = x.size() and
// symbolic b, h, w computes the target at run time: Shape, Gather, Unsqueeze, Cast,
// Div, Concat. That chain runs on the host and cuts every backend region in two (a
// ShuffleNet has one per block). The pass follows the int64 values of small shape
// computations element by element -- each element a known number, "dim k of value
// t", or unknown -- and when every element of a Reshape's target is a number or a dim
// of the Reshape's own input (the same value, or a dim with the same named symbol),
// with at most one unknown (which becomes -1: the element count fixes it), the target
// becomes a constant and the copied dims the attribute kernels::kDimsFromInputAttr. The chain
// is then dead. Exact, not sampled: a dim is only ever said to equal another when it
// is read from the same value or carries the same symbol.
#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "kernels/op_registry.h"
#include "kernels/op_util.h"
#include "passes/passes.h"

namespace partita::passes {

namespace {

struct Elem {
  enum Kind { kKnown, kDim, kUnknown } kind = kUnknown;
  double v = 0;                 // kKnown: the number (integral unless the value is float)
  ir::ValueId of = ir::kNoValue;  // kDim: dim `idx` of value `of`
  int64_t idx = 0;
  static Elem known(double v) { return Elem{kKnown, v, ir::kNoValue, 0}; }
  static Elem dim(ir::ValueId t, int64_t i) { return Elem{kDim, 0, t, i}; }
};

// What is known of a small 0-D or 1-D integer (or float, after a Cast) value.
struct Abstract {
  bool scalar = false;
  bool is_float = false;
  std::vector<Elem> e;
  bool allKnown() const {
    for (const Elem& x : e)
      if (x.kind != Elem::kKnown) return false;
    return true;
  }
};

constexpr size_t kMaxElems = 64;

std::optional<Abstract> fromConstant(const ir::Constant& c) {
  if (c.shape.size() > 1 || !c.bytes.data) return std::nullopt;
  const int64_t n = c.shape.empty() ? 1 : c.shape[0];
  if (n < 0 || size_t(n) > kMaxElems) return std::nullopt;
  Abstract a;
  a.scalar = c.shape.empty();
  if (c.dtype == ir::DType::kInt64 || c.dtype == ir::DType::kInt32) {
    for (int64_t v : kernels::readInts(c.view())) a.e.push_back(Elem::known(double(v)));
  } else if (c.dtype == ir::DType::kFloat32) {
    a.is_float = true;
    for (int64_t i = 0; i < n; ++i) a.e.push_back(Elem::known(kernels::readScalar(c.view(), i)));
  } else {
    return std::nullopt;
  }
  return a;
}

// Element i of a broadcast between a and b (equal lengths, or one of length 1).
const Elem& at(const Abstract& a, size_t i) { return a.e.size() == 1 ? a.e[0] : a.e[i]; }

// Which dims of which values are the same number at every run, by construction: each
// dim of a node's output made by copying a dim of an input (elementwise ops, Transpose,
// Concat and Slice off their axes, broadcasting against a 1, a Reshape's copied
// entries, the batch of a Conv or pooling) refers to the dim it was copied from.
struct DimRef {
  ir::ValueId v = ir::kNoValue;
  int64_t i = 0;
  bool operator==(const DimRef&) const = default;
};

class DimOrigins {
 public:
  explicit DimOrigins(const ir::Graph& g) : g_(g) {}

  // The first dim `i` of value `v` was copied from (itself when none).
  DimRef ref(ir::ValueId v, size_t i) const {
    if (size_t(v) < of_.size() && i < of_[size_t(v)].size() && of_[size_t(v)][i].v != ir::kNoValue)
      return of_[size_t(v)][i];
    return DimRef{v, int64_t(i)};
  }

  void visit(const ir::Node& n) {
    if (!n.domain.empty()) return;
    if (of_.size() < g_.values.size()) of_.resize(g_.values.size());
    for (size_t o = 0; o < n.outputs.size(); ++o) {
      if (!n.hasOutput(o) || !g_.typeOf(n.outputs[o]).has_rank) continue;
      std::vector<DimRef> r(g_.typeOf(n.outputs[o]).rank());
      copyDims(n, o, r);
      of_[size_t(n.outputs[o])] = std::move(r);
    }
  }

 private:
  size_t rankOf(const ir::Node& n, size_t i) const {
    return n.hasInput(i) && g_.typeOf(n.inputs[i]).has_rank ? g_.typeOf(n.inputs[i]).rank() : SIZE_MAX;
  }
  std::optional<std::vector<int64_t>> constInts(const ir::Node& n, size_t i) const {
    if (!n.hasInput(i) || !g_.value(n.inputs[i]).isConstant()) return std::nullopt;
    const ir::Constant& c = g_.constants.get(g_.value(n.inputs[i]).constant);
    if (c.dtype != ir::DType::kInt64 || c.shape.size() > 1 || !c.bytes.data) return std::nullopt;
    return kernels::readInts(c.view());
  }

  void copyDims(const ir::Node& n, size_t o, std::vector<DimRef>& r) const {
    static const std::set<std::string> kSameShape = {
        "Relu",     "Sigmoid",    "Tanh",         "Clip",        "LeakyRelu",          "HardSigmoid",
        "HardSwish", "Identity",  "Dropout",      "Cast",        "Neg",                "Abs",
        "Exp",      "Log",        "Sqrt",         "Erf",         "Softmax",            "LogSoftmax",
        "Elu",      "Selu",       "Softplus",     "Gelu",        "BatchNormalization", "LayerNormalization",
        "InstanceNormalization", "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Not",
        "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"};
    static const std::set<std::string> kBroadcast = {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "PRelu",
                                                     "Equal", "Less", "Greater", "And", "Or", "Where"};
    static const std::set<std::string> kBatchKept = {"Conv", "ConvTranspose", "MaxPool", "AveragePool",
                                                     "GlobalAveragePool", "GlobalMaxPool", "LpPool", "Resize"};
    const std::string& op = n.op_type;
    const size_t rank = r.size();
    if (o == 0 && kSameShape.count(op) && rankOf(n, 0) == rank) {
      for (size_t i = 0; i < rank; ++i) r[i] = ref(n.inputs[0], i);
    } else if (o == 0 && op == "Transpose" && rankOf(n, 0) == rank) {
      std::vector<int64_t> perm = n.attrs.getInts("perm");
      if (perm.empty())
        for (size_t i = 0; i < rank; ++i) perm.push_back(int64_t(rank - 1 - i));
      if (perm.size() != rank) return;
      for (size_t i = 0; i < rank; ++i)
        if (perm[i] >= 0 && size_t(perm[i]) < rank) r[i] = ref(n.inputs[0], size_t(perm[i]));
    } else if (o == 0 && kBroadcast.count(op)) {
      broadcastDims(n, n.inputs.size(), rank, r);
    } else if (op == "Concat" || op == "Split") {
      int64_t axis = n.attrs.getInt("axis", 0);
      if (axis < 0) axis += int64_t(rank);
      if (rankOf(n, 0) != rank) return;
      for (size_t i = 0; i < rank; ++i)
        if (int64_t(i) != axis) r[i] = ref(n.inputs[0], i);
    } else if (o == 0 && op == "Slice" && n.opset >= 10 && rankOf(n, 0) == rank) {
      std::optional<std::vector<int64_t>> axes = constInts(n, 3), starts = constInts(n, 1);
      if (!starts) return;
      std::set<int64_t> sliced;
      if (axes) {
        for (int64_t a : *axes) sliced.insert(a < 0 ? a + int64_t(rank) : a);
      } else {
        for (size_t a = 0; a < starts->size(); ++a) sliced.insert(int64_t(a));
      }
      for (size_t i = 0; i < rank; ++i)
        if (!sliced.count(int64_t(i))) r[i] = ref(n.inputs[0], i);
    } else if (o == 0 && op == "Reshape") {
      std::optional<std::vector<int64_t>> target = constInts(n, 1);
      if (!target || target->size() != rank) return;
      const std::vector<int64_t> from = n.attrs.getInts(kernels::kDimsFromInputAttr);
      const bool allowzero = n.opset >= 14 && n.attrs.getInt("allowzero", 0) != 0;
      const size_t in_rank = rankOf(n, 0);
      for (size_t i = 0; i < rank; ++i) {
        if (from.size() == rank && from[i] >= 0 && size_t(from[i]) < in_rank)
          r[i] = ref(n.inputs[0], size_t(from[i]));
        else if ((*target)[i] == 0 && !allowzero && i < in_rank)
          r[i] = ref(n.inputs[0], i);
      }
    } else if (o == 0 && kBatchKept.count(op) && rankOf(n, 0) == rank && rank > 0) {
      r[0] = ref(n.inputs[0], 0);
      if (op.find("Pool") != std::string::npos && rank > 1) r[1] = ref(n.inputs[0], 1);
    } else if (o == 0 && (op == "MatMul" || op == "MatMulInteger") && rankOf(n, 0) == rank && rankOf(n, 1) == 2 &&
               rank >= 2) {
      for (size_t i = 0; i + 1 < rank; ++i) r[i] = ref(n.inputs[0], i);
    } else if (o == 0 && (op == "MatMul" || op == "MatMulInteger") && rank >= 2 && rankOf(n, 0) >= 2 &&
               rankOf(n, 1) >= 2 && rankOf(n, 0) <= rank && rankOf(n, 1) <= rank) {
      // Batched: the rows are A's, the columns B's, the batch dims broadcast.
      r[rank - 2] = ref(n.inputs[0], rankOf(n, 0) - 2);
      r[rank - 1] = ref(n.inputs[1], rankOf(n, 1) - 1);
      broadcastDims(n, 2, rank - 2, r);
    }
  }

  // Output dims [0, count) of a broadcast between the first `inputs` inputs of `n`
  // (aligned at the output's rank `r.size()`): each the one input dim there that is
  // not a 1, or all of them copies of one dim.
  void broadcastDims(const ir::Node& n, size_t inputs, size_t count, std::vector<DimRef>& r) const {
    const size_t rank = r.size();
    for (size_t i = 0; i < count; ++i) {
      std::optional<DimRef> only;
      bool clash = false;
      for (size_t k = 0; k < inputs; ++k) {
        const size_t rk = rankOf(n, k);
        if (rk == SIZE_MAX) {
          clash = true;
          break;
        }
        if (rk + i < rank) continue;  // broadcast from a lower rank: absent here
        const size_t j = i - (rank - rk);
        const ir::Dim& d = g_.typeOf(n.inputs[k]).dims[j];
        if (d.isKnown() && d.value == 1) continue;
        const DimRef x = ref(n.inputs[k], j);
        if (only && !(*only == x)) clash = true;
        only = x;
      }
      if (only && !clash) r[i] = *only;
    }
  }

  const ir::Graph& g_;
  std::vector<std::vector<DimRef>> of_;  // per value: where each dim came from
};

class Tracker {
 public:
  Tracker(const ir::Graph& g, const DimOrigins& origins) : g_(g), origins_(origins), abs_(g.values.size()) {
    for (size_t v = 0; v < g.values.size(); ++v)
      if (g.values[v].isConstant()) abs_[v] = fromConstant(g.constants.get(g.values[v].constant));
  }

  const std::optional<Abstract>& of(ir::ValueId v) const { return abs_[size_t(v)]; }

  void visit(const ir::Node& n) {
    if (abs_.size() < g_.values.size()) abs_.resize(g_.values.size());  // values added since
    for (ir::ValueId v : n.inputs)  // constants the pass made for earlier nodes' inputs
      if (v != ir::kNoValue && !abs_[size_t(v)] && g_.value(v).isConstant())
        abs_[size_t(v)] = fromConstant(g_.constants.get(g_.value(v).constant));
    if (!n.domain.empty() || n.outputs.empty() || !n.hasOutput(0)) return;
    std::optional<Abstract> out = eval(n);
    if (out && out->e.size() <= kMaxElems) abs_[size_t(n.outputs[0])] = std::move(out);
  }

 private:
  const std::optional<Abstract>& in(const ir::Node& n, size_t i) const {
    static const std::optional<Abstract> none;
    return n.hasInput(i) ? abs_[size_t(n.inputs[i])] : none;
  }

  std::optional<Abstract> eval(const ir::Node& n) const {
    const std::string& op = n.op_type;
    if (op == "Shape") {
      const ir::TensorType& t = g_.typeOf(n.inputs[0]);
      if (!t.has_rank) return std::nullopt;
      const int64_t rank = int64_t(t.rank());
      int64_t start = n.opset >= 15 ? n.attrs.getInt("start", 0) : 0;
      int64_t end = n.opset >= 15 ? n.attrs.getInt("end", rank) : rank;
      if (start < 0) start += rank;
      if (end < 0) end += rank;
      start = std::clamp<int64_t>(start, 0, rank);
      end = std::clamp<int64_t>(end, 0, rank);
      Abstract a;
      for (int64_t i = start; i < end; ++i)
        if (t.dims[size_t(i)].isKnown()) {
          a.e.push_back(Elem::known(double(t.dims[size_t(i)].value)));
        } else {
          const DimRef d = origins_.ref(n.inputs[0], size_t(i));
          a.e.push_back(Elem::dim(d.v, d.i));
        }
      return a;
    }
    if (op == "Identity") return in(n, 0);
    if (op == "Cast") {
      const std::optional<Abstract>& a = in(n, 0);
      if (!a) return std::nullopt;
      const ir::DType to = ir::dtypeFromOnnx(n.attrs.getInt("to", 0));
      Abstract r = *a;
      if (to == ir::DType::kInt64 || to == ir::DType::kInt32) {
        for (Elem& x : r.e)
          if (x.kind == Elem::kKnown) x.v = std::trunc(x.v);
        r.is_float = false;
      } else if (to == ir::DType::kFloat32 || to == ir::DType::kFloat64) {
        r.is_float = true;
      } else {
        return std::nullopt;
      }
      return r;
    }
    if (op == "Gather") {
      const std::optional<Abstract>& a = in(n, 0);
      const std::optional<Abstract>& idx = in(n, 1);
      if (!a || a->scalar || !idx || !idx->allKnown()) return std::nullopt;
      if (n.attrs.getInt("axis", 0) != 0 && n.attrs.getInt("axis", 0) != -1) return std::nullopt;
      Abstract r;
      r.scalar = idx->scalar;
      r.is_float = a->is_float;
      const int64_t len = int64_t(a->e.size());
      for (const Elem& i : idx->e) {
        int64_t k = int64_t(i.v);
        if (k < 0) k += len;
        if (k < 0 || k >= len) return std::nullopt;
        r.e.push_back(a->e[size_t(k)]);
      }
      return r;
    }
    if (op == "Unsqueeze" || op == "Squeeze") {
      const std::optional<Abstract>& a = in(n, 0);
      if (!a) return std::nullopt;
      Abstract r = *a;
      if (op == "Unsqueeze") {
        if (!a->scalar) return std::nullopt;  // only 0-D -> [1]
        r.scalar = false;
      } else {
        if (a->scalar || a->e.size() != 1) return std::nullopt;  // only [1] -> 0-D
        r.scalar = true;
      }
      return r;
    }
    if (op == "Concat") {
      Abstract r;
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        const std::optional<Abstract>& a = in(n, i);
        if (!a || a->scalar) return std::nullopt;
        r.is_float = a->is_float;
        r.e.insert(r.e.end(), a->e.begin(), a->e.end());
      }
      return r;
    }
    if (op == "Slice" && n.opset >= 10) {
      const std::optional<Abstract>& a = in(n, 0);
      if (!a || a->scalar) return std::nullopt;
      for (size_t i = 1; i < n.inputs.size(); ++i)
        if (n.hasInput(i) && (!in(n, i) || !in(n, i)->allKnown() || in(n, i)->e.size() != 1)) return std::nullopt;
      if (n.hasInput(3) && int64_t(in(n, 3)->e[0].v) != 0 && int64_t(in(n, 3)->e[0].v) != -1) return std::nullopt;
      const int64_t len = int64_t(a->e.size());
      int64_t start = int64_t(in(n, 1)->e[0].v), end = std::clamp<double>(in(n, 2)->e[0].v, -4e18, 4e18);
      const int64_t step = n.hasInput(4) ? int64_t(in(n, 4)->e[0].v) : 1;
      if (step != 1) return std::nullopt;
      if (start < 0) start += len;
      if (end < 0) end += len;
      start = std::clamp<int64_t>(start, 0, len);
      end = std::clamp<int64_t>(end, 0, len);
      Abstract r;
      r.is_float = a->is_float;
      for (int64_t i = start; i < end; ++i) r.e.push_back(a->e[size_t(i)]);
      return r;
    }
    if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
      const std::optional<Abstract>& a = in(n, 0);
      const std::optional<Abstract>& b = in(n, 1);
      if (!a || !b) return std::nullopt;
      const size_t len = std::max(a->e.size(), b->e.size());
      if ((a->e.size() != len && a->e.size() != 1) || (b->e.size() != len && b->e.size() != 1)) return std::nullopt;
      Abstract r;
      r.scalar = a->scalar && b->scalar;
      r.is_float = a->is_float || b->is_float;
      for (size_t i = 0; i < len; ++i) {
        const Elem &x = at(*a, i), &y = at(*b, i);
        if (x.kind != Elem::kKnown || y.kind != Elem::kKnown) {
          r.e.push_back(Elem{});
          continue;
        }
        double v = 0;
        if (op == "Add") v = x.v + y.v;
        if (op == "Sub") v = x.v - y.v;
        if (op == "Mul") v = x.v * y.v;
        if (op == "Div") {
          if (y.v == 0) return std::nullopt;
          v = r.is_float ? x.v / y.v : std::trunc(x.v / y.v);
        }
        r.e.push_back(Elem::known(v));
      }
      return r;
    }
    return std::nullopt;
  }

  const ir::Graph& g_;
  const DimOrigins& origins_;
  std::vector<std::optional<Abstract>> abs_;
};

// Which dim of `data` element `x` is, or -1.
int64_t dimOfData(const ir::Graph& g, const DimOrigins& origins, ir::ValueId data, const Elem& x) {
  if (x.kind != Elem::kDim) return -1;
  if (g.typeOf(data).has_rank)
    for (size_t k = 0; k < g.typeOf(data).rank(); ++k)
      if (origins.ref(data, k) == DimRef{x.of, x.idx}) return int64_t(k);
  const ir::TensorType& from = g.typeOf(x.of);
  const ir::TensorType& to = g.typeOf(data);
  if (!from.has_rank || size_t(x.idx) >= from.rank() || !to.has_rank) return -1;
  const std::string& symbol = from.dims[size_t(x.idx)].symbol;
  if (symbol.empty()) return -1;
  for (size_t k = 0; k < to.rank(); ++k)
    if (!to.dims[k].isKnown() && to.dims[k].symbol == symbol) return int64_t(k);
  return -1;
}

// A constant with the known elements of `a` in `dtype` (int64 or int32).
ir::ValueId addConstant(ir::Graph& g, const std::string& name, ir::DType dtype, const Abstract& a) {
  std::vector<int64_t> shape;
  if (!a.scalar) shape.push_back(int64_t(a.e.size()));
  std::vector<int64_t> wide;
  std::vector<int32_t> narrow;
  for (const Elem& x : a.e) {
    wide.push_back(int64_t(x.v));
    narrow.push_back(int32_t(x.v));
  }
  void* data = dtype == ir::DType::kInt64 ? static_cast<void*>(wide.data()) : static_cast<void*>(narrow.data());
  const ir::ConstId c = g.constants.addCopy(name, ir::Tensor{dtype, shape, data});
  return g.addConstantValue(name, c);
}

// Node `id`: inputs known in full become constants; a Reshape's computed target
// becomes a constant and its copied dims kDimsFromInputAttr.
void rewrite(ir::Graph& g, size_t id, const DimOrigins& origins, const Tracker& tracker, size_t& rewritten) {
  {
    // An integer input whose every element is known (computed from Shape of static
    // dims: a Slice's starts, an Unsqueeze's axes) becomes a constant.
    for (size_t i = 0; i < g.nodes[id].inputs.size(); ++i) {
      const ir::ValueId in = g.nodes[id].inputs[i];
      if (in == ir::kNoValue || g.value(in).isConstant() || g.value(in).producer == ir::kNoNode) continue;
      const std::optional<Abstract>& a = tracker.of(in);
      const ir::DType dtype = g.typeOf(in).dtype;
      if (!a || a->is_float || !a->allKnown() || (dtype != ir::DType::kInt64 && dtype != ir::DType::kInt32)) continue;
      const ir::ValueId c = addConstant(g, g.value(in).name + "_folded", dtype, *a);
      g.nodes[id].inputs[i] = c;
      ++rewritten;
    }
  }
  {
    const ir::Node& n = g.nodes[id];
    if (!n.domain.empty() || n.op_type != "Reshape" || !n.hasInput(1)) return;
    const bool allowzero = n.opset >= 14 && n.attrs.getInt("allowzero", 0) != 0;
    std::vector<int64_t> target, from;
    size_t unknown = 0, minus_one = 0, zeros = 0, copied = 0;
    bool changed = true;
    if (g.value(n.inputs[1]).isConstant()) {
      // A constant target (the model's, or one this pass made in an earlier round):
      // only its -1 may become a number, now that the input's dims are known better.
      if (g.typeOf(n.inputs[0]).isStatic()) return;
      const ir::Constant& c = g.constants.get(g.value(n.inputs[1]).constant);
      if (c.dtype != ir::DType::kInt64 || c.shape.size() != 1 || !c.bytes.data) return;
      target = kernels::readInts(c.view());
      from = n.attrs.getInts(kernels::kDimsFromInputAttr);
      if (from.size() != target.size()) from.assign(target.size(), -1);
      for (size_t i = 0; i < target.size(); ++i) {
        minus_one += target[i] == -1;
        zeros += target[i] == 0;
        copied += from[i] >= 0;
      }
      if (minus_one != 1) return;
      changed = false;
    }
    const std::optional<Abstract>& t = tracker.of(n.inputs[1]);
    if (changed && (!t || t->scalar || t->is_float || t->e.empty())) return;
    for (size_t i = 0; changed && i < t->e.size(); ++i) {
      const Elem& x = t->e[i];
      const int64_t k = dimOfData(g, origins, n.inputs[0], x);
      if (x.kind == Elem::kKnown) {
        target.push_back(int64_t(x.v));
        from.push_back(-1);
        minus_one += target.back() == -1;
        zeros += target.back() == 0;
      } else if (k >= 0) {
        // A dim copied from the same position is ONNX's own 0 (without allowzero).
        target.push_back(size_t(k) == i && !allowzero ? 0 : 1);
        from.push_back(size_t(k) == i && !allowzero ? -1 : k);
        copied += from.back() >= 0;
      } else {
        target.push_back(-1);
        from.push_back(-1);
        ++unknown;
      }
    }
    if (unknown + minus_one > 1 || (unknown > 0 && allowzero && zeros > 0)) return;
    // The -1 as a number when every unknown dim of the input reappears in the output:
    // then the others' product divided by the output's numbers is exact.
    if (unknown + minus_one == 1) {
      const ir::TensorType& in = g.typeOf(n.inputs[0]);
      std::vector<DimRef> open;
      double in_known = 1, out_known = 1;
      bool ok = in.has_rank;
      for (size_t k = 0; ok && k < in.rank(); ++k) {
        if (in.dims[k].isKnown())
          in_known *= double(in.dims[k].value);
        else
          open.push_back(origins.ref(n.inputs[0], k));
      }
      for (size_t i = 0; ok && i < target.size(); ++i) {
        int64_t k = from[i];
        if (k < 0 && target[i] == 0 && !allowzero) k = int64_t(i);
        if (k >= 0) {
          if (size_t(k) >= in.rank()) {
            ok = false;
          } else if (in.dims[size_t(k)].isKnown()) {
            out_known *= double(in.dims[size_t(k)].value);
          } else {
            auto it = std::find(open.begin(), open.end(), origins.ref(n.inputs[0], size_t(k)));
            if (it == open.end()) ok = false;
            else open.erase(it);
          }
        } else if (target[i] != -1) {
          out_known *= double(target[i]);
        }
      }
        if (ok && open.empty() && out_known > 0 && in_known < 9e15 && std::fmod(in_known, out_known) == 0) {
        for (int64_t& t_i : target)
          if (t_i == -1) t_i = int64_t(in_known / out_known);
        changed = true;
      }
    }
    if (!changed) return;
    Abstract folded;
    for (int64_t v : target) folded.e.push_back(Elem::known(double(v)));
    g.nodes[id].inputs[1] = addConstant(g, g.value(n.inputs[1]).name + "_folded", ir::DType::kInt64, folded);
    if (copied > 0) g.nodes[id].attrs.setInts(kernels::kDimsFromInputAttr, from);
    ++rewritten;
  }
}

}  // namespace

size_t foldReshapeTargets(ir::Graph& g) {
  DimOrigins origins(g);
  Tracker tracker(g, origins);
  size_t rewritten = 0;
  for (size_t id = 0; id < g.nodes.size(); ++id) {
    rewrite(g, id, origins, tracker, rewritten);
    origins.visit(g.nodes[id]);
    tracker.visit(g.nodes[id]);
  }
  return rewritten;
}

}  // namespace partita::passes
