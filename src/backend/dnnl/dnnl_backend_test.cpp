// The dnnl backend on hand-built graphs: every op family against the host backend
// (same inputs, outputs within 1e-4 relative), the fusions it performs, the constant
// uses it declares, and the nodes it must leave to the host.
#include "backend/dnnl/dnnl_backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "backend/dnnl/dnnl_module.h"
#include "backend/dnnl/dnnl_claims.h"
#include "backend/dnnl/dnnl_memory_desc.h"
#include "backend/dnnl/dnnl_program.h"
#include "backend/dnnl/dnnl_testing.h"
#include "ir/dtype.h"
#include "partita/error.h"

namespace partita::dnnl_backend {
namespace {

using testing::Compiled;
using testing::GraphBuilder;
using testing::randomFloats;

// Attribute maps in one expression: Attrs().i("group", 2).ints("strides", {1, 1}).
struct Attrs {
  ir::AttributeMap map;
  Attrs& i(const char* k, int64_t v) {
    map.setInt(k, v);
    return *this;
  }
  Attrs& ints(const char* k, std::vector<int64_t> v) {
    map.setInts(k, std::move(v));
    return *this;
  }
  Attrs& f(const char* k, float v) {
    map.setFloat(k, v);
    return *this;
  }
  Attrs& s(const char* k, const char* v) {
    map.setString(k, v);
    return *this;
  }
  operator ir::AttributeMap() const { return map; }
};

// Runs the graph host-only and with dnnl,host on the same random inputs and expects
// the same outputs; returns the dnnl compilation for further checks.
Compiled expectMatchesHost(const GraphBuilder& b, size_t expected_regions = 1, double rtol = 1e-4,
                           double atol = 1e-5) {
  Compiled host = testing::compile(b.g, {"host"});
  Compiled dnnl = testing::compile(b.g, {"dnnl", "host"});
  EXPECT_EQ(testing::dnnlRegions(dnnl), expected_regions) << "regions the dnnl backend took";
  std::vector<ir::OwnedTensor> inputs = testing::randomInputs(*host.graph, 7);
  std::vector<ir::OwnedTensor> want = host.run(inputs), got = dnnl.run(inputs);
  EXPECT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size() && i < got.size(); ++i)
    EXPECT_LE(testing::closeness(got[i], want[i], rtol, atol), 1.0) << "output " << i;
  return dnnl;
}

const DnnlModule& moduleOf(const Compiled& c, size_t m = 0) {
  auto* mod = dynamic_cast<const DnnlModule*>(c.modules.at(m).get());
  if (!mod) throw Error(ErrorCode::kInternal, "not a dnnl module");
  return *mod;
}

std::vector<StepKind> stepKinds(const Compiled& c, size_t m = 0, uint32_t fn = 0) {
  std::vector<StepKind> kinds;
  for (const auto& s : moduleOf(c, m).steps(fn)) kinds.push_back(s.kind);
  return kinds;
}

size_t countUses(const Compiled& c, runtime::ConstUseKind kind) {
  size_t n = 0;
  for (const auto& u : c.parts.modules.at(0).uses) n += u.kind == kind;
  return n;
}

struct ConvCase {
  std::vector<int64_t> x, w;
  int64_t group;
  std::vector<int64_t> strides, pads, dilations;
  bool bias;
};

TEST(DnnlConv, MatchesHostAcrossShapes) {
  const std::vector<ConvCase> cases = {
      {{1, 3, 17, 15}, {8, 3, 3, 3}, 1, {1, 1}, {1, 1, 1, 1}, {1, 1}, true},
      {{2, 16, 12, 12}, {32, 16, 1, 1}, 1, {2, 2}, {0, 0, 0, 0}, {1, 1}, false},
      {{1, 8, 10, 9}, {8, 4, 3, 3}, 2, {1, 2}, {0, 1, 2, 0}, {1, 1}, true},      // grouped, asymmetric pads
      {{1, 32, 14, 14}, {32, 1, 3, 3}, 32, {1, 1}, {1, 1, 1, 1}, {1, 1}, true},  // depthwise
      {{1, 4, 11, 11}, {6, 4, 3, 3}, 1, {1, 1}, {2, 2, 2, 2}, {2, 2}, true},     // dilated
      {{1, 5, 20}, {7, 5, 4}, 1, {2}, {1, 2}, {1}, true},                        // 1-D
      {{1, 2, 5, 6, 7}, {4, 2, 3, 3, 3}, 1, {1, 1, 1}, {1, 1, 1, 1, 1, 1}, {1, 1, 1}, true},  // 3-D
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    const ConvCase& k = cases[i];
    GraphBuilder b;
    ir::ValueId x = b.input("x", k.x);
    ir::ValueId w = b.constant("w", k.w, randomFloats(size_t(ir::shapeNumel(k.w)), 11 + i));
    std::vector<ir::ValueId> ins = {x, w};
    if (k.bias) ins.push_back(b.constant("b", {k.w[0]}, randomFloats(size_t(k.w[0]), 3)));
    b.output(b.node("Conv", ins,
                    Attrs()
                        .i("group", k.group)
                        .ints("strides", k.strides)
                        .ints("pads", k.pads)
                        .ints("dilations", k.dilations)));
    expectMatchesHost(b);
  }
}

TEST(DnnlConv, AutoPadSameAndValid) {
  for (const char* mode : {"SAME_UPPER", "SAME_LOWER", "VALID"}) {
    SCOPED_TRACE(mode);
    GraphBuilder b;
    ir::ValueId x = b.input("x", {1, 3, 10, 11});
    ir::ValueId w = b.constant("w", {4, 3, 4, 4}, randomFloats(4 * 3 * 16, 5));
    b.output(b.node("Conv", {x, w}, Attrs().ints("strides", {2, 2}).s("auto_pad", mode)));
    expectMatchesHost(b);
  }
}

TEST(DnnlConvTranspose, MatchesHost) {
  struct Case {
    std::vector<int64_t> x, w;
    int64_t group;
    std::vector<int64_t> strides, pads, output_padding;
    size_t regions;
  };
  const std::vector<Case> cases = {
      {{1, 4, 5, 5}, {4, 6, 3, 3}, 1, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1},
      {{1, 6, 4, 7}, {6, 2, 3, 2}, 3, {1, 2}, {0, 1, 0, 1}, {0, 1}, 1},
      {{2, 3, 8}, {3, 5, 4}, 1, {3}, {1, 2}, {0}, 1},
      // output_padding beyond the end padding: oneDNN would need a negative pad; host.
      {{1, 6, 4, 7}, {6, 2, 3, 2}, 3, {1, 2}, {0, 1, 0, 0}, {0, 1}, 0},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    const Case& k = cases[i];
    GraphBuilder b;
    ir::ValueId x = b.input("x", k.x);
    ir::ValueId w = b.constant("w", k.w, randomFloats(size_t(ir::shapeNumel(k.w)), 21 + i));
    int64_t c_out = k.w[1] * k.group;
    ir::ValueId bias = b.constant("b", {c_out}, randomFloats(size_t(c_out), 4));
    b.output(b.node("ConvTranspose", {x, w, bias},
                    Attrs()
                        .i("group", k.group)
                        .ints("strides", k.strides)
                        .ints("pads", k.pads)
                        .ints("output_padding", k.output_padding)));
    expectMatchesHost(b, k.regions);
  }
}

// Upsampling ConvTranspose (stride = kernel, no pads): a 1x1 convolution with the
// activation fused, then one depth-to-space reorder; no deconvolution primitive.
TEST(DnnlConvTranspose, StrideEqualToKernelIsConvolutionThenDepthToSpace) {
  struct Case {
    std::vector<int64_t> x, w;
    bool bias, relu;
  };
  const std::vector<Case> cases = {
      {{1, 24, 10, 12}, {24, 24, 2, 2}, true, false},  // FPN upsampler
      {{2, 16, 5, 7}, {16, 8, 2, 2}, true, true},
      {{1, 3, 4, 5}, {3, 5, 3, 2}, false, true},  // odd channels, a 3x2 kernel
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    const Case& k = cases[i];
    GraphBuilder b;
    std::vector<ir::ValueId> in = {b.input("x", k.x),
                                   b.constant("w", k.w, randomFloats(size_t(ir::shapeNumel(k.w)), 31 + i))};
    if (k.bias) in.push_back(b.constant("b", {k.w[1]}, randomFloats(size_t(k.w[1]), 5)));
    ir::ValueId y = b.node("ConvTranspose", in, Attrs().ints("strides", {k.w[2], k.w[3]}));
    if (k.relu) y = b.node("Relu", {y});
    b.output(b.node("Sigmoid", {y}));  // a consumer in the region reads the channels-last output
    Compiled d = expectMatchesHost(b);
    const std::vector<StepKind> kinds = stepKinds(d);
    EXPECT_EQ(std::count(kinds.begin(), kinds.end(), StepKind::kDeconvolution), 0);
    EXPECT_EQ(std::count(kinds.begin(), kinds.end(), StepKind::kConvolution), 1);
  }
}

// The padding ONNX derives for ConvTranspose from output_shape or auto_pad: with an
// odd total, SAME_UPPER puts the larger half at the end and everything else (NOTSET
// with output_shape, SAME_LOWER) at the beginning, as the host does.
TEST(DnnlConvTranspose, DerivedPaddingMatchesHost) {
  struct Case {
    const char* auto_pad;
    std::vector<int64_t> output_shape;
  };
  const std::vector<Case> cases = {
      {"NOTSET", {10, 10}},  // total padding 1 per axis
      {"NOTSET", {9, 10}},   // 2 and 1
      {"SAME_UPPER", {}},
      {"SAME_LOWER", {}},
      {"VALID", {}},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(std::string(k.auto_pad) + " output_shape " + ir::shapeStr(k.output_shape));
    GraphBuilder b;
    ir::ValueId x = b.input("x", {1, 2, 5, 5});
    ir::ValueId w = b.constant("w", {2, 3, 3, 3}, randomFloats(2 * 3 * 9, 31));
    ir::AttributeMap a = Attrs().ints("strides", {2, 2}).s("auto_pad", k.auto_pad);
    if (!k.output_shape.empty()) a.setInts("output_shape", k.output_shape);
    b.output(b.node("ConvTranspose", {x, w}, a));
    expectMatchesHost(b);
  }
}

TEST(DnnlMatMul, ConstantWeightsAreDerivedAndBatchesBroadcast) {
  {
    GraphBuilder b;
    ir::ValueId a = b.input("a", {5, 64});
    ir::ValueId w = b.constant("w", {64, 100}, randomFloats(6400, 1));
    b.output(b.node("MatMul", {a, w}));
    Compiled c = expectMatchesHost(b);
    EXPECT_EQ(stepKinds(c), std::vector<StepKind>{StepKind::kMatMul});
  }
  {
    GraphBuilder b;  // batched, both operands computed, batch broadcast
    ir::ValueId a = b.input("a", {2, 3, 4, 8});
    ir::ValueId w = b.input("b", {1, 3, 8, 5});
    b.output(b.node("MatMul", {a, w}));
    expectMatchesHost(b);
  }
  {
    GraphBuilder b;  // a batch of rows against one matrix folds into one GEMM; residual and bias post-ops
    ir::ValueId a = b.node("Relu", {b.input("a", {6, 1, 32})});
    ir::ValueId h = b.node("MatMul", {a, b.constant("w", {32, 32}, randomFloats(1024, 3))});
    ir::ValueId y = b.node("Add", {b.node("Add", {h, b.constant("bias", {32}, randomFloats(32, 4))}), a});
    b.output(b.node("Relu", {y}));
    Compiled c = expectMatchesHost(b);
    // The residual is also the MatMul's source, so it is copied into dst first. The
    // bias Add is the matmul's bias argument; the residual and the Relu post-ops.
    EXPECT_EQ(stepKinds(c),
              (std::vector<StepKind>{StepKind::kEltwise, StepKind::kReorder, StepKind::kMatMul}));
    EXPECT_EQ(moduleOf(c).steps(0)[2].post_ops, 2u);
    EXPECT_NE(moduleOf(c).steps(0)[2].label.find("Add"), std::string::npos);
  }
  {
    GraphBuilder b;  // vector operands
    ir::ValueId a = b.input("a", {7});
    ir::ValueId w = b.constant("w", {3, 7, 4}, randomFloats(84, 2));
    b.output(b.node("MatMul", {a, w}));
    expectMatchesHost(b);
  }
}

TEST(DnnlGemm, AttributesAndBiasForms) {
  struct Case {
    bool trans_a, trans_b;
    float alpha, beta;
    std::vector<int64_t> c;  // empty: no C
    bool c_const;
  };
  const std::vector<Case> cases = {
      {false, false, 1, 1, {}, true},     {false, true, 1, 1, {6}, true},
      {true, false, 1, 1, {1, 6}, true},  {true, true, 0.5f, 2, {4, 6}, true},
      {false, true, 1, 0.25f, {6}, true}, {false, false, 1, 1, {4, 1}, true},
      {false, false, 1, 1, {}, true},     {false, true, 1, 3, {4, 6}, false},
      {false, false, 1, 1, {6}, false},   {false, false, 1, 1, {1}, true},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    const Case& k = cases[i];
    GraphBuilder b;
    ir::ValueId a = b.input("a", k.trans_a ? std::vector<int64_t>{5, 4} : std::vector<int64_t>{4, 5});
    ir::ValueId w = b.constant("w", k.trans_b ? std::vector<int64_t>{6, 5} : std::vector<int64_t>{5, 6},
                               randomFloats(30, 3 + i));
    std::vector<ir::ValueId> ins = {a, w};
    if (!k.c.empty())
      ins.push_back(k.c_const ? b.constant("c", k.c, randomFloats(size_t(ir::shapeNumel(k.c)), 9))
                              : b.input("c", k.c));
    b.output(
        b.node("Gemm", ins,
               Attrs().i("transA", k.trans_a).i("transB", k.trans_b).f("alpha", k.alpha).f("beta", k.beta)));
    expectMatchesHost(b);
  }
}

TEST(DnnlPool, MatchesHost) {
  struct Case {
    const char* op;
    std::vector<int64_t> x, kernel, strides, pads;
    int64_t ceil, include_pad;
    std::vector<int64_t> dilations;
  };
  const std::vector<Case> cases = {
      {"MaxPool", {1, 3, 11, 11}, {3, 3}, {2, 2}, {1, 1, 1, 1}, 0, 0, {}},
      {"MaxPool", {1, 2, 10, 10}, {3, 3}, {2, 2}, {0, 0, 0, 0}, 1, 0, {}},    // ceil_mode
      {"MaxPool", {1, 2, 9, 9}, {2, 2}, {1, 1}, {0, 0, 0, 0}, 0, 0, {2, 2}},  // dilated
      {"MaxPool", {2, 4, 12}, {3}, {2}, {1, 0}, 0, 0, {}},
      {"AveragePool", {1, 3, 11, 11}, {3, 3}, {2, 2}, {1, 1, 1, 1}, 0, 0, {}},
      {"AveragePool", {1, 3, 11, 11}, {3, 3}, {2, 2}, {1, 1, 1, 1}, 0, 1, {}},
      {"AveragePool", {1, 2, 10, 10}, {3, 3}, {2, 2}, {1, 1, 1, 1}, 1, 0, {}},  // ceil_mode, pads not counted
      {"AveragePool", {1, 2, 5, 6, 7}, {2, 2, 2}, {2, 2, 2}, {0, 0, 0, 0, 0, 0}, 0, 0, {}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    const Case& k = cases[i];
    GraphBuilder b;
    ir::ValueId x = b.input("x", k.x);
    ir::AttributeMap a =
        Attrs().ints("kernel_shape", k.kernel).ints("strides", k.strides).ints("pads", k.pads);
    a.setInt("ceil_mode", k.ceil);
    if (std::string(k.op) == "AveragePool") a.setInt("count_include_pad", k.include_pad);
    if (!k.dilations.empty()) a.setInts("dilations", k.dilations);
    b.output(b.node(k.op, {x}, a));
    expectMatchesHost(b);
  }
  for (const char* op : {"GlobalAveragePool", "GlobalMaxPool"}) {
    GraphBuilder b;
    b.output(b.node(op, {b.input("x", {2, 5, 7, 3})}));
    expectMatchesHost(b);
  }
}

// Resize where oneDNN's resampling computes what ONNX asks (dnnl_decode_resize.cpp),
// after a Conv so the source arrives in a blocked layout; the rest stays on the host.
TEST(DnnlResize, ExactModesMatchHostOthersStayOnHost) {
  struct Case {
    const char* mode;
    const char* coord;
    const char* nearest;
    std::vector<float> scales;    // empty: sizes
    std::vector<int64_t> sizes;
    bool on_dnnl;
  };
  const std::vector<Case> cases = {
      {"nearest", "asymmetric", "floor", {1, 1, 2, 2}, {}, true},  // torch F.interpolate(scale_factor=2)
      {"nearest", "half_pixel", "round_prefer_floor", {1, 1, 2, 3}, {}, true},
      {"nearest", "pytorch_half_pixel", "round_prefer_ceil", {}, {1, 8, 18, 27}, true},
      {"nearest", "tf_half_pixel_for_nn", "floor", {1, 1, 4, 4}, {}, true},
      {"linear", "half_pixel", "", {1, 1, 2, 2}, {}, true},
      {"linear", "pytorch_half_pixel", "", {}, {1, 8, 14, 5}, true},  // up on H, down on W
      {"linear", "half_pixel", "", {}, {1, 8, 3, 3}, true},  // down by 3
      {"linear", "half_pixel", "", {1, 1, 0.5f, 0.5f}, {}, false},  // 9 x 0.5 is no exact size
      {"nearest", "asymmetric", "round_prefer_floor", {1, 1, 2, 2}, {}, false},  // y/2 rounds up at odd y
      {"nearest", "half_pixel", "round_prefer_floor", {1, 1, 1.5f, 1.5f}, {}, false},
      {"linear", "align_corners", "", {1, 1, 2, 2}, {}, false},
      {"linear", "asymmetric", "", {1, 1, 2, 2}, {}, false},
      {"cubic", "half_pixel", "", {1, 1, 2, 2}, {}, false},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    const Case& k = cases[i];
    GraphBuilder b;
    ir::ValueId x = b.input("x", {1, 3, 9, 9});
    ir::ValueId c = b.node("Conv", {x, b.constant("w", {8, 3, 1, 1}, randomFloats(24, 1))});
    ir::AttributeMap a = Attrs().s("mode", k.mode).s("coordinate_transformation_mode", k.coord);
    if (*k.nearest) a.setString("nearest_mode", k.nearest);
    ir::ValueId roi = b.constant("roi", {0}, {});
    ir::ValueId r;
    if (!k.scales.empty())
      r = b.node("Resize", {c, roi, b.constant("scales", {4}, k.scales)}, a, 13);
    else
      r = b.node("Resize", {c, roi, b.constant("scales", {0}, {}), b.constantInts("sizes", {4}, k.sizes)}, a, 13);
    b.output(r);
    Compiled d = expectMatchesHost(b);  // one region: the Conv, with the Resize when oneDNN takes it
    const std::vector<StepKind> kinds = stepKinds(d);
    EXPECT_EQ(std::count(kinds.begin(), kinds.end(), StepKind::kResampling), k.on_dnnl ? 1 : 0);
  }
}

TEST(DnnlPool, CeilModeAveragePoolCountingPadsStaysOnHost) {
  GraphBuilder b;
  b.output(b.node("AveragePool", {b.input("x", {1, 2, 10, 10})},
                  Attrs()
                      .ints("kernel_shape", {3, 3})
                      .ints("strides", {2, 2})
                      .ints("pads", {1, 1, 1, 1})
                      .i("ceil_mode", 1)
                      .i("count_include_pad", 1)));
  expectMatchesHost(b, 0);
}

TEST(DnnlEltwise, EveryActivationMatchesHost) {
  struct Case {
    const char* op;
    ir::AttributeMap attrs;
    float lo, hi;
  };
  ir::AttributeMap leaky, elu, hs, clip6;
  leaky.setFloat("alpha", 0.2f);
  elu.setFloat("alpha", 0.7f);
  hs.setFloat("alpha", 0.3f);
  hs.setFloat("beta", 0.4f);
  const std::vector<Case> cases = {
      {"Relu", {}, -3, 3},    {"LeakyRelu", leaky, -3, 3}, {"Elu", elu, -3, 3},      {"Selu", {}, -3, 3},
      {"Sigmoid", {}, -6, 6}, {"HardSigmoid", hs, -4, 4},  {"HardSwish", {}, -5, 5}, {"Tanh", {}, -3, 3},
      {"Abs", {}, -3, 3},     {"Sqrt", {}, 0.01f, 9},      {"Exp", {}, -4, 4},       {"Softplus", {}, -5, 5},
      {"Neg", {}, -3, 3},     {"Round", {}, -3, 3},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.op);
    GraphBuilder b;
    ir::ValueId x = b.input("x", {2, 3, 7, 5});
    b.output(b.node(k.op, {x}, k.attrs));
    Compiled host = testing::compile(b.g, {"host"});
    Compiled dnnl = testing::compile(b.g, {"dnnl", "host"});
    EXPECT_EQ(testing::dnnlRegions(dnnl), 1u);
    ir::OwnedTensor in(ir::DType::kFloat32, {2, 3, 7, 5});
    std::vector<float> r = randomFloats(size_t(in.numel()), 3, k.lo, k.hi);
    if (std::string(k.op) == "Round")
      for (size_t i = 0; i < r.size(); i += 7) r[i] = float(int(r[i])) + 0.5f;  // ties round to even
    std::copy(r.begin(), r.end(), in.as<float>());
    std::vector<ir::OwnedTensor> inputs;
    inputs.push_back(in);
    EXPECT_LE(testing::closeness(dnnl.run(inputs)[0], host.run(inputs)[0]), 1.0);
  }
}

TEST(DnnlEltwise, ClipAndPowTakeConstantScalars) {
  {
    GraphBuilder b;
    ir::ValueId x = b.input("x", {3, 8});
    b.output(b.node("Clip", {x, b.constant("lo", {}, {-0.25f}), b.constant("hi", {}, {0.5f})}, {}, 13));
    expectMatchesHost(b);
  }
  {
    GraphBuilder b;  // opset 6 attributes
    ir::ValueId x = b.input("x", {3, 8});
    b.output(b.node("Clip", {x}, Attrs().f("min", -0.1f).f("max", 0.3f), 6));
    expectMatchesHost(b);
  }
  for (float p : {2.0f, 3.0f, 0.5f}) {
    SCOPED_TRACE(p);
    GraphBuilder b;
    ir::ValueId x = b.input("x", {3, 8});
    ir::ValueId in = p == 0.5f ? b.node("Abs", {x}) : x;
    b.output(b.node("Pow", {in, b.constant("p", {}, {p})}));
    expectMatchesHost(b);
  }
  {
    GraphBuilder b;  // a computed bound stays on the host
    ir::ValueId x = b.input("x", {3, 8});
    ir::ValueId hi = b.input("hi", {});
    b.output(b.node("Clip", {x, b.constant("lo", {}, {0.0f}), hi}, {}, 13));
    expectMatchesHost(b, 0);
  }
}

TEST(DnnlSoftmax, AxisSemanticsOfBothOpsets) {
  for (int opset : {11, 13})
    for (int64_t axis : {0, 1, 2, -1})
      for (const char* op : {"Softmax", "LogSoftmax"}) {
        SCOPED_TRACE(std::string(op) + " opset " + std::to_string(opset) + " axis " + std::to_string(axis));
        GraphBuilder b;
        ir::ValueId x = b.input("x", {3, 4, 5});
        b.output(b.node(op, {x}, Attrs().i("axis", axis), opset));
        expectMatchesHost(b);
      }
}

TEST(DnnlNorm, LayerAndBatchNormalization) {
  for (int64_t axis : {-1, 1}) {
    SCOPED_TRACE(axis);
    GraphBuilder b;
    ir::ValueId x = b.input("x", {2, 3, 8});
    int64_t n = axis == -1 ? 8 : 24;
    std::vector<int64_t> ps = axis == -1 ? std::vector<int64_t>{8} : std::vector<int64_t>{3, 8};
    ir::ValueId s = b.constant("scale", ps, randomFloats(size_t(n), 1, 0.5f, 1.5f));
    ir::ValueId bias = b.constant("bias", ps, randomFloats(size_t(n), 2));
    b.output(b.node("LayerNormalization", {x, s, bias}, Attrs().i("axis", axis).f("epsilon", 1e-3f)));
    expectMatchesHost(b);
  }
  {
    GraphBuilder b;  // standalone BatchNormalization borrows its four parameters
    ir::ValueId x = b.input("x", {2, 6, 5, 5});
    auto p = [&](const char* name, uint64_t seed, float lo, float hi) {
      return b.constant(name, {6}, randomFloats(6, seed, lo, hi));
    };
    b.output(b.node("BatchNormalization",
                    {x, p("g", 1, 0.5f, 1.5f), p("b", 2, -1, 1), p("m", 3, -1, 1), p("v", 4, 0.5f, 2)},
                    Attrs().f("epsilon", 1e-3f), 15));
    Compiled c = expectMatchesHost(b);
    EXPECT_EQ(countUses(c, runtime::ConstUseKind::kBorrow), 4u);
  }
}

TEST(DnnlBinary, BroadcastingAndOperandOrder) {
  struct Case {
    const char* op;
    std::vector<int64_t> a, b;
    bool b_const;
    size_t regions;
  };
  const std::vector<Case> cases = {
      {"Add", {2, 3, 4, 5}, {2, 3, 4, 5}, false, 1},
      {"Sub", {2, 3, 4, 5}, {3, 1, 1}, true, 1},  // per-channel constant
      {"Mul", {2, 3, 4, 5}, {}, true, 1},         // scalar constant (embedded)
      {"Div", {2, 3, 4, 5}, {5}, false, 1},       // broadcast computed operand
      {"Max", {4, 5}, {2, 3, 4, 5}, false, 1},    // commutative: operands swap
      {"Min", {1, 5}, {4, 1}, false, 0},          // both broadcast: host
      {"Sub", {4, 5}, {2, 3, 4, 5}, false, 0},    // first operand broadcast, not commutative: host
      {"Div", {2, 3, 4, 5}, {1, 3, 1, 5}, true, 1},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    const Case& k = cases[i];
    GraphBuilder b;
    ir::ValueId a = b.input("a", k.a);
    ir::ValueId y = k.b_const ? b.constant("b", k.b, randomFloats(size_t(ir::shapeNumel(k.b)), 5, 0.5f, 2))
                              : b.input("b", k.b);
    b.output(b.node(k.op, {a, y}));
    Compiled c = expectMatchesHost(b, k.regions);
    if (i == 2) {
      EXPECT_EQ(countUses(c, runtime::ConstUseKind::kEmbed), 1u);
    }
  }
}

TEST(DnnlFusion, ConvBiasReluIsOneStep) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 16, 8, 8});
  ir::ValueId c = b.node("Conv",
                         {x, b.constant("w", {16, 16, 3, 3}, randomFloats(16 * 16 * 9, 1)),
                          b.constant("b", {16}, randomFloats(16, 2))},
                         Attrs().ints("pads", {1, 1, 1, 1}));
  b.output(b.node("Relu", {c}));
  Compiled d = expectMatchesHost(b);
  std::vector<DnnlModule::StepInfo> steps = moduleOf(d).steps(0);
  size_t convs = 0;
  for (const auto& s : steps)
    if (s.kind == StepKind::kConvolution) {
      ++convs;
      EXPECT_EQ(s.post_ops, 1u);
      EXPECT_NE(s.label.find("Relu"), std::string::npos) << s.label;
    }
  EXPECT_EQ(convs, 1u);
  for (const auto& s : steps) EXPECT_NE(s.kind, StepKind::kEltwise);
}

