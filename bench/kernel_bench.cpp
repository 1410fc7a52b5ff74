// partita_bench_kernels: GFLOP/s of the host kernels that dominate the model set
// (Conv, MatMul) next to oneDNN on the same shapes and thread counts, so the report
// shows where the host backend stands against what this CPU can do.
//
// Host side: the registered OpDef, called the way the graph executor calls it
// (inferNode for the output type, then run on caller-allocated tensors).
// oneDNN side: the primitive with the layouts it prefers (format_tag::any; weights
// reordered once, outside the timing), i.e. the best case for the library.
//
// Upsampling (kind `upsample`): an FPN / U-Net ConvTranspose with stride equal to its
// kernel: `partita` (the ONNX node compiled with --backends dnnl,host and run through
// a Session: partita's lowering, plus the region's input and output reorders from
// and to the plain layout), `partita-conv` (the yardstick, measured the same way: the
// Conv with the same channels and kernel on the output-sized image, padded at the end
// to keep its size; partita's ConvTranspose should reach at least half its GFLOP/s),
// and the raw primitives with the layouts oneDNN prefers: `onednn-deconv` (the
// deconvolution partita used to emit) and `onednn-conv`. FLOPS counts each one's own
// arithmetic.
//
// Benchmarks are named kind/shape/impl/tN and report a FLOPS counter (flop/s); run
// with --benchmark_format=json for bench/bench.py.
#include <benchmark/benchmark.h>
#include <omp.h>
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <dnnl.hpp>
#include <fstream>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/dnnl/dnnl_kernels.h"
#include "kernels/op_registry.h"
#include "partita/compiler.h"
#include "partita/model.h"
#include "kernels/op_util.h"
#include "ir/tensor.h"

