#include "frontend/onnx/onnx_tensor_reader.h"

#include <onnx/onnx-data.pb.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "base/checked_int.h"
#include "base/mapped_file.h"
#include "frontend/onnx/onnx_importer.h"
#include "ir/aggregate.h"
#include "ir/tensor.h"

namespace partita::frontend {

namespace onnx_import {

namespace {

std::string onnxTypeName(int t) {
  if (onnx::TensorProto_DataType_IsValid(t)) {
    std::string n = onnx::TensorProto_DataType_Name(onnx::TensorProto_DataType(t));
    std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return n;
  }
  return "data type " + std::to_string(t);
}

// Element types ONNX added after the protobuf schema partita builds with (IR version 9
// and 10: float8 at opset 19, 4-bit integers at opset 21); partita runs none of them.
const char* laterOnnxTypeName(int t) {
  switch (t) {
    case 17: return "float8e4m3fn";
    case 18: return "float8e4m3fnuz";
    case 19: return "float8e5m2";
    case 20: return "float8e5m2fnuz";
    case 21: return "uint4";
    case 22: return "int4";
    case 23: return "float4e2m1";
    default: return nullptr;
  }
}

bool isLexicallyInside(const std::filesystem::path& rel) {
  if (rel.empty() || rel.is_absolute() || rel.has_root_name()) return false;
  for (const auto& part : rel)
    if (part == "..") return false;
  return true;
}

// Converts a repeated typed field (float_data, int32_data, ...) holding `numel` values.
template <typename Dst, typename Field>
Bytes convert(const Field& field, int64_t numel, const std::string& what, const char* field_name) {
  if (int64_t(field.size()) != numel)
    invalid(what + " has " + std::to_string(field.size()) + " values in " + field_name +
            " but its shape holds " + std::to_string(numel));
  std::vector<std::byte> out(size_t(numel) * sizeof(Dst));
  Dst* dst = reinterpret_cast<Dst*>(out.data());
  for (int64_t i = 0; i < numel; ++i) dst[i] = static_cast<Dst>(field.Get(int(i)));
  return Bytes::fromVector(std::move(out));
}

}  // namespace

ir::DType requireDType(int t, const std::string& what) {
  ir::DType d = ir::dtypeFromOnnx(t);
  if (d != ir::DType::kUndefined) return d;
  if (t == onnx::TensorProto::UNDEFINED) invalid(what + " has no element type");
  if (onnx::TensorProto_DataType_IsValid(t))
    unsupported(what + " has element type " + onnxTypeName(t) + ", which partita does not support");
  if (const char* later = laterOnnxTypeName(t))
    unsupported(what + " has element type " + later + ", which partita does not support");
  invalid(what + " has an unknown element type " + std::to_string(t));
}

TensorReader::Result TensorReader::read(onnx::TensorProto& t, const std::string& what) {
  Result r;
  r.dtype = requireDType(t.data_type(), what);
  int64_t numel = 1;
  for (int64_t d : t.dims()) {
    if (d < 0) invalid(what + " has a negative dimension " + std::to_string(d));
    if (d != 0 && numel > (int64_t(1) << 50) / d) invalid(what + " is impossibly large");
    numel *= d;
    r.shape.push_back(d);
  }
  if (t.has_segment()) unsupported(what + " is segmented, which partita does not support");
  const size_t esize = ir::dtypeSize(r.dtype);
  const size_t nbytes = size_t(numel) * esize;

  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    r.bytes = readExternal(t, what, nbytes);
    return r;
  }
  if (t.has_raw_data()) {
    if (t.raw_data().size() != nbytes)
      invalid(what + " of type " + std::string(ir::dtypeName(r.dtype)) + ir::shapeStr(r.shape) + " needs " +
              std::to_string(nbytes) + " bytes of raw_data but has " + std::to_string(t.raw_data().size()));
    auto holder = std::make_shared<std::string>(std::move(*t.mutable_raw_data()));
    r.bytes = Bytes{holder, reinterpret_cast<const std::byte*>(holder->data()), holder->size()};
    return r;
  }
  r.bytes = readTyped(t, r.dtype, numel, what);
  return r;
}

const Bytes& TensorReader::externalFile(const std::string& location, const std::string& what) {
  if (!files_allowed_)
    invalid(what + ": external data '" + location +
            "' cannot be read: the model was given as bytes in memory, so it has no folder to read it from");
  auto it = files_.find(location);
  if (it != files_.end()) return it->second;
  std::string file;
  try {
    if (roots_.empty()) {
      roots_.push_back(realPath(base_dir_.empty() ? "." : base_dir_.string()));
      if (!trusted_root_.empty()) roots_.push_back(realPath(trusted_root_));
    }
    file = roots_[0] + "/" + location;
    OpenedFile opened = openRegularFile(
        file, roots_,
        trusted_root_.empty() ? "; if the data is kept elsewhere on purpose, name that folder with "
                                "--external-data-root DIR (CompileOptions::external_data_root)"
                              : "");
    sources_.push_back({opened.id(), "external data '" + location + "' of the model"});
    return files_.emplace(location, mapFile(opened)).first->second;
  } catch (const Error& e) {
    throw Error(e.code(), what + ": external data '" + location + "': " + e.what());
  }
}

Bytes TensorReader::readExternal(const onnx::TensorProto& t, const std::string& what, size_t nbytes) {
  // ONNX's keys (onnx/docs/ExternalData.md); the checksum is not verified.
  std::string location;
  std::optional<int64_t> offset, length;
  std::set<std::string> seen;
  for (const auto& kv : t.external_data()) {
    const std::string& key = kv.key();
    if (!seen.insert(key).second) invalid(what + ": external data key '" + key + "' is given twice");
    if (key == "location") {
      location = kv.value();
    } else if (key == "offset" || key == "length") {
      std::optional<int64_t> v = parseDecimal(kv.value());
      if (!v)
        invalid(what + ": external data " + key + " '" + kv.value() +
                "' is not a non-negative decimal integer (digits only, at most 2^63-1)");
      (key == "offset" ? offset : length) = v;
    } else if (key != "checksum") {
      invalid(what + ": external data has an unknown key '" + key +
              "' (ONNX defines location, offset, length and checksum)");
    }
  }
  if (location.empty()) invalid(what + " has external data without a location");
  std::filesystem::path rel(location);
  if (!isLexicallyInside(rel) || location.find('\0') != std::string::npos)
    invalid(what + ": external data location '" + location +
            "' must be a relative path inside the model's directory (no '..', not absolute)");
  const Bytes& whole = externalFile(location, what);
  const uint64_t size = whole.size;
  const uint64_t off = uint64_t(offset.value_or(0));
  if (off > size)
    invalid(what + ": external data offset " + std::to_string(off) + " is past the end of '" + location + "' (" +
            std::to_string(size) + " bytes)");
  const uint64_t len = length ? uint64_t(*length) : size - off;
  if (len > size - off)
    invalid(what + ": external data range [" + std::to_string(off) + ", " + std::to_string(off) + "+" +
            std::to_string(len) + ") is outside '" + location + "' (" + std::to_string(size) + " bytes)");
  if (len != nbytes)
    invalid(what + " needs " + std::to_string(nbytes) + " bytes but its external data in '" + location +
            "' has " + std::to_string(len));
  return whole.slice(size_t(off), size_t(len));
}

Bytes TensorReader::readTyped(const onnx::TensorProto& t, ir::DType dtype, int64_t numel,
                              const std::string& what) {
  using D = ir::DType;
  switch (dtype) {
    case D::kFloat32:
      return convert<float>(t.float_data(), numel, what, "float_data");
    case D::kFloat64:
      return convert<double>(t.double_data(), numel, what, "double_data");
    case D::kInt64:
      return convert<int64_t>(t.int64_data(), numel, what, "int64_data");
    case D::kInt32:
      return convert<int32_t>(t.int32_data(), numel, what, "int32_data");
    // The ONNX spec stores these narrower types one per int32_data entry
    // (float16/bfloat16 as their raw 16-bit patterns).
    case D::kInt16:
      return convert<int16_t>(t.int32_data(), numel, what, "int32_data");
    case D::kInt8:
      return convert<int8_t>(t.int32_data(), numel, what, "int32_data");
    case D::kUInt16:
    case D::kFloat16:
    case D::kBFloat16:
      return convert<uint16_t>(t.int32_data(), numel, what, "int32_data");
    case D::kUInt8:
      return convert<uint8_t>(t.int32_data(), numel, what, "int32_data");
    case D::kBool: {
      if (int64_t(t.int32_data_size()) != numel)
        invalid(what + " has " + std::to_string(t.int32_data_size()) +
                " values in int32_data but its shape holds " + std::to_string(numel));
      std::vector<std::byte> out(static_cast<size_t>(numel));
      for (int64_t i = 0; i < numel; ++i) out[size_t(i)] = std::byte(t.int32_data(int(i)) != 0);
      return Bytes::fromVector(std::move(out));
    }
    case D::kUInt32:
      return convert<uint32_t>(t.uint64_data(), numel, what, "uint64_data");
    case D::kUInt64:
      return convert<uint64_t>(t.uint64_data(), numel, what, "uint64_data");
    default:
      unsupported(what + ": element type " + std::string(ir::dtypeName(dtype)) + " is not supported");
  }
}

}  // namespace onnx_import

