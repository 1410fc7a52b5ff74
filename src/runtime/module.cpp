#include "runtime/module.h"

#include "partita/error.h"

namespace partita::runtime {

ModuleKinds::ModuleKinds(std::vector<ModuleKind> kinds) : kinds_(std::move(kinds)) {
  for (size_t i = 0; i < kinds_.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (kinds_[i].name == kinds_[j].name)
        throw Error(ErrorCode::kInternal, "module kind '" + std::string(kinds_[i].name) + "' is listed twice");
}

const ModuleKind* ModuleKinds::find(std::string_view name) const {
  for (const ModuleKind& k : kinds_)
    if (k.name == name) return &k;
  return nullptr;
}

std::vector<std::string> ModuleKinds::names() const {
  std::vector<std::string> out;
  for (const ModuleKind& k : kinds_) out.emplace_back(k.name);
  return out;
}

std::shared_ptr<RuntimeModule> ModuleKinds::load(const std::string& kind, const ModuleLoadContext& ctx) const {
  const ModuleKind* k = find(kind);
  if (!k)
    throw Error(ErrorCode::kUnsupported, "the artifact needs runtime module kind '" + kind +
                                             "', which this build of partita does not have");
  for (const ConstUse& use : ctx.uses)
    if (use.kind != ConstUseKind::kEmbed && !ctx.store->has(use.id))
      throw Error(ErrorCode::kInvalidArtifact, "module '" + kind + "' needs constant " + std::to_string(use.id) +
                                                   ", which is not in the weight store");
  return k->load(ctx);
}

}  // namespace partita::runtime
