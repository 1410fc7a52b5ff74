#include <omp.h>

#include <algorithm>

#include "api/module_kinds.h"
#include "base/atomic_file.h"
#include "compiler/artifact_writer.h"
#include "compiler/backends.h"
#include "compiler/compile.h"
#include "frontend/onnx/onnx_importer.h"
#include "partita/compiler.h"
#include "partita/error.h"
#include "passes/pipeline.h"
#include "runtime/graph_executor.h"

namespace partita {

namespace {
backend::PartitionOptions partitionOptions(const CompileOptions& options) {
  backend::PartitionOptions p;
  p.backends = options.backends;
  for (const auto& [b, ops] : options.allow_ops) p.allow_ops[b].insert(ops.begin(), ops.end());
  for (const auto& [b, ops] : options.deny_ops) p.deny_ops[b].insert(ops.begin(), ops.end());
  p.min_region_size = options.min_region_size;
  p.shape_hints = options.shape_hints;
  p.layout_probes = options.layout_probes;
  p.float_precision = options.precision == Precision::kBFloat16 ? "bf16" : "fp32";
  return p;
}
}  // namespace

namespace {
frontend::ImportOptions importOptions(const CompileOptions& options, std::vector<SourceFile>* sources) {
  frontend::ImportOptions import;
  import.input_shapes = options.input_shapes;
  import.external_data_root = options.external_data_root;
  import.limits = options.limits;
  import.sources = sources;
  return import;
}

// The bodies of If, Loop and Scan nodes are partitioned as the main graph is, each on
// its own (a region never crosses into or out of a body): the backends read and add to
// the one pool (swapped into the body while it is partitioned), and their modules join
// the one module table, the body's Call nodes renumbered to it.
void partitionSubgraphs(ir::Graph& root, ir::Graph& g, const backend::PartitionOptions& options,
                        backend::PartitionResult& result) {
  for (ir::Node& n : g.nodes)
    for (const auto& [name, a] : n.attrs.all()) {
      if (a.kind != ir::Attribute::Kind::kGraph || !a.graph) continue;
      ir::Graph& body = *a.graph;
      backend::PartitionResult parts;
      // In a loop body, statically shaped regions only: a region whose shapes change
      // per iteration would be compiled again on every iteration. An If's branch runs
      // once per run of its node, as the main graph does: its regions may be
      // shape-polymorphic (a sample-rate switch over inputs with symbolic dims).
      backend::PartitionOptions body_options = options;
      body_options.shape_polymorphic = options.shape_polymorphic && n.domain.empty() && n.op_type == "If";
      std::swap(body.constants, root.constants);
      try {
        parts = backend::partitionGraph(body, body_options);
      } catch (...) {
        std::swap(body.constants, root.constants);
        throw;
      }
      std::swap(body.constants, root.constants);
      const size_t offset = result.modules.size();
      for (ir::Node& call : body.nodes)
        if (runtime::isCallNode(call)) call.attrs.setInt("module", call.attrs.getInt("module", 0) + int64_t(offset));
      for (backend::RegionSummary& r : parts.regions) {
        r.module += offset;
        result.regions.push_back(std::move(r));
      }
      for (backend::ModuleImage& m : parts.modules) result.modules.push_back(std::move(m));
      partitionSubgraphs(root, body, body_options, result);  // nothing polymorphic inside a loop
    }
}

// Optimizes and partitions an imported graph.
CompiledGraph optimizeAndPartition(ir::Graph imported, std::vector<SourceFile> sources,
                                   const CompileOptions& options) {
  CompiledGraph c{std::move(imported), {}, std::move(sources)};
  passes::PipelineOptions pipeline;
  pipeline.limits = options.limits;
  pipeline.lower_half = options.precision != Precision::kKeep;
  // oneDNN computes QLinearConv in int8; the host alone computes the float QDQ faster.
  pipeline.fuse_quantized =
      options.precision != Precision::kKeep &&
      std::find(options.backends.begin(), options.backends.end(), "dnnl") != options.backends.end();
  const passes::PipelineReport report = passes::optimize(c.graph, pipeline);
  // Backends tune to the thread count runs will use (oneDNN's weight layouts): this
  // thread's OpenMP team size is what they read.
  omp_set_num_threads(options.threads);
  backend::PartitionOptions partition = partitionOptions(options);
  // A float16/bfloat16 model computed in float32: its arithmetic may carry errors up
  // to float16's resolution (Backend::setFloatPrecision "fp32-half").
  if (report.half_nodes_lowered > 0 && options.precision == Precision::kFloat32) partition.float_precision = "fp32-half";
  c.parts = backend::partitionGraph(c.graph, partition);
  partitionSubgraphs(c.graph, c.graph, partition, c.parts);
  return c;
}
}  // namespace

Precision precisionFromName(const std::string& name) {
  if (name == "fp32") return Precision::kFloat32;
  if (name == "bf16") return Precision::kBFloat16;
  if (name == "keep") return Precision::kKeep;
  throw Error(ErrorCode::kInvalidArgument, "unknown precision '" + name + "' (choose fp32, bf16 or keep)");
}

const char* precisionName(Precision p) {
  switch (p) {
    case Precision::kFloat32:
      return "fp32";
    case Precision::kBFloat16:
      return "bf16";
    case Precision::kKeep:
      return "keep";
  }
  return "?";
}

CompiledGraph compileGraph(const std::string& onnx_path, const CompileOptions& options) {
  runtime::checkThreads(options.threads);
  std::vector<SourceFile> sources;
  ir::Graph g = frontend::importOnnx(onnx_path, importOptions(options, &sources));
  return optimizeAndPartition(std::move(g), std::move(sources), options);
}

CompiledGraph compileGraphFromBytes(Bytes onnx, const std::string& name, const CompileOptions& options) {
  runtime::checkThreads(options.threads);
  ir::Graph g = frontend::importOnnxBytes(std::move(onnx), name, importOptions(options, nullptr));
  return optimizeAndPartition(std::move(g), {}, options);
}

namespace {
std::shared_ptr<const Model> modelOf(CompiledGraph c, const CompileOptions& options) {
  auto graph = std::make_shared<ir::Graph>(std::move(c.graph));
  auto store = std::make_shared<runtime::ConstStore>(runtime::ConstStore::fromPool(graph->constants));
  std::vector<std::shared_ptr<const runtime::RuntimeModule>> modules;
  std::vector<std::string> kinds;
  for (backend::ModuleImage& image : c.parts.modules) {
    runtime::ModuleLoadContext ctx{Bytes::fromVector(std::move(image.blob)), store.get(), image.uses, options.threads,
                                   image.assumptions, runtime::shapeCacheEntries(0)};
    modules.push_back(api::builtinModuleKinds().load(image.kind, ctx));
    kinds.push_back(image.kind);
  }
  auto executor = std::make_shared<runtime::GraphExecutor>(graph, store, std::move(modules),
                                                           runtime::RunOptions{options.threads, options.limits});
  return std::make_shared<Model>(executor, kinds);
}

CompileReport link(const CompiledGraph& c, const std::string& output_path) {
  CompileReport report;
  report.bytes = artifact::writeArtifact(c.graph, c.parts.modules, output_path, c.sources);
  for (const backend::ModuleImage& m : c.parts.modules)
    report.modules.push_back({m.kind, m.num_functions, m.uses.size(), m.blob.size()});
  return report;
}
}  // namespace

std::vector<std::string> availableBackends() {
  std::vector<std::string> names = {"host"};
  for (const std::string& name : backend::backendNames()) names.push_back(name);
  return names;
}

std::shared_ptr<const Model> compileOnnx(const std::string& onnx_path, const CompileOptions& options) {
  return modelOf(compileGraph(onnx_path, options), options);
}

std::shared_ptr<const Model> compileOnnxBytes(const void* data, size_t size, const std::string& name,
                                              const CompileOptions& options) {
  return modelOf(compileGraphFromBytes(Bytes::copyOf(data, size), name, options), options);
}

CompileReport compileToArtifact(const std::string& onnx_path, const std::string& output_path,
                                const CompileOptions& options) {
  // Refuse a target the writer would refuse before spending the compile on it (the
  // writer checks again, with the external-data files the import read).
  std::vector<SourceFile> keep;
  FileId model_id;
  if (fileIdOf(onnx_path, model_id)) keep.push_back({model_id, "the input model '" + onnx_path + "'"});
  artifact::checkReplaceable(output_path, keep);
  return link(compileGraph(onnx_path, options), output_path);
}

CompileReport compileBytesToArtifact(const void* data, size_t size, const std::string& name,
                                     const std::string& output_path, const CompileOptions& options) {
  artifact::checkReplaceable(output_path, {});
  return link(compileGraphFromBytes(Bytes::copyOf(data, size), name, options), output_path);
}

}  // namespace partita
