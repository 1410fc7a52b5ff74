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

// A quantize-dequantize pair (the activations of a QDQ int8 model):
//   y = DequantizeLinear(QuantizeLinear(x, s, z), s, z)
// per tensor, x and y float32, s a constant float32 scalar (finite, nonzero), z a
// constant uint8/int8 scalar (or omitted: uint8 0) and the same constants (by value) on
// both nodes, the quantized value read only by the DequantizeLinear. It is the float
// computation s * clip(round(x / s), qmin - z, qmax - z): four oneDNN eltwise ops
// (linear 1/s, round half to even, clip, linear s), fused as post-ops after a Conv or
// MatMul. (x * (1/s) may differ from x / s in the last bit, which moves a value that
// lies exactly on a rounding tie by one quantization step.)
struct FakeQuantMatch {
  ir::NodeId quantize, dequantize;
  ir::ValueId x, y;
  float scale;
  float lo, hi;  // the clip bounds: qmin - z, qmax - z
};
std::optional<FakeQuantMatch> matchFakeQuant(const ir::Graph& g, ir::NodeId quantize);

}  // namespace partita::dnnl_backend