ir::OwnedTensor readTensorProtoFile(const std::string& path) {
  Bytes file = mapFile(path);
  onnx::TensorProto t;
  if (!onnx_import::parseMessage(t, file))
    onnx_import::invalid(path + ": not a valid TensorProto file: protobuf parsing failed");
  onnx_import::TensorReader reader(std::filesystem::path(path).parent_path());
  auto r = reader.read(t, path + ": tensor '" + t.name() + "'");
  ir::OwnedTensor out(r.dtype, r.shape);
  if (r.bytes.size) std::memcpy(out.data(), r.bytes.data, r.bytes.size);
  return out;
}

namespace {

ir::OwnedTensor tensorOf(onnx_import::TensorReader& reader, onnx::TensorProto& t, const std::string& what) {
  auto r = reader.read(t, what + ": tensor '" + t.name() + "'");
  ir::OwnedTensor out(r.dtype, r.shape);
  if (r.bytes.size) std::memcpy(out.data(), r.bytes.data, r.bytes.size);
  return out;
}

// A SequenceProto of tensors as a sequence of `dtype` (the type the model gives it:
// an empty sequence has no element type of its own).
std::shared_ptr<ir::Aggregate> sequenceOf(onnx_import::TensorReader& reader, onnx::SequenceProto& s,
                                          ir::DType dtype, const std::string& what) {
  if (s.elem_type() != onnx::SequenceProto::TENSOR && s.elem_type() != onnx::SequenceProto::UNDEFINED)
    onnx_import::invalid(what + ": a sequence of elem_type " + std::to_string(s.elem_type()) +
                         "; partita reads sequences of tensors only");
  auto a = std::make_shared<ir::Aggregate>();
  a->kind = ir::ValueKind::kSequence;
  a->dtype = dtype;
  for (onnx::TensorProto& t : *s.mutable_tensor_values()) {
    ir::OwnedTensor e = tensorOf(reader, t, what);
    if (dtype != ir::DType::kUndefined && e.dtype() != dtype)
      onnx_import::invalid(what + ": holds a " + std::string(ir::dtypeName(e.dtype())) +
                           " tensor in a sequence of " + std::string(ir::dtypeName(dtype)) + " tensors");
    a->dtype = e.dtype();
    a->tensors.push_back(std::make_shared<const ir::OwnedTensor>(std::move(e)));
  }
  return a;
}

}  // namespace

