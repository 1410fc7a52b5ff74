#include "base/atomic_file.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "partita/error.h"

namespace partita::artifact {

namespace {

[[noreturn]] void ioError(const std::string& what, int err) {
  throw Error(ErrorCode::kIo, what + ": " + std::strerror(err));
}

std::string dirOf(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string baseOf(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string uniqueTempName(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  return dirOf(path) + "/." + baseOf(path) + ".tmp-" + std::to_string(::getpid()) + "-" +
         std::to_string(counter.fetch_add(1));
}

[[noreturn]] void refuse(const std::string& path, const std::string& why) {
  throw Error(ErrorCode::kInvalidArgument, "refusing to write '" + path + "': " + why);
}

}  // namespace

void checkReplaceable(const std::string& path, const std::vector<SourceFile>& keep) {
  struct stat entry {};
  if (::lstat(path.c_str(), &entry) != 0) return;  // nothing there (or unreachable: creating will say)
  if (!S_ISREG(entry.st_mode) && !S_ISLNK(entry.st_mode))
    refuse(path, std::string("it is ") + fileKindName(entry.st_mode) + ", not a regular file (partita replaces only regular files)");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;  // a dangling symlink: the link is replaced
  if (!S_ISREG(st.st_mode))
    refuse(path, std::string("it is a symlink to ") + fileKindName(st.st_mode) +
                     ", not to a regular file (partita replaces only regular files)");
  const FileId id{uint64_t(st.st_dev), uint64_t(st.st_ino)};
  for (const SourceFile& f : keep)
    if (f.id == id) refuse(path, "it is " + f.what + " (the same file), which is being read");
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", unsigned(st.st_mode & 07777));
  if ((st.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)) == 0)
    refuse(path, std::string("it is write-protected (mode ") + mode + "); remove it or make it writable first");
  // For root access() always says yes; for anyone else it reads the bits that apply.
  if (::geteuid() != 0 && ::faccessat(AT_FDCWD, path.c_str(), W_OK, AT_EACCESS) != 0)
    refuse(path, std::string("you have no write permission on it (mode ") + mode + ")");
}

AtomicFile::AtomicFile(std::string path, std::vector<SourceFile> keep)
    : path_(std::move(path)), keep_(std::move(keep)), dir_(dirOf(path_)) {
  if (path_.empty() || path_.back() == '/') throw Error(ErrorCode::kIo, "'" + path_ + "' is not a file name");
  checkReplaceable(path_, keep_);
  fd_ = ::open(dir_.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
  if (fd_ >= 0) return;
  int err = errno;
  // Some file systems lack O_TMPFILE; then a hidden named temporary does.
  if (err != EOPNOTSUPP && err != EISDIR && err != EINVAL)
    ioError("cannot create a file in '" + dir_ + "' for '" + path_ + "'", err);
  temp_name_ = uniqueTempName(path_);
  fd_ = ::open(temp_name_.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0666);
  if (fd_ < 0) {
    err = errno;
    temp_name_.clear();
    ioError("cannot create a file in '" + dir_ + "' for '" + path_ + "'", err);
  }
}

AtomicFile::~AtomicFile() {
  if (!committed_) discard();
}

void AtomicFile::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temp_name_.empty()) ::unlink(temp_name_.c_str());
  temp_name_.clear();
}

void AtomicFile::writeAt(uint64_t offset, const void* data, size_t n) {
  const auto* p = static_cast<const std::byte*>(data);
  while (n > 0) {
    size_t chunk = std::min<size_t>(n, size_t(1) << 30);
    ssize_t w = ::pwrite(fd_, p, chunk, off_t(offset));
    if (w < 0) {
      if (errno == EINTR) continue;
      ioError("cannot write '" + path_ + "'", errno);
    }
    if (w == 0) ioError("cannot write '" + path_ + "'", EIO);
    p += w;
    n -= size_t(w);
    offset += uint64_t(w);
  }
}

void AtomicFile::setSize(uint64_t size) {
  if (::ftruncate(fd_, off_t(size)) != 0) ioError("cannot size '" + path_ + "'", errno);
}

void AtomicFile::commit() {
  if (::fsync(fd_) != 0) ioError("cannot flush '" + path_ + "'", errno);
  checkReplaceable(path_, keep_);  // again: the target may have changed since construction
  if (temp_name_.empty()) {
    // Give the unnamed file a name: directly at `path` when nothing is there (atomic,
    // and nothing to clean up), else a temporary name that rename() then moves over.
    std::string proc = "/proc/self/fd/" + std::to_string(fd_);
    auto linkTo = [&](const std::string& name) {
      if (::linkat(fd_, "", AT_FDCWD, name.c_str(), AT_EMPTY_PATH) == 0) return 0;
      if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, name.c_str(), AT_SYMLINK_FOLLOW) == 0) return 0;
      return errno;
    };
    int err = linkTo(path_);
    if (err == EEXIST) {
      std::string temp = uniqueTempName(path_);
      err = linkTo(temp);
      if (err == 0) temp_name_ = temp;
    }
    if (err != 0) ioError("cannot create '" + path_ + "'", err);
  }
  if (!temp_name_.empty()) {
    if (::rename(temp_name_.c_str(), path_.c_str()) != 0) ioError("cannot create '" + path_ + "'", errno);
    temp_name_.clear();
  }
  committed_ = true;
  ::close(fd_);
  fd_ = -1;
  int dfd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);  // the new directory entry survives a crash; best effort
    ::close(dfd);
  }
}

namespace {

bool isZero(const std::byte* p, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    if (w) return false;
  }
  for (; i < n; ++i)
    if (p[i] != std::byte{0}) return false;
  return true;
}

}  // namespace

void BlockWriter::put(uint64_t offset, const void* data, size_t n) {
  if (offset < end_ || offset > size_ || n > size_ - offset)
    throw Error(ErrorCode::kInternal, "'" + file_.path() + "': " + std::to_string(n) + " bytes at " +
                                          std::to_string(offset) + " are not after " + std::to_string(end_) +
                                          " and within " + std::to_string(size_));
  const auto* p = static_cast<const std::byte*>(data);
  while (n > 0) {
    if (const uint64_t index = offset / kBlockBytes; index != index_) {
      flush();
      index_ = index;
    }
    if (block_.empty()) block_.resize(kBlockBytes);
    const size_t at = size_t(offset % kBlockBytes);
    const size_t take = std::min<size_t>(n, kBlockBytes - at);
    std::memcpy(block_.data() + at, p, take);
    pending_ = true;
    p += take;
    n -= take;
    offset += take;
    end_ = offset;
  }
}

void BlockWriter::flush() {
  if (!pending_) return;
  const uint64_t start = index_ * kBlockBytes;
  const size_t n = size_t(std::min<uint64_t>(kBlockBytes, size_ - start));
  if (!isZero(block_.data(), n)) file_.writeAt(start, block_.data(), n);
  std::memset(block_.data(), 0, n);
  pending_ = false;
}

void BlockWriter::finish() {
  flush();
  file_.setSize(size_);
}

}  // namespace partita::artifact
