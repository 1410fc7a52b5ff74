// Lowering of one region into one Function of oneDNN steps. The compiler lowers every
// region (dnnl_lowering.h); a shape-polymorphic module lowers its region graph again
// at run time for each new input shape (dnnl_replay.h), with the constants the
// compiler made. FunctionLowering walks the
// region's nodes in order and gives each op family its lower* member; it tracks where
// each value lives (buffers and layouts, reordering on demand), how many readers each
// value still has (so buffers can be reused in place), and which nodes later members
// have already absorbed. Its members are defined by concept:
//   dnnl_function_lowering.cpp  the walk, values and buffers, region outputs
//   dnnl_fusion.cpp             post-op chains after an anchor (activations, residual
//                               sums, binary operands, SiLU, Gelu)
//   dnnl_lower_window.cpp       Conv, ConvTranspose (BatchNormalization folded), pooling,
//                               resampling (Resize, Upsample)
//   dnnl_lower_matmul.cpp       MatMul, Gemm
//   dnnl_lower_eltwise.cpp      eltwise, binary, PRelu
//   dnnl_lower_norm.cpp         softmax, layer and batch normalization, reductions
//   dnnl_lower_move.cpp         Concat, views, Transpose and Slice
//   dnnl_lower_recurrent.cpp    LSTM, GRU, RNN (weights in oneDNN's gate order)
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/dnnl/dnnl_decode.h"
#include "backend/dnnl/dnnl_memory_desc.h"
#include "backend/dnnl/dnnl_constant_args.h"
#include "backend/dnnl/dnnl_patterns.h"
#include "backend/dnnl/dnnl_program.h"
#include "ir/graph.h"

namespace partita::dnnl_backend {

// Where a value's bytes are during the function: a buffer and the layout they have.
struct Loc {
  uint32_t buffer = 0;
  memory::desc md;
};

// A node fused into the step of an anchor (Conv, ConvTranspose, MatMul, Gemm, binary).
struct ChainItem {
  size_t pos = 0;             // region position of the fused node (its output continues the chain)
  std::vector<size_t> extra;  // other nodes the item absorbs (SiLU: the Sigmoid before the Mul)
  std::vector<PostOp> ops;
  ir::ValueId sum_addend = ir::kNoValue;  // a kSum post-op: the value added into dst
  ir::ValueId operand = ir::kNoValue;     // a kBinary post-op: its second operand
  memory::desc operand_md;
  float operand_scale = 1;  // Gemm's beta on C
  bool on_operand = false;  // scales an operand of the anchor (prescaleIntoMatMul): no output of its own
};

// A (Q)Conv's weights as oneDNN sees them: its dims ([G,] O, I, spatial) and the
// ONNX bytes described over them (float32; withDataType for int8).
struct ConvWeights {
  std::vector<int64_t> dims;
  memory::desc onnx;
};
ConvWeights convWeights(const ConvSpec& spec);
// Whether `item` has an eltwise_linear post-op other than one already in `chain`
// (oneDNN 2.6's brgemm kernels compute every linear post-op of a primitive with the
// first one's alpha and beta).
bool linearClash(const std::vector<ChainItem>& chain, const ChainItem& item);
// A plain 3x3 stride-1 convolution with at least 16 channels in and out (what
// oneDNN's Winograd kernels take).
bool winogradShape(const ConvSpec& spec);
// Float32 `dims` ([N, C, H, W]) in blocks of 16 channels (aBcd16b).
memory::desc channelBlocks(const std::vector<int64_t>& dims);
// QLinearConv's int8 convolution step (its layouts still oneDNN's to choose), and
// whether oneDNN has a fast implementation of it (the claim asks: not `ref`).
Step qconvStep(const QConvSpec& q);
// A pooling step of `spec` (its source and destination still to add).
Step poolStep(const PoolSpec& spec, std::string label);
// The weights of a matrix product over a channels-last Flatten's rows
// (FunctionLowering::flattenIntoWeights): `from` is [K, n] (or [n, K] when
// `transposed`) with K = C * H * W rows in (c, h, w) order; the result, laid out the
// same way, has row (h * W + w) * C + c where `from` has row (c * H + h) * W + w.
template <typename T>
std::vector<T> channelsLastRows(const T* from, const std::array<int64_t, 3>& chw, int64_t n, bool transposed) {
  const auto [C, H, W] = chw;
  const int64_t K = C * H * W;
  std::vector<T> to(size_t(K * n));
  for (int64_t c = 0; c < C; ++c)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t x = 0; x < W; ++x) {
        const int64_t k = (c * H + h) * W + x, k2 = (h * W + x) * C + c;
        for (int64_t j = 0; j < n; ++j) {
          if (transposed)
            to[size_t(j * K + k2)] = from[j * K + k];
          else
            to[size_t(k2 * n + j)] = from[k * n + j];
        }
      }
  return to;
}

