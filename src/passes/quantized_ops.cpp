// fuseQuantizedOps: the QDQ patterns of a statically quantized model written as the
// quantized ops ONNX has for them, so that a backend with int8 kernels computes them
// in int8 (the dnnl backend: oneDNN's u8/s8 convolutions) and the host still can.
// Runs before the first shape inference: the DequantizeLinear of each int8 weight is
// still there (inference folds it into a float32 constant).
#include <cmath>
#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "kernels/op_util.h"
#include "passes/passes.h"

namespace partita::passes {

namespace {

bool isOp(const ir::Node& n, const char* op) { return n.op_type == op && (n.domain.empty() || n.domain == "ai.onnx"); }

bool isQuantType(ir::DType t) { return t == ir::DType::kUInt8 || t == ir::DType::kInt8; }

class QdqFusion {
 public:
  explicit QdqFusion(ir::Graph& g) : g_(g), uses_(g.useCounts()) {
    for (ir::ValueId out : g.outputs) graph_outputs_.insert(out);
    for (size_t i = 0; i < g.nodes.size(); ++i)
      for (ir::ValueId in : g.nodes[i].inputs)
        if (in != ir::kNoValue) readers_[in].push_back(i);
  }

  size_t run() {
    std::vector<bool> drop(g_.nodes.size(), false);
    std::vector<std::vector<ir::Node>> replaced(g_.nodes.size());
    std::vector<bool> has_replacement(g_.nodes.size(), false);
    size_t fused = 0;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (drop[i]) continue;
      std::vector<size_t> absorbed;
      std::optional<std::vector<ir::Node>> r;
      if (isOp(g_.nodes[i], "Conv")) r = one(fuseConv(i, absorbed));
      else if (isOp(g_.nodes[i], "Gemm")) r = fuseGemm(i, absorbed);
      else if (isOp(g_.nodes[i], "MatMul")) r = fuseMatMul(i, absorbed);
      else if (isOp(g_.nodes[i], "MaxPool")) r = one(fusePool(i, absorbed));
      if (!r) continue;
      for (size_t a : absorbed)
        if (drop[a]) r.reset();
      if (!r) continue;
      for (size_t a : absorbed) drop[a] = true;
      replaced[i] = std::move(*r);
      has_replacement[i] = true;
      ++fused;
    }
    if (fused == 0) return 0;
    std::vector<ir::Node> old = std::move(g_.nodes);
    g_.nodes.clear();
    for (ir::Value& v : g_.values) v.producer = ir::kNoNode;
    for (size_t i = 0; i < old.size(); ++i) {
      if (drop[i]) continue;
      if (!has_replacement[i]) {
        g_.addNode(std::move(old[i]));
        continue;
      }
      for (ir::Node& n : replaced[i]) g_.addNode(std::move(n));
    }
    return fused;
  }

