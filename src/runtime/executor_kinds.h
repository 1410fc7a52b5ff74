// The executor kinds a runtime knows, listed explicitly (api/module_kinds.cpp lists
// this build's, beside its module kinds). An artifact names the executor kind of its
// entry program (manifest field `executor`, docs/format.md); loading looks the kind
// up here and fails with a clear error when this build lacks it, so an artifact made
// for a later executor (e.g. control flow) is refused by name, not misread.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/artifact_reader.h"
#include "runtime/executor.h"
#include "runtime/module.h"

namespace partita::runtime {

struct ExecutorKind {
  std::string_view name;
  // Builds the executor of a validated artifact over its store, with the external
  // modules already loaded (in module-table order).
  std::shared_ptr<Executor> (*create)(const artifact::Artifact& artifact,
                                      std::vector<std::shared_ptr<const RuntimeModule>> modules,
                                      const RunOptions& options);
};

class ExecutorKinds {
 public:
  ExecutorKinds() = default;
  explicit ExecutorKinds(std::vector<ExecutorKind> kinds);

  const ExecutorKind* find(std::string_view name) const;  // nullptr when unknown
  // Loads the artifact's modules with `modules` and builds its executor.
  // Error(kUnsupported) naming the kind when this list lacks it (checked before any
  // module is loaded).
  std::shared_ptr<Executor> create(const artifact::Artifact& artifact, const ModuleKinds& modules,
                                   const RunOptions& options) const;

 private:
  std::vector<ExecutorKind> kinds_;
};

// The graph executor's entry (kind "graph").
ExecutorKind graphExecutorKind();

}  // namespace partita::runtime
