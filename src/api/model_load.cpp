#include "api/module_kinds.h"
#include "runtime/artifact_reader.h"
#include "partita/model.h"
#include "runtime/graph_executor.h"

namespace partita {

std::shared_ptr<const Model> Model::load(const std::string& path) {
  artifact::Artifact a = artifact::openArtifact(path);
  auto executor = std::make_shared<runtime::GraphExecutor>(a.graph, a.store, artifact::loadModules(a, api::builtinModuleKinds()));
  return std::make_shared<Model>(std::move(executor));
}

}  // namespace partita
