#include "backend/host/op_registry.h"
#include "backend/host/op_util.h"

namespace partita::host {

void registerNnOps(OpRegistry& r) {}

}  // namespace partita::host
