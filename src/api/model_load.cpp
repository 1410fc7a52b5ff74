#include <cstdlib>
#include <cstring>
#include <system_error>
#include <thread>

#include "api/module_kinds.h"
#include "base/mapped_file.h"
#include "partita/model.h"
#include "runtime/artifact_reader.h"
#include "runtime/executor.h"
#include "runtime/format.h"

namespace partita {

namespace {
std::shared_ptr<const Model> modelOf(const artifact::Artifact& a, const LoadOptions& options) {
  const runtime::RunOptions run{options.threads, options.limits, options.shape_cache, options.max_loop_iterations};
  std::vector<std::string> kinds;
  for (const artifact::ModuleEntry& m : a.modules)
    if (m.kind != artifact::kHostGraphModule) kinds.push_back(m.kind);
  return std::make_shared<Model>(api::builtinExecutorKinds().create(a, api::builtinModuleKinds(), run), kinds);
}
}  // namespace

bool hasArtifactSignature(const void* data, size_t size) {
  return size >= artifact::kMagic.size() && std::memcmp(data, artifact::kMagic.data(), artifact::kMagic.size()) == 0;
}

std::shared_ptr<const Model> Model::load(const std::string& path, const LoadOptions& options) {
  runtime::checkThreads(options.threads);  // before mapping anything
  artifact::Artifact a = artifact::openArtifact(path);
  // A run reads every weight: mapping the file's pages in one call costs far less than
  // the page faults of a first run reading them one by one. Reading each page once also
  // takes the rest of a first read's cost out of the first run (on a VM, 15 ms of
  // ResNet-18's 47 MB). For runs on one thread, a thread of its own does both on the
  // idle core while the modules load (mostly oneDNN generating kernels): ResNet-18 from
  // process start to first result 81 -> 71 ms (docs/benchmarks.md, start-up). Runs on
  // more threads read the weights on all of them, and their load keeps the cores busy:
  // there the reads stay with the run (a reader cost ResNet-18 on the host 4 ms).
  std::thread reader;
  if (options.threads == 1) {
    try {
      reader = std::thread([file = a.file] { readEveryPage(file); });
    } catch (const std::system_error&) {  // no thread to be had: the pages are mapped here
    }
  }
  if (!reader.joinable()) prefault(a.file);
  struct Join {
    std::thread& t;
    ~Join() {
      if (t.joinable()) t.join();
    }
  } join{reader};
  return modelOf(a, options);
}

std::shared_ptr<const Model> Model::loadBytes(const void* data, size_t size, const std::string& name,
                                              const LoadOptions& options) {
  runtime::checkThreads(options.threads);
  // Page-aligned, as a mapping is: the weight section's alignment rule (up to a page
  // for large tensors) holds in memory only when the file's first byte does.
  const size_t rounded = (size + artifact::kPageAlignment - 1) / artifact::kPageAlignment * artifact::kPageAlignment;
  void* copy = size ? std::aligned_alloc(artifact::kPageAlignment, rounded) : nullptr;
  if (size && !copy)
    throw Error(ErrorCode::kInvalidArgument,
                "out of memory: cannot copy the " + std::to_string(size) + " bytes of artifact '" + name + "'");
  std::shared_ptr<const void> owner(copy, [](const void* p) { std::free(const_cast<void*>(p)); });
  if (size) std::memcpy(copy, data, size);
  Bytes file{owner, static_cast<const std::byte*>(copy), size};
  return modelOf(artifact::readArtifact(file, name), options);
}

}  // namespace partita
