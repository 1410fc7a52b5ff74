#include "api/module_kinds.h"
#include "partita/model.h"
#include "runtime/artifact_reader.h"
#include "runtime/executor.h"

namespace partita {

std::shared_ptr<const Model> Model::load(const std::string& path, const LoadOptions& options) {
  runtime::checkThreads(options.threads);  // before mapping anything
  const runtime::RunOptions run{options.threads, options.limits, options.shape_cache};
  artifact::Artifact a = artifact::openArtifact(path);
  return std::make_shared<Model>(api::builtinExecutorKinds().create(a, api::builtinModuleKinds(), run));
}

}  // namespace partita
