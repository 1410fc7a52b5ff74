// What the fuzz targets that reach a run share: one run of a loaded program on
// zero-filled inputs, when the inputs' shapes are static and the inputs small.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "api/module_kinds.h"
#include "base/checked_int.h"
#include "fuzz_note.h"
#include "ir/limits.h"
#include "ir/tensor.h"
#include "runtime/artifact_reader.h"
#include "runtime/executor.h"
#include "runtime/graph_executor.h"

namespace partita::fuzz {

// Inputs beyond this many bytes in total are not run (the run is skipped, not refused).
inline constexpr uint64_t kMaxRunInputBytes = uint64_t(1) << 20;
// Nor is a program whose planned activation arena, its modules' own workspaces
// (a dnnl module's temporaries and scratchpad, up to TensorLimits' 1 TiB a buffer as
// its blob declares them) and static outputs together are larger than this: a
// legitimately large run (a 142 MB output zero-filled and written under ASan on a busy
// machine) passed libFuzzer's 10 s timeout, and a dnnl blob whose temporaries were
// made gigabytes large took the process past libFuzzer's 2 GB, which are the
// harness's budgets, not bugs.
inline constexpr uint64_t kMaxRunArenaBytes = uint64_t(64) << 20;

// Runs `exec` once on zeros when every input is static and they total at most
// kMaxRunInputBytes, and reads the first and last byte of every output (an output
// must be as large as its shape says). Only partita::Error may leave it.
inline void runOnceOnZeros(const runtime::Executor& exec) {
  uint64_t total = 0;
  for (const runtime::IoSpec& in : exec.inputs()) {
    if (!in.type.isStatic()) return note("not run: an input's shape is not static");
    uint64_t bytes = ir::dtypeSize(in.type.dtype);
    for (const ir::Dim& d : in.type.dims) {
      std::optional<uint64_t> b = mulAtMost(bytes, uint64_t(d.value), kMaxRunInputBytes);
      if (!b) return note("not run: the inputs are too large");
      bytes = *b;
    }
    total += bytes;
    if (total > kMaxRunInputBytes) return note("not run: the inputs are too large");
  }
  uint64_t run_bytes = exec.plannedActivationBytes();
  if (const auto* graph = dynamic_cast<const runtime::GraphExecutor*>(&exec))
    for (const auto& m : graph->modules()) {
      const uint64_t own = m->scratchpadBytes();
      if (own > kMaxRunArenaBytes) return note("not run: a module's workspace is too large");
      run_bytes += own;
    }
  for (const runtime::IoSpec& out : exec.outputs()) {
    if (!out.type.isStatic()) continue;
    std::optional<uint64_t> b = ir::checkedNbytes(out.type.dtype, out.type.staticShape());
    if (!b || *b > kMaxRunArenaBytes) return note("not run: an output is too large");
    run_bytes += *b;
  }
  if (run_bytes > kMaxRunArenaBytes) return note("not run: the arena and outputs are too large");

  std::vector<ir::OwnedTensor> inputs;
  std::vector<ir::Tensor> views;
  for (const runtime::IoSpec& in : exec.inputs()) {
    inputs.emplace_back(in.type.dtype, in.type.staticShape());
    views.push_back(inputs.back().view());
  }
  std::unique_ptr<runtime::ExecutorState> state = exec.newState();
  std::vector<ir::OwnedTensor> outputs = exec.run(*state, views);
  volatile uint8_t sink = 0;
  for (const ir::OwnedTensor& t : outputs) {
    if (t.nbytes() == 0) continue;
    const auto* p = static_cast<const uint8_t*>(t.data());
    sink = sink + p[0] + p[t.nbytes() - 1];
  }
  note("ran");
}

// Loads an opened artifact's modules and executor as Model::load does (this build's
// kinds, one thread) and runs it once on zeros (above).
inline void loadAndRunOnce(const artifact::Artifact& a) {
  // A Loop may be endless (M omitted, a condition that stays true): its run stops at
  // the iteration limit, here one far below the default so that it stops in time.
  runtime::RunOptions options{1};
  options.max_loop_iterations = 10000;
  auto exec = api::builtinExecutorKinds().create(a, api::builtinModuleKinds(), options);
  runOnceOnZeros(*exec);
}

}  // namespace partita::fuzz
