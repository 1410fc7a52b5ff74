// Writer and bounds-checked reader for the dnnl module blob: base/byte_io.h's, the
// same little-endian encoding as the artifact's metadata.
#pragma once

#include "base/byte_io.h"

namespace partita::dnnl_backend {

using BlobWriter = artifact::ByteWriter;

// The reader is the artifact's bounds-checked reader; a short or malformed blob throws
// Error(kInvalidArtifact) saying where.
using BlobReader = artifact::ByteReader;

}  // namespace partita::dnnl_backend
