// Strided element copies: the one loop behind the host backend's data-movement ops.
// Transpose, Slice, Expand, Tile, Concat, Split, DepthToSpace and SpaceToDepth all
// express themselves as "copy a view of shape S with these element strides into that
// view" and let copyStrided pick the fast path (row memcpy, broadcast fill, tiled 2-D
// transpose, or a strided gather). Works on raw bytes, so every dtype is covered.
// Thread-safe: no state; uses OpenMP when the copy is large.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace partita::kernels {

// Copies every element of `shape` from src + sum(i_k * src_strides[k]) to
// dst + sum(i_k * dst_strides[k]). Strides count elements of `elem_size` bytes; source
// strides may be zero (broadcast) or negative (reversal). The destination elements must
// not overlap each other or the source.
void copyStrided(std::byte* dst, const std::vector<int64_t>& dst_strides, const std::byte* src,
                 const std::vector<int64_t>& src_strides, const std::vector<int64_t>& shape,
                 size_t elem_size);

// The same with a dense row-major destination of `shape`.
void copyStridedToDense(std::byte* dst, const std::byte* src, const std::vector<int64_t>& src_strides,
                        const std::vector<int64_t>& shape, size_t elem_size);

// Fills `count` elements of `elem_size` bytes at dst with the element at `value`.
void fillElements(std::byte* dst, const std::byte* value, int64_t count, size_t elem_size);

}  // namespace partita::kernels
