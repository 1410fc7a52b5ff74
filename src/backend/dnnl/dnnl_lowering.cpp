#include "backend/dnnl/dnnl_lowering.h"

#include <omp.h>

#include <string>

#include "backend/dnnl/dnnl_function_lowering.h"
#include "backend/dnnl/dnnl_module_builder.h"
#include "backend/dnnl/dnnl_primitive.h"
#include "partita/error.h"

namespace partita::dnnl_backend {

backend::ModuleImage compileRegions(const ir::Graph& g, const std::vector<backend::Region>& regions,
                                    backend::ConstantSink& sink) {
  // oneDNN tunes implementations to the thread count: the compiler driver has set
  // this thread's OpenMP team size to the one runs will use (CompileOptions::threads).
  ModuleBuilder mb(g, sink);
  for (const backend::Region& r : regions) {
    FunctionLowering lowering(mb, r);
    try {
      mb.program().functions.push_back(lowering.run());
    } catch (const dnnl::error& e) {
      throw Error(ErrorCode::kInternal,
                  std::string("dnnl backend: oneDNN rejected a region it was given: ") + e.what());
    }
  }
  backend::ModuleImage image = mb.finish();
  // What the recorded layouts were chosen for: checked by DnnlModule::load.
  image.assumptions = layoutAssumptions(omp_get_max_threads());
  return image;
}

}  // namespace partita::dnnl_backend
