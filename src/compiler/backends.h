// The compile-side backends this build links, listed explicitly in backends.cpp.
// "host" is implicit: the graph executor runs whatever no external backend takes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace partita::backend {

std::unique_ptr<Backend> makeBackend(const std::string& name);  // nullptr when unknown
std::vector<std::string> backendNames();

}  // namespace partita::backend