// ResNet's basic block: conv-relu-conv, + identity, relu. The Add becomes a sum post-op
// of the second conv, written in place over the identity's buffer.
TEST(DnnlFusion, ResidualAddReluBecomesSumPostOp) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 16, 10, 10});
  ir::ValueId x1 =
      b.node("Relu", {b.node("Conv", {x, b.constant("w0", {16, 16, 1, 1}, randomFloats(256, 9))})});
  auto conv = [&](ir::ValueId in, uint64_t seed) {
    return b.node(
        "Conv",
        {in, b.constant("w" + std::to_string(seed), {16, 16, 3, 3}, randomFloats(16 * 16 * 9, seed)),
         b.constant("b" + std::to_string(seed), {16}, randomFloats(16, seed + 1))},
        Attrs().ints("pads", {1, 1, 1, 1}));
  };
  ir::ValueId h = b.node("Relu", {conv(x1, 1)});
  ir::ValueId y = b.node("Relu", {b.node("Add", {conv(h, 3), x1})});
  b.output(y);
  Compiled d = expectMatchesHost(b);
  size_t sums = 0;
  for (const auto& s : moduleOf(d).steps(0)) {
    EXPECT_NE(s.kind, StepKind::kBinary);
    EXPECT_NE(s.kind, StepKind::kEltwise);
    if (s.kind == StepKind::kConvolution && s.post_ops == 2) ++sums;
  }
  EXPECT_EQ(sums, 1u);
  // The residual copy is avoided: the only reorders are at the region's edges.
  size_t reorders = 0;
  for (const auto& s : moduleOf(d).steps(0)) reorders += s.kind == StepKind::kReorder;
  EXPECT_LE(reorders, 2u);
}

