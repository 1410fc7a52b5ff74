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

#include "base/mapped_file.h"
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

// Writes an AtomicFile front to back in whole blocks of kBlockBytes (2 MiB) at offsets
// that are multiples of it, one pwrite each. Filesystems with large folios in the page
// cache (ext4 on recent kernels such as 6.18, XFS) then keep the new file in 2 MiB folios,
// which every process mapping it maps with one page-table entry each: reading a 47 MB
// artifact's pages for the first time in a process takes under 1 ms instead of 15 ms
// (docs/format.md, "Page cache"). A block that is all zero is not written and
// stays a hole (it reads back as zeros): large zero tensors cost no disk.
class BlockWriter {
 public:
  static constexpr uint64_t kBlockBytes = kHugePageBytes;

  // Writes `file`, which will be `size` bytes long.
  BlockWriter(AtomicFile& file, uint64_t size) : file_(file), size_(size) {}
  // Puts `n` bytes at `offset`: at or past the end of what was put before, and within
  // the size (Error(kInternal) if not). The bytes between read as zeros.
  void put(uint64_t offset, const void* data, size_t n);
  // Writes what is pending and sets the file's size.
  void finish();

 private:
  void flush();  // writes the block in hand unless it is all zero

  AtomicFile& file_;
  uint64_t size_;
  std::vector<std::byte> block_;  // block `index_`'s bytes, zero where nothing was put
  uint64_t index_ = 0;
  bool pending_ = false;  // block_ holds bytes not written yet
  uint64_t end_ = 0;      // the end of what was put
};

}  // namespace partita::artifact