 private:
  // The node producing `v`, or null.
  const ir::Node* producer(ir::ValueId v) const {
    if (v == ir::kNoValue || g_.value(v).producer == ir::kNoNode) return nullptr;
    return &g_.nodes[size_t(g_.value(v).producer)];
  }
  // The one node reading `v` (read once, not a graph output), or -1.
  int64_t soleReader(ir::ValueId v) const {
    if (graph_outputs_.count(v) || uses_[size_t(v)] != 1) return -1;
    auto it = readers_.find(v);
    return it == readers_.end() || it->second.size() != 1 ? -1 : int64_t(it->second[0]);
  }
  const ir::Constant* constant(ir::ValueId v) const {
    if (v == ir::kNoValue || !g_.value(v).isConstant()) return nullptr;
    const ir::Constant& c = g_.constants.get(g_.value(v).constant);
    return c.layout.empty() ? &c : nullptr;
  }
  // Finite nonzero float32 scales: one, or `count` of them.
  const ir::Constant* scales(ir::ValueId v, int64_t count) const {
    const ir::Constant* c = constant(v);
    if (!c || c->dtype != ir::DType::kFloat32) return nullptr;
    const int64_t n = c->view().numel();
    if (n != 1 && (n != count || c->shape.size() != 1)) return nullptr;
    for (int64_t i = 0; i < n; ++i) {
      const double s = kernels::readScalar(c->view(), i);
      if (!std::isfinite(s) || s == 0) return nullptr;
    }
    return c;
  }
  const ir::Constant* scalarZero(ir::ValueId v) const {
    const ir::Constant* c = constant(v);
    return c && isQuantType(c->dtype) && c->view().numel() == 1 ? c : nullptr;
  }
  bool allZero(ir::ValueId v) const {
    const ir::Constant* c = constant(v);
    if (!c) return false;
    for (int64_t i = 0; i < c->view().numel(); ++i)
      if (kernels::readScalar(c->view(), i) != 0) return false;
    return true;
  }
  // A per-tensor DequantizeLinear (x, scale, zero point) of a computed uint8/int8 value.
  const ir::Node* activationDequantize(ir::ValueId v) const {
    const ir::Node* dq = producer(v);
    if (!dq || !isOp(*dq, "DequantizeLinear") || dq->inputs.size() != 3 || !dq->hasInput(0) ||
        g_.value(dq->inputs[0]).isConstant() || !scales(dq->inputs[1], 1) || !scalarZero(dq->inputs[2]))
      return nullptr;
    return dq;
  }
  // A per-tensor QuantizeLinear with an explicit uint8/int8 zero point, reading `v`.
  const ir::Node* activationQuantize(int64_t pos) const {
    if (pos < 0) return nullptr;
    const ir::Node& q = g_.nodes[size_t(pos)];
    if (!isOp(q, "QuantizeLinear") || q.inputs.size() != 3 || !scales(q.inputs[1], 1) || !scalarZero(q.inputs[2]) ||
        q.attrs.has("output_dtype") || !q.hasOutput(0))
      return nullptr;
    return &q;
  }
  float scalarOf(ir::ValueId v) const { return float(kernels::readScalar(constant(v)->view(), 0)); }
  double zeroOf(ir::ValueId v) const { return kernels::readScalar(constant(v)->view(), 0); }

  static std::optional<std::vector<ir::Node>> one(std::optional<ir::Node> n) {
    if (!n) return std::nullopt;
    std::vector<ir::Node> v;
    v.push_back(std::move(*n));
    return v;
  }

  // DQ(x [M, K]) -> Gemm(transB, DQ(w int8 [N, K], per-row scale, zero 0), bias) ->
  // [Relu] -> Q is a 1x1 QLinearConv over x viewed as [M, K, 1, 1] (fuseAsOneByOne).
  std::optional<std::vector<ir::Node>> fuseGemm(size_t pos, std::vector<size_t>& absorbed) {
    // A copy: adding nodes and constants moves g_.nodes and the pool.
    const ir::Node gemm = g_.nodes[pos];
    if (gemm.attrs.getInt("transA", 0) != 0 || gemm.attrs.getInt("transB", 0) != 1 ||
        gemm.attrs.getFloat("alpha", 1.0f) != 1.0f || gemm.attrs.getFloat("beta", 1.0f) != 1.0f)
      return std::nullopt;
    const ir::Node* dqw = gemm.inputs.size() >= 2 ? producer(gemm.inputs[1]) : nullptr;
    const ir::Constant* w = dqw && isOp(*dqw, "DequantizeLinear") && dqw->inputs.size() == 3 ? constant(dqw->inputs[0])
                                                                                             : nullptr;
    if (!w || w->dtype != ir::DType::kInt8 || w->shape.size() != 2) return std::nullopt;
    const int64_t n = w->shape[0], k = w->shape[1];
    // Per-row scales along axis 0 (the convolution's output channels).
    const ir::Constant* sw = scales(dqw->inputs[1], n);
    if (!sw || (sw->view().numel() > 1 && dqw->attrs.getInt("axis", 1) != 0)) return std::nullopt;
    const std::vector<int8_t> weights(reinterpret_cast<const int8_t*>(w->bytes.data),
                                      reinterpret_cast<const int8_t*>(w->bytes.data) + n * k);
    const std::string base = gemm.name.empty() ? "gemm" + std::to_string(pos) : gemm.name;
    return fuseAsOneByOne(gemm, base, *dqw, w->name, weights, k, n, gemm.hasInput(2) ? gemm.inputs[2] : ir::kNoValue,
                          gemm.outputs[0], absorbed);
  }

