// The linker's half of the manifest: encodes a Manifest (runtime/manifest.h) in the
// compact encoding of docs/format.md. Kept out of the run-time library, which only
// decodes. Pure function: thread-safe.
#pragma once

#include <cstddef>
#include <vector>

#include "runtime/manifest.h"

namespace partita::artifact {

std::vector<std::byte> encodeManifest(const Manifest& m);

}  // namespace partita::artifact
