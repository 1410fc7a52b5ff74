// What `partita run` and the runtime-only `partita-run` share: the run options, and
// running a loaded model on given or random inputs, printing outputs and timings.
// Runtime only: no compiler header here (tools/partita_run/ links partita_rt alone).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "partita/model.h"

namespace partita::cli {

struct RunOptions {
  std::vector<std::string> inputs;  // NAME=PATH
  std::string output_dir;
  int repeat = 1;
  int warmup = 0;
  uint64_t seed = 0;
  int threads = 2;
  bool quiet = false;
  std::string profile;  // write a trace of the timed runs here (docs/profiling.md)
  size_t profile_top = 15;
};

// Adds --input, --output-dir, --repeat, --warmup, --seed, --threads, --quiet,
// --profile, --profile-top.
void addRunOptions(CLI::App* cmd, RunOptions& options);

// Sets the thread count, loads the model with `load` (timed), feeds its inputs (read
// with `read_tensor`, or random when no --input is given), runs it, writes and prints
// the outputs and the timings. With --profile, the timed runs (not the warmup) are
// profiled into one trace, written atomically, and a summary is printed at the end.
// `model_path` is the file `load` reads: --profile refuses to replace it.
void runModel(const RunOptions& options, const std::string& model_path,
              const std::function<std::shared_ptr<const Model>()>& load,
              const std::function<Tensor(const std::string&)>& read_tensor);

// " min=.. max=.. mean=.. first=[..]" for printing.
std::string summarize(const Tensor& t);

// The message for the exception being handled (call inside a catch block): a
// partita::Error's own; std::bad_alloc, std::length_error, std::out_of_range and the
// rest as partita messages, never the standard library's text.
std::string describeCurrentException();

// A name usable as a file name (path separators and odd characters replaced).
std::string safeFileName(const std::string& name);

}  // namespace partita::cli
