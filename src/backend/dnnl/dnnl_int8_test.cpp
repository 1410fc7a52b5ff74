// The dnnl backend's int8 path: QLinearConv on oneDNN's int8 convolution (source and
// destination zero points, per-channel weight scales, int32 bias, s8 weights derived
// once), standalone QuantizeLinear / DequantizeLinear as reorders, MaxPool over uint8,
// and a static QDQ residual block (passes::fuseQuantizedOps, then the sum post-op)
// against the host's exact computation: within one step of the output scale.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <functional>
#include <map>
#include <tuple>
#include <unordered_map>
#include <omp.h>
#include <cmath>
#include <cstring>

#include "backend/dnnl/dnnl_backend.h"
#include "backend/dnnl/dnnl_kernels.h"
#include "backend/dnnl/dnnl_memory_desc.h"
#include "backend/dnnl/dnnl_module.h"
#include "backend/dnnl/dnnl_testing.h"
#include "api/module_kinds.h"
#include "ir/dtype.h"
#include "partita/error.h"
#include "passes/passes.h"
#include "runtime/profile.h"

namespace partita::dnnl_backend {
namespace {

using testing::Compiled;
using testing::GraphBuilder;

template <typename T>
ir::ValueId typedConstant(GraphBuilder& b, const std::string& name, ir::DType dtype, std::vector<int64_t> shape,
                          const std::vector<T>& data) {
  ir::ConstId c = b.g.constants.add(name, dtype, std::move(shape), Bytes::copyOf(data.data(), data.size() * sizeof(T)));
  return b.g.addConstantValue(name, c);
}

ir::ValueId scalarF(GraphBuilder& b, const std::string& name, float v) {
  return typedConstant<float>(b, name, ir::DType::kFloat32, {}, {v});
}
ir::ValueId scalarU8(GraphBuilder& b, const std::string& name, uint8_t v) {
  return typedConstant<uint8_t>(b, name, ir::DType::kUInt8, {}, {v});
}

// Deterministic int8 weights in [-127, 127] and int32 biases.
std::vector<int8_t> int8Weights(size_t n, uint64_t seed) {
  std::vector<float> r = testing::randomFloats(n, seed);
  std::vector<int8_t> w(n);
  for (size_t i = 0; i < n; ++i) w[i] = int8_t(std::lround(r[i] * 127));
  return w;
}

ir::AttributeMap axis0() {
  ir::AttributeMap a;
  a.setInt("axis", 0);
  return a;
}

struct QConvOperands {
  ir::ValueId w, w_scale, w_zero, bias;
};

QConvOperands qconvOperands(GraphBuilder& b, const std::string& p, int64_t co, int64_t ci, int64_t k, uint64_t seed) {
  std::vector<float> scales(static_cast<size_t>(co));
  for (int64_t c = 0; c < co; ++c) scales[size_t(c)] = 0.002f + 0.0005f * float(c % 5);
  std::vector<int32_t> bias(static_cast<size_t>(co));
  for (int64_t c = 0; c < co; ++c) bias[size_t(c)] = int32_t((c * 37) % 200) - 100;
  return {typedConstant<int8_t>(b, p + "w", ir::DType::kInt8, {co, ci, k, k}, int8Weights(size_t(co * ci * k * k), seed)),
          typedConstant<float>(b, p + "ws", ir::DType::kFloat32, {co}, scales),
          typedConstant<int8_t>(b, p + "wz", ir::DType::kInt8, {co}, std::vector<int8_t>(size_t(co), 0)),
          typedConstant<int32_t>(b, p + "b", ir::DType::kInt32, {co}, bias)};
}

// Fraction of elements of `a` more than `step` (plus rounding slack) away from `e`.
double offByMoreThanAStep(const ir::OwnedTensor& a, const ir::OwnedTensor& e, double step) {
  EXPECT_EQ(a.shape(), e.shape());
  int64_t bad = 0;
  for (int64_t i = 0; i < a.numel(); ++i)
    bad += std::fabs(double(a.as<float>()[i]) - double(e.as<float>()[i])) > step * 1.001;
  return double(bad) / double(std::max<int64_t>(a.numel(), 1));
}

// A convolution step on one of oneDNN's int8 kernels (VNNI here), none on `ref`.
bool hasInt8Convolution(const Compiled& c) {
  bool int8 = false;
  for (const auto& m : c.modules)
    if (auto* d = dynamic_cast<const DnnlModule*>(m.get()))
      for (uint32_t fn = 0; fn < d->numFunctions(); ++fn)
        for (const DnnlModule::StepInfo& s : d->steps(fn)) {
          EXPECT_NE(s.implementation.rfind("ref", 0), 0u) << s.label << ": " << s.implementation;
          if (s.kind == StepKind::kConvolution && (s.implementation.find("int8") != std::string::npos ||
                                                   s.implementation.find("vnni") != std::string::npos))
            int8 = true;
        }
  return int8;
}

size_t countOps(const ir::Graph& g, const std::string& op) {
  size_t n = 0;
  for (const ir::Node& node : g.nodes) n += node.op_type == op;
  return n;
}

// The one output of `dnnl` and of `host` on the same random inputs (`seed`) within
// one `step` of each other.
void expectOneOutputWithinAStep(const Compiled& host, const Compiled& dnnl, uint64_t seed, double step) {
  std::vector<ir::OwnedTensor> in = testing::randomInputs(*host.graph, seed);
  std::vector<ir::OwnedTensor> want = host.run(in), got = dnnl.run(in);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(offByMoreThanAStep(got[0], want[0], step), 0.0);
}

// Every step of every function of the compiled graph's dnnl module; none on `ref`.
std::vector<DnnlModule::StepInfo> allSteps(const Compiled& c) {
  std::vector<DnnlModule::StepInfo> steps;
  const auto& module = dynamic_cast<const DnnlModule&>(*c.modules.at(0));
  for (uint32_t fn = 0; fn < module.numFunctions(); ++fn)
    for (const DnnlModule::StepInfo& s : module.steps(fn)) {
      EXPECT_NE(s.implementation.rfind("ref", 0), 0u) << s.label << ": " << s.implementation;
      steps.push_back(s);
    }
  return steps;
}

// Matmul steps on oneDNN's int8 (VNNI) kernels.
// A DynamicQuantizeLinear node named "dql" over x: its y, scale and zero point.
std::tuple<ir::ValueId, ir::ValueId, ir::ValueId> dynamicQuantizeNode(GraphBuilder& b, ir::ValueId x) {
  ir::Node dql;
  dql.op_type = "DynamicQuantizeLinear";
  dql.opset = 13;
  dql.name = "dql";
  dql.inputs = {x};
  ir::ValueId y = b.g.addValue("y"), scale = b.g.addValue("scale"), zero = b.g.addValue("zero");
  dql.outputs = {y, scale, zero};
  b.g.addNode(dql);
  return {y, scale, zero};
}

// MatMul steps computing in int8: oneDNN's VNNI kernels or the module's own loop.
size_t int8MatMuls(const Compiled& c) {
  size_t n = 0;
  for (const DnnlModule::StepInfo& s : allSteps(c))
    n += s.kind == StepKind::kMatMul &&
         (s.implementation.find("vnni") != std::string::npos || s.implementation == "partita:int8_matmul");
  return n;
}

// Quantize, a QLinearConv (source zero point 128: an asymmetric input; destination
// zero point 3), a 2x2 MaxPool over its uint8 output, Dequantize.
GraphBuilder qconvThenMaxPool() {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 8, 12, 12});
  ir::ValueId xs = scalarF(b, "xs", 0.01f), xz = scalarU8(b, "xz", 128);
  ir::ValueId ys = scalarF(b, "ys", 0.02f), yz = scalarU8(b, "yz", 3);
  ir::ValueId xq = b.node("QuantizeLinear", {x, xs, xz}, {}, 13);
  QConvOperands w = qconvOperands(b, "c", 16, 8, 3, 5);
  ir::AttributeMap conv;
  conv.setInts("pads", {1, 1, 1, 1});
  ir::ValueId yq = b.node("QLinearConv", {xq, xs, xz, w.w, w.w_scale, w.w_zero, ys, yz, w.bias}, conv, 13);
  ir::AttributeMap pool;
  pool.setInts("kernel_shape", {2, 2});
  pool.setInts("strides", {2, 2});
  b.g.outputs.push_back(b.node("DequantizeLinear", {b.node("MaxPool", {yq}, pool, 13), ys, yz}, {}, 13));
  return b;
}

TEST(DnnlInt8, QLinearConvMaxPoolAndQuantizeMatchHostWithinAStep) {
  GraphBuilder b = qconvThenMaxPool();

  Compiled host = testing::compile(b.g, {"host"});
  Compiled dnnl = testing::compile(b.g, {"dnnl", "host"});
  EXPECT_EQ(testing::dnnlRegions(dnnl), 1u);
  EXPECT_EQ(testing::dnnlOps(dnnl).size(), 4u) << "Q, QLinearConv, MaxPool and DQ all on oneDNN";
  EXPECT_TRUE(hasInt8Convolution(dnnl));
  // The int8 weights are derived (s8, oneDNN's layout, with its compensation); the
  // int32 bias is borrowed.
  size_t derived = 0, borrowed = 0;
  for (const auto& u : dnnl.parts.modules.at(0).uses) {
    derived += u.kind == runtime::ConstUseKind::kDerive;
    borrowed += u.kind == runtime::ConstUseKind::kBorrow;
  }
  EXPECT_EQ(derived, 1u);
  EXPECT_EQ(borrowed, 1u);
  expectOneOutputWithinAStep(host, dnnl, 3, 0.02);
  // The convolution writes channels-last uint8, which the module's own max pool reads.
  size_t own_pools = 0;
  for (const DnnlModule::StepInfo& st : allSteps(dnnl)) own_pools += st.kind == StepKind::kInt8MaxPool;
  EXPECT_EQ(own_pools, 1u);
}

// A profiled run of an int8 region: each primitive's and own kernel's event gives its
// arguments' real element types (uint8 values printed as such, not as float32).
TEST(DnnlInt8, ProfileEventsGiveInt8ElementTypes) {
  GraphBuilder b = qconvThenMaxPool();
  Compiled c = testing::compile(b.g, {"dnnl", "host"});
  std::vector<ir::OwnedTensor> in = testing::randomInputs(*c.graph, 3);
  ir::OwnedTensor out(ir::DType::kFloat32, {1, 16, 6, 6});
  runtime::ProfileSink sink;
  c.modules.at(0)->runProfiled(0, {in.at(0).view()}, {out.view()}, sink);
  std::map<std::string, const ProfileEvent*> by_kind;
  for (const ProfileEvent& e : sink.events())
    if (e.cat == "primitive") by_kind[e.arg("kind")] = &e;
  ASSERT_EQ(by_kind.count("int8_max_pool"), 1u);
  const ProfileEvent& p = *by_kind["int8_max_pool"];
  EXPECT_EQ(p.arg("impl"), "partita:int8_max_pool");
  EXPECT_EQ(p.arg("src").rfind("u8[1,16,12,12]", 0), 0u) << p.arg("src");
  EXPECT_EQ(p.arg("dst").rfind("u8[1,16,6,6]", 0), 0u) << p.arg("dst");
  ASSERT_EQ(by_kind.count("convolution"), 1u);
  EXPECT_EQ(by_kind["convolution"]->arg("src").rfind("u8[1,8,12,12]", 0), 0u) << by_kind["convolution"]->arg("src");
  EXPECT_EQ(by_kind["convolution"]->arg("weights").rfind("s8[", 0), 0u) << by_kind["convolution"]->arg("weights");
  EXPECT_EQ(by_kind["convolution"]->arg("dst").rfind("u8[1,16,12,12]", 0), 0u) << by_kind["convolution"]->arg("dst");
}

// The own int8 max pool against the definition, for uint8 and int8, channel counts
// on each of its vector widths and on none, windows inside the image and clipped by
// pads at both ends (ceil_mode's extra end pad too), on 1 and 2 threads.
TEST(DnnlKernels, Int8MaxPoolFollowsItsDefinition) {
  struct Geometry {
    int64_t in_h, in_w, kernel, stride, pad_l, pad_r;
  };
  const Geometry geometries[] = {{8, 8, 2, 2, 0, 0}, {9, 7, 3, 2, 1, 1}, {6, 6, 3, 1, 1, 1}, {7, 7, 2, 2, 0, 1},
                                 {5, 9, 4, 3, 2, 0}};
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    for (bool is_signed : {false, true})
      for (int64_t c : {int64_t(3), int64_t(16), int64_t(32), int64_t(64), int64_t(80)})
        for (const Geometry& g : geometries) {
          MaxPoolWindow p;
          p.n = 2;
          p.c = c;
          p.in_h = g.in_h;
          p.in_w = g.in_w;
          p.kernel_h = p.kernel_w = g.kernel;
          p.stride_h = p.stride_w = g.stride;
          p.pad_h = p.pad_w = g.pad_l;
          p.out_h = (g.in_h + g.pad_l + g.pad_r - g.kernel) / g.stride + 1;
          p.out_w = (g.in_w + g.pad_l + g.pad_r - g.kernel) / g.stride + 1;
          std::vector<uint8_t> x(size_t(p.n * p.in_h * p.in_w * c));
          for (size_t i = 0; i < x.size(); ++i) x[i] = uint8_t((i * 2654435761u) >> 13);
          std::vector<uint8_t> y(size_t(p.n * p.out_h * p.out_w * c));
          int8MaxPool(x.data(), y.data(), is_signed, p);
          size_t wrong = 0;
          for (int64_t i = 0; i < p.n; ++i)
            for (int64_t oh = 0; oh < p.out_h; ++oh)
              for (int64_t ow = 0; ow < p.out_w; ++ow)
                for (int64_t j = 0; j < c; ++j) {
                  int best = -1000;
                  for (int64_t h = oh * g.stride - g.pad_l; h < oh * g.stride - g.pad_l + g.kernel; ++h)
                    for (int64_t w = ow * g.stride - g.pad_l; w < ow * g.stride - g.pad_l + g.kernel; ++w) {
                      if (h < 0 || h >= g.in_h || w < 0 || w >= g.in_w) continue;
                      const uint8_t v = x[size_t(((i * g.in_h + h) * g.in_w + w) * c + j)];
                      best = std::max(best, is_signed ? int(int8_t(v)) : int(v));
                    }
                  const uint8_t got = y[size_t(((i * p.out_h + oh) * p.out_w + ow) * c + j)];
                  wrong += (is_signed ? int(int8_t(got)) : int(got)) != best;
                }
          EXPECT_EQ(wrong, 0u) << threads << " threads, signed " << is_signed << ", c " << c << ", kernel "
                               << g.kernel << ", stride " << g.stride << ", pads " << g.pad_l << "/" << g.pad_r;
        }
  }
  omp_set_num_threads(2);
}

// The demo CNN's int8 classifier: a float convolution's channels-last output,
// Flatten, QuantizeLinear, Reshape to [M, K, 1, 1] and the QLinearConv that is a
// matrix product (fuseQuantizedOps' form of a quantized Gemm). The quantization reads
// the channels-last bytes in their own order (no reorder to row-major) and the int8
// weights' rows are permuted to match; the same values as the host's.
TEST(DnnlInt8, FlattenOfChannelsLastFoldsIntoInt8Weights) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {4, 8, 5, 6});
  ir::AttributeMap conv;
  conv.setInts("pads", {1, 1, 1, 1});
  ir::ValueId y = b.node("Conv", {x, b.constant("w", {16, 8, 3, 3}, testing::randomFloats(16 * 8 * 9, 4))}, conv, 13);
  ir::ValueId flat = b.node("Flatten", {b.node("Relu", {y}, {}, 13)}, {}, 13, "flat");
  const int64_t K = 16 * 5 * 6;
  ir::ValueId xs = scalarF(b, "xs", 0.05f), xz = scalarU8(b, "xz", 0);
  ir::ValueId ys = scalarF(b, "ys", 0.2f), yz = scalarU8(b, "yz", 5);
  ir::ValueId q = b.node("QuantizeLinear", {flat, xs, xz}, {}, 13);
  ir::ValueId as_1x1 = b.node("Reshape", {q, typedConstant<int64_t>(b, "to", ir::DType::kInt64, {4}, {4, K, 1, 1})}, {}, 13);
  QConvOperands w = qconvOperands(b, "fc", 10, K, 1, 6);
  ir::ValueId fc = b.node("QLinearConv", {as_1x1, xs, xz, w.w, w.w_scale, w.w_zero, ys, yz, w.bias}, {}, 13, "fc");
  b.g.outputs.push_back(b.node("DequantizeLinear", {fc, ys, yz}, {}, 13));
  Compiled host = testing::compile(b.g, {"host"});
  Compiled dnnl = testing::compile(b.g, {"dnnl", "host"});
  EXPECT_EQ(int8MatMuls(dnnl), 1u);
  for (const DnnlModule::StepInfo& st : allSteps(dnnl))
    EXPECT_EQ(st.label.rfind("to row-major", 0), std::string::npos) << st.label;
  expectOneOutputWithinAStep(host, dnnl, 9, 0.2);
}

// A float convolution's channels-last output, flattened and quantized for an int8
// layer (the demo CNN before fc1): the reorder to row-major for the Flatten and the
// QuantizeLinear's reorder are one step, from channels-last float32 straight to
// row-major uint8 (mergeReorderPairs), with the same values.
TEST(DnnlInt8, FlattenThenQuantizeIsOneReorder) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {2, 16, 6, 6});
  ir::AttributeMap conv;
  conv.setInts("pads", {1, 1, 1, 1});
  ir::ValueId y = b.node("Conv", {x, b.constant("w", {16, 16, 3, 3}, testing::randomFloats(16 * 16 * 9, 4)),
                                 b.constant("cb", {16}, testing::randomFloats(16, 5))}, conv, 13);
  ir::ValueId flat = b.node("Flatten", {y}, {}, 13);
  ir::ValueId s = scalarF(b, "s", 0.05f), z = scalarU8(b, "z", 128);
  b.g.outputs.push_back(b.node("QuantizeLinear", {flat, s, z}, {}, 13));

  Compiled host = testing::compile(b.g, {"host"});
  Compiled dnnl = testing::compile(b.g, {"dnnl", "host"});
  EXPECT_EQ(testing::dnnlOps(dnnl).size(), 3u);
  size_t reorders = 0, merged = 0;
  for (const DnnlModule::StepInfo& st : allSteps(dnnl)) {
    if (st.kind != StepKind::kReorder) continue;
    ++reorders;
    merged += st.label.rfind("to row-major", 0) == 0 && st.label.find("QuantizeLinear") != std::string::npos;
  }
  EXPECT_EQ(merged, 1u);
  EXPECT_EQ(reorders, 2u) << "the input's to channels-last, and the merged one";
  std::vector<ir::OwnedTensor> in = testing::randomInputs(*host.graph, 8);
  std::vector<ir::OwnedTensor> want = host.run(in), got = dnnl.run(in);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].shape(), want[0].shape());
  ASSERT_EQ(got[0].dtype(), ir::DType::kUInt8);
  int64_t off = 0, distinct = 0;  // the float convolutions may round a value either way
  for (int64_t i = 0; i < got[0].numel(); ++i) {
    off += std::abs(int(got[0].as<uint8_t>()[i]) - int(want[0].as<uint8_t>()[i])) > 1;
    distinct += got[0].as<uint8_t>()[i] != got[0].as<uint8_t>()[0];
  }
  EXPECT_EQ(off, 0);
  EXPECT_GT(distinct, 0) << "all elements equal: the test would not see a misplaced element";
}

