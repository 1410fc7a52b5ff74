// lowerHalfPrecision: float16/bfloat16 compute -> float32 (passes.h has the contract).
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kernels/elementwise_cast.h"
#include "kernels/op_util.h"
#include "partita/error.h"
#include "passes/passes.h"

namespace partita::passes {

namespace {

bool isHalf(ir::DType t) { return t == ir::DType::kFloat16 || t == ir::DType::kBFloat16; }

// ONNX's TensorProto number of a float type (Cast's "to").
int64_t onnxFloatType(ir::DType t) {
  switch (t) {
    case ir::DType::kFloat16:
      return 10;
    case ir::DType::kBFloat16:
      return 16;
    case ir::DType::kFloat64:
      return 11;
    default:
      return 1;
  }
}

// Ops whose float16 tensors may become float32 with only the precision changing: the
// output's float type follows the inputs'. Excluded: Cast/CastLike (their types are
// their meaning), ops whose output type comes from an attribute, ops with subgraphs,
// and every op outside the default domain (partita.Call included).
bool retypable(const ir::Node& n) {
  static const std::set<std::string> kKeep = {
      "Cast", "CastLike", "ConstantOfShape", "RandomNormal", "RandomUniform", "RandomNormalLike",
      "RandomUniformLike", "EyeLike", "Bernoulli", "Multinomial", "If", "Loop", "Scan", "Constant",
      "SequenceMap", "Optional", "OptionalGetElement", "OptionalHasElement"};
  if (!n.domain.empty() && n.domain != "ai.onnx") return false;
  return kKeep.count(n.op_type) == 0;
}

class Lowering {
 public:
  Lowering(ir::Graph& g, bool lossy) : g_(g), lossy_(lossy) {}

  PrecisionReport run() {
    std::vector<ir::Node> old = std::move(g_.nodes);
    g_.nodes.clear();
    for (ir::Node& n : old) {
      if (retypable(n) && touchesHalf(n))
        retype(std::move(n));
      else
        emit(std::move(n));
    }
    foldCastPairs();
    return report_;
  }

 private:
  bool touchesHalf(const ir::Node& n) const {
    for (ir::ValueId v : n.inputs)
      if (v != ir::kNoValue && isHalf(g_.typeOf(v).dtype)) return true;
    for (ir::ValueId v : n.outputs)
      if (v != ir::kNoValue && isHalf(g_.typeOf(v).dtype)) return true;
    return false;
  }

  void emit(ir::Node n) { g_.addNode(std::move(n)); }

  ir::ValueId cast(ir::ValueId from, ir::DType to, const std::string& name) {
    ir::TensorType t = g_.typeOf(from);
    t.dtype = to;
    ir::ValueId out = g_.addValue(name, t);
    ir::Node c;
    c.op_type = "Cast";
    c.opset = 13;
    c.name = name;
    c.inputs = {from};
    c.outputs = {out};
    c.attrs.setInt("to", onnxFloatType(to));
    emit(std::move(c));
    return out;
  }

  // The float32 version of half value `v`, made once.
  ir::ValueId wide(ir::ValueId v) {
    auto it = wide_.find(v);
    if (it != wide_.end()) return it->second;
    const ir::Value& val = g_.value(v);
    ir::ValueId w;
    if (val.isConstant()) {
      w = wideConstant(val.constant);
    } else {
      w = cast(v, ir::DType::kFloat32, val.name + "/float32");
      ++report_.casts_added;
    }
    wide_.emplace(v, w);
    return w;
  }

  ir::ValueId wideConstant(ir::ConstId id) {
    auto it = wide_const_.find(id);
    if (it != wide_const_.end()) return it->second;
    const ir::Constant& c = g_.constants.get(id);
    std::vector<std::byte> buf(size_t(ir::shapeNumel(c.shape)) * sizeof(float));
    kernels::elementwise::castElements(c.view(), ir::Tensor{ir::DType::kFloat32, c.shape, buf.data()});
    const std::string name = c.name + ":" + std::string(ir::dtypeName(c.dtype)) + "->float32";
    report_.bytes_before += c.nbytes();
    report_.bytes_after += buf.size();
    ++report_.constants_converted;
    ir::ConstId nid = g_.constants.add(name, ir::DType::kFloat32, c.shape, Bytes::fromVector(std::move(buf)));
    ir::ValueId w = g_.addConstantValue(name, nid);
    wide_const_.emplace(id, w);
    return w;
  }

