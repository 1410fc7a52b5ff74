// Pieces shared by the CLI subcommands.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "partita/model.h"

namespace partita::cli {

// NAME=1x3x224x224 specs -> map; throws Error(kInvalidArgument) on a malformed spec.
std::map<std::string, std::vector<int64_t>> parseShapes(const std::vector<std::string>& specs);

// .onnx: import + optimize in memory; anything else: a .pta artifact.
std::shared_ptr<const Model> loadAnyModel(const std::string& path,
                                          const std::map<std::string, std::vector<int64_t>>& shapes);

// .npy or ONNX TensorProto .pb, by extension.
Tensor readTensorFile(const std::string& path);

// " min=.. max=.. mean=.. first=[..]" for printing.
std::string summarize(const Tensor& t);

// A name usable as a file name (path separators and odd characters replaced).
std::string safeFileName(const std::string& name);

}  // namespace partita::cli