  // DQ(x [.., M, K]) -> MatMul(DQ(w int8 [K, N], one scale or one per column, zero 0))
  // -> [Add(float32 bias [N])] -> [Relu] -> Q (a quantized Linear layer of any rank) is
  // the same 1x1 QLinearConv over x's rows, its weights transposed to [N, K, 1, 1] (the
  // [K, N] original is then unused).
  std::optional<std::vector<ir::Node>> fuseMatMul(size_t pos, std::vector<size_t>& absorbed) {
    // A copy: adding nodes and constants moves g_.nodes and the pool.
    const ir::Node mm = g_.nodes[pos];
    if (mm.inputs.size() != 2 || !mm.hasOutput(0)) return std::nullopt;
    const ir::Node* dqw = producer(mm.inputs[1]);
    const ir::Constant* w = dqw && isOp(*dqw, "DequantizeLinear") && dqw->inputs.size() == 3 ? constant(dqw->inputs[0])
                                                                                             : nullptr;
    if (!w || w->dtype != ir::DType::kInt8 || w->shape.size() != 2 || !activationDequantize(mm.inputs[0]))
      return std::nullopt;
    const int64_t k = w->shape[0], n = w->shape[1];
    const ir::Constant* sw = scales(dqw->inputs[1], n);
    if (!sw || (sw->view().numel() > 1 && dqw->attrs.getInt("axis", 1) != 1 && dqw->attrs.getInt("axis", 1) != -1))
      return std::nullopt;
    // [K, N] -> [N, K]
    std::vector<int8_t> wt(size_t(k * n));
    const int8_t* src = reinterpret_cast<const int8_t*>(w->bytes.data);
    for (int64_t r = 0; r < k; ++r)
      for (int64_t c = 0; c < n; ++c) wt[size_t(c * k + r)] = src[r * n + c];
    const ir::Node dqw_copy = *dqw;
    const std::string w_name = w->name;
    // A bias Add right after: the convolution's float bias.
    ir::ValueId bias = ir::kNoValue, out = mm.outputs[0];
    std::vector<size_t> mine;
    const int64_t next = soleReader(out);
    if (next >= 0 && isOp(g_.nodes[size_t(next)], "Add") && g_.nodes[size_t(next)].inputs.size() == 2) {
      const ir::Node& add = g_.nodes[size_t(next)];
      const ir::ValueId other = add.inputs[0] == out ? add.inputs[1] : add.inputs[0];
      const ir::Constant* b = constant(other);
      if (b && b->dtype == ir::DType::kFloat32 && b->view().numel() == n && !b->shape.empty() && b->shape.back() == n) {
        const std::string b_name = b->name + ":bias_1x1";
        Bytes b_bytes = Bytes::copyOf(b->bytes.data, b->nbytes());
        const ir::ConstId b1 = g_.constants.add(b_name, ir::DType::kFloat32, {n}, std::move(b_bytes));
        bias = g_.addConstantValue(b_name, b1);
        out = add.outputs[0];
        mine.push_back(size_t(next));
      }
    }
    const std::string base = mm.name.empty() ? "matmul" + std::to_string(pos) : mm.name;
    std::optional<std::vector<ir::Node>> r = fuseAsOneByOne(mm, base, dqw_copy, w_name, wt, k, n, bias, out, absorbed);
    if (r) absorbed.insert(absorbed.end(), mine.begin(), mine.end());
    return r;
  }

