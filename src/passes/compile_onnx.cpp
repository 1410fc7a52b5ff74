#include "backend/partition.h"
#include "frontend/onnx/onnx_importer.h"
#include "partita/compiler.h"
#include "passes/pipeline.h"
#include "runtime/graph_executor.h"

namespace partita {

backend::PartitionOptions partitionOptions(const CompileOptions& options) {
  backend::PartitionOptions p;
  p.backends = options.backends;
  for (const auto& [b, ops] : options.allow_ops) p.allow_ops[b].insert(ops.begin(), ops.end());
  for (const auto& [b, ops] : options.deny_ops) p.deny_ops[b].insert(ops.begin(), ops.end());
  p.min_region_size = options.min_region_size;
  return p;
}

std::shared_ptr<const Model> compileOnnx(const std::string& onnx_path, const CompileOptions& options) {
  frontend::ImportOptions import;
  import.input_shapes = options.input_shapes;
  auto graph = std::make_shared<ir::Graph>(frontend::importOnnx(onnx_path, import));
  passes::optimize(*graph);
  backend::PartitionResult parts = backend::partitionGraph(*graph, partitionOptions(options));
  auto store = std::make_shared<runtime::ConstStore>(runtime::ConstStore::fromPool(graph->constants));
  std::vector<std::shared_ptr<const runtime::RuntimeModule>> modules;
  for (runtime::ModuleImage& image : parts.modules) {
    runtime::ModuleLoadContext ctx{Bytes::fromVector(std::move(image.blob)), store.get(), image.uses};
    modules.push_back(runtime::loadModule(image.kind, ctx));
  }
  auto executor = std::make_shared<runtime::GraphExecutor>(graph, store, std::move(modules));
  return std::make_shared<Model>(executor);
}

}  // namespace partita
