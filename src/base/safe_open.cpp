#include "base/safe_open.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "partita/error.h"

namespace partita {

namespace {

// O_NONBLOCK: opening a FIFO for reading returns at once instead of waiting for a
// writer (and a device does not wait for carrier); fstat then refuses both.
constexpr int kOpenFlags = O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;

[[noreturn]] void fail(const std::string& message) { throw Error(ErrorCode::kIo, message); }

std::string quoted(const std::string& s) { return "'" + s + "'"; }

[[noreturn]] void notRegular(const std::string& path, mode_t mode) {
  fail(quoted(path) + " is " + fileKindName(mode) + ", not a regular file; partita reads only regular files");
}

[[noreturn]] void openFailed(const std::string& path, int err) {
  struct stat st {};
  // A socket cannot be open()ed at all (ENXIO); say what it is instead.
  if (err == ENXIO && ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) notRegular(path, st.st_mode);
  fail("cannot open " + quoted(path) + ": " + std::strerror(err));
}

// Takes ownership of `fd`; refuses anything but a regular file.
OpenedFile regularOrThrow(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    fail("cannot stat " + quoted(path) + ": " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    notRegular(path, st.st_mode);
  }
  return OpenedFile(fd, path, uint64_t(st.st_size), FileId{uint64_t(st.st_dev), uint64_t(st.st_ino)});
}

// Is `real` (an absolute path without symlinks, "." or "..") strictly inside `root`?
bool inside(const std::string& real, const std::string& root) {
  if (root == "/") return real.size() > 1 && real[0] == '/';
  return real.size() > root.size() + 1 && real.compare(0, root.size(), root) == 0 && real[root.size()] == '/';
}

bool insideAny(const std::string& real, const std::vector<std::string>& roots) {
  for (const std::string& r : roots)
    if (inside(real, r)) return true;
  return false;
}

std::string describeRoots(const std::vector<std::string>& roots) {
  std::string s;
  for (size_t i = 0; i < roots.size(); ++i) s += (i ? (i + 1 == roots.size() ? " or " : ", ") : "") + quoted(roots[i]);
  return s;
}

// `path` made absolute against the current directory, with empty and "." components
// dropped (".." is kept: openat2 resolves it and refuses an escape).
std::string lexicalAbsolute(const std::string& path) {
  std::string joined = path;
  if (path.empty() || path[0] != '/') {
    std::unique_ptr<char, decltype(&std::free)> cwd(::getcwd(nullptr, 0), &std::free);
    if (!cwd) fail("cannot open " + quoted(path) + ": cannot read the current directory: " + std::strerror(errno));
    joined = std::string(cwd.get()) + "/" + path;
  }
  std::string out;
  size_t i = 0;
  while (i < joined.size()) {
    size_t j = joined.find('/', i);
    if (j == std::string::npos) j = joined.size();
    std::string part = joined.substr(i, j - i);
    if (!part.empty() && part != ".") out += "/" + part;
    i = j + 1;
  }
  return out.empty() ? "/" : out;
}

// openat2(root, rel, RESOLVE_BENEATH): the fd, or -1 with `err` set.
int openBeneath(const std::string& root, const std::string& rel, int& err) {
  int dfd = ::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) {
    err = errno;
    return -1;
  }
  struct open_how how {};
  how.flags = uint64_t(kOpenFlags);
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
  long fd = ::syscall(SYS_openat2, dfd, rel.c_str(), &how, sizeof how);
  err = fd < 0 ? errno : 0;
  ::close(dfd);
  return int(fd);
}

// The kernel lacks openat2 (ENOSYS; a container's seccomp filter may say EPERM, an old
// kernel EINVAL), or refused a symlink leaving the lexical root (EXDEV: also absolute
// symlinks, even into the root) or too many levels (ELOOP): decide by the real path.
bool decideByRealPath(int err) {
  return err == ENOSYS || err == EPERM || err == EINVAL || err == EXDEV || err == ELOOP || err == EAGAIN;
}

struct Beneath {
  std::vector<std::string> roots;  // real paths
  const std::string& hint;
};

[[noreturn]] void outside(const std::string& path, const std::string& real, const Beneath& b) {
  fail(quoted(path) + " resolves to " + quoted(real) + ", which is not beneath " + describeRoots(b.roots) +
       " (symlinks are followed only to files beneath " + (b.roots.size() > 1 ? "those folders" : "that folder") +
       ")" + b.hint);
}

OpenedFile openByRealPath(const std::string& path, const Beneath& b) {
  const std::vector<std::string>& roots = b.roots;
  char buf[PATH_MAX];
  if (!::realpath(path.c_str(), buf)) openFailed(path, errno);
  const std::string real = buf;
  if (!insideAny(real, roots)) outside(path, real, b);
  // The real path has no symlink left; O_NOFOLLOW refuses one swapped in at the end.
  int fd = ::open(real.c_str(), kOpenFlags | O_NOFOLLOW);
  if (fd < 0) {
    int err = errno;
    if (err == ELOOP) fail(quoted(path) + " changed while being opened (its real path became a symlink)");
    openFailed(path, err);
  }
  // A folder on the way may have been swapped for a symlink since realpath(): check
  // where the descriptor really points.
  std::string proc = "/proc/self/fd/" + std::to_string(fd);
  ssize_t n = ::readlink(proc.c_str(), buf, sizeof buf - 1);
  std::string opened;
  if (n > 0) {
    opened.assign(buf, size_t(n));
  } else if (::realpath(path.c_str(), buf)) {  // no /proc: resolve again, compare identities
    struct stat a {}, b {};
    if (::fstat(fd, &a) == 0 && ::stat(buf, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) opened = buf;
  }
  if (!insideAny(opened, roots)) {
    ::close(fd);
    outside(path, opened.empty() ? real : opened, b);
  }
  return regularOrThrow(fd, path);
}

}  // namespace

const char* fileKindName(unsigned mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

OpenedFile::~OpenedFile() {
  if (fd_ >= 0) ::close(fd_);
}

OpenedFile& OpenedFile::operator=(OpenedFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    size_ = other.size_;
    id_ = other.id_;
    other.fd_ = -1;
  }
  return *this;
}

std::string realPath(const std::string& path) {
  char buf[PATH_MAX];
  if (!::realpath(path.c_str(), buf)) fail("cannot resolve " + quoted(path) + ": " + std::strerror(errno));
  return buf;
}

bool fileIdOf(const std::string& path, FileId& id) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  id = FileId{uint64_t(st.st_dev), uint64_t(st.st_ino)};
  return true;
}

OpenedFile openRegularFile(const std::string& path, const std::vector<std::string>& roots,
                           const std::string& outside_hint) {
  if (path.empty()) fail("cannot open '': the file name is empty");
  if (roots.empty()) {
    int fd = ::open(path.c_str(), kOpenFlags);
    if (fd < 0) openFailed(path, errno);
    return regularOrThrow(fd, path);
  }
  std::vector<std::string> real_roots;
  for (const std::string& r : roots) {
    std::string real = realPath(r);
    struct stat st {};
    if (::stat(real.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) fail(quoted(r) + " is not a folder");
    real_roots.push_back(real);
  }
  const std::string abs = lexicalAbsolute(path);
  for (const std::string& root : real_roots) {
    if (!inside(abs, root)) continue;
    int err = 0;
    int fd = openBeneath(root, abs.substr(root == "/" ? 1 : root.size() + 1), err);
    if (fd >= 0) return regularOrThrow(fd, path);
    if (!decideByRealPath(err)) openFailed(path, err);
    break;
  }
  return openByRealPath(path, Beneath{real_roots, outside_hint});
}

}  // namespace partita
