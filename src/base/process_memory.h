// Measuring this process's private memory, for `partita inspect --run` and the memory
// tests: what loading and running a model adds beyond the weights' shared file pages.
#pragma once

#include <cstdint>

namespace partita {

// Anonymous (private, not file-backed) memory of this process, from
// /proc/self/smaps_rollup; 0 when the kernel does not provide it.
uint64_t anonymousBytes();

// Sets glibc's malloc so that growth measures what a model holds, not allocator
// churn: blocks of 128 KiB or more (arenas, kernel scratch) are their own mappings,
// returned when freed, instead of glibc raising the threshold and keeping them in its
// heap; smaller blocks stay in the heaps once touched (the kernels' worker threads
// allocate scratch in their own malloc arenas, and trimming those between a warm-up
// and the measured run made that run re-touch up to 136 KB of heap under a parallel
// ctest). Process-wide; call before the warm-up.
void configureMallocForMeasurement();

}  // namespace partita