  // A matrix product `mm` over DQ(x [.., K]) (a Gemm or a MatMul; `base` names what it
  // adds) as a 1x1 QLinearConv over x's rows: `dqw` dequantized int8 weights named
  // `w_name`, which are `weights_nk` [N, K] (one scale, or one per N); `bias` a float32
  // [N] constant or none; `out` the value the pattern's QuantizeLinear (after an
  // optional Relu) reads. The output takes x's leading dims back:
  //   Reshape(x_q, [-1, K, 1, 1]) -> QLinearConv -> Reshape(Concat(Shape(x_q)[:-1], [N]))
  // (Shape, Slice and Concat fold at fixed shapes, where the pass runs).
  std::optional<std::vector<ir::Node>> fuseAsOneByOne(const ir::Node& mm, const std::string& base, ir::Node dqw,
                                                      const std::string& w_name, const std::vector<int8_t>& weights_nk,
                                                      int64_t k, int64_t n, ir::ValueId bias, ir::ValueId out,
                                                      std::vector<size_t>& absorbed) {
    const std::string w4_name = w_name + ":as_1x1";
    const ir::ConstId w4 = g_.constants.add(w4_name, ir::DType::kInt8, {n, k, 1, 1},
                                            Bytes::copyOf(weights_nk.data(), weights_nk.size()));
    dqw.attrs = ir::AttributeMap();
    dqw.attrs.setInt("axis", 0);
    dqw.inputs[0] = g_.addConstantValue(w4_name, w4);
    dqw.outputs = {g_.addValue(base + ":weights_1x1")};
    g_.addNode(dqw);  // for fuseConvNode to find; dropped after
    ir::Node conv = mm;
    conv.op_type = "Conv";
    conv.attrs = ir::AttributeMap();
    conv.inputs = {mm.inputs[0], dqw.outputs[0]};
    if (bias != ir::kNoValue) conv.inputs.push_back(bias);
    conv.outputs = {out};
    std::optional<ir::Node> q = fuseConvNode(conv, absorbed);
    g_.nodes.pop_back();
    g_.value(dqw.outputs[0]).producer = ir::kNoNode;
    if (!q) return std::nullopt;
    const int opset = std::max(mm.opset, 13);
    auto int64Const = [&](const std::string& name, std::vector<int64_t> v) {
      const ir::ConstId id = g_.constants.add(name, ir::DType::kInt64, {int64_t(v.size())},
                                              Bytes::copyOf(v.data(), v.size() * sizeof(int64_t)));
      return g_.addConstantValue(name, id);
    };
    auto node = [&](const std::string& op, const std::string& name, std::vector<ir::ValueId> in) {
      ir::Node x;
      x.op_type = op;
      x.opset = opset;
      x.name = base + ":" + name;
      x.inputs = std::move(in);
      x.outputs = {g_.addValue(x.name)};
      return x;
    };
    const ir::ValueId xq = q->inputs[0];
    std::vector<ir::Node> out_nodes;
    out_nodes.push_back(node("Reshape", "to_1x1", {xq, int64Const(base + ":shape_1x1", {-1, k, 1, 1})}));
    out_nodes.push_back(node("Shape", "x_shape", {xq}));
    out_nodes.push_back(node("Slice", "x_rows", {out_nodes.back().outputs[0], int64Const(base + ":zero", {0}),
                                                 int64Const(base + ":minus_one", {-1})}));
    ir::Node shape = node("Concat", "y_shape", {out_nodes.back().outputs[0], int64Const(base + ":n", {n})});
    shape.attrs.setInt("axis", 0);
    out_nodes.push_back(shape);
    q->inputs[0] = out_nodes[0].outputs[0];
    const std::vector<ir::ValueId> y = q->outputs;
    q->outputs = {g_.addValue(base + ":y_1x1")};
    ir::Node back = node("Reshape", "from_1x1", {q->outputs[0], out_nodes.back().outputs[0]});
    back.outputs = y;
    out_nodes.push_back(std::move(*q));
    out_nodes.push_back(std::move(back));
    return out_nodes;
  }

