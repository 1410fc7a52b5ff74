// Opening an artifact: map the file read-only, validate it, and hand out the graph and
// a ConstStore whose tensors are zero-copy views into the mapping (no weight byte is
// copied or touched at open).
//
// Checked at open: the header (magic, version, size, checksum), the section table
// (checksum, every section inside the file, aligned, no two overlapping), the
// checksums of the manifest and every module section, and the manifest's contents
// (every constant inside the weight section and aligned, modules and constants
// referring to each other consistently, the graph well formed). Weight checksums are
// checked on demand (verifyWeights), since that reads every weight byte.
// Any failure is Error(kInvalidArtifact) naming the file and what is wrong.
//
// An Artifact is immutable; its graph and store may be shared by many sessions. The
// mapping lives as long as anything holds the store, the graph or a Bytes from it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/format.h"
#include "runtime/link_report.h"
#include "base/bytes.h"
#include "ir/graph.h"
#include "runtime/const_store.h"
#include "runtime/module.h"

namespace partita::artifact {

struct OpenOptions {
  bool verify_weights = false;  // also check every weight checksum at open
};

struct Artifact {
  std::string path;
  Bytes file;  // the whole mapped file
  Header header;
  std::vector<SectionEntry> sections;
  std::string producer;
  std::string executor;  // the entry program's executor kind (runtime/executor_kinds.h)
  std::vector<ModuleEntry> modules;      // external modules, then the host graph executor
  std::vector<ConstantEntry> constants;  // ascending by id
  std::shared_ptr<const ir::Graph> graph;
  std::shared_ptr<const runtime::ConstStore> store;

  Bytes section(size_t index) const;     // the bytes of section `index`
  Bytes moduleBlob(size_t module) const;  // empty when the module has no section
  const ConstantEntry* findConstant(ir::ConstId id) const;  // nullptr when absent
};

// Maps and validates the file at `path`. Error(kIo) when it cannot be opened.
Artifact openArtifact(const std::string& path, const OpenOptions& options = {});

// Validates an artifact already in memory; `name` is used in messages. The views in
// the returned store point into `file` (which must stay unmodified).
Artifact readArtifact(Bytes file, const std::string& name, const OpenOptions& options = {});

// Checks the weight section's checksum and, when it fails, finds the culprit.
// Throws Error(kInvalidArtifact) naming the first constant whose bytes do not match
// their hash (or the padding, when every tensor matches).
void verifyWeights(const Artifact& artifact);

// Loads the external modules (all but the last, the graph executor) with their blobs
// (views into the mapping) and the store, in the order `partita.Call` nodes number
// them: ready for runtime::GraphExecutor(a.graph, a.store, loadModules(a, kinds)).
// `threads` is the run thread count the modules are created for and `shape_cache` the
// input shapes each shape-polymorphic function keeps compiled (RunOptions).
// Error(kUnsupported) when `kinds` lacks a module kind.
std::vector<std::shared_ptr<const runtime::RuntimeModule>> loadModules(const Artifact& artifact,
                                                                const runtime::ModuleKinds& kinds, int threads = 2,
                                                                size_t shape_cache = 0);

// The byte accounting of an opened artifact (equal to the writer's LinkReport).
LinkReport byteAccounting(const Artifact& artifact);

}  // namespace partita::artifact
