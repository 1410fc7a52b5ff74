// AtomicFile: creates the file at `path` all at once or not at all.
//
// Bytes go to a temporary file in the target directory -- unnamed (O_TMPFILE) where the
// file system allows, else a hidden ".<name>.tmp-<pid>-<n>" -- and become `path` only in
// commit(): fsync the data, link or rename it into place, fsync the directory. Until
// then an existing file at `path` is untouched; a failure, an exception or a killed
// process leaves no partial file under `path` (and, with O_TMPFILE, nothing at all).
//
// It replaces only what is safe to replace (checked when constructed and again just
// before the rename): nothing at `path`, a regular file with a write permission bit
// set, or a symlink to one. It refuses, with Error(kInvalidArgument) naming the path
// and the rule, a directory, FIFO, device or socket (never renames over /dev/null), a
// write-protected file (no write bit at all, e.g. 0444: the mode bits are read, since
// access(W_OK) says yes to root), a file the caller may not write, and any of `keep`
// (the files being read, e.g. the input model and its external data; compared by
// device and inode, so hard links and symlinks are caught).
// Not thread-safe; one writer per object.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/safe_open.h"

namespace partita::artifact {

// Throws what AtomicFile's constructor throws for a target it refuses to replace
// (above); returns when `path` may be written. For checking early, before the work.
void checkReplaceable(const std::string& path, const std::vector<SourceFile>& keep = {});

class AtomicFile {
 public:
  // Throws Error(kInvalidArgument) for a target it refuses (above), Error(kIo) naming
  // the directory when the temporary cannot be created.
  explicit AtomicFile(std::string path, std::vector<SourceFile> keep = {});
  ~AtomicFile();  // discards the temporary unless committed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Writes `n` bytes at `offset`. Throws Error(kIo) (e.g. "No space left on device").
  void writeAt(uint64_t offset, const void* data, size_t n);
  // Like writeAt, but file-page-aligned 4 KiB blocks that are all zero are skipped and
  // stay holes (they read back as zeros): large zero tensors cost no disk.
  void writeSparseAt(uint64_t offset, const void* data, size_t n);
  // Sets the final size (a trailing hole reads as zeros).
  void setSize(uint64_t size);
  // Makes the file durable and visible at `path`, replacing any file there.
  void commit();

  const std::string& path() const { return path_; }

 private:
  void discard() noexcept;

  std::string path_;
  std::vector<SourceFile> keep_;
  std::string dir_;
  std::string temp_name_;  // empty while the temporary is unnamed
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace partita::artifact
