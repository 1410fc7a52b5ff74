// MappedFile: a whole file mapped read-only with mmap. The mapping lives as long as
// the last Bytes that shares it. Thread-safe once opened (it is immutable).
#pragma once

#include <cstddef>
#include <string>

#include "base/bytes.h"
#include "base/safe_open.h"

namespace partita {

// The huge page size the mappings below are aligned for (x86-64's 2 MiB).
inline constexpr size_t kHugePageBytes = size_t(2) << 20;

// mmap of `bytes` at an address that is a multiple of kHugePageBytes, advised
// MADV_HUGEPAGE so that transparent huge pages (or the page cache's 2 MiB folios, for a
// file) can back it with one page-table entry each: reserves kHugePageBytes more, maps
// over the aligned part (`flags` | MAP_FIXED; `fd` -1 for anonymous memory) and gives
// back the slack on either side. Returns MAP_FAILED with errno set as mmap does.
void* mapAtHugePageBoundary(size_t bytes, int prot, int flags, int fd);

// Maps `path` read-only. It must be a regular file (base/safe_open.h: a FIFO or device
// is refused without blocking). Throws Error(kIo) naming the path when it cannot.
// An empty file yields empty Bytes.
Bytes mapFile(const std::string& path);
// Maps a file opened with openRegularFile (its size at open).
Bytes mapFile(const OpenedFile& file);
// Maps in one call the page-cache pages of [data, data + size) of a mapping made by
// mapFile (MADV_POPULATE_READ), instead of one page fault per few pages on first read;
// reads from disk what is not cached. Advice only: a kernel without it leaves the
// pages to fault in as they are read.
void prefault(const Bytes& mapped);
// prefault, then reads one byte of every page. In a virtual machine the first read of
// a page by a process can cost a microsecond or more even when the page is mapped
// (a shadow page table entry being filled); the cost is paid once per process, by
// whichever of its threads reads first.
void readEveryPage(const Bytes& mapped);

}  // namespace partita
