// Builds the oneDNN primitive descriptor a Step describes. The compile half calls it
// with oneDNN free to choose the layouts of `chosen` arguments and records the choice;
// the loader calls it the same way and checks that this machine chooses the same
// layouts (so the derived weights in the store fit), then creates the primitive.
#pragma once

#include <dnnl.hpp>
#include <string>
#include <utility>
#include <vector>

#include "backend/dnnl/dnnl_program.h"

namespace partita::dnnl_backend {

// Throws dnnl::error when oneDNN has no implementation for the step.
dnnl::primitive_desc_base makePrimitiveDesc(const Step& step, const dnnl::engine& engine);

// Writes the layouts oneDNN chose into the step's `chosen` arguments.
void recordChosenLayouts(Step& step, const dnnl::primitive_desc_base& pd);

// Empty when every `chosen` argument of `step` matches what `pd` wants; otherwise a
// message naming the argument, the recorded and the wanted layout.
std::string chosenLayoutMismatch(const Step& step, const dnnl::primitive_desc_base& pd);

// The implementation oneDNN picked, e.g. "brgconv:avx512_core".
std::string implementationName(const dnnl::primitive_desc_base& pd);

// What derived weight layouts assume of the machine (a module's assumptions):
// oneDNN's version "major.minor.patch" of this build, the effective CPU ISA oneDNN
// dispatches to here (e.g. "avx512_core") and an OpenMP team size.
inline constexpr const char* kAssumeVersion = "dnnl.version";
inline constexpr const char* kAssumeIsa = "isa";
inline constexpr const char* kAssumeThreads = "threads";
std::string dnnlVersionString();
std::string effectiveIsaName();
std::vector<std::pair<std::string, std::string>> layoutAssumptions(int threads);

}  // namespace partita::dnnl_backend