// relu(conv2(relu(conv1(x))) + x) written as a static quantizer writes it (every
// activation through a QuantizeLinear -> DequantizeLinear pair, int8 weights behind
// DequantizeLinear): fused into QLinearConvs, the residual into the second one. The
// fused step skips the roundings of y and of the sum (docs/precision.md).
TEST(DnnlInt8, QdqResidualBlockFusesIntoInt8Convolutions) {
  GraphBuilder b;
  const int64_t C = 16;
  ir::ValueId x = b.input("x", {1, C, 10, 10});
  auto qdq = [&](ir::ValueId v, const std::string& p, float s, uint8_t z) {
    ir::ValueId sc = scalarF(b, p + "_s", s), zp = scalarU8(b, p + "_z", z);
    return b.node("DequantizeLinear", {b.node("QuantizeLinear", {v, sc, zp}, {}, 13, p + "_q"), sc, zp}, {}, 13,
                  p + "_dq");
  };
  auto conv = [&](ir::ValueId in, const std::string& p, float x_scale, uint64_t seed) {
    QConvOperands w = qconvOperands(b, p, C, C, 3, seed);
    ir::ValueId wf = b.node("DequantizeLinear", {w.w, w.w_scale, w.w_zero}, axis0(), 13);
    std::vector<float> bias_scale(static_cast<size_t>(C));
    const float* ws = reinterpret_cast<const float*>(b.g.constants.get(b.g.value(w.w_scale).constant).bytes.data);
    for (int64_t c = 0; c < C; ++c) bias_scale[size_t(c)] = x_scale * ws[c];
    ir::ValueId bs = typedConstant<float>(b, p + "bs", ir::DType::kFloat32, {C}, bias_scale);
    ir::ValueId bf = b.node("DequantizeLinear", {w.bias, bs}, axis0(), 13);
    ir::AttributeMap a;
    a.setInts("pads", {1, 1, 1, 1});
    return b.node("Conv", {in, wf, bf}, a, 13, p);
  };
  ir::ValueId xd = qdq(x, "x", 0.01f, 128);
  ir::ValueId h = qdq(b.node("Relu", {conv(xd, "c1", 0.01f, 1)}, {}, 13), "h", 0.01f, 0);
  ir::ValueId y = qdq(conv(h, "c2", 0.01f, 2), "y", 0.02f, 120);
  ir::ValueId sum = qdq(b.node("Add", {y, xd}, {}, 13), "sum", 0.03f, 110);
  ir::ValueId out = qdq(b.node("Relu", {sum}, {}, 13), "out", 0.015f, 0);
  b.g.outputs.push_back(out);

  Compiled host = testing::compile(b.g, {"host"});
  ir::Graph fused = b.g;
  EXPECT_EQ(passes::fuseQuantizedOps(fused), 2u);
  EXPECT_EQ(countOps(fused, "QLinearConv"), 2u);
  Compiled dnnl = testing::compile(fused, {"dnnl", "host"});
  EXPECT_EQ(testing::dnnlRegions(dnnl), 1u);
  EXPECT_TRUE(hasInt8Convolution(dnnl));
  // The residual tail (dequantizations, Add, its pair, Relu, quantization) is one
  // int8 binary step.
  bool residual = false;
  for (const DnnlModule::StepInfo& s : dynamic_cast<const DnnlModule&>(*dnnl.modules.at(0)).steps(0))
    if (s.kind == StepKind::kBinary && s.label.find("Add") != std::string::npos) residual = true;
  EXPECT_TRUE(residual);
  std::vector<ir::OwnedTensor> in = testing::randomInputs(*host.graph, 11);
  std::vector<ir::OwnedTensor> want = host.run(in), got = dnnl.run(in);
  ASSERT_EQ(got.size(), 1u);
  // The residual step skips the sum's rounding (step 0.03): at most half of it on top
  // of the output's one step.
  EXPECT_EQ(offByMoreThanAStep(got[0], want[0], 0.015 + 0.015), 0.0);
  EXPECT_LE(offByMoreThanAStep(got[0], want[0], 0.015), 0.05);
}

// A QLinearConv that is a matrix product (1x1 kernel over [M, K, 1, 1], what
// fuseQuantizedOps makes of a quantized Gemm) runs on oneDNN's int8 matmul; one whose
// int8 output only a DequantizeLinear reads writes float32 with the rounding as
// post-ops (no int8 buffer, no reorder). Both within one output step of the host's
// exact computation.
TEST(DnnlInt8, QuantizedGemmAsMatMulAndDequantizedConvOutput) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {8, 40, 1, 1});
  ir::ValueId xs = scalarF(b, "xs", 0.02f), xz = scalarU8(b, "xz", 100);
  ir::ValueId ys = scalarF(b, "ys", 0.05f), yz = scalarU8(b, "yz", 7);
  QConvOperands w = qconvOperands(b, "g", 24, 40, 1, 3);
  ir::ValueId gq = b.node("QLinearConv", {b.node("QuantizeLinear", {x, xs, xz}, {}, 13), xs, xz, w.w, w.w_scale,
                                          w.w_zero, ys, yz, w.bias}, {}, 13, "gemm");
  b.g.outputs.push_back(b.node("DequantizeLinear", {gq, ys, yz}, {}, 13, "gemm_dq"));
  ir::ValueId x2 = b.input("x2", {2, 8, 6, 6});
  QConvOperands w2 = qconvOperands(b, "c", 16, 8, 3, 4);
  ir::AttributeMap pads;
  pads.setInts("pads", {1, 1, 1, 1});
  ir::ValueId cq = b.node("QLinearConv", {b.node("QuantizeLinear", {x2, xs, xz}, {}, 13), xs, xz, w2.w, w2.w_scale,
                                          w2.w_zero, ys, yz, w2.bias}, pads, 13, "conv");
  b.g.outputs.push_back(b.node("DequantizeLinear", {cq, ys, yz}, {}, 13, "conv_dq"));

  Compiled host = testing::compile(b.g, {"host"});
  Compiled dnnl = testing::compile(b.g, {"dnnl", "host"});
  size_t matmuls = 0, convs = 0;
  for (const DnnlModule::StepInfo& s : allSteps(dnnl)) {
    EXPECT_FALSE(s.kind == StepKind::kReorder && s.label.rfind("conv_dq", 0) == 0)
        << "the DequantizeLinear is the convolution's post-ops";
    if (s.kind == StepKind::kConvolution) {
      EXPECT_EQ(s.post_ops, 3u) << "round, clip, scale";
    }
    matmuls += s.kind == StepKind::kMatMul && s.implementation.find("vnni") != std::string::npos;
    convs += s.kind == StepKind::kConvolution;
  }
  EXPECT_EQ(matmuls, 1u);
  EXPECT_EQ(convs, 1u);
  std::vector<ir::OwnedTensor> in = testing::randomInputs(*host.graph, 21);
  std::vector<ir::OwnedTensor> want = host.run(in), got = dnnl.run(in);
  ASSERT_EQ(got.size(), 2u);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(offByMoreThanAStep(got[i], want[i], 0.05), 0.0) << "output " << i;
}

// QLinearMatMul (rows of a [2, 5, 32] uint8 activation, per-column weight scales) and
// a standalone MatMulInteger (int32 output) over constant int8 weights run on
// oneDNN's int8 matmul: within one output step of the host's exact QLinearMatMul, and
// the MatMulInteger's int32 values exactly the host's.
TEST(DnnlInt8, QLinearMatMulAndMatMulIntegerOnInt8MatMul) {
  GraphBuilder b;
  const int64_t K = 32, N = 24;
  ir::ValueId x = b.input("x", {2, 5, K});
  ir::ValueId xs = scalarF(b, "xs", 0.02f), xz = scalarU8(b, "xz", 3);
  ir::ValueId ys = scalarF(b, "ys", 0.1f), yz = scalarU8(b, "yz", 9);
  std::vector<float> w_scales(static_cast<size_t>(N));
  for (int64_t c = 0; c < N; ++c) w_scales[size_t(c)] = 0.003f + 0.0004f * float(c % 7);
  ir::ValueId w = typedConstant<int8_t>(b, "w", ir::DType::kInt8, {K, N}, int8Weights(size_t(K * N), 8));
  ir::ValueId ws = typedConstant<float>(b, "ws", ir::DType::kFloat32, {N}, w_scales);
  ir::ValueId wz = typedConstant<int8_t>(b, "wz", ir::DType::kInt8, {N}, std::vector<int8_t>(size_t(N), 0));
  ir::ValueId xq = b.node("QuantizeLinear", {x, xs, xz}, {}, 13);
  ir::ValueId yq = b.node("QLinearMatMul", {xq, xs, xz, w, ws, wz, ys, yz}, {}, 13, "qmm");
  b.g.outputs.push_back(b.node("DequantizeLinear", {yq, ys, yz}, {}, 13));
  ir::ValueId x2 = b.input("x2", {6, K});
  ir::ValueId x2q = b.node("QuantizeLinear", {x2, xs, scalarU8(b, "x2z", 7)}, {}, 13);
  ir::ValueId w2 = typedConstant<int8_t>(b, "w2", ir::DType::kInt8, {K, 16}, int8Weights(size_t(K * 16), 9));
  b.g.outputs.push_back(b.node("MatMulInteger", {x2q, w2, scalarU8(b, "x2z_mm", 7)}, {}, 13, "mmi"));

  Compiled host = testing::compile(b.g, {"host"});
  Compiled dnnl = testing::compile(b.g, {"dnnl", "host"});
  std::vector<std::string> ops = testing::dnnlOps(dnnl);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "QLinearMatMul"), 1);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "MatMulInteger"), 1);
  EXPECT_EQ(int8MatMuls(dnnl), 2u);
  std::vector<ir::OwnedTensor> in = testing::randomInputs(*host.graph, 31);
  std::vector<ir::OwnedTensor> want = host.run(in), got = dnnl.run(in);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(offByMoreThanAStep(got[0], want[0], 0.1), 0.0);
  ASSERT_EQ(got[1].nbytes(), want[1].nbytes());
  EXPECT_EQ(std::memcmp(got[1].data(), want[1].data(), want[1].nbytes()), 0) << "int32 products";
}

// A quantized Linear layer of rank 3 as a static quantizer writes it: DQ(x) ->
// MatMul(DQ(int8 w [K, N], per-column scales)) -> Add(bias) -> Q. fuseQuantizedOps
// makes it a 1x1 QLinearConv over x's rows (weights transposed once), which oneDNN
// runs as an int8 matmul; within one output step of the float QDQ graph on the host
// (plus the bias's rounding to int32: far below a step).
TEST(DnnlInt8, QdqMatMulWithBiasBecomesInt8MatMul) {
  GraphBuilder b;
  const int64_t K = 32, N = 24;
  ir::ValueId x = b.input("x", {2, 5, K});
  ir::ValueId xs = scalarF(b, "xs", 0.02f), xz = scalarU8(b, "xz", 128);
  ir::ValueId ys = scalarF(b, "ys", 0.05f), yz = scalarU8(b, "yz", 120);
  ir::ValueId xd = b.node("DequantizeLinear", {b.node("QuantizeLinear", {x, xs, xz}, {}, 13), xs, xz}, {}, 13);
  std::vector<float> w_scales(static_cast<size_t>(N));
  for (int64_t c = 0; c < N; ++c) w_scales[size_t(c)] = 0.004f + 0.0003f * float(c % 5);
  ir::AttributeMap columns;
  columns.setInt("axis", 1);
  ir::ValueId wd = b.node("DequantizeLinear",
                          {typedConstant<int8_t>(b, "w", ir::DType::kInt8, {K, N}, int8Weights(size_t(K * N), 12)),
                           typedConstant<float>(b, "ws", ir::DType::kFloat32, {N}, w_scales),
                           typedConstant<int8_t>(b, "wz", ir::DType::kInt8, {N}, std::vector<int8_t>(size_t(N), 0))},
                          columns, 13);
  ir::ValueId h = b.node("Add", {b.node("MatMul", {xd, wd}, {}, 13, "fc"), b.constant("bias", {N}, testing::randomFloats(size_t(N), 3))}, {}, 13);
  b.g.outputs.push_back(b.node("DequantizeLinear", {b.node("QuantizeLinear", {h, ys, yz}, {}, 13), ys, yz}, {}, 13));

  Compiled host = testing::compile(b.g, {"host"});
  ir::Graph fused = b.g;
  EXPECT_EQ(passes::fuseQuantizedOps(fused), 1u);
  EXPECT_EQ(countOps(fused, "MatMul"), 0u);
  Compiled dnnl = testing::compile(fused, {"dnnl", "host"});
  EXPECT_EQ(int8MatMuls(dnnl), 1u);
  expectOneOutputWithinAStep(host, dnnl, 41, 0.05);
}

// DynamicQuantizeLinear with DequantizeLinear(y, 1, zero point) (what
// passes::lowerIntegerCompute leaves before a float Conv/MatMul) on oneDNN steps: the
// centred integers and the scale are those of the host, bit for bit.
TEST(DnnlInt8, DynamicQuantizeWithItsDequantizeMatchesHost) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {2, 3, 5, 7});
  ir::Node dql;
  dql.op_type = "DynamicQuantizeLinear";
  dql.opset = 13;
  dql.name = "dql";
  dql.inputs = {b.node("Relu", {x}, {}, 13)};  // a computed input, non-negative (min 0)
  ir::ValueId y = b.g.addValue("y"), scale = b.g.addValue("scale"), zero = b.g.addValue("zero");
  dql.outputs = {y, scale, zero};
  b.g.addNode(dql);
  ir::Node dql2 = dql;  // and one with a negative minimum
  dql2.name = "dql2";
  ir::ValueId y2 = b.g.addValue("y2"), scale2 = b.g.addValue("scale2"), zero2 = b.g.addValue("zero2");
  dql2.inputs = {b.node("Add", {x, b.constant("shift", {}, {0.25f})}, {}, 13)};
  dql2.outputs = {y2, scale2, zero2};
  b.g.addNode(dql2);
  ir::ValueId one = b.constant("one", {}, {1.0f});
  b.g.outputs.push_back(b.node("DequantizeLinear", {y, one, zero}, {}, 13));
  b.g.outputs.push_back(b.node("Mul", {scale, b.constant("two", {}, {2.0f})}, {}, 13));
  b.g.outputs.push_back(b.node("DequantizeLinear", {y2, one, zero2}, {}, 13));
  Compiled host = testing::compile(b.g, {"host"});
  Compiled dnnl = testing::compile(b.g, {"dnnl", "host"});
  std::vector<std::string> ops = testing::dnnlOps(dnnl);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "DynamicQuantizeLinear"), 2);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "DequantizeLinear"), 2);
  // Each quantization is one step of the module's own kernel.
  size_t own = 0;
  for (const DnnlModule::StepInfo& st : allSteps(dnnl)) {
    EXPECT_NE(st.kind, StepKind::kReduction) << st.label;
    if (st.kind == StepKind::kDynamicQuantize) {
      ++own;
      EXPECT_EQ(st.implementation, "partita:dynamic_quantize");
    }
  }
  EXPECT_EQ(own, 2u);
  std::vector<ir::OwnedTensor> in = testing::randomInputs(*host.graph, 5);
  std::vector<ir::OwnedTensor> want = host.run(in), got = dnnl.run(in);
  ASSERT_EQ(got.size(), 3u);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_LE(testing::closeness(got[i], want[i], 0, 0), 1.0) << "output " << i;
}

// The kernel against ONNX's definition computed in plain scalar code: lengths that
// are and are not a multiple of the vector width, ranges of one sign, values exactly
// halfway between two steps (ties to even), an all-zero input.
TEST(DnnlInt8, DynamicQuantizeKernelFollowsOnnx) {
  auto reference = [](const std::vector<float>& x, std::vector<uint8_t>& y, float& scale, float& zero) {
    float mx = 0, mn = 0;  // ONNX: the range includes 0
    for (float v : x) {
      mx = std::max(mx, v);
      mn = std::min(mn, v);
    }
    scale = std::max((mx - mn) / 255.0f, FLT_MIN);
    zero = std::nearbyint(std::min(std::max(-mn / scale, 0.0f), 255.0f));
    y.resize(x.size());
    for (size_t i = 0; i < x.size(); ++i)
      y[i] = uint8_t(std::min(std::max(std::nearbyint(x[i] / scale) + zero, 0.0f), 255.0f));
  };
  std::vector<std::vector<float>> cases;
  for (size_t n : {1, 7, 16, 33, 1000, 70001}) {
    std::vector<float> r = testing::randomFloats(n, n);
    cases.push_back(r);
    for (float& v : r) v = std::fabs(v) * 3;  // non-negative
    cases.push_back(r);
    for (float& v : r) v = -v;  // non-positive
    cases.push_back(r);
  }
  cases.push_back(std::vector<float>(40, 0.0f));
  std::vector<float> ties;  // range [-1, 1.55]: scale 0.01, x / scale = k + 0.5 for many k
  for (int k = -100; k <= 155; ++k) ties.push_back((float(k) + 0.5f) * 0.01f);
  ties.push_back(-1.0f);
  ties.push_back(1.55f);
  cases.push_back(ties);
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    for (const std::vector<float>& x : cases) {
      std::vector<uint8_t> want, got(x.size());
      float want_scale = 0, want_zero = 0, scale = 0, zero = 0;
      int32_t zero_s32 = -1;
      reference(x, want, want_scale, want_zero);
      dynamicQuantize(x.data(), int64_t(x.size()), got.data(), &scale, &zero, &zero_s32);
      EXPECT_EQ(scale, want_scale) << x.size() << " elements";
      EXPECT_EQ(zero, want_zero) << x.size() << " elements";
      EXPECT_EQ(zero_s32, int32_t(want_zero));
      EXPECT_EQ(got, want) << x.size() << " elements, " << threads << " threads";
    }
  }
  omp_set_num_threads(2);
  // NaN (ONNX leaves it undefined): skipped by the range, 0 in y; the rest as without it.
  std::vector<float> with_nan = {1.0f, NAN, -1.0f, 0.5f};
  std::vector<uint8_t> got(4);
  float scale = 0, zero = 0;
  int32_t zero_s32 = 0;
  dynamicQuantize(with_nan.data(), 4, got.data(), &scale, &zero, &zero_s32);
  std::vector<float> without = {1.0f, -1.0f, 0.5f};
  std::vector<uint8_t> want(3);
  float want_scale = 0, want_zero = 0;
  dynamicQuantize(without.data(), 3, want.data(), &want_scale, &want_zero, &zero_s32);
  EXPECT_EQ(scale, want_scale);
  EXPECT_EQ(zero, want_zero);
  EXPECT_EQ(got[1], 0);
  EXPECT_EQ(got[0], want[0]);
  EXPECT_EQ(got[2], want[1]);
  EXPECT_EQ(got[3], want[2]);
  // In the vector loop too: a NaN in a lane after its smallest value leaves that value
  // the minimum (a NaN accumulator would have lost it).
  std::vector<float> lanes(256, 0.5f);
  lanes[0] = -5.0f;
  lanes[16] = NAN;
  lanes[64 + 3] = NAN;
  std::vector<uint8_t> lane_q(lanes.size());
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    dynamicQuantize(lanes.data(), int64_t(lanes.size()), lane_q.data(), &scale, &zero, &zero_s32);
    EXPECT_FLOAT_EQ(scale, 5.5f / 255.0f) << threads << " threads";
    EXPECT_EQ(lane_q[16], 0);
  }
}

// The own swish kernel against x * sigmoid(x) in double: a few ulp over the float
// range (both tails, around 0, the clamp at -104 where e^x underflows), any length, 1
// and 2 threads, in place; 0 gives 0 (padding of blocked layouts stays zero).
TEST(DnnlKernels, SwishIsWithinAFewUlp) {
  std::vector<float> x = testing::randomFloats(70001, 11, -20.0f, 20.0f);
  for (float v : {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-6f, -1e-6f, 88.0f, -88.0f, 103.0f, -103.0f, 105.0f, -105.0f,
                  200.0f, -200.0f, 3.4e38f, -3.4e38f})
    x.push_back(v);
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    for (size_t n : {size_t(1), size_t(15), size_t(17), x.size()}) {
      std::vector<float> y(x.begin(), x.begin() + ptrdiff_t(n));
      swish(y.data(), y.data(), int64_t(n));  // in place
      double worst = 0;
      for (size_t i = 0; i < n; ++i) {
        const double e = double(x[i]) / (1.0 + std::exp(-double(x[i])));
        const double ulp = std::max(std::fabs(e), 1e-37) * std::pow(2.0, -23);
        worst = std::max(worst, std::fabs(double(y[i]) - e) / ulp);
        if (x[i] == 0.0f) {
          EXPECT_EQ(y[i], 0.0f);
        }
      }
      EXPECT_LE(worst, 4.0) << n << " elements, " << threads << " threads";
    }
  }
  omp_set_num_threads(2);
}

