// partita-run MODEL.pta [--input NAME=PATH]... : the runtime-only runner. It links
// partita_rt alone (the executor, the artifact loader and every backend's run-time
// half; no ONNX, no protobuf, no compiler), as a deployment would: fewer shared
// libraries to map and relocate at process start. Same options and output as
// `partita run`, for artifacts and .npy inputs.
#include <cstdio>
#include <exception>
#include <string>

#include "partita/npy.h"
#include "partita/error.h"
#include "partita/model.h"
#include "tools/run_common.h"

int main(int argc, char** argv) {
  CLI::App app{"partita-run: run a compiled partita artifact (.pta)"};
  app.set_version_flag("--version", "partita 0.1.0");
  std::string model;
  partita::cli::RunOptions options;
  app.add_option("model", model, "The artifact (.pta)")->required();
  partita::cli::addRunOptions(&app, options);
  try {
    app.parse(argc, argv);
    partita::cli::runModel(
        options, model, [&] { return partita::Model::load(model, {options.threads}); },
        [](const std::string& path) {
          if (path.size() < 4 || path.substr(path.size() - 4) != ".npy")
            throw partita::Error(partita::ErrorCode::kInvalidArgument,
                                 "partita-run reads .npy inputs; '" + path + "' is not one (partita run also reads .pb)");
          return partita::readNpy(path);
        });
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (...) {
    std::fprintf(stderr, "error: %s\n", partita::cli::describeCurrentException().c_str());
    return 1;
  }
  return 0;
}
