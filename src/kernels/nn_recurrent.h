// The recurrent ops LSTM, GRU and RNN: their attributes read once, for the host kernels
// (nn_recurrent.cpp) and for the backends' claims (the dnnl backend takes the cases its
// RNN primitive computes exactly and asks this reader what a node means).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace partita::kernels {

enum class RecurrentKind { kRnn, kGru, kLstm };
enum class RecurrentDirection { kForward, kReverse, kBidirectional };

// One activation function of a recurrent op with its alpha and beta (ONNX's list:
// Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, HardSigmoid,
// Elu, Softsign, Softplus; names are matched without regard to case).
struct RecurrentActivation {
  enum class Fn {
    kRelu,
    kTanh,
    kSigmoid,
    kAffine,
    kLeakyRelu,
    kThresholdedRelu,
    kScaledTanh,
    kHardSigmoid,
    kElu,
    kSoftsign,
    kSoftplus
  };
  Fn fn = Fn::kTanh;
  float alpha = 0, beta = 0;
  bool operator==(const RecurrentActivation&) const = default;
};

// Inputs and outputs by position (ONNX's order).
inline constexpr size_t kRecX = 0, kRecW = 1, kRecR = 2, kRecB = 3, kRecSequenceLens = 4, kRecInitialH = 5,
                        kRecInitialC = 6, kRecP = 7;
inline constexpr size_t kRecY = 0, kRecYh = 1, kRecYc = 2;

struct RecurrentAttrs {
  RecurrentKind kind = RecurrentKind::kRnn;
  RecurrentDirection direction = RecurrentDirection::kForward;
  int64_t num_directions = 1;
  int64_t gates = 1;      // gates per direction: RNN 1, GRU 3 (z, r, h), LSTM 4 (i, o, f, c)
  int64_t hidden = -1;    // hidden_size; -1 when the attribute is absent (then R's last dim)
  // Per direction: RNN f; GRU f, g; LSTM f, g, h. activations.size() ==
  // perDirection() * num_directions (a list given for one direction of a
  // bidirectional op is used for both).
  std::vector<RecurrentActivation> activations;
  bool has_clip = false;
  float clip = 0;                    // gate pre-activations clipped to [-clip, clip]
  bool input_forget = false;         // LSTM: forget gate = 1 - input gate
  bool linear_before_reset = false;  // GRU
  int64_t layout = 0;                // 0: X [seq, batch, in]; 1: X [batch, seq, in] (opset 14)

  size_t perDirection() const { return kind == RecurrentKind::kRnn ? 1 : kind == RecurrentKind::kGru ? 2 : 3; }
  const RecurrentActivation& activation(int64_t direction, size_t which) const {
    return activations[size_t(direction) * perDirection() + which];
  }
  // True when every activation is the op's default (RNN Tanh; GRU Sigmoid, Tanh;
  // LSTM Sigmoid, Tanh, Tanh).
  bool defaultActivations() const;
};

// Reads a LSTM, GRU or RNN node's attributes. On a bad attribute (unknown direction,
// activation or layout, a wrong number of activations, hidden_size < 0, clip <= 0)
// returns false with `why` set (without the node's name: callers add it).
bool readRecurrentAttrs(const ir::Node& node, RecurrentAttrs& out, std::string& why);

// The same, throwing Error(kInvalidModel) "<op> node '<name>': <why>".
RecurrentAttrs readRecurrentAttrs(const ir::Node& node);

}  // namespace partita::kernels