TEST(DnnlFusion, ConvBatchNormFoldsIntoDerivedWeights) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 8, 9, 9});
  ir::ValueId c = b.node("Conv", {x, b.constant("w", {16, 8, 3, 3}, randomFloats(16 * 8 * 9, 1))});
  auto p = [&](const char* name, uint64_t seed, float lo, float hi) {
    return b.constant(name, {16}, randomFloats(16, seed, lo, hi));
  };
  ir::ValueId bn =
      b.node("BatchNormalization",
             {c, p("g", 2, 0.5f, 1.5f), p("be", 3, -1, 1), p("m", 4, -1, 1), p("v", 5, 0.5f, 2)}, {}, 15);
  b.output(b.node("Relu", {bn}));
  Compiled d = expectMatchesHost(b);
  std::vector<DnnlModule::StepInfo> steps = moduleOf(d).steps(0);
  EXPECT_EQ(
      std::count_if(steps.begin(), steps.end(), [](const auto& s) { return s.kind == StepKind::kBatchNorm; }),
      0);
  // Weights derived (folded), the four BN parameters absorbed into the blob's bias.
  EXPECT_EQ(countUses(d, runtime::ConstUseKind::kDerive), 1u);
  EXPECT_EQ(countUses(d, runtime::ConstUseKind::kEmbed), 4u);
  EXPECT_EQ(countUses(d, runtime::ConstUseKind::kBorrow), 0u);
}