namespace {

using partita::ir::DType;

struct ConvShape {
  std::string name;
  int64_t c, h, w, m, k, stride, pad, groups;
  int64_t outH() const { return (h + 2 * pad - k) / stride + 1; }
  int64_t outW() const { return (w + 2 * pad - k) / stride + 1; }
  double flops() const { return 2.0 * double(m * outH() * outW()) * double(c / groups * k * k); }
};

struct MatMulShape {
  std::string name;
  int64_t batch, m, k, n;
  double flops() const { return 2.0 * double(batch * m * n * k); }
};

// Batch 1, as the model benchmarks run.
const std::vector<ConvShape> kConvShapes = {
    {"resnet18.conv1.7x7s2", 3, 224, 224, 64, 7, 2, 3, 1},
    {"resnet18.layer1.3x3", 64, 56, 56, 64, 3, 1, 1, 1},
    {"resnet18.layer2.3x3", 128, 28, 28, 128, 3, 1, 1, 1},
    {"resnet18.layer3.3x3", 256, 14, 14, 256, 3, 1, 1, 1},
    {"resnet18.layer4.3x3", 512, 7, 7, 512, 3, 1, 1, 1},
    {"mobilenet_v2.expand.1x1", 24, 56, 56, 144, 1, 1, 0, 1},
    {"mobilenet_v2.dw.3x3", 144, 56, 56, 144, 3, 1, 1, 144},
    {"efficientnet_b0.dw.5x5", 240, 28, 28, 240, 5, 1, 2, 240},
};

// ConvTranspose with stride = kernel on a c x h x w input (output c x h*k x w*k).
struct UpsampleShape {
  std::string name;
  int64_t c, h, w, k;
  double deconvFlops() const { return 2.0 * double(c * c * k * k) * double(h * w); }
  // The convolution with the same channels and kernel on the output-sized image.
  double convFlops() const { return 2.0 * double(c * c * k * k) * double(h * k * w * k); }
};

const std::vector<UpsampleShape> kUpsampleShapes = {
    {"fpn.24ch.2x2s2.160x160", 24, 160, 160, 2},  // OCR detector neck at 640x640
    {"unet.64ch.2x2s2.64x64", 64, 64, 64, 2},
};

// BERT-shaped encoder, sequence 128, hidden 256, 4 heads, FFN 1024.
const std::vector<MatMulShape> kMatMulShapes = {
    {"bert.qkv.128x256x768", 1, 128, 256, 768},
    {"bert.proj.128x256x256", 1, 128, 256, 256},
    {"bert.ffn1.128x256x1024", 1, 128, 256, 1024},
    {"bert.ffn2.128x1024x256", 1, 128, 1024, 256},
    {"bert.scores.4x128x64x128", 4, 128, 64, 128},
    {"bert.scores.4x256x64x256", 4, 256, 64, 256},
    {"bert.context.4x256x256x64", 4, 256, 256, 64},
};

std::vector<float> randomFloats(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(size_t(n), 0.0f);
  for (float& x : v) x = dist(rng);
  return v;
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

void setThreads(int threads) {
  omp_set_num_threads(threads);
}

// ---- host ----------------------------------------------------------------------

// Runs one host op over float inputs of the given shapes, as the executor would.
void runHostOp(benchmark::State& state, const std::string& op, partita::ir::AttributeMap attrs,
               const std::vector<std::vector<int64_t>>& shapes, double flops, int threads) {
  namespace kernels = partita::kernels;
  namespace ir = partita::ir;
  const kernels::OpDef* def = kernels::OpRegistry::global().find("", op);
  if (!def) {
    state.SkipWithError(("host op " + op + " is not registered").c_str());
    return;
  }
  ir::Node node;
  node.op_type = op;
  node.opset = 13;
  node.name = "bench";
  node.attrs = std::move(attrs);
  node.outputs = {ir::ValueId(shapes.size())};
  std::vector<ir::TensorType> types;
  std::vector<std::vector<float>> data;
  std::vector<ir::Tensor> inputs;
  for (size_t i = 0; i < shapes.size(); ++i) {
    node.inputs.push_back(ir::ValueId(i));
    types.push_back(ir::TensorType::of(DType::kFloat32, shapes[i]));
    data.push_back(randomFloats(numel(shapes[i]), unsigned(i + 1)));
    inputs.push_back(ir::Tensor{DType::kFloat32, shapes[i], data.back().data()});
  }
  std::vector<float> out;
  std::vector<ir::Tensor> outputs;
  try {
    std::vector<ir::TensorType> out_types =
        kernels::inferNode(node, types, std::vector<const ir::Tensor*>(shapes.size(), nullptr), nullptr);
    std::vector<int64_t> out_shape = out_types.at(0).staticShape();
    out.assign(size_t(numel(out_shape)), 0.0f);
    outputs.push_back(ir::Tensor{DType::kFloat32, out_shape, out.data()});
  } catch (const std::exception& e) {
    state.SkipWithError((op + " infer: " + e.what()).c_str());
    return;
  }
  setThreads(threads);
  kernels::KernelContext ctx{node, nullptr, inputs, outputs, threads};
  try {
    def->run(ctx);  // once outside the timing: catches errors and warms caches
  } catch (const std::exception& e) {
    state.SkipWithError((op + " run: " + e.what()).c_str());
    return;
  }
  for (auto _ : state) {
    def->run(ctx);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.counters["FLOPS"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
}

void hostConv(benchmark::State& state, const ConvShape& s, int threads) {
  partita::ir::AttributeMap attrs;
  attrs.setInts("kernel_shape", {s.k, s.k});
  attrs.setInts("strides", {s.stride, s.stride});
  attrs.setInts("pads", {s.pad, s.pad, s.pad, s.pad});
  attrs.setInts("dilations", {1, 1});
  attrs.setInt("group", s.groups);
  runHostOp(state, "Conv", attrs, {{1, s.c, s.h, s.w}, {s.m, s.c / s.groups, s.k, s.k}, {s.m}}, s.flops(), threads);
}

void hostMatMul(benchmark::State& state, const MatMulShape& s, int threads) {
  if (s.batch == 1)
    runHostOp(state, "MatMul", {}, {{s.m, s.k}, {s.k, s.n}}, s.flops(), threads);
  else
    runHostOp(state, "MatMul", {}, {{s.batch, s.m, s.k}, {s.batch, s.k, s.n}}, s.flops(), threads);
}

// ---- oneDNN --------------------------------------------------------------------

using dnnl::memory;
using Tag = memory::format_tag;

// A memory of `desc` holding `values` given in the plain layout `plain`.
memory filled(const dnnl::engine& eng, dnnl::stream& strm, const memory::desc& desc, const memory::dims& dims,
              Tag plain, unsigned seed) {
  memory::desc plain_md(dims, memory::data_type::f32, plain);
  std::vector<float> values = randomFloats(numel(dims), seed);
  memory src(plain_md, eng, values.data());
  memory dst(desc, eng);
  dnnl::reorder(src, dst).execute(strm, src, dst);
  strm.wait();
  return dst;
}

void timePrimitive(benchmark::State& state, const dnnl::primitive& prim, dnnl::stream& strm,
                   const std::unordered_map<int, memory>& args, double flops) {
  prim.execute(strm, args);
  strm.wait();
  for (auto _ : state) {
    prim.execute(strm, args);
    strm.wait();
  }
  state.counters["FLOPS"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
}

void dnnlConv(benchmark::State& state, const ConvShape& s, int threads) {
  setThreads(threads);
  try {
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream strm(eng);
    const auto f32 = memory::data_type::f32;
    memory::dims src_dims = {1, s.c, s.h, s.w}, dst_dims = {1, s.m, s.outH(), s.outW()}, bias_dims = {s.m};
    memory::dims wei_dims = s.groups == 1 ? memory::dims{s.m, s.c, s.k, s.k}
                                          : memory::dims{s.groups, s.m / s.groups, s.c / s.groups, s.k, s.k};
    Tag wei_plain = s.groups == 1 ? Tag::oihw : Tag::goihw;
    dnnl::convolution_forward::desc desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, memory::desc(src_dims, f32, Tag::any),
        memory::desc(wei_dims, f32, Tag::any), memory::desc(bias_dims, f32, Tag::x), memory::desc(dst_dims, f32, Tag::any),
        {s.stride, s.stride}, {s.pad, s.pad}, {s.pad, s.pad});
    dnnl::convolution_forward::primitive_desc pd(desc, eng);
    memory src = filled(eng, strm, pd.src_desc(), src_dims, Tag::nchw, 1);
    memory wei = filled(eng, strm, pd.weights_desc(), wei_dims, wei_plain, 2);
    memory bias = filled(eng, strm, pd.bias_desc(), bias_dims, Tag::x, 3);
    memory dst(pd.dst_desc(), eng);
    dnnl::convolution_forward conv(pd);
    timePrimitive(state, conv, strm,
                  {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_BIAS, bias}, {DNNL_ARG_DST, dst}},
                  s.flops());
  } catch (const dnnl::error& e) {
    state.SkipWithError((std::string("oneDNN: ") + e.what()).c_str());
  }
}

void dnnlMatMul(benchmark::State& state, const MatMulShape& s, int threads) {
  setThreads(threads);
  try {
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream strm(eng);
    const auto f32 = memory::data_type::f32;
    const bool batched = s.batch > 1;
    memory::dims a_dims = batched ? memory::dims{s.batch, s.m, s.k} : memory::dims{s.m, s.k};
    memory::dims b_dims = batched ? memory::dims{s.batch, s.k, s.n} : memory::dims{s.k, s.n};
    memory::dims c_dims = batched ? memory::dims{s.batch, s.m, s.n} : memory::dims{s.m, s.n};
    Tag plain = batched ? Tag::abc : Tag::ab;
    // Activations stay row-major (as the model passes them); constant weights may be
    // packed by oneDNN, as a compile step would do once.
    dnnl::matmul::desc desc(memory::desc(a_dims, f32, plain), memory::desc(b_dims, f32, batched ? plain : Tag::any),
                            memory::desc(c_dims, f32, plain));
    dnnl::matmul::primitive_desc pd(desc, eng);
    memory a = filled(eng, strm, pd.src_desc(), a_dims, plain, 1);
    memory b = filled(eng, strm, pd.weights_desc(), b_dims, plain, 2);
    memory c(pd.dst_desc(), eng);
    dnnl::matmul mm(pd);
    timePrimitive(state, mm, strm, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}}, s.flops());
  } catch (const dnnl::error& e) {
    state.SkipWithError((std::string("oneDNN: ") + e.what()).c_str());
  }
}

// ---- dynamic quantization ---------------------------------------------------------

// partita's DynamicQuantizeLinear kernel (dnnl_kernels.h) on n floats: the range, then
// the uint8 values; the encoder's activations are 128x256 and 128x1024.
void dynamicQuantize(benchmark::State& state, int64_t n, int threads) {
  setThreads(threads);
  const std::vector<float> x = randomFloats(n, 7);
  std::vector<uint8_t> y(size_t(n), 0);
  float scale = 0, zero = 0;
  int32_t zero_s32 = 0;
  for (auto _ : state) {
    partita::dnnl_backend::dynamicQuantize(x.data(), n, y.data(), &scale, &zero, &zero_s32);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * n * int64_t(sizeof(float) + 1));
}

// ---- a transformer encoder layer's own kernels (256 tokens, hidden 256, 4 heads of
// 64, feed-forward 1024: the dynamic-int8 encoder of make bench) ----------------

namespace dk = partita::dnnl_backend;

constexpr int64_t kTokens = 256, kHidden = 256, kHeads = 4, kHeadDim = 64, kFeedForward = 1024;

// A row kernel's float32 result and its dynamic quantization, bound into its arguments.
struct QuantizedResult {
  std::vector<float> y;
  std::vector<uint8_t> q;
  float scale = 0, zero = 0;
  int32_t zero_s32 = 0;
  explicit QuantizedResult(size_t n) : y(n), q(n) {}
  template <typename Args>
  void bind(Args& a) {
    a.y = y.data();
    a.q = q.data();
    a.scale = &scale;
    a.zero = &zero;
    a.zero_s32 = &zero_s32;
  }
};

// Residual + bias + layer norm + the next MatMul's dynamic quantization.
void encoderLayerNorm(benchmark::State& state, int threads) {
  setThreads(threads);
  const std::vector<float> x = randomFloats(kTokens * kHidden, 11), residual = randomFloats(kTokens * kHidden, 12),
                           bias = randomFloats(kHidden, 13), gamma = randomFloats(kHidden, 14),
                           beta = randomFloats(kHidden, 15);
  QuantizedResult out(x.size());
  dk::AddLayerNormArgs a;
  a.x = x.data();
  a.adds[0] = bias.data();
  a.add_is_row[0] = true;
  a.adds[1] = residual.data();
  a.n_adds = 2;
  a.gamma = gamma.data();
  a.beta = beta.data();
  a.epsilon = 1e-5f;
  a.rows = kTokens;
  a.cols = kHidden;
  out.bind(a);
  for (auto _ : state) {
    dk::addLayerNorm(a);
    benchmark::DoNotOptimize(out.q.data());
  }
}

// The attention scores' softmax, scaled by 1/8 as it reads them.
void encoderSoftmax(benchmark::State& state, int threads) {
  setThreads(threads);
  const std::vector<float> x = randomFloats(kHeads * kTokens * kTokens, 16);
  std::vector<float> y(x.size());
  for (auto _ : state) {
    dk::softmaxRows(x.data(), y.data(), kHeads * kTokens, kTokens, 0.125f);
    benchmark::DoNotOptimize(y.data());
  }
}

// Attention's context (probabilities times V, [4, 256, 256] x [4, 256, 64]) by the
// module's own float32 matmul loop (planFloatMatMul), as the encoder runs it; against
// oneDNN's: matmul/bert.context.4x256x256x64.
void encoderContext(benchmark::State& state, int threads) {
  setThreads(threads);
  dk::FloatMatMul p;
  p.batch = kHeads;
  p.m = kTokens;
  p.k = kTokens;
  p.n = kHeadDim;
  const std::vector<float> a = randomFloats(kHeads * kTokens * kTokens, 17), b = randomFloats(kHeads * kTokens * kHeadDim, 18);
  std::vector<float> c(size_t(kHeads * kTokens * kHeadDim));
  for (auto _ : state) {
    dk::floatMatMul(p, a.data(), b.data(), c.data());
    benchmark::DoNotOptimize(c.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * double(kHeads * kTokens * kTokens * kHeadDim) * double(state.iterations()),
                                                 benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

// The feed-forward block's bias + Gelu + the next MatMul's dynamic quantization.
void encoderBiasGelu(benchmark::State& state, int threads) {
  setThreads(threads);
  const std::vector<float> x = randomFloats(kTokens * kFeedForward, 17), bias = randomFloats(kFeedForward, 18);
  QuantizedResult out(x.size());
  dk::BiasGeluArgs a;
  a.x = x.data();
  a.bias = bias.data();
  a.rows = kTokens;
  a.cols = kFeedForward;
  out.bind(a);
  for (auto _ : state) {
    dk::biasGelu(a);
    benchmark::DoNotOptimize(out.q.data());
  }
}

// [tokens, heads, dim] viewed as [heads, tokens, dim] (element strides), the other way
// round with `back`.
dk::StridedCopy headsCopy(bool back, int64_t offset, int64_t row) {
  dk::StridedCopy c;
  c.rank = 3;
  c.inner = 2;
  c.dims[0] = back ? kTokens : kHeads;
  c.dims[1] = back ? kHeads : kTokens;
  c.dims[2] = kHeadDim;
  const int64_t heads_stride = back ? kTokens * kHeadDim : kHeadDim, tokens_stride = back ? kHeadDim : row;
  c.src_strides[0] = back ? tokens_stride : heads_stride;
  c.src_strides[1] = back ? heads_stride : tokens_stride;
  c.src_strides[2] = 1;
  c.dst_strides[0] = back ? kHeads * kHeadDim : kTokens * kHeadDim;
  c.dst_strides[1] = kHeadDim;
  c.dst_strides[2] = 1;
  c.src_offset = offset;
  return c;
}

// The QKV projection's bias Add and the Q, K and V head copies.
void encoderHeadCopies(benchmark::State& state, int threads) {
  setThreads(threads);
  const std::vector<float> x = randomFloats(kTokens * 3 * kHidden, 19), bias = randomFloats(3 * kHidden, 20);
  std::vector<float> out[3];
  dk::StridedCopy copies[3];
  for (int i = 0; i < 3; ++i) {
    out[i].resize(size_t(kTokens * kHidden));
    copies[i] = headsCopy(false, i * kHidden, 3 * kHidden);
    copies[i].dst = out[i].data();
  }
  for (auto _ : state) {
    dk::addRowCopy(x.data(), bias.data(), 3 * kHidden, copies, 3);
    benchmark::DoNotOptimize(out[2].data());
  }
}

// The context heads back to [tokens, hidden], quantized for the output projection.
void encoderContextQuantized(benchmark::State& state, int threads) {
  setThreads(threads);
  const std::vector<float> x = randomFloats(kTokens * kHidden, 21);
  QuantizedResult out(x.size());
  const dk::StridedCopy c = headsCopy(true, 0, kHidden);
  for (auto _ : state) {
    dk::addRowCopyQuantized(x.data(), nullptr, kHeadDim, c, out.q.data(), &out.scale, &out.zero, &out.zero_s32);
    benchmark::DoNotOptimize(out.q.data());
  }
}

// ---- upsampling -----------------------------------------------------------------

// `conv`: the yardstick Conv on the output-sized image instead of the ConvTranspose.
void partitaUpsample(benchmark::State& state, const UpsampleShape& s, int threads, bool conv) {
  const int64_t ih = conv ? s.h * s.k : s.h, iw = conv ? s.w * s.k : s.w;
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("upsample");
  auto value = [](onnx::ValueInfoProto* v, const char* name, std::vector<int64_t> dims) {
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
  };
  value(g->add_input(), "x", {1, s.c, ih, iw});
  value(g->add_output(), "y", {1, s.c, s.h * s.k, s.w * s.k});
  auto init = [&](const char* name, std::vector<int64_t> dims, unsigned seed) {
    onnx::TensorProto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    std::vector<float> v = randomFloats(numel(dims), seed);
    t->set_raw_data(v.data(), v.size() * sizeof(float));
  };
  init("w", {s.c, s.c, s.k, s.k}, 2);
  init("b", {s.c}, 3);
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(conv ? "Conv" : "ConvTranspose");
  n->set_name("up");
  for (const char* i : {"x", "w", "b"}) n->add_input(i);
  n->add_output("y");
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name("strides");
  a->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 2; ++i) a->add_ints(conv ? 1 : s.k);
  if (conv) {
    a = n->add_attribute();
    a->set_name("pads");
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t p : {int64_t(0), int64_t(0), s.k - 1, s.k - 1}) a->add_ints(p);
  }
  char path[] = "/tmp/partita_upsample_XXXXXX.onnx";
  int fd = mkstemps(path, 5);
  if (fd < 0) {
    state.SkipWithError("cannot create a temporary model file");
    return;
  }
  close(fd);
  {
    std::ofstream out(path, std::ios::binary);
    m.SerializeToOstream(&out);
  }
  try {
    partita::CompileOptions options;
    options.backends = {"dnnl", "host"};
    options.threads = threads;
    std::shared_ptr<const partita::Model> model = partita::compileOnnx(path, options);
    std::remove(path);
    partita::Session session(model);
    std::vector<float> x = randomFloats(s.c * ih * iw, 1);
    session.setInput("x", partita::TensorView{partita::DType::kFloat32, {1, s.c, ih, iw}, x.data()});
    session.run();
    for (auto _ : state) session.run();
  } catch (const std::exception& e) {
    std::remove(path);
    state.SkipWithError((std::string("partita: ") + e.what()).c_str());
    return;
  }
  state.counters["FLOPS"] =
      benchmark::Counter(conv ? s.convFlops() : s.deconvFlops(), benchmark::Counter::kIsIterationInvariantRate);
}

void dnnlDeconv(benchmark::State& state, const UpsampleShape& s, int threads) {
  setThreads(threads);
  try {
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream strm(eng);
    const auto f32 = memory::data_type::f32;
    memory::dims src_dims = {1, s.c, s.h, s.w}, dst_dims = {1, s.c, s.h * s.k, s.w * s.k};
    memory::dims wei_dims = {s.c, s.c, s.k, s.k}, bias_dims = {s.c};
    dnnl::deconvolution_forward::desc desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::deconvolution_direct,
        memory::desc(src_dims, f32, Tag::any), memory::desc(wei_dims, f32, Tag::any),
        memory::desc(bias_dims, f32, Tag::x), memory::desc(dst_dims, f32, Tag::any), {s.k, s.k}, {0, 0}, {0, 0});
    dnnl::deconvolution_forward::primitive_desc pd(desc, eng);
    memory src = filled(eng, strm, pd.src_desc(), src_dims, Tag::nchw, 1);
    memory wei = filled(eng, strm, pd.weights_desc(), wei_dims, Tag::iohw, 2);
    memory bias = filled(eng, strm, pd.bias_desc(), bias_dims, Tag::x, 3);
    memory dst(pd.dst_desc(), eng);
    dnnl::deconvolution_forward deconv(pd);
    timePrimitive(state, deconv, strm,
                  {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_BIAS, bias}, {DNNL_ARG_DST, dst}},
                  s.deconvFlops());
  } catch (const dnnl::error& e) {
    state.SkipWithError((std::string("oneDNN: ") + e.what()).c_str());
  }
}

