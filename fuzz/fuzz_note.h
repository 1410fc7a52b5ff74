// The fuzz targets' one diagnostic.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "partita/error.h"

namespace partita::fuzz {

// With PARTITA_FUZZ_VERBOSE set in the environment, the targets say how far each input
// got: the refusal that stopped it, or that it ran (for replaying a corpus by hand).
inline void note(const char* what) {
  static const bool verbose = std::getenv("PARTITA_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "fuzz: %s\n", what);
}
inline void note(const Error& e) { note(e.what()); }

}  // namespace partita::fuzz
