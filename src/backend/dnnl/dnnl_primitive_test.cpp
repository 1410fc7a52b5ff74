// Which dnnl steps are made and run for one thread (stepOnOneThread): the thresholds
// of docs/backends.md, "Small steps run on one thread".
#include "backend/dnnl/dnnl_primitive.h"

#include <gtest/gtest.h>

#include "backend/dnnl/dnnl_program.h"

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

}  // namespace
}  // namespace partita::dnnl_backend
