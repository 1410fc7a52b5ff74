#include "ir/limits.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "ir/constant_pool.h"
#include "ir/tensor.h"
#include "partita/error.h"
#include "partita/npy.h"

namespace partita::ir {
namespace {

constexpr int64_t kBig = int64_t(1) << 62;

TEST(Limits, CheckedCountsRefuseNegativeDimsAndOverflow) {
  EXPECT_EQ(checkedNumel({2, 3, 4}), 24);
  EXPECT_EQ(checkedNumel({}), 1);
  EXPECT_EQ(checkedNumel({0, kBig, kBig}), 0);  // a 0 first: nothing to overflow
  EXPECT_FALSE(checkedNumel({kBig, 4}));
  EXPECT_FALSE(checkedNumel({-4, 3}));
  EXPECT_EQ(checkedNbytes(DType::kFloat32, {kBig / 8}), uint64_t(kBig / 2));
  EXPECT_FALSE(checkedNbytes(DType::kFloat32, {kBig}));  // 2^64 bytes
  EXPECT_FALSE(checkedNbytes(DType::kFloat64, {INT64_MAX}));
}

TEST(Limits, ViolationsOfRankAndBytes) {
  const TensorLimits limits;
  EXPECT_EQ(limitViolation(TensorType::of(DType::kFloat32, {1 << 20, 1 << 18}), limits), "");  // exactly 2^40 bytes
  EXPECT_NE(limitViolation(TensorType::of(DType::kFloat32, {1 << 20, (1 << 18) + 1}), limits).find("max_bytes"),
            std::string::npos);
  EXPECT_NE(limitViolation(TensorType::of(DType::kFloat32, {kBig, 4}), limits).find("more bytes than 64 bits"),
            std::string::npos);
  // A zero dim counts as one: strides of [0, 2^62] would overflow just the same.
  EXPECT_NE(limitViolation(TensorType::of(DType::kUInt8, {0, kBig}), limits), "");
  EXPECT_EQ(limitViolation(TensorType::of(DType::kUInt8, {0, 1 << 30}), limits), "");
  EXPECT_NE(limitViolation(TensorType::of(DType::kFloat32, std::vector<int64_t>(17, 1)), limits).find("rank 17"),
            std::string::npos);
  // Unknown dims are not counted; the known ones are a lower bound.
  TensorType partial{DType::kFloat32, true, {Dim::symbolic("N"), Dim::known(kBig)}};
  EXPECT_NE(limitViolation(partial, limits), "");
  EXPECT_EQ(limitViolation(TensorType::unranked(DType::kFloat32), limits), "");
  TensorLimits small;
  small.max_bytes = 16;
  small.max_rank = 2;
  EXPECT_EQ(limitViolation(TensorType::of(DType::kFloat32, {4}), small), "");
  EXPECT_NE(limitViolation(TensorType::of(DType::kFloat32, {5}), small), "");
  EXPECT_NE(limitViolation(TensorType::of(DType::kFloat32, {1, 1, 1}), small), "");
  try {
    checkLimits(TensorType::of(DType::kFloat32, {5}), small, ErrorCode::kInvalidArgument, "input 'x'");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(std::string(e.what()).rfind("input 'x': float32[5] needs 20 bytes", 0), 0u) << e.what();
  }
}

TEST(Limits, CountsOfTensorsThrowPartitaErrors) {
  EXPECT_THROW(shapeNumel({kBig, 4}), Error);
  EXPECT_THROW(shapeNumel({-1}), Error);
  EXPECT_THROW(partita::nbytesOf(DType::kFloat32, {kBig}), Error);
  TensorView v{DType::kFloat64, {kBig}, nullptr};
  EXPECT_THROW(v.nbytes(), Error);
  // Never a 64-byte buffer for 2^64 bytes of float32, and never a std::bad_alloc.
  try {
    OwnedTensor t(DType::kFloat32, {kBig, 4});
    FAIL() << "allocated";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  }
}

TEST(Limits, ConstantWhoseSizeOverflowsIsNamed) {
  ConstantPool pool;
  try {
    pool.add("w", DType::kFloat32, {kBig, 4}, Bytes{});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("constant 'w'"), std::string::npos) << e.what();
  }
}

TEST(Limits, NpyHeaderClaimingMoreThanTheFileIsRefusedBeforeAllocating) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("partita_limits_" + std::to_string(::getpid()) + ".npy")).string();
  for (const std::string shape : {"(4611686018427387904, 4)", "(68719476736,)"}) {
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
    header.append(118 - header.size(), ' ');
    header += '\n';
    {
      std::ofstream f(path, std::ios::binary);
      f.write("\x93NUMPY\x01\x00", 8);
      const char len[2] = {char(header.size() & 0xff), char(header.size() >> 8)};
      f.write(len, 2);
      f << header << std::string(64, '\0');
    }
    try {
      readNpy(path);
      FAIL() << shape;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace partita::ir
