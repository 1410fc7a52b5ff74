// ONNX -> IR. Reads a ModelProto (opsets 7..21 of the default domain), converts
// initializers and Constant nodes into the constant pool (external data files are
// mapped, not read), and builds the graph with the declared value types.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "base/bytes.h"
#include "base/safe_open.h"
#include "ir/aggregate.h"
#include "ir/graph.h"
#include "ir/limits.h"
#include "ir/tensor.h"

namespace partita::kernels {
class OpRegistry;
}

namespace partita::frontend {

struct ImportOptions {
  // Fixes symbolic input dimensions: input name -> full static shape.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // The ops the model may use; nullptr means kernels::OpRegistry::global().
  const kernels::OpRegistry* ops = nullptr;
  // External data must resolve to a regular file beneath the model's real folder, or
  // beneath this folder when it is not empty (docs/security.md).
  std::string external_data_root;
  // When set, receives the model file and every external-data file the import read
  // (a writer must not replace them).
  std::vector<SourceFile>* sources = nullptr;
  // Graph inputs (as declared or fixed by input_shapes) and constants must keep these:
  // Error(kInvalidModel) or, for input_shapes, Error(kInvalidArgument) naming them.
  ir::TensorLimits limits;
};

// Throws Error(kIo) when the file cannot be read, Error(kInvalidModel) naming the
// problem for a malformed model, and Error(kUnsupported) listing every unsupported
// op type with its node names and opset in one message.
ir::Graph importOnnx(const std::string& path, const ImportOptions& options = {});
// The same for a model already in memory; `name` stands for its file in messages. It
// has no folder, so a tensor stored as external data is refused (Error kInvalidModel),
// options.external_data_root is not used, and options.sources receives nothing.
ir::Graph importOnnxBytes(Bytes model, const std::string& name, const ImportOptions& options = {});

// An ONNX file's size and the bytes of its initializers' raw_data (the weights); the
// rest (file - weights) is what the model spends on its graph description.
struct OnnxFileBytes {
  uint64_t file_bytes = 0;
  uint64_t weight_bytes = 0;
};
OnnxFileBytes onnxFileBytes(const std::string& path);

// Reads a serialized onnx.TensorProto (.pb), as in ONNX's backend test data. Defined in
// onnx_tensor_reader.cpp.
ir::OwnedTensor readTensorProtoFile(const std::string& path);

// Reads a value of `type` as ONNX's backend test data stores it: a TensorProto for a
// tensor, a SequenceProto for a sequence, an OptionalProto for an optional
// (onnx-data.proto; sequences and optionals of tensors only). Defined in
// onnx_tensor_reader.cpp.
struct ProtoValue {
  ir::OwnedTensor tensor;      // a tensor
  ir::AggregatePtr aggregate;  // a sequence or optional
};
ProtoValue readValueProtoFile(const std::string& path, const ir::TensorType& type);

}  // namespace partita::frontend
