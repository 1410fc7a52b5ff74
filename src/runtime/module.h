// Runtime modules: the run-time half of an external backend. A module is compiled
// into an opaque blob plus a declaration of which constants it uses and how; at load
// it receives its blob and the shared ConstStore and asks the store for the IDs it
// declared (zero copy). The graph executor calls its functions through
// `partita.Call` nodes (attributes: module = index in the model's module table,
// function = index within the module).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/bytes.h"
#include "ir/constant_pool.h"
#include "ir/tensor.h"
#include "runtime/const_store.h"
#include "runtime/profile.h"

namespace partita::runtime {

// How a module uses a constant. Stable numbering: written into artifacts.
enum class ConstUseKind : uint8_t {
  kBorrow = 1,  // reads the stored tensor as it is
  kDerive = 2,  // reads a tensor it derived at compile time (e.g. a packed layout),
                // stored in the shared weight store; `source` is the original
  kEmbed = 3,   // absorbed the tensor into its own blob; needs nothing from the store
};

struct ConstUse {
  ir::ConstId id = ir::kNoConst;
  ConstUseKind kind = ConstUseKind::kBorrow;
  ir::ConstId source = ir::kNoConst;  // kDerive: the constant it was derived from

  bool operator==(const ConstUse&) const = default;
};

// Every tensor a module embeds in its blob starts at a multiple of this within the
// blob's embedded data (and the data itself at a multiple of it within the blob, which
// the linker aligns to 64), so the run-time half reads it in place.
inline constexpr size_t kEmbeddedAlignment = 64;

class RuntimeModule {
 public:
  virtual ~RuntimeModule() = default;
  // Runs function `fn`. Thread-safe: sessions call it concurrently. Inputs and
  // outputs are dense row-major tensors allocated by the executor.
  virtual void run(uint32_t fn, const std::vector<ir::Tensor>& inputs,
                   const std::vector<ir::Tensor>& outputs) const = 0;
  // Runs function `fn` as run() does and reports its own work to `profile`: events of
  // depth 2 (e.g. one per oneDNN primitive, cat "primitive", with args "backend" and
  // whatever describes it), begun and ended on the calling thread within this call.
  // Called instead of run() when the run is profiled. By default it reports nothing.
  virtual void runProfiled(uint32_t fn, const std::vector<ir::Tensor>& inputs,
                           const std::vector<ir::Tensor>& outputs, ProfileSink& profile) const {
    (void)profile;
    run(fn, inputs, outputs);
  }
  // The module kind it was loaded as ("dnnl", "ewise"), for reports and profiles.
  virtual std::string_view kind() const = 0;
  // Bytes of scratch memory the module holds per concurrent run (for reports).
  virtual size_t scratchpadBytes() const { return 0; }

  // Shape-polymorphic functions: compiled for values with symbolic dims (a region of
  // a model exported with dynamic axes), they run at any input shape that fits.
  // Whether function `fn` is one (then the executor calls outputShapes for each new
  // input shape and allocates the outputs run() writes).
  virtual bool shapePolymorphic(uint32_t fn) const { return false; }
  // The shapes of function `fn`'s outputs for `inputs` (their dtypes and shapes; the
  // data is not read). Throws Error(kInvalidArgument) naming what does not fit, and
  // Error(kUnsupported) for a function that is not shape-polymorphic.
  virtual std::vector<std::vector<int64_t>> outputShapes(uint32_t fn, const std::vector<ir::Tensor>& inputs) const;
};

// How many input shapes a module (and the graph executor) keeps ready per function:
// LoadOptions::shape_cache, else the environment variable PARTITA_SHAPE_CACHE, else 8.
inline constexpr size_t kDefaultShapeCache = 8;
size_t shapeCacheEntries(size_t requested);

struct ModuleLoadContext {
  Bytes blob;                   // the module's section, a view into the mapped file
  const ConstStore* store;      // the shared weight store
  std::vector<ConstUse> uses;   // what the module declared at compile time
  int threads = 2;              // the model's kernel threads (RunOptions::threads)
  std::vector<std::pair<std::string, std::string>> assumptions;  // as compiled (ModuleImage::assumptions)
  // Shape-polymorphic functions: how many input shapes each keeps compiled (an LRU
  // cache; shapeCacheEntries() gives the effective count, at least 1).
  size_t shape_cache = kDefaultShapeCache;
};

using ModuleLoader = std::shared_ptr<RuntimeModule> (*)(const ModuleLoadContext& ctx);

// One module kind: the name written into artifacts and the loader of its run-time half.
struct ModuleKind {
  std::string_view name;
  ModuleLoader load = nullptr;
};

// The module kinds a program can load: an explicit list, built by the layer that
// knows which backends the program links (src/api/module_kinds.cpp for partita_rt),
// like IREE's driver list; no static registrars. Immutable: thread-safe to share.
class ModuleKinds {
 public:
  ModuleKinds() = default;
  explicit ModuleKinds(std::vector<ModuleKind> kinds);

  const ModuleKind* find(std::string_view name) const;  // nullptr when unknown
  std::vector<std::string> names() const;
  const std::vector<ModuleKind>& all() const { return kinds_; }
  // Checks that every borrowed or derived constant the module declared is in the
  // store, then calls the kind's loader. Error(kUnsupported) for an unknown kind.
  std::shared_ptr<RuntimeModule> load(const std::string& kind, const ModuleLoadContext& ctx) const;

 private:
  std::vector<ModuleKind> kinds_;
};

}  // namespace partita::runtime
