// Reading ONNX TensorProtos (initializers, Constant values, tensor attributes, and the
// .pb files of ONNX's test data) into (dtype, shape, bytes), plus the pieces every ONNX
// import file shares: the two error kinds a model can cause and parsing a protobuf
// message without protobuf's default size limits.
//
// Raw data is moved out of the protobuf, not copied; external data (ONNX's
// location/offset/length entries: a relative location without "..", whose real path
// must be a regular file beneath the model's real folder or a trusted root; offset and
// length plain decimal integers inside the file) is mapped once per file and sliced; typed fields (float_data, int32_data, ...) are
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
#include "base/safe_open.h"
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
  // `base_dir`: the folder external-data locations are relative to (the model's). Its
  // real path is the root they must resolve beneath; `trusted_root`, when not empty,
  // is a second one (e.g. a cache's blob folder the data links into).
  explicit TensorReader(std::filesystem::path base_dir, std::string trusted_root = {})
      : base_dir_(std::move(base_dir)), trusted_root_(std::move(trusted_root)) {}
  // For a model read from memory: it has no folder, so external data is refused.
  static TensorReader withoutFiles() {
    TensorReader r({});
    r.files_allowed_ = false;
    return r;
  }

  struct Result {
    ir::DType dtype = ir::DType::kUndefined;
    std::vector<int64_t> shape;
    Bytes bytes;
  };

  // `what` names the tensor in error messages ("initializer 'w'").
  Result read(onnx::TensorProto& t, const std::string& what);

  // The external-data files read so far.
  const std::vector<SourceFile>& files() const { return sources_; }

 private:
  Bytes readExternal(const onnx::TensorProto& t, const std::string& what, size_t nbytes);
  static Bytes readTyped(const onnx::TensorProto& t, ir::DType dtype, int64_t numel, const std::string& what);

  const Bytes& externalFile(const std::string& location, const std::string& what);

  bool files_allowed_ = true;
  std::filesystem::path base_dir_;
  std::string trusted_root_;
  std::vector<std::string> roots_;      // real paths; resolved at the first external tensor
  std::map<std::string, Bytes> files_;  // location -> mapped file
  std::vector<SourceFile> sources_;
};

}  // namespace partita::frontend::onnx_import