  void retype(ir::Node n) {
    ++report_.nodes_retyped;
    for (ir::ValueId& v : n.inputs)
      if (v != ir::kNoValue && isHalf(g_.typeOf(v).dtype)) v = wide(v);
    std::vector<std::pair<ir::ValueId, ir::ValueId>> narrow;  // (float32 made, the half original)
    for (ir::ValueId& v : n.outputs) {
      if (v == ir::kNoValue || !isHalf(g_.typeOf(v).dtype)) continue;
      ir::TensorType t = g_.typeOf(v);
      t.dtype = ir::DType::kFloat32;
      ir::ValueId w = g_.addValue(g_.value(v).name + "/float32", t);
      wide_.emplace(v, w);
      narrow.emplace_back(w, v);
      v = w;
    }
    emit(std::move(n));
    // The half value stays for readers that were not retyped (and graph outputs);
    // the Cast that makes it is dropped as dead when nothing reads it.
    for (auto [w, v] : narrow) {
      ir::Node c;
      c.op_type = "Cast";
      c.opset = 13;
      c.name = g_.value(v).name + "/narrow";
      c.inputs = {w};
      c.outputs = {v};
      c.attrs.setInt("to", onnxFloatType(g_.typeOf(v).dtype));
      emit(std::move(c));
    }
  }

  // Cast(to A) of Cast(to B) of x, with x of type A: x itself when B is wider than A
  // (exact), or when the caller accepts the lost rounding (B narrower: float32 ->
  // float16 -> float32 computes in float32). Readers of the outer Cast read x.
  void foldCastPairs() {
    auto isCast = [](const ir::Node& n) { return n.op_type == "Cast" && (n.domain.empty() || n.domain == "ai.onnx"); };
    auto rank = [](ir::DType t) {
      return t == ir::DType::kFloat64 ? 3 : t == ir::DType::kFloat32 ? 2 : isHalf(t) ? 1 : 0;
    };
    std::map<ir::ValueId, ir::ValueId> replace;
    for (const ir::Node& outer : g_.nodes) {
      if (!isCast(outer) || !outer.hasInput(0) || !outer.hasOutput(0)) continue;
      const ir::Value& mid = g_.value(outer.inputs[0]);
      if (mid.producer == ir::kNoNode) continue;
      const ir::Node& inner = g_.nodes[size_t(mid.producer)];
      if (!isCast(inner) || !inner.hasInput(0)) continue;
      ir::ValueId x = inner.inputs[0];
      auto r = replace.find(x);
      if (r != replace.end()) x = r->second;
      const ir::DType a = g_.typeOf(outer.outputs[0]).dtype, b = mid.type.dtype, xa = g_.typeOf(x).dtype;
      if (a != xa || rank(a) == 0 || rank(b) == 0) continue;
      if (rank(b) < rank(a) && !lossy_) continue;
      replace[outer.outputs[0]] = x;
      ++report_.casts_folded;
    }
    if (replace.empty()) return;
    for (ir::Node& n : g_.nodes)
      for (ir::ValueId& v : n.inputs) {
        auto it = replace.find(v);
        if (it != replace.end()) v = it->second;
      }
    // A graph output keeps its name: its folded Cast becomes an Identity, which
    // collapseOutputIdentities removes once dead code is gone.
    for (ir::ValueId out : g_.outputs) {
      auto it = replace.find(out);
      if (it == replace.end()) continue;
      ir::Node& folded = g_.nodes[size_t(g_.value(out).producer)];
      folded.op_type = "Identity";
      folded.attrs = {};
      folded.inputs = {it->second};
    }
  }