// Whether the module's own int8 max pool (StepKind::kInt8MaxPool) takes `spec` over a
// source in layout `md`: dense channels-last, 2-D, no dilation, start pads inside the
// window.
bool int8MaxPoolFits(const memory::desc& md, const PoolSpec& spec);
bool qconvImplemented(const QConvSpec& q, std::string* why);
// An int8 matmul's step (weights' layout still oneDNN's to choose), and whether oneDNN
// has a fast implementation of it (not `ref`).
Step qmatmulStep(const QMatMulSpec& q);
bool qmatmulImplemented(const QMatMulSpec& q, std::string* why);

// Whether each of the n floats is a float16 value (there and back unchanged; a NaN is
// not): such weights of a mat_vec are stored in float16.
bool exactInHalf(const float* w, int64_t n);

class FunctionLowering {
 public:
  // Lowers region `r` of `g` (whose region values must have static shapes).
  // `bf16`: Conv and MatMul over constant weights read their source and weights in
  // bfloat16 (weights derived so, the source reordered), destination float32
  // (CompileOptions::precision kBFloat16; static regions only).
  // `winograd`: 3x3 stride-1 convolutions may use Winograd's algorithm where oneDNN has
  // it (a float16 model computed in float32: its error, around 1e-5 relative, is far
  // below float16's 2^-11; static regions only: its weights layout is not replayed).
  FunctionLowering(const ir::Graph& g, ConstantArgs& mb, const backend::Region& r, bool bf16 = false,
                   bool winograd = false)
      : mb_(mb), g_(g), r_(r), bf16_(bf16), winograd_(winograd), graph_uses_(g_.useCounts()) {}

  Function run();

 private:
  using ValueId = ir::ValueId;

  // The graph, seen from the region.
  const ir::Node& nodeAt(size_t pos) const { return g_.nodes[size_t(r_.nodes[pos])]; }
  std::vector<int64_t> shapeOf(ValueId v) const { return g_.typeOf(v).staticShape(); }
  bool isConstant(ValueId v) const { return g_.value(v).isConstant(); }
  ir::ConstId constOf(ValueId v) const { return g_.value(v).constant; }
  const float* constData(ValueId v) const {
    return reinterpret_cast<const float*>(g_.constants.get(constOf(v)).bytes.data);
  }
  bool available(ValueId v) const {
    return isConstant(v) || locs_.count(v) != 0 || deferred_.count(v) != 0 || dynamic_.count(v) != 0 ||
           prescaled_.count(v) != 0;
  }

  // The spec of the node at `pos`, which the claim accepted: its decoder refusing it
  // now is the lowering's bug, Error(kInternal).
  template <typename Spec>
  Spec decoded(std::optional<Spec> spec, size_t pos) const {
    if (!spec) internal(nodeAt(pos).op_type + " '" + nodeAt(pos).name + "' not supported");
    return std::move(*spec);
  }

