// The manifest section: a string table, the constant table, the module table and the
// graph executor's graph, in the compact encoding of docs/format.md ("Manifest"):
// strings by index, LEB128 varints, nothing repeated. No protobuf or
// flatbuffer: the manifest is small, and the weights never pass through it.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "runtime/format.h"
#include "ir/graph.h"

namespace partita::artifact {

struct Manifest {
  std::string producer;                  // e.g. "partita 0.1.0"
  KeyValues metadata;                    // the model's metadata (ONNX metadata_props); empty today
  std::string executor = std::string(kGraphExecutor);  // the entry program's executor kind
  std::vector<ConstantEntry> constants;  // ascending by id
  std::vector<ModuleEntry> modules;
  ir::Graph graph;  // graph 0 of the graph list; its constant pool is not encoded (the constant table is)
};

// Encoding is the linker's: compiler/manifest_encode.h.

// Decodes `size` bytes, which must be exactly one manifest. Checks the encoding (every
// read in bounds, counts that fit, known enum values, value and node ids in range,
// nothing left over) and throws Error(kInvalidArtifact) otherwise; cross references
// (constants vs. sections, modules and the graph) are the reader's to check. Fills in
// each constant's `consumers` from the module table.
Manifest decodeManifest(const std::byte* data, size_t size);

}  // namespace partita::artifact