  // DQ(x) -> Conv(DQ(w int8, per-channel scale, zero 0), [DQ(b int32)]) -> [Relu] -> Q
  // becomes QLinearConv (the Relu only where Q's zero point is the type's minimum,
  // where the saturation computes it).
  std::optional<ir::Node> fuseConv(size_t pos, std::vector<size_t>& absorbed) {
    return fuseConvNode(g_.nodes[pos], absorbed);
  }
  std::optional<ir::Node> fuseConvNode(const ir::Node& conv, std::vector<size_t>& absorbed) {
    if (conv.inputs.size() < 2 || conv.inputs.size() > 3 || !conv.hasOutput(0) || conv.outputs.size() != 1)
      return std::nullopt;
    const ir::Node* dqx = activationDequantize(conv.inputs[0]);
    const ir::Node* dqw = producer(conv.inputs[1]);
    if (!dqx || !dqw || !isOp(*dqw, "DequantizeLinear") || dqw->inputs.size() != 3) return std::nullopt;
    const ir::Constant* w = constant(dqw->inputs[0]);
    if (!w || w->dtype != ir::DType::kInt8 || w->shape.size() < 3) return std::nullopt;
    const int64_t co = w->shape[0];
    const ir::Constant* sw = scales(dqw->inputs[1], co);
    if (!sw || !allZero(dqw->inputs[2]) || constant(dqw->inputs[2])->dtype != ir::DType::kInt8 ||
        constant(dqw->inputs[2])->view().numel() != sw->view().numel())
      return std::nullopt;
    if (sw->view().numel() > 1) {
      int64_t axis = dqw->attrs.getInt("axis", 1);
      if (axis < 0) axis += int64_t(w->shape.size());
      if (axis != 0) return std::nullopt;
    }
    if (dqw->attrs.has("block_size") && dqw->attrs.getInt("block_size", 0) != 0) return std::nullopt;
    const float sx = scalarOf(dqx->inputs[1]);
    ir::ValueId bias = ir::kNoValue;
    const ir::Constant* float_bias = conv.hasInput(2) ? constant(conv.inputs[2]) : nullptr;
    if (float_bias && (float_bias->dtype != ir::DType::kFloat32 || float_bias->shape != std::vector<int64_t>{co}))
      return std::nullopt;
    std::vector<int32_t> quantized_bias;
    if (float_bias) {
      // A float32 bias in the accumulator's units (x_scale * w_scale[c]), rounded to
      // int32: off by at most half a unit, far below one output step.
      std::vector<int32_t> q(static_cast<size_t>(co));
      for (int64_t c = 0; c < co; ++c) {
        const double unit = double(sx) * kernels::readScalar(sw->view(), sw->view().numel() == 1 ? 0 : c);
        const double v = std::nearbyint(kernels::readScalar(float_bias->view(), c) / unit);
        if (!(std::fabs(v) < 2147483647.0)) return std::nullopt;
        q[size_t(c)] = int32_t(v);
      }
      quantized_bias = std::move(q);
    } else if (conv.hasInput(2)) {
      const ir::Node* dqb = producer(conv.inputs[2]);
      if (!dqb || !isOp(*dqb, "DequantizeLinear") || dqb->inputs.size() < 2) return std::nullopt;
      const ir::Constant* b = constant(dqb->inputs[0]);
      const ir::Constant* sb = scales(dqb->inputs[1], co);
      if (!b || b->dtype != ir::DType::kInt32 || b->shape != std::vector<int64_t>{co} || !sb) return std::nullopt;
      if (dqb->hasInput(2) && !allZero(dqb->inputs[2])) return std::nullopt;
      // The bias must be in the accumulator's units: scale x_scale * w_scale[c].
      for (int64_t c = 0; c < co; ++c) {
        const double want = double(sx) * kernels::readScalar(sw->view(), sw->view().numel() == 1 ? 0 : c);
        const double have = kernels::readScalar(sb->view(), sb->view().numel() == 1 ? 0 : c);
        if (std::fabs(have - want) > 1e-6 * std::fabs(want)) return std::nullopt;
      }
      bias = dqb->inputs[0];
    }
    int64_t next = soleReader(conv.outputs[0]);
    std::vector<size_t> mine;
    bool relu = false;
    if (next >= 0 && isOp(g_.nodes[size_t(next)], "Relu")) {
      relu = true;
      mine.push_back(size_t(next));
      next = soleReader(g_.nodes[size_t(next)].outputs[0]);
    }
    const ir::Node* q = activationQuantize(next);
    if (!q) return std::nullopt;
    if (relu) {  // Relu is the saturation only at the type's minimum
      const ir::Constant* zy = constant(q->inputs[2]);
      const double qmin = zy->dtype == ir::DType::kUInt8 ? 0 : -128;
      if (zeroOf(q->inputs[2]) != qmin) return std::nullopt;
    }
    mine.push_back(size_t(next));
    if (float_bias) {
      const std::string name = float_bias->name + ":float32->int32";
      const ir::ConstId id = g_.constants.add(name, ir::DType::kInt32, {co},
                                              Bytes::copyOf(quantized_bias.data(), quantized_bias.size() * 4));
      bias = g_.addConstantValue(name, id);
    }
    ir::Node f;
    f.op_type = "QLinearConv";
    f.opset = std::max(conv.opset, 10);
    f.name = conv.name;
    f.attrs = conv.attrs;
    f.inputs = {dqx->inputs[0], dqx->inputs[1], dqx->inputs[2], dqw->inputs[0], dqw->inputs[1], dqw->inputs[2],
                q->inputs[1],   q->inputs[2]};
    if (bias != ir::kNoValue) f.inputs.push_back(bias);
    f.outputs = {q->outputs[0]};
    absorbed = mine;
    return f;
  }