  // Values, buffers and readers (dnnl_function_lowering.cpp).
  void lowerNode(size_t pos);
  uint32_t newBuffer(const memory::desc& md);
  void place(ValueId v, const Loc& loc);
  const Loc& primary(ValueId v);
  // Where `v` is (computing a deferred DequantizeLinear of it first).
  std::vector<Loc>& locsOf(ValueId v);
  bool bufferDead(uint32_t b) const;
  void consume(size_t pos);
  void consumeItem(const ChainItem& c);
  Loc emitReorder(const Loc& src, const memory::desc& dst_md, const std::string& label);
  Loc get(ValueId v, const memory::desc& want);
  Loc plain(ValueId v);
  // `v` dense without inner blocks (any order of dims) with its own dims, reordering
  // to row-major if not.
  Loc unblocked(ValueId v);
  Arg bufferArg(int key, uint32_t buffer, const memory::desc& md) const {
    return Arg{key, ArgSource::kBuffer, buffer, md, false};
  }
  Arg constantArg(int key, ValueId v, const memory::desc& md);
  void emitToNewBuffer(Step step, const memory::desc& dst_md, ValueId out);
  // The same, but written over the source buffer `src` when `may_overwrite` (the step
  // reads each element before it writes it: the own row kernels, oneDNN's layer
  // normalization), nothing reads that buffer afterwards and it is as large as the
  // result: the result's lines are then those just read, not lines fetched first (a
  // transformer's layer norm over its residual sum, [256, 256] at one thread: 21.8 ->
  // 19.7 us; attention's softmax over its scores, one [heads, seq, seq] buffer fewer).
  void emitOverDeadSource(Step step, uint32_t src, bool may_overwrite, const memory::desc& dst_md, ValueId out);
  // Appends `step` writing a new buffer of `buffer_md` through its DST argument
  // `dst_view` (the same descriptor, or a strided view of those bytes); returns the
  // buffer with `buffer_md`. Throws dnnl::error when oneDNN has no implementation.
  Loc emitIntoNewBuffer(Step step, const memory::desc& buffer_md, const memory::desc& dst_view);
  std::string labelOf(size_t pos, const std::vector<ChainItem>& chain) const;
  void bindOutputs();

  // Fusion (dnnl_fusion.cpp).
  std::optional<size_t> soleConsumer(ValueId v) const;
  // Computes a small operand now when its producer is a node of this region not yet
  // lowered whose own inputs are available; true when `v` is then available.
  bool lowerOperandEarly(ValueId v);
  // x * Sigmoid(x) (SiLU, oneDNN's swish) or x * HardSigmoid(x) with alpha 1/6 and
  // beta 1/2 (HardSwish as exported before opset 14), x used by nothing else.
  struct GatedMatch {
    size_t gate, mul;  // positions of the Sigmoid / HardSigmoid and of the Mul
    dnnl::algorithm alg;
  };
  std::optional<GatedMatch> gatedAfter(ValueId x) const;
  std::optional<std::pair<std::vector<size_t>, size_t>> geluAfter(ValueId x) const;
  size_t fakeQuantTail(ir::NodeId quantize) const;
  // `full_binary`: a full-size operand computed earlier becomes a binary post-op (for
  // anchors that take no sum: a binary step's residual Add).
  std::vector<ChainItem> collectChain(ValueId out, bool allow_sum, bool allow_binary, bool full_binary = false);
  // Points the binary post-ops' operand arguments of `step` at their constants or
  // buffers; returns the sum post-op's addend (kNoValue without one).
  ValueId bindPostOpOperands(Step& step, const std::vector<ChainItem>& chain);
  size_t fitChain(Step& step, const std::vector<ChainItem>& chain, size_t fixed,
                  dnnl::primitive_desc_base& pd);
  void finishAnchor(Step& step, size_t pos, std::vector<ChainItem>& chain, ValueId anchor_out);