void registerAll() {
  for (int threads : {1, 2}) {
    const std::string t = "/t" + std::to_string(threads);
    for (const ConvShape& s : kConvShapes) {
      benchmark::RegisterBenchmark(("conv/" + s.name + "/host" + t).c_str(),
                                   [s, threads](benchmark::State& st) { hostConv(st, s, threads); })
          ->UseRealTime();
      benchmark::RegisterBenchmark(("conv/" + s.name + "/onednn" + t).c_str(),
                                   [s, threads](benchmark::State& st) { dnnlConv(st, s, threads); })
          ->UseRealTime();
    }
    for (const UpsampleShape& s : kUpsampleShapes) {
      benchmark::RegisterBenchmark(("upsample/" + s.name + "/partita" + t).c_str(),
                                   [s, threads](benchmark::State& st) { partitaUpsample(st, s, threads, false); })
          ->UseRealTime();
      benchmark::RegisterBenchmark(("upsample/" + s.name + "/partita-conv" + t).c_str(),
                                   [s, threads](benchmark::State& st) { partitaUpsample(st, s, threads, true); })
          ->UseRealTime();
      benchmark::RegisterBenchmark(("upsample/" + s.name + "/onednn-deconv" + t).c_str(),
                                   [s, threads](benchmark::State& st) { dnnlDeconv(st, s, threads); })
          ->UseRealTime();
      // The yardstick: the convolution with the same channels and kernel, stride 1, on
      // the output-sized image (unpadded: one row and column fewer, FLOPS counted for it).
      const ConvShape conv{s.name, s.c, s.h * s.k, s.w * s.k, s.c, s.k, 1, 0, 1};
      benchmark::RegisterBenchmark(("upsample/" + s.name + "/onednn-conv" + t).c_str(),
                                   [conv, threads](benchmark::State& st) { dnnlConv(st, conv, threads); })
          ->UseRealTime();
    }
    for (int64_t n : {int64_t(128 * 256), int64_t(128 * 1024)})
      benchmark::RegisterBenchmark(("dynamic_quantize/" + std::to_string(n) + t).c_str(),
                                   [n, threads](benchmark::State& st) { dynamicQuantize(st, n, threads); })
          ->UseRealTime();
    const std::pair<const char*, void (*)(benchmark::State&, int)> encoder[] = {
        {"layer_norm", encoderLayerNorm},           {"softmax", encoderSoftmax},
        {"bias_gelu", encoderBiasGelu},             {"head_copies", encoderHeadCopies},
        {"context_quantized", encoderContextQuantized}, {"context", encoderContext}};
    for (const auto& [name, f] : encoder)
      benchmark::RegisterBenchmark((std::string("encoder/") + name + t).c_str(),
                                   [f = f, threads](benchmark::State& st) { f(st, threads); })
          ->UseRealTime();
    for (const MatMulShape& s : kMatMulShapes) {
      benchmark::RegisterBenchmark(("matmul/" + s.name + "/host" + t).c_str(),
                                   [s, threads](benchmark::State& st) { hostMatMul(st, s, threads); })
          ->UseRealTime();
      benchmark::RegisterBenchmark(("matmul/" + s.name + "/onednn" + t).c_str(),
                                   [s, threads](benchmark::State& st) { dnnlMatMul(st, s, threads); })
          ->UseRealTime();
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  registerAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
