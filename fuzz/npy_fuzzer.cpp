// libFuzzer target over the .npy reader (readNpyBytes: the parser readNpy uses): any
// byte string must either read into a tensor exactly as large as its shape says or be
// refused with partita::Error. Anything else is a finding.
// Run with `make fuzz FUZZ_TARGET=npy` (build-fuzz/, seeds in fuzz/corpus/npy/).
#include <cstddef>
#include <cstdint>

#include "fuzz_note.h"
#include "partita/error.h"
#include "partita/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    partita::Tensor t = partita::readNpyBytes(data, size, "fuzz.npy");
    volatile uint8_t sink = 0;
    if (t.nbytes() > 0) {
      const auto* p = static_cast<const uint8_t*>(t.data());
      sink = sink + p[0] + p[t.nbytes() - 1];
    }
  } catch (const partita::Error& e) {
    partita::fuzz::note(e);
  }
  return 0;
}
