// libFuzzer target over the artifact loader and one run: any byte string must either
// open (and then pass or fail verifyWeights cleanly), load its modules and executor
// (as Model::load does) and run once on zeros when its inputs are static and small
// (fuzz_run.h), or be rejected with partita::Error at some step. Any other exception,
// crash, leak or sanitizer report is a bug.
//
// Each input is tried twice: as it is, and resealed (checksums recomputed) so that
// mutations get past the checksums into the section table and manifest checks.
// Run with `make fuzz FUZZ_TARGET=artifact` (build-fuzz/, seeds in
// fuzz/corpus/artifact/, made by artifact_fuzz_seeds).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "compiler/artifact_testing.h"
#include "fuzz_run.h"
#include "runtime/artifact_reader.h"
#include "partita/error.h"

namespace {

void tryOpen(std::vector<std::byte> bytes) {
  using namespace partita;
  try {
    artifact::Artifact a = artifact::readArtifact(Bytes::fromVector(std::move(bytes)), "fuzz.pta");
    artifact::byteAccounting(a);
    // Touch the first and last byte of every stored tensor: views must be in bounds.
    volatile uint8_t sink = 0;
    for (const artifact::ConstantEntry& c : a.constants) {
      if (c.storage != artifact::Storage::kWeights || c.nbytes == 0) continue;
      const auto* p = static_cast<const uint8_t*>(a.store->get(c.id).data);
      sink = sink + p[0] + p[c.nbytes - 1];
    }
    for (size_t m = 0; m < a.modules.size(); ++m) a.moduleBlob(m);
    (void)a.graph->str();
    try {
      artifact::verifyWeights(a);
    } catch (const Error& e) {
      fuzz::note(e);
    }
    // Loading does not verify weights (Model::load): run whatever they hold.
    fuzz::loadAndRunOnce(a);
  } catch (const Error& e) {
    fuzz::note(e);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto* p = reinterpret_cast<const std::byte*>(data);
  std::vector<std::byte> bytes(p, p + size);
  tryOpen(bytes);
  partita::artifact::testing::reseal(bytes);
  tryOpen(std::move(bytes));
  return 0;
}
