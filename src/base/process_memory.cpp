#include "base/process_memory.h"

#include <malloc.h>

#include <fstream>
#include <sstream>
#include <string>

namespace partita {

uint64_t anonymousBytes() {
  std::ifstream in("/proc/self/smaps_rollup");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Anonymous:", 0) != 0) continue;
    std::istringstream fields(line.substr(10));
    uint64_t kb = 0;
    fields >> kb;
    return kb * 1024;
  }
  return 0;
}

void configureMallocForMeasurement() {
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
}

}  // namespace partita
