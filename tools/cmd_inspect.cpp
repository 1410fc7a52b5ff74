// partita inspect MODEL.pta [--verify] [--graph] [--run] [--dot FILE] [--onnx MODEL.onnx] : prints an
// artifact's header, sections, modules, partition and constant table, then its byte
// accounting and memory figures; --dot also writes the partition as a Graphviz file.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "api/module_kinds.h"
#include "api/partition_view.h"
#include "base/process_memory.h"
#include "frontend/onnx/onnx_importer.h"
#include "partita/error.h"
#include "partita/inspect.h"
#include "runtime/artifact_reader.h"
#include "runtime/executor_kinds.h"
#include "tools/cli.h"
#include "tools/cli_util.h"

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

void printConstants(const std::vector<ArtifactInfo::Constant>& constants) {
  std::printf("constants (%zu)\n", constants.size());
  std::printf("  %-6s %-28s %-8s %-18s %-10s %12s %12s  %-8s %-16s %s\n", "id", "name", "dtype", "shape", "layout",
              "bytes", "offset", "storage", "hash", "modules");
  for (const ArtifactInfo::Constant& c : constants) {
    std::string note = c.same_bytes_as < 0 ? "" : "  (same bytes as #" + std::to_string(c.same_bytes_as) + ")";
    if (c.derived_from >= 0) note += "  (derived from #" + std::to_string(c.derived_from) + ")";
    std::string name = c.name.size() > 28 ? "..." + c.name.substr(c.name.size() - 25) : c.name;
    std::printf("  %-6u %-28s %-8s %-18s %-10s %12" PRIu64 " %12s  %-8s %-16s %s%s\n", c.id, name.c_str(),
                std::string(dtypeName(c.dtype)).c_str(), ir::shapeStr(c.shape).c_str(),
                c.layout.empty() ? "-" : c.layout.c_str(), c.bytes,
                c.offset >= 0 ? std::to_string(c.offset).c_str() : "-", c.storage.c_str(), hex(c.hash).c_str(),
                moduleList(c.modules).c_str(), note.c_str());
  }
}

