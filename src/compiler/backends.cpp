// The compile-side backends of this build: one line each. Their run-time halves are
// listed in src/api/module_kinds.cpp.
#include <functional>
#include <map>

#include "compiler/backends.h"
#if PARTITA_HAVE_DNNL
#include "backend/dnnl/dnnl_backend.h"
#endif
#if PARTITA_HAVE_EWISE
#include "backend/ewise/ewise_backend.h"
#endif

namespace partita::backend {

namespace {
using Factory = std::function<std::unique_ptr<Backend>()>;
const std::map<std::string, Factory>& factories() {
  static const std::map<std::string, Factory> table = {
#if PARTITA_HAVE_DNNL
      {"dnnl", [] { return makeDnnlBackend(); }},
#endif
#if PARTITA_HAVE_EWISE
      {"ewise", [] { return makeEwiseBackend(); }},
#endif
  };
  return table;
}
}  // namespace

std::unique_ptr<Backend> makeBackend(const std::string& name) {
  auto it = factories().find(name);
  return it == factories().end() ? nullptr : it->second();
}

std::vector<std::string> backendNames() {
  std::vector<std::string> names;
  for (const auto& [name, f] : factories()) names.push_back(name);
  return names;
}

}  // namespace partita::backend
