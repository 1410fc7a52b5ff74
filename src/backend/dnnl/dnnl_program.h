// The dnnl module's program: what the compile half decides and the run-time half
// executes. A module holds one Function per region; a function is a list of oneDNN
// primitive steps over numbered buffers (region inputs, region outputs and
// region-local temporaries) and constants (by ConstId from the shared store, or bytes
// embedded in the blob). Every memory descriptor is stored explicitly, so the loader
// re-creates exactly the primitives the compiler chose. Blob format: docs/backends.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <dnnl.hpp>
#include <memory>
#include <string>
#include <vector>

#include "ir/constant_pool.h"
#include "ir/graph.h"
#include "runtime/module.h"

namespace partita::dnnl_backend {

inline constexpr char kBlobMagic[4] = {'P', 'D', 'N', 'L'};
// Version 2 adds shape-polymorphic functions (PolyFunction), version 3 temporaries
// that are views into another (Buffer::view), version 4 region graphs with shape
// computations (Shape, Size and arithmetic on them, computed at each input shape),
// version 5 softmax_rows steps with a scale (Step::alpha), version 6 add_row_copy steps
// with a quantized result, version 7 swish steps that write their channels' mean too,
// version 8 mat_vec steps (and float16, a mat_vec's weights only), version 9 views in
// shape-polymorphic functions. A blob is written with the lowest version that holds
// it (without any: version 1), and all nine are read.
inline constexpr uint32_t kBlobVersion = 9;
using runtime::kEmbeddedAlignment;  // embedded tensors start at multiples of it

// Where the bytes of a primitive argument live.
enum class ArgSource : uint8_t {
  kBuffer = 1,    // index: a buffer of the function
  kConstant = 2,  // index: a ConstId in the shared store (borrowed or derived)
  kEmbedded = 3,  // index: byte offset into the blob's embedded data
};

struct Arg {
  int key = 0;  // DNNL_ARG_*; a binary post-op's operand: DNNL_ARG_ATTR_MULTIPLE_POST_OP(i) | DNNL_ARG_SRC_1
  ArgSource source = ArgSource::kBuffer;
  uint64_t index = 0;
  dnnl::memory::desc md;  // exactly what the primitive reads or writes
  bool chosen = false;    // md was chosen by oneDNN (format `any`); the loader re-checks the choice
};

enum class BufferKind : uint8_t {
  kTemp = 1,    // region-local; lives in the per-run workspace
  kInput = 2,   // the caller's input tensor `index` (never written)
  kOutput = 3,  // the caller's output tensor `index`
};

struct Buffer {
  BufferKind kind = BufferKind::kTemp;
  uint32_t index = 0;  // input / output number; a view's parent buffer
  uint64_t bytes = 0;
  bool zero_padded = false;  // holds a layout with padding that primitives expect to stay zero
  // A temporary that is `bytes` bytes of temporary `index` from byte `offset` (a Concat
  // written in place: each producer writes its part of the output). A view has no
  // bytes of its own; its parent is a temporary that is no view, and lives while any
  // of its views does.
  bool view = false;
  uint64_t offset = 0;
};

enum class StepKind : uint8_t {
  kReorder = 1,        // SRC -> DST (layout change or copy)
  kConvolution = 2,    // SRC, WEIGHTS, [BIAS] -> DST
  kDeconvolution = 3,  // SRC, WEIGHTS, [BIAS] -> DST
  kMatMul = 4,         // SRC, WEIGHTS, [BIAS] -> DST
  kPooling = 5,        // SRC -> DST (pooling_v2: with dilation)
  kEltwise = 6,        // SRC -> DST
  kBinary = 7,         // SRC_0, SRC_1 -> DST
  kSoftmax = 8,        // SRC -> DST along `axis`
  kLogSoftmax = 9,     // SRC -> DST along `axis`
  kLayerNorm = 10,     // SRC, [SCALE], [SHIFT] -> DST over the last dimension
  kBatchNorm = 11,     // SRC, MEAN, VARIANCE, [SCALE], [SHIFT] -> DST (global stats)
  kConcat = 12,        // MULTIPLE_SRC + i -> DST along `axis`
  kPrelu = 13,         // SRC, WEIGHTS (slopes) -> DST
  kReduction = 14,     // SRC -> DST (reduced dims are 1 in DST); alpha = p, beta = eps
  kResampling = 15,    // SRC -> DST (factors from the dims; alg nearest or linear)
  kRnn = 16,           // SRC_LAYER, [SRC_ITER], [SRC_ITER_C], WEIGHTS_LAYER, WEIGHTS_ITER,
                       // [WEIGHTS_PEEPHOLE], [BIAS] -> DST_LAYER, [DST_ITER], [DST_ITER_C];
                       // alg: the cell kind, axis: the direction (dnnl_rnn_direction_t),
                       // flags: vanilla_rnn's activation (dnnl_alg_kind_t) with alpha, beta
  // partita's own kernels (dnnl_kernels.h), no oneDNN primitive:
  kDynamicQuantize = 17,  // SRC (f32) -> DST (u8, same count), kDynamicScaleArg (f32[1]),
                          // kDynamicZeroArg (f32[1]), kDynamicZeroS32Arg (s32[1]); all
                          // dense row-major buffers
  kSwish = 18,            // SRC -> DST (f32, one descriptor; in place when the same buffer):
                          // x * sigmoid(x), SiLU; with DST_1 (blob version 7; SRC channels-
                          // last dense) also DST's mean over the spatial dims, as kChannelMean
  kScaleChannels = 19,    // SRC_0 (f32 [N, C, spatial...], channels-last dense), SRC_1 (f32
                          // [N or 1, C, 1...], dense) -> DST (SRC_0's descriptor; in place
                          // when the same buffer): x * s, s per channel (squeeze-excitation)
  kChannelMean = 20,      // SRC (f32 [N, C, spatial...], channels-last dense) -> DST (f32
                          // [N, C, 1...], dense): the mean over the spatial dims
  kInt8MaxPool = 21,      // SRC (u8 or s8 [N, C, H, W], channels-last dense) -> DST (the same
                          // type and layout): max over the windows of kernel, strides,
                          // pad_l, pad_r (2 each; no dilation)
  kAddLayerNorm = 22,     // SRC (f32 [..., C], dense row-major), MULTIPLE_SRC + i for i < 4
                          // (addends: f32 with C elements, added to every row, or x's
                          // count; buffers or constants), SCALE, SHIFT (f32 [C]) -> DST (f32,
                          // x's count): layer normalization over C of x plus the addends,
                          // `epsilon`; with kQuantizedResultArg (u8, x's count) and
                          // kDynamicScaleArg, kDynamicZeroArg, kDynamicZeroS32Arg also DST's
                          // DynamicQuantizeLinear (as kDynamicQuantize)
  kSoftmaxRows = 23,      // SRC -> DST (f32, one plain dense descriptor; in place when the
                          // same buffer): softmax along the last dim of SRC times `alpha`
                          // (0: of SRC; a nonzero alpha needs blob version 5)
  kBiasGelu = 24,         // SRC (f32 [..., C], dense row-major), [SRC_1 (f32 [C], dense:
                          // added to every row; a buffer or a constant)] -> DST (f32, x's
                          // count; may be SRC's buffer): Gelu (erf form) of x plus the bias;
                          // with kQuantizedResultArg and the three as kAddLayerNorm's also
                          // DST's DynamicQuantizeLinear
  kAddRowCopy = 25,       // SRC (f32 [..., C], dense row-major), [SRC_1 (f32 [C], dense: added to
                          // every row)], then per output i < kMaxRowCopies: MULTIPLE_SRC + i (a
                          // strided view of SRC's buffer: f32, no inner blocks) copied into
                          // kRowCopyDst[i] (dense unblocked f32 of the view's dims; a dim
                          // contiguous on both sides): attention's QKV bias Add and its head
                          // copies in one pass. With kQuantizedResultArg (u8, plain row-major
                          // of the view's dims) and the three as kAddLayerNorm's instead of
                          // kRowCopyDst[0] (one view only; blob version 6): the view's
                          // DynamicQuantizeLinear (as kDynamicQuantize), no float32 copy
  kMatVec = 26,           // SRC (f32 [1, K, 1...], dense), WEIGHTS (f32 or f16 [O, K, 1...]
                          // in blocks of outputs, each [K][B]: matVecWeightsDesc; a
                          // constant), [BIAS (f32 [O], a
                          // constant)] -> DST (f32 [1, O, 1...], dense): a 1x1 convolution over
                          // one position, then `alg` (0, eltwise_relu, eltwise_logistic or
                          // eltwise_swish); blob version 8
};
// The argument keys of a kDynamicQuantize step's scale and zero points (oneDNN never
// sees them).
inline constexpr int kDynamicScaleArg = DNNL_ARG_DST_1;
inline constexpr int kDynamicZeroArg = DNNL_ARG_DST_2;
inline constexpr int kDynamicZeroS32Arg = DNNL_ARG_DST_2 + 1;
// A kAddLayerNorm or kBiasGelu step's quantized result (uint8).
inline constexpr int kQuantizedResultArg = DNNL_ARG_DST_2 + 2;
inline constexpr int kMaxLayerNormAddends = 4;
// A kAddRowCopy step's outputs (keys a step writes, as the others' extra outputs).
inline constexpr int kMaxRowCopies = 4;
inline constexpr int kRowCopyDst[kMaxRowCopies] = {DNNL_ARG_DST, DNNL_ARG_DST_1, DNNL_ARG_DST_2, DNNL_ARG_DST_2 + 1};
const char* stepKindName(StepKind k);

struct PostOp {
  enum class Kind : uint8_t { kEltwise = 1, kSum = 2, kBinary = 3 };
  Kind kind = Kind::kEltwise;
  int32_t alg = 0;  // dnnl_alg_kind_t (eltwise, binary)
  float alpha = 0, beta = 0;  // a sum's beta: the zero point of the int8 value it adds
  float scale = 1;            // eltwise output scale; sum scale
};

// The int8 attributes of a step (oneDNN's output scales and zero points), fixed when
// its primitive is created. A step that has them carries kQuantizedFlag in `flags`
// and this record after its post-ops in the blob (blobs without int8 steps are
// unchanged).
struct QuantAttrs {
  // One, or one per output channel (dst dim `scale_dim`); scale_dim kSourceScales: a
  // binary step's two source scales (SRC_0, SRC_1) instead.
  std::vector<float> output_scales;
  int32_t scale_dim = 1;
  int32_t src_zero_point = 0, dst_zero_point = 0;
  bool empty() const { return output_scales.empty() && src_zero_point == 0 && dst_zero_point == 0; }
};
inline constexpr uint32_t kQuantizedFlag = 0x80000000u;
inline constexpr int32_t kSourceScales = -1;

struct Step {
  StepKind kind = StepKind::kReorder;
  std::string label;  // the ONNX node names it computes, for messages
  int32_t alg = 0;    // dnnl_alg_kind_t where the primitive takes one
  std::vector<int64_t> strides, dilates, pad_l, pad_r, kernel;  // dilates: oneDNN's (ONNX's minus one)
  float alpha = 0, beta = 0, epsilon = 0;
  int64_t axis = 0;
  uint32_t flags = 0;  // dnnl_normalization_flags_t
  std::vector<Arg> args;
  std::vector<PostOp> post_ops;
  QuantAttrs quant;