  ir::Graph& g_;
  bool lossy_;
  PrecisionReport report_;
  std::map<ir::ValueId, ir::ValueId> wide_;
  std::map<ir::ConstId, ir::ValueId> wide_const_;
};

}  // namespace

// An Identity making a graph output from a value that a node makes for it alone (not a
// graph input, output or constant, read by nothing else): that node writes the output
// directly.
void collapseOutputIdentities(ir::Graph& g) {
  std::vector<int> uses = g.useCounts();
  std::set<ir::ValueId> io(g.inputs.begin(), g.inputs.end());
  io.insert(g.outputs.begin(), g.outputs.end());
  bool changed = false;
  for (ir::ValueId out : g.outputs) {
    const ir::NodeId p = g.value(out).producer;
    if (p == ir::kNoNode) continue;
    ir::Node& id = g.nodes[size_t(p)];
    if (id.op_type != "Identity" || !id.hasInput(0)) continue;
    const ir::ValueId x = id.inputs[0];
    const ir::Value& xv = g.value(x);
    if (xv.producer == ir::kNoNode || io.count(x) || uses[size_t(x)] != 1) continue;
    ir::Node& maker = g.nodes[size_t(xv.producer)];
    for (ir::ValueId& o : maker.outputs)
      if (o == x) o = out;
    g.value(out).type = xv.type;
    id.op_type.clear();
    changed = true;
  }
  if (!changed) return;
  std::vector<ir::Node> kept;
  for (ir::Node& n : g.nodes)
    if (!n.op_type.empty()) kept.push_back(std::move(n));
  g.nodes.clear();
  for (ir::Node& n : kept) g.addNode(std::move(n));
  compact(g);
}

namespace {

// The values of integer constant `v` as floats, minus its zero point `zero` (absent:
// 0), which is one value or one per `axis` index (per output channel / column).
std::vector<float> centred(const ir::Graph& g, ir::ValueId v, ir::ValueId zero, size_t axis, bool& ok) {
  const ir::Constant& c = g.constants.get(g.value(v).constant);
  const ir::Tensor t = c.view();
  std::vector<float> out(size_t(t.numel()));
  std::vector<double> z(1, 0.0);
  if (zero != ir::kNoValue) {
    const ir::Constant& zc = g.constants.get(g.value(zero).constant);
    z.resize(size_t(zc.view().numel()));
    for (size_t i = 0; i < z.size(); ++i) z[i] = kernels::readScalar(zc.view(), int64_t(i));
  }
  const int64_t dim = t.shape.empty() ? 1 : t.shape[axis];
  int64_t inner = 1;
  for (size_t d = axis + 1; d < t.shape.size(); ++d) inner *= t.shape[d];
  if (z.size() != 1 && int64_t(z.size()) != dim) {
    ok = false;
    return {};
  }
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double zi = z.size() == 1 ? z[0] : z[size_t((i / inner) % dim)];
    out[size_t(i)] = float(kernels::readScalar(t, i) - zi);
  }
  ok = true;
  return out;
}

// A per-tensor zero point (one value), or none.
bool scalarOrNone(const ir::Graph& g, const ir::Node& n, size_t i) {
  return !n.hasInput(i) || g.typeOf(n.inputs[i]).numel() == 1;
}

}  // namespace

