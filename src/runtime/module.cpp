#include "runtime/module.h"

#include <map>
#include <mutex>

#include "partita/error.h"

namespace partita::runtime {

namespace {
std::mutex g_mutex;
std::map<std::string, ModuleLoader>& table() {
  static std::map<std::string, ModuleLoader> t;
  return t;
}
}  // namespace

void registerModuleKind(const std::string& kind, ModuleLoader loader) {
  std::lock_guard<std::mutex> lock(g_mutex);
  table()[kind] = loader;
}

ModuleLoader findModuleKind(const std::string& kind) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = table().find(kind);
  return it == table().end() ? nullptr : it->second;
}

std::shared_ptr<RuntimeModule> loadModule(const std::string& kind, const ModuleLoadContext& ctx) {
  ModuleLoader loader = findModuleKind(kind);
  if (!loader)
    throw Error(ErrorCode::kUnsupported, "the artifact needs runtime module kind '" + kind +
                                             "', which this build of partita does not have");
  for (const ConstUse& use : ctx.uses)
    if (use.kind != ConstUseKind::kEmbed && !ctx.store->has(use.id))
      throw Error(ErrorCode::kInvalidArtifact, "module '" + kind + "' needs constant " + std::to_string(use.id) +
                                                   ", which is not in the weight store");
  return loader(ctx);
}

}  // namespace partita::runtime