  const Arg* find(int key) const;
  Arg* find(int key);
};

// A shape-polymorphic function: a region whose values have symbolic dims. Its steps
// (Function::steps) are those of the representative input shapes; for any other
// shape the run-time half lowers `graph` again (dnnl_replay.h) with the constants the
// compiler made, which the records find: weights in the layout stored for them
// (never repacked), derived constants and embedded bytes where the compiler put them.
struct PolyFunction {
  // The region as a graph of its own: its inputs and outputs are the function's, its
  // values keep their symbolic types, its constants are numbered locally.
  ir::Graph graph;
  std::vector<ir::ConstId> global;  // per local constant: the module's ConstId
  // Per local constant: the offset of its bytes in the blob's embedded data, or -1.
  // Bytes are kept for what lowering reads of a constant's value (axes, bounds,
  // scalars: non-float constants and one-element float ones); a larger float constant
  // is known by its type only (its data pointer is null).
  std::vector<int64_t> bytes_at;
  std::vector<std::vector<int64_t>> representative;  // per input: the shape `steps` are for

  struct Weights {  // the layout of the weights read from `source` (`folded`: computed from it)
    ir::ConstId source = ir::kNoConst;
    bool folded = false;
    dnnl::memory::desc md;
  };
  struct Derived {  // derive(source, ..., md, same_values) made constant `id`
    ir::ConstId source = ir::kNoConst;
    bool same_values = true;
    dnnl::memory::desc md;
    ir::ConstId id = ir::kNoConst;
  };
  struct Embedded {  // embed(md, absorbed) put its bytes at `offset` of the embedded data
    std::vector<ir::ConstId> absorbed;
    dnnl::memory::desc md;
    uint64_t offset = 0;
  };
  std::vector<Weights> weights;  // IDs here are the module's
  std::vector<Derived> derived;
  std::vector<Embedded> embedded;
};

struct Function {
  uint32_t num_inputs = 0, num_outputs = 0;
  std::vector<Buffer> buffers;
  std::vector<Step> steps;
  std::shared_ptr<PolyFunction> poly;  // set for a shape-polymorphic function
};

struct Program {
  std::vector<Function> functions;
  std::vector<std::byte> embedded;  // compile side: bytes the blob carries (kEmbedded args)
  // Read side: where the embedded bytes are inside the blob (zero copy).
  uint64_t embedded_offset = 0, embedded_size = 0;
};

std::vector<std::byte> writeProgram(const Program& p);
// Parses and checks a blob (indices in range, embedded ranges inside the blob).
// Throws Error(kInvalidArtifact) for a truncated, corrupted or foreign blob.
Program readProgram(const std::byte* data, size_t size);

}  // namespace partita::dnnl_backend
