// Host shape and data-movement ops. They move bytes without looking at them, so each
// kernel works for every dtype (element size from dtypeSize). The ops live in
// shape_*.cpp by sub-family (shape_ops.h lists them), the strided copies in
// shape_strided_copy.cpp; this file registers them all.
#include "kernels/op_registry.h"
#include "kernels/shape_ops.h"

namespace partita::kernels {

void registerShapeOps(OpRegistry& r) {
  shape::registerReshapeOps(r);
  shape::registerPermuteOps(r);
  shape::registerConcatSplitOps(r);
  shape::registerSliceOps(r);
  shape::registerExpandTileOps(r);
  shape::registerPadOps(r);
  shape::registerUniqueOps(r);
  shape::registerCenterCropPadOps(r);
  shape::registerGenerateOps(r);
  shape::registerIndexingOps(r);
}

}  // namespace partita::kernels
