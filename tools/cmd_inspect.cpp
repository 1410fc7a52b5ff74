// partita inspect MODEL.pta [--verify] [--graph] [--run] [--dot FILE] [--onnx MODEL.onnx] : prints an
// artifact's header, sections, modules, partition and constant table, then its byte
// accounting and memory figures; --dot also writes the partition as a Graphviz file.
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "api/module_kinds.h"
#include "frontend/onnx/onnx_importer.h"
#include "runtime/artifact_reader.h"
#include "base/process_memory.h"
#include "partita/error.h"
#include "runtime/graph_executor.h"
#include "tools/cli.h"
#include "tools/partition_view.h"

namespace partita::cli {

namespace {

struct InspectArgs {
  std::string artifact;
  bool verify = false;
  bool graph = false;
  bool run = false;
  std::string dot;  // write the partition as Graphviz here
  std::string onnx;  // the source model, to compare metadata with its graph description
};

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

std::string moduleList(const std::vector<uint32_t>& mods) {
  std::string s;
  for (uint32_t m : mods) s += (s.empty() ? "" : ",") + std::to_string(m);
  return s;
}

void printConstants(const artifact::Artifact& a) {
  std::printf("constants (%zu)\n", a.constants.size());
  std::printf("  %-6s %-28s %-8s %-18s %-10s %12s %12s  %-8s %-16s %s\n", "id", "name", "dtype", "shape", "layout",
              "bytes", "offset", "storage", "hash", "modules");
  std::map<std::pair<uint64_t, uint64_t>, ir::ConstId> first;  // extent -> first id stored there
  for (const artifact::ConstantEntry& c : a.constants) {
    std::string note;
    if (c.storage == artifact::Storage::kWeights) {
      auto [it, inserted] = first.emplace(std::pair(c.offset, c.nbytes), c.id);
      if (!inserted) note = "  (same bytes as #" + std::to_string(it->second) + ")";
    }
    std::string name = c.name.size() > 28 ? "..." + c.name.substr(c.name.size() - 25) : c.name;
    std::printf("  %-6u %-28s %-8s %-18s %-10s %12" PRIu64 " %12s  %-8s %-16s %s%s\n", c.id, name.c_str(),
                std::string(ir::dtypeName(c.dtype)).c_str(), ir::shapeStr(c.shape).c_str(),
                c.layout.empty() ? "-" : c.layout.c_str(), c.nbytes,
                c.storage == artifact::Storage::kWeights ? std::to_string(c.offset).c_str() : "-",
                std::string(artifact::storageName(c.storage)).c_str(), hex(c.hash).c_str(),
                moduleList(c.consumers).c_str(), note.c_str());
  }
}

std::vector<ir::OwnedTensor> zeroInputs(const ir::Graph& g) {
  std::vector<ir::OwnedTensor> inputs;
  for (ir::ValueId v : g.inputs) {
    const ir::TensorType& t = g.typeOf(v);
    if (!t.isStatic())
      throw Error(ErrorCode::kInvalidArgument,
                  "--run needs static input shapes; input '" + g.value(v).name + "' is " + t.str());
    inputs.emplace_back(t.dtype, t.staticShape());
    std::memset(inputs.back().data(), 0, inputs.back().nbytes());
  }
  return inputs;
}

// Opens the artifact afresh and runs it once on zero inputs; returns the growth of
// private memory over both (the inputs, the caller's, are allocated before). A first,
// discarded round initialises the kernel libraries (OpenMP thread pool, BLAS
// buffers), which are per process, not per model.
uint64_t measureLoadAndFirstRun(const std::string& path, const ir::Graph& graph) {
  configureMallocForMeasurement();
  std::vector<ir::OwnedTensor> inputs = zeroInputs(graph);
  std::vector<ir::Tensor> views;
  for (const ir::OwnedTensor& t : inputs) views.push_back(t.view());
  uint64_t growth = 0;
  for (int round = 0; round < 2; ++round) {
    uint64_t before = anonymousBytes();
    artifact::Artifact a = artifact::openArtifact(path);
    auto exec = api::builtinExecutorKinds().create(a, api::builtinModuleKinds(), runtime::RunOptions{});
    auto state = exec->newState();
    exec->run(*state, views);
    uint64_t after = anonymousBytes();
    growth = after > before ? after - before : 0;
  }
  return growth;
}

void inspectCommand(const InspectArgs& args) {
  artifact::Artifact a = artifact::openArtifact(args.artifact);
  // First, so that an unwritable path fails before anything is printed.
  if (!args.dot.empty()) writeTextFile(args.dot, partitionDot(a));

  std::printf("artifact %s\n", a.path.c_str());
  std::printf("header\n  format version %u, %" PRIu64 " bytes, %u sections, producer \"%s\", checksum %s\n",
              a.header.version, a.header.file_size, a.header.section_count, a.producer.c_str(),
              hex(a.header.header_checksum).c_str());

  std::printf("sections\n  %-3s %-9s %14s %14s %6s  %s\n", "#", "kind", "offset", "size", "align", "checksum");
  for (size_t i = 0; i < a.sections.size(); ++i) {
    const artifact::SectionEntry& s = a.sections[i];
    std::printf("  %-3zu %-9s %14" PRIu64 " %14" PRIu64 " %6u  %s%s\n", i,
                std::string(artifact::sectionKindName(s.kind)).c_str(), s.offset, s.size, s.alignment,
                hex(s.checksum).c_str(), s.kind == artifact::SectionKind::kWeights ? " (checked on demand)" : "");
  }

  std::printf("modules\n  %-3s %-14s %-8s %-10s %s\n", "#", "kind", "section", "functions", "constant uses");
  for (size_t m = 0; m < a.modules.size(); ++m) {
    const artifact::ModuleEntry& mod = a.modules[m];
    std::map<artifact::UseKind, size_t> counts;
    for (const artifact::ConstUse& u : mod.uses) ++counts[u.kind];
    std::string uses = std::to_string(mod.uses.size());
    for (const auto& [kind, n] : counts) uses += " " + std::string(artifact::useKindName(kind)) + ":" + std::to_string(n);
    std::printf("  %-3zu %-14s %-8s %-10u %s\n", m, mod.kind.c_str(),
                mod.section == artifact::kNoSection ? "-" : std::to_string(mod.section).c_str(), mod.num_functions,
                uses.c_str());
    // What the module's compiled form assumes of the machine (checked by its loader).
    if (!mod.assumptions.empty()) {
      std::string line;
      for (const auto& [key, value] : mod.assumptions) line += " " + key + "=" + value;
      std::printf("      assumes%s\n", line.c_str());
    }
  }

  std::printf("%s", partitionText(partitionUnits(a)).c_str());
  printConstants(a);
  if (args.graph) std::printf("graph\n%s", a.graph->str().c_str());

  artifact::LinkReport r = artifact::byteAccounting(a);
  std::printf("bytes\n");
  std::printf("  file                     %14" PRIu64 "\n", r.file_bytes);
  std::printf("  weights (all uses)       %14" PRIu64 "  in %zu constants\n", r.weight_bytes, r.constants);
  std::printf("  distinct weights         %14" PRIu64 "  in %zu tensors (repeats stored once: %" PRIu64 ")\n",
              r.distinct_weight_bytes, r.distinct_constants, r.weight_bytes - r.distinct_weight_bytes);
  std::printf("  padding                  %14" PRIu64 "  (%" PRIu64 " inside the weight section)\n", r.padding_bytes,
              r.weight_padding_bytes);
  uint64_t manifest_bytes = 0;
  for (const artifact::SectionEntry& s : a.sections)
    if (s.kind == artifact::SectionKind::kManifest) manifest_bytes += s.size;
  std::printf("  metadata                 %14" PRIu64 "  (header, section table, manifest: %" PRIu64 ")\n",
              r.metadata_bytes, manifest_bytes);
  if (!args.onnx.empty()) {
    frontend::OnnxFileBytes o = frontend::onnxFileBytes(args.onnx);
    const uint64_t graph_bytes = o.file_bytes - o.weight_bytes;
    std::printf("  onnx file                %14" PRIu64 "  (%s)\n", o.file_bytes, args.onnx.c_str());
    std::printf("  onnx non-weight bytes    %14" PRIu64 "  (file - initializer raw_data %" PRIu64 ")\n", graph_bytes,
                o.weight_bytes);
    std::printf("  metadata / onnx non-weight %12.3f\n", graph_bytes ? double(r.metadata_bytes) / double(graph_bytes) : 0.0);
  }
  std::printf("  module sections          %14" PRIu64 "\n", r.module_bytes);
  if (r.embedded_bytes) std::printf("  embedded in modules      %14" PRIu64 "\n", r.embedded_bytes);
  if (r.distinct_weight_bytes) std::printf("  file / distinct weights  %14.5f\n", r.overheadRatio());

  std::unique_ptr<runtime::GraphExecutor> exec;
  try {
    exec = std::make_unique<runtime::GraphExecutor>(a.graph, a.store, artifact::loadModules(a, api::builtinModuleKinds()));
  } catch (const Error& e) {
    std::printf("memory\n  (not planned: %s)\n", e.what());
    if (args.run) throw;
  }
  if (exec) {
    uint64_t scratch = 0;
    for (const auto& m : exec->modules()) scratch += m->scratchpadBytes();
    const uint64_t budget = exec->plannedActivationBytes() + scratch + r.weight_bytes / 20;
    std::printf("memory\n");
    std::printf("  planned activations      %14zu\n", exec->plannedActivationBytes());
    if (!exec->modules().empty()) std::printf("  module scratch           %14" PRIu64 "\n", scratch);
    std::printf("  private growth budget    %14" PRIu64 "  (activations%s + 5%% of weights)\n", budget,
                exec->modules().empty() ? "" : " + module scratch");
    if (args.run) {
      uint64_t growth = measureLoadAndFirstRun(args.artifact, *a.graph);
      std::printf("  private growth: load + first run %" PRIu64 "  %s\n", growth,
                  growth <= budget ? "(within budget)" : "(OVER BUDGET)");
    }
  }

  if (args.verify) {
    artifact::verifyWeights(a);
    std::printf("weights verified: %" PRIu64 " bytes match their checksums\n", r.weight_section_bytes);
  }
  if (!args.dot.empty())
    std::printf("wrote %s (Graphviz: dot -Tsvg %s -o partition.svg)\n", args.dot.c_str(), args.dot.c_str());
}

}  // namespace

void addInspectCommand(CLI::App& app) {
  auto args = std::make_shared<InspectArgs>();
  CLI::App* cmd = app.add_subcommand(
      "inspect", "Print an artifact's sections, modules, partition, constants and byte accounting");
  cmd->add_option("artifact", args->artifact, "The artifact (.pta)")->required();
  cmd->add_flag("--verify", args->verify, "Also check every weight checksum (reads every weight byte)");
  cmd->add_flag("--graph", args->graph, "Also print the graph");
  cmd->add_flag("--run", args->run, "Run once on zero inputs and measure the private memory growth");
  cmd->add_option("--onnx", args->onnx, "The source model (.onnx): also print its non-weight bytes to compare with the metadata");
  cmd->add_option("--dot", args->dot, "Also write the executor graph and its partition as Graphviz to FILE");
  cmd->callback([args] { inspectCommand(*args); });
}

}  // namespace partita::cli
