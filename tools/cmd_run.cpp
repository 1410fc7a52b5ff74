// partita run MODEL [--input NAME=PATH]... : runs a model (.onnx compiled in memory,
// or a .pta artifact) and prints its outputs and the time per run.
#include "partita/compiler.h"
#include "partita/error.h"
#include "tools/cli.h"
#include "tools/cli_util.h"
#include "tools/run_common.h"

namespace partita::cli {

namespace {

struct RunArgs {
  std::string model;
  CompileFlags compile;
  RunOptions run;
};

void runCommand(const RunArgs& args) {
  if (!args.compile.isDefault() && args.model.size() > 4 && args.model.substr(args.model.size() - 4) == ".pta")
    throw Error(ErrorCode::kInvalidArgument, "compile flags (--backends, --shape, ...) apply to .onnx models; an artifact was compiled already");
  CompileOptions options = args.compile.options();
  options.threads = args.run.threads;
  runModel(args.run, args.model, [&] { return loadAnyModel(args.model, options); }, readTensorFile);
}

}  // namespace

void addRunCommand(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand("run", "Run a model (.onnx or .pta) and print its outputs and timing");
  cmd->add_option("model", args->model, "Model file: .onnx (compiled in memory) or .pta artifact")->required();
  addRunOptions(cmd, args->run);
  args->compile.add(cmd);
  cmd->callback([args] { runCommand(*args); });
}

}  // namespace partita::cli
