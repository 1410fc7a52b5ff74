// The representative shape of a model with symbolic dims (docs/dynamic_shapes.md):
// defaults, hints, shared symbols, values known from Shape, and the probe shapes.
#include "compiler/representative_shapes.h"

#include <gtest/gtest.h>

#include "backend/backend_testing.h"
#include "partita/error.h"
#include "passes/passes.h"

namespace partita::backend {
namespace {

using testing::GraphBuilder;

ir::Dim sym(const char* s) { return ir::Dim::symbolic(s); }
ir::Dim known(int64_t v) { return ir::Dim::known(v); }

TEST(RepresentativeShapes, DefaultsHintsAndSharedSymbols) {
  GraphBuilder b;
  ir::ValueId x = b.symbolicInput("x", {sym("N"), known(3), sym("H"), ir::Dim{}});
  ir::ValueId y = b.symbolicInput("y", {sym("N"), sym("H")});
  b.output(b.node("Relu", {x}));
  b.output(b.node("Relu", {y}));
  passes::inferShapes(b.g);
  EXPECT_TRUE(hasSymbolicDims(b.g));

  ir::Graph rep = representativeGraph(b.g, {});
  EXPECT_EQ(rep.typeOf(x).str(), "float32[1,3,224,224]");
  EXPECT_EQ(rep.typeOf(y).str(), "float32[1,224]");  // N and H as x set them
  EXPECT_EQ(rep.typeOf(rep.outputs[0]).str(), "float32[1,3,224,224]");

  rep = representativeGraph(b.g, {{"x", {4, 3, 32, 48}}});
  EXPECT_EQ(rep.typeOf(x).str(), "float32[4,3,32,48]");
  EXPECT_EQ(rep.typeOf(y).str(), "float32[4,32]");

  auto error = [&](const std::map<std::string, std::vector<int64_t>>& hints) -> std::string {
    try {
      representativeGraph(b.g, hints);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      return e.what();
    }
    return "";
  };
  EXPECT_NE(error({{"z", {1}}}).find("'z', which is no input"), std::string::npos);
  EXPECT_NE(error({{"x", {1, 3, 8}}}).find("has rank 3"), std::string::npos);
  EXPECT_NE(error({{"x", {1, 4, 8, 8}}}).find("dim 1 is 4"), std::string::npos);
}

// An audio front end: a 1-D Conv whose window (400 samples) is longer than the default
// side of 224. The representative length doubles until the Conv infers.
TEST(RepresentativeShapes, SidesDoubleUntilTheWindowsFit) {
  GraphBuilder b;
  ir::ValueId x = b.symbolicInput("x", {sym("N"), known(1), sym("samples")});
  ir::AttributeMap conv;
  conv.setInts("kernel_shape", {400});
  conv.setInts("strides", {160});
  ir::ValueId y = b.node("Conv", {x, b.constant("w", {8, 1, 400}, std::vector<float>(3200, 0.5f))}, conv);
  b.output(b.node("Relu", {y}));
  passes::inferShapes(b.g);
  ir::Graph rep = representativeGraph(b.g, {});
  EXPECT_EQ(rep.typeOf(x).str(), "float32[1,1,448]");
  EXPECT_EQ(rep.typeOf(rep.outputs[0]).str(), "float32[1,8,1]");
  // A hint is taken as it is.
  rep = representativeGraph(b.g, {{"x", {1, 1, 16000}}});
  EXPECT_EQ(rep.typeOf(rep.outputs[0]).str(), "float32[1,8,98]");
}

// A TopK of 2^30 + 3 elements over a flattened [1, 2, H, W] refuses every side up to
// 16384 and takes 28672: the sides stop doubling where the input would pass
// kMaxRepresentativeElements (2^24; with a ConvTranspose in front of it a compile ran
// for minutes at 28672, fuzz/findings/onnx/topk_huge_k_symbolic_sides.onnx), and the
// representative shape is the one that refused least below that, the first. No probe
// passes the bound unless the representative shape does (a hint's).
TEST(RepresentativeShapes, SidesStopDoublingAtAnInputOf2To24Elements) {
  GraphBuilder b;
  ir::ValueId x = b.symbolicInput("x", {known(1), known(2), sym("H"), sym("W")});
  ir::ValueId f = b.node("Flatten", {x});
  ir::Node topk;
  topk.op_type = "TopK";
  topk.opset = 11;
  topk.name = "topk";
  topk.inputs = {f, b.constantInts("k", {1}, {(int64_t(1) << 30) + 3})};
  ir::ValueId y = b.g.addValue("y"), i = b.g.addValue("i");
  topk.outputs = {y, i};
  b.g.addNode(topk);
  b.output(y);
  passes::inferShapes(b.g);
  const ir::Graph rep = representativeGraph(b.g, {});
  EXPECT_EQ(rep.typeOf(x).str(), "float32[1,2,224,224]");
  for (const auto& p : probeShapes(b.g, rep)) EXPECT_LE(ir::shapeNumel(p.at("x")), kMaxRepresentativeElements);
  // A representative shape above the bound (a hint) keeps the probes up to its size.
  const ir::Graph big = representativeGraph(b.g, {{"x", {1, 2, 4096, 4096}}});
  const auto probes = probeShapes(b.g, big);
  EXPECT_FALSE(probes.empty());
  for (const auto& p : probes) EXPECT_LE(ir::shapeNumel(p.at("x")), int64_t(2) * 4096 * 4096);
}

// x.view(x.size(0), -1): the Reshape's target is computed from Shape; at the
// representative shape its value, and so the Reshape's output, is known.
TEST(RepresentativeShapes, ValuesComputedFromShapeAreKnown) {
  GraphBuilder b;
  ir::ValueId x = b.symbolicInput("x", {sym("N"), known(4), sym("T")});
  ir::ValueId shape = b.node("Shape", {x});
  ir::AttributeMap axis0;
  axis0.setInt("axis", 0);
  ir::ValueId n = b.node("Gather", {shape, b.constantInts("zero", {}, {0})}, axis0, 13);
  ir::ValueId n1 = b.node("Unsqueeze", {n, b.constantInts("axes", {1}, {0})}, {}, 13);
  ir::ValueId target = b.node("Concat", {n1, b.constantInts("minus1", {1}, {-1})}, axis0, 13);
  ir::ValueId flat = b.node("Reshape", {x, target}, {}, 14);
  b.output(b.node("Relu", {flat}));
  passes::FoldOptions fold;
  fold.max_growth_bytes = 0;
  passes::inferShapes(b.g, fold);
  EXPECT_FALSE(b.g.typeOf(flat).isStatic());
  ir::Graph rep = representativeGraph(b.g, {{"x", {2, 4, 10}}});
  EXPECT_EQ(rep.typeOf(flat).str(), "float32[2,40]");
  EXPECT_EQ(rep.typeOf(rep.outputs[0]).str(), "float32[2,40]");
  // The graph itself is unchanged: same nodes, the Reshape's type still symbolic.
  EXPECT_EQ(rep.nodes.size(), b.g.nodes.size());
  EXPECT_FALSE(b.g.typeOf(flat).isStatic());
  // In the representative graph the Reshape reads its target as a constant (what a
  // backend's claim sees); the Concat making it is still there, with its own inputs.
  const ir::Node& reshape = rep.nodes[rep.value(flat).producer];
  ASSERT_TRUE(rep.value(reshape.inputs[1]).isConstant());
  EXPECT_EQ(rep.constants.get(rep.value(reshape.inputs[1]).constant).view().as<int64_t>()[0], 2);
  EXPECT_FALSE(rep.value(rep.nodes[rep.value(target).producer].inputs[0]).isConstant());
}

// A chain of Shape arithmetic read by two Reshapes and a graph output: each Reshape gets
// its own copy (so it can go to a region with it), the output keeps the original.
TEST(RepresentativeShapes, ShapeComputationsArePrivatizedPerReader) {
  GraphBuilder b;
  ir::ValueId x = b.symbolicInput("x", {sym("N"), known(4), sym("T")});
  ir::AttributeMap axis0;
  axis0.setInt("axis", 0);
  ir::ValueId n = b.node("Gather", {b.node("Shape", {x}), b.constantInts("zero", {}, {0})}, axis0, 13);
  ir::ValueId target = b.node("Concat", {b.node("Unsqueeze", {n, b.constantInts("axes", {1}, {0})}, {}, 13),
                                         b.constantInts("minus1", {1}, {-1})},
                              axis0, 13);
  ir::ValueId r = b.node("Relu", {x});
  b.output(b.node("Reshape", {x, target}, {}, 14));
  b.output(b.node("Reshape", {r, target}, {}, 14));
  b.output(n);
  passes::FoldOptions fold;
  fold.max_growth_bytes = 0;
  passes::inferShapes(b.g, fold);
  const std::vector<bool> shape = shapeComputations(b.g);
  size_t chain = 0;
  for (size_t i = 0; i < b.g.nodes.size(); ++i) chain += shape[i];
  EXPECT_EQ(chain, 4u);  // Shape, Gather, Unsqueeze, Concat; not Relu or Reshape
  EXPECT_EQ(privatizeShapeComputations(b.g), 2u);
  size_t shapes = 0, gathers = 0;
  for (const ir::Node& node : b.g.nodes) {
    shapes += node.op_type == "Shape";
    gathers += node.op_type == "Gather";
    if (node.op_type == "Reshape") {
      const ir::NodeId p = b.g.value(node.inputs[1]).producer;
      ASSERT_NE(p, ir::kNoNode);
      EXPECT_NE(b.g.nodes[p].name.find("/for/"), std::string::npos) << "reads a copy of its own";
    }
  }
  EXPECT_EQ(shapes, 3u);   // the original (for the output n), one copy per Reshape
  EXPECT_EQ(gathers, 3u);
  EXPECT_EQ(b.g.nodes.size(), 3u * 2u + 2u * 2u + 1u + 2u);  // Shape+Gather x3, Unsqueeze+Concat x2, Relu, Reshape x2
  b.g.verify();
  // Without other readers nothing is copied.
  EXPECT_EQ(privatizeShapeComputations(b.g), 0u);
}

// A chain longer than kMaxShapeClosure (a hostile model could make copying it for each
// of many readers quadratic) is neither copied nor given to a region.
TEST(RepresentativeShapes, AnOverlongShapeComputationIsLeftAlone) {
  GraphBuilder b;
  ir::ValueId x = b.symbolicInput("x", {sym("N"), known(4)});
  ir::AttributeMap axis0;
  axis0.setInt("axis", 0);
  ir::ValueId n = b.node("Gather", {b.node("Shape", {x}), b.constantInts("zero", {}, {0})}, axis0, 13);
  for (size_t i = 0; i < kMaxShapeClosure; ++i) n = b.node("Add", {n, b.constantInts("nothing", {}, {0})}, {}, 14);
  ir::ValueId target = b.node("Concat", {b.node("Unsqueeze", {n, b.constantInts("axes", {1}, {0})}, {}, 13),
                                         b.constantInts("four", {1}, {4})},
                              axis0, 13);
  b.output(b.node("Reshape", {x, target}, {}, 14));
  b.output(b.node("Reshape", {b.node("Relu", {x}), target}, {}, 14));
  passes::FoldOptions fold;
  fold.max_growth_bytes = 0;
  passes::inferShapes(b.g, fold);
  const std::vector<bool> shape = shapeComputations(b.g);
  EXPECT_FALSE(shapeClosure(b.g, shape, b.g.value(b.g.outputs[0]).producer).has_value());
  const size_t before = b.g.nodes.size();
  EXPECT_EQ(privatizeShapeComputations(b.g), 0u);
  EXPECT_EQ(b.g.nodes.size(), before);
  // Partitioned for dnnl: the Reshapes stay on the host with their targets, and the
  // model still runs.
  testing::Compiled c = testing::compile(b.g, {"dnnl", "host"});
  ir::OwnedTensor in = testing::randomTensor({3, 4}, 5);
  EXPECT_EQ(c.run({in})[0].shape(), (std::vector<int64_t>{3, 4}));
}

TEST(RepresentativeShapes, ProbesScaleTheSidesAndTheBatch) {
  GraphBuilder b;
  ir::ValueId x = b.symbolicInput("x", {sym("N"), known(3), sym("H"), sym("W")});
  b.output(b.node("Relu", {x}));
  passes::inferShapes(b.g);
  const ir::Graph rep = representativeGraph(b.g, {});
  const auto probes = probeShapes(b.g, rep);
  ASSERT_EQ(probes.size(), 5u);
  EXPECT_EQ(probes[0].at("x"), (std::vector<int64_t>{1, 3, 128, 128}));
  EXPECT_EQ(probes[1].at("x"), (std::vector<int64_t>{1, 3, 320, 240}));
  EXPECT_EQ(probes[2].at("x"), (std::vector<int64_t>{1, 3, 97, 131}));  // odd
  EXPECT_EQ(probes[4].at("x"), (std::vector<int64_t>{8, 3, 224, 224}));
  for (const auto& p : probes) EXPECT_NO_THROW(representativeGraph(b.g, p));
}

}  // namespace
}  // namespace partita::backend
