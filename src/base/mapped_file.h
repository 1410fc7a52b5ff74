// MappedFile: a whole file mapped read-only with mmap. The mapping lives as long as
// the last Bytes that shares it. Thread-safe once opened (it is immutable).
#pragma once

#include <string>

#include "base/bytes.h"

namespace partita {

// Maps `path` read-only. Throws Error(kIo) naming the path when it cannot.
// An empty file yields empty Bytes.
Bytes mapFile(const std::string& path);

}  // namespace partita