// softmaxRows against the definition in double: rows of several lengths (vector bodies
// and tails), large and tiny values, -inf entries (weights 0), rows with a NaN or +inf
// or only -inf (all NaN), such a row between two whose divisions are pending (the
// kernel divides row r - 1 while it exponentiates row r), in place and not, on one and
// two threads, of x and of x times a scale (rounded once, as the matmul post-op it
// replaces rounded; a negative scale too).
TEST(DnnlKernels, SoftmaxRowsFollowsItsDefinition) {
  for (int64_t cols : {1, 5, 16, 70, 256}) {
    const int64_t rows = 9;
    std::vector<float> x = testing::randomFloats(size_t(rows * cols), uint64_t(cols), -30.0f, 30.0f);
    x[size_t(cols) * 1] = -INFINITY;              // row 1: one -inf
    if (cols > 1) x[size_t(cols) * 2 + 1] = 1e30f;  // row 2: one huge value
    x[size_t(cols) * 3] = NAN;                    // row 3: NaN
    x[size_t(cols) * 4 + size_t(cols - 1)] = INFINITY;  // row 4: +inf
    for (int64_t c = 0; c < cols; ++c) x[size_t(cols * 5 + c)] = -1e-30f * float(c);  // row 5: tiny
    x[size_t(cols) * 7] = NAN;  // row 7: NaN, after a row whose division is pending
    for (float scale : {1.0f, 0.125f, 3.0f, -0.5f})
    for (const bool in_place : {true, false})
    for (int threads : {1, 2}) {
      omp_set_num_threads(threads);
      std::vector<float> y = x, z = x;
      for (float& v : z) v *= scale;
      if (in_place) {
        softmaxRows(y.data(), y.data(), rows, cols, scale);
      } else {
        y.assign(x.size(), -7.0f);
        softmaxRows(x.data(), y.data(), rows, cols, scale);
      }
      for (int64_t r = 0; r < rows; ++r) {
        const float* xr = z.data() + r * cols;
        const float* yr = y.data() + r * cols;
        double mx = -INFINITY, sum = 0;
        bool nan = false;
        for (int64_t c = 0; c < cols; ++c) {
          nan |= std::isnan(xr[c]) || xr[c] == INFINITY;
          mx = std::max(mx, double(xr[c]));
        }
        nan |= mx == -INFINITY;  // all -inf: e^(-inf - -inf) is NaN
        for (int64_t c = 0; c < cols; ++c) sum += std::exp(double(xr[c]) - mx);
        for (int64_t c = 0; c < cols; ++c) {
          if (nan) {
            EXPECT_TRUE(std::isnan(yr[c])) << "row " << r << " of " << cols;
            continue;
          }
          const double e = std::exp(double(xr[c]) - mx) / sum;
          // (A scaled row: 5e-7, its rows' exponents spread wider than the unscaled ones'.)
          EXPECT_NEAR(yr[c], e, (scale == 1.0f ? 4e-7 : 5e-7) * std::max(e, 1e-3))
              << "row " << r << " col " << c << " of " << cols << " scale " << scale << (in_place ? " in place" : "");
          if (xr[c] == -INFINITY) {
            EXPECT_EQ(yr[c], 0.0f);
          }
        }
      }
    }
  }
  omp_set_num_threads(2);
}

// Loads the dnnl module of `c` with its steps passed through `edit` (true when it
// changed one), written back as a blob with its embedded bytes: the load error's
// text, or "loaded".
std::string loadWithEditedSteps(const Compiled& c, const std::function<bool(Step&)>& edit) {
  const backend::ModuleImage& image = c.parts.modules.at(0);
  Program p = readProgram(image.blob.data(), image.blob.size());
  bool found = false;
  for (Step& st : p.functions[0].steps) found |= edit(st);
  EXPECT_TRUE(found) << "no step was edited";
  p.embedded.assign(image.blob.begin() + ptrdiff_t(p.embedded_offset),
                    image.blob.begin() + ptrdiff_t(p.embedded_offset + p.embedded_size));
  const std::vector<std::byte> blob = writeProgram(p);
  runtime::ModuleLoadContext ctx{Bytes::copyOf(blob.data(), blob.size()), c.store.get(), image.uses, 2, {}};
  try {
    api::builtinModuleKinds().load("dnnl", ctx);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArtifact) << e.what();
    return e.what();
  }
  return "loaded";
}

// The same with `edit` applied to every step of `kind`.
std::string loadWithEditedStepsOf(const Compiled& c, StepKind kind, const std::function<void(Step&)>& edit) {
  return loadWithEditedSteps(c, [&](Step& st) { return st.kind == kind && (edit(st), true); });
}

// A blob whose dynamic quantization step lacks an argument, or has one of the wrong
// element type, is refused at load with the step named.
TEST(DnnlInt8, MalformedDynamicQuantizeStepIsRefused) {
  GraphBuilder b;
  ir::Node dql;
  dql.op_type = "DynamicQuantizeLinear";
  dql.opset = 13;
  dql.name = "dql";
  dql.inputs = {b.node("Relu", {b.input("x", {4, 16})}, {}, 13)};
  ir::ValueId y = b.g.addValue("y"), scale = b.g.addValue("scale"), zero = b.g.addValue("zero");
  dql.outputs = {y, scale, zero};
  b.g.addNode(dql);
  b.g.outputs.push_back(b.node("DequantizeLinear", {y, b.constant("one", {}, {1.0f}), zero}, {}, 13));
  Compiled c = testing::compile(b.g, {"dnnl", "host"});
  auto loadEdited = [&](const std::function<void(Step&)>& edit) {
    return loadWithEditedStepsOf(c, StepKind::kDynamicQuantize, edit);
  };
  EXPECT_NE(loadEdited([](Step& st) { st.args.pop_back(); }).find("no int32 zero point buffer"), std::string::npos);
  EXPECT_NE(loadEdited([](Step& st) {
              Arg* d = st.find(DNNL_ARG_DST);
              d->md = withDataType(d->md, dnnl::memory::data_type::s8);
            }).find("destination is not a dense row-major buffer of the expected type"),
            std::string::npos);
  EXPECT_NE(loadEdited([](Step& st) { st.post_ops.push_back(PostOp{}); }).find("post-ops"), std::string::npos);
}

// The same for a swish step: a destination that is not the source's descriptor, or an
// argument too many, is refused when the blob is read.
// A Softmax along the last dim is the module's own step, equal to the host's; a blob
// whose softmax_rows step is not one dense float32 descriptor is refused by name.
TEST(DnnlKernels, SoftmaxAlongTheLastDimIsAnOwnStep) {
  GraphBuilder b;
  ir::AttributeMap last;
  last.setInt("axis", -1);
  b.g.outputs.push_back(b.node("Softmax", {b.node("Relu", {b.input("x", {3, 5, 70})}, {}, 13)}, last, 13));
  Compiled c = testing::compile(b.g, {"dnnl", "host"});
  const backend::ModuleImage& image = c.parts.modules.at(0);
  const Program p = readProgram(image.blob.data(), image.blob.size());
  size_t own = 0;
  for (const Step& st : p.functions.at(0).steps) own += st.kind == StepKind::kSoftmaxRows;
  EXPECT_EQ(own, 1u);
  for (const Step& st : p.functions.at(0).steps)
    if (st.kind == StepKind::kSoftmaxRows) {  // in place over the Relu's result, which nothing else reads
      EXPECT_EQ(st.find(DNNL_ARG_SRC)->index, st.find(DNNL_ARG_DST)->index);
    }
  Compiled host = testing::compile(b.g, {"host"});
  const std::vector<ir::OwnedTensor> in = testing::randomInputs(*host.graph, 4);
  EXPECT_LE(testing::relativeError(c.run(in)[0], host.run(in)[0]), 1e-6);
  auto loadEdited = [&](const std::function<void(Step&)>& edit) {
    return loadWithEditedStepsOf(c, StepKind::kSoftmaxRows, edit);
  };
  EXPECT_NE(loadEdited([](Step& st) {
              Arg* d = st.find(DNNL_ARG_DST);
              d->md = withDataType(d->md, dnnl::memory::data_type::s8);
            }).find("not one dense row-major float32 descriptor"),
            std::string::npos);
  EXPECT_NE(loadEdited([](Step& st) { st.args.pop_back(); }).find("exactly a source and a destination"),
            std::string::npos);
}

TEST(DnnlKernels, MalformedSwishStepIsRefused) {
  GraphBuilder b;
  ir::ValueId x = b.node("Relu", {b.input("x", {4, 16})}, {}, 13);
  b.g.outputs.push_back(b.node("Mul", {x, b.node("Sigmoid", {x}, {}, 13)}, {}, 13));
  Compiled c = testing::compile(b.g, {"dnnl", "host"});
  auto loadEdited = [&](const std::function<void(Step&)>& edit) {
    return loadWithEditedStepsOf(c, StepKind::kSwish, edit);
  };
  EXPECT_NE(loadEdited([](Step& st) {
              Arg* d = st.find(DNNL_ARG_DST);
              d->md = withDataType(d->md, dnnl::memory::data_type::s8);
            }).find("not one float32 descriptor"),
            std::string::npos);
  EXPECT_NE(loadEdited([](Step& st) { st.args.push_back(st.args.back()); }).find("exactly a source and a destination"),
            std::string::npos);
}

// The squeeze-excitation kernels against their definitions (double sums), over
// channel counts with and without a partial vector, at 1 and 2 threads (the mean the
// same bits on both), the scale in place and per image or shared.
TEST(DnnlKernels, ChannelMeanAndScaleFollowTheirDefinitions) {
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    for (int64_t c : {int64_t(1), int64_t(16), int64_t(37), int64_t(300)}) {
      for (int64_t n : {int64_t(1), int64_t(3)}) {
        const int64_t positions = 150;  // three blocks of the mean
        SCOPED_TRACE(std::to_string(threads) + " threads, c " + std::to_string(c) + ", n " + std::to_string(n));
        const std::vector<float> x = testing::randomFloats(size_t(n * positions * c), uint64_t(c + n), -3.0f, 5.0f);
        std::vector<float> mean(size_t(n * c));
        channelMean(x.data(), mean.data(), n, positions, c);
        double worst = 0;
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < c; ++j) {
            double sum = 0, mag = 0;
            for (int64_t p = 0; p < positions; ++p) {
              sum += x[size_t((i * positions + p) * c + j)];
              mag += std::fabs(x[size_t((i * positions + p) * c + j)]);
            }
            worst = std::max(worst, std::fabs(mean[size_t(i * c + j)] - sum / double(positions)) /
                                        (mag / double(positions) * 1e-6));
          }
        EXPECT_LE(worst, 1.0);
        // The same bits on the other team size.
        std::vector<float> again(mean.size());
        omp_set_num_threads(3 - threads);
        channelMean(x.data(), again.data(), n, positions, c);
        omp_set_num_threads(threads);
        EXPECT_EQ(std::memcmp(again.data(), mean.data(), mean.size() * sizeof(float)), 0);
        for (bool per_batch : {false, true}) {
          std::vector<float> y = x;
          const std::vector<float> s = testing::randomFloats(size_t((per_batch ? n : 1) * c), 5, 0.0f, 1.0f);
          scaleChannels(y.data(), s.data(), y.data(), n, positions, c, per_batch);
          for (int64_t r = 0; r < n * positions; ++r)
            for (int64_t j = 0; j < c; ++j) {
              const float f = s[size_t((per_batch ? r / positions : 0) * c + j)];
              ASSERT_EQ(y[size_t(r * c + j)], x[size_t(r * c + j)] * f) << "row " << r << " channel " << j;
            }
        }
      }
    }
  }
  omp_set_num_threads(2);
}

// The swish that also writes the channels' mean: the same bits as the swish and the
// mean as two steps, on one and two threads, in place or not.
TEST(DnnlKernels, SwishWithTheChannelMeanIsTheTwoStepsAtOnce) {
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    for (int64_t c : {int64_t(1), int64_t(16), int64_t(37), int64_t(300)})
      for (int64_t n : {int64_t(1), int64_t(3)})
        for (bool in_place : {false, true}) {
          const int64_t positions = 150;  // three blocks of the mean, the last one partial
          SCOPED_TRACE(std::to_string(threads) + " threads, c " + std::to_string(c) + ", n " + std::to_string(n) +
                       (in_place ? ", in place" : ""));
          const std::vector<float> x =
              testing::randomFloats(size_t(n * positions * c), uint64_t(7 * c + n), -8.0f, 6.0f);
          std::vector<float> want_y(x.size()), want_mean(size_t(n * c));
          swish(x.data(), want_y.data(), int64_t(x.size()));
          channelMean(want_y.data(), want_mean.data(), n, positions, c);
          std::vector<float> y = in_place ? x : std::vector<float>(x.size(), -1.0f), mean(want_mean.size(), -1.0f);
          swishChannelMean(in_place ? y.data() : x.data(), y.data(), mean.data(), n, positions, c);
          EXPECT_EQ(std::memcmp(y.data(), want_y.data(), y.size() * sizeof(float)), 0);
          EXPECT_EQ(std::memcmp(mean.data(), want_mean.data(), mean.size() * sizeof(float)), 0);
        }
  }
  omp_set_num_threads(2);
}

// The matrix-vector product against its definition (double sums), with and without a
// bias, each activation, float32 and float16 weights, over output counts with and
// without a partial vector and a partial block (B = 128) and odd and even input
// counts, at 1 and 2 threads (a thread's outputs crossing a block). The weights are
// laid out by the documented index, (j / B * k + i) * B + j % B, from the descriptor's
// padded size (matVecWeightsDesc).
TEST(DnnlKernels, MatVecFollowsItsDefinition) {
  using dt = memory::data_type;
  const int32_t acts[] = {0, int32_t(dnnl::algorithm::eltwise_relu), int32_t(dnnl::algorithm::eltwise_logistic),
                          int32_t(dnnl::algorithm::eltwise_swish)};
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    for (auto [k, o] :
         {std::pair<int64_t, int64_t>{1152, 48}, {48, 1152}, {37, 300}, {16, 5}, {1, 17}, {64, 1000}, {5, 130}})
      for (bool half : {false, true})
        for (bool with_bias : {false, true})
          for (int32_t act : acts) {
            SCOPED_TRACE(std::to_string(threads) + " threads, k " + std::to_string(k) + ", o " + std::to_string(o) +
                         ", act " + std::to_string(act) + (with_bias ? ", bias" : "") + (half ? ", float16" : ""));
            const std::vector<float> x = testing::randomFloats(size_t(k), uint64_t(k + o), -2.0f, 2.0f);
            std::vector<float> w = testing::randomFloats(size_t(k * o), uint64_t(k * o), -1.0f, 1.0f);  // w[i * o + j]
            if (half)
              for (float& v : w) v = ir::halfToFloat(ir::floatToHalf(v));
            const std::vector<float> bias = testing::randomFloats(size_t(o), uint64_t(o), -1.0f, 1.0f);
            const memory::desc md = matVecWeightsDesc({o, k, 1, 1}, half ? dt::f16 : dt::f32);
            const int64_t block = matVecBlock(o);
            std::vector<uint8_t> stored(md.get_size(), 0xCD);  // padding garbage: must not be read into y
            for (int64_t i = 0; i < k; ++i)
              for (int64_t j = 0; j < o; ++j) {
                const size_t at = size_t(((j / block) * k + i) * block + j % block);
                ASSERT_LT((at + 1) * (half ? 2 : 4), stored.size() + 1);
                if (half) {
                  const uint16_t h = ir::floatToHalf(w[size_t(i * o + j)]);
                  std::memcpy(stored.data() + at * 2, &h, 2);
                } else {
                  std::memcpy(stored.data() + at * 4, &w[size_t(i * o + j)], 4);
                }
              }
            std::vector<float> y(size_t(o), -7.0f);
            matVec(x.data(), stored.data(), half, with_bias ? bias.data() : nullptr, y.data(), k, o, act);
            for (int64_t j = 0; j < o; ++j) {
              double sum = with_bias ? bias[size_t(j)] : 0.0, mag = std::fabs(sum);
              for (int64_t i = 0; i < k; ++i) {
                sum += double(x[size_t(i)]) * double(w[size_t(i * o + j)]);
                mag += std::fabs(double(x[size_t(i)]) * double(w[size_t(i * o + j)]));
              }
              double want = sum;
              if (act == acts[1]) want = std::max(sum, 0.0);
              if (act == acts[2]) want = 1.0 / (1.0 + std::exp(-sum));
              if (act == acts[3]) want = sum / (1.0 + std::exp(-sum));
              // The sum's rounding (relative to the magnitudes summed), through the
              // activation (slope at most 1.1), plus a few ulp of the activation itself.
              const double tol = mag * 1e-6 * 1.1 + std::fabs(want) * 1e-6;
              ASSERT_NEAR(y[size_t(j)], want, tol) << "output " << j;
            }
          }
  }
  omp_set_num_threads(2);
}

// Their steps with a per-channel operand or result of the wrong shape are refused when
// the blob is read.
TEST(DnnlKernels, MalformedSqueezeExcitationStepsAreRefused) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 16, 5, 5});
  ir::ValueId c = b.node("Conv", {x, b.constant("w", {32, 16, 1, 1}, testing::randomFloats(512, 1))}, {}, 13);
  ir::ValueId s = b.node("Sigmoid", {b.node("GlobalAveragePool", {c}, {}, 13)}, {}, 13);
  b.g.outputs.push_back(b.node("Conv", {b.node("Mul", {c, s}, {}, 13),
                                        b.constant("w2", {8, 32, 1, 1}, testing::randomFloats(256, 2))},
                               {}, 13));
  Compiled compiled = testing::compile(b.g, {"dnnl", "host"});
  auto loadEdited = [&](StepKind kind, int key) {
    return loadWithEditedSteps(compiled, [&](Step& st) {
      if (st.kind != kind) return false;
      st.find(key)->md = plainDesc({1, 16, 2, 1});  // 32 floats, not [1, 32, 1, 1]
      return true;
    });
  };
  EXPECT_NE(loadEdited(StepKind::kScaleChannels, DNNL_ARG_SRC_1).find("scale is not a dense"), std::string::npos);
  EXPECT_NE(loadEdited(StepKind::kChannelMean, DNNL_ARG_DST).find("destination is not a dense"), std::string::npos);
  // The same for a swish's mean (a SiLU before the pool writes it).
  GraphBuilder silu;
  ir::ValueId sx = silu.input("x", {1, 16, 5, 5});
  ir::ValueId sc = silu.node("Conv", {sx, silu.constant("w", {32, 16, 1, 1}, testing::randomFloats(512, 1))}, {}, 13);
  ir::ValueId act = silu.node("Mul", {sc, silu.node("Sigmoid", {sc}, {}, 13)}, {}, 13);
  silu.g.outputs.push_back(silu.node("GlobalAveragePool", {act}, {}, 13));
  silu.g.outputs.push_back(act);
  Compiled with_mean = testing::compile(silu.g, {"dnnl", "host"});
  EXPECT_NE(loadWithEditedStepsOf(with_mean, StepKind::kSwish,
                                  [](Step& st) { st.find(DNNL_ARG_DST_1)->md = plainDesc({1, 16, 2, 1}); })
                .find("swish's mean is not a dense"),
            std::string::npos);
  EXPECT_NE(loadWithEditedStepsOf(with_mean, StepKind::kSwish,
                                  [](Step& st) {
                                    // row-major, not channels-last
                                    const memory::desc rows = plainDesc(dimsOf(st.find(DNNL_ARG_SRC)->md));
                                    st.find(DNNL_ARG_SRC)->md = rows;
                                    st.find(DNNL_ARG_DST)->md = rows;
                                  })
                .find("not a dense channels-last"),
            std::string::npos);
}

