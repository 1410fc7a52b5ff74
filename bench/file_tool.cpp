// partita_bench_file: page-cache helpers for the start-up measurements.
//
//   partita_bench_file evict FILE...    fdatasync, then posix_fadvise(DONTNEED): drop the
//                                       file's pages from the page cache ("cold")
//   partita_bench_file resident FILE    prints the fraction of the file's pages in memory
//   partita_bench_file touch FILE       mmap read-only, read one byte of every page,
//                                       print {"touch_ms":..,"bytes":..,"pages":..}
//
// "touch" is the physical floor of loading an artifact: whatever a runtime does, it
// has to bring every page of the file in at least once.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Fd {
  int fd = -1;
  explicit Fd(const char* path) : fd(::open(path, O_RDONLY | O_CLOEXEC)) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

int fail(const char* what, const char* path) {
  std::fprintf(stderr, "partita_bench_file: %s %s: %s\n", what, path, std::strerror(errno));
  return 1;
}

int evict(const char* path) {
  Fd f(path);
  if (f.fd < 0) return fail("cannot open", path);
  // Dirty pages are not dropped by DONTNEED: write them back first.
  if (::fdatasync(f.fd) != 0) return fail("fdatasync", path);
  int rc = ::posix_fadvise(f.fd, 0, 0, POSIX_FADV_DONTNEED);
  if (rc != 0) {
    errno = rc;
    return fail("posix_fadvise", path);
  }
  return 0;
}

// Maps the whole file read-only; returns nullptr (and sets size 0) for an empty file.
void* mapFile(int fd, size_t& size) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return MAP_FAILED;
  size = size_t(st.st_size);
  if (size == 0) return nullptr;
  return ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
}

int resident(const char* path) {
  Fd f(path);
  if (f.fd < 0) return fail("cannot open", path);
  size_t size = 0;
  void* p = mapFile(f.fd, size);
  if (p == MAP_FAILED) return fail("mmap", path);
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  const size_t pages = (size + page - 1) / page;
  std::vector<unsigned char> vec(pages);
  size_t in = 0;
  if (pages) {
    if (::mincore(p, size, vec.data()) != 0) return fail("mincore", path);
    for (unsigned char v : vec) in += v & 1;
    ::munmap(p, size);
  }
  std::printf("{\"resident\":%.4f,\"pages\":%zu}\n", pages ? double(in) / double(pages) : 1.0, pages);
  return 0;
}

int touch(const char* path) {
  auto t0 = std::chrono::steady_clock::now();
  Fd f(path);
  if (f.fd < 0) return fail("cannot open", path);
  size_t size = 0;
  void* p = mapFile(f.fd, size);
  if (p == MAP_FAILED) return fail("mmap", path);
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  unsigned sum = 0;
  const volatile unsigned char* bytes = static_cast<const unsigned char*>(p);
  for (size_t off = 0; off < size; off += page) sum += bytes[off];
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (p) ::munmap(p, size);
  std::printf("{\"touch_ms\":%.4f,\"bytes\":%zu,\"pages\":%zu,\"checksum\":%u}\n", ms, size,
              (size + page - 1) / page, sum);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: partita_bench_file evict|resident|touch FILE...\n");
    return 2;
  }
  std::string cmd = argv[1];
  int rc = 0;
  for (int i = 2; i < argc; ++i) {
    if (cmd == "evict") {
      rc |= evict(argv[i]);
    } else if (cmd == "resident") {
      rc |= resident(argv[i]);
    } else if (cmd == "touch") {
      rc |= touch(argv[i]);
    } else {
      std::fprintf(stderr, "partita_bench_file: unknown command %s\n", cmd.c_str());
      return 2;
    }
  }
  return rc;
}
