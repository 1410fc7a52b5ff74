#include "frontend/onnx/onnx_importer.h"
#include "partita/compiler.h"
#include "passes/pipeline.h"
#include "runtime/graph_executor.h"

namespace partita {

std::shared_ptr<const Model> compileOnnx(const std::string& onnx_path, const CompileOptions& options) {
  frontend::ImportOptions import;
  import.input_shapes = options.input_shapes;
  auto graph = std::make_shared<ir::Graph>(frontend::importOnnx(onnx_path, import));
  passes::optimize(*graph);
  auto store = std::make_shared<runtime::ConstStore>(runtime::ConstStore::fromPool(graph->constants));
  auto executor = std::make_shared<runtime::GraphExecutor>(graph, store);
  return std::make_shared<Model>(executor);
}

}  // namespace partita