  // DQ(x) -> MaxPool -> Q with the same scale and zero point: MaxPool of x (exact:
  // the maximum commutes with the monotone dequantization).
  std::optional<ir::Node> fusePool(size_t pos, std::vector<size_t>& absorbed) const {
    const ir::Node& pool = g_.nodes[pos];
    if (pool.inputs.size() != 1 || !pool.hasOutput(0) || (pool.outputs.size() > 1 && pool.hasOutput(1)))
      return std::nullopt;
    const ir::Node* dq = activationDequantize(pool.inputs[0]);
    if (!dq) return std::nullopt;
    const int64_t next = soleReader(pool.outputs[0]);
    const ir::Node* q = activationQuantize(next);
    if (!q) return std::nullopt;
    const ir::Constant *zx = constant(dq->inputs[2]), *zy = constant(q->inputs[2]);
    const float sx = scalarOf(dq->inputs[1]), sy = scalarOf(q->inputs[1]);
    if (zx->dtype != zy->dtype || zeroOf(dq->inputs[2]) != zeroOf(q->inputs[2]) ||
        std::memcmp(&sx, &sy, sizeof sx) != 0)
      return std::nullopt;
    ir::Node f = pool;
    f.opset = std::max(pool.opset, 12);  // MaxPool takes int8 and uint8 from opset 12
    f.inputs = {dq->inputs[0]};
    f.outputs = {q->outputs[0]};
    absorbed = {size_t(next)};
    return f;
  }

  ir::Graph& g_;
  std::vector<int> uses_;
  std::set<ir::ValueId> graph_outputs_;
  std::map<ir::ValueId, std::vector<size_t>> readers_;
};

}  // namespace

size_t fuseQuantizedOps(ir::Graph& g) {
  // oneDNN takes int8 at fixed shapes only; with symbolic dims the float path (oneDNN's
  // float kernels) is far faster than the host's exact QLinearConv.
  for (ir::ValueId in : g.inputs)
    if (!g.typeOf(in).isStatic()) return 0;
  const size_t fused = QdqFusion(g).run();
  if (fused == 0) return 0;
  eliminateDead(g);
  g.verify();
  return fused;
}

}  // namespace partita::passes
