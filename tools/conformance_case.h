// One ONNX backend test case for `partita conformance`: a folder holding model.onnx and
// test_data_set_*/{input,output}_N.pb. runCase compiles the model in memory (import,
// optimize, partition, as `partita run model.onnx` does), runs every data set through
// the graph executor and compares each output with ONNX's backend tolerances (rtol 1e-3,
// atol 1e-7; integers exactly, NaN equal to NaN). Known-broken cases and cases whose
// reference outputs or activations need more than 1 GiB are skipped. Runs in the calling
// process: cmd_conformance.cpp gives each case a child process of its own (unless
// --no-fork).
#pragma once

#include <filesystem>
#include <string>

#include "partita/compiler.h"

namespace partita::cli {

enum class Status : char { kPass = 'P', kFail = 'F', kUnsupported = 'U', kError = 'E', kSkip = 'S' };
const char* statusName(Status s);  // "PASS", "FAIL", "UNSUPPORTED", "ERROR", "SKIP"

struct CaseResult {
  Status status = Status::kError;
  std::string message;
};

struct Case {
  std::string root;  // label of the folder it came from ("node")
  std::string name;  // the case folder's name ("test_abs")
  std::filesystem::path dir;
};

// Compiles and runs case `c`; throws partita::Error when compiling or running fails.
CaseResult runCase(const Case& c, const CompileOptions& compile);

// runCase with exceptions as results: Error(kUnsupported) is UNSUPPORTED, any other
// exception (bad_alloc included) ERROR with its message.
CaseResult runCaseCatching(const Case& c, const CompileOptions& compile);

// `v` with up to 9 significant digits ("%.9g"), for messages.
std::string formatNumber(double v);

}  // namespace partita::cli
