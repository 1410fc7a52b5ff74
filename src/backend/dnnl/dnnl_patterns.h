// Multi-node patterns the dnnl backend computes as one oneDNN operation: Gelu and the
// LayerNormalization written out node by node, as exporters emit them. The claim uses
// them to take nodes oneDNN has no single op for (Erf); the lowering, to fuse.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ir/graph.h"

namespace partita::dnnl_backend {

// Gelu as PyTorch exports it: y = (x * (1 + Erf(x / sqrt(2)))) * 0.5, every
// intermediate used once (operands of Add and Mul in either order). oneDNN's
// gelu_erf computes it in one eltwise op; Erf alone is not something oneDNN has.
struct GeluMatch {
  ir::NodeId div, erf, add, mul, half;  // in this order
  ir::ValueId x, y;
};
std::optional<GeluMatch> matchGelu(const ir::Graph& g, ir::ValueId x);

// LayerNormalization as exported before opset 17, over the last axis:
//   m = ReduceMean(x); d = x - m; v = ReduceMean(Pow(d, 2)); n = d / Sqrt(v + eps);
//   y = n * gamma + beta
// with every intermediate used only inside the pattern (d by Pow and Div), gamma and
// beta float32 constants of the last dimension's size, eps a constant scalar.
struct LayerNormMatch {
  std::vector<ir::NodeId> nodes;  // the ten nodes, first ReduceMean first
  ir::ValueId x, y, gamma, beta;
  float epsilon;
  int64_t outer, inner;
};
// `mean` is the first ReduceMean.
std::optional<LayerNormMatch> matchLayerNorm(const ir::Graph& g, ir::NodeId mean);

}  // namespace partita::dnnl_backend
