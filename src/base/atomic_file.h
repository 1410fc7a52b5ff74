// AtomicFile: creates the file at `path` all at once or not at all.
//
// Bytes go to a temporary file in the target directory -- unnamed (O_TMPFILE) where the
// file system allows, else a hidden ".<name>.tmp-<pid>-<n>" -- and become `path` only in
// commit(): fsync the data, link or rename it into place, fsync the directory. Until
// then an existing file at `path` is untouched; a failure, an exception or a killed
// process leaves no partial file under `path` (and, with O_TMPFILE, nothing at all).
// Not thread-safe; one writer per object.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace partita::artifact {

class AtomicFile {
 public:
  // Throws Error(kIo) naming the directory when the temporary cannot be created.
  explicit AtomicFile(std::string path);
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
  std::string dir_;
  std::string temp_name_;  // empty while the temporary is unnamed
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace partita::artifact
