// libFuzzer target over the compiler, from ONNX bytes to one run: import from memory
// (frontend::importOnnxBytes; no external data), optimize, partition -- once with the
// host alone and once with every backend (dnnl, ewise, host) -- link into an artifact
// in a private temporary folder (on /dev/shm; one per input, removed after it; an input
// that crashes leaves its folder), load it as Model::load does, and run it once on zeros
// when its inputs are static and small (fuzz_run.h).
//
// Any byte string must either get through or be refused with partita::Error. Any other
// exception, crash, sanitizer report, hang or runaway memory is a finding.
// Run with `make fuzz FUZZ_TARGET=onnx` (build-fuzz/, seeds in fuzz/corpus/onnx/).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "base/temp_dir_testing.h"
#include "compiler/artifact_writer.h"
#include "compiler/compile.h"
#include "fuzz_run.h"
#include "partita/error.h"
#include "runtime/artifact_reader.h"

namespace {

// tmpfs when there is one: the writer fsyncs every artifact.
std::filesystem::path tempParent() {
  std::error_code ec;
  if (std::filesystem::is_directory("/dev/shm", ec)) return "/dev/shm";
  return std::filesystem::temp_directory_path();
}

void compileLinkRun(const uint8_t* data, size_t size, std::vector<std::string> backends) {
  using namespace partita;
  // A folder per input, removed when it is done: libFuzzer's fork-mode jobs and crashes
  // end without static destructors, so a folder kept for the process would stay behind.
  static const std::filesystem::path parent = tempParent();
  const testing::TempDir dir("partita_onnx_fuzz", parent);
  const std::string artifact_path = dir.path("fuzz.pta");
  try {
    CompileOptions options;
    options.backends = std::move(backends);
    options.threads = 1;
    CompiledGraph c = compileGraphFromBytes(Bytes::copyOf(data, size), "fuzz.onnx", options);
    artifact::writeArtifact(c.graph, c.parts.modules, artifact_path);
    fuzz::loadAndRunOnce(artifact::openArtifact(artifact_path));
  } catch (const Error& e) {
    fuzz::note(e);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  compileLinkRun(data, size, {"host"});
  compileLinkRun(data, size, {"dnnl", "ewise", "host"});
  return 0;
}
