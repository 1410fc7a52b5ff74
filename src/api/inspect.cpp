// inspectArtifact: the facts `partita inspect` prints and partita.inspect() returns,
// gathered once from an opened artifact.
#include "partita/inspect.h"

#include <map>
#include <memory>

#include "api/module_kinds.h"
#include "api/partition_view.h"
#include "partita/error.h"
#include "runtime/artifact_reader.h"
#include "runtime/graph_executor.h"

namespace partita {

namespace {

std::vector<ArtifactInfo::Constant> constantsOf(const artifact::Artifact& a) {
  std::vector<ArtifactInfo::Constant> out;
  std::map<ir::ConstId, ir::ConstId> source;  // derived constant -> what it was derived from
  for (const artifact::ModuleEntry& m : a.modules)
    for (const artifact::ConstUse& u : m.uses)
      if (u.kind == artifact::UseKind::kDerive) source.emplace(u.id, u.source);
  std::map<std::pair<uint64_t, uint64_t>, ir::ConstId> first;  // extent -> first id stored there
  for (const artifact::ConstantEntry& c : a.constants) {
    ArtifactInfo::Constant k;
    k.id = c.id;
    k.name = c.name;
    k.dtype = c.dtype;
    k.shape = c.shape;
    k.layout = c.layout;
    k.bytes = c.nbytes;
    k.storage = std::string(artifact::storageName(c.storage));
    k.hash = c.hash;
    k.modules = c.consumers;
    if (auto it = source.find(c.id); it != source.end()) k.derived_from = int64_t(it->second);
    if (c.storage == artifact::Storage::kWeights) {
      k.offset = int64_t(c.offset);
      auto [it, inserted] = first.emplace(std::pair(c.offset, c.nbytes), c.id);
      if (!inserted) k.same_bytes_as = it->second;
    }
    out.push_back(std::move(k));
  }
  return out;
}

std::vector<ArtifactInfo::Module> modulesOf(const artifact::Artifact& a) {
  std::vector<ArtifactInfo::Module> out;
  for (const artifact::ModuleEntry& m : a.modules) {
    ArtifactInfo::Module k;
    k.kind = m.kind;
    k.section = m.section == artifact::kNoSection ? -1 : int64_t(m.section);
    k.functions = m.num_functions;
    for (const artifact::ConstUse& u : m.uses)
      k.uses.push_back({u.id, std::string(artifact::useKindName(u.kind)),
                        u.kind == artifact::UseKind::kDerive ? int64_t(u.source) : -1});
    k.assumptions = m.assumptions;
    out.push_back(std::move(k));
  }
  return out;
}

// The activation arena and module scratch one session plans, from the executor the
// loader would build; a model that cannot be planned says why.
ArtifactInfo::Memory memoryOf(const artifact::Artifact& a, const ByteAccounting& r) {
  ArtifactInfo::Memory mem;
  std::unique_ptr<runtime::GraphExecutor> exec;
  try {
    exec = std::make_unique<runtime::GraphExecutor>(a.graph, a.store, artifact::loadModules(a, api::builtinModuleKinds()));
  } catch (const Error& e) {
    mem.not_planned = e.what();
    return mem;
  }
  mem.planned = true;
  mem.activation_bytes = exec->plannedActivationBytes();
  for (const auto& m : exec->modules()) mem.module_scratch_bytes += m->scratchpadBytes();
  mem.growth_budget = exec->mappedArenaBytes() + r.weight_bytes / 20;
  return mem;
}

}  // namespace

ArtifactInfo inspectArtifact(const std::string& path, const InspectOptions& options) {
  artifact::Artifact a = artifact::openArtifact(path);
  if (options.verify_weights) artifact::verifyWeights(a);
  ArtifactInfo info;
  info.path = a.path;
  info.format_version = a.header.version;
  info.file_bytes = a.header.file_size;
  info.producer = a.producer;
  info.header_checksum = a.header.header_checksum;
  info.executor = a.executor;
  for (const artifact::SectionEntry& s : a.sections) {
    info.sections.push_back({std::string(artifact::sectionKindName(s.kind)), s.offset, s.size, s.alignment, s.checksum});
    if (s.kind == artifact::SectionKind::kManifest) info.manifest_bytes += s.size;
  }
  info.modules = modulesOf(a);
  info.constants = constantsOf(a);
  info.partition = api::partitionUnits(a);
  info.subgraphs = api::subgraphsOf(a);
  info.bytes = artifact::byteAccounting(a);
  info.memory = memoryOf(a, info.bytes);
  return info;
}

std::string inspectDot(const std::string& path) { return api::partitionDot(artifact::openArtifact(path)); }

}  // namespace partita