// A mat_vec step whose weights are not stored in blocks of outputs, or with another activation, or
// whose source is not one position, is refused when the blob is read.
TEST(DnnlKernels, MalformedMatVecStepsAreRefused) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 24, 1, 1});
  b.g.outputs.push_back(b.node(
      "Sigmoid", {b.node("Conv", {x, b.constant("w", {40, 24, 1, 1}, testing::randomFloats(960, 1))}, {}, 13)}, {},
      13));
  Compiled compiled = testing::compile(b.g, {"dnnl", "host"});
  auto loadEdited = [&](const std::function<void(Step&)>& edit) {
    return loadWithEditedStepsOf(compiled, StepKind::kMatVec, edit);
  };
  EXPECT_NE(loadEdited([](Step& st) {
              Arg* w = st.find(DNNL_ARG_WEIGHTS);
              w->md = plainDesc(dimsOf(w->md));  // [O][K]
            }).find("weights are not stored in blocks of outputs"),
            std::string::npos);
  EXPECT_NE(loadEdited([](Step& st) { st.alg = int32_t(dnnl::algorithm::eltwise_tanh); }).find("activation is not"),
            std::string::npos);
  EXPECT_NE(loadEdited([](Step& st) { st.find(DNNL_ARG_SRC)->md = plainDesc({1, 24, 2, 1}); }).find("[1, K, 1...]"),
            std::string::npos);
  EXPECT_NE(loadEdited([](Step& st) {
              Arg* w = st.find(DNNL_ARG_WEIGHTS);
              w->source = ArgSource::kBuffer;
              w->index = st.find(DNNL_ARG_SRC)->index;
            }).find("constant weights"),
            std::string::npos);
}

// A pooling whose windows hold more than kMaxPoolWindowElements elements in all stays on
// the host, whose kernels clip windows to the source; a blob with such a pooling step is
// refused at load (fuzz finding: oneDNN's reference pooling walked a kernel height of
// 2^38 + 2 without end).
TEST(DnnlKernels, APoolingOfHugeWindowsStaysOnTheHost) {
  auto poolGraph = [](int64_t kernel, int64_t pad) {
    GraphBuilder b;
    ir::ValueId x = b.input("x", {1, 4, 8, 8});
    ir::AttributeMap a;
    a.setInts("kernel_shape", {kernel, kernel});
    a.setInts("pads", {pad, pad, pad, pad});
    b.g.outputs.push_back(b.node("AveragePool", {b.node("Relu", {x}, {}, 13)}, a, 13));
    return b;
  };
  GraphBuilder huge = poolGraph(100000, 49996);  // one output of 10^10 window elements a channel
  Compiled host_side = testing::compile(huge.g, {"dnnl", "host"});
  for (const DnnlModule::StepInfo& st : allSteps(host_side)) EXPECT_NE(st.kind, StepKind::kPooling);
  Compiled host = testing::compile(huge.g, {"host"});
  std::vector<ir::OwnedTensor> in = testing::randomInputs(*host.graph, 3);
  EXPECT_LE(testing::closeness(host_side.run(in)[0], host.run(in)[0], 1e-5, 1e-7), 1.0);

  Compiled small = testing::compile(poolGraph(3, 1).g, {"dnnl", "host"});
  EXPECT_NE(loadWithEditedStepsOf(small, StepKind::kPooling,
                                  [](Step& st) {
                                    st.kernel = {(int64_t(1) << 38) + 2, 3};
                                    st.pad_r[0] = (int64_t(1) << 38) - 1;
                                  })
                .find("windows hold more than"),
            std::string::npos);
}

// A pooling step over a source without spatial dims, or whose window lists do not
// match its rank (a convolution's too), is refused at load with the step named (fuzz finding: oneDNN 2.6's
// C++ descriptor took the address of an empty list's first element).
TEST(DnnlKernels, APoolingStepsWindowsMustFitItsRank) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 4, 8, 8});
  ir::AttributeMap a;
  a.setInts("kernel_shape", {2, 2});
  a.setInts("strides", {2, 2});
  b.g.outputs.push_back(b.node("MaxPool", {b.node("Relu", {x}, {}, 13)}, a, 12));
  Compiled c = testing::compile(b.g, {"dnnl", "host"});
  const std::string flat = loadWithEditedStepsOf(c, StepKind::kPooling, [](Step& st) {
    for (int key : {DNNL_ARG_SRC, DNNL_ARG_DST}) st.find(key)->md = plainDesc({1, 4});
    st.kernel.clear(), st.strides.clear(), st.dilates.clear(), st.pad_l.clear(), st.pad_r.clear();
  });
  EXPECT_NE(flat.find("windows that do not fit its source's rank 2"), std::string::npos) << flat;
  const std::string short_kernel =
      loadWithEditedStepsOf(c, StepKind::kPooling, [](Step& st) { st.kernel.resize(1); });
  EXPECT_NE(short_kernel.find("(pooling) has windows that do not fit"), std::string::npos) << short_kernel;
  EXPECT_EQ(loadWithEditedStepsOf(c, StepKind::kPooling, [](Step&) {}), "loaded");
  // The convolution's lists by the same check.
  GraphBuilder cb;
  ir::ValueId cx = cb.input("x", {1, 16, 6, 6});
  cb.g.outputs.push_back(cb.node("Conv", {cx, cb.constant("w", {16, 16, 1, 1}, testing::randomFloats(256, 1))}, {}, 13));
  Compiled conv = testing::compile(cb.g, {"dnnl", "host"});
  const std::string short_pads =
      loadWithEditedStepsOf(conv, StepKind::kConvolution, [](Step& st) { st.pad_l.resize(1); });
  EXPECT_NE(short_pads.find("(convolution) has windows that do not fit its source's rank 4"), std::string::npos)
      << short_pads;
}

// A sum post-op (a residual Add) whose zero point is no int32 is refused when the blob
// is read (fuzz finding: 3.97e34 converted to int, undefined behaviour, at load).
TEST(DnnlKernels, ASumPostOpsZeroPointMustBeAnInt32) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 16, 6, 6});
  ir::ValueId c1 = b.node("Conv", {x, b.constant("w1", {16, 16, 1, 1}, testing::randomFloats(256, 1))}, {}, 13);
  ir::ValueId c2 = b.node("Conv", {c1, b.constant("w2", {16, 16, 1, 1}, testing::randomFloats(256, 2))}, {}, 13);
  b.g.outputs.push_back(b.node("Add", {c2, c1}, {}, 13));
  Compiled compiled = testing::compile(b.g, {"dnnl", "host"});
  for (float zero : {3.97e34f, NAN, 0.5f, -3e9f}) {
    SCOPED_TRACE("zero point " + std::to_string(zero));
    std::string error = loadWithEditedSteps(compiled, [&](Step& st) {
      for (PostOp& p : st.post_ops)
        if (p.kind == PostOp::Kind::kSum) {
          p.beta = zero;
          return true;
        }
      return false;
    });
    EXPECT_NE(error.find("not an int32"), std::string::npos) << error;
  }
}

// An int8 max pool step whose window does not fit its tensors, or whose destination
// has another element type, is refused when the blob is read.
TEST(DnnlKernels, MalformedInt8MaxPoolStepIsRefused) {
  GraphBuilder b = qconvThenMaxPool();
  Compiled c = testing::compile(b.g, {"dnnl", "host"});
  auto loadEdited = [&](const std::function<void(Step&)>& edit) {
    return loadWithEditedStepsOf(c, StepKind::kInt8MaxPool, edit);
  };
  EXPECT_NE(loadEdited([](Step& st) { st.kernel = {5, 5}; }).find("window does not fit"), std::string::npos);
  EXPECT_NE(loadEdited([](Step& st) {
              Arg* d = st.find(DNNL_ARG_DST);
              d->md = withDataType(d->md, dnnl::memory::data_type::s8);
            }).find("int8 tensors of one type"),
            std::string::npos);
  EXPECT_NE(loadEdited([](Step& st) { st.dilates = {1, 1}; }).find("without dilation"), std::string::npos);
}

// ONNX Runtime's dynamic quantization of three MatMuls over one activation:
// DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul(scale) [-> Add(bias)].
// After passes::lowerIntegerCompute the two with int8 weights run as oneDNN int8
// matmuls over the uint8 activation with its run-time zero point (one quantization
// for both); the one with uint8 weights and zero point 10 (integers up to 245, beyond
// s8) runs in float32 over the centred integers. All three within float rounding of
// the host's exact integer computation of the original graph.
TEST(DnnlInt8, DynamicInt8MatMulsShareOneQuantization) {
  GraphBuilder b;
  const int64_t K = 64, N = 48;
  ir::ValueId x = b.input("x", {1, 12, K});
  ir::Node dql;
  dql.op_type = "DynamicQuantizeLinear";
  dql.opset = 13;
  dql.name = "dql";
  dql.inputs = {b.node("Add", {x, b.constant("shift", {}, {0.3f})}, {}, 13)};
  ir::ValueId y = b.g.addValue("y"), scale = b.g.addValue("scale"), zero = b.g.addValue("zero");
  dql.outputs = {y, scale, zero};
  b.g.addNode(dql);
  auto project = [&](const std::string& p, ir::ValueId w, ir::ValueId w_zero, float w_scale, bool bias) {
    std::vector<ir::ValueId> in = {y, w, zero};
    if (w_zero != ir::kNoValue) in.push_back(w_zero);
    ir::ValueId acc = b.node("MatMulInteger", in, {}, 13, p + "_mm");
    ir::AttributeMap to_float;
    to_float.setInt("to", 1);
    ir::ValueId f = b.node("Cast", {acc}, to_float, 13, p + "_cast");
    ir::ValueId s = b.node("Mul", {scale, b.constant(p + "_ws", {}, {w_scale})}, {}, 13, p + "_scale");
    ir::ValueId out = b.node("Mul", {f, s}, {}, 13, p + "_out");
    if (bias) out = b.node("Add", {out, b.constant(p + "_bias", {N}, testing::randomFloats(size_t(N), 9))}, {}, 13);
    b.g.outputs.push_back(out);
  };
  project("q", typedConstant<int8_t>(b, "wq", ir::DType::kInt8, {K, N}, int8Weights(size_t(K * N), 1)),
          ir::kNoValue, 0.01f, true);
  project("k", typedConstant<int8_t>(b, "wk", ir::DType::kInt8, {K, N}, int8Weights(size_t(K * N), 2)),
          typedConstant<int8_t>(b, "wkz", ir::DType::kInt8, {}, {0}), 0.02f, false);
  std::vector<uint8_t> wv(size_t(K * N));
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = uint8_t((i * 97) % 256);
  project("v", typedConstant<uint8_t>(b, "wv", ir::DType::kUInt8, {K, N}, wv), scalarU8(b, "wvz", 10), 0.005f, false);

  Compiled host = testing::compile(b.g, {"host"});  // MatMulInteger in exact integers
  ir::Graph lowered = b.g;
  passes::FoldOptions fold;
  fold.max_growth_bytes = 0;
  passes::inferShapes(lowered, fold);
  EXPECT_EQ(passes::lowerIntegerCompute(lowered), 3u);
  EXPECT_EQ(countOps(lowered, "DequantizeLinear"), 1u) << "one centred activation for the three MatMuls";
  Compiled dnnl = testing::compile(lowered, {"dnnl", "host"});
  EXPECT_EQ(testing::dnnlRegions(dnnl), 1u);
  size_t matmuls = 0;
  for (const DnnlModule::StepInfo& s : allSteps(dnnl)) matmuls += s.kind == StepKind::kMatMul;
  EXPECT_EQ(int8MatMuls(dnnl), 2u);
  EXPECT_EQ(matmuls, 3u) << "the third in float32";
  // Each output Mul reads the scale product, whose node comes after the MatMul: the
  // Mul is the matmul's post-op (q's bias then a step), and the product no step of its
  // own: times the activation's scale, then times the weights' (a linear op).
  for (const DnnlModule::StepInfo& s : allSteps(dnnl)) {
    if (s.kind == StepKind::kMatMul) {
      EXPECT_NE(s.label.find("_out"), std::string::npos) << s.label;
      EXPECT_NE(s.label.find("_scale"), std::string::npos) << s.label;
      EXPECT_EQ(s.post_ops, 2u) << s.label;
    } else {
      EXPECT_EQ(s.label.find("_scale"), std::string::npos) << s.label;
    }
  }
  // The int8 weights become s8 constants in oneDNN's layout; the float32 ones that
  // lowerIntegerCompute made of them are not stored.
  std::vector<ir::OwnedTensor> in = testing::randomInputs(*host.graph, 4);
  std::vector<ir::OwnedTensor> want = host.run(in), got = dnnl.run(in);
  ASSERT_EQ(got.size(), 3u);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_LE(testing::relativeError(got[i], want[i]), 1e-6) << "output " << i;
}

// A blob whose run-time source zero point is not one int32 element (a corrupted or
// hostile artifact) is refused at load with an error naming the step, never handed
// to oneDNN.
TEST(DnnlInt8, RunTimeZeroPointMustBeOneInt32) {
  GraphBuilder b;
  const int64_t K = 16, N = 8;
  ir::Node dql;
  dql.op_type = "DynamicQuantizeLinear";
  dql.opset = 13;
  dql.name = "dql";
  dql.inputs = {b.node("Relu", {b.input("x", {1, 4, K})}, {}, 13)};
  ir::ValueId y = b.g.addValue("y"), scale = b.g.addValue("scale"), zero = b.g.addValue("zero");
  dql.outputs = {y, scale, zero};
  b.g.addNode(dql);
  ir::AttributeMap to_float;
  to_float.setInt("to", 1);
  ir::ValueId w = typedConstant<int8_t>(b, "w", ir::DType::kInt8, {K, N}, int8Weights(size_t(K * N), 5));
  ir::ValueId f = b.node("Cast", {b.node("MatMulInteger", {y, w, zero}, {}, 13, "mm")}, to_float, 13);
  b.g.outputs.push_back(b.node("Mul", {f, scale}, {}, 13));
  passes::FoldOptions fold;
  fold.max_growth_bytes = 0;
  passes::inferShapes(b.g, fold);
  ASSERT_EQ(passes::lowerIntegerCompute(b.g), 1u);
  Compiled c = testing::compile(b.g, {"dnnl", "host"});
  ASSERT_EQ(int8MatMuls(c), 1u);
  const std::string error = loadWithEditedSteps(c, [](Step& st) {
    Arg* zp = st.find(DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC);
    if (zp) zp->md = withDataType(zp->md, dnnl::memory::data_type::f32);
    return zp != nullptr;
  });
  EXPECT_NE(error.find("run-time source zero point that is not one int32"), std::string::npos) << error;
}

// The fused add + layer normalization (+ dynamic quantization) kernel against its
// definition in double: row lengths with and without a partial vector, no addend, a
// row, a row and a full-size one, in place over x, 1 and 2 threads; its quantization
// is dynamicQuantize's of its result, bit for bit.
TEST(DnnlKernels, AddLayerNormFollowsItsDefinition) {
  for (int threads : {1, 2})
    for (int64_t cols : {int64_t(5), int64_t(70), int64_t(256)})
      for (int adds : {0, 1, 2})
        for (bool in_place : {false, true}) {
          SCOPED_TRACE(std::to_string(threads) + " threads, " + std::to_string(cols) + " columns, " +
                       std::to_string(adds) + " addends" + (in_place ? ", in place" : ""));
          omp_set_num_threads(threads);
          const int64_t rows = 37, n = rows * cols;
          std::vector<float> x = testing::randomFloats(size_t(n), uint64_t(cols + adds), -2.0f, 3.0f);
          const std::vector<float> row = testing::randomFloats(size_t(cols), 5);
          const std::vector<float> full = testing::randomFloats(size_t(n), 6);
          const std::vector<float> gamma = testing::randomFloats(size_t(cols), 7, 0.5f, 1.5f);
          const std::vector<float> beta = testing::randomFloats(size_t(cols), 8);
          const std::vector<float> x0 = x;
          std::vector<float> y(static_cast<size_t>(n));
          std::vector<uint8_t> q(static_cast<size_t>(n));
          float scale = 0, zero = 0;
          int32_t zero_s32 = -1;
          AddLayerNormArgs a;
          a.x = x.data();
          if (adds >= 1) a.adds[a.n_adds] = row.data(), a.add_is_row[a.n_adds++] = true;
          if (adds >= 2) a.adds[a.n_adds++] = full.data();
          a.gamma = gamma.data();
          a.beta = beta.data();
          a.epsilon = 1e-5f;
          a.rows = rows;
          a.cols = cols;
          a.y = in_place ? x.data() : y.data();
          a.q = q.data();
          a.scale = &scale;
          a.zero = &zero;
          a.zero_s32 = &zero_s32;
          addLayerNorm(a);
          const std::vector<float> got = in_place ? x : y;
          double worst = 0, mag = 0;
          for (int64_t r = 0; r < rows; ++r) {
            std::vector<double> sum(static_cast<size_t>(cols));
            double mean = 0, var = 0;
            for (int64_t c = 0; c < cols; ++c) {
              const size_t i = size_t(r * cols + c);
              sum[size_t(c)] = double(x0[i]) + (adds >= 1 ? row[size_t(c)] : 0.0) + (adds >= 2 ? full[i] : 0.0);
              mean += sum[size_t(c)];
            }
            mean /= double(cols);
            for (double v : sum) var += (v - mean) * (v - mean);
            var /= double(cols);
            for (int64_t c = 0; c < cols; ++c) {
              const double want = (sum[size_t(c)] - mean) / std::sqrt(var + 1e-5) * gamma[size_t(c)] + beta[size_t(c)];
              worst = std::max(worst, std::fabs(got[size_t(r * cols + c)] - want));
              mag = std::max(mag, std::fabs(want));
            }
          }
          EXPECT_LE(worst, 2e-6 * mag);
          std::vector<uint8_t> want_q(static_cast<size_t>(n));
          float want_scale = 0, want_zero = 0;
          int32_t want_s32 = -1;
          dynamicQuantize(got.data(), n, want_q.data(), &want_scale, &want_zero, &want_s32);
          EXPECT_EQ(q, want_q);
          EXPECT_EQ(scale, want_scale);
          EXPECT_EQ(zero, want_zero);
          EXPECT_EQ(zero_s32, want_s32);
        }
  omp_set_num_threads(2);
}

// LayerNormalization over the last dim of x (`cols` wide) as PyTorch exports it, in
// eight nodes (ReduceMean, Sub, Pow, ReduceMean, Add epsilon, Sqrt, Div, Mul gamma,
// Add beta).
ir::ValueId layerNormNodes(GraphBuilder& b, ir::ValueId x, int64_t cols) {
  ir::AttributeMap last;
  last.setInts("axes", {-1});
  ir::ValueId d = b.node("Sub", {x, b.node("ReduceMean", {x}, last, 13)}, {}, 13);
  ir::ValueId v = b.node("ReduceMean", {b.node("Pow", {d, b.constant("two", {}, {2.0f})}, {}, 13)}, last, 13);
  ir::ValueId sd = b.node("Sqrt", {b.node("Add", {v, b.constant("eps", {}, {1e-5f})}, {}, 13)}, {}, 13);
  return b.node("Add", {b.node("Mul", {b.node("Div", {d, sd}, {}, 13),
                                       b.constant("gamma", {cols}, testing::randomFloats(size_t(cols), 3, 0.5f, 1.5f))},
                               {}, 13),
                        b.constant("beta", {cols}, testing::randomFloats(size_t(cols), 4))},
                {}, 13);
}