// EfficientNet's SiLU: x * Sigmoid(x) is oneDNN's swish, fused into the conv before it
// or run as one eltwise step.
TEST(DnnlFusion, SiluBecomesSwish) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 16, 7, 7});
  ir::ValueId c = b.node("Conv", {x, b.constant("w", {16, 16, 1, 1}, randomFloats(256, 1))});
  ir::ValueId silu = b.node("Mul", {c, b.node("Sigmoid", {c})});
  ir::ValueId p = b.node("MaxPool", {silu}, Attrs().ints("kernel_shape", {2, 2}));
  b.output(b.node("Mul", {b.node("Sigmoid", {p}), p}));
  Compiled d = expectMatchesHost(b);
  std::vector<StepKind> kinds = stepKinds(d);
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), StepKind::kBinary), 0);
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), StepKind::kEltwise), 0);
  // Both SiLUs are steps of the module's own swish kernel, not post-ops.
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), StepKind::kSwish), 2);
  for (const auto& s : moduleOf(d).steps(0)) {
    if (s.kind == StepKind::kConvolution) {
      EXPECT_EQ(s.post_ops, 0u);
    }
    if (s.kind == StepKind::kSwish) {
      EXPECT_EQ(s.implementation, "partita:swish");
    }
  }
}

// EfficientNet's squeeze-excitation block over a channels-last tensor: the global
// average pool and the per-channel Mul run as the module's own kernels (channel_mean,
// scale_channels), with a batch of two (a scale per image).
GraphBuilder squeezeExcitation() {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {2, 16, 9, 7});
  ir::ValueId c = b.node("Conv", {x, b.constant("w", {32, 16, 1, 1}, randomFloats(32 * 16, 1))});
  ir::ValueId silu = b.node("Mul", {c, b.node("Sigmoid", {c})});
  ir::ValueId squeeze = b.node("GlobalAveragePool", {silu});
  ir::ValueId fc1 = b.node("Relu", {b.node("Conv", {squeeze, b.constant("w1", {8, 32, 1, 1}, randomFloats(256, 2))})});
  ir::ValueId fc2 = b.node("Conv", {fc1, b.constant("w2", {32, 8, 1, 1}, randomFloats(256, 3))});
  ir::ValueId excited = b.node("Mul", {silu, b.node("Sigmoid", {fc2})});
  b.output(b.node("Conv", {excited, b.constant("w3", {16, 32, 1, 1}, randomFloats(512, 4))}));
  return b;
}

// The pool's mean is written by the SiLU's swish step (blob version 7), which has
// just computed the values it averages.
TEST(DnnlFusion, SqueezeExcitationRunsOnOwnKernels) {
  Compiled d = expectMatchesHost(squeezeExcitation());
  std::vector<StepKind> kinds = stepKinds(d);
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), StepKind::kChannelMean), 0);
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), StepKind::kSwish), 1);
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), StepKind::kScaleChannels), 1);
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), StepKind::kPooling), 0);
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), StepKind::kBinary), 0);
  for (const auto& s : moduleOf(d).steps(0)) {
    if (s.kind == StepKind::kSwish) {
      EXPECT_EQ(s.implementation, "partita:swish");
      EXPECT_NE(s.label.find("GlobalAveragePool"), std::string::npos) << s.label;
    }
    if (s.kind == StepKind::kScaleChannels) {
      EXPECT_EQ(s.implementation, "partita:scale_channels");
    }
  }
  EXPECT_EQ(testing::blobVersion(d.parts.modules.at(0).blob), 7u);
  EXPECT_NE(testing::readAsVersion(d.parts.modules.at(0).blob, 6).find("a swish with a mean in a version 6 blob"),
            std::string::npos);
}

