#include "base/atomic_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>

#include "base/temp_dir_testing.h"
#include "partita/error.h"

namespace partita::artifact {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// What the writer may replace and what it refuses; every target lives in a fresh
// temporary folder (no real device file is ever a target).
class AtomicFileTargets : public ::testing::Test {
 protected:
  std::string path(const std::string& rel) const { return tmp_.path(rel); }
  void write(const std::string& rel, const std::string& bytes) { tmp_.write(rel, bytes); }
  std::string read(const std::string& rel) const { return tmp_.read(rel); }
  static void writeAll(const std::string& target, const std::string& bytes, std::vector<SourceFile> keep = {}) {
    AtomicFile f(target, std::move(keep));
    f.writeAt(0, bytes.data(), bytes.size());
    f.commit();
  }
  // The refusal's message, checking its code; "" when the write went through.
  static std::string refusal(const std::string& target, std::vector<SourceFile> keep = {}) {
    try {
      writeAll(target, "new", std::move(keep));
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
      return e.what();
    }
    return "";
  }
  // Only the named entries are in the folder: no temporary left behind.
  void expectOnly(const std::set<std::string>& names) { EXPECT_EQ(tmp_.list(), names); }
  partita::testing::TempDir tmp_{"partita_atomic"};
  const fs::path& dir_ = tmp_.root();
};

TEST_F(AtomicFileTargets, WritesANewFileAndReplacesAWritableOne) {
  writeAll(path("a.pta"), "one");
  EXPECT_EQ(read("a.pta"), "one");
  writeAll(path("a.pta"), "two");
  EXPECT_EQ(read("a.pta"), "two");
  expectOnly({"a.pta"});
}

TEST_F(AtomicFileTargets, RefusesAFifoAndLeavesIt) {
  ASSERT_EQ(::mkfifo(path("out.pta").c_str(), 0644), 0);
  EXPECT_EQ(refusal(path("out.pta")),
            "refusing to write '" + path("out.pta") + "': it is a FIFO, not a regular file (partita replaces only regular files)");
  struct stat st {};
  ASSERT_EQ(::lstat(path("out.pta").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  expectOnly({"out.pta"});
}

TEST_F(AtomicFileTargets, RefusesADirectoryAndASymlinkToOne) {
  fs::create_directory(dir_ / "d");
  fs::create_directory_symlink(dir_ / "d", dir_ / "link");
  EXPECT_THAT(refusal(path("d")), HasSubstr("it is a directory, not a regular file"));
  EXPECT_THAT(refusal(path("link")), HasSubstr("it is a symlink to a directory"));
  expectOnly({"d", "link"});
}

TEST_F(AtomicFileTargets, RefusesAWriteProtectedFile) {
  write("ro.pta", "keep me");
  fs::permissions(path("ro.pta"), fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  EXPECT_THAT(refusal(path("ro.pta")), HasSubstr("it is write-protected (mode 0444)"));
  EXPECT_EQ(read("ro.pta"), "keep me");
  expectOnly({"ro.pta"});
}

TEST_F(AtomicFileTargets, RefusesAFileBeingReadThroughAHardLinkOrSymlink) {
  write("model.onnx", "model bytes");
  FileId id;
  ASSERT_TRUE(fileIdOf(path("model.onnx"), id));
  std::vector<SourceFile> keep{{id, "the input model 'model.onnx'"}};
  fs::create_hard_link(dir_ / "model.onnx", dir_ / "hard.pta");
  fs::create_symlink("model.onnx", dir_ / "soft.pta");
  for (const char* target : {"model.onnx", "hard.pta", "soft.pta"})
    EXPECT_THAT(refusal(path(target), keep), HasSubstr("it is the input model 'model.onnx' (the same file)")) << target;
  EXPECT_EQ(read("model.onnx"), "model bytes");
  // Not kept: a hard link is an ordinary file to replace (the new file gets its own inode).
  EXPECT_EQ(refusal(path("hard.pta")), "");
  EXPECT_EQ(read("model.onnx"), "model bytes");
  EXPECT_EQ(read("hard.pta"), "new");
}

TEST_F(AtomicFileTargets, ChecksAgainAtCommit) {
  AtomicFile f(path("late.pta"));
  f.writeAt(0, "abc", 3);
  ASSERT_EQ(::mkfifo(path("late.pta").c_str(), 0644), 0);  // appears while writing
  try {
    f.commit();
    FAIL() << "renamed over a FIFO";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("it is a FIFO"));
  }
  struct stat st {};
  ASSERT_EQ(::lstat(path("late.pta").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
}

// BlockWriter: the bytes land where they were put, the gaps read as zeros, a block of
// zeros stays a hole, and the file ends at the size given.
TEST_F(AtomicFileTargets, BlockWriterWritesInWholeBlocksAndLeavesZeroBlocksAsHoles) {
  constexpr uint64_t kB = BlockWriter::kBlockBytes;
  const uint64_t size = 5 * kB + 123;  // blocks 0, 1 (zero), 2 (zero), 3, 4, and a partial 5
  std::string head(100, 'h'), mid(kB + 17, 'm'), tail(50, 't');
  {
    AtomicFile f(path("b.pta"));
    BlockWriter out(f, size);
    out.put(0, head.data(), head.size());
    out.put(3 * kB - 7, mid.data(), mid.size());  // straddles into blocks 3 and 4
    out.put(size - tail.size(), tail.data(), tail.size());
    out.finish();
    f.commit();
  }
  const std::string got = read("b.pta");
  ASSERT_EQ(got.size(), size);
  std::string want(size_t(size), '\0');
  want.replace(0, head.size(), head);
  want.replace(size_t(3 * kB - 7), mid.size(), mid);
  want.replace(size_t(size - tail.size()), tail.size(), tail);
  EXPECT_TRUE(got == want);
  // Blocks 1 and 2 were not written; block 2's last 7 bytes belong to `mid`, so only
  // block 1 is all zero: the file takes at least one block less than its size on disk
  // (st_blocks counts 512-byte units) where the filesystem keeps holes.
  struct stat st {};
  ASSERT_EQ(::stat(path("b.pta").c_str(), &st), 0);
  EXPECT_LE(uint64_t(st.st_blocks) * 512, size + 64 * 1024 - kB);
}

TEST_F(AtomicFileTargets, BlockWriterRefusesToGoBackOrPastTheSize) {
  AtomicFile f(path("c.pta"));
  BlockWriter out(f, 100);
  const char bytes[20] = {1};
  out.put(40, bytes, 20);
  for (auto [offset, n] : {std::pair<uint64_t, size_t>{50, 1}, {90, 20}, {200, 0}}) {
    try {
      out.put(offset, bytes, n);
      FAIL() << offset << "+" << n << " was taken";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInternal) << e.what();
    }
  }
  EXPECT_NO_THROW(out.put(60, bytes, 0));
}

TEST_F(AtomicFileTargets, CheckReplaceableAllowsNothingThereAndADanglingSymlink) {
  EXPECT_NO_THROW(checkReplaceable(path("none.pta")));
  fs::create_symlink("missing", dir_ / "dangling.pta");
  EXPECT_NO_THROW(checkReplaceable(path("dangling.pta")));
}

}  // namespace
}  // namespace partita::artifact