ProtoValue readValueProtoFile(const std::string& path, const ir::TensorType& type) {
  if (type.isTensor()) return {readTensorProtoFile(path), nullptr};
  Bytes file = mapFile(path);
  onnx_import::TensorReader reader(std::filesystem::path(path).parent_path());
  if (type.kind == ir::ValueKind::kSequence) {
    onnx::SequenceProto s;
    if (!onnx_import::parseMessage(s, file))
      onnx_import::invalid(path + ": not a valid SequenceProto file: protobuf parsing failed");
    return {{}, sequenceOf(reader, s, type.dtype, path)};
  }
  onnx::OptionalProto o;
  if (!onnx_import::parseMessage(o, file))
    onnx_import::invalid(path + ": not a valid OptionalProto file: protobuf parsing failed");
  auto a = std::make_shared<ir::Aggregate>();
  a->kind = ir::ValueKind::kOptional;
  a->inner = type.inner;
  a->dtype = type.dtype;
  switch (o.elem_type()) {
    case onnx::OptionalProto::UNDEFINED:
      a->present = false;
      break;
    case onnx::OptionalProto::TENSOR: {
      ir::OwnedTensor t = tensorOf(reader, *o.mutable_tensor_value(), path);
      a->inner = ir::ValueKind::kTensor;
      a->dtype = t.dtype();
      a->tensors.push_back(std::make_shared<const ir::OwnedTensor>(std::move(t)));
      break;
    }
    case onnx::OptionalProto::SEQUENCE: {
      std::shared_ptr<ir::Aggregate> s = sequenceOf(reader, *o.mutable_sequence_value(), type.dtype, path);
      a->inner = ir::ValueKind::kSequence;
      a->dtype = s->dtype;
      a->tensors = std::move(s->tensors);
      break;
    }
    default:
      onnx_import::invalid(path + ": an optional of elem_type " + std::to_string(o.elem_type()) +
                           "; partita reads optional tensors and sequences only");
  }
  return {{}, std::move(a)};
}

}  // namespace partita::frontend