// With a batch of one, the block's two FCs (1x1 convolutions over one position, a SiLU
// after the first, a Sigmoid after the second) are the module's own matrix-vector
// products with their activations (blob version 8); the outputs match the host's.
TEST(DnnlFusion, SqueezeExcitationFCsAreMatrixVectorProducts) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 48, 6, 5});
  ir::ValueId c = b.node("Conv", {x, b.constant("w", {96, 48, 1, 1}, randomFloats(96 * 48, 1))});
  ir::ValueId squeeze = b.node("GlobalAveragePool", {c});
  ir::ValueId fc1 = b.node("Conv", {squeeze, b.constant("w1", {12, 96, 1, 1}, randomFloats(12 * 96, 2)),
                                    b.constant("b1", {12}, randomFloats(12, 3))});
  ir::ValueId silu = b.node("Mul", {fc1, b.node("Sigmoid", {fc1})});
  ir::ValueId fc2 = b.node("Conv", {silu, b.constant("w2", {96, 12, 1, 1}, randomFloats(96 * 12, 4)),
                                    b.constant("b2", {96}, randomFloats(96, 5))});
  ir::ValueId relu = b.node("Relu", {b.node("Conv", {b.node("Sigmoid", {fc2}),
                                                     b.constant("w3", {7, 96, 1, 1}, randomFloats(7 * 96, 6))})});
  b.output(b.node("Mul", {c, b.node("Sigmoid", {fc2})}));
  b.output(relu);
  Compiled d = expectMatchesHost(b);
  std::vector<StepKind> kinds = stepKinds(d);
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), StepKind::kMatVec), 3);
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), StepKind::kConvolution), 1);  // the first, over 30 positions
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), StepKind::kSwish), 0);
  for (const auto& s : moduleOf(d).steps(0)) {
    if (s.kind == StepKind::kMatVec) {
      EXPECT_EQ(s.implementation, "partita:mat_vec");
    }
  }
  EXPECT_EQ(testing::blobVersion(d.parts.modules.at(0).blob), 8u);
  EXPECT_NE(testing::readAsVersion(d.parts.modules.at(0).blob, 7).find("a mat_vec in a version 7 blob"),
            std::string::npos);
}

// A product of one row by weights float16 holds exactly (a float16 model's classifier,
// Gemm with transB as PyTorch exports Linear, or MatMul) is a mat_vec reading them in
// float16; with weights float16 does not hold, oneDNN's matmul (as fast in float32).
TEST(DnnlFusion, AClassifierOverFloat16WeightsIsAMatrixVectorProduct) {
  auto halfExact = [](std::vector<float> v) {
    for (float& x : v) x = ir::halfToFloat(ir::floatToHalf(x));
    return v;
  };
  for (bool gemm : {true, false})
    for (bool exact : {true, false}) {
      SCOPED_TRACE(std::string(gemm ? "Gemm" : "MatMul") + (exact ? ", float16 weights" : ", float32 weights"));
      GraphBuilder b;
      ir::ValueId x = b.input("x", {1, 200});
      std::vector<float> w = randomFloats(200 * 130, 8);
      if (exact) w = halfExact(w);
      ir::ValueId y = gemm ? b.node("Gemm",
                                    {x, b.constant("w", {130, 200}, w), b.constant("b", {130}, randomFloats(130, 9))},
                                    Attrs().i("transB", 1))
                           : b.node("MatMul", {x, b.constant("w", {200, 130}, w)});
      b.output(b.node("Relu", {y}));
      Compiled d = expectMatchesHost(b);
      std::vector<StepKind> kinds = stepKinds(d);
      EXPECT_EQ(std::count(kinds.begin(), kinds.end(), StepKind::kMatVec), exact ? 1 : 0);
      EXPECT_EQ(std::count(kinds.begin(), kinds.end(), StepKind::kMatMul), exact ? 0 : 1);
      // The stored weights: float16, 2 bytes each (130 outputs padded to two blocks of 128).
      size_t half_constants = 0;
      for (const ir::Constant& c : d.graph->constants.all())
        if (c.dtype == ir::DType::kFloat16) {
          ++half_constants;
          EXPECT_EQ(c.nbytes(), size_t(256 * 200 * 2));
        }
      EXPECT_EQ(half_constants, exact ? 1u : 0u);
    }
}

// Attention's Q / sqrt(d) before Q K^T: no step of its own, the product scaled by a
// linear post-op. A Div whose output something else reads too stays a step.
TEST(DnnlFusion, ScaledOperandOfAMatMulScalesItsProduct) {
  for (bool shared : {false, true}) {
    SCOPED_TRACE(shared ? "the scaled value read twice" : "read by the MatMul alone");
    GraphBuilder b;
    ir::ValueId q = b.input("q", {1, 2, 8, 16}), kt = b.input("kt", {1, 2, 16, 8}), v = b.input("v", {1, 2, 8, 16});
    ir::ValueId scaled = b.node("Div", {q, b.constant("d", {}, {4.0f})});
    ir::ValueId scores = b.node("MatMul", {scaled, kt});
    ir::ValueId p = b.node("Softmax", {scores}, Attrs().i("axis", -1));
    ir::ValueId y = b.node("MatMul", {p, v});
    b.output(shared ? b.node("Add", {y, scaled}) : y);
    Compiled d = expectMatchesHost(b, 1, 1e-5, 1e-6);
    size_t div_steps = 0, scaling_matmuls = 0;
    for (const auto& s : moduleOf(d).steps(0)) {
      if (s.label.find("Div") == std::string::npos) continue;
      div_steps += s.kind == StepKind::kBinary;
      if (s.kind == StepKind::kMatMul) {
        ++scaling_matmuls;
        EXPECT_EQ(s.post_ops, 0u) << s.label;  // the scale is the softmax's (foldScaleIntoSoftmax)
      }
    }
    EXPECT_EQ(div_steps, shared ? 1u : 0u);
    EXPECT_EQ(scaling_matmuls, shared ? 0u : 1u);
    const backend::ModuleImage& image = d.parts.modules.at(0);
    float softmax_scale = -1;
    for (const Step& st : readProgram(image.blob.data(), image.blob.size()).functions.at(0).steps)
      if (st.kind == StepKind::kSoftmaxRows) softmax_scale = st.alpha;
    EXPECT_EQ(softmax_scale, shared ? 0.0f : 0.25f);
  }
}

// A Div after a MatMul and before a Softmax along the last dim (attention scores over
// sqrt(head dim) as BERT exports them) is the softmax_rows step's scale when the
// divisor is a power of two (its reciprocal exact: the same bits as the quotient), a
// Mul by any constant too; another divisor stays the matmul's post-op. Blobs with a
// scale are version 5; a version 4 blob with one is refused.
TEST(DnnlFusion, AScaleBeforeASoftmaxIsTheSoftmaxs) {
  struct Case {
    const char* op;
    float c;
    float want;  // the softmax_rows step's scale; 0: none
  };
  for (const Case& k : {Case{"Div", 8.0f, 0.125f}, Case{"Mul", 0.3f, 0.3f}, Case{"Div", 6.0f, 0.0f}}) {
    SCOPED_TRACE(std::string(k.op) + " " + std::to_string(k.c));
    GraphBuilder b;
    ir::ValueId q = b.input("q", {2, 8, 16}), kt = b.input("kt", {2, 16, 8});
    ir::ValueId scores = b.node("MatMul", {q, kt});
    ir::ValueId scaled = b.node(k.op, {scores, b.constant("c", {}, {k.c})});
    b.output(b.node("Softmax", {scaled}, Attrs().i("axis", -1)));
    Compiled d = expectMatchesHost(b, 1, 1e-6, 1e-7);
    const backend::ModuleImage& image = d.parts.modules.at(0);
    const Program p = readProgram(image.blob.data(), image.blob.size());
    float scale = -1;
    size_t other = 0;
    for (const Step& st : p.functions.at(0).steps) {
      if (st.kind == StepKind::kSoftmaxRows) scale = st.alpha;
      other += st.kind != StepKind::kSoftmaxRows && st.kind != StepKind::kMatMul;
    }
    EXPECT_EQ(scale, k.want);
    EXPECT_EQ(other, 0u);
    EXPECT_EQ(testing::blobVersion(image.blob), k.want != 0 ? 5u : 1u);
    if (k.want != 0) {
      const std::string error = testing::readAsVersion(image.blob, 4);
      EXPECT_NE(error.find("softmax_rows with a scale"), std::string::npos) << error;
    }
  }
}