// The sequence and optional values of a graph and its bodies, one line each ("" when
// there are none): they run on the host, outside the planned arena.
void listAggregates(const ir::Graph& g, const std::string& where, std::string& out) {
  for (size_t v = 0; v < g.values.size(); ++v) {
    const ir::Value& val = g.values[v];
    if (val.type.isTensor()) continue;
    const bool input = std::find(g.inputs.begin(), g.inputs.end(), ir::ValueId(v)) != g.inputs.end();
    const std::string made =
        val.producer != ir::kNoNode
            ? " (" + g.nodes[size_t(val.producer)].op_type + " '" + g.nodes[size_t(val.producer)].name + "')"
        : input ? " (input)"
                : "";
    out += "  " + where + "'" + val.name + "'" + made + ": " + val.type.str() + "\n";
  }
  for (const ir::Node& n : g.nodes)
    for (const auto& [name, a] : n.attrs.all())
      if (a.kind == ir::Attribute::Kind::kGraph && a.graph)
        listAggregates(*a.graph, where + n.op_type + " '" + n.name + "' " + name + ": ", out);
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
uint64_t measureLoadAndFirstRun(const std::string& path) {
  configureMallocForMeasurement();
  std::vector<ir::OwnedTensor> inputs = zeroInputs(*artifact::openArtifact(path).graph);
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
  const ArtifactInfo info = inspectArtifact(args.artifact, {args.verify});
  // First, so that an unwritable path fails before anything is printed.
  if (!args.dot.empty()) writeTextFile(args.dot, inspectDot(args.artifact));

  std::printf("artifact %s\n", info.path.c_str());
  std::printf("header\n  format version %u, %" PRIu64 " bytes, %zu sections, producer \"%s\", checksum %s\n",
              info.format_version, info.file_bytes, info.sections.size(), info.producer.c_str(),
              hex(info.header_checksum).c_str());

  std::printf("sections\n  %-3s %-9s %14s %14s %6s  %s\n", "#", "kind", "offset", "size", "align", "checksum");
  for (size_t i = 0; i < info.sections.size(); ++i) {
    const ArtifactInfo::Section& s = info.sections[i];
    std::printf("  %-3zu %-9s %14" PRIu64 " %14" PRIu64 " %6u  %s%s\n", i, s.kind.c_str(), s.offset, s.size, s.alignment,
                hex(s.checksum).c_str(), s.kind == "weights" ? " (checked on demand)" : "");
  }

  std::printf("modules\n  %-3s %-14s %-8s %-10s %s\n", "#", "kind", "section", "functions", "constant uses");
  for (size_t m = 0; m < info.modules.size(); ++m) {
    const ArtifactInfo::Module& mod = info.modules[m];
    std::string uses = std::to_string(mod.uses.size());
    for (const char* kind : {"borrow", "derive", "embed"}) {
      size_t n = 0;
      for (const ArtifactInfo::ConstantUse& u : mod.uses) n += u.kind == kind;
      if (n) uses += " " + std::string(kind) + ":" + std::to_string(n);
    }
    std::printf("  %-3zu %-14s %-8s %-10u %s\n", m, mod.kind.c_str(),
                mod.section < 0 ? "-" : std::to_string(mod.section).c_str(), mod.functions, uses.c_str());
    // What the module's compiled form assumes of the machine (checked by its loader).
    if (!mod.assumptions.empty()) {
      std::string line;
      for (const auto& [key, value] : mod.assumptions) line += " " + key + "=" + value;
      std::printf("      assumes%s\n", line.c_str());
    }
  }

  std::printf("%s", api::partitionText(info.partition).c_str());
  std::printf("%s", api::subgraphText(info.subgraphs).c_str());
  printConstants(info.constants);
  std::string aggregates;
  listAggregates(*artifact::openArtifact(args.artifact).graph, "", aggregates);
  if (!aggregates.empty())
    std::printf("sequence and optional values (host only, outside the arena)\n%s", aggregates.c_str());
  if (args.graph) std::printf("graph\n%s", artifact::openArtifact(args.artifact).graph->str().c_str());

  const ByteAccounting& r = info.bytes;
  std::printf("bytes\n");
  std::printf("  file                     %14" PRIu64 "\n", r.file_bytes);
  std::printf("  weights (all uses)       %14" PRIu64 "  in %zu constants\n", r.weight_bytes, r.constants);
  std::printf("  distinct weights         %14" PRIu64 "  in %zu tensors (repeats stored once: %" PRIu64 ")\n",
              r.distinct_weight_bytes, r.distinct_constants, r.weight_bytes - r.distinct_weight_bytes);
  std::printf("  padding                  %14" PRIu64 "  (%" PRIu64 " inside the weight section)\n", r.padding_bytes,
              r.weight_padding_bytes);
  std::printf("  metadata                 %14" PRIu64 "  (header, section table, manifest: %" PRIu64 ")\n",
              r.metadata_bytes, info.manifest_bytes);
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

  const ArtifactInfo::Memory& mem = info.memory;
  const bool has_modules = info.modules.size() > 1;  // the last is the graph executor
  if (!mem.planned) {
    std::printf("memory\n  (not planned: %s)\n", mem.not_planned.c_str());
  } else {
    std::printf("memory\n");
    std::printf("  planned activations      %14" PRIu64 "\n", mem.activation_bytes);
    if (has_modules) std::printf("  module scratch           %14" PRIu64 "\n", mem.module_scratch_bytes);
    std::printf("  private growth budget    %14" PRIu64 "  (activations%s, arenas from 2 MiB up in whole 2 MiB pages, + 5%% of weights)\n", mem.growth_budget,
                has_modules ? " + module scratch" : "");
  }
  if (args.run) {  // an artifact that cannot be planned fails here with the loader's error
    uint64_t growth = measureLoadAndFirstRun(args.artifact);
    std::printf("  private growth: load + first run %" PRIu64 "  %s\n", growth,
                growth <= mem.growth_budget ? "(within budget)" : "(OVER BUDGET)");
  }

  if (args.verify) std::printf("weights verified: %" PRIu64 " bytes match their checksums\n", r.weight_section_bytes);
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
