// The run-time module kinds this build links, listed explicitly (like IREE's driver
// list): the one place that knows which backends' run-time halves are in partita_rt.
// Adding a backend adds one line to module_kinds.cpp.
#pragma once

#include "runtime/executor_kinds.h"
#include "runtime/module.h"

namespace partita::api {

// Immutable after first use: thread-safe.
const runtime::ModuleKinds& builtinModuleKinds();
// The executor kinds this build links ("graph").
const runtime::ExecutorKinds& builtinExecutorKinds();

}  // namespace partita::api
