#include "backend/host/nn_ops.h"
#include "backend/host/op_registry.h"

namespace partita::host {

void registerNnOps(OpRegistry& r) {
  registerConvOps(r);
  registerPoolOps(r);
  registerMatMulOps(r);
  registerNormOps(r);
  registerResizeOps(r);
  registerQuantOps(r);
}

}  // namespace partita::host
