// oneDNN memory descriptors as partita stores and names them: plain (row-major)
// descriptors for tensors, the layout string that tags a derived weight in the
// constant pool, and a byte encoding for module blobs. Shared by the compile and the
// run-time half of the dnnl backend.
#pragma once

#include <cstdint>
#include <dnnl.hpp>
#include <optional>
#include <string>
#include <vector>

#include "backend/dnnl/dnnl_blob_io.h"

namespace partita::dnnl_backend {

using dnnl::memory;

// Row-major f32 descriptor (withDataType for another element type); a rank-0 shape becomes {1} (oneDNN has no scalars).
memory::desc plainDesc(const std::vector<int64_t>& shape);
// An f32 descriptor over `dims` with explicit strides (in elements): a transposed or
// windowed view of row-major bytes.
memory::desc withStrides(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides);
// A dense f32 descriptor over `dims` (rank 2 or more) stored row-major but for the last
// two dims, which are swapped in memory: each matrix [..., K, N] held column by column
// (oneDNN's `acb` for rank 3). A transposed matrix product operand copied this way
// reads its source's rows in order, and oneDNN's matmul takes it as it takes a
// row-major one.
memory::desc lastTwoSwapped(const std::vector<int64_t>& dims);
// The logical dims of a descriptor.
std::vector<int64_t> dimsOf(const memory::desc& md);
// A dense f32 descriptor over `dims` whose dims are ordered in memory as md's are (by
// md's strides; ties keep the logical order): channels-last stays channels-last at
// another size. Row-major for a descriptor with inner blocks or another format.
memory::desc denseLike(const memory::desc& md, const std::vector<int64_t>& dims);
// A descriptor with the same dims and data type whose format is left to oneDNN.
memory::desc anyDesc(const memory::desc& md);
memory::desc anyDesc(const std::vector<int64_t>& shape);
// `md` with elements of type `t` (same dims and strides in elements).
memory::desc withDataType(memory::desc md, memory::data_type t);

bool isAny(const memory::desc& md);
// Dense (no padding), no inner blocks and no offset: any order of dims (row-major,
// channels-last, ...), so every element sits at the dot product of its index with
// elementStrides(md). Views over such bytes are strided descriptors.
bool isDenseUnblocked(const memory::desc& md);
// The strides in elements of a blocked descriptor without inner blocks.
std::vector<int64_t> elementStrides(const memory::desc& md);
// Blocked without inner blocks, padding or offset, dense in the order `order` (its
// dims, outermost first): each dim's stride the product of the extents inside it (a
// dim of extent 1 may have any stride).
bool isDenseInOrder(const memory::desc& md, const std::vector<int>& order);
// isDenseInOrder row-major: the bytes of a dense row-major tensor with md's number of
// elements.
bool isPlainDense(const memory::desc& md);
// [N, C, spatial...] (rank 3 or more, any element type), dense, no inner blocks, no offset, the
// channels innermost and the rest row-major (acb, acdb, acdeb): each of the N * spatial
// positions holds its C channels side by side.
bool isChannelsLastDense(const memory::desc& md);
bool hasPadding(const memory::desc& md);
// A reorder wrote view `inner` (strided, no inner blocks, over bytes A) into dense
// row-major bytes B of inner's dims; `outer` is a strided view over B. The view over A
// that reads the same elements as `outer` does, when it is a strided one: each of
// outer's dims steps through one of inner's without carrying into the next. (A Slice
// copied, reshaped and transposed: one view.) nullopt otherwise.
std::optional<memory::desc> composeViews(const memory::desc& inner, const memory::desc& outer);
int64_t numElements(const memory::desc& md);  // product of the logical dims

// The bytes from a memory's handle that `md` may touch: offset0 plus the span of its
// strides over the padded dims. (oneDNN's get_size() is 0 for a descriptor with a
// non-zero offset0, a sub-memory view; checks against a buffer use this instead.)
uint64_t extentBytes(const memory::desc& md);

// Byte-for-byte identity of two descriptors (dims, type, layout).
bool sameDesc(const memory::desc& a, const memory::desc& b);

// The element type as oneDNN's short name: "f32", "u8", "s8", "s32", "bf16", "f16".
const char* dataTypeName(const memory::desc& md);
// A compact human-readable tag such as "acdb" or "ABcd16b16a" (blocked dims upper case).
std::string formatTag(const memory::desc& md);
// Fully describes a blocked layout: dims, padded dims, offsets, strides and inner
// blocks, e.g. "dnnl:f32:ABcd16b16a:dims=64,3,7,7:padded=64,16,7,7:strides=...".
// For messages and compile-time keys.
std::string layoutString(const memory::desc& md);
// The compact tag stored as the layout of derived constants: data type, format tag
// and logical dims, e.g. "dnnl:f32:Acdb16a:20,3,3,3". The module blob holds the full
// descriptor; the loader checks the tag and the byte count against it.
std::string layoutTag(const memory::desc& md);

// Encoding used in module blobs. Only blocked or `any` descriptors are written, extra
// data (the compensation of s8 weights) only for blocked ones (anything else throws
// Error(kInternal)); reading validates ranks, data types, block counts and flags.
void writeDesc(BlobWriter& w, const memory::desc& md);
memory::desc readDesc(BlobReader& r);

}  // namespace partita::dnnl_backend
