// LinkReport: the byte accounting of one artifact, computed by the writer as it links
// and recomputed by the reader from the file (byteAccounting); the two agree exactly.
//   file_bytes          == metadata_bytes + module_bytes + distinct_weight_bytes + padding_bytes
//   weight_section_bytes == distinct_weight_bytes + weight_padding_bytes
#pragma once

#include <cstddef>
#include <cstdint>

namespace partita::artifact {

struct LinkReport {
  uint64_t file_bytes = 0;
  uint64_t weight_section_bytes = 0;
  uint64_t weight_bytes = 0;           // every stored constant, counting repeats
  uint64_t distinct_weight_bytes = 0;  // each distinct tensor once
  uint64_t padding_bytes = 0;          // alignment padding anywhere in the file
  uint64_t weight_padding_bytes = 0;   // the part of it inside the weight section
  uint64_t metadata_bytes = 0;         // header + section table + manifest
  uint64_t module_bytes = 0;           // module sections (external backends' blobs)
  uint64_t embedded_bytes = 0;         // constants that live only inside module blobs
  size_t constants = 0;                // constants stored in the weight section
  size_t distinct_constants = 0;       // distinct tensors in the weight section

  // file_bytes / distinct_weight_bytes (0 when there are no weights).
  double overheadRatio() const {
    return distinct_weight_bytes ? double(file_bytes) / double(distinct_weight_bytes) : 0.0;
  }
  bool operator==(const LinkReport&) const = default;
};

}  // namespace partita::artifact
