// The on-disk layout of a partita artifact (.pta), shared by the writer, the reader,
// `partita inspect` and the fuzzer. docs/format.md describes every byte; keep the two
// in step. All integers are little-endian. Every value here is part of the format:
// never renumber, only append (and bump kFormatVersion on any incompatible change).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir/constant_pool.h"
#include "ir/dtype.h"
#include "ir/type.h"
#include "runtime/module.h"

namespace partita::artifact {

// "\x89PTA\r\n\x1a\n": a high byte (catches 7-bit transfers), CRLF and LF (catch
// newline translation), ^Z (stops `type` on DOS) -- PNG's trick.
inline constexpr std::array<uint8_t, 8> kMagic = {0x89, 'P', 'T', 'A', '\r', '\n', 0x1a, '\n'};
inline constexpr uint32_t kFormatVersion = 2;

inline constexpr size_t kHeaderSize = 64;
inline constexpr size_t kSectionEntrySize = 40;
inline constexpr uint32_t kMaxSections = 1u << 16;
// Constant IDs are < kMaxConstIds: the loader builds ID-indexed tables, so an ID is
// also a memory cost that a hostile file must not be able to choose freely.
inline constexpr uint32_t kMaxConstIds = 1u << 20;
inline constexpr uint32_t kNoSection = 0xffffffffu;

// Weight alignment rule: every tensor starts on a 64-byte boundary (cache line, AVX-512
// loads); a tensor of 1 MiB or more starts on a 4096-byte page so it can be mapped,
// advised or dropped on its own.
inline constexpr uint64_t kTensorAlignment = 64;
inline constexpr uint64_t kPageAlignment = 4096;
inline constexpr uint64_t kPageAlignThreshold = uint64_t(1) << 20;
// A tensor of 1 MiB or more starts on a page, one of 64 bytes or more on 64 bytes, and a
// smaller one on its size rounded up to a power of two (a float scalar on 4 bytes): at
// least its element size, and never straddling a cache line.
inline uint64_t tensorAlignment(uint64_t nbytes) {
  if (nbytes >= kPageAlignThreshold) return kPageAlignment;
  uint64_t align = 1;
  while (align < nbytes && align < kTensorAlignment) align <<= 1;
  return align;
}

enum class SectionKind : uint32_t { kManifest = 1, kModule = 2, kWeights = 3 };

// How a module uses a constant (DESIGN.md "All, some or none"): borrow, derive or
// embed. The types are the runtime module contract's (src/runtime/module.h).
using UseKind = runtime::ConstUseKind;
using ConstUse = runtime::ConstUse;

// Where a constant's bytes are: in the weight section, or only inside module blobs.
enum class Storage : uint8_t { kWeights = 1, kEmbedded = 2 };

// The module kind of the host graph executor; its "code" is the graph in the manifest.
// It is the last entry of the module table; the entries before it are the external
// modules, numbered as `partita.Call` nodes number them (attribute "module").
inline constexpr std::string_view kHostGraphModule = "host.graph";

// The executor kind of the entry program (manifest field `executor`): today only the
// graph executor, whose program is graph 0.
inline constexpr std::string_view kGraphExecutor = "graph";

// A value's kind (the first byte of every encoded type; an optional's is followed by
// the kind it holds, 0 or 1): ir::ValueKind's numbers. Readers reject other numbers.
using ValueKind = ir::ValueKind;

// Attribute kind 8 (ir::Attribute::Kind::kGraph): a graph, payload a graph index into
// the manifest's graph list (If/Loop/Scan bodies; each graph 1.. is referred to once).
inline constexpr uint8_t kGraphAttributeKind = 8;

// dtype codes 14..19 are reserved (float8 e4m3fn, e4m3fnuz, e5m2, e5m2fnuz; uint4,
// int4); readers reject every code they do not know.

using KeyValues = std::vector<std::pair<std::string, std::string>>;

struct Header {
  uint32_t version = kFormatVersion;
  uint32_t header_size = kHeaderSize;
  uint64_t file_size = 0;
  uint32_t section_count = 0;
  uint32_t section_entry_size = kSectionEntrySize;
  uint64_t section_table_offset = kHeaderSize;
  uint64_t section_table_checksum = 0;
  uint64_t header_checksum = 0;  // XXH3-64 of header bytes [0, 56)
};

struct SectionEntry {
  SectionKind kind = SectionKind::kManifest;
  uint32_t alignment = 1;  // the offset is a multiple of this (a power of two)
  uint64_t offset = 0;     // from the start of the file
  uint64_t size = 0;
  uint64_t checksum = 0;   // XXH3-64 of the section's bytes
};

struct ModuleEntry {
  std::string kind;               // "dnnl", ..., and last "host.graph"
  uint32_t section = kNoSection;  // its blob's section index, or kNoSection
  uint32_t num_functions = 0;     // functions `partita.Call` nodes may call
  std::vector<ConstUse> uses;     // ascending by id, one use per id
  KeyValues assumptions;          // what its derived layouts assume (ISA, library version, ...)
};

struct ConstantEntry {
  ir::ConstId id = ir::kNoConst;
  std::string name;  // for people only
  ir::DType dtype = ir::DType::kUndefined;
  std::vector<int64_t> shape;
  std::string layout;  // empty: dense row-major
  Storage storage = Storage::kWeights;
  uint64_t offset = 0;  // absolute file offset (kWeights); 0 when embedded
  uint64_t nbytes = 0;
  uint64_t hash = 0;    // XXH3-64 of the bytes
  std::vector<uint32_t> consumers;  // module indices, ascending; not in the file:
                                    // derived from the module table when decoding
};

std::string_view sectionKindName(SectionKind k);  // "manifest", "module", "weights", "unknown"
std::string_view useKindName(UseKind k);          // "borrow", "derive", "embed", "unknown"
std::string_view storageName(Storage s);          // "weights", "embedded", "unknown"

// Fixed-size records. encode* write exactly kHeaderSize / kSectionEntrySize bytes and
// fill in header_checksum; decode* read them without validating anything.
void encodeHeader(Header& h, std::byte* out);
Header decodeHeader(const std::byte* in);
void encodeSectionEntry(const SectionEntry& e, std::byte* out);
SectionEntry decodeSectionEntry(const std::byte* in);
uint64_t headerChecksum(const std::byte* header);  // of bytes [0, 56)

inline uint64_t alignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace partita::artifact
