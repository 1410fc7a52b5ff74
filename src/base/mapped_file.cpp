#include "base/mapped_file.h"

#include <cerrno>
#include <cstring>

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>

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

// The whole file, read-only; from kHugePageBytes up at a 2 MiB boundary: where the page
// cache holds the file in 2 MiB folios (BlockWriter writes artifacts so, and a read
// through such a mapping brings a file in so on filesystems with large folios), the
// kernel maps each folio with one page-table entry (docs/format.md, "Page cache").
// Returns MAP_FAILED with errno set as mmap does.
void* mapWhole(int fd, size_t size) {
  if (size >= kHugePageBytes && size <= SIZE_MAX / 2)
    if (void* addr = mapAtHugePageBoundary(size, PROT_READ, MAP_PRIVATE, fd); addr != MAP_FAILED) return addr;
  return ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
}

}  // namespace

void* mapAtHugePageBoundary(size_t bytes, int prot, int flags, int fd) {
  if (bytes > SIZE_MAX - kHugePageBytes) {
    errno = ENOMEM;
    return MAP_FAILED;
  }
  void* reserved = ::mmap(nullptr, bytes + kHugePageBytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (reserved == MAP_FAILED) return MAP_FAILED;
  const uintptr_t start = reinterpret_cast<uintptr_t>(reserved);
  const uintptr_t aligned = (start + kHugePageBytes - 1) & ~uintptr_t(kHugePageBytes - 1);
  void* addr = ::mmap(reinterpret_cast<void*>(aligned), bytes, prot, flags | MAP_FIXED, fd, 0);
  if (addr == MAP_FAILED) {
    const int err = errno;
    ::munmap(reserved, bytes + kHugePageBytes);
    errno = err;
    return MAP_FAILED;
  }
  // The reservation was [start, start + pages(bytes) + kHugePageBytes); the mapping now
  // holds [aligned, aligned + pages(bytes)).
  if (aligned > start) ::munmap(reserved, aligned - start);
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  const uintptr_t end = aligned + ((bytes + page - 1) & ~(page - 1));
  if (start + kHugePageBytes > aligned) ::munmap(reinterpret_cast<void*>(end), start + kHugePageBytes - aligned);
#ifdef MADV_HUGEPAGE
  (void)::madvise(addr, bytes, MADV_HUGEPAGE);  // advice only: works the same without THP
#endif
  return addr;
}

Bytes mapFile(const std::string& path) { return mapFile(openRegularFile(path)); }

Bytes mapFile(const OpenedFile& file) {
  auto m = std::make_shared<Mapping>();
  m->size = size_t(file.size());
  if (m->size > 0) {
    void* addr = mapWhole(file.fd(), m->size);
    if (addr == MAP_FAILED) throw Error(ErrorCode::kIo, "cannot map '" + file.path() + "': " + std::strerror(errno));
    m->addr = addr;
  }
  Bytes b;
  b.data = static_cast<const std::byte*>(m->addr);
  b.size = m->size;
  b.owner = std::move(m);
  return b;
}

void prefault(const Bytes& mapped) {
#ifdef MADV_POPULATE_READ
  if (!mapped.data || mapped.size == 0) return;
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  const uintptr_t start = reinterpret_cast<uintptr_t>(mapped.data) & ~(page - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(mapped.data) + mapped.size;
  (void)madvise(reinterpret_cast<void*>(start), end - start, MADV_POPULATE_READ);
#else
  (void)mapped;
#endif
}

void readEveryPage(const Bytes& mapped) {
  prefault(mapped);
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  unsigned char sum = 0;
  for (size_t i = 0; i < mapped.size; i += page) sum ^= static_cast<unsigned char>(mapped.data[i]);
  volatile unsigned char sink = sum;  // keeps the reads
  (void)sink;
}

}  // namespace partita