size_t lowerIntegerCompute(ir::Graph& g) {
  std::vector<int> uses = g.useCounts();
  std::set<ir::ValueId> outputs(g.outputs.begin(), g.outputs.end());
  size_t rewritten = 0;
  std::vector<ir::Node> old = std::move(g.nodes);
  g.nodes.clear();
  std::vector<bool> drop(old.size(), false);
  // Cast readers: value -> index of the Cast node reading it.
  std::map<ir::ValueId, size_t> cast_of;
  for (size_t i = 0; i < old.size(); ++i) {
    const ir::Node& n = old[i];
    if (n.op_type == "Cast" && n.domain.empty() && n.hasInput(0) && n.attrs.getInt("to", 0) == 1)
      cast_of[n.inputs[0]] = i;
  }
  std::vector<ir::Node> out_nodes;
  std::map<std::pair<ir::ValueId, ir::ValueId>, ir::ValueId> centred_of;
  for (size_t i = 0; i < old.size(); ++i) {
    if (drop[i]) continue;
    ir::Node& n = old[i];
    const bool mm = n.op_type == "MatMulInteger", conv = n.op_type == "ConvInteger";
    if ((!mm && !conv) || !n.domain.empty() || !n.hasOutput(0) || n.inputs.size() < 2) {
      out_nodes.push_back(std::move(n));
      continue;
    }
    const ir::ValueId y = n.outputs[0];
    auto cast = cast_of.find(y);
    const ir::ValueId a = n.inputs[0], b = n.inputs[1];
    const ir::ValueId az = n.hasInput(2) ? n.inputs[2] : ir::kNoValue;
    const ir::ValueId bz = n.hasInput(3) ? n.inputs[3] : ir::kNoValue;
    const bool fits = cast != cast_of.end() && uses[size_t(y)] == 1 && !outputs.count(y) &&
                      g.value(b).isConstant() && (bz == ir::kNoValue || g.value(bz).isConstant()) &&
                      g.typeOf(b).isStatic() && g.typeOf(b).rank() >= (conv ? 3u : 2u) && scalarOrNone(g, n, 2) &&
                      (az == ir::kNoValue || g.typeOf(az).isStatic());
    if (!fits) {
      out_nodes.push_back(std::move(n));
      continue;
    }
    // Weights minus their zero point (per output channel: ConvInteger axis 0,
    // MatMulInteger the last axis), as a float32 constant.
    bool ok = false;
    const size_t axis = conv ? 0 : g.typeOf(b).rank() - 1;
    std::vector<float> wf = centred(g, b, bz, axis, ok);
    if (!ok) {
      out_nodes.push_back(std::move(n));
      continue;
    }
    const ir::Constant& bc = g.constants.get(g.value(b).constant);
    const std::string wname = bc.name + ":" + std::string(ir::dtypeName(bc.dtype)) + "->float32";
    const std::vector<int64_t> wshape = bc.shape;
    ir::ConstId wid = g.constants.add(wname, ir::DType::kFloat32, wshape,
                                      Bytes::copyOf(wf.data(), wf.size() * sizeof(float)));
    const ir::ValueId w = g.addConstantValue(wname, wid);
    // The activations minus their zero point: DequantizeLinear with scale 1 (exact),
    // one per activation and zero point (Q, K and V projections of one quantized input
    // share it).
    auto [known, fresh] = centred_of.try_emplace({a, az}, ir::kNoValue);
    ir::ValueId& af = known->second;
    if (fresh) {
      ir::TensorType at = g.typeOf(a);
      at.dtype = ir::DType::kFloat32;
      af = g.addValue(g.value(a).name + ":float32", at);
      float one = 1.0f;
      ir::ConstId one_id = g.constants.add(n.name + ":unit_scale", ir::DType::kFloat32, {},
                                           Bytes::copyOf(&one, sizeof one));
      ir::Node dq;
      dq.op_type = "DequantizeLinear";
      dq.opset = 13;
      dq.name = n.name + ":dequantize";
      dq.inputs = {a, g.addConstantValue(n.name + ":unit_scale", one_id)};
      if (az != ir::kNoValue) dq.inputs.push_back(az);
      dq.outputs = {af};
      out_nodes.push_back(std::move(dq));
    }
    // The float computation writes the Cast's output.
    ir::Node& c = old[cast->second];
    ir::Node f;
    f.op_type = mm ? "MatMul" : "Conv";
    f.opset = 13;
    f.name = n.name;
    f.attrs = n.attrs;
    f.inputs = {af, w};
    f.outputs = {c.outputs[0]};
    out_nodes.push_back(std::move(f));
    drop[cast->second] = true;
    ++rewritten;
  }
  for (ir::Node& n : out_nodes) g.addNode(std::move(n));
  eliminateDead(g);
  g.verify();
  return rewritten;
}

PrecisionReport lowerHalfPrecision(ir::Graph& g) {
  PrecisionReport r = Lowering(g, true).run();
  eliminateDead(g);
  collapseOutputIdentities(g);
  g.verify();
  return r;
}

}  // namespace partita::passes
