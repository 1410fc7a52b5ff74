// The compiler's front half shared by compileOnnx (in memory) and `partita compile`
// (to an artifact): import, optimize, partition.
#pragma once

#include <string>
#include <vector>

#include "base/bytes.h"
#include "base/safe_open.h"
#include "compiler/partition.h"
#include "ir/graph.h"
#include "partita/compiler.h"

namespace partita {

struct CompiledGraph {
  ir::Graph graph;                  // main graph; regions replaced by partita.Call nodes
  backend::PartitionResult parts;   // the external modules and their regions
  std::vector<SourceFile> sources;  // the model file and its external-data files
};

CompiledGraph compileGraph(const std::string& onnx_path, const CompileOptions& options);
// The same for a model given as bytes (`name` stands for its file in messages): no
// external data (frontend::importOnnxBytes), no sources.
CompiledGraph compileGraphFromBytes(Bytes onnx, const std::string& name, const CompileOptions& options);

}  // namespace partita
