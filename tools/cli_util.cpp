#include "tools/cli_util.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>

#include "base/atomic_file.h"
#include "base/checked_int.h"
#include "compiler/backends.h"
#include "backend/backend.h"
#include "partita/npy.h"
#include "frontend/onnx/onnx_importer.h"
#include "ir/dtype.h"
#include "partita/compiler.h"

namespace partita::cli {

namespace {
bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

std::map<std::string, std::vector<int64_t>> parseShapes(const std::vector<std::string>& specs, const std::string& flag) {
  std::map<std::string, std::vector<int64_t>> out;
  for (const std::string& spec : specs) {
    auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
      throw Error(ErrorCode::kInvalidArgument, flag + " expects NAME=DxDxD, got '" + spec + "'");
    const std::string name = spec.substr(0, eq);
    if (out.count(name)) throw Error(ErrorCode::kInvalidArgument, flag + " gives input '" + name + "' twice");
    std::vector<int64_t> dims;
    uint64_t numel = 1;
    size_t start = eq + 1;
    while (true) {  // every 'x' separates two dims: "4x" and "4xx3" have an empty one
      size_t x = spec.find('x', start);
      std::string item = spec.substr(start, x == std::string::npos ? std::string::npos : x - start);
      std::optional<int64_t> v = parseDecimal(item);
      if (!v || *v == 0)
        throw Error(ErrorCode::kInvalidArgument, flag + " " + name + ": dimension '" + item + "' in '" + spec +
                                                     "' is not a positive decimal integer (at most 2^63-1)");
      std::optional<uint64_t> n = mulAtMost(numel, uint64_t(*v), kMaxInputTensorBytes);
      if (!n)
        throw Error(ErrorCode::kInvalidArgument,
                    flag + " " + name + ": '" + spec.substr(eq + 1) + "' has more than 2^40 elements");
      numel = *n;
      dims.push_back(*v);
      if (x == std::string::npos) break;
      start = x + 1;
    }
    out[name] = dims;
  }
  return out;
}

std::shared_ptr<const Model> loadAnyModel(const std::string& path, const CompileOptions& options) {
  if (endsWith(path, ".onnx")) return compileOnnx(path, options);
  return Model::load(path, {options.threads});
}

void CompileFlags::add(CLI::App* cmd) {
  cmd->add_option("--backends", backends, "Backends in priority order, comma separated (e.g. dnnl,host; default host)");
  cmd->add_option("--allow", allow, "Only these ops for a backend: BACKEND=Op1,Op2; repeatable");
  cmd->add_option("--deny", deny, "Never these ops for a backend: BACKEND=Op1,Op2; repeatable");
  cmd->add_option("--min-region-size", min_region_size, "Smaller regions stay on the host (default 1)");
  cmd->add_option("--shape", shapes, "Fix a symbolic input shape: NAME=1x3x224x224; repeatable");
  cmd->add_option("--shape-hint", shape_hints,
                  "Leave an input symbolic but compile its shape-polymorphic regions for this shape first "
                  "(weight layouts are chosen at it): NAME=1x3x480x640; repeatable");
  cmd->add_flag("--no-layout-probes", no_layout_probes,
                "Shape-polymorphic regions: keep the weight layouts oneDNN chooses at the representative shape, "
                "unchecked at other sizes (faster there, maybe far slower elsewhere)");
  cmd->add_option("--precision", precision,
                  "float16/bfloat16 compute: fp32 (default: converted to float32 at compile time), bf16 "
                  "(float32, and oneDNN's Conv/MatMul/Gemm in bfloat16 arithmetic) or keep (as the model says, "
                  "on the host); docs/precision.md");
  cmd->add_option("--external-data-root", external_data_root,
                  "Also trust this folder for ONNX external data: a location may lead (through symlinks) to a "
                  "file beneath it, not only beneath the model's folder (e.g. a cache's blob folder)");
}

namespace {
std::vector<std::string> splitComma(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}
void parseOpLists(const std::vector<std::string>& specs, const char* flag,
                  std::map<std::string, std::vector<std::string>>& out) {
  for (const std::string& spec : specs) {
    auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error(ErrorCode::kInvalidArgument, std::string(flag) + " expects BACKEND=Op1,Op2, got '" + spec + "'");
    for (const std::string& op : splitComma(spec.substr(eq + 1))) out[spec.substr(0, eq)].push_back(op);
  }
}
}  // namespace

CompileOptions CompileFlags::options() const {
  CompileOptions o;
  o.input_shapes = parseShapes(shapes);
  o.shape_hints = parseShapes(shape_hints, "--shape-hint");
  o.layout_probes = !no_layout_probes;
  o.backends = splitComma(backends);
  if (o.backends.empty()) throw Error(ErrorCode::kInvalidArgument, "--backends needs at least one backend");
  for (const std::string& name : o.backends) {
    if (name == "host" || backend::makeBackend(name)) continue;
    std::string known = "host";
    for (const std::string& k : backend::backendNames()) known += ", " + k;
    throw Error(ErrorCode::kInvalidArgument,
                "unknown backend '" + name + "' (this build has: " + known + ")");
  }
  parseOpLists(allow, "--allow", o.allow_ops);
  parseOpLists(deny, "--deny", o.deny_ops);
  o.min_region_size = min_region_size;
  o.precision = precisionFromName(precision);
  if (!external_data_root.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_directory(external_data_root, ec))
      throw Error(ErrorCode::kInvalidArgument, "--external-data-root '" + external_data_root + "' is not a folder");
    o.external_data_root = external_data_root;
  }
  return o;
}

void writeTextFile(const std::string& path, const std::string& text) {
  try {
    artifact::AtomicFile file(path);
    file.writeAt(0, text.data(), text.size());
    file.commit();
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kIo) throw;  // a refused target: the message names it and the rule
    throw Error(ErrorCode::kIo, "cannot write '" + path + "' (" + e.what() + ")");
  }
}

Tensor readTensorFile(const std::string& path) {
  if (endsWith(path, ".pb")) return frontend::readTensorProtoFile(path);
  return readNpy(path);
}

}  // namespace partita::cli
