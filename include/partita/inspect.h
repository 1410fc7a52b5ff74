// What `partita inspect` reports about an artifact, as data: its header, sections,
// modules and the constants each uses, the partition (which backend runs which nodes),
// the constant table, the byte accounting and the planned memory. The CLI prints it;
// the Python package returns it as a dict. Nothing here runs the model.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "partita/dtype.h"

namespace partita {

// The byte accounting of one artifact, computed by the linker as it writes and
// recomputed from the file by inspect; the two agree exactly.
//   file_bytes          == metadata_bytes + module_bytes + distinct_weight_bytes + padding_bytes
//   weight_section_bytes == distinct_weight_bytes + weight_padding_bytes
struct ByteAccounting {
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
  bool operator==(const ByteAccounting&) const = default;
};

struct ArtifactInfo {
  std::string path;
  uint32_t format_version = 0;
  uint64_t file_bytes = 0;  // as the header records it
  std::string producer;
  uint64_t header_checksum = 0;
  std::string executor;  // the kind of executor its program needs ("graph")

  struct Section {
    std::string kind;  // "manifest", "module", "weights"
    uint64_t offset = 0, size = 0;
    uint32_t alignment = 1;
    uint64_t checksum = 0;
  };
  std::vector<Section> sections;

  struct ConstantUse {
    uint32_t id = 0;
    std::string kind;     // "borrow", "derive" or "embed"
    int64_t source = -1;  // derive: the constant it was derived from; else -1
  };
  struct Module {
    std::string kind;      // "dnnl", "ewise", ...; the last is "host.graph"
    int64_t section = -1;  // its blob's section, or -1
    uint32_t functions = 0;
    std::vector<ConstantUse> uses;  // ascending by id
    std::vector<std::pair<std::string, std::string>> assumptions;  // what its layouts assume of the machine
  };
  std::vector<Module> modules;

  struct Constant {
    uint32_t id = 0;
    std::string name;
    DType dtype = DType::kUndefined;
    std::vector<int64_t> shape;
    std::string layout;   // empty: dense row-major
    uint64_t bytes = 0;
    std::string storage;  // "weights" (in the weight section) or "embedded" (only inside module blobs)
    int64_t offset = -1;  // file offset in the weight section; -1 when embedded
    uint64_t hash = 0;    // XXH3-64 of its bytes
    std::vector<uint32_t> modules;  // the modules using it
    int64_t same_bytes_as = -1;     // an earlier constant stored at the same place (identical bytes), or -1
    // A module's derived constant (a re-layout, a fold): the constant it was derived
    // from (which need not be stored), or -1. A half weight the compiler converted to
    // float32 (docs/precision.md) is named "<its name>:float16->float32".
    int64_t derived_from = -1;
  };
  std::vector<Constant> constants;  // ascending by id

  // The executor graph's units in execution order: each region an external backend
  // runs (a partita.Call node) and each run of consecutive host nodes.
  struct Region {
    std::string name;                // the Call node's name, or "host" for a run of host nodes
    std::string backend;             // the called module's kind, or "host"
    std::vector<std::string> ops;    // op types ("domain.Op" outside the default domain)
    std::vector<std::string> nodes;  // node names, parallel to ops
    bool recorded = true;            // false: a Call node without the lists (an older artifact)
    // A shape-polymorphic region (some value it reads or makes has symbolic dims): its
    // inputs ("x float32[batch,3,h,w]") and the shapes its module was compiled for first
    // (the Call node's "representative" attribute).
    bool polymorphic = false;
    std::vector<std::string> inputs, representative;
  };
  std::vector<Region> partition;

  // The subgraphs (bodies of If, Loop and Scan nodes), depth first, each with its own
  // partition and the constants of the one weight table it reads.
  struct Subgraph {
    std::string path;  // "Loop 'decode' body", nested: "If 'sr' then_branch / Loop 'l' body"
    size_t depth = 1;
    size_t inputs = 0, outputs = 0, captures = 0;  // captures: outer values it reads
    std::vector<Region> partition;
    std::vector<uint32_t> constants;  // IDs, ascending
  };
  std::vector<Subgraph> subgraphs;

  ByteAccounting bytes;
  uint64_t manifest_bytes = 0;

  // What one session needs besides the weights, planned when the modules are loaded.
  struct Memory {
    bool planned = false;
    std::string not_planned;  // why not, when !planned
    uint64_t activation_bytes = 0;
    uint64_t module_scratch_bytes = 0;
    // activations + module scratch (each arena as mapped: from 2 MiB up, in whole 2 MiB
    // pages) + 5% of the weights
    uint64_t growth_budget = 0;
  } memory;
};

struct InspectOptions {
  bool verify_weights = false;  // also check every weight checksum (reads every weight byte)
};

// Opens and checks the artifact at `path` and gathers the facts above. Throws
// Error(kIo / kInvalidArtifact) as Model::load does; with verify_weights,
// Error(kInvalidArtifact) naming the first corrupted constant.
ArtifactInfo inspectArtifact(const std::string& path, const InspectOptions& options = {});

// The executor graph and its partition as a Graphviz digraph (`partita inspect --dot`):
// graph inputs and outputs as ellipses, host nodes and regions as boxes filled with
// their backend's colour, a legend, one edge per value read, labelled with its type.
std::string inspectDot(const std::string& path);

}  // namespace partita
