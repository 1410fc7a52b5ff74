// Reading ONNX TensorProtos (initializers, Constant values, tensor attributes, and the
// .pb files of ONNX's test data) into (dtype, shape, bytes), plus the pieces every ONNX
// import file shares: the two error kinds a model can cause and parsing a protobuf
// message without protobuf's default size limits.
//
// Raw data is moved out of the protobuf, not copied; external data (ONNX's
// location/offset/length entries, which must name a file inside the model's directory)
// is mapped once per file and sliced; typed fields (float_data, int32_data, ...) are
// converted. Malformed tensors throw Error(kInvalidModel), string/complex/segmented ones
// Error(kUnsupported). One reader per import; not thread-safe.
#pragma once

#include <google/protobuf/io/coded_stream.h>
#include <onnx/onnx_pb.h>

#include <climits>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "base/bytes.h"
#include "ir/dtype.h"
#include "partita/error.h"

namespace partita::frontend::onnx_import {

[[noreturn]] inline void invalid(const std::string& msg) { throw Error(ErrorCode::kInvalidModel, msg); }
[[noreturn]] inline void unsupported(const std::string& msg) { throw Error(ErrorCode::kUnsupported, msg); }

// Maps an ONNX element type, throwing kUnsupported (string, complex) or kInvalidModel.
ir::DType requireDType(int t, const std::string& what);

// Parses a protobuf message from bytes without protobuf's default 64 MB-era limits.
template <typename Message>
bool parseMessage(Message& m, const Bytes& bytes) {
  if (bytes.size > size_t(INT_MAX)) return false;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data), int(bytes.size));
  in.SetTotalBytesLimit(INT_MAX);
  in.SetRecursionLimit(256);
  return m.ParseFromCodedStream(&in) && in.ConsumedEntireMessage();
}

// Converts TensorProtos to (dtype, shape, bytes). Keeps external-data files mapped
// once each; raw bytes are moved out of the protobuf, not copied.
class TensorReader {
 public:
  explicit TensorReader(std::filesystem::path base_dir) : base_dir_(std::move(base_dir)) {}

  struct Result {
    ir::DType dtype = ir::DType::kUndefined;
    std::vector<int64_t> shape;
    Bytes bytes;
  };

  // `what` names the tensor in error messages ("initializer 'w'").
  Result read(onnx::TensorProto& t, const std::string& what);

 private:
  Bytes readExternal(const onnx::TensorProto& t, const std::string& what, size_t nbytes);
  static Bytes readTyped(const onnx::TensorProto& t, ir::DType dtype, int64_t numel, const std::string& what);

  std::filesystem::path base_dir_;
  std::map<std::string, Bytes> files_;
};

}  // namespace partita::frontend::onnx_import
