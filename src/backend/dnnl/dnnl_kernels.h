// The dnnl module's own kernels: steps that are partita's code, not a oneDNN
// primitive, where oneDNN's way costs more than the work is worth:
// StepKind::kDynamicQuantize (six one-element or streaming steps made one),
// StepKind::kSwish (SiLU in about 25 % less time than oneDNN 2.6's swish, as a step or
// as a post-op), StepKind::kChannelMean and StepKind::kScaleChannels (a
// squeeze-excitation block's global average pool and its per-channel Mul over a
// channels-last tensor: each thread takes the same contiguous share of positions as
// the swish before them wrote, where oneDNN's pooling and binary steps split the work
// their own ways and ran 2-3x slower on two threads than on one) and
// StepKind::kInt8MaxPool (oneDNN's int8 max pooling is slow). They run inside the
// module's function like any step: same buffers, same team size, same profile events.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend/dnnl/dnnl_program.h"

namespace partita::dnnl_backend {

// Whether a step kind is one of these kernels (no oneDNN primitive is made for it).
bool isOwnKernel(StepKind kind);
// The implementation name `partita inspect`, profiles and ONEDNN_VERBOSE-style checks
// see for it.
const char* ownKernelName(StepKind kind);

// Throws Error(kInvalidArtifact) naming `where` unless `step` has the arguments its
// kernel reads and writes, as the blob format says (docs/backends.md).
void checkOwnKernelStep(const Step& step, const std::string& where);

// DynamicQuantizeLinear as ONNX defines it, computed as the oneDNN steps it replaces
// did (so results are bit-identical): hi = max(max(x), 0), lo = max(-min(x), 0),
// scale = clip((hi + lo) / 255, FLT_MIN, FLT_MAX), zero = round(clip(lo / scale, 0,
// 255)), y = saturate_u8(round(x / scale) + zero), rounding half to even. Uses the
// calling thread's OpenMP team. NaN in x: ONNX leaves it undefined; here it is skipped
// by min/max and gives 0 in y.
void dynamicQuantize(const float* x, int64_t n, uint8_t* y, float* scale, float* zero, int32_t* zero_s32);

// Layer normalization of x plus addends, optionally followed by the
// DynamicQuantizeLinear of its result (StepKind::kAddLayerNorm): a transformer's bias
// Add, residual Add, LayerNormalization and the next MatMul's DynamicQuantizeLinear in
// one pass over rows that stay in the core's cache, where they were three or four
// steps each reading what the one before wrote (on two threads partly from the other
// core).
struct AddLayerNormArgs {
  const float* x = nullptr;  // rows x cols, row-major
  const float* adds[kMaxLayerNormAddends] = {};
  bool add_is_row[kMaxLayerNormAddends] = {};  // cols floats added to every row; else rows x cols
  int n_adds = 0;
  const float* gamma = nullptr;  // cols
  const float* beta = nullptr;   // cols
  float epsilon = 0;
  int64_t rows = 0, cols = 0;
  float* y = nullptr;    // rows x cols; may be x or a full-size addend (each element is read before it is written)
  uint8_t* q = nullptr;  // null: no quantization; else rows x cols, with its scale and zero points
  float* scale = nullptr;
  float* zero = nullptr;
  int32_t* zero_s32 = nullptr;
};
// s = x + adds[0] + adds[1] ... (in that order), then per row y = (s - mean) /
// sqrt(variance + epsilon) * gamma + beta, mean and variance over the row in float32
// (the variance as the mean of squared deviations). With q: q, scale and zero as
// dynamicQuantize(y) computes them. Uses the calling thread's OpenMP team, rows split
// into one contiguous share per thread, each quantizing its own rows.
void addLayerNorm(const AddLayerNormArgs& a);

// y = x * sigmoid(x) (SiLU) over n floats; y may be x. Within a few ulp of the exact
// value (DnnlKernels.SwishIsWithinAFewUlp); 0 stays 0 (blocked layouts' padding).
// Uses the calling thread's OpenMP team.
void swish(const float* x, float* y, int64_t n);

// y = act(W x + bias) for one vector x of k floats (StepKind::kMatVec: a 1x1
// convolution over one position, squeeze-excitation's FCs, or a matrix product of one
// row, a classifier). W is stored in blocks of B = matVecBlock(o) outputs, each block
// [k][B] (each input's weights for the block's outputs side by side; the last block
// padded with zeros): weight (input i, output j) at ((j / B) * k + i) * B + j % B, so
// that a block's weights are read as one stream. In float32, or in float16 (`half`:
// IEEE binary16 bits, converted exactly as they are read; half the bytes). bias may be
// null. act: 0 (none), or oneDNN's eltwise_relu, eltwise_logistic or eltwise_swish
// (SiLU). Uses the calling thread's OpenMP team, the outputs split between its threads.
void matVec(const float* x, const void* w, bool half, const float* bias, float* y, int64_t k, int64_t o,
            int32_t act);
// B: o rounded up to 16, at most 128.
int64_t matVecBlock(int64_t o);
// The descriptor of such weights of dims [o, k, 1...] (a oneDNN blocked layout with
// o's inner block B, outermost the blocks of o, then k).
dnnl::memory::desc matVecWeightsDesc(const std::vector<int64_t>& dims, dnnl::memory::data_type t);

// Softmax along rows of `cols` floats (StepKind::kSoftmaxRows) of z = x * scale (one
// rounding, as a matmul's eltwise_linear post-op computes it), y = e^(z - max) / sum
// per row (x == y allowed); a row with a NaN or +inf, or all -inf, is all NaN, as the
// definition computes it. Rows are split between the calling thread's OpenMP team.
void softmaxRows(const float* x, float* y, int64_t rows, int64_t cols, float scale = 1.0f);

// GELU in its erf form of x plus an optional bias row, optionally followed by the
// DynamicQuantizeLinear of its result (StepKind::kBiasGelu): a transformer's
// feed-forward `bias Add -> Gelu -> DynamicQuantizeLinear`, where oneDNN 2.6's binary
// step with a gelu_erf post-op took 2.2x this kernel's time and the quantization read
// the result again.
struct BiasGeluArgs {
  const float* x = nullptr;     // rows x cols, row-major
  const float* bias = nullptr;  // null, or cols floats added to every row
  int64_t rows = 0, cols = 0;
  float* y = nullptr;           // rows x cols; may be x
  uint8_t* q = nullptr;         // null: no quantization; else rows x cols, with its scale and zero points
  float* scale = nullptr;
  float* zero = nullptr;
  int32_t* zero_s32 = nullptr;
};
// v = x + bias, y = v / 2 * (1 + erf(v / sqrt(2))), erf from 16 polynomial pieces of
// degree 4 (within 2.4e-7 of erf; exactly +-1 where float32's erf rounds to it, so that
// y = v or 0 there and the quantization's range sees the same largest value): y within
// 2^-21 |v| of the exact value (DnnlKernels.BiasGeluFollowsItsDefinition). NaN stays
// NaN, +inf gives +inf and -inf NaN, as the ONNX ops written out compute them. With q:
// q, scale and zero as dynamicQuantize(y) computes them. Uses the calling thread's
// OpenMP team, rows split into one contiguous share per thread.
void biasGelu(const BiasGeluArgs& a);

// One output of addRowCopy: the elements of a strided view of x (rank <= kMaxCopyRank)
// written into dst with the given strides; dim `inner` is contiguous (stride 1) on
// both sides.
inline constexpr int kMaxCopyRank = 6;
struct StridedCopy {
  int rank = 0, inner = 0;
  int64_t dims[kMaxCopyRank] = {};
  int64_t src_strides[kMaxCopyRank] = {}, dst_strides[kMaxCopyRank] = {};
  int64_t src_offset = 0;
  float* dst = nullptr;
};
// (StepKind::kAddRowCopy) For each of the n copies (n <= kMaxRowCopies), dst[j] = x[v] +
// bias[v % cols] over the view's elements v (bias null: a plain copy): x plus a bias
// row, copied through strided views in one pass (attention's QKV bias and head
// copies). Exact (one add). All the views' runs (along their run dims) are split
// between the calling thread's OpenMP team in one parallel region.
void addRowCopy(const float* x, const float* bias, int64_t cols, const StridedCopy* copies, int n);
// (StepKind::kAddRowCopy with a quantized result) One such copy's DynamicQuantizeLinear
// instead of the copy: q (uint8, at c.dst_strides; c.dst unused), scale and zero points
// as dynamicQuantize computes them from the copy's values (attention's context heads
// back to [seq, heads * dim] for the next int8 MatMul, without the float32 copy). Uses
// the calling thread's OpenMP team, the runs split into one contiguous share per thread.
void addRowCopyQuantized(const float* x, const float* bias, int64_t cols, const StridedCopy& c, uint8_t* q,
                         float* scale, float* zero, int32_t* zero_s32);
// The dim a copy from `view` to `dst` (same dims, no inner blocks) runs along: the last
// one of stride 1 on both sides; nullopt without one.
std::optional<int> copyRunDim(const dnnl::memory::desc& view, const dnnl::memory::desc& dst);

// y[i, p, :] = x[i, p, :] * s[per_batch ? i : 0, :] for i < n, p < positions: x and y
// hold n * positions rows of c floats (channels-last), s rows of c. y may be x. Exact
// (one multiply). Uses the calling thread's OpenMP team.
void scaleChannels(const float* x, const float* s, float* y, int64_t n, int64_t positions, int64_t c,
                   bool per_batch);

// y[i, :] = the mean of x[i, p, :] over p < positions, for i < n (x channels-last as
// above, y n rows of c). Summed in float32 over fixed blocks of positions, the blocks'
// sums added in order: the same bits on any team size. Uses the calling thread's
// OpenMP team.
void channelMean(const float* x, float* y, int64_t n, int64_t positions, int64_t c);
// swish(x) into y and channelMean(y) into mean at once (a StepKind::kSwish with a mean
// output: squeeze-excitation's squeeze of a SiLU's output), block by block of
// channelMean's positions, each block summed right after it is written, while it is
// in the core's cache: the same bits as the two steps. y may be x.
void swishChannelMean(const float* x, float* y, float* mean, int64_t n, int64_t positions, int64_t c);

// A max pool's geometry over channels-last [n, in_h, in_w, c] into [n, out_h, out_w,
// c]: every window holds at least one element of the source (checkOwnKernelStep).
struct MaxPoolWindow {
  int64_t n = 0, c = 0, in_h = 0, in_w = 0, out_h = 0, out_w = 0;
  int64_t kernel_h = 0, kernel_w = 0, stride_h = 0, stride_w = 0, pad_h = 0, pad_w = 0;
};
// Max pooling of uint8 (or int8 when is_signed) values: oneDNN 2.6's int8 max pooling
// takes 3-5x its float32 pooling's time. Exact. Uses the calling thread's OpenMP team.
void int8MaxPool(const uint8_t* x, uint8_t* y, bool is_signed, const MaxPoolWindow& p);

// A float32 max pooling step (StepKind::kPooling) the module runs as its own loop
// instead of oneDNN 2.6's pooling, which took 58 us where this takes 33-39 on
// SqueezeNet's [1, 128, 55, 55] -> 27x27 3x3/2 pool at two threads, its source just
// written by a convolution (a quarter of the model's pooling at two threads). Taken
// when source and destination are both dense channels-last with channels a multiple of
// 16, or both dense 16-channel blocks (aBcd16b: each block of an image is a
// channels-last image of 16 channels, so n = N * C / 16 and c = 16), 2-D without
// dilation, no post-ops, and every window holds an element of the source; else
// nullopt (oneDNN's pooling runs it), and always without AVX-512.
std::optional<MaxPoolWindow> planFloatMaxPool(const Step& step);
// Runs it: the maximum of each window's elements, bit for bit oneDNN's, except that a
// window of -inf alone gives -inf (as ONNX says; oneDNN gives the lowest finite float)
// and that a window holding NaN gives NaN or its other elements' maximum, by position.
// Uses the calling thread's OpenMP team, the (n, output row) pairs split between its
// threads.
void floatMaxPool(const float* x, float* y, const MaxPoolWindow& p);

// A concatenation of dense tensors of one plain (unblocked) layout, as copies of
// contiguous blocks: for each index of the dims outside the axis (in memory order),
// each source's block of part_bytes[i] in turn. The module runs a StepKind::kConcat so
// where its descriptors allow, instead of oneDNN 2.6's concat (simple:any), which
// copies element by element.
struct PlainConcat {
  int64_t outer = 1;                // blocks per source
  std::vector<int64_t> part_bytes;  // one source's block
};
// The plan of dst = concat(srcs) along `axis`, or nullopt when any descriptor is
// blocked, padded, offset or not dense in the destination's order, the types differ,
// or the sources do not fit the destination.
std::optional<PlainConcat> planPlainConcat(const std::vector<dnnl::memory::desc>& srcs,
                                           const dnnl::memory::desc& dst, int axis);
// Runs it (srcs[i] as the plan's source i). Uses the calling thread's OpenMP team,
// the blocks' outer index split between its threads.
void plainConcat(const PlainConcat& p, const std::byte* const* srcs, std::byte* dst);

// A float32 to int8 reorder with one output scale and a destination zero point (a
// static QuantizeLinear: y = saturate(round(x * scale + zero_point)), rounding to
// nearest even, NaN to 0 in uint8 and 127 in int8, as oneDNN 2.6's reorder computes it)
// between two dense unblocked layouts with the same strides: the module runs it as its
// own loop instead of oneDNN 2.6's `jit:uni` reorder, which took 77 us for the demo CNN's
// [100, 3136] flattened activations at two threads.
struct QuantizeCopy {
  int64_t n = 0;
  float scale = 1, zero_point = 0;
  bool is_signed = false;  // s8, else u8
};
// Its plan, or nullopt for any other reorder (and always without AVX-512).
std::optional<QuantizeCopy> planQuantizeCopy(const Step& step);
// Runs it: n floats of x into n int8 or uint8 values of y. Uses the calling thread's
// OpenMP team.
void quantizeCopy(const QuantizeCopy& q, const float* x, uint8_t* y);

// A dynamic-int8 matmul step (StepKind::kMatMul: uint8 source [M, K] row-major with a
// run-time zero point, int8 weights [K, N] as oneDNN 2.6 stores them for it
// (BA16a64b4a: 64-column panels of K / 4 groups of 64 columns x 4 rows, padded with
// zeros to whole panels and 64 rows, followed by the negated column sums, its
// asymmetric-source compensation), float32 result [M, N], then at most a multiply by
// a one-element float32 operand, a linear eltwise (alpha * x + beta) and an add of a
// float32 row [1, N], in that order): the module runs it as its own loop, 6 x 64 tiles
// of `vpdpbusd` accumulators, which reaches this core's VNNI peak (~460 G
// multiply-adds a second at one thread) where oneDNN 2.6's brgemm reached 340-380 on
// the encoder's shapes. The result is row-major, or in blocks of B columns (B a
// multiple of 16 dividing N; one inner block of dim 1, strides B and M * B: column
// block j is a dense [M, B] matrix at j * M * B), the layout of attention's heads
// when B is the head size (StepKind::kMatMul in docs/backends.md).
struct IntMatMul {
  int64_t m = 0, k = 0, n = 0;
  int64_t panel_bytes = 0;           // one 64-column panel: K padded to 64, times 64
  int64_t compensation_offset = 0;   // bytes from the weights to their negated column sums
  int64_t column_block = 0;          // B of a result in blocks of columns; 0: row-major
  int scale_post_op = -1;            // the multiply's post-op index (its operand), or -1
  int bias_post_op = -1;             // the row add's post-op index (its operand), or -1
  bool linear = false;               // a linear eltwise after the multiply
  float alpha = 1, beta = 0;
};
// Its plan, or nullopt for any other step (and always without AVX-512 VNNI).
std::optional<IntMatMul> planIntMatMul(const Step& step);
// The float32 [M, N] result in blocks of B columns that planIntMatMul takes (the
// lowering writes attention's heads so: writeHeadsFromMatMul).
dnnl::memory::desc columnBlocksDesc(int64_t m, int64_t n, int64_t b);
// Runs it: c = post-ops(float(a * w + zero_point * compensation)), the same bits as
// oneDNN's primitive, but for the multiply followed by a linear eltwise without shift
// (a dynamic-int8 MatMul's scale product, ONNX's Mul(activation scale, weights'
// scale)): that is float(...) * (scale * alpha), as ONNX computes it, where oneDNN's
// post-ops round twice. `scale` is read only when the plan has the multiply, `bias` (N
// floats) only when it has the row add. Uses the calling thread's OpenMP team, each
// thread a band of whole 6-row tiles.
void intMatMul(const IntMatMul& p, const uint8_t* a, const int8_t* w, int32_t zero_point, float scale, const float* bias,
               float* c);

// A float32 matmul step between activations (StepKind::kMatMul: source [B, M, K] and
// weights [B, K, N] (or 2-D, or 4-D with a leading dim of one) read from buffers,
// dense row-major, result [B, M, N] with the columns contiguous (row-major, or rows
// and batches at other strides: attention's context written straight into
// [M, B * N]), no bias, post-ops or scales): the module runs it as its own loop of
// 6 x 64 tiles of FMA accumulators, summing over K in order.
struct FloatMatMul {
  int64_t batch = 1, m = 0, k = 0, n = 0;
  int64_t ldc = 0, batch_stride = 0;  // the result's row and batch strides, in floats
};
// Its plan, or nullopt for any other step (and always without AVX-512).
std::optional<FloatMatMul> planFloatMatMul(const Step& step);
// Runs it: c = a * b, each batch's product. Uses the calling thread's OpenMP team, the
// (batch, band of rows) pairs split between its threads.
void floatMatMul(const FloatMatMul& p, const float* a, const float* b, float* c);

// A reorder between two dense plain (unblocked) layouts of one tensor that is, once
// the dims both keep side by side in one order are merged, a batch of matrix
// transposes: dst[b][r][c] = src[b][c][r] (NCHW to NHWC: b = N, r = H * W, c = C; and
// back, c = H * W). The module runs such a StepKind::kReorder so instead of oneDNN
// 2.6's reorder (jit:uni), which takes 45-120 us for a [1, 3, 224, 224] image at one
// thread and 160 us at two.
struct PlainTranspose {
  int64_t batch = 1, rows = 1, cols = 3;  // 4-byte elements (float32 or int32)
};
// The plan of dst = src in dst's layout, or nullopt when either is blocked, padded,
// offset or not dense, the types or dims differ, the elements are not 4 bytes, the two
// orders are no batch of transposes (the same order, or three or more groups of dims
// moving), or the columns are not three: only there is the module's copy faster.
std::optional<PlainTranspose> planPlainTranspose(const dnnl::memory::desc& src, const dnnl::memory::desc& dst);
// Runs it. Uses the calling thread's OpenMP team, the destination's rows split
// between its threads.
void plainTranspose(const PlainTranspose& p, const std::byte* src, std::byte* dst);

}  // namespace partita::dnnl_backend
