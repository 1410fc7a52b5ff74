// Which dnnl steps are made and run for one thread (stepOnOneThread): the thresholds
// of docs/backends.md, "Small steps run on one thread".
#include "backend/dnnl/dnnl_primitive.h"

#include <gtest/gtest.h>

#include "backend/backend_testing.h"
#include "backend/dnnl/dnnl_decode.h"
#include "backend/dnnl/dnnl_program.h"
#include "partita/error.h"
#include "passes/passes.h"

namespace partita::dnnl_backend {
namespace {

using dnnl::memory;

memory::desc channelsLast(int64_t c, int64_t h, int64_t w) {
  return memory::desc({1, c, h, w}, memory::data_type::f32, memory::format_tag::acdb);
}

// An SE block's scale: [1, C, H, W] * [1, C, 1, 1].
Step binaryMul(int64_t c, int64_t h, int64_t w) {
  Step s;
  s.kind = StepKind::kBinary;
  s.alg = dnnl_binary_mul;
  s.args.push_back(Arg{DNNL_ARG_SRC_0, ArgSource::kBuffer, 0, channelsLast(c, h, w), false});
  s.args.push_back(Arg{DNNL_ARG_SRC_1, ArgSource::kBuffer, 1,
                       memory::desc({1, c, 1, 1}, memory::data_type::f32, memory::format_tag::abcd), false});
  s.args.push_back(Arg{DNNL_ARG_DST, ArgSource::kBuffer, 2, channelsLast(c, h, w), false});
  return s;
}

TEST(StepOnOneThread, PlainBinaryStepsUnder2To16ElementsRunAlone) {
  // EfficientNet-B0's last SE scales: 1152x7x7 = 56,448 and 672x7x7 = 32,928 elements.
  EXPECT_TRUE(stepOnOneThread(binaryMul(1152, 7, 7)));
  EXPECT_TRUE(stepOnOneThread(binaryMul(672, 7, 7)));
  EXPECT_EQ(stepThreads(binaryMul(1152, 7, 7), 2), 1);
  // 672x14x14 = 131,712 elements: two threads were faster.
  EXPECT_FALSE(stepOnOneThread(binaryMul(672, 14, 14)));
  EXPECT_EQ(stepThreads(binaryMul(672, 14, 14), 2), 2);
  // Exactly at the threshold is shared.
  EXPECT_FALSE(stepOnOneThread(binaryMul(1024, 8, 8)));
  EXPECT_TRUE(stepOnOneThread(binaryMul(1023, 8, 8)));
}

TEST(StepOnOneThread, BinaryStepsThatComputeKeepTheGeneralThreshold) {
  // With an eltwise post-op (e.g. a fused activation) the step computes per element.
  Step with_post = binaryMul(1152, 7, 7);
  with_post.post_ops.push_back(PostOp{PostOp::Kind::kEltwise, dnnl_eltwise_logistic, 0, 0, 1});
  EXPECT_FALSE(stepOnOneThread(with_post));
  // int8 binary steps rescale every element.
  Step quantized = binaryMul(1152, 7, 7);
  quantized.flags |= kQuantizedFlag;
  EXPECT_FALSE(stepOnOneThread(quantized));
  // Both still run alone below 2^14 elements.
  Step small = binaryMul(256, 7, 7);
  small.post_ops = with_post.post_ops;
  EXPECT_TRUE(stepOnOneThread(small));
}

TEST(StepOnOneThread, EltwiseStepsKeep2To14) {
  // Swish computes an exponential per element: on two threads it was faster from
  // about 30,000 elements, so an eltwise step of 56,448 elements is shared.
  Step s;
  s.kind = StepKind::kEltwise;
  s.alg = dnnl_eltwise_swish;
  s.args.push_back(Arg{DNNL_ARG_SRC, ArgSource::kBuffer, 0, channelsLast(1152, 7, 7), false});
  s.args.push_back(Arg{DNNL_ARG_DST, ArgSource::kBuffer, 1, channelsLast(1152, 7, 7), false});
  EXPECT_FALSE(stepOnOneThread(s));
  EXPECT_EQ(stepThreads(s, 2), 2);
  EXPECT_EQ(stepThreads(s, 1), 1);
}

// A 1x1 convolution (and a deconvolution) step of more than kMaxConvPositions output
// positions is refused before oneDNN is asked for it (which takes time in proportion
// to them: 0.5 s at 16384 x 16384); at the bound it is made.
TEST(ConvPositions, AStepOfMoreOutputPositionsIsRefusedBeforeOneDnn) {
  EXPECT_EQ(convPositionsBound({16384, 16384}), "");
  EXPECT_NE(convPositionsBound({16384, 16385}).find("more than 268435456 output positions ([16384,16385])"),
            std::string::npos);
  EXPECT_NE(convPositionsBound({int64_t(1) << 40, int64_t(1) << 40}), "");  // (no overflow on the way)
  EXPECT_NE(convPositionsBound({-1, 4}), "");
  auto step = [](StepKind kind, int64_t h, int64_t w) {
    Step s;
    s.kind = kind;
    s.label = "c";
    s.strides = {1, 1};
    s.dilates = {0, 0};
    s.pad_l = {0, 0};
    s.pad_r = {0, 0};
    s.args.push_back(Arg{DNNL_ARG_SRC, ArgSource::kBuffer, 0, channelsLast(2, h, w), false});
    s.args.push_back(Arg{DNNL_ARG_WEIGHTS, ArgSource::kConstant, 0,
                         memory::desc({4, 2, 1, 1}, memory::data_type::f32, memory::format_tag::abcd), false});
    s.args.push_back(Arg{DNNL_ARG_DST, ArgSource::kBuffer, 1, channelsLast(4, h, w), false});
    return s;
  };
  const dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  for (StepKind kind : {StepKind::kConvolution, StepKind::kDeconvolution}) {
    try {
      makePrimitiveDesc(step(kind, int64_t(1) << 20, int64_t(1) << 20), eng);
      ADD_FAILURE() << "a step of 2^40 output positions was made";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArtifact);
      EXPECT_NE(std::string(e.what()).find("dnnl step 'c'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("output positions"), std::string::npos) << e.what();
    }
    EXPECT_NO_THROW(makePrimitiveDesc(step(kind, 64, 64), eng));
  }
}

// The claim leaves such a Conv or ConvTranspose to the host, naming the bound.
TEST(ConvPositions, TheClaimLeavesMoreOutputPositionsToTheHost) {
  for (bool transposed : {false, true}) {
    for (int64_t side : {int64_t(8192), int64_t(1) << 15}) {  // 2^26 and 2^30 output positions
      SCOPED_TRACE(std::string(transposed ? "ConvTranspose" : "Conv") + " to " + std::to_string(side));
      backend::testing::GraphBuilder b;
      const int64_t in = transposed ? side / 2 : side;
      ir::ValueId x = b.input("x", {1, 2, in, in});
      ir::AttributeMap a;
      if (transposed) a.setInts("strides", {2, 2});
      const std::vector<int64_t> w_shape =
          transposed ? std::vector<int64_t>{2, 4, 2, 2} : std::vector<int64_t>{4, 2, 1, 1};
      ir::ValueId w = b.constant("w", w_shape, std::vector<float>(size_t(ir::shapeNumel(w_shape)), 0.5f));
      b.g.outputs.push_back(b.node(transposed ? "ConvTranspose" : "Conv", {x, w}, a, 13));
      passes::FoldOptions fold;
      fold.max_growth_bytes = 0;
      passes::inferShapes(b.g, fold);
      std::string why;
      const bool claimed = decodeConv(b.g, b.g.nodes.back(), &why).has_value();
      EXPECT_EQ(claimed, side == 8192) << why;
      if (!claimed) {
        EXPECT_NE(why.find("output positions"), std::string::npos) << why;
      }
    }
  }
}

}  // namespace
}  // namespace partita::dnnl_backend
