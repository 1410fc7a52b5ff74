// foldReshapeTargets: the channel shuffle of a ShuffleNet exported with symbolic batch
// and sides (x.view(b, 2, c // 2, h, w).transpose(1, 2).view(b, -1, h, w)) loses its
// Shape chains; what cannot be proven stays as it was.
#include <gtest/gtest.h>

#include "backend/backend_testing.h"
#include "kernels/op_registry.h"
#include "partita/error.h"
#include "passes/passes.h"
#include "passes/pipeline.h"

namespace partita::passes {
namespace {

using backend::testing::GraphBuilder;

ir::Dim sym(const char* s) { return ir::Dim::symbolic(s); }

ir::AttributeMap intAttr(const char* name, int64_t v) {
  ir::AttributeMap a;
  a.setInt(name, v);
  return a;
}

// Dim `i` of `x` as a 1-element int64 tensor: Unsqueeze(Gather(Shape(x), i)).
ir::ValueId dimOf(GraphBuilder& b, ir::ValueId x, int64_t i) {
  ir::ValueId g = b.node("Gather", {b.node("Shape", {x}), b.constantInts("i", {}, {i})}, intAttr("axis", 0), 13);
  return b.node("Unsqueeze", {g, b.constantInts("axes", {1}, {0})}, {}, 13);
}

size_t count(const ir::Graph& g, const std::string& op) {
  size_t n = 0;
  for (const ir::Node& node : g.nodes) n += node.op_type == op;
  return n;
}

TEST(FoldReshapeTargets, ChannelShuffleLosesItsShapeChains) {
  GraphBuilder b;
  ir::ValueId x = b.symbolicInput("x", {sym("N"), ir::Dim::known(8), sym("H"), sym("W")});
  ir::ValueId r = b.node("Relu", {x});
  // c // 2 through float division, as PyTorch exports it.
  ir::AttributeMap to_float = intAttr("to", 1), to_int = intAttr("to", 7);
  ir::ValueId c = b.node("Cast", {b.node("Div", {b.node("Cast", {dimOf(b, r, 1)}, to_float),
                                                b.constant("two", {1}, {2.0f})})},
                         to_int);
  ir::ValueId target = b.node("Concat", {dimOf(b, r, 0), b.constantInts("g", {1}, {2}), c, dimOf(b, r, 2),
                                         dimOf(b, r, 3)},
                              intAttr("axis", 0), 13);
  ir::ValueId v = b.node("Reshape", {r, target}, {}, 14);
  ir::AttributeMap perm;
  perm.setInts("perm", {0, 2, 1, 3, 4});
  ir::ValueId t = b.node("Transpose", {v}, perm);
  ir::ValueId back = b.node("Concat", {dimOf(b, r, 0), b.constantInts("m1", {1}, {-1}), dimOf(b, r, 2),
                                       dimOf(b, r, 3)},
                            intAttr("axis", 0), 13);
  ir::ValueId y = b.node("Reshape", {t, back}, {}, 14);
  b.output(y);
  optimize(b.g, {});

  EXPECT_EQ(count(b.g, "Shape"), 0u);
  EXPECT_EQ(count(b.g, "Concat"), 0u);
  ASSERT_EQ(count(b.g, "Reshape"), 2u);
  // The shuffled tensor's type is known up to the symbols; the -1 became 8.
  EXPECT_EQ(b.g.typeOf(b.g.outputs[0]).str(), "float32[N,8,H,W]");
  for (const ir::Node& n : b.g.nodes) {
    if (n.op_type != "Reshape") continue;
    ASSERT_TRUE(b.g.value(n.inputs[1]).isConstant());
    EXPECT_TRUE(n.attrs.has(kernels::kDimsFromInputAttr)) << n.name;
  }
  // At run time the host's Reshape copies the dims the attribute names.
  ir::Graph g = b.g;
  const kernels::PoolResolver constants(g.constants);
  for (const ir::Node& n : g.nodes) {
    if (n.op_type != "Reshape") continue;
    std::vector<ir::TensorType> in = {ir::TensorType::of(ir::DType::kFloat32, {3, 8, 5, 7}),
                                      g.typeOf(n.inputs[1])};
    if (g.typeOf(n.inputs[0]).rank() == 5) in[0] = ir::TensorType::of(ir::DType::kFloat32, {3, 4, 2, 5, 7});
    ir::Tensor target_view = g.constants.get(g.value(n.inputs[1]).constant).view();
    std::vector<ir::TensorType> out = kernels::inferNode(n, in, {nullptr, &target_view}, &constants);
    EXPECT_EQ(out[0].str(), g.typeOf(n.inputs[0]).rank() == 4 ? "float32[3,2,4,5,7]" : "float32[3,8,5,7]");
  }
}

// Dims copied through a batched MatMul (attention's scores: rows from the first
// operand, columns from the second, batch from either) and a dynamic quantization:
// heads split from x = [seq, batch*heads, 8] back into [seq, batch, heads*8] read
// seq through them and -1 for the rest. The dims have no names (as after a Reshape
// on the host), so only where they were copied from proves them equal.
TEST(FoldReshapeTargets, DimsCarryThroughBatchedMatMulAndQuantization) {
  GraphBuilder b;
  ir::ValueId x = b.symbolicInput("x", {sym(""), sym(""), ir::Dim::known(8)});
  ir::AttributeMap swap;
  swap.setInts("perm", {0, 2, 1});
  ir::ValueId scores = b.node("MatMul", {x, b.node("Transpose", {x}, swap)}, {}, 13);  // [B, S, S]
  ir::ValueId ctx = b.node("MatMul", {scores, x}, {}, 13);                               // [B, S, 8]
  ir::Graph& g = b.g;
  ir::Node dq;
  dq.op_type = "DynamicQuantizeLinear";
  dq.opset = 11;
  dq.name = "dq";
  dq.inputs = {ctx};
  for (const char* name : {"q", "scale", "zp"}) {
    g.values.push_back(ir::Value{name, {}, ir::kNoNode, ir::kNoConst});
    dq.outputs.push_back(ir::ValueId(g.values.size() - 1));
  }
  g.addNode(std::move(dq));
  ir::ValueId deq = b.node("DequantizeLinear", {g.nodes.back().outputs[0], g.nodes.back().outputs[1],
                                                g.nodes.back().outputs[2]},
                           {}, 13);
  // deq.view(x.size(0), x.size(1), -1): both dims of x, neither read from deq itself.
  ir::ValueId target = b.node("Concat", {dimOf(b, x, 0), dimOf(b, x, 1), b.constantInts("m1", {1}, {-1})},
                              intAttr("axis", 0), 13);
  b.output(b.node("Reshape", {deq, target}, {}, 14));
  optimize(b.g, {});
  EXPECT_EQ(count(b.g, "Shape"), 0u);
  EXPECT_EQ(b.g.typeOf(b.g.outputs[0]).rank(), 3u);
  EXPECT_TRUE(b.g.typeOf(b.g.outputs[0]).dims[2].isKnown());
}

// A dim of another value whose size is not provably the Reshape input's (a Conv's
// output side against its input's) stays computed: only one such entry may be -1.
TEST(FoldReshapeTargets, UnprovenDimsAreLeftAlone) {
  GraphBuilder b;
  ir::ValueId x = b.symbolicInput("x", {sym("N"), ir::Dim::known(4), sym("H"), sym("W")});
  ir::AttributeMap conv;
  conv.setInts("kernel_shape", {3, 3});
  ir::ValueId y = b.node("Conv", {x, b.constant("w", {4, 4, 3, 3}, std::vector<float>(144, 0.1f))}, conv);
  // x.view(N, 4, H', W') with H', W' the Conv output's sides: not x's.
  ir::ValueId target = b.node("Concat", {dimOf(b, x, 0), b.constantInts("c", {1}, {4}), dimOf(b, y, 2), dimOf(b, y, 3)},
                              intAttr("axis", 0), 13);
  b.output(b.node("Reshape", {x, target}, {}, 14));
  b.output(y);
  optimize(b.g, {});
  EXPECT_EQ(count(b.g, "Shape"), 3u);
  for (const ir::Node& n : b.g.nodes)
    if (n.op_type == "Reshape") {
      EXPECT_FALSE(b.g.value(n.inputs[1]).isConstant());
    }
}

// The attribute is partita's own: a Reshape that carries a bad one is refused by name.
TEST(FoldReshapeTargets, BadAttributeIsAnError) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {2, 3});
  ir::AttributeMap a;
  a.setInts(kernels::kDimsFromInputAttr, {5, -1});
  b.output(b.node("Reshape", {x, b.constantInts("s", {2}, {1, 6})}, a, 14));
  try {
    inferShapes(b.g);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("partita.dims_from_input entry 0 is 5"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace partita::passes
