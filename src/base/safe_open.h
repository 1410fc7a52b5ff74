// Opening a file someone else may have prepared (a model, its external data, an input
// tensor): regular files only, optionally only beneath a root folder. See
// docs/security.md for the rules and why.
//
// Every open uses O_NONBLOCK, so a FIFO or a device node is refused by fstat instead of
// blocking the process in open(); nothing is read from anything but a regular file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace partita {

// A file's identity on this machine: two paths name the same file (hard links, bind
// mounts, symlinks) exactly when their FileIds are equal.
struct FileId {
  uint64_t dev = 0;
  uint64_t ino = 0;
  bool operator==(const FileId&) const = default;
};

// A file partita read, and how a message names it ("the input model 'm.onnx'"): the
// atomic writer refuses to replace one (base/atomic_file.h).
struct SourceFile {
  FileId id;
  std::string what;
};

// An open, read-only descriptor of a regular file; closes it when destroyed.
class OpenedFile {
 public:
  OpenedFile() = default;
  OpenedFile(int fd, std::string path, uint64_t size, FileId id)
      : fd_(fd), path_(std::move(path)), size_(size), id_(id) {}
  ~OpenedFile();
  OpenedFile(OpenedFile&& other) noexcept { *this = std::move(other); }
  OpenedFile& operator=(OpenedFile&& other) noexcept;
  OpenedFile(const OpenedFile&) = delete;
  OpenedFile& operator=(const OpenedFile&) = delete;

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }  // as the caller named it
  uint64_t size() const { return size_; }             // at open
  FileId id() const { return id_; }

 private:
  int fd_ = -1;
  std::string path_;
  uint64_t size_ = 0;
  FileId id_;
};

// Opens `path` read-only. Refuses, with Error(kIo) naming the file and the rule:
//  - anything but a regular file (directory, FIFO, device, socket), without blocking;
//  - when `roots` is not empty: a file whose real path (every symlink followed) is not
//    beneath one of the `roots` folders. Symlinks inside a root are followed as long as
//    the file they lead to is beneath a root. `path` is absolute or relative to the
//    current directory; the roots are folders (resolved with realpath here).
// Uses openat2(RESOLVE_BENEATH) relative to the root when `path` lies lexically inside
// it; where the kernel lacks openat2, or a symlink leads out of the lexical root (which
// openat2 refuses even when it comes back in), the real path from realpath() is checked
// against the roots, opened with O_NOFOLLOW, and the opened descriptor's path is checked
// again through /proc/self/fd, so a component swapped for a symlink in between is caught.
// `outside_hint` is appended to the message refusing a file outside the roots (e.g. how
// to name another trusted folder).
OpenedFile openRegularFile(const std::string& path, const std::vector<std::string>& roots = {},
                           const std::string& outside_hint = {});

// "a FIFO", "a directory", "a character device", ... for a stat st_mode.
const char* fileKindName(unsigned mode);

// realpath(3) of `path`; throws Error(kIo) naming it when it cannot be resolved.
std::string realPath(const std::string& path);

// The identity of the file at `path` (symlinks followed), or nothing when it does not
// exist or cannot be examined.
bool fileIdOf(const std::string& path, FileId& id);

}  // namespace partita