// A transformer block's tail as PyTorch exports it (bias Add, residual Add,
// LayerNormalization in ten nodes) and the DynamicQuantizeLinear of its result: one
// step of the module's own kernel, its float output within float error of the host's
// and its quantized one within a step; a blob whose step has a quantized output
// sharing a buffer, or an addend of the wrong size, is refused at load.
TEST(DnnlInt8, AddLayerNormAndItsQuantizationAreOneStep) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 24, 32});
  // (A Softmax takes no post-ops: the Adds stay binary steps, as after an int8 matmul.)
  ir::AttributeMap axis;
  axis.setInt("axis", -1);
  ir::ValueId h = b.node("Softmax", {x}, axis, 13);
  ir::ValueId biased = b.node("Add", {h, b.constant("bias", {32}, testing::randomFloats(32, 2))}, {}, 13);
  ir::ValueId sum = b.node("Add", {x, biased}, {}, 13);  // the residual first, as PyTorch writes it
  ir::ValueId ln = layerNormNodes(b, sum, 32);
  const auto [y, scale, zero] = dynamicQuantizeNode(b, ln);
  b.g.outputs.push_back(b.node("Relu", {ln}, {}, 13));  // the float value read on
  b.g.outputs.push_back(b.node("DequantizeLinear", {y, b.constant("one", {}, {1.0f}), zero}, {}, 13));
  b.g.outputs.push_back(b.node("Mul", {scale, b.constant("two2", {}, {2.0f})}, {}, 13));
  Compiled host = testing::compile(b.g, {"host"});
  Compiled dnnl = testing::compile(b.g, {"dnnl", "host"});
  size_t fused = 0, norms = 0, quantizations = 0, binaries = 0;
  for (const DnnlModule::StepInfo& st : allSteps(dnnl)) {
    fused += st.kind == StepKind::kAddLayerNorm;
    norms += st.kind == StepKind::kLayerNorm;
    quantizations += st.kind == StepKind::kDynamicQuantize;
    binaries += st.kind == StepKind::kBinary && st.label.find("Add") != std::string::npos;
    if (st.kind == StepKind::kAddLayerNorm) {
      EXPECT_EQ(st.implementation, "partita:add_layer_norm");
      EXPECT_NE(st.label.find("dql"), std::string::npos) << st.label;
    }
  }
  EXPECT_EQ(fused, 1u);
  EXPECT_EQ(norms + quantizations + binaries, 0u);
  for (const DnnlModule::StepInfo& st : allSteps(dnnl))
    if (st.kind == StepKind::kAddLayerNorm) {
      EXPECT_NE(st.label.find("Add"), std::string::npos) << st.label;  // both Adds absorbed
    }
  std::vector<ir::OwnedTensor> in = testing::randomInputs(*host.graph, 9);
  std::vector<ir::OwnedTensor> want = host.run(in), got = dnnl.run(in);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_LE(testing::closeness(got[0], want[0], 1e-5, 1e-5), 1.0);
  EXPECT_LE(testing::closeness(got[1], want[1], 0, 1.0), 1.0);  // centred integers: a rounding apart at most
  EXPECT_LE(testing::closeness(got[2], want[2], 1e-5, 0), 1.0);

  auto loadEdited = [&](const std::function<void(Step&)>& edit) {
    return loadWithEditedStepsOf(dnnl, StepKind::kAddLayerNorm, edit);
  };
  EXPECT_NE(loadEdited([](Step& st) {
              ASSERT_NE(st.find(kQuantizedResultArg), nullptr);
              st.find(kQuantizedResultArg)->index = st.find(DNNL_ARG_DST)->index;
            }).find("shares a buffer"),
            std::string::npos);
  EXPECT_NE(loadEdited([](Step& st) {
              ASSERT_NE(st.find(DNNL_ARG_MULTIPLE_SRC + 1), nullptr);
              st.find(DNNL_ARG_MULTIPLE_SRC + 1)->md = plainDesc({3});
            }).find("addend"),
            std::string::npos);
  EXPECT_NE(loadEdited([](Step& st) { st.args.pop_back(); }).find("scale or zero point"), std::string::npos);
}

// Where the values the Adds read are temporaries nothing reads after them (a
// transformer layer's input, which the layer norm before it wrote, and the sublayer's
// result), the Adds and the layer normalization write over them: the fused step's
// result is the buffer of its source or of its full-size addend, each row written
// where it was just read (not into lines fetched first). Its output as the host's.
TEST(DnnlInt8, ALayerNormWritesOverItsDeadResidual) {
  GraphBuilder b;
  ir::ValueId r = b.node("Relu", {b.input("x", {1, 24, 32})}, {}, 13);  // a temporary
  ir::AttributeMap axis;
  axis.setInt("axis", -1);
  ir::ValueId h = b.node("Softmax", {r}, axis, 13);
  ir::ValueId biased = b.node("Add", {h, b.constant("bias", {32}, testing::randomFloats(32, 2))}, {}, 13);
  ir::ValueId ln = layerNormNodes(b, b.node("Add", {r, biased}, {}, 13), 32);
  const auto [y, scale, zero] = dynamicQuantizeNode(b, ln);
  b.g.outputs.push_back(b.node("Relu", {ln}, {}, 13));  // the float value read on
  b.g.outputs.push_back(b.node("DequantizeLinear", {y, scale, zero}, {}, 13));
  Compiled host = testing::compile(b.g, {"host"});
  Compiled dnnl = testing::compile(b.g, {"dnnl", "host"});
  const backend::ModuleImage& image = dnnl.parts.modules.at(0);
  const Program p = readProgram(image.blob.data(), image.blob.size());
  size_t fused = 0;
  for (const Step& st : p.functions[0].steps) {
    if (st.kind != StepKind::kAddLayerNorm) continue;
    ++fused;
    const Arg* src = st.find(DNNL_ARG_SRC);
    const Arg* dst = st.find(DNNL_ARG_DST);
    const Arg* residual = st.find(DNNL_ARG_MULTIPLE_SRC + 1);
    ASSERT_TRUE(src && dst && residual);
    EXPECT_EQ(residual->source, ArgSource::kBuffer);
    EXPECT_TRUE(dst->index == src->index || dst->index == residual->index)
        << dst->index << " " << src->index << " " << residual->index;
  }
  EXPECT_EQ(fused, 1u);
  std::vector<ir::OwnedTensor> in = testing::randomInputs(*host.graph, 9);
  std::vector<ir::OwnedTensor> want = host.run(in), got = dnnl.run(in);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_LE(testing::closeness(got[0], want[0], 1e-5, 1e-5), 1.0);
  EXPECT_LE(testing::closeness(got[1], want[1], 1e-5, 0.1), 1.0);  // a rounding apart at most
}

// biasGelu against GELU's definition in double: rows of several lengths (vector
// bodies and tails), with and without a bias, in place, on one and two threads; the
// error within 2^-21 of |x + bias| (plus float32's smallest normal for results that
// underflow); large values exact (erf rounds to +-1 there); NaN and -inf give NaN,
// +inf gives +inf; the quantized result, scale and zero point are dynamicQuantize's
// of the float result (+inf and NaN included, as it takes them).
TEST(DnnlKernels, BiasGeluFollowsItsDefinition) {
  for (int64_t cols : {1, 7, 16, 40, 1024}) {
    const int64_t rows = 6;
    std::vector<float> x = testing::randomFloats(size_t(rows * cols), uint64_t(cols), -9.0f, 9.0f);
    const std::vector<float> bias = testing::randomFloats(size_t(cols), uint64_t(cols) + 1, -1.0f, 1.0f);
    x[0] = NAN;
    x[size_t(cols)] = -INFINITY;
    x[size_t(2 * cols)] = INFINITY;
    x[size_t(3 * cols)] = 1e6f;  // erf(u) = 1: y = v exactly
    x[size_t(4 * cols)] = -40.0f;
    for (bool with_bias : {false, true})
      for (int threads : {1, 2}) {
        omp_set_num_threads(threads);
        std::vector<float> y = x;
        std::vector<uint8_t> q(x.size());
        float scale = 0, zero = 0;
        int32_t zero_s32 = 0;
        BiasGeluArgs a;
        a.x = y.data();  // in place
        a.bias = with_bias ? bias.data() : nullptr;
        a.rows = rows;
        a.cols = cols;
        a.y = y.data();
        a.q = q.data();
        a.scale = &scale;
        a.zero = &zero;
        a.zero_s32 = &zero_s32;
        biasGelu(a);
        for (size_t i = 0; i < x.size(); ++i) {
          const double v = double(x[i]) + (with_bias ? double(bias[i % size_t(cols)]) : 0.0);
          const std::string at = "element " + std::to_string(i) + " of " + std::to_string(cols) + " columns";
          if (std::isnan(x[i]) || x[i] == -INFINITY) {
            EXPECT_TRUE(std::isnan(y[i])) << at;
          } else if (x[i] == INFINITY) {
            EXPECT_EQ(y[i], INFINITY) << at;
          } else {
            const double e = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
            EXPECT_NEAR(y[i], e, std::ldexp(std::fabs(v), -21) + FLT_MIN) << at;
            if (v >= 6.0) {
              EXPECT_EQ(y[i], float(v)) << at;
            }
          }
        }
        std::vector<uint8_t> want(x.size());
        float want_scale = 0, want_zero = 0;
        int32_t want_zero_s32 = 0;
        dynamicQuantize(y.data(), int64_t(y.size()), want.data(), &want_scale, &want_zero, &want_zero_s32);
        EXPECT_EQ(scale, want_scale);
        EXPECT_EQ(zero, want_zero);
        EXPECT_EQ(zero_s32, want_zero_s32);
        EXPECT_EQ(q, want) << cols << " columns";
      }
  }
  omp_set_num_threads(2);
}

// A feed-forward block's bias Add and Gelu with the next MatMul's
// DynamicQuantizeLinear are one bias_gelu step (the Gelu as PyTorch writes it out), a
// Gelu without a bias one too; outputs match the host's; a blob whose bias_gelu step
// has a bias of the wrong length, or its quantized result in its destination's buffer,
// is refused by name.
TEST(DnnlKernels, BiasGeluAndTheNextQuantizationAreOneStep) {
  auto gelu = [](GraphBuilder& b, ir::ValueId x, const std::string& p) {
    ir::ValueId e = b.node("Erf", {b.node("Div", {x, b.constant(p + "sqrt2", {}, {1.4142135f})}, {}, 13)}, {}, 13);
    ir::ValueId m = b.node("Mul", {x, b.node("Add", {e, b.constant(p + "one", {}, {1.0f})}, {}, 13)}, {}, 13);
    return b.node("Mul", {m, b.constant(p + "half", {}, {0.5f})}, {}, 13);
  };
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 24, 40});  // 40 columns: a vector body and a tail per row
  ir::AttributeMap last;
  last.setInt("axis", -1);
  // (A Softmax takes no post-ops: the bias Add stays a binary step, as after an int8 matmul.)
  ir::ValueId h = b.node("Softmax", {x}, last, 13);
  ir::ValueId biased = b.node("Add", {b.node("Mul", {h, b.constant("ten", {}, {10.0f})}, {}, 13),
                                      b.constant("bias", {40}, testing::randomFloats(40, 2, -2.0f, 2.0f))},
                              {}, 13);
  ir::ValueId g = gelu(b, biased, "a");
  const auto [y, scale, zero] = dynamicQuantizeNode(b, g);
  b.g.outputs.push_back(b.node("DequantizeLinear", {y, b.constant("unit", {}, {1.0f}), zero}, {}, 13));
  b.g.outputs.push_back(b.node("Mul", {scale, b.constant("two", {}, {2.0f})}, {}, 13));
  b.g.outputs.push_back(gelu(b, b.node("Softmax", {b.node("Relu", {x}, {}, 13)}, last, 13), "b"));  // no bias
  Compiled host = testing::compile(b.g, {"host"});
  Compiled dnnl = testing::compile(b.g, {"dnnl", "host"});
  size_t own = 0, quantized = 0, others = 0;
  for (const DnnlModule::StepInfo& st : allSteps(dnnl)) {
    own += st.kind == StepKind::kBiasGelu;
    quantized += st.kind == StepKind::kBiasGelu && st.label.find("dql") != std::string::npos;
    others += st.kind != StepKind::kBiasGelu && (st.kind == StepKind::kDynamicQuantize ||
                                                 st.label.find("Add_2") != std::string::npos ||
                                                 st.label.find("Erf") != std::string::npos);
    if (st.kind == StepKind::kBiasGelu) {
      EXPECT_EQ(st.implementation, "partita:bias_gelu");
    }
  }
  EXPECT_EQ(own, 2u);
  EXPECT_EQ(quantized, 1u);
  EXPECT_EQ(others, 0u);
  std::vector<ir::OwnedTensor> in = testing::randomInputs(*host.graph, 9);
  std::vector<ir::OwnedTensor> want = host.run(in), got = dnnl.run(in);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_LE(testing::closeness(got[0], want[0], 0, 1.0), 1.0);  // centred integers: a rounding apart at most
  EXPECT_LE(testing::closeness(got[1], want[1], 1e-6, 0), 1.0);
  EXPECT_LE(testing::closeness(got[2], want[2], 1e-6, 1e-6), 1.0);

  auto loadEdited = [&](const std::function<void(Step&)>& edit) {
    return loadWithEditedSteps(dnnl, [&](Step& st) {
      return st.kind == StepKind::kBiasGelu && st.find(kQuantizedResultArg) && (edit(st), true);
    });
  };
  EXPECT_NE(loadEdited([](Step& st) {
              ASSERT_NE(st.find(DNNL_ARG_SRC_1), nullptr);
              st.find(DNNL_ARG_SRC_1)->md = plainDesc({3});
            }).find("bias_gelu's bias is not one float32 per column"),
            std::string::npos);
  EXPECT_NE(loadEdited([](Step& st) { st.find(kQuantizedResultArg)->index = st.find(DNNL_ARG_DST)->index; })
                .find("shares a buffer"),
            std::string::npos);
  EXPECT_NE(loadEdited([](Step& st) { st.args.pop_back(); }).find("scale or zero point"), std::string::npos);
}

// A column [S, 1] added to an [S, C] tensor with S == C has as many elements as a row
// [C]: neither own kernel may take it for one (the bias of a bias_gelu, an addend of
// an add_layer_norm). The outputs match the host's.
TEST(DnnlKernels, AColumnAsLongAsARowIsNoRowBias) {
  auto gelu = [](GraphBuilder& b, ir::ValueId x) {
    ir::ValueId e = b.node("Erf", {b.node("Div", {x, b.constant("sqrt2", {}, {1.4142135f})}, {}, 13)}, {}, 13);
    ir::ValueId m = b.node("Mul", {x, b.node("Add", {e, b.constant("one", {}, {1.0f})}, {}, 13)}, {}, 13);
    return b.node("Mul", {m, b.constant("half", {}, {0.5f})}, {}, 13);
  };
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 16, 16});
  ir::AttributeMap last;
  last.setInt("axis", -1);
  ir::ValueId h = b.node("Mul", {b.node("Softmax", {x}, last, 13), b.constant("ten", {}, {10.0f})}, {}, 13);
  ir::ValueId col = b.constant("col", {16, 1}, testing::randomFloats(16, 5, -3.0f, 3.0f));
  b.g.outputs.push_back(gelu(b, b.node("Add", {h, col}, {}, 13)));
  ir::ValueId sum = b.node("Add", {b.node("Softmax", {b.node("Relu", {x}, {}, 13)}, last, 13),
                                   b.constant("col2", {16, 1}, testing::randomFloats(16, 6, -3.0f, 3.0f))},
                           {}, 13);
  ir::AttributeMap axes;
  axes.setInts("axes", {-1});
  ir::ValueId d = b.node("Sub", {sum, b.node("ReduceMean", {sum}, axes, 13)}, {}, 13);
  ir::ValueId v = b.node("ReduceMean", {b.node("Pow", {d, b.constant("two", {}, {2.0f})}, {}, 13)}, axes, 13);
  ir::ValueId sd = b.node("Sqrt", {b.node("Add", {v, b.constant("eps", {}, {1e-5f})}, {}, 13)}, {}, 13);
  b.g.outputs.push_back(b.node(
      "Add",
      {b.node("Mul", {b.node("Div", {d, sd}, {}, 13), b.constant("gamma", {16}, testing::randomFloats(16, 7))}, {}, 13),
       b.constant("beta", {16}, testing::randomFloats(16, 8))},
      {}, 13));
  Compiled host = testing::compile(b.g, {"host"});
  Compiled dnnl = testing::compile(b.g, {"dnnl", "host"});
  std::vector<ir::OwnedTensor> in = testing::randomInputs(*host.graph, 4);
  std::vector<ir::OwnedTensor> want = host.run(in), got = dnnl.run(in);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_LE(testing::relativeError(got[0], want[0]), 1e-5);
  EXPECT_LE(testing::relativeError(got[1], want[1]), 1e-5);
}

// A strided view copied in the add_row_copy tests: its dims, source and destination
// element strides, source offset and contiguous dim.
struct CopyView {
  std::vector<int64_t> dims, src, dst;
  int64_t offset;
  int inner;
};

// `v` as a StridedCopy into `dst`.
StridedCopy stridedCopyOf(const CopyView& v, float* dst) {
  StridedCopy c;
  c.rank = int(v.dims.size());
  c.inner = v.inner;
  for (int d = 0; d < c.rank; ++d) {
    c.dims[d] = v.dims[size_t(d)];
    c.src_strides[d] = v.src[size_t(d)];
    c.dst_strides[d] = v.dst[size_t(d)];
  }
  c.src_offset = v.offset;
  c.dst = dst;
  return c;
}

// The number of elements `v` copies.
int64_t elementsOf(const CopyView& v) {
  int64_t n = 1;
  for (int64_t d : v.dims) n *= d;
  return n;
}
// A concat of dense plain tensors runs as copies of contiguous blocks (the module's
// kConcat where the layouts allow): equal to the concatenation by index, for
// channels-last (blocks of 3, 17 and 64 floats: a tail, a mask and whole vectors), for
// row-major along dims 1 and 2 (blocks past memcpy's threshold), for uint8, on one
// and two threads; none for a blocked, strided or offset tensor, another type, or
// sources that do not add up.
TEST(DnnlKernels, PlainConcatCopiesEachSourcesBlocks) {
  using dt = memory::data_type;
  using tag = memory::format_tag;
  struct Case {
    std::vector<int64_t> extents;  // along the axis, one per source
    std::vector<int64_t> dims;     // the destination's, the axis' extent ignored
    int axis;
    tag layout;
    dt type;
  };
  const std::vector<Case> cases = {
      {{3, 17, 64}, {2, 0, 3, 5}, 1, tag::acdb, dt::f32},
      {{16, 48}, {2, 0, 9, 9}, 1, tag::abcd, dt::f32},
      {{5, 1, 40}, {2, 3, 0, 8}, 2, tag::abcd, dt::f32},
      {{5, 7}, {1, 0, 4, 4}, 1, tag::acdb, dt::u8},
  };
  for (const Case& k : cases)
    for (int threads : {1, 2}) {
      SCOPED_TRACE("axis " + std::to_string(k.axis) + ", " + std::to_string(k.extents.size()) + " sources, " +
                   std::to_string(threads) + " threads");
      omp_set_num_threads(threads);
      const size_t elem = k.type == dt::f32 ? 4 : 1;
      std::vector<memory::desc> srcs;
      std::vector<std::vector<uint8_t>> data;
      memory::dims all = k.dims;
      all[size_t(k.axis)] = 0;
      for (size_t i = 0; i < k.extents.size(); ++i) {
        memory::dims d = k.dims;
        d[size_t(k.axis)] = k.extents[i];
        all[size_t(k.axis)] += k.extents[i];
        srcs.emplace_back(d, k.type, k.layout);
        std::vector<uint8_t> bytes(srcs.back().get_size());
        uint32_t state = uint32_t(20 + i);  // a different byte almost everywhere
        for (uint8_t& v : bytes) v = uint8_t((state = state * 1664525u + 1013904223u) >> 24);
        data.push_back(std::move(bytes));
      }
      const memory::desc dst(all, k.type, k.layout);
      const std::optional<PlainConcat> plan = planPlainConcat(srcs, dst, k.axis);
      ASSERT_TRUE(plan.has_value());
      std::vector<uint8_t> out(dst.get_size(), 0xEE);
      std::vector<const std::byte*> ptrs;
      for (const auto& d : data) ptrs.push_back(reinterpret_cast<const std::byte*>(d.data()));
      plainConcat(*plan, ptrs.data(), reinterpret_cast<std::byte*>(out.data()));
      // Every element of the destination, by index, from the source holding it.
      const int rank = int(all.size());
      std::vector<int64_t> idx(size_t(rank), 0);
      auto offsetIn = [&](const memory::desc& md, const std::vector<int64_t>& at) {
        int64_t o = 0;
        for (int d = 0; d < rank; ++d) o += at[size_t(d)] * md.data.format_desc.blocking.strides[d];
        return size_t(o) * elem;
      };
      size_t checked = 0;
      for (bool more = true; more;) {
        std::vector<int64_t> at = idx;
        size_t src = 0;
        while (at[size_t(k.axis)] >= k.extents[src]) at[size_t(k.axis)] -= k.extents[src++];
        ASSERT_EQ(std::memcmp(out.data() + offsetIn(dst, idx), data[src].data() + offsetIn(srcs[src], at), elem), 0)
            << "element " << checked << " (source " << src << ")";
        ++checked;
        more = false;
        for (int d = rank; d-- > 0;)
          if (++idx[size_t(d)] < all[size_t(d)]) {
            more = true;
            break;
          } else {
            idx[size_t(d)] = 0;
          }
      }
      EXPECT_EQ(checked * elem, dst.get_size());
    }
  omp_set_num_threads(2);
  const memory::desc a({1, 16, 4, 4}, dt::f32, tag::acdb), b({1, 32, 4, 4}, dt::f32, tag::acdb);
  const memory::desc cat({1, 48, 4, 4}, dt::f32, tag::acdb);
  EXPECT_TRUE(planPlainConcat({a, b}, cat, 1).has_value());
  EXPECT_FALSE(planPlainConcat({a, b}, memory::desc({1, 48, 4, 4}, dt::f32, tag::aBcd16b), 1).has_value());
  EXPECT_FALSE(planPlainConcat({a, memory::desc({1, 32, 4, 4}, dt::f32, tag::abcd)}, cat, 1).has_value());
  EXPECT_FALSE(planPlainConcat({a, memory::desc({1, 32, 4, 4}, dt::u8, tag::acdb)}, cat, 1).has_value());
  EXPECT_FALSE(planPlainConcat({a, a}, cat, 1).has_value());
  EXPECT_FALSE(planPlainConcat({a, b}, cat, 4).has_value());
  memory::desc strided = b;  // channels-last with a pixel stride of 40 floats: not dense
  for (int d : {0, 2, 3}) strided.data.format_desc.blocking.strides[d] = strided.data.format_desc.blocking.strides[d] / 32 * 40;
  EXPECT_FALSE(planPlainConcat({a, strided}, cat, 1).has_value());
  memory::desc offset = b;
  offset.data.offset0 = 16;
  EXPECT_FALSE(planPlainConcat({a, offset}, cat, 1).has_value());
}

