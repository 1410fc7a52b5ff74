// partita compile MODEL.onnx [-o MODEL.pta] [--backends ...] [--shape NAME=DIMS]... :
// imports, optimizes and partitions the model, compiles each external backend's
// regions into a module and links everything into one artifact file.
// Nothing is written unless the whole compile succeeds.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "partita/compiler.h"
#include "tools/cli.h"
#include "tools/cli_util.h"

namespace partita::cli {

namespace {

struct CompileArgs {
  std::string model;
  std::string output;
  CompileFlags flags;
  int threads = 2;
  bool quiet = false;
};

std::string defaultOutput(const std::string& model) {
  std::string base = model;
  if (base.size() > 5 && base.compare(base.size() - 5, 5, ".onnx") == 0) base.resize(base.size() - 5);
  return base + ".pta";
}

void compileCommand(const CompileArgs& args) {
  const std::string output = args.output.empty() ? defaultOutput(args.model) : args.output;
  // oneDNN chooses weight layouts (stored in the artifact) for the thread count it
  // will run at; a loader at another count keeps them, possibly on slower code.
  CompileOptions options = args.flags.options();
  options.threads = args.threads;
  const CompileReport report = compileToArtifact(args.model, output, options);
  if (args.quiet) return;
  const ByteAccounting& r = report.bytes;
  std::printf("wrote %s: %llu bytes\n", output.c_str(), (unsigned long long)r.file_bytes);
  std::printf("  weights  %llu bytes in %zu constants, %llu distinct in %zu tensors (repeats: %llu bytes)\n",
              (unsigned long long)r.weight_bytes, r.constants, (unsigned long long)r.distinct_weight_bytes,
              r.distinct_constants, (unsigned long long)(r.weight_bytes - r.distinct_weight_bytes));
  std::printf("  padding  %llu bytes, metadata %llu bytes, modules %llu bytes\n", (unsigned long long)r.padding_bytes,
              (unsigned long long)r.metadata_bytes, (unsigned long long)r.module_bytes);
  for (size_t m = 0; m < report.modules.size(); ++m)
    std::printf("  module %zu: %s, %u functions, %zu constant uses, %zu bytes\n", m, report.modules[m].kind.c_str(),
                report.modules[m].functions, report.modules[m].constant_uses, report.modules[m].bytes);
  if (r.distinct_weight_bytes) std::printf("  file / distinct weights = %.4f\n", r.overheadRatio());
}

}  // namespace

void addCompileCommand(CLI::App& app) {
  auto args = std::make_shared<CompileArgs>();
  CLI::App* cmd = app.add_subcommand("compile", "Compile an ONNX model into one artifact file (.pta)");
  cmd->add_option("model", args->model, "The ONNX model (.onnx)")->required();
  cmd->add_option("-o,--output", args->output, "The artifact to write (default: the model's name with .pta)");
  args->flags.add(cmd);
  cmd->add_option("-t,--threads", args->threads,
                  "Threads the artifact will run with (default 2): oneDNN picks weight layouts for it")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("-q,--quiet", args->quiet, "Print nothing on success");
  cmd->callback([args] { compileCommand(*args); });
}

}  // namespace partita::cli