  // One member per op family (dnnl_lower_*.cpp).
  void lowerConv(size_t pos);
  // Own kernels for a squeeze-excitation block (dnnl_kernels.h); false: not that case.
  // A Flatten of a channels-last tensor read only by a MatMul / Gemm over constant
  // weights: no reorder, the weights' rows permuted at compile time (lowerMatMul).
  bool flattenIntoWeights(size_t pos);
  bool int8ProductAfter(size_t pos, const std::vector<int64_t>& rows) const;
  // `to` keeps the (h, w, c) row order of `from` when `from` has it (a per-tensor
  // QuantizeLinear, a Reshape between the Flatten and its product).
  void keepRowOrder(ValueId from, ValueId to);
  bool emitScaleChannels(size_t pos, dnnl::algorithm alg, ir::ValueId a, ir::ValueId b);
  bool emitChannelMean(size_t pos, const PoolSpec& spec);
  bool emitMatVec(size_t pos, const ConvSpec& spec);
  bool emitMatVecProduct(size_t pos, const MatMulSpec& spec);
  // The activation after `out` a mat_vec takes (Relu, Sigmoid, SiLU; 0: none), its
  // nodes into `fused`; nullopt when a BatchNormalization follows.
  std::optional<int32_t> matVecActivation(ValueId out, std::vector<ChainItem>& fused) const;
  // A mat_vec step of [1, K, 1...] `x` by constant `w` (as `w_from` describes its bytes,
  // dims [O, K, 1...]; stored in float16 when `half`: exactInHalf) plus `bias`, `act`
  // after it, placing the result at `result`.
  void emitMatVecStep(size_t pos, ValueId x, const std::vector<int64_t>& in_dims, ir::ConstId w,
                      const memory::desc& w_from, bool half, ValueId bias, const std::vector<int64_t>& out_dims,
                      int32_t act, const std::vector<ChainItem>& fused);
  bool emitInt8MaxPoolStep(size_t pos, const PoolSpec& spec);
  bool channelsLastConv(Step& step, const ConvSpec& spec, bool excluded, const std::vector<ChainItem>& chain,
                        size_t fixed, dnnl::primitive_desc_base& pd, size_t& k);
  bool lowerUpsamplingDeconv(size_t pos, const ConvSpec& spec);
  void lowerPool(size_t pos);
  void lowerResample(size_t pos);
  void emitWindowStep(Step step, size_t pos, ValueId x, ValueId out, const std::vector<int64_t>& dst_dims);
  // That step writing a new buffer of `dst_type` (not placed as any value): where it is.
  Loc windowStep(Step step, size_t pos, ValueId x, const std::vector<int64_t>& dst_dims, memory::data_type dst_type);
  void lowerMatMul(size_t pos);
  void lowerEltwise(size_t pos);
  void emitEltwise(ValueId x, const std::vector<EltwiseOp>& ops, size_t pos,
                   const std::vector<ChainItem>& fused);
  void lowerBinary(size_t pos);
  // A Div or Mul of a float32 value by a one-element constant read only by a MatMul of
  // two computed values (attention's Q / sqrt(d)), or of a one-element value read
  // only by a Mul or Div (a dynamic-int8 MatMul's scale times its weights' scale): no
  // step; the MatMul scales its product (lowerMatMul), or the Mul taken as a post-op
  // multiplies by the value and the constant (collectChain). Anything else that asks
  // for the value computes it.
  bool prescaleIntoMatMul(size_t pos);
  void lowerPrelu(size_t pos);
  // A Softmax; with `scaled`, the Div or Mul by a constant before it (softmaxScaleOf)
  // in the same step, lowered at that node's position.
  void lowerSoftmax(size_t pos, std::optional<std::pair<size_t, float>> scaled = std::nullopt);
  // A Div or Mul of `v` by a one-element float32 constant whose result only a Softmax
  // along the last dim reads (attention's scores over sqrt(head dim)): its position and
  // the factor (z = v * factor; a Div only by a power of two, whose reciprocal is
  // exact, so z is the quotient's bits). The softmax_rows kernel multiplies as it
  // reads, where the matmul's post-op cost 8-19 us on [4, 256, 256].
  std::optional<std::pair<size_t, float>> softmaxScaleOf(ValueId v) const;
  void lowerLayerNorm(size_t pos);
  void lowerBatchNorm(size_t pos);
  void lowerReduce(size_t pos);
  void lowerLayerNormPattern(const LayerNormMatch& ln, const std::vector<size_t>& parts);
  void lowerConcat(size_t pos);
  // Concat written in place (dnnl_lower_move.cpp): a Concat along the channels of one
  // image whose inputs, in multiples of 16 channels, are each computed by a
  // convolution of this region and read by nothing else. In 16-channel blocks
  // (aBcd16b) each input is a contiguous run of the output's bytes: the convolutions
  // write their parts of it (buffer views) and no step concatenates. Only when each
  // convolution is 1x1 or takes Winograd's algorithm (winograd_): oneDNN's blocked
  // direct 3x3 kernels are slower than its channels-last ones by about the copy
  // saved (SqueezeNet at one thread: 2.01 against 1.81 ms of expand3x3 a run, the
  // Concats 0.23 ms).
  bool concatInPlaceShape(size_t pos) const;
  // The convolution whose output `v` is, through at most two single-input eltwise or
  // batch-norm nodes each read only by the next.
  std::optional<size_t> convBehind(ValueId v) const;
  // The in-place Concat that the convolution at `conv` feeds, through such nodes.
  std::optional<size_t> concatAhead(size_t conv) const;
  bool lowerConcatInPlace(size_t pos);
  // The nodes reading `v`, when every graph use of `v` is a node of this region (and
  // there is one); else null.
  const std::vector<size_t>* regionReaders(ValueId v) const;
  // `v` is read only by convolutions that write their parts of a Concat in place.
  bool readOnlyByConcatWriters(ValueId v) const;
  // `v`, or its pooled value when one MaxPool / AveragePool reads it, is read only by
  // convolutions that lowerConv puts in 16-channel blocks (Winograd, or a Concat's).
  bool readersTakeChannelBlocks(ValueId v) const;
  void lowerView(size_t pos);
  void lowerMove(size_t pos);
  bool lowerShuffle(size_t pos);
  void lowerRecurrent(size_t pos);
  // int8 (dnnl_lower_quant.cpp)
  void lowerQConv(size_t pos);
  void lowerQMatMul(size_t pos);
  bool emitQMatMul(size_t pos, const QMatMulSpec& q);
  std::optional<size_t> int8MaxPoolAfter(ValueId y) const;
  std::optional<size_t> dequantizeAfter(ValueId y, const QConvSpec& q) const;
  void emitInt8MaxPool(size_t pos, ValueId y, memory::data_type int_type);
  struct QResidual;
  std::optional<QResidual> qResidualAfter(size_t pos, const QConvSpec& q) const;
  void emitQResidual(const QResidual& r, ValueId y, const QConvSpec& q);
  void lowerQuantize(size_t pos);
  void lowerDynamicQuantize(size_t pos);
  void emitQuantize(size_t pos);
  // The centred integers of a DynamicQuantizeLinear (its DequantizeLinear's output `v`)
  // as float32, computed from their uint8 form when a float reader asks (locsOf).
  void emitCentred(ValueId v);
  // Whether constant MatMul weights `b` hold integers in int8's range (what
  // passes::lowerIntegerCompute made of int8 weights): an int8 matmul reads them as
  // s8. A replay follows the layout the compiler stored.
  bool int8Weights(ValueId b);
  // oneDNN's element type of a float32, uint8, int8 or int32 value.
  memory::data_type elementType(ValueId v) const;

