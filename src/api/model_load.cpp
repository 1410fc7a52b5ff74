#include "api/module_kinds.h"
#include "partita/model.h"
#include "runtime/artifact_reader.h"
#include "runtime/graph_executor.h"

namespace partita {

std::shared_ptr<const Model> Model::load(const std::string& path, const LoadOptions& options) {
  if (options.threads < 1 || options.threads > 1024)
    throw Error(ErrorCode::kInvalidArgument,
                "threads must be between 1 and 1024, not " + std::to_string(options.threads));
  const runtime::RunOptions run{options.threads};
  artifact::Artifact a = artifact::openArtifact(path);
  auto modules = artifact::loadModules(a, api::builtinModuleKinds(), run.threads);
  return std::make_shared<Model>(std::make_shared<runtime::GraphExecutor>(a.graph, a.store, std::move(modules), run));
}

}  // namespace partita
