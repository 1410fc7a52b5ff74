// Decoding LSTM, GRU and RNN into oneDNN's RNN primitive: what it computes exactly is
// one direction over whole sequences with the default activations (vanilla RNN: Tanh,
// Relu or Sigmoid), constant weights, optional biases, peepholes and initial states.
// Both directions run as oneDNN's bidirectional_concat, whose rows hold the two
// directions side by side: ONNX's Y ([T, 2, N, H]) is a permuted view of those bytes.
// The rest stays on the host, with the reason: two directions with the batch first
// (layout 1: the states' bytes are not oneDNN's ldnc), sequence_lens,
// clip, input_forget and other activations (oneDNN has none of them), an LSTM given
// only one of its two initial states.
#include <string>

#include "backend/dnnl/dnnl_decode.h"
#include "backend/dnnl/dnnl_decode_util.h"

namespace partita::dnnl_backend {

using kernels::RecurrentActivation;
using kernels::RecurrentKind;

std::optional<RnnSpec> decodeRecurrent(const ir::Graph& g, const ir::Node& n, std::string* why) {
  kernels::RecurrentAttrs a;
  std::string bad;
  if (!kernels::readRecurrentAttrs(n, a, bad)) return no(why, bad);
  RnnSpec s;
  s.kind = a.kind;
  s.layout = a.layout;
  if (a.direction == kernels::RecurrentDirection::kBidirectional) {
    if (a.layout) return no(why, "bidirectional with layout 1 (the states' bytes are [batch, 2, hidden])");
    s.direction = dnnl::rnn_direction::bidirectional_concat;
    s.directions = 2;
  } else {
    s.direction = a.direction == kernels::RecurrentDirection::kReverse
                      ? dnnl::rnn_direction::unidirectional_right2left
                      : dnnl::rnn_direction::unidirectional_left2right;
  }
  if (a.has_clip) return no(why, "clip (oneDNN's RNN primitive does not clip)");
  if (a.input_forget) return no(why, "input_forget (oneDNN has no coupled input and forget gates)");
  if (n.hasInput(kernels::kRecSequenceLens)) return no(why, "sequence_lens (oneDNN runs every sequence in full)");
  switch (a.kind) {
    case RecurrentKind::kLstm:
      s.cell = dnnl::algorithm::vanilla_lstm;
      s.gates = s.bias_gates = 4;
      if (!a.defaultActivations()) return no(why, "activations other than Sigmoid, Tanh, Tanh");
      break;
    case RecurrentKind::kGru:
      s.cell = a.linear_before_reset ? dnnl::algorithm::lbr_gru : dnnl::algorithm::vanilla_gru;
      s.gates = 3;
      s.bias_gates = a.linear_before_reset ? 4 : 3;
      if (!a.defaultActivations()) return no(why, "activations other than Sigmoid, Tanh");
      break;
    case RecurrentKind::kRnn: {
      s.cell = dnnl::algorithm::vanilla_rnn;
      s.gates = s.bias_gates = 1;
      const RecurrentActivation::Fn f = a.activation(0, 0).fn;
      if (f == RecurrentActivation::Fn::kTanh)
        s.activation = dnnl::algorithm::eltwise_tanh;
      else if (f == RecurrentActivation::Fn::kRelu)
        s.activation = dnnl::algorithm::eltwise_relu;
      else if (f == RecurrentActivation::Fn::kSigmoid)
        s.activation = dnnl::algorithm::eltwise_logistic;
      else
        return no(why, "an activation other than Tanh, Relu or Sigmoid");
      break;
    }
  }
  if (a.kind == RecurrentKind::kLstm && n.hasInput(kernels::kRecInitialH) != n.hasInput(kernels::kRecInitialC))
    return no(why, "one of initial_h and initial_c (oneDNN takes both or neither)");
  for (size_t i : {kernels::kRecX, kernels::kRecW, kernels::kRecR})
    if (!n.hasInput(i)) return no(why, "X, W and R are required");
  const char* names[] = {"X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"};
  for (size_t i = 0; i < n.inputs.size(); ++i)
    if (n.hasInput(i) && !isDenseF32(g, n.inputs[i], why, names[i])) return std::nullopt;
  // Weights, biases and peepholes are reordered at compile time: constants.
  for (size_t i : {kernels::kRecW, kernels::kRecR, kernels::kRecB, kernels::kRecP}) {
    if (!n.hasInput(i)) continue;
    if (!isConstant(g, n.inputs[i])) return no(why, std::string(names[i]) + " is not a constant");
    if (!constantOf(g, n.inputs[i]).layout.empty()) return no(why, std::string(names[i]) + " has a packed layout");
  }
  for (size_t o = 0; o < n.outputs.size(); ++o)
    if (n.outputs[o] != ir::kNoValue && !isDenseF32(g, n.outputs[o], why, "output")) return std::nullopt;
  const std::vector<int64_t> x = shapeOf(g, n.inputs[kernels::kRecX]);
  const std::vector<int64_t> r = shapeOf(g, n.inputs[kernels::kRecR]);
  if (x.size() != 3 || r.size() != 3) return no(why, "X and R must have rank 3");
  s.seq = x[a.layout ? 1 : 0];
  s.batch = x[a.layout ? 0 : 1];
  s.input = x[2];
  s.hidden = a.hidden >= 0 ? a.hidden : r[2];
  const int64_t gh = s.hidden * a.gates;
  auto is = [&](size_t i, const std::vector<int64_t>& want) {
    return !n.hasInput(i) || shapeOf(g, n.inputs[i]) == want;
  };
  const int64_t d = s.directions;
  const std::vector<int64_t> state = a.layout ? std::vector<int64_t>{s.batch, d, s.hidden}
                                              : std::vector<int64_t>{d, s.batch, s.hidden};
  if (!is(kernels::kRecW, {d, gh, s.input}) || !is(kernels::kRecR, {d, gh, s.hidden}) ||
      !is(kernels::kRecB, {d, 2 * gh}) || !is(kernels::kRecInitialH, state) ||
      (a.kind == RecurrentKind::kLstm && (!is(kernels::kRecInitialC, state) || !is(kernels::kRecP, {d, 3 * s.hidden}))))
    return no(why, "input shapes do not agree");
  return s;
}

}  // namespace partita::dnnl_backend
