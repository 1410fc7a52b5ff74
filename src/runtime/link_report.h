// LinkReport: the byte accounting of one artifact (partita::ByteAccounting, public in
// include/partita/inspect.h), computed by the writer as it links and recomputed by the
// reader from the file (byteAccounting); the two agree exactly.
#pragma once

#include "partita/inspect.h"

namespace partita::artifact {

using LinkReport = partita::ByteAccounting;

}  // namespace partita::artifact