// The own float32 max pool against oneDNN's pooling primitive on the same step, bit for
// bit: 16-channel blocks and channels-last, 2x2, 3x3 and other windows, pads at either
// end (ONNX's ceil mode writes its extra end pad so), batches, and one and two threads.
TEST(DnnlKernels, FloatMaxPoolMatchesOneDnnPooling) {
  using dt = memory::data_type;
  using tag = memory::format_tag;
  struct Geometry {
    int64_t n, c, in_h, in_w, kernel_h, kernel_w, stride, pad_l, pad_r;
  };
  const Geometry geometries[] = {{1, 64, 111, 111, 3, 3, 2, 0, 0}, {1, 32, 9, 7, 3, 3, 2, 1, 1},
                                 {2, 16, 6, 6, 2, 2, 2, 0, 0},     {1, 48, 7, 7, 2, 2, 2, 0, 1},
                                 {3, 32, 5, 9, 4, 3, 3, 2, 0},     {1, 16, 1, 1, 1, 1, 1, 0, 0}};
  const dnnl::engine& eng = cpuEngine();
  dnnl::stream strm(eng);
  for (tag layout : {tag::aBcd16b, tag::acdb})
    for (const Geometry& g : geometries)
      for (int threads : {1, 2}) {
        SCOPED_TRACE(std::string(layout == tag::acdb ? "channels-last " : "blocked ") + std::to_string(g.n) + "x" +
                     std::to_string(g.c) + "x" + std::to_string(g.in_h) + "x" + std::to_string(g.in_w) + " kernel " +
                     std::to_string(g.kernel_h) + "x" + std::to_string(g.kernel_w) + ", " + std::to_string(threads) +
                     " threads");
        omp_set_num_threads(threads);
        const int64_t out_h = (g.in_h + g.pad_l + g.pad_r - g.kernel_h) / g.stride + 1;
        const int64_t out_w = (g.in_w + g.pad_l + g.pad_r - g.kernel_w) / g.stride + 1;
        Step step;
        step.kind = StepKind::kPooling;
        step.alg = int32_t(dnnl::algorithm::pooling_max);
        step.kernel = {g.kernel_h, g.kernel_w};
        step.strides = {g.stride, g.stride};
        step.pad_l = {g.pad_l, g.pad_l};
        step.pad_r = {g.pad_r, g.pad_r};
        step.dilates = {0, 0};
        const memory::desc src({g.n, g.c, g.in_h, g.in_w}, dt::f32, layout), dst({g.n, g.c, out_h, out_w}, dt::f32, layout);
        step.args = {Arg{DNNL_ARG_SRC, ArgSource::kBuffer, 0, src, false}, Arg{DNNL_ARG_DST, ArgSource::kBuffer, 1, dst, false}};
        const std::optional<MaxPoolWindow> plan = planFloatMaxPool(step);
        ASSERT_TRUE(plan.has_value());
        std::vector<float> x(src.get_size() / 4), want(dst.get_size() / 4, 7.f), got(want.size(), 7.f);
        uint32_t state = 11;  // distinct values of both signs, infinities among them
        for (float& v : x) v = float(int32_t(state = state * 1664525u + 1013904223u)) * 1e-9f;
        x[x.size() / 3] = -INFINITY;
        x[x.size() / 2] = INFINITY;
        dnnl::pooling_v2_forward pool(dnnl::pooling_v2_forward::primitive_desc(
            dnnl::pooling_v2_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::pooling_max, src, dst,
                                           {g.stride, g.stride}, {g.kernel_h, g.kernel_w}, {0, 0}, {g.pad_l, g.pad_l},
                                           {g.pad_r, g.pad_r}),
            eng));
        dnnl::memory ms(src, eng, x.data()), md(dst, eng, want.data());
        pool.execute(strm, {{DNNL_ARG_SRC, ms}, {DNNL_ARG_DST, md}});
        strm.wait();
        floatMaxPool(x.data(), got.data(), *plan);
        // A window of -inf alone: -inf, as ONNX's MaxPool says (oneDNN 2.6 gives the
        // lowest finite float, its maximum's start).
        const bool lone = g.kernel_h * g.kernel_w == 1;
        for (size_t i = 0; i < got.size(); ++i)
          if (lone && x[i] == -INFINITY)
            ASSERT_EQ(got[i], -INFINITY);
          else
            ASSERT_EQ(got[i], want[i]) << "element " << i;
      }
  omp_set_num_threads(2);
  // What it leaves to oneDNN's.
  Step step;
  step.kind = StepKind::kPooling;
  step.alg = int32_t(dnnl::algorithm::pooling_max);
  step.kernel = {3, 3};
  step.strides = {2, 2};
  step.pad_l = step.pad_r = {0, 0};
  step.dilates = {0, 0};
  auto with = [&](const memory::desc& src, const memory::desc& dst, const std::function<void(Step&)>& edit = {}) {
    Step s = step;
    s.args = {Arg{DNNL_ARG_SRC, ArgSource::kBuffer, 0, src, false}, Arg{DNNL_ARG_DST, ArgSource::kBuffer, 1, dst, false}};
    if (edit) edit(s);
    return planFloatMaxPool(s).has_value();
  };
  const memory::desc in({1, 32, 9, 9}, dt::f32, tag::acdb), out({1, 32, 4, 4}, dt::f32, tag::acdb);
  EXPECT_TRUE(with(in, out));
  EXPECT_FALSE(with(memory::desc({1, 32, 9, 9}, dt::f32, tag::abcd), memory::desc({1, 32, 4, 4}, dt::f32, tag::abcd)));
  EXPECT_FALSE(with(memory::desc({1, 24, 9, 9}, dt::f32, tag::acdb), memory::desc({1, 24, 4, 4}, dt::f32, tag::acdb)));
  EXPECT_FALSE(with(in, memory::desc({1, 32, 4, 4}, dt::f32, tag::aBcd16b)));  // layouts differ
  EXPECT_FALSE(with(memory::desc({1, 32, 9, 9}, dt::u8, tag::acdb), memory::desc({1, 32, 4, 4}, dt::u8, tag::acdb)));
  EXPECT_FALSE(with(in, out, [](Step& s) { s.alg = int32_t(dnnl::algorithm::pooling_avg_include_padding); }));
  EXPECT_FALSE(with(in, out, [](Step& s) { s.dilates = {1, 1}; }));
  EXPECT_FALSE(with(in, out, [](Step& s) { s.post_ops.push_back(PostOp{}); }));
  EXPECT_FALSE(with(in, memory::desc({1, 32, 5, 4}, dt::f32, tag::acdb)));  // a window beyond the source
  EXPECT_FALSE(with(in, out, [](Step& s) { s.pad_l = {3, 3}; }));           // a window in the pads alone
  EXPECT_FALSE(with(in, out, [](Step& s) { s.strides = {int64_t(1) << 40, 2}; }));  // checked before multiplying
}

// The own quantizing copy against oneDNN's reorder with the same output scale and
// destination zero point, bit for bit: values on rounding ties, past either end of the
// type, infinities and NaN; u8 and s8; a remainder under 16 elements; one and two
// threads; row-major and channels-last.
TEST(DnnlKernels, QuantizeCopyMatchesOneDnnReorder) {
  using dt = memory::data_type;
  using tag = memory::format_tag;
  const dnnl::engine& eng = cpuEngine();
  dnnl::stream strm(eng);
  struct Case {
    float scale;
    int32_t zero_point;
    dt type;
  };
  const Case cases[] = {{0.5f, 0, dt::u8}, {2.0f, 3, dt::u8}, {1.0f, 128, dt::u8}, {0.25f, -7, dt::s8}, {8.0f, 0, dt::s8}};
  for (tag layout : {tag::abcd, tag::acdb})
    for (const Case& k : cases)
      for (int threads : {1, 2}) {
        SCOPED_TRACE("scale " + std::to_string(k.scale) + " zero point " + std::to_string(k.zero_point) +
                     (k.type == dt::s8 ? " s8 " : " u8 ") + std::to_string(threads) + " threads");
        omp_set_num_threads(threads);
        const memory::dims dims = {2, 16, 5, 7};  // 1120 elements: 70 vectors, no remainder
        const memory::desc src(dims, dt::f32, layout), dst(dims, k.type, layout);
        Step step;
        step.kind = StepKind::kReorder;
        step.quant.output_scales = {k.scale};
        step.quant.dst_zero_point = k.zero_point;
        step.args = {Arg{DNNL_ARG_SRC, ArgSource::kBuffer, 0, src, false}, Arg{DNNL_ARG_DST, ArgSource::kBuffer, 1, dst, false}};
        const std::optional<QuantizeCopy> plan = planQuantizeCopy(step);
        ASSERT_TRUE(plan.has_value());
        std::vector<float> x(src.get_size() / 4);
        uint32_t state = 5;
        for (size_t i = 0; i < x.size(); ++i) {
          state = state * 1664525u + 1013904223u;
          // Half of them on ties (halves), the rest anywhere in [-600, 600).
          x[i] = i % 2 ? float(int32_t(state >> 16) % 1200 - 600) * 0.5f / k.scale
                       : float(int32_t(state >> 8) % 1200000) * 1e-3f - 600.f;
        }
        x[3] = NAN, x[10] = INFINITY, x[17] = -INFINITY, x[24] = 1e30f, x[31] = -1e30f;
        std::vector<uint8_t> want(x.size(), 0xEE), got(x.size(), 0xEE);
        dnnl::primitive_attr attr;
        attr.set_output_scales(0, {k.scale});
        if (k.zero_point) attr.set_zero_points(DNNL_ARG_DST, 0, {k.zero_point});
        dnnl::memory ms(src, eng, x.data()), md(dst, eng, want.data());
        dnnl::reorder(dnnl::reorder::primitive_desc(eng, src, eng, dst, attr)).execute(strm, ms, md);
        strm.wait();
        quantizeCopy(*plan, x.data(), got.data());
        for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(int(got[i]), int(want[i])) << "element " << i << ": " << x[i];
        // A remainder: the first 21 elements alone.
        std::vector<uint8_t> part(32, 0xEE);
        QuantizeCopy few = *plan;
        few.n = 21;
        quantizeCopy(few, x.data(), part.data());
        EXPECT_EQ(std::memcmp(part.data(), got.data(), 21), 0);
        EXPECT_EQ(part[21], 0xEE);
      }
  omp_set_num_threads(2);
  // What it leaves to oneDNN's reorder.
  const memory::desc f({4, 32}, dt::f32, tag::ab), u({4, 32}, dt::u8, tag::ab);
  auto plan = [&](const memory::desc& src, const memory::desc& dst, const std::function<void(Step&)>& edit = {}) {
    Step s;
    s.kind = StepKind::kReorder;
    s.quant.output_scales = {0.5f};
    s.args = {Arg{DNNL_ARG_SRC, ArgSource::kBuffer, 0, src, false}, Arg{DNNL_ARG_DST, ArgSource::kBuffer, 1, dst, false}};
    if (edit) edit(s);
    return planQuantizeCopy(s).has_value();
  };
  EXPECT_TRUE(plan(f, u));
  EXPECT_FALSE(plan(f, memory::desc({4, 32}, dt::u8, tag::ba)));  // layouts differ
  EXPECT_FALSE(plan(f, memory::desc({4, 32}, dt::s32, tag::ab)));
  EXPECT_FALSE(plan(u, f));
  EXPECT_FALSE(plan(memory::desc({1, 32, 2, 2}, dt::f32, tag::aBcd16b), memory::desc({1, 32, 2, 2}, dt::u8, tag::aBcd16b)));
  EXPECT_FALSE(plan(f, u, [](Step& s) { s.quant.output_scales = {0.5f, 0.25f}; }));  // per channel
  EXPECT_FALSE(plan(f, u, [](Step& s) { s.quant.src_zero_point = 3; }));
  EXPECT_FALSE(plan(f, u, [](Step& s) { s.post_ops.push_back(PostOp{}); }));
}

// The module's own dynamic-int8 matmul (planIntMatMul) against oneDNN's primitive on
// the same step: uint8 source with a run-time zero point, int8 weights in the layout
// oneDNN chose and its compensation (made by oneDNN's reorder, as the compiler makes
// them), the scale multiply and linear post-ops (without a shift, the scale product of
// a dynamic-int8 MatMul: oneDNN is given ONNX's order, one multiply by the product,
// which the own kernel computes), and then with a bias row added and
// with the result in blocks of columns (attention's heads: oneDNN's reference
// primitive on that layout): the same bits, at 1 and 2 threads, for row counts that
// leave 1-5 rows after the 6-row tiles and columns that end in a partial vector or
// panel, blocks of 16 to 128 columns.
TEST(DnnlKernels, IntMatMulMatchesOneDnnMatMul) {
  using dt = memory::data_type;
  using tag = memory::format_tag;
  const dnnl::engine& eng = cpuEngine();
  dnnl::stream strm(eng);
  struct Case {
    int64_t m, k, n;
    int32_t zero_point;
    float beta;
    int64_t block;  // columns in blocks of it in the third variant
  };
  const Case cases[] = {{256, 256, 768, 131, 0.f, 64}, {7, 64, 64, 0, 0.f, 16},      {13, 68, 100, 255, 0.5f, 0},
                        {1, 256, 1024, 1, 0.f, 128},   {50, 1024, 256, 77, 0.f, 32}, {49, 128, 200, 128, -2.f, 0},
                        {6, 1024, 128, 255, 0.f, 64}, {11, 64, 96, 3, 0.f, 48}};
  int planned = 0;
  // With and without a linear eltwise after the scale, with and without a bias row:
  // whole panels (N a multiple of 64) take the epilogues compiled for their post-ops
  // (intMatMul's kKnownEpilogue with each combination), the rest the one that tests
  // them.
  for (const Case& k : cases)
    for (int variant = 0; variant < 3; ++variant)  // as projections are; with a bias row; that in blocks
    for (bool linear : {true, false})
    for (int threads : {1, 2}) {
      if (variant == 2 && k.block == 0) continue;
      const bool with_bias = variant > 0;
      const int bias_op = linear ? 2 : 1;
      SCOPED_TRACE(std::to_string(k.m) + "x" + std::to_string(k.k) + "x" + std::to_string(k.n) + " zero point " +
                   std::to_string(k.zero_point) + (linear ? ", linear" : "") + (with_bias ? ", bias" : "") +
                   (variant == 2 ? ", blocks of " + std::to_string(k.block) : "") + ", " + std::to_string(threads) +
                   " threads");
      omp_set_num_threads(threads);
      const memory::desc src({k.m, k.k}, dt::u8, tag::ab), row_major({k.m, k.n}, dt::f32, tag::ab);
      memory::desc dst = row_major;
      if (variant == 2) {  // [N / B][M][B]
        dnnl_memory_desc_t d = row_major.data;
        d.format_desc.blocking.strides[0] = k.block;
        d.format_desc.blocking.strides[1] = k.m * k.block;
        d.format_desc.blocking.inner_nblks = 1;
        d.format_desc.blocking.inner_blks[0] = k.block;
        d.format_desc.blocking.inner_idxs[0] = 1;
        dst = memory::desc(d);
      }
      const memory::desc plain_w({k.k, k.n}, dt::s8, tag::ab), one({1, 1}, dt::f32, tag::ab), zp_md({1}, dt::s32, tag::a);
      const memory::desc bias_md({1, k.n}, dt::f32, tag::ab);
      const float alpha = 0.37f;
      dnnl::primitive_attr attr;
      attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
      // ONNX's Mul(activation scale, weights' scale), then one multiply by the product.
      const bool product = linear && k.beta == 0.0f;
      const int want_bias_op = linear && !product ? 2 : 1;
      dnnl::post_ops ops;
      ops.append_binary(dnnl::algorithm::binary_mul, one);
      if (linear && !product) ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, alpha, k.beta);
      if (with_bias) ops.append_binary(dnnl::algorithm::binary_add, bias_md);
      attr.set_post_ops(ops);
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      // The weights in the layout oneDNN's own kernel chooses for a row-major result (on
      // blocks of columns it has only its reference code, which reads them as given).
      const memory::desc packed_w =
          dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, memory::desc({k.k, k.n}, dt::s8, tag::any), row_major),
                                       attr, eng)
              .weights_desc();
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, packed_w, dst), attr, eng);
      Step step;
      step.kind = StepKind::kMatMul;
      step.args = {Arg{DNNL_ARG_SRC, ArgSource::kBuffer, 0, src, false},
                   Arg{DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, ArgSource::kBuffer, 1, zp_md, false},
                   Arg{DNNL_ARG_WEIGHTS, ArgSource::kConstant, 0, pd.weights_desc(), false},
                   Arg{DNNL_ARG_DST, ArgSource::kBuffer, 2, dst, false},
                   Arg{DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, ArgSource::kBuffer, 3, one, false}};
      step.post_ops = {PostOp{PostOp::Kind::kBinary, int32_t(dnnl::algorithm::binary_mul), 0, 0, 1.0f}};
      if (linear)
        step.post_ops.push_back(
            PostOp{PostOp::Kind::kEltwise, int32_t(dnnl::algorithm::eltwise_linear), alpha, k.beta, 1.0f});
      if (with_bias) {
        step.post_ops.push_back(PostOp{PostOp::Kind::kBinary, int32_t(dnnl::algorithm::binary_add), 0, 0, 1.0f});
        step.args.push_back(
            Arg{DNNL_ARG_ATTR_MULTIPLE_POST_OP(bias_op) | DNNL_ARG_SRC_1, ArgSource::kBuffer, 4, bias_md, false});
      }
      const std::optional<IntMatMul> plan = planIntMatMul(step);
      if (k.n % 64 == 0) {
        ASSERT_TRUE(plan.has_value()) << layoutString(pd.weights_desc());
      }
      if (!plan) continue;
      ++planned;
      uint32_t state = uint32_t(k.m * 131 + k.n);
      auto next = [&] { return (state = state * 1664525u + 1013904223u) >> 8; };
      std::vector<uint8_t> a(size_t(k.m * k.k));
      std::vector<int8_t> w(size_t(k.k * k.n));
      for (uint8_t& v : a) v = uint8_t(next());
      for (int8_t& v : w) v = int8_t(next());
      // One row and one column at the extremes: |sums| past 2^24, rounded to float.
      for (int64_t i = 0; i < k.k; ++i) a[size_t(i)] = 255, w[size_t(i * k.n)] = 127;
      std::vector<std::byte> packed(pd.weights_desc().get_size());
      dnnl::memory mw_plain(plain_w, eng, w.data()), mw(pd.weights_desc(), eng, packed.data());
      dnnl::reorder(mw_plain, mw).execute(strm, mw_plain, mw);
      int32_t zp = k.zero_point;
      float scale = 0.0123f, scale_given_onednn = product ? scale * alpha : scale;
      std::vector<float> bias = testing::randomFloats(size_t(k.n), uint32_t(k.n), -3.0f, 3.0f);
      std::vector<float> want(size_t(k.m * k.n), -1.f), got(size_t(k.m * k.n), -2.f);
      std::vector<std::byte> scratch(pd.scratchpad_desc().get_size() + 64);
      dnnl::memory ma(src, eng, a.data()), mz(zp_md, eng, &zp), md(dst, eng, want.data()),
          ms(one, eng, &scale_given_onednn), mb(bias_md, eng, bias.data()),
          mscratch(pd.scratchpad_desc(), eng, scratch.data());
      std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_SRC, ma},
                                                    {DNNL_ARG_WEIGHTS, mw},
                                                    {DNNL_ARG_DST, md},
                                                    {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, mz},
                                                    {DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, ms},
                                                    {DNNL_ARG_SCRATCHPAD, mscratch}};
      if (with_bias) args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(want_bias_op) | DNNL_ARG_SRC_1] = mb;
      dnnl::matmul(pd).execute(strm, args);
      strm.wait();
      intMatMul(*plan, a.data(), reinterpret_cast<const int8_t*>(packed.data()), zp, scale,
                with_bias ? bias.data() : nullptr, got.data());
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
            << "element " << i << ": " << got[i] << " against " << want[i];
    }
  omp_set_num_threads(2);
  EXPECT_GE(planned, 72);
}

