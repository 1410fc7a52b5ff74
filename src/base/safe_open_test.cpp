#include "base/safe_open.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>

#include "base/checked_int.h"
#include "base/mapped_file.h"
#include "base/temp_dir_testing.h"
#include "partita/error.h"

namespace partita {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// Everything lives in a fresh temporary folder: root/ (the trusted tree), other/ (outside).
class SafeOpen : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(dir_ / "root" / "sub");
    tmp_.write("root/data.bin", "inside!!");
    tmp_.write("other/secret.bin", "outside");
  }
  std::string path(const std::string& rel) const { return tmp_.path(rel); }
  void write(const std::string& rel, const std::string& bytes) { tmp_.write(rel, bytes); }
  std::string root() const { return path("root"); }
  // The message of the Error that opening `rel` beneath root/ throws ("" when it opens).
  std::string refusal(const std::string& rel, std::vector<std::string> roots = {}) {
    if (roots.empty()) roots = {root()};
    try {
      openRegularFile(path(rel), roots);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kIo);
      return e.what();
    }
    return "";
  }
  partita::testing::TempDir tmp_{"partita_safe_open"};
  const fs::path& dir_ = tmp_.root();
};

TEST_F(SafeOpen, OpensARegularFileWithItsSizeAndIdentity) {
  OpenedFile f = openRegularFile(path("root/data.bin"));
  EXPECT_GE(f.fd(), 0);
  EXPECT_EQ(f.size(), 8u);
  FileId id;
  ASSERT_TRUE(fileIdOf(path("root/data.bin"), id));
  EXPECT_EQ(f.id(), id);
  Bytes b = mapFile(f);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(b.data), b.size), "inside!!");
}

// A file of 2 MiB or more is mapped at a 2 MiB boundary (so the kernel can map its
// page-cache folios of that size with one entry each), whole and intact.
TEST_F(SafeOpen, MapsALargeFileAtATwoMiBBoundary) {
  std::string bytes(size_t(5) << 20 | 77, '\0');
  for (size_t i = 0; i < bytes.size(); i += 4093) bytes[i] = char(i / 4093);
  tmp_.write("root/large.bin", bytes);
  for (int i = 0; i < 4; ++i) {  // several, so one lucky address proves nothing
    Bytes b = mapFile(path("root/large.bin"));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data) % (uintptr_t(2) << 20), 0u);
    ASSERT_EQ(b.size, bytes.size());
    EXPECT_TRUE(std::memcmp(b.data, bytes.data(), bytes.size()) == 0);
  }
}

TEST_F(SafeOpen, RefusesAFifoWithoutBlocking) {
  ASSERT_EQ(::mkfifo(path("root/pipe").c_str(), 0644), 0);
  auto t0 = std::chrono::steady_clock::now();
  try {
    openRegularFile(path("root/pipe"));
    FAIL() << "a FIFO was opened";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("is a FIFO, not a regular file"));
    EXPECT_THAT(e.what(), HasSubstr("root/pipe"));
  }
  EXPECT_EQ(refusal("root/pipe"), "'" + path("root/pipe") + "' is a FIFO, not a regular file; partita reads only regular files");
  EXPECT_THROW(mapFile(path("root/pipe")), Error);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

TEST_F(SafeOpen, RefusesADirectoryAndNamesAMissingFile) {
  EXPECT_THAT(refusal("root/sub"), HasSubstr("is a directory, not a regular file"));
  EXPECT_THAT(refusal("root/nope.bin"), HasSubstr("cannot open '" + path("root/nope.bin") + "': No such file"));
  try {
    openRegularFile(path("root"));
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("is a directory"));
  }
}

TEST_F(SafeOpen, FollowsSymlinksThatStayBeneathTheRoot) {
  fs::create_symlink("../data.bin", dir_ / "root/sub/rel.bin");   // relative, inside
  fs::create_symlink(path("root/data.bin"), dir_ / "root/abs.bin");  // absolute, inside
  fs::create_symlink("sub", dir_ / "root/subdir");                  // a folder, inside
  write("root/sub/deep.bin", "deep");
  EXPECT_EQ(refusal("root/sub/rel.bin"), "");
  EXPECT_EQ(refusal("root/abs.bin"), "");
  EXPECT_EQ(refusal("root/subdir/deep.bin"), "");
  EXPECT_EQ(openRegularFile(path("root/abs.bin"), {root()}).size(), 8u);
}

TEST_F(SafeOpen, RefusesSymlinksLeavingTheRoot) {
  fs::create_symlink("../other/secret.bin", dir_ / "root/rel_out.bin");
  fs::create_symlink(path("other/secret.bin"), dir_ / "root/abs_out.bin");
  fs::create_symlink("../other", dir_ / "root/dir_out");
  for (const char* rel : {"root/rel_out.bin", "root/abs_out.bin", "root/dir_out/secret.bin"}) {
    std::string msg = refusal(rel);
    EXPECT_THAT(msg, HasSubstr("resolves to '" + fs::canonical(path("other/secret.bin")).string() + "'")) << rel;
    EXPECT_THAT(msg, HasSubstr("which is not beneath '" + fs::canonical(root()).string() + "'")) << rel;
  }
  EXPECT_THAT(refusal("root/../other/secret.bin"), HasSubstr("not beneath"));
  // The hint is appended to that refusal only.
  try {
    openRegularFile(path("root/rel_out.bin"), {root()}, "; HINT");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(" (symlinks are followed only to files beneath that folder); HINT"));
  }
}

TEST_F(SafeOpen, ASecondRootIsTrustedToo) {
  fs::create_symlink("../other/secret.bin", dir_ / "root/rel_out.bin");
  EXPECT_EQ(refusal("root/rel_out.bin", {root(), path("other")}), "");
  EXPECT_EQ(refusal("other/secret.bin", {root(), path("other")}), "");
  EXPECT_THAT(refusal("other/secret.bin"), HasSubstr("not beneath"));
  EXPECT_THAT(refusal("root/data.bin", {path("root/data.bin")}), HasSubstr("is not a folder"));
}

TEST_F(SafeOpen, ARootThatIsItselfASymlinkIsResolved) {
  fs::create_symlink(root(), dir_ / "root_link");
  EXPECT_EQ(refusal("root_link/data.bin", {path("root_link")}), "");
  EXPECT_EQ(refusal("root/data.bin", {path("root_link")}), "");
}

TEST(CheckedInt, ParseDecimalTakesOnlyPlainDigits) {
  EXPECT_EQ(parseDecimal("0"), 0);
  EXPECT_EQ(parseDecimal("16"), 16);
  EXPECT_EQ(parseDecimal("9223372036854775807"), INT64_MAX);
  for (const char* bad : {"", "16xyz", "-5", "+5", " 5", "5 ", "0x10", "9223372036854775808",
                          "99999999999999999999", "4.9", "1e3"})
    EXPECT_FALSE(parseDecimal(bad).has_value()) << bad;
}

TEST(CheckedInt, MulAtMostRefusesOverflowAndTheLimit) {
  EXPECT_EQ(mulAtMost(3, 4, 12), 12u);
  EXPECT_FALSE(mulAtMost(3, 4, 11).has_value());
  EXPECT_FALSE(mulAtMost(uint64_t(1) << 62, 4, UINT64_MAX).has_value());
  EXPECT_EQ(mulAtMost(0, UINT64_MAX, 0), 0u);
}

}  // namespace
}  // namespace partita