// MobileNetV3's HardSwish as exported before opset 14: x * HardSigmoid(x) with alpha
// 1/6 is oneDNN's hardswish, fused into the conv or one eltwise step; the default
// alpha (0.2) is not a HardSwish and stays two steps.
TEST(DnnlFusion, HardSigmoidTimesInputBecomesHardSwish) {
  auto hs = [](float alpha) {
    ir::AttributeMap a;
    a.setFloat("alpha", alpha);
    return a;
  };
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 16, 7, 7});
  ir::ValueId c = b.node("Conv", {x, b.constant("w", {16, 16, 1, 1}, randomFloats(256, 3, -4.0f, 4.0f))});
  ir::ValueId y = b.node("Mul", {c, b.node("HardSigmoid", {c}, hs(1.0f / 6.0f))});
  ir::ValueId p = b.node("MaxPool", {y}, Attrs().ints("kernel_shape", {2, 2}));
  ir::ValueId q = b.node("Mul", {b.node("HardSigmoid", {p}, hs(1.0f / 6.0f)), p});
  b.output(b.node("Mul", {q, b.node("HardSigmoid", {q}, hs(0.2f))}));
  Compiled d = expectMatchesHost(b);
  std::vector<StepKind> kinds = stepKinds(d);
  // Only the alpha 0.2 product stays a binary step (three without the fusion).
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), StepKind::kBinary), 1);
  for (const auto& s : moduleOf(d).steps(0))
    if (s.kind == StepKind::kConvolution) {
      EXPECT_EQ(s.post_ops, 1u);
    }
}

// A constant row added after another post-op cannot be the matmul's bias: it is a
// binary step of its own (oneDNN 2.6's matmul applies a row operand slowly), taking
// the Relu after it. The scalar Mul before it stays a post-op.
TEST(DnnlFusion, RowOperandAfterThePostOpsStartEndsTheMatMulChain) {
  GraphBuilder b;
  ir::ValueId h = b.node("MatMul", {b.input("x", {8, 16}), b.constant("w", {16, 32}, randomFloats(512, 1))});
  ir::ValueId y = b.node("Add", {b.node("Mul", {h, b.constant("s", {}, {0.25f})}),
                                 b.constant("bias", {32}, randomFloats(32, 2))});
  b.output(b.node("Relu", {y}));
  Compiled d = expectMatchesHost(b);
  EXPECT_EQ(stepKinds(d), (std::vector<StepKind>{StepKind::kMatMul, StepKind::kBinary}));
  EXPECT_EQ(moduleOf(d).steps(0)[0].post_ops, 1u);  // times s
  EXPECT_EQ(moduleOf(d).steps(0)[1].post_ops, 1u);  // the bias Add, then Relu
}

// A bias Add step (the chain above, or a dynamic-int8 MatMul's) followed by the
// layer's residual Add of a value computed earlier: one binary step whose post-op
// adds the full-size residual, then the Relu.
TEST(DnnlFusion, BinaryStepTakesTheResidualAsAPostOp) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {8, 32});
  ir::ValueId skip = b.node("Sigmoid", {x});
  ir::ValueId h = b.node("MatMul", {skip, b.constant("w", {32, 32}, randomFloats(1024, 3))});
  ir::ValueId y = b.node("Add", {b.node("Mul", {h, b.constant("s", {}, {0.25f})}),
                                 b.constant("bias", {32}, randomFloats(32, 4))});
  b.output(b.node("Relu", {b.node("Add", {skip, y})}));
  Compiled d = expectMatchesHost(b);
  EXPECT_EQ(stepKinds(d), (std::vector<StepKind>{StepKind::kEltwise, StepKind::kMatMul, StepKind::kBinary}));
  EXPECT_EQ(moduleOf(d).steps(0)[2].post_ops, 2u);  // plus the residual, then Relu
}

// PyTorch's Gelu export (Div, Erf, Add, Mul, Mul) is one gelu_erf: a post-op of the
// MatMul+bias before it, or one eltwise step. The second one divides by sqrt(2) as a
// float16 model stores it (1.4140625): still GELU, within float16's resolution.
TEST(DnnlFusion, GeluBecomesGeluErf) {
  auto gelu = [](GraphBuilder& b, ir::ValueId x, float sqrt2 = 1.4142135f) {
    ir::ValueId e = b.node("Erf", {b.node("Div", {x, b.constant("sqrt2", {}, {sqrt2})})});
    ir::ValueId m = b.node("Mul", {x, b.node("Add", {e, b.constant("one", {}, {1.0f})})});
    return b.node("Mul", {m, b.constant("half", {}, {0.5f})});
  };
  GraphBuilder b;
  ir::ValueId x = b.input("x", {4, 16});
  ir::ValueId h = b.node("Add", {b.node("MatMul", {x, b.constant("w", {16, 32}, randomFloats(512, 1))}),
                                 b.constant("bias", {32}, randomFloats(32, 2))});
  ir::ValueId y = gelu(b, h);
  b.output(gelu(b, b.node("Softmax", {y}), 1.4140625f));
  Compiled d = expectMatchesHost(b);
  std::vector<StepKind> kinds = stepKinds(d);
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), StepKind::kBinary), 0);
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), StepKind::kEltwise), 0);
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), StepKind::kBiasGelu), 1);  // after the Softmax
  EXPECT_EQ(kinds.front(), StepKind::kMatMul);
  EXPECT_EQ(moduleOf(d).steps(0).front().post_ops, 1u);  // gelu (the bias is the matmul's argument)
  GraphBuilder lone;                                     // Erf elsewhere stays on the host
  lone.output(lone.node("Erf", {lone.input("x", {4})}));
  expectMatchesHost(lone, 0);
}

// LayerNormalization as PyTorch exports it at opset 13 (ten nodes) is one oneDNN
// layer normalization with borrowed gamma and beta.
TEST(DnnlFusion, DecomposedLayerNormIsOneStep) {
  GraphBuilder b;
  ir::ValueId x = b.node("Relu", {b.input("x", {2, 5, 16})});
  ir::AttributeMap last = Attrs().ints("axes", {-1});
  ir::ValueId d = b.node("Sub", {x, b.node("ReduceMean", {x}, last, 13)});
  ir::ValueId v = b.node("ReduceMean", {b.node("Pow", {d, b.constant("two", {}, {2.0f})})}, last, 13);
  ir::ValueId s = b.node("Sqrt", {b.node("Add", {v, b.constant("eps", {}, {1e-5f})})});
  ir::ValueId n = b.node("Div", {d, s});
  ir::ValueId y =
      b.node("Add", {b.node("Mul", {n, b.constant("gamma", {16}, randomFloats(16, 1, 0.5f, 1.5f))}),
                     b.constant("beta", {16}, randomFloats(16, 2))});
  b.output(b.node("Tanh", {y}));
  Compiled c = expectMatchesHost(b);
  std::vector<StepKind> kinds = stepKinds(c);
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), StepKind::kLayerNorm), 1);
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), StepKind::kBinary), 0);
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), StepKind::kReduction), 0);
}

TEST(DnnlUses, ConvWeightsDerivedWithFullLayoutBiasBorrowed) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 16, 6, 6});
  ir::ValueId w = b.constant("w", {32, 16, 3, 3}, randomFloats(32 * 16 * 9, 1));
  ir::ValueId bias = b.constant("b", {32}, randomFloats(32, 2));
  b.output(b.node("Conv", {x, w, bias}));
  Compiled d = expectMatchesHost(b);
  const auto& uses = d.parts.modules.at(0).uses;
  ASSERT_EQ(uses.size(), 2u);
  const ir::ConstId w_id = b.g.value(w).constant, b_id = b.g.value(bias).constant;
  bool derived = false, borrowed = false;
  for (const auto& u : uses) {
    if (u.kind == runtime::ConstUseKind::kDerive) {
      derived = true;
      EXPECT_EQ(u.source, w_id);
      const ir::Constant& c = d.graph->constants.get(u.id);
      EXPECT_EQ(c.layout.rfind("dnnl:f32:", 0), 0u) << c.layout;
      EXPECT_EQ(c.layout.substr(c.layout.rfind(':')), ":32,16,3,3") << c.layout;
      EXPECT_EQ(c.nbytes(), size_t(ir::shapeNumel(c.shape)) * 4);
    }
    if (u.kind == runtime::ConstUseKind::kBorrow) {
      borrowed = true;
      EXPECT_EQ(u.id, b_id);
    }
  }
  EXPECT_TRUE(derived);
  EXPECT_TRUE(borrowed);
}

TEST(DnnlUses, SharedWeightsAreDerivedOnce) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 16, 6, 6});
  ir::ValueId w = b.constant("w", {16, 16, 3, 3}, randomFloats(16 * 16 * 9, 1));
  ir::ValueId y = b.node("Conv", {b.node("Conv", {x, w}, Attrs().ints("pads", {1, 1, 1, 1})), w},
                         Attrs().ints("pads", {1, 1, 1, 1}));
  b.output(y);
  Compiled d = expectMatchesHost(b);
  EXPECT_EQ(countUses(d, runtime::ConstUseKind::kDerive), 1u);
}