// What planIntMatMul leaves to oneDNN's matmul.
TEST(DnnlKernels, IntMatMulPlansOnlyItsOwnSteps) {
  using dt = memory::data_type;
  using tag = memory::format_tag;
  const memory::desc src({8, 64}, dt::u8, tag::ab), dst({8, 64}, dt::f32, tag::ab), zp_md({1}, dt::s32, tag::a);
  memory::desc packed({64, 64}, dt::s8, tag::BA16a64b4a);
  packed.data.extra.flags = dnnl_memory_extra_flag_compensation_conv_asymmetric_src;
  packed.data.extra.asymm_compensation_mask = 2;
  auto plan = [&](const std::function<void(Step&)>& edit = {}) {
    Step s;
    s.kind = StepKind::kMatMul;
    s.args = {Arg{DNNL_ARG_SRC, ArgSource::kBuffer, 0, src, false},
              Arg{DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, ArgSource::kBuffer, 1, zp_md, false},
              Arg{DNNL_ARG_WEIGHTS, ArgSource::kConstant, 0, packed, false},
              Arg{DNNL_ARG_DST, ArgSource::kBuffer, 2, dst, false}};
    if (edit) edit(s);
    return planIntMatMul(s).has_value();
  };
  const PostOp linear{PostOp::Kind::kEltwise, int32_t(dnnl::algorithm::eltwise_linear), 0.5f, 0.f, 1.0f};
  const PostOp mul{PostOp::Kind::kBinary, int32_t(dnnl::algorithm::binary_mul), 0, 0, 1.0f};
  const Arg one{DNNL_ARG_ATTR_MULTIPLE_POST_OP(1) | DNNL_ARG_SRC_1, ArgSource::kBuffer, 3,
                memory::desc({1, 1}, dt::f32, tag::ab), false};
  EXPECT_TRUE(plan());
  EXPECT_TRUE(plan([](Step& s) { s.post_ops = {PostOp{PostOp::Kind::kEltwise, int32_t(dnnl::algorithm::eltwise_linear), 0.5f, 0.f, 1.0f}}; }));
  // A multiply after the linear eltwise (not the order the kernel applies them in).
  EXPECT_FALSE(plan([&](Step& s) { s.post_ops = {linear, mul}; s.args.push_back(one); }));
  EXPECT_FALSE(plan([&](Step& s) { s.post_ops = {linear, linear}; }));
  EXPECT_FALSE(plan([&](Step& s) { s.post_ops = {mul}; }));  // its operand missing
  EXPECT_FALSE(plan([](Step& s) {
    s.post_ops = {PostOp{PostOp::Kind::kEltwise, int32_t(dnnl::algorithm::eltwise_relu), 0.f, 0.f, 1.0f}};
  }));
  EXPECT_FALSE(plan([](Step& s) { s.quant.output_scales = {0.5f}; }));
  EXPECT_FALSE(plan([](Step& s) { s.args.erase(s.args.begin() + 1); }));  // no zero point
  EXPECT_FALSE(plan([](Step& s) {
    s.args.push_back(Arg{DNNL_ARG_BIAS, ArgSource::kConstant, 1, memory::desc({1, 64}, dt::f32, tag::ab), false});
  }));
  EXPECT_FALSE(plan([](Step& s) { s.find(DNNL_ARG_WEIGHTS)->md = memory::desc({64, 64}, dt::s8, tag::ab); }));
  EXPECT_FALSE(plan([](Step& s) { s.find(DNNL_ARG_WEIGHTS)->source = ArgSource::kBuffer; }));
  EXPECT_FALSE(plan([](Step& s) { s.find(DNNL_ARG_SRC)->md = memory::desc({8, 64}, dt::s8, tag::ab); }));
  EXPECT_FALSE(plan([](Step& s) { s.find(DNNL_ARG_DST)->md = memory::desc({8, 64}, dt::f32, tag::ba); }));
  EXPECT_FALSE(plan([](Step& s) { s.kind = StepKind::kConvolution; }));
}

// The module's own float32 matmul between activations (planFloatMatMul) against a
// double-precision product and oneDNN's primitive on the same step: batched, 2-D and
// 4-D with a leading dim of one, row counts leaving 1-5 rows after the 6-row tiles,
// columns ending in a partial vector or panel, at 1 and 2 threads; the result
// row-major and at other strides (batches interleaved into the rows of [M, B * N], as
// attention's context is written; 2-D: rows N + 3 apart). It sums over K in order,
// oneDNN in blocks: the two agree to float32 rounding, not bit for bit.
TEST(DnnlKernels, FloatMatMulMatchesOneDnnMatMul) {
  using dt = memory::data_type;
  using tag = memory::format_tag;
  const dnnl::engine& eng = cpuEngine();
  dnnl::stream strm(eng);
  struct Case {
    int64_t batch, m, k, n;
    bool four_d = false;  // [1, batch, ...]
  };
  const Case cases[] = {{4, 256, 256, 64}, {4, 256, 64, 256}, {1, 7, 5, 100},
                        {3, 13, 33, 17},   {0, 11, 64, 130},  {2, 9, 16, 40, true}};
  for (const Case& k : cases)
    for (const bool strided : {false, true})
    for (int threads : {1, 2}) {
      SCOPED_TRACE(std::to_string(k.batch) + "x" + std::to_string(k.m) + "x" + std::to_string(k.k) + "x" +
                   std::to_string(k.n) + (strided ? " strided" : "") + ", " + std::to_string(threads) + " threads");
      omp_set_num_threads(threads);
      const bool two_d = k.batch == 0;
      const int64_t batch = two_d ? 1 : k.batch;
      auto md = [&](int64_t r, int64_t c) {
        return two_d    ? memory::desc({r, c}, dt::f32, tag::ab)
               : k.four_d ? memory::desc({1, batch, r, c}, dt::f32, tag::abcd)
                          : memory::desc({batch, r, c}, dt::f32, tag::abc);
      };
      // The result's row and batch strides.
      const int64_t ldc = strided ? (two_d ? k.n + 3 : batch * k.n) : k.n, sb = strided ? k.n : k.m * k.n;
      const memory::desc src = md(k.m, k.k), wei = md(k.k, k.n);
      const memory::desc dst = !strided  ? md(k.m, k.n)
                               : two_d   ? memory::desc({k.m, k.n}, dt::f32, memory::dims{ldc, 1})
                               : k.four_d ? memory::desc({1, batch, k.m, k.n}, dt::f32, memory::dims{batch * k.m * k.n, sb, ldc, 1})
                                          : memory::desc({batch, k.m, k.n}, dt::f32, memory::dims{sb, ldc, 1});
      Step step;
      step.kind = StepKind::kMatMul;
      step.args = {Arg{DNNL_ARG_SRC, ArgSource::kBuffer, 0, src, false},
                   Arg{DNNL_ARG_WEIGHTS, ArgSource::kBuffer, 1, wei, false},
                   Arg{DNNL_ARG_DST, ArgSource::kBuffer, 2, dst, false}};
      const std::optional<FloatMatMul> plan = planFloatMatMul(step);
      ASSERT_TRUE(plan.has_value());
      EXPECT_EQ(plan->ldc, ldc);
      const std::vector<float> a = testing::randomFloats(size_t(batch * k.m * k.k), 3),
                               b = testing::randomFloats(size_t(batch * k.k * k.n), 4);
      std::vector<float> want(dst.get_size() / sizeof(float), -1.f), got(want.size(), -2.f);
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, wei, dst), attr, eng);
      std::vector<std::byte> scratch(pd.scratchpad_desc().get_size() + 64);
      dnnl::memory ma(src, eng, const_cast<float*>(a.data())), mb(wei, eng, const_cast<float*>(b.data())),
          mc(dst, eng, want.data()), ms(pd.scratchpad_desc(), eng, scratch.data());
      dnnl::matmul(pd).execute(strm, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, mc}, {DNNL_ARG_SCRATCHPAD, ms}});
      strm.wait();
      floatMatMul(*plan, a.data(), b.data(), got.data());
      for (int64_t bi = 0; bi < batch; ++bi)
        for (int64_t i = 0; i < k.m; ++i)
          for (int64_t j = 0; j < k.n; ++j) {
            double exact = 0, magnitude = 0;
            for (int64_t q = 0; q < k.k; ++q) {
              const double t = double(a[size_t((bi * k.m + i) * k.k + q)]) * b[size_t((bi * k.k + q) * k.n + j)];
              exact += t;
              magnitude += std::fabs(t);
            }
            const size_t at = size_t(bi * sb + i * ldc + j);
            // Summed in float32: within K ulps of the terms' magnitude.
            const double bound = magnitude * double(k.k) * 6e-8 + 1e-30;
            ASSERT_LE(std::fabs(got[at] - exact), bound) << "element " << at;
            ASSERT_LE(std::fabs(want[at] - got[at]), 2 * bound) << "element " << at;
          }
    }
  omp_set_num_threads(2);
  // What it leaves to oneDNN's matmul: weights in another layout (the keys' transposed
  // copy) or constant, post-ops, a bias.
  const memory::desc src({2, 8, 16}, dt::f32, tag::abc), wei({2, 16, 32}, dt::f32, tag::abc),
      dst({2, 8, 32}, dt::f32, tag::abc);
  auto plan = [&](const std::function<void(Step&)>& edit) {
    Step s;
    s.kind = StepKind::kMatMul;
    s.args = {Arg{DNNL_ARG_SRC, ArgSource::kBuffer, 0, src, false}, Arg{DNNL_ARG_WEIGHTS, ArgSource::kBuffer, 1, wei, false},
              Arg{DNNL_ARG_DST, ArgSource::kBuffer, 2, dst, false}};
    edit(s);
    return planFloatMatMul(s).has_value();
  };
  EXPECT_TRUE(plan([](Step&) {}));
  EXPECT_FALSE(plan([](Step& s) { s.find(DNNL_ARG_WEIGHTS)->md = memory::desc({2, 16, 32}, dt::f32, tag::acb); }));
  EXPECT_FALSE(plan([](Step& s) { s.find(DNNL_ARG_WEIGHTS)->source = ArgSource::kConstant; }));
  EXPECT_FALSE(plan([](Step& s) { s.find(DNNL_ARG_SRC)->md = memory::desc({2, 8, 16}, dt::bf16, tag::abc); }));
  EXPECT_FALSE(plan([](Step& s) {
    s.post_ops = {PostOp{PostOp::Kind::kEltwise, int32_t(dnnl::algorithm::eltwise_relu), 0.f, 0.f, 1.0f}};
  }));
  EXPECT_FALSE(plan([](Step& s) {
    s.args.push_back(Arg{DNNL_ARG_BIAS, ArgSource::kConstant, 0, memory::desc({1, 1, 32}, dt::f32, tag::abc), false});
  }));
  EXPECT_FALSE(plan([](Step& s) { s.find(DNNL_ARG_DST)->md = memory::desc({2, 8, 32}, dt::f32, tag::acb); }));
  // Rows or batches that overlap, an offset.
  // (Set in the descriptor: oneDNN constructs none with overlapping strides.)
  auto strides = [](Step& s, int64_t sb, int64_t ldc) {
    dnnl_memory_desc_t& d = s.find(DNNL_ARG_DST)->md.data;
    d.format_desc.blocking.strides[0] = sb;
    d.format_desc.blocking.strides[1] = ldc;
  };
  EXPECT_FALSE(plan([&](Step& s) { strides(s, 256, 16); }));
  EXPECT_FALSE(plan([&](Step& s) { strides(s, 16, 64); }));
  EXPECT_FALSE(plan([&](Step& s) { strides(s, 32, 48); }));
  EXPECT_TRUE(plan([&](Step& s) { strides(s, 32, 64); }));
  EXPECT_TRUE(plan([&](Step& s) { strides(s, 300, 36); }));
  EXPECT_FALSE(plan([](Step& s) { s.find(DNNL_ARG_DST)->md.data.offset0 = 4; }));
}

TEST(DnnlKernels, PlainTransposeMovesEachElement) {
  using dt = memory::data_type;
  using tag = memory::format_tag;
  struct Case {
    memory::dims dims;
    dt type;
  };
  // [N, 3, H, W] row-major to channels-last: rows of 16 and a remainder, a remainder
  // alone, several images (a thread's share spanning two).
  const std::vector<Case> cases = {{{2, 3, 17, 19}, dt::f32}, {{1, 3, 4, 4}, dt::f32}, {{1, 3, 5, 1}, dt::f32},
                                   {{3, 3, 6, 7}, dt::s32}};
  for (const Case& k : cases)
    for (int threads : {1, 2}) {
      SCOPED_TRACE(std::to_string(k.dims[0]) + "x3x" + std::to_string(k.dims[2]) + "x" + std::to_string(k.dims[3]) +
                   ", " + std::to_string(threads) + " threads");
      omp_set_num_threads(threads);
      const memory::desc src(k.dims, k.type, tag::abcd), dst(k.dims, k.type, tag::acdb);
      const std::optional<PlainTranspose> plan = planPlainTranspose(src, dst);
      ASSERT_TRUE(plan.has_value());
      EXPECT_EQ(plan->cols, 3);
      std::vector<uint32_t> in(src.get_size() / 4), out(in.size(), 0xEEEEEEEEu);
      uint32_t state = 7;  // a different value almost everywhere, NaN bit patterns among them
      for (uint32_t& v : in) v = (state = state * 1664525u + 1013904223u);
      plainTranspose(*plan, reinterpret_cast<const std::byte*>(in.data()), reinterpret_cast<std::byte*>(out.data()));
      const int64_t N = k.dims[0], C = k.dims[1], H = k.dims[2], W = k.dims[3];
      for (int64_t n = 0; n < N; ++n)
        for (int64_t c = 0; c < C; ++c)
          for (int64_t h = 0; h < H; ++h)
            for (int64_t w = 0; w < W; ++w)
              ASSERT_EQ(out[size_t(((n * H + h) * W + w) * C + c)], in[size_t(((n * C + c) * H + h) * W + w)])
                  << "n " << n << " c " << c << " h " << h << " w " << w;
    }
  omp_set_num_threads(2);
  const memory::dims image = {1, 3, 8, 8};
  const memory::desc rgb(image, dt::f32, tag::abcd), last(image, dt::f32, tag::acdb);
  EXPECT_TRUE(planPlainTranspose(rgb, last).has_value());
  EXPECT_FALSE(planPlainTranspose(last, rgb).has_value());  // 64 columns: oneDNN's reorder is faster
  EXPECT_FALSE(planPlainTranspose(rgb, rgb).has_value());   // no transpose
  EXPECT_FALSE(planPlainTranspose(memory::desc({1, 4, 8, 8}, dt::f32, tag::abcd), memory::desc({1, 4, 8, 8}, dt::f32, tag::acdb))
                   .has_value());  // four columns
  EXPECT_FALSE(planPlainTranspose(rgb, memory::desc(image, dt::f32, tag::aBcd16b)).has_value());  // blocked
  EXPECT_FALSE(planPlainTranspose(memory::desc(image, dt::u8, tag::abcd), memory::desc(image, dt::u8, tag::acdb))
                   .has_value());  // one-byte elements
  EXPECT_FALSE(planPlainTranspose(rgb, memory::desc(image, dt::s32, tag::acdb)).has_value());  // types differ
  EXPECT_FALSE(planPlainTranspose(rgb, memory::desc({1, 3, 8, 9}, dt::f32, tag::acdb)).has_value());  // dims differ
  memory::desc strided = last;  // channels-last with a pixel stride of 4 floats: not dense
  for (int d : {0, 2, 3}) strided.data.format_desc.blocking.strides[d] = strided.data.format_desc.blocking.strides[d] / 3 * 4;
  EXPECT_FALSE(planPlainTranspose(rgb, strided).has_value());
}


// addRowCopy against element-by-element copies: a row-major view, a transposed one
// copied along its middle dim (as attention's keys), a run that crosses from one row of
// the source into the next, with and without a bias, on one and two threads.
TEST(DnnlKernels, AddRowCopyFollowsItsDefinition) {
  const int64_t rows = 6, cols = 48;
  const std::vector<float> x = testing::randomFloats(size_t(rows * cols), 11, -4.0f, 4.0f);
  const std::vector<float> bias = testing::randomFloats(size_t(cols), 12, -1.0f, 1.0f);
  const std::vector<CopyView> views = {
      {{2, 6, 8}, {8, 48, 1}, {48, 8, 1}, 0, 2},   // heads of columns 0-15, row-major
      {{2, 8, 6}, {8, 1, 48}, {48, 1, 8}, 16, 1},  // K^T of columns 16-31, copied along dim 1
      {{3, 10}, {60, 1}, {10, 1}, 40, 1},          // runs crossing a row's end
  };
  for (bool with_bias : {false, true})
    for (int threads : {1, 2}) {
      omp_set_num_threads(threads);
      std::vector<std::vector<float>> out(views.size());
      StridedCopy copies[3];
      for (size_t i = 0; i < views.size(); ++i) {
        out[i].assign(size_t(elementsOf(views[i])), NAN);
        copies[i] = stridedCopyOf(views[i], out[i].data());
      }
      addRowCopy(x.data(), with_bias ? bias.data() : nullptr, cols, copies, 3);
      for (size_t i = 0; i < views.size(); ++i) {
        const CopyView& v = views[i];
        const size_t r = v.dims.size();
        std::vector<int64_t> idx(r, 0);
        for (bool more = true; more;) {
          int64_t so = v.offset, dof = 0;
          for (size_t d = 0; d < r; ++d) {
            so += idx[d] * v.src[d];
            dof += idx[d] * v.dst[d];
          }
          const float want = x[size_t(so)] + (with_bias ? bias[size_t(so % cols)] : 0.0f);
          EXPECT_EQ(out[i][size_t(dof)], want) << "view " << i << " at source " << so;
          more = false;
          for (size_t d = r; d-- > 0;)
            if (++idx[d] < v.dims[d]) {
              more = true;
              break;
            } else {
              idx[d] = 0;
            }
        }
      }
    }
  omp_set_num_threads(2);
}

