#include "kernels/nn_ops.h"
#include "kernels/op_registry.h"

namespace partita::kernels {

void registerNnOps(OpRegistry& r) {
  registerConvOps(r);
  registerPoolOps(r);
  registerMatMulOps(r);
  registerNormOps(r);
  registerResizeOps(r);
  registerQuantOps(r);
  registerRecurrentOps(r);
  registerQuantLinearOps(r);
  registerLossOps(r);
  registerSignalOps(r);
  registerSampleOps(r);
  registerDetectionOps(r);
  registerUnpoolOps(r);
  registerRandomOps(r);
  registerGroupNormOps(r);
  registerDeformOps(r);
  registerTrainingOps(r);
  registerTextOps(r);
}

}  // namespace partita::kernels
