// partita_bench_kernels: GFLOP/s of the host kernels that dominate the model set
// (Conv, MatMul) next to oneDNN on the same shapes and thread counts, so the report
// shows where the host backend stands against what this CPU can do.
//
// Host side: the registered OpDef, called the way the graph executor calls it
// (inferNode for the output type, then run on caller-allocated tensors).
// oneDNN side: the primitive with the layouts it prefers (format_tag::any; weights
// reordered once, outside the timing), i.e. the best case for the library.
//
// Benchmarks are named kind/shape/impl/tN and report a FLOPS counter (flop/s); run
// with --benchmark_format=json for bench/bench.py.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstdint>
#include <dnnl.hpp>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/op_registry.h"
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

// BERT-shaped encoder, sequence 128, hidden 256, 4 heads, FFN 1024.
const std::vector<MatMulShape> kMatMulShapes = {
    {"bert.qkv.128x256x768", 1, 128, 256, 768},
    {"bert.proj.128x256x256", 1, 128, 256, 256},
    {"bert.ffn1.128x256x1024", 1, 128, 256, 1024},
    {"bert.ffn2.128x1024x256", 1, 128, 1024, 256},
    {"bert.scores.4x128x64x128", 4, 128, 64, 128},
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