// One use per constant: C scaled into the blob by one Gemm (beta 2) and borrowed as
// it is by another is declared once, as a borrow.
TEST(DnnlUses, OneUsePerConstantBorrowWins) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {3, 4});
  ir::ValueId w = b.constant("w", {4, 4}, randomFloats(16, 1));
  ir::ValueId c = b.constant("c", {4}, randomFloats(4, 2));
  ir::ValueId y = b.node("Gemm", {x, w, c}, Attrs().f("beta", 2.0f));
  b.output(b.node("Gemm", {b.node("Relu", {y}), w, c}));
  Compiled d = expectMatchesHost(b);
  const auto& uses = d.parts.modules.at(0).uses;
  for (size_t i = 1; i < uses.size(); ++i) EXPECT_LT(uses[i - 1].id, uses[i].id);
  const ir::ConstId c_id = b.g.value(c).constant;
  auto it = std::find_if(uses.begin(), uses.end(), [&](const auto& u) { return u.id == c_id; });
  ASSERT_NE(it, uses.end());
  EXPECT_EQ(it->kind, runtime::ConstUseKind::kBorrow);
}

TEST(DnnlViews, FlattenBetweenPoolAndGemmStaysInOneRegion) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 16, 7, 7});
  ir::ValueId c =
      b.node("Relu", {b.node("Conv", {x, b.constant("w", {32, 16, 3, 3}, randomFloats(32 * 16 * 9, 3))})});
  ir::ValueId f = b.node("Flatten", {b.node("GlobalAveragePool", {c})}, Attrs().i("axis", 1));
  b.output(b.node(
      "Gemm",
      {f, b.constant("fc", {10, 32}, randomFloats(320, 4)), b.constant("fb", {10}, randomFloats(10, 5))},
      Attrs().i("transB", 1)));
  Compiled d = expectMatchesHost(b);
  EXPECT_EQ(d.graph->nodes.size(), 1u);
}

TEST(DnnlViews, ReshapeSqueezeUnsqueezeIdentity) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {2, 3, 4});
  ir::ValueId r = b.node("Reshape", {b.node("Relu", {x}), b.constantInts("shape", {2}, {6, 4})});
  ir::ValueId u = b.node("Unsqueeze", {r, b.constantInts("axes", {1}, {0})}, {}, 13);
  ir::ValueId s = b.node("Squeeze", {b.node("Identity", {u}), b.constantInts("axes2", {1}, {0})}, {}, 13);
  b.output(b.node("Sigmoid", {s}));
  b.output(r);  // an intermediate output: the region writes it too
  expectMatchesHost(b);
}

// A classifier's Flatten of a convolution's channels-last output, read by a Gemm
// (transposed weights, alpha) or a MatMul: no reorder to row-major for the Flatten;
// the weights' rows are permuted at compile time to the (h, w, c) order of the bytes.
TEST(DnnlMove, FlattenOfChannelsLastFoldsIntoTheWeights) {
  for (bool gemm : {true, false}) {
    SCOPED_TRACE(gemm ? "Gemm" : "MatMul");
    GraphBuilder b;
    ir::ValueId x = b.input("x", {2, 3, 6, 5});
    ir::ValueId c = b.node("Relu", {b.node("Conv", {x, b.constant("w", {16, 3, 3, 3}, randomFloats(16 * 27, 1))},
                                           Attrs().ints("pads", {1, 1, 1, 1}))});
    ir::ValueId f = b.node("Flatten", {c}, Attrs().i("axis", 1), 13, "flat");
    const int64_t K = 16 * 6 * 5;
    if (gemm)
      b.output(b.node("Gemm",
                      {f, b.constant("fc", {10, K}, randomFloats(size_t(10 * K), 2)),
                       b.constant("fb", {10}, randomFloats(10, 3))},
                      Attrs().i("transB", 1).f("alpha", 0.5f)));
    else
      b.output(b.node("MatMul", {f, b.constant("fc", {K, 10}, randomFloats(size_t(10 * K), 2))}));
    Compiled d = expectMatchesHost(b);
    // The input's reorder to channels-last only (no "to row-major" for the Flatten).
    size_t reorders = 0, convs = 0;
    for (const auto& s : moduleOf(d).steps(0)) {
      reorders += s.kind == StepKind::kReorder;
      convs += s.kind == StepKind::kConvolution && s.implementation.find("avx512") != std::string::npos;
    }
    EXPECT_EQ(convs, 1u);
    EXPECT_EQ(reorders, 1u);
  }
}

TEST(DnnlMove, TransposeAndSliceAreReorders) {
  GraphBuilder b;
  ir::ValueId x = b.node("Relu", {b.input("x", {2, 3, 4, 5})});
  ir::ValueId t = b.node("Transpose", {x}, Attrs().ints("perm", {0, 2, 3, 1}));
  ir::ValueId s =
      b.node("Slice", {t, b.constantInts("starts", {2}, {1, -3}), b.constantInts("ends", {2}, {3, 100}),
                       b.constantInts("axes", {2}, {1, 3})});
  b.output(b.node("Sigmoid", {s}));
  b.output(b.node("Transpose", {x}));  // default: reversed axes
  Compiled d = expectMatchesHost(b);
  std::vector<StepKind> kinds = stepKinds(d);
  // The slice of the transposed copy reads the source directly (composeViews): one
  // reorder for both, and one for the reversed transpose.
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), StepKind::kReorder), 2);
  GraphBuilder b2;  // a step other than 1 stays on the host
  ir::ValueId y = b2.node("Relu", {b2.input("y", {8})});
  b2.output(b2.node("Slice", {y, b2.constantInts("s", {1}, {0}), b2.constantInts("e", {1}, {8}),
                              b2.constantInts("a", {1}, {0}), b2.constantInts("st", {1}, {2})}));
  expectMatchesHost(b2, 1);
}

// A batch-1 encoder's attention heads: [S, 1, 3H] -> [1, S, 3H] moves only a dim of
// size 1 (a view, no step); each third of the fused QKV projection is sliced,
// reshaped to heads and transposed: one reorder each (mergeReorderPairs with
// composeViews), where there were a copy for the Slice and one for the Transpose.
TEST(DnnlMove, SlicedHeadsAreOneReorderEach) {
  GraphBuilder b;
  ir::ValueId x = b.node("Relu", {b.input("x", {8, 1, 48})});
  ir::ValueId t = b.node("Transpose", {x}, Attrs().ints("perm", {1, 0, 2}));
  for (int64_t k = 0; k < 3; ++k) {
    const std::string n = std::to_string(k);
    ir::ValueId s = b.node("Slice", {t, b.constantInts("s" + n, {1}, {16 * k}), b.constantInts("e" + n, {1}, {16 * k + 16}),
                                     b.constantInts("a" + n, {1}, {2})});
    ir::ValueId r = b.node("Reshape", {s, b.constantInts("shape" + n, {3}, {8, 2, 8})});
    b.output(b.node("Sigmoid", {b.node("Transpose", {r}, Attrs().ints("perm", {1, 0, 2}))}));
  }
  Compiled d = expectMatchesHost(b);
  std::vector<StepKind> kinds = stepKinds(d);
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), StepKind::kReorder), 3);
}

TEST(DnnlMove, ComposedViews) {
  // The middle third of [8, 1, 48], copied to row-major [8, 1, 16], read as [2, 8, 8]
  // (heads first): the same elements straight from the source.
  memory::desc slice = withStrides({8, 1, 16}, {48, 48, 1});
  slice.data.offset0 = 16;
  std::optional<memory::desc> heads = composeViews(slice, withStrides({2, 8, 8}, {8, 16, 1}));
  ASSERT_TRUE(heads.has_value());
  EXPECT_EQ(dimsOf(*heads), (std::vector<int64_t>{2, 8, 8}));
  EXPECT_EQ(elementStrides(*heads), (std::vector<int64_t>{8, 48, 1}));
  EXPECT_EQ(heads->data.offset0, 16);
  // An offset into the copy: element (1, 0, 3) of it, 3 rows of the source further on.
  memory::desc later = withStrides({1, 1, 4}, {16, 16, 1});
  later.data.offset0 = 16 + 3;
  std::optional<memory::desc> part = composeViews(slice, later);
  ASSERT_TRUE(part.has_value());
  EXPECT_EQ(part->data.offset0, 16 + 48 + 3);
  // Reading the copy flat would carry from one row into the next: no strided view.
  EXPECT_FALSE(composeViews(slice, withStrides({128}, {1})).has_value());
  // Steps that are not a whole number of the copy's rows: none either.
  EXPECT_FALSE(composeViews(slice, withStrides({4, 2}, {24, 1})).has_value());
}

