// Pieces shared by the CLI subcommands.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "partita/compiler.h"
#include "partita/model.h"

namespace partita::cli {

// NAME=1x3x224x224 specs -> map; throws Error(kInvalidArgument) on a malformed spec: a
// dim that is not a positive decimal integer, more than 2^40 elements, a name twice.
// `flag` names the option in messages.
std::map<std::string, std::vector<int64_t>> parseShapes(const std::vector<std::string>& specs,
                                                        const std::string& flag = "--shape");

// .onnx: import + optimize in memory; anything else: a .pta artifact.
// `options` applies to .onnx only (an artifact was compiled already).
std::shared_ptr<const Model> loadAnyModel(const std::string& path, const CompileOptions& options);

// Adds --backends, --allow, --deny, --min-region-size, --shape, --shape-hint and
// --external-data-root to a command.
struct CompileFlags {
  std::string backends = "host";
  std::vector<std::string> allow, deny, shapes, shape_hints;
  bool no_layout_probes = false;
  size_t min_region_size = 1;
  std::string external_data_root;
  std::string precision = "fp32";
  void add(CLI::App* cmd);
  CompileOptions options() const;  // throws Error(kInvalidArgument) on malformed flags or an unknown backend
  bool isDefault() const {
    return backends == "host" && allow.empty() && deny.empty() && shapes.empty() && shape_hints.empty() &&
           !no_layout_probes && min_region_size == 1 && external_data_root.empty() && precision == "fp32";
  }
};

// Writes `text` to `path` all at once or not at all; Error(kIo) "cannot write ...".
void writeTextFile(const std::string& path, const std::string& text);

// .npy or ONNX TensorProto .pb, by extension.
Tensor readTensorFile(const std::string& path);

}  // namespace partita::cli
