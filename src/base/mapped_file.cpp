#include "base/mapped_file.h"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "partita/error.h"

namespace partita {

namespace {
struct Mapping {
  void* addr = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (addr) munmap(addr, size);
  }
};
}  // namespace

Bytes mapFile(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(ErrorCode::kIo, "cannot open '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    throw Error(ErrorCode::kIo, "cannot stat '" + path + "': " + std::strerror(e));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw Error(ErrorCode::kIo, "'" + path + "' is a directory, not a file");
  }
  auto m = std::make_shared<Mapping>();
  m->size = size_t(st.st_size);
  if (m->size > 0) {
    void* addr = ::mmap(nullptr, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      throw Error(ErrorCode::kIo, "cannot map '" + path + "': " + std::strerror(e));
    }
    m->addr = addr;
  }
  ::close(fd);
  Bytes b;
  b.data = static_cast<const std::byte*>(m->addr);
  b.size = m->size;
  b.owner = std::move(m);
  return b;
}

}  // namespace partita