// A bias Add whose result only the head copies after it read (Slice, Reshape and
// Transpose of each third, as a fused QKV projection's output is split into heads; the
// keys transposed for the scores MatMul) is one add_row_copy step, equal to the host's; a blob whose add_row_copy view reaches
// past its source, or whose destinations share a buffer, is refused by name.
TEST(DnnlKernels, BiasAddAndHeadCopiesAreOneStep) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {12, 48});
  ir::AttributeMap last;
  last.setInt("axis", -1);
  // (A Softmax takes no post-ops: the bias Add stays a binary step, as after an int8 matmul.)
  ir::ValueId t = b.node("Add", {b.node("Softmax", {x}, last, 13), b.constant("bias", {48}, testing::randomFloats(48, 3))},
                         {}, 13);
  std::vector<ir::ValueId> heads;
  for (int part = 0; part < 3; ++part) {  // Q, K^T (read by a MatMul: copied as acb), V
    const std::string p = std::to_string(part);
    ir::ValueId s = b.node("Slice",
                           {t, b.constantInts("st" + p, {1}, {int64_t(16 * part)}),
                            b.constantInts("en" + p, {1}, {int64_t(16 * part + 16)}), b.constantInts("ax" + p, {1}, {1})},
                           {}, 13);
    ir::ValueId r = b.node("Reshape", {s, b.constantInts("shape" + p, {3}, {12, 2, 8})}, {}, 13);
    ir::AttributeMap perm;
    perm.setInts("perm", part == 1 ? std::vector<int64_t>{1, 2, 0} : std::vector<int64_t>{1, 0, 2});
    heads.push_back(b.node("Transpose", {r}, perm, 13));
  }
  b.g.outputs.push_back(b.node("MatMul", {heads[0], heads[1]}, {}, 13));
  b.g.outputs.push_back(heads[2]);
  Compiled host = testing::compile(b.g, {"host"});
  Compiled dnnl = testing::compile(b.g, {"dnnl", "host"});
  size_t fused = 0, others = 0;
  for (const DnnlModule::StepInfo& st : allSteps(dnnl)) {
    fused += st.kind == StepKind::kAddRowCopy;
    others += st.kind == StepKind::kBinary || st.kind == StepKind::kReorder;
  }
  EXPECT_EQ(fused, 1u);
  EXPECT_EQ(others, 0u);
  std::vector<ir::OwnedTensor> in = testing::randomInputs(*host.graph, 5);
  std::vector<ir::OwnedTensor> want = host.run(in), got = dnnl.run(in);
  ASSERT_EQ(got.size(), 2u);
  for (size_t i = 0; i < 2; ++i) EXPECT_LE(testing::relativeError(got[i], want[i]), 1e-6) << "output " << i;

  auto loadEdited = [&](const std::function<void(Step&)>& edit) {
    return loadWithEditedStepsOf(dnnl, StepKind::kAddRowCopy, edit);
  };
  EXPECT_NE(loadEdited([](Step& st) { st.find(DNNL_ARG_MULTIPLE_SRC + 1)->md.data.offset0 += 1000; })
                .find("reaches past its source"),
            std::string::npos);
  EXPECT_NE(loadEdited([](Step& st) { st.find(kRowCopyDst[1])->index = st.find(kRowCopyDst[0])->index; })
                .find("share a buffer"),
            std::string::npos);
}

// A dynamic-int8 QKV projection (DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul
// -> bias Add) whose result only its Q, K and V head copies read (Slice, Reshape and
// Transpose of each third; the scores and the context read them) writes its result in blocks of the head size with the bias
// added: one matmul step (no add_row_copy), the heads views of its buffer; the outputs
// equal the host's. Also with a symbolic sequence length (views in a shape-polymorphic
// function: blob version 9; as version 8 the blob is refused by name), at the
// representative length (224) and three others. Not when two copies read the same
// columns (their destinations would share bytes). A blob whose result reaches past its
// buffer is refused.
TEST(DnnlKernels, AnInt8ProjectionWritesItsHeads) {
  const int64_t K = 32, H = 2, D = 16, N = 3 * H * D;
  for (int variant = 0; variant < 3; ++variant) {
    const bool symbolic = variant == 1, overlapping = variant == 2;
    SCOPED_TRACE(symbolic ? "symbolic length" : overlapping ? "Q and K of the same columns" : "12 tokens");
    GraphBuilder b;
    // (Symbolic: [1, S, K], whose representative length is 224.)
    ir::ValueId x = symbolic ? b.symbolicInput("x", {ir::Dim::known(1), ir::Dim::symbolic("S"), ir::Dim::known(K)})
                             : b.input("x", {12, K});
    const int64_t axis = symbolic ? 2 : 1;
    const auto [y, scale, zero] = dynamicQuantizeNode(b, x);
    ir::ValueId w = typedConstant<int8_t>(b, "w", ir::DType::kInt8, {K, N}, int8Weights(size_t(K * N), 3));
    ir::AttributeMap to_float;
    to_float.setInt("to", 1);
    ir::ValueId f = b.node("Cast", {b.node("MatMulInteger", {y, w, zero}, {}, 13, "mm")}, to_float, 13, "cast");
    ir::ValueId s = b.node("Mul", {scale, b.constant("ws", {}, {0.02f})}, {}, 13, "scales");
    ir::ValueId t = b.node("Add", {b.node("Mul", {f, s}, {}, 13, "out"),
                                   b.constant("bias", {N}, testing::randomFloats(size_t(N), 4))},
                           {}, 13, "bias");
    std::vector<ir::ValueId> heads;
    for (int part = 0; part < 3; ++part) {  // Q, K^T (read by a MatMul), V
      const std::string p = std::to_string(part);
      const int64_t third = overlapping && part == 1 ? 0 : part;
      ir::ValueId sl = b.node("Slice",
                              {t, b.constantInts("st" + p, {1}, {int64_t(H * D * third)}),
                               b.constantInts("en" + p, {1}, {int64_t(H * D * (third + 1))}),
                               b.constantInts("ax" + p, {1}, {axis})},
                              {}, 13);
      ir::ValueId r = symbolic ? b.node("Reshape", {sl, b.constantInts("shape" + p, {4}, {1, -1, H, D})}, {}, 13)
                               : b.node("Reshape", {sl, b.constantInts("shape" + p, {3}, {-1, H, D})}, {}, 13);
      ir::AttributeMap perm;
      if (symbolic)
        perm.setInts("perm", part == 1 ? std::vector<int64_t>{0, 2, 3, 1} : std::vector<int64_t>{0, 2, 1, 3});
      else
        perm.setInts("perm", part == 1 ? std::vector<int64_t>{1, 2, 0} : std::vector<int64_t>{1, 0, 2});
      heads.push_back(b.node("Transpose", {r}, perm, 13));
    }
    ir::AttributeMap last;
    last.setInt("axis", -1);
    ir::ValueId scores = b.node("MatMul", {heads[0], heads[1]}, {}, 13);
    b.g.outputs.push_back(scores);
    b.g.outputs.push_back(b.node("MatMul", {b.node("Softmax", {scores}, last, 13), heads[2]}, {}, 13));
    Compiled host = testing::compile(b.g, {"host"});
    ir::Graph lowered = b.g;
    passes::FoldOptions fold;
    fold.max_growth_bytes = 0;
    passes::inferShapes(lowered, fold);
    passes::lowerIntegerCompute(lowered);
    Compiled dnnl = testing::compile(lowered, {"dnnl", "host"});
    ASSERT_EQ(testing::dnnlRegions(dnnl), 1u);
    size_t copies = 0, blocked = 0;
    for (const DnnlModule::StepInfo& st : allSteps(dnnl)) {
      copies += st.kind == StepKind::kAddRowCopy || st.kind == StepKind::kReorder || st.kind == StepKind::kBinary;
      blocked += st.kind == StepKind::kMatMul && st.implementation == "partita:int8_matmul" &&
                 st.label.find("Transpose") != std::string::npos;
    }
    EXPECT_EQ(copies, overlapping ? 1u : 0u);
    EXPECT_EQ(blocked, overlapping ? 0u : 1u);
    const backend::ModuleImage& image = dnnl.parts.modules.at(0);
    EXPECT_EQ(testing::blobVersion(image.blob), symbolic ? 9u : overlapping ? 1u : 3u);
    if (symbolic) {
      EXPECT_NE(testing::readAsVersion(image.blob, 8).find("blob with a buffer that is a view (version 9)"),
                std::string::npos);
    }
    const std::vector<int64_t> lengths = symbolic ? std::vector<int64_t>{224, 12, 7, 40} : std::vector<int64_t>{12};
    uint64_t seed = 20;
    for (int64_t len : lengths) {
      SCOPED_TRACE(std::to_string(len) + " tokens");
      std::vector<ir::OwnedTensor> in = {
          testing::randomTensor(symbolic ? std::vector<int64_t>{1, len, K} : std::vector<int64_t>{len, K}, seed++)};
      std::vector<ir::OwnedTensor> want = host.run(in), got = dnnl.run(in);
      ASSERT_EQ(got.size(), 2u);
      EXPECT_LE(testing::relativeError(got[0], want[0]), 1e-6) << "the scores";
      // (The softmax's exponential is within a few ulp of the host's.)
      EXPECT_LE(testing::relativeError(got[1], want[1]), 1e-5) << "the context";
    }
    if (variant == 0) {
      EXPECT_NE(loadWithEditedSteps(dnnl,
                                    [](Step& st) {
                                      return st.kind == StepKind::kMatMul &&
                                             (st.find(DNNL_ARG_DST)->md.data.format_desc.blocking.strides[1] *= 2,
                                              true);
                                    })
                    .find("larger than its buffer"),
                std::string::npos);
    }
  }
}

// A transposing float32 copy with a contiguous dim of 16 or more on both sides (the
// attention context's heads back to [seq, heads * dim]) is an add_row_copy without a
// bias; a plain copy and a copy that keeps its source's order of dims stay reorders.
TEST(DnnlKernels, TransposingCopiesAreOwnSteps) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {4, 16, 32});
  ir::AttributeMap last, perm;
  last.setInt("axis", -1);
  perm.setInts("perm", {1, 0, 2});
  ir::ValueId h = b.node("Softmax", {x}, last, 13);
  b.g.outputs.push_back(b.node("Transpose", {h}, perm, 13));
  b.g.outputs.push_back(b.node("Slice", {h, b.constantInts("st", {1}, {8}), b.constantInts("en", {1}, {24}),
                                         b.constantInts("ax", {1}, {1})},
                               {}, 13));
  Compiled host = testing::compile(b.g, {"host"});
  Compiled dnnl = testing::compile(b.g, {"dnnl", "host"});
  size_t own = 0, reorders = 0;
  for (const DnnlModule::StepInfo& st : allSteps(dnnl)) {
    own += st.kind == StepKind::kAddRowCopy;
    reorders += st.kind == StepKind::kReorder;
  }
  EXPECT_EQ(own, 1u);
  EXPECT_EQ(reorders, 1u);  // the Slice
  std::vector<ir::OwnedTensor> in = testing::randomInputs(*host.graph, 6);
  std::vector<ir::OwnedTensor> want = host.run(in), got = dnnl.run(in);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_LE(testing::relativeError(got[0], want[0]), 1e-6);
  EXPECT_LE(testing::relativeError(got[1], want[1]), 1e-6);
}

// addRowCopyQuantized against addRowCopy followed by dynamicQuantize, to the byte:
// attention's context heads back to [seq, heads * dim] (the whole source in another
// order: its range read in the source's order), the same with a bias, a window of part
// of the source with runs of 10 (a vector's tail), a NaN and an infinity among the
// values; one and two threads.
TEST(DnnlKernels, AddRowCopyQuantizedFollowsItsDefinition) {
  const int64_t heads = 4, seq = 24, dim = 32;
  const std::vector<CopyView> views = {
      {{seq, heads, dim}, {dim, seq * dim, 1}, {heads * dim, dim, 1}, 0, 2},  // heads back
      {{3, 10}, {dim, 1}, {10, 1}, 40, 1},                                  // a window, runs of 10
  };
  for (const bool special : {false, true})
    for (const bool with_bias : {false, true})
      for (size_t vi = 0; vi < views.size(); ++vi)
        for (int threads : {1, 2}) {
          omp_set_num_threads(threads);
          std::vector<float> x = testing::randomFloats(size_t(heads * seq * dim), 31, -3.0f, 5.0f);
          if (special) {
            x[7] = NAN;
            x[45] = INFINITY;
          }
          const std::vector<float> bias = testing::randomFloats(size_t(dim), 32, -1.0f, 1.0f);
          const int64_t n = elementsOf(views[vi]);
          const float* b = with_bias ? bias.data() : nullptr;
          std::vector<float> copy(size_t(n), NAN);
          StridedCopy c = stridedCopyOf(views[vi], copy.data());
          addRowCopy(x.data(), b, dim, &c, 1);
          std::vector<uint8_t> want(size_t(n), 0), got(size_t(n), 7);
          float want_scale = 0, want_zero = 0, got_scale = -1, got_zero = -1;
          int32_t want_zero_s32 = 0, got_zero_s32 = -1;
          dynamicQuantize(copy.data(), n, want.data(), &want_scale, &want_zero, &want_zero_s32);
          c.dst = nullptr;
          addRowCopyQuantized(x.data(), b, dim, c, got.data(), &got_scale, &got_zero, &got_zero_s32);
          const std::string what = "view " + std::to_string(vi) + (with_bias ? " with bias" : "") +
                                   (special ? " with NaN and inf" : "") + ", " + std::to_string(threads) +
                                   " threads";
          EXPECT_EQ(got, want) << what;
          EXPECT_EQ(got_scale, want_scale) << what;
          EXPECT_EQ(got_zero, want_zero) << what;
          EXPECT_EQ(got_zero_s32, want_zero_s32) << what;
        }
  omp_set_num_threads(2);
}

// Attention's context (the float32 MatMul of the probabilities and the values, the
// module's own kernel) copied back to [seq, heads * dim] for the next MatMul's dynamic
// quantization: the matmul writes it there itself (its result a strided view of the
// copy's destination, writeThroughCopies) and no copy runs; the outputs match the
// host's. Without the pass the copy is a step (fails).
TEST(DnnlKernels, TheContextIsWrittenWhereItsCopyWent) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {4, 16, 16}), v = b.input("v", {4, 16, 32});
  ir::AttributeMap last, perm;
  last.setInt("axis", -1);
  perm.setInts("perm", {1, 0, 2});
  ir::ValueId ctx = b.node("MatMul", {b.node("Softmax", {x}, last, 13), v}, {}, 13, "context");
  ir::ValueId flat = b.node("Reshape", {b.node("Transpose", {ctx}, perm, 13), b.constantInts("shape", {2}, {16, 128})},
                            {}, 13);
  const auto [y, scale, zero] = dynamicQuantizeNode(b, flat);
  b.g.outputs.push_back(b.node("DequantizeLinear", {y, b.constant("unit", {}, {1.0f}), zero}, {}, 13));
  b.g.outputs.push_back(b.node("Mul", {scale, b.constant("two", {}, {2.0f})}, {}, 13));
  Compiled host = testing::compile(b.g, {"host"});
  Compiled dnnl = testing::compile(b.g, {"dnnl", "host"});
  size_t written = 0, copies = 0, quantizations = 0;
  for (const DnnlModule::StepInfo& st : allSteps(dnnl)) {
    written += st.kind == StepKind::kMatMul && st.implementation == "partita:matmul" &&
               st.label.find("Transpose") != std::string::npos;
    copies += st.kind == StepKind::kAddRowCopy ||
              (st.kind == StepKind::kReorder && st.label.find("Transpose") != std::string::npos);
    quantizations += st.kind == StepKind::kDynamicQuantize;
  }
  EXPECT_EQ(written, 1u);
  EXPECT_EQ(copies, 0u);
  EXPECT_EQ(quantizations, 1u);
  std::vector<ir::OwnedTensor> in = testing::randomInputs(*host.graph, 11);
  std::vector<ir::OwnedTensor> want = host.run(in), got = dnnl.run(in);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_LE(testing::closeness(got[0], want[0], 0, 1.0), 1.0);  // centred integers: a rounding apart at most
  EXPECT_LE(testing::closeness(got[1], want[1], 1e-6, 0), 1.0);
}

// The context heads' copy back to [seq, heads * dim] that only the next MatMul's
// dynamic quantization reads is one add_row_copy step with a quantized result and no
// float32 copy (blob version 6); the outputs match the host's; a version 5 blob with
// one, or one with a second view, is refused by name.
TEST(DnnlKernels, ACopyOnlyQuantizedIsQuantizedAsItIsCopied) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {4, 16, 32});
  ir::AttributeMap last, perm;
  last.setInt("axis", -1);
  perm.setInts("perm", {1, 0, 2});
  ir::ValueId h = b.node("Softmax", {x}, last, 13);
  ir::ValueId ctx = b.node("Reshape", {b.node("Transpose", {h}, perm, 13), b.constantInts("shape", {2}, {16, 128})},
                           {}, 13);
  const auto [y, scale, zero] = dynamicQuantizeNode(b, ctx);
  b.g.outputs.push_back(b.node("DequantizeLinear", {y, b.constant("unit", {}, {1.0f}), zero}, {}, 13));
  b.g.outputs.push_back(b.node("Mul", {scale, b.constant("two", {}, {2.0f})}, {}, 13));
  Compiled host = testing::compile(b.g, {"host"});
  Compiled dnnl = testing::compile(b.g, {"dnnl", "host"});
  size_t quantized_copies = 0, others = 0;
  for (const DnnlModule::StepInfo& st : allSteps(dnnl)) {
    quantized_copies += st.kind == StepKind::kAddRowCopy && st.label.find("dql") != std::string::npos;
    // (A reorder gives the integers back as centred floats for the DequantizeLinear's output.)
    others += st.kind == StepKind::kDynamicQuantize ||
              (st.kind == StepKind::kReorder && st.label.find("Transpose") != std::string::npos) ||
              (st.kind == StepKind::kAddRowCopy && st.label.find("dql") == std::string::npos);
  }
  EXPECT_EQ(quantized_copies, 1u);
  EXPECT_EQ(others, 0u);
  const backend::ModuleImage& image = dnnl.parts.modules.at(0);
  EXPECT_EQ(testing::blobVersion(image.blob), 6u);
  std::vector<ir::OwnedTensor> in = testing::randomInputs(*host.graph, 10);
  std::vector<ir::OwnedTensor> want = host.run(in), got = dnnl.run(in);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_LE(testing::closeness(got[0], want[0], 0, 1.0), 1.0);  // centred integers: a rounding apart at most
  EXPECT_LE(testing::closeness(got[1], want[1], 1e-6, 0), 1.0);

  EXPECT_NE(testing::readAsVersion(image.blob, 5).find("add_row_copy with a quantized result in a version 5 blob"),
            std::string::npos);
  EXPECT_NE(loadWithEditedStepsOf(dnnl, StepKind::kAddRowCopy,
                                  [](Step& st) {
                                    Arg second = *st.find(DNNL_ARG_MULTIPLE_SRC);
                                    second.key = DNNL_ARG_MULTIPLE_SRC + 1;
                                    st.args.push_back(second);
                                  })
                .find("more than its one view"),
            std::string::npos);
}

}  // namespace
}  // namespace partita::dnnl_backend