  ConstantArgs& mb_;
  const ir::Graph& g_;
  const backend::Region& r_;
  bool bf16_ = false, winograd_ = false;
  std::vector<int> graph_uses_;
  Function fn_;
  std::vector<bool> done_;
  std::unordered_map<ValueId, std::vector<Loc>> locs_;  // front(): where the producer wrote it
  std::unordered_map<ValueId, int> remaining_;          // consumers not lowered yet (+1: region output)
  std::vector<std::vector<ValueId>> buffer_values_;     // every value that lived in each buffer
  std::unordered_map<ValueId, std::vector<size_t>> consumers_;
  std::unordered_map<ir::NodeId, size_t> pos_of_;  // region position of each node
  // DequantizeLinear outputs not computed yet (by region position of the node): an
  // int8 residual fused into a convolution reads the int8 value instead, so the float
  // one is made only when something asks for it.
  std::unordered_map<ValueId, size_t> deferred_;
  // Values prescaleIntoMatMul left to their MatMul: what they scale, by how much, and
  // the Div's or Mul's position. Its input keeps its reader count until the MatMul
  // (or the step computing the value after all) consumes the node.
  struct Prescaled {
    ValueId x;
    float factor;
    size_t pos;
  };
  std::unordered_map<ValueId, Prescaled> prescaled_;
  std::set<size_t> computed_prescales_;  // positions lowered as steps after all
  // The DequantizeLinear output of a DynamicQuantizeLinear pair, as oneDNN's int8
  // matmul reads it: the uint8 integers and their zero point (one float32 and one
  // int32 element). Its float32 value (integers minus zero point) is made only when a
  // float reader asks (emitCentred).
  struct DynamicInt8 {
    Loc q;
    uint32_t zero = 0, zero_s32 = 0;
    memory::desc one;
    std::string label;
  };
  std::unordered_map<ValueId, DynamicInt8> dynamic_;
  // Flatten outputs placed over a channels-last tensor's bytes as they are: their rows
  // hold (h, w, c) where the value's are (c, h, w); the [C, H, W] of each. Only the
  // MatMul / Gemm reading them, whose weights' rows are permuted to match, sees them.
  std::unordered_map<ValueId, std::array<int64_t, 3>> channels_last_rows_;
  bool lowering_early_ = false;  // inside lowerOperandEarly
};

}  // namespace partita::dnnl_backend
