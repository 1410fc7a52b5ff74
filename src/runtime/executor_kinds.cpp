#include "runtime/executor_kinds.h"

#include "partita/error.h"
#include "runtime/graph_executor.h"

namespace partita::runtime {

ExecutorKinds::ExecutorKinds(std::vector<ExecutorKind> kinds) : kinds_(std::move(kinds)) {
  for (size_t i = 0; i < kinds_.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (kinds_[i].name == kinds_[j].name)
        throw Error(ErrorCode::kInternal, "executor kind '" + std::string(kinds_[i].name) + "' is listed twice");
}

const ExecutorKind* ExecutorKinds::find(std::string_view name) const {
  for (const ExecutorKind& k : kinds_)
    if (k.name == name) return &k;
  return nullptr;
}

std::shared_ptr<Executor> ExecutorKinds::create(const artifact::Artifact& a, const ModuleKinds& modules,
                                                const RunOptions& options) const {
  const ExecutorKind* k = find(a.executor);
  if (!k)
    throw Error(ErrorCode::kUnsupported, "'" + a.path + "' needs executor kind '" + a.executor +
                                             "', which this build of partita does not have");
  return k->create(a, artifact::loadModules(a, modules, options.threads, options.shape_cache), options);
}

ExecutorKind graphExecutorKind() {
  return {GraphExecutor::kKind, [](const artifact::Artifact& a, std::vector<std::shared_ptr<const RuntimeModule>> modules,
                                   const RunOptions& options) -> std::shared_ptr<Executor> {
            return std::make_shared<GraphExecutor>(a.graph, a.store, std::move(modules), options);
          }};
}

}  // namespace partita::runtime
