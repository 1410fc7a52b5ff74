// Lowering of LSTM, GRU and RNN into one oneDNN RNN primitive. ONNX stores each
// direction's weights as [gates * hidden, input] in its gate order (LSTM i, o, f, c;
// GRU z, r, h); oneDNN reads them as ldigo [layer, direction, input, gate, hidden] in
// its own (LSTM i, f, c, o; GRU u, r, o, u being ONNX's z). The compiler writes W and
// R in oneDNN's order and in the layout it chooses (blocked for its brgemm kernels),
// the summed biases and the peepholes in its order, as derived constants (so the
// originals leave the artifact when nothing else reads them); sequences, states and
// outputs are read and written in place (ONNX's layout 1 is oneDNN's ntc). Both
// directions are one bidirectional_concat primitive: its rows [T, N, 2H] hold the
// forward and the reverse hidden state side by side, which ONNX's Y [T, 2, N, H]
// reads as a permuted view (strides N*2H, H, 2H, 1) without a copy.
#include <omp.h>

#include <optional>
#include <vector>

#include "backend/dnnl/dnnl_function_lowering.h"
#include "backend/dnnl/dnnl_module.h"
#include "backend/dnnl/dnnl_primitive.h"

namespace partita::dnnl_backend {

using ir::ValueId;
using kernels::RecurrentKind;

namespace {

// ONNX's gate index of each of oneDNN's gates.
std::vector<int64_t> onnxGateOrder(RecurrentKind kind) {
  if (kind == RecurrentKind::kLstm) return {0, 2, 3, 1};  // i f c o <- i o f c
  if (kind == RecurrentKind::kGru) return {0, 1, 2};      // u r o <- z r h
  return {0};
}

// ONNX's [gates * hidden, k] (one direction) as oneDNN's [k, gates, hidden].
std::vector<float> toLdigo(const float* w, int64_t k, int64_t hidden, const std::vector<int64_t>& order) {
  const int64_t gates = int64_t(order.size());
  std::vector<float> out(size_t(k * gates * hidden));
  for (int64_t g = 0; g < gates; ++g)
    for (int64_t h = 0; h < hidden; ++h) {
      const float* row = w + (order[size_t(g)] * hidden + h) * k;
      for (int64_t i = 0; i < k; ++i) out[size_t((i * gates + g) * hidden + h)] = row[i];
    }
  return out;
}

}  // namespace

void FunctionLowering::lowerRecurrent(size_t pos) {
  const ir::Node& node = nodeAt(pos);
  const RnnSpec spec = decoded(decodeRecurrent(g_, node, nullptr), pos);
  const int64_t T = spec.seq, N = spec.batch, I = spec.input, H = spec.hidden, D = spec.directions;
  const bool lstm = spec.kind == RecurrentKind::kLstm;
  const std::vector<int64_t> order = onnxGateOrder(spec.kind);
  auto sequence = [&](int64_t c) {  // [T, N, c] over X's or Y's bytes
    return spec.layout ? withStrides({T, N, c}, {c, T * c, 1}) : plainDesc({T, N, c});
  };
  // ONNX's [D, N, H] (and [N, 1, H] with layout 1, the same bytes for one direction).
  const memory::desc state = plainDesc({1, D, N, H});
  auto input = [&](size_t i) { return node.hasInput(i) ? node.inputs[i] : ir::kNoValue; };
  auto output = [&](size_t o) { return o < node.outputs.size() ? node.outputs[o] : ir::kNoValue; };

  Step step;
  step.kind = StepKind::kRnn;
  step.label = labelOf(pos, {});
  step.alg = int32_t(spec.cell);
  step.axis = int64_t(spec.direction);
  step.flags = uint32_t(spec.activation);
  step.args.push_back(bufferArg(DNNL_ARG_SRC_LAYER, plain(input(kernels::kRecX)).buffer, sequence(I)));
  auto stateArg = [&](int key, ValueId v) {
    if (v == ir::kNoValue) return;
    if (isConstant(v))
      step.args.push_back(mb_.borrow(key, constOf(v), state));
    else
      step.args.push_back(bufferArg(key, plain(v).buffer, state));
  };
  stateArg(DNNL_ARG_SRC_ITER, input(kernels::kRecInitialH));
  if (lstm) stateArg(DNNL_ARG_SRC_ITER_C, input(kernels::kRecInitialC));

  // Constants in oneDNN's order, computed only when compiling (a replay finds them).
  const bool computes = mb_.computes();
  auto derived = [&](int key, ValueId v, const memory::desc& md, const std::vector<float>& data) {
    step.args.push_back(Arg{key, ArgSource::kConstant, mb_.derive(constOf(v), md, data.data(), md, false), md, false});
  };
  const int64_t gh = spec.gates * H;
  // W and R: in the layout oneDNN chooses (its brgemm kernels want the hidden dim
  // blocked; in plain ldigo only its gemm-based reference code runs). brgemm's cell
  // splits every timestep over the threads with barriers in between: for small steps
  // on more than one thread that costs more than the step (a VAD-style LSTM of hidden
  // 64, 15 steps at batch 1: 15 us at one thread, 290 us at two on a busy machine).
  // So a small RNN (stepOnOneThread) is created, here and at load, for one thread: its
  // layout is the one-thread choice and it runs on one thread whatever the model's
  // count. A replay reads W and R in the layout the compiler stored them in.
  struct Weights {
    int key;
    ValueId v;
    int64_t k;
    std::vector<float> ldigo;  // ONNX's values in oneDNN's gate order, plain
  };
  // Each direction's [gates * H, k] as [k, gates, H], the directions one after another.
  auto ldigoOf = [&](ValueId v, int64_t k) {
    std::vector<float> all;
    for (int64_t d = 0; d < D; ++d) {
      std::vector<float> one = toLdigo(constData(v) + d * gh * k, k, H, order);
      all.insert(all.end(), one.begin(), one.end());
    }
    return all;
  };
  std::vector<Weights> weights = {{DNNL_ARG_WEIGHTS_LAYER, input(kernels::kRecW), I, {}},
                                  {DNNL_ARG_WEIGHTS_ITER, input(kernels::kRecR), H, {}}};
  for (Weights& w : weights) {
    if (computes) w.ldigo = ldigoOf(w.v, w.k);
    const memory::desc plain_md = plainDesc({1, D, w.k, spec.gates, H});
    if (std::optional<memory::desc> stored = mb_.storedWeights(constOf(w.v), true))
      step.args.push_back(Arg{w.key, ArgSource::kConstant, 0, *stored, false});
    else
      step.args.push_back(Arg{w.key, ArgSource::kConstant, 0, anyDesc(plain_md), true});
  }
  if (ValueId b = input(kernels::kRecB); b != ir::kNoValue) {
    std::vector<float> data;
    if (computes) {
      data.resize(size_t(D * spec.bias_gates * H));
      for (int64_t d = 0; d < D; ++d) {
        const float* wb = constData(b) + d * 2 * gh;
        const float* rb = wb + gh;
        float* out = data.data() + d * spec.bias_gates * H;
        for (int64_t g = 0; g < spec.gates; ++g)
          for (int64_t h = 0; h < H; ++h) {
            const int64_t o = order[size_t(g)] * H + h;
            // lbr_gru's candidate: W's bias outside r * (...), R's as a fourth gate inside.
            const bool apart = spec.cell == dnnl::algorithm::lbr_gru && g == 2;
            out[g * H + h] = wb[o] + (apart ? 0.0f : rb[o]);
          }
        if (spec.cell == dnnl::algorithm::lbr_gru)
          for (int64_t h = 0; h < H; ++h) out[3 * H + h] = rb[2 * H + h];
      }
    }
    derived(DNNL_ARG_BIAS, b, plainDesc({1, D, spec.bias_gates, H}), data);
  } else {
    // No B: oneDNN wants a bias all the same; zeros embedded in the blob.
    const memory::desc md = plainDesc({1, D, spec.bias_gates, H});
    const std::vector<float> zeros(size_t(D * spec.bias_gates * H), 0.0f);
    step.args.push_back(mb_.embed(DNNL_ARG_BIAS, zeros.data(), md, {}));
  }
  if (ValueId p = lstm ? input(kernels::kRecP) : ir::kNoValue; p != ir::kNoValue) {
    std::vector<float> data;
    if (computes) {
      data.resize(size_t(D * 3 * H));
      const int64_t from[3] = {0, 2, 1};  // i f o <- i o f
      for (int64_t d = 0; d < D; ++d) {
        const float* pv = constData(p) + d * 3 * H;
        for (int64_t g = 0; g < 3; ++g)
          for (int64_t h = 0; h < H; ++h) data[size_t((d * 3 + g) * H + h)] = pv[from[g] * H + h];
      }
    }
    derived(DNNL_ARG_WEIGHTS_PEEPHOLE, p, plainDesc({1, D, 3, H}), data);
  }
  consume(pos);

  // Outputs: Y (oneDNN needs its destination even when the model does not read it),
  // then the final states where asked for.
  const ValueId y = output(kernels::kRecY);
  const uint32_t y_buf = newBuffer(plainDesc({T, N, D * H}));
  step.args.push_back(bufferArg(DNNL_ARG_DST_LAYER, y_buf, sequence(D * H)));
  if (y != ir::kNoValue)
    place(y, Loc{y_buf, D == 1 ? plainDesc(shapeOf(y)) : withStrides({T, D, N, H}, {N * D * H, H, D * H, 1})});
  // The final states, where asked for (an LSTM's both when either is: oneDNN writes
  // them together; an unread one goes to a temporary).
  auto stateOut = [&](int key, ValueId v, bool pair_used) {
    if (v == ir::kNoValue && !pair_used) return;
    const uint32_t buf = newBuffer(state);
    step.args.push_back(bufferArg(key, buf, state));
    if (v != ir::kNoValue) place(v, Loc{buf, plainDesc(shapeOf(v))});
  };
  const ValueId yh = output(kernels::kRecYh), yc = lstm ? output(kernels::kRecYc) : ir::kNoValue;
  stateOut(DNNL_ARG_DST_ITER, yh, yc != ir::kNoValue);
  if (lstm) stateOut(DNNL_ARG_DST_ITER_C, yc, yh != ir::kNoValue);
  // Throws dnnl::error when oneDNN has no implementation.
  dnnl::primitive_desc_base pd;
  {
    const OmpThreadsScope team(stepThreads(step, omp_get_max_threads()));
    pd = makePrimitiveDesc(step, cpuEngine());
  }
  recordChosenLayouts(step, pd);
  for (const Weights& w : weights) {
    Arg* arg = step.find(w.key);
    mb_.chosenWeights(constOf(w.v), true, arg->md);
    arg->index = mb_.derive(constOf(w.v), plainDesc({1, D, w.k, spec.gates, H}), w.ldigo.data(), arg->md, false);
  }
  fn_.steps.push_back(std::move(step));
}

}  // namespace partita::dnnl_backend
