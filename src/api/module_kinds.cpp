#include "api/module_kinds.h"

#if PARTITA_HAVE_DNNL
#include "backend/dnnl/dnnl_module.h"
#endif
#if PARTITA_HAVE_EWISE
#include "backend/ewise/ewise_module.h"
#endif

namespace partita::api {

const runtime::ModuleKinds& builtinModuleKinds() {
  static const runtime::ModuleKinds kinds({
#if PARTITA_HAVE_DNNL
      dnnl_backend::dnnlModuleKind(),
#endif
#if PARTITA_HAVE_EWISE
      ewise::ewiseModuleKind(),
#endif
  });
  return kinds;
}

const runtime::ExecutorKinds& builtinExecutorKinds() {
  static const runtime::ExecutorKinds kinds({runtime::graphExecutorKind()});
  return kinds;
}

}  // namespace partita::api
