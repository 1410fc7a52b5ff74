#include "runtime/format.h"

#include <cstring>

#include "base/byte_io.h"
#include "base/bytes.h"

namespace partita::artifact {

std::string_view sectionKindName(SectionKind k) {
  switch (k) {
    case SectionKind::kManifest: return "manifest";
    case SectionKind::kModule: return "module";
    case SectionKind::kWeights: return "weights";
  }
  return "unknown";
}

std::string_view useKindName(UseKind k) {
  switch (k) {
    case UseKind::kBorrow: return "borrow";
    case UseKind::kDerive: return "derive";
    case UseKind::kEmbed: return "embed";
  }
  return "unknown";
}

std::string_view storageName(Storage s) {
  switch (s) {
    case Storage::kWeights: return "weights";
    case Storage::kEmbedded: return "embedded";
  }
  return "unknown";
}

// Header: magic[8] version:u32 header_size:u32 file_size:u64 section_count:u32
// section_entry_size:u32 section_table_offset:u64 section_table_checksum:u64
// reserved:u64 header_checksum:u64.
uint64_t headerChecksum(const std::byte* header) { return hashBytes(header, 56); }

void encodeHeader(Header& h, std::byte* out) {
  std::memset(out, 0, kHeaderSize);
  std::memcpy(out, kMagic.data(), kMagic.size());
  storeLE(out + 8, h.version, 4);
  storeLE(out + 12, h.header_size, 4);
  storeLE(out + 16, h.file_size, 8);
  storeLE(out + 24, h.section_count, 4);
  storeLE(out + 28, h.section_entry_size, 4);
  storeLE(out + 32, h.section_table_offset, 8);
  storeLE(out + 40, h.section_table_checksum, 8);
  h.header_checksum = headerChecksum(out);
  storeLE(out + 56, h.header_checksum, 8);
}

Header decodeHeader(const std::byte* in) {
  Header h;
  h.version = uint32_t(loadLE(in + 8, 4));
  h.header_size = uint32_t(loadLE(in + 12, 4));
  h.file_size = loadLE(in + 16, 8);
  h.section_count = uint32_t(loadLE(in + 24, 4));
  h.section_entry_size = uint32_t(loadLE(in + 28, 4));
  h.section_table_offset = loadLE(in + 32, 8);
  h.section_table_checksum = loadLE(in + 40, 8);
  h.header_checksum = loadLE(in + 56, 8);
  return h;
}

// Section entry: kind:u32 alignment:u32 offset:u64 size:u64 checksum:u64 reserved:u64.
void encodeSectionEntry(const SectionEntry& e, std::byte* out) {
  std::memset(out, 0, kSectionEntrySize);
  storeLE(out, uint32_t(e.kind), 4);
  storeLE(out + 4, e.alignment, 4);
  storeLE(out + 8, e.offset, 8);
  storeLE(out + 16, e.size, 8);
  storeLE(out + 24, e.checksum, 8);
}

SectionEntry decodeSectionEntry(const std::byte* in) {
  SectionEntry e;
  e.kind = SectionKind(uint32_t(loadLE(in, 4)));
  e.alignment = uint32_t(loadLE(in + 4, 4));
  e.offset = loadLE(in + 8, 8);
  e.size = loadLE(in + 16, 8);
  e.checksum = loadLE(in + 24, 8);
  return e;
}

}  // namespace partita::artifact
