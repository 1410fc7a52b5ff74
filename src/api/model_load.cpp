#include "api/module_kinds.h"
#include "partita/model.h"
#include "runtime/artifact_reader.h"
#include "runtime/executor.h"
#include "runtime/graph_executor.h"

namespace partita {

std::shared_ptr<const Model> Model::load(const std::string& path, const LoadOptions& options) {
  runtime::checkThreads(options.threads);  // before mapping anything
  const runtime::RunOptions run{options.threads, options.limits};
  artifact::Artifact a = artifact::openArtifact(path);
  auto modules = artifact::loadModules(a, api::builtinModuleKinds(), run.threads);
  return std::make_shared<Model>(std::make_shared<runtime::GraphExecutor>(a.graph, a.store, std::move(modules), run));
}

}  // namespace partita
