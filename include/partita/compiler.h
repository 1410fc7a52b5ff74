// The compile-time C++ API: ONNX model -> runnable Model (in memory) or artifact.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "partita/inspect.h"
#include "partita/model.h"

namespace partita {

// How float16/bfloat16 compute runs (docs/precision.md):
//   kFloat32   (default) converted to float32 at compile time: float16 weights become
//              float32 constants, Cast pairs fold, heavy ops reach the backends as
//              float32 models do;
//   kBFloat16  as kFloat32, and the oneDNN backend computes Conv/MatMul/Gemm with
//              bfloat16 arithmetic (float32 in and out; float32 models too);
//   kKeep      as the model says: the host runs float16/bfloat16 ops (through float32
//              kernels, converting per run); oneDNN does not take them.
enum class Precision { kFloat32, kBFloat16, kKeep };
// "fp32", "bf16", "keep" -> Precision; Error(kInvalidArgument) naming the choices otherwise.
Precision precisionFromName(const std::string& name);
const char* precisionName(Precision p);

struct CompileOptions {
  // Fixes symbolic input dimensions: input name -> full static shape.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // Inputs left symbolic: the shape the model's shape-polymorphic regions are compiled
  // for first (backends choose weight layouts at it; docs/dynamic_shapes.md). Input
  // name -> full shape; an input not named here gets 1 for dim 0 and 224 otherwise.
  std::map<std::string, std::vector<int64_t>> shape_hints;
  // Shape-polymorphic regions: check the weight layouts chosen at the representative
  // shape at other sizes and store, for weights whose layout would leave a step
  // without a fast oneDNN kernel somewhere, one that every size can use
  // (docs/dynamic_shapes.md has what each costs). Off: the representative shape's
  // layouts as oneDNN chose them.
  bool layout_probes = true;
  // Backends in priority order, e.g. {"dnnl", "host"}; "host" runs what no other takes.
  std::vector<std::string> backends = {"host"};
  // Per-backend op allow / deny lists (backend name -> op types) and minimum region size.
  std::map<std::string, std::vector<std::string>> allow_ops, deny_ops;
  size_t min_region_size = 1;
  // The thread count runs will use: oneDNN chooses its weight layouts (stored in an
  // artifact) for it, and a model compiled in memory runs at it.
  int threads = 2;
  // External data (ONNX tensors kept in other files) must resolve -- symlinks followed --
  // to a regular file beneath the model's real folder; a folder named here is trusted
  // too (e.g. a cache's blob store that the model's folder links into).
  std::string external_data_root;
  // The ranks and sizes the model's tensors may have: every declared, constant and
  // inferred tensor is checked at compile time, and the data-dependent ones again at
  // run time (TensorLimits: 2^40 bytes and rank 16 unless set).
  TensorLimits limits = {};
  // float16/bfloat16 compute: lowered to float32 (default), bfloat16 on oneDNN, or kept.
  Precision precision = Precision::kFloat32;
};

// The backends this build can compile for: "host" (always, and implicit: it runs what
// no other takes), then the external ones ("dnnl", "ewise", ...).
std::vector<std::string> availableBackends();

// Imports and optimizes an ONNX model and returns it ready to run, without writing
// an artifact. Weights stay where the importer put them (external data mapped).
std::shared_ptr<const Model> compileOnnx(const std::string& onnx_path, const CompileOptions& options = {});
// The same for a model's bytes already in memory (`name` stands for its file in
// messages). The bytes are copied once; a tensor stored as ONNX external data is
// refused (bytes have no folder to find it in).
std::shared_ptr<const Model> compileOnnxBytes(const void* data, size_t size, const std::string& name,
                                              const CompileOptions& options = {});

// What compileToArtifact wrote: the artifact's byte accounting (as `partita inspect`
// recomputes it from the file) and one line per external module.
struct CompileReport {
  ByteAccounting bytes;
  struct Module {
    std::string kind;  // the backend, e.g. "dnnl"
    uint32_t functions = 0;
    size_t constant_uses = 0;
    size_t bytes = 0;  // its blob
  };
  std::vector<Module> modules;
};

// Imports, optimizes, partitions and links the model into one artifact at
// `output_path` (`partita compile`). Nothing is written unless the whole compile
// succeeds; a target the writer would refuse (not a regular file, write-protected, the
// model itself) is refused before the compile starts.
CompileReport compileToArtifact(const std::string& onnx_path, const std::string& output_path,
                                const CompileOptions& options = {});
// The same for a model's bytes in memory (copied once; no external data).
CompileReport compileBytesToArtifact(const void* data, size_t size, const std::string& name,
                                     const std::string& output_path, const CompileOptions& options = {});

}  // namespace partita
