#include "partita/npy.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "base/temp_dir_testing.h"
#include "partita/error.h"

namespace partita {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class Npy : public ::testing::Test {
 protected:
  std::string path(const std::string& rel) const { return tmp_.path(rel); }

  // A version-1 .npy with this header dict and `data_bytes` bytes of data.
  std::string file(const std::string& dict, size_t data_bytes) {
    std::string header = dict;
    header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
    header += '\n';
    std::string bytes("\x93NUMPY\x01\x00", 8);
    bytes += char(header.size() & 0xff);
    bytes += char(header.size() >> 8);
    bytes += header;
    bytes.append(data_bytes, '\x01');
    return tmp_.write("t.npy", bytes);
  }
  static std::string header(const std::string& shape, const std::string& descr = "<f4") {
    return "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  }
  // readNpy's refusal (kInvalidArgument), "" when it reads.
  static std::string refusal(const std::string& p) {
    try {
      readNpy(p);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  partita::testing::TempDir tmp_{"partita_npy"};
  const fs::path& dir_ = tmp_.root();
};

TEST_F(Npy, RoundTrips) {
  Tensor t(DType::kInt32, {2, 3});
  for (int i = 0; i < 6; ++i) t.as<int32_t>()[i] = i * 7 - 3;
  writeNpy(path("r.npy"), t.view());
  Tensor back = readNpy(path("r.npy"));
  EXPECT_EQ(back.dtype(), DType::kInt32);
  EXPECT_EQ(back.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(std::memcmp(back.data(), t.data(), 24), 0);
  writeNpy(path("s.npy"), Tensor(DType::kFloat32, {}).view());
  EXPECT_EQ(readNpy(path("s.npy")).shape(), std::vector<int64_t>{});
}

TEST_F(Npy, ReadsBytesInMemoryWithTheSameParser) {
  Tensor t(DType::kInt16, {3});
  for (int i = 0; i < 3; ++i) t.as<int16_t>()[i] = int16_t(i - 1);
  writeNpy(path("m.npy"), t.view());
  std::string bytes = tmp_.read("m.npy");
  Tensor back = readNpyBytes(bytes.data(), bytes.size(), "mem.npy");
  EXPECT_EQ(back.dtype(), DType::kInt16);
  EXPECT_EQ(back.shape(), std::vector<int64_t>{3});
  EXPECT_EQ(std::memcmp(back.data(), t.data(), 6), 0);
  try {
    readNpyBytes(bytes.data(), bytes.size() - 1, "mem.npy");
    ADD_FAILURE() << "a short buffer was read";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("mem.npy: not a readable .npy file: data is shorter than its shape needs"));
  }
}

TEST_F(Npy, AcceptsWhatNumpyWrites) {
  EXPECT_EQ(refusal(file(header("(4,)"), 16)), "");
  EXPECT_EQ(refusal(file(header("(2, 3)"), 24)), "");
  EXPECT_EQ(refusal(file(header("()"), 4)), "");
  EXPECT_EQ(refusal(file(header("(0, 5)"), 0)), "");
  EXPECT_EQ(refusal(file("{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (4,)}", 16)), "");
}

TEST_F(Npy, ShapeEntriesMustBePlainIntegers) {
  for (const char* shape : {"(4abc,)", "(4.9,)", "(-4,)", "(+4,)", "(0x4,)", "(4L,)", "(99999999999999999999,)"})
    EXPECT_THAT(refusal(file(header(shape), 16)), HasSubstr("is not a non-negative decimal integer")) << shape;
  EXPECT_THAT(refusal(file(header("(4)"), 16)), HasSubstr("is not a tuple"));
  EXPECT_THAT(refusal(file(header("(4,,)"), 16)), HasSubstr("shape entry ''"));
  EXPECT_THAT(refusal(file("{'descr': '<f4', 'fortran_order': False, 'shape': (4,", 16)),
              HasSubstr("the shape tuple is not closed"));
}

TEST_F(Npy, HeaderKeysAreExactlyNumpys) {
  EXPECT_THAT(refusal(file("{'descr': '<f4', 'shape': (4,), }", 16)), HasSubstr("no 'fortran_order'"));
  EXPECT_THAT(refusal(file("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'x': 1}", 16)),
              HasSubstr("unknown key 'x'"));
  EXPECT_THAT(refusal(file("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (4,)}", 16)),
              HasSubstr("gives 'descr' twice"));
  EXPECT_THAT(refusal(file("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (4,)}", 16)),
              HasSubstr("not True or False"));
  EXPECT_THAT(refusal(file(header("(4,)") + " junk", 16)), HasSubstr("text after its closing"));
  EXPECT_THAT(refusal(file(header("(4,)", ">f4"), 16)), HasSubstr("unsupported dtype '>f4'"));
}

TEST_F(Npy, CountsMustMatchTheFile) {
  std::string p = file(header("(4,)"), 15);
  EXPECT_THAT(refusal(p), HasSubstr("float32[4] needs 16 bytes, the file has 15 after the header"));
  EXPECT_THAT(refusal(p), HasSubstr("t.npy"));
  EXPECT_THAT(refusal(file(header("(4,)"), 17)), HasSubstr("1 bytes after the data its header describes"));
  // 2^62 x 4 elements would wrap a 64-bit byte count; refused before any allocation.
  EXPECT_THAT(refusal(file(header("(4611686018427387904, 4)"), 64)), HasSubstr("more than 2^40 elements"));
  EXPECT_THAT(refusal(file(header("(274877906944,)", "<f8"), 64)), HasSubstr("more than 2^40 bytes"));
  EXPECT_THAT(refusal(file(header("(9223372036854775807, 9223372036854775807)"), 64)), HasSubstr("more than 2^40"));
}

TEST_F(Npy, RefusesAFifoAndADirectory) {
  ASSERT_EQ(::mkfifo(path("p.npy").c_str(), 0644), 0);
  EXPECT_THAT(refusal(path("p.npy")), HasSubstr("is a FIFO, not a regular file"));
  EXPECT_THAT(refusal(dir_.string()), HasSubstr("is a directory, not a regular file"));
}

TEST_F(Npy, WriteRefusesAFifoTarget) {
  ASSERT_EQ(::mkfifo(path("o.npy").c_str(), 0644), 0);
  try {
    writeNpy(path("o.npy"), Tensor(DType::kFloat32, {2}).view());
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("it is a FIFO"));
  }
}

}  // namespace
}  // namespace partita
