// The oneDNN backend, compile side: claims the ONNX nodes oneDNN runs exactly
// (float32, static shapes; see dnnl_claims.h), fuses post-ops inside each region and
// compiles the regions into one "dnnl" runtime module (dnnl_module.h).
#pragma once

#include <memory>

#include "backend/backend.h"

namespace partita::backend {

std::unique_ptr<Backend> makeDnnlBackend();

}  // namespace partita::backend