TEST(DnnlReduce, EveryReductionMatchesHost) {
  for (const char* op : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                         "ReduceL2", "ReduceSumSquare"})
    for (int64_t keep : {0, 1}) {
      SCOPED_TRACE(std::string(op) + " keepdims " + std::to_string(keep));
      GraphBuilder b;
      ir::ValueId x = b.input("x", {2, 3, 4, 5});
      if (std::string(op) == "ReduceSum")
        b.output(b.node(op, {x, b.constantInts("axes", {2}, {1, -1})}, Attrs().i("keepdims", keep), 13));
      else
        b.output(b.node(op, {x}, Attrs().ints("axes", {1, -1}).i("keepdims", keep), 11));
      expectMatchesHost(b);
    }
  GraphBuilder b;  // all axes
  b.output(b.node("ReduceMean", {b.input("x", {3, 7})}, {}, 11));
  expectMatchesHost(b);
}

TEST(DnnlConcat, KeepsProducerLayoutOrGoesRowMajor) {
  GraphBuilder b;
  ir::ValueId x = b.node("Relu", {b.input("x", {1, 16, 6, 6})});  // one producer: one region
  ir::ValueId a =
      b.node("Relu", {b.node("Conv", {x, b.constant("w1", {16, 16, 1, 1}, randomFloats(256, 1))})});
  ir::ValueId c =
      b.node("Relu", {b.node("Conv", {x, b.constant("w2", {16, 16, 3, 3}, randomFloats(16 * 16 * 9, 2))},
                             Attrs().ints("pads", {1, 1, 1, 1}))});
  b.output(b.node("Concat", {a, c}, Attrs().i("axis", 1)));
  expectMatchesHost(b);
  GraphBuilder b2;  // plain inputs and a constant operand
  ir::ValueId p = b2.input("p", {3, 5});
  b2.output(b2.node("Concat", {p, b2.constant("k", {2, 5}, randomFloats(10, 3)), p}, Attrs().i("axis", 0)));
  expectMatchesHost(b2);
}

TEST(DnnlPrelu, BroadcastSlopes) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {2, 3, 4, 5});
  b.output(b.node("PRelu", {x, b.constant("s", {3, 1, 1}, randomFloats(3, 1))}));
  expectMatchesHost(b);
}

TEST(DnnlSupport, RejectsWhatItCannotRunExactly) {
  auto why = [](GraphBuilder& b) {
    passes::FoldOptions fold;
    fold.max_growth_bytes = 0;
    passes::inferShapes(b.g, fold);
    std::string reason;
    EXPECT_FALSE(supportsNode(b.g, b.g.nodes.back(), &reason));
    return reason;
  };
  {
    GraphBuilder b;  // weights computed at run time
    ir::ValueId x = b.input("x", {1, 2, 5, 5});
    b.node("Conv", {x, b.input("w", {3, 2, 3, 3})});
    EXPECT_NE(why(b).find("weights"), std::string::npos);
  }
  {
    GraphBuilder b;  // float64
    ir::ValueId x = b.g.addValue("x", ir::TensorType::of(ir::DType::kFloat64, {4}));
    b.g.inputs.push_back(x);
    b.node("Relu", {x});
    EXPECT_NE(why(b).find("float32"), std::string::npos);
  }
  {
    GraphBuilder b;  // unknown batch size
    ir::ValueId x = b.g.addValue(
        "x", ir::TensorType{ir::DType::kFloat32, true, {ir::Dim::symbolic("N"), ir::Dim::known(4)}});
    b.g.inputs.push_back(x);
    b.node("Relu", {x});
    EXPECT_NE(why(b).find("static"), std::string::npos);
  }
  {
    GraphBuilder b;  // oneDNN's log is 1.4e-6 off at 1
    b.node("Log", {b.input("x", {4})});
    EXPECT_NE(why(b).find("not handled"), std::string::npos);
  }
  {
    GraphBuilder b;  // a view with nothing to ride along with
    b.node("Flatten", {b.input("x", {2, 3, 4})});
    EXPECT_NE(why(b).find("view"), std::string::npos);
  }
  {
    GraphBuilder b;  // MaxPool's Indices output
    ir::ValueId x = b.input("x", {1, 1, 4, 4});
    ir::ValueId y = b.g.addValue("y"), idx = b.g.addValue("i");
    ir::Node n;
    n.op_type = "MaxPool";
    n.opset = 12;
    n.name = "mp";
    n.inputs = {x};
    n.outputs = {y, idx};
    n.attrs = Attrs().ints("kernel_shape", {2, 2});
    b.g.addNode(n);
    EXPECT_NE(why(b).find("optional output"), std::string::npos);
  }
  {
    GraphBuilder b;  // training-mode BatchNormalization
    ir::ValueId x = b.input("x", {1, 2, 3});
    std::vector<ir::ValueId> ins = {x};
    for (int i = 0; i < 4; ++i) ins.push_back(b.constant("p" + std::to_string(i), {2}, {1, 1}));
    b.node("BatchNormalization", ins, Attrs().i("training_mode", 1), 15);
    EXPECT_FALSE(why(b).empty());
  }
}

// The partitioner must not merge Conv and Add into one region when a host node sits
// between them on one path (that would be a cycle region -> host -> region).
TEST(DnnlPartition, RegionsStayAcyclicAroundHostNodes) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 4, 6, 6});
  ir::ValueId c = b.node("Conv", {x, b.constant("w", {4, 4, 1, 1}, randomFloats(16, 1))});
  ir::ValueId e = b.node("Erf", {c});  // host only
  b.output(b.node("Add", {c, e}));
  Compiled d = expectMatchesHost(b, 2);
  EXPECT_EQ(d.graph->nodes.size(), 3u);
}

TEST(DnnlPartition, MinRegionSizeSendsSmallRegionsHome) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 4, 6, 6});
  ir::ValueId c = b.node("Conv", {x, b.constant("w", {4, 4, 1, 1}, randomFloats(16, 1))});
  b.output(b.node("Softmax", {b.node("Relu", {c})}));
  Compiled all = expectMatchesHost(b, 1);
  EXPECT_EQ(testing::dnnlOps(all), (std::vector<std::string>{"Conv", "Relu", "Softmax"}));
  Compiled big = testing::compile(b.g, {"dnnl", "host"}, 4);
  EXPECT_EQ(testing::dnnlRegions(big), 0u);
}

}  // namespace
// ONNX Runtime's contrib Gelu has no host kernel (infer-only): the dnnl backend runs it
// as one gelu_erf, equal to the host's run of the five-node export; without an
// external backend, partitioning refuses it by name.
TEST(DnnlInferOnly, ContribGeluRunsOnDnnlOnly) {
  auto graph = [](bool contrib) {
    GraphBuilder b;
    ir::ValueId x = b.input("x", {4, 16});
    ir::ValueId h = b.node("MatMul", {x, b.constant("w", {16, 8}, randomFloats(128, 1))});
    ir::ValueId y;
    if (contrib) {
      y = b.node("Gelu", {h}, {}, 1, "gelu");
      b.g.nodes.back().domain = "com.microsoft";
    } else {
      ir::ValueId e = b.node("Erf", {b.node("Div", {h, b.constant("sqrt2", {}, {1.4142135f})})});
      ir::ValueId m = b.node("Mul", {h, b.node("Add", {e, b.constant("one", {}, {1.0f})})});
      y = b.node("Mul", {m, b.constant("half", {}, {0.5f})});
    }
    b.output(b.node("Relu", {y}));
    return b.g;
  };
  Compiled ref = testing::compile(graph(false), {"host"});
  Compiled d = testing::compile(graph(true), {"dnnl"});
  ASSERT_EQ(d.parts.regions.size(), 1u);
  EXPECT_EQ(d.parts.regions[0].ops, (std::vector<std::string>{"MatMul", "com.microsoft.Gelu", "Relu"}));
  std::vector<ir::OwnedTensor> in = testing::randomInputs(*ref.graph, 7);
  EXPECT_LE(testing::closeness(d.run(in).at(0), ref.run(in).at(0)), 1.0);
  // A region of the contrib op alone stays on dnnl even below the minimum region size.
  Compiled small = testing::compile(graph(true), {"dnnl"}, 10);
  EXPECT_EQ(small.parts.regions.size(), 1u);
  try {
    testing::compile(graph(true), {"host"});
    ADD_FAILURE() << "the host accepted an op it has no kernel for";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_EQ(std::string(e.what()),
              "no host kernel for com.microsoft.Gelu (node 'gelu'), and no external backend is enabled (see --backends)");
  }
}

}  // namespace partita::dnnl_backend
