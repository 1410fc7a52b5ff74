// Registration of the shape and data-movement host ops, one function per kernel file;
// all are called by registerShapeOps (ops_shape.cpp).
#pragma once

#include "kernels/op_registry.h"

namespace partita::kernels::shape {

void registerReshapeOps(OpRegistry& r);      // shape_reshape.cpp: Reshape, Flatten, Squeeze, Unsqueeze
void registerPermuteOps(OpRegistry& r);      // shape_permute.cpp: Transpose, DepthToSpace, SpaceToDepth,
                                             // ReverseSequence
void registerConcatSplitOps(OpRegistry& r);  // shape_concat_split.cpp: Concat, Split
void registerSliceOps(OpRegistry& r);        // shape_slice.cpp: Slice
void registerExpandTileOps(OpRegistry& r);   // shape_expand_tile.cpp: Expand, Tile
void registerUniqueOps(OpRegistry& r);       // shape_unique.cpp: Unique
void registerCenterCropPadOps(OpRegistry& r);  // shape_center_crop.cpp: CenterCropPad
void registerPadOps(OpRegistry& r);          // shape_pad.cpp: Pad
void registerGenerateOps(OpRegistry& r);     // shape_generate.cpp: Shape, Size, ConstantOfShape, Range
void registerIndexingOps(OpRegistry& r);     // shape_indexing.cpp: Gather, GatherElements, GatherND,
                                             // ScatterElements (and Scatter), ScatterND, Compress

}  // namespace partita::kernels::shape
