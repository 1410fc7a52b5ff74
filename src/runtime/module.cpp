#include "runtime/module.h"

#include "runtime/executor.h"

#include <cerrno>
#include <cstdlib>
#include <optional>

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

namespace partita::runtime {

std::vector<std::vector<int64_t>> RuntimeModule::outputShapes(uint32_t fn, const std::vector<ir::Tensor>&) const {
  throw Error(ErrorCode::kUnsupported,
              "function " + std::to_string(fn) + " of this module was compiled for fixed shapes only");
}

namespace {

// Environment variable `name` as a number from 1 to `max` (`max_text` in the error),
// or nullopt when it is unset or empty.
std::optional<uint64_t> envNumber(const char* name, uint64_t max, const char* max_text) {
  const char* env = std::getenv(name);
  if (!env || !*env) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(env, &end, 10);
  if (*end != '\0' || errno != 0 || *env == '-' || n < 1 || n > max)
    throw Error(ErrorCode::kInvalidArgument,
                std::string(name) + " must be a number from 1 to " + max_text + ", not '" + env + "'");
  return uint64_t(n);
}

}  // namespace

size_t shapeCacheEntries(size_t requested) {
  if (requested > 0) return requested;
  if (std::optional<uint64_t> n = envNumber("PARTITA_SHAPE_CACHE", 4096, "4096")) return size_t(*n);
  return kDefaultShapeCache;
}

uint64_t loopIterationLimit(uint64_t requested) {
  if (requested > 0) return requested;
  if (std::optional<uint64_t> n = envNumber("PARTITA_MAX_LOOP_ITERATIONS", uint64_t(1) << 62, "2^62")) return *n;
  return kDefaultMaxLoopIterations;
}

}  // namespace partita::runtime
