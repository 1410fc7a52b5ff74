#include "tools/cli_util.h"

#include <cmath>
#include <cstdio>
#include <sstream>

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

std::map<std::string, std::vector<int64_t>> parseShapes(const std::vector<std::string>& specs) {
  std::map<std::string, std::vector<int64_t>> out;
  for (const std::string& spec : specs) {
    auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
      throw Error(ErrorCode::kInvalidArgument, "--shape expects NAME=DxDxD, got '" + spec + "'");
    std::vector<int64_t> dims;
    std::stringstream ss(spec.substr(eq + 1));
    std::string item;
    while (std::getline(ss, item, 'x')) {
      char* end = nullptr;
      long long v = std::strtoll(item.c_str(), &end, 10);
      if (item.empty() || *end != '\0' || v < 0)
        throw Error(ErrorCode::kInvalidArgument, "--shape: bad dimension '" + item + "' in '" + spec + "'");
      dims.push_back(v);
    }
    out[spec.substr(0, eq)] = dims;
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
  return o;
}

Tensor readTensorFile(const std::string& path) {
  if (endsWith(path, ".pb")) return frontend::readTensorProtoFile(path);
  return readNpy(path);
}

}  // namespace partita::cli
