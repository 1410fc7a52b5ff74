// EwiseModule: the run-time half of the ewise backend (module kind "ewise").
//
// Load parses and checks the blob, resolves each constant slot to a pointer -- into
// the blob's own data for embedded constants, into the shared weight store for
// borrowed ones (zero copy either way) -- and plans each function's iteration: the
// shape is split into rows and a contiguous inner run over which every constant is
// either contiguous or one value, so the inner loops are plain vector loops.
//
// A run walks the iteration in tiles of kTile elements; for each tile it executes the
// function's instructions, inputs read and outputs written in place, intermediate
// registers in a per-thread scratch tile. Thread-safe.
//
// A shape-polymorphic function (dims given at run time) plans its walk for each new
// shape and keeps the plans in an LRU cache (ModuleLoadContext::shape_cache); every
// input and output of a call must have the one shape.
#pragma once

#include <memory>
#include <vector>

#include "backend/ewise/ewise_program.h"
#include "runtime/module.h"
#include "runtime/shape_cache.h"

namespace partita::ewise {

// The module kind of this backend's run-time half, for the program's list of kinds.
runtime::ModuleKind ewiseModuleKind();

class EwiseModule final : public runtime::RuntimeModule {
 public:
  static constexpr int64_t kTile = 512;

  // Throws Error(kInvalidArtifact) for a malformed blob, or a constant that is missing,
  // undeclared, declared with another use kind, or of another dtype or size.
  static std::shared_ptr<EwiseModule> load(const runtime::ModuleLoadContext& ctx);

  void run(uint32_t fn, const std::vector<ir::Tensor>& inputs,
           const std::vector<ir::Tensor>& outputs) const override;
  // Per concurrent run and thread: the intermediate registers' tiles.
  size_t scratchpadBytes() const override;
  std::string_view kind() const override { return kModuleKind; }
  bool shapePolymorphic(uint32_t fn) const override;
  std::vector<std::vector<int64_t>> outputShapes(uint32_t fn, const std::vector<ir::Tensor>& inputs) const override;
  // Walks planned for shapes of polymorphic functions (cached) and evicted.
  size_t walksCached() const { return walks_.size(); }
  size_t walkEvictions() const { return walks_.evictions(); }

  size_t numFunctions() const { return functions_.size(); }
  // The data pointer each constant slot of `fn` reads (tests check zero copy).
  std::vector<std::pair<ir::ConstId, const float*>> constantPointers(uint32_t fn) const;

 private:
  // How a run walks one shape: outer dimensions (rows) and an inner run.
  struct Walk {
    std::vector<int64_t> shape;
    std::vector<int64_t> outer;  // the outer dimensions (rows = their product)
    int64_t rows = 1, inner = 1;
    std::vector<bool> contiguous;                   // per constant: over the inner run; else one value per row
    std::vector<std::vector<int64_t>> row_strides;  // per constant and outer dimension, 0 where broadcast
  };
  struct LoadedFunction {
    Function fn;
    std::vector<const float*> consts;
    std::shared_ptr<const Walk> walk;  // a function of static shape; polymorphic ones: walks_
    std::vector<int32_t> temp_slot;    // per register: scratch tile index, or -1
    std::vector<int32_t> output_of;    // per register: output index, or -1
    uint32_t num_temps = 0;
  };

  explicit EwiseModule(size_t shape_cache) : walks_(shape_cache) {}
  static std::shared_ptr<const Walk> planWalk(const Function& fn, const std::vector<int64_t>& shape);
  // The one shape of a call's tensors; Error(kInvalidArgument) when they differ or do
  // not fit the function's shape.
  const std::vector<int64_t>& callShape(uint32_t f, const std::vector<ir::Tensor>& inputs,
                                        const std::vector<ir::Tensor>* outputs) const;
  void runTile(const LoadedFunction& lf, const Walk& walk, const std::vector<ir::Tensor>& inputs,
               const std::vector<ir::Tensor>& outputs, int64_t row, int64_t begin, int64_t n,
               float* scratch) const;

  Bytes blob_;  // keeps the embedded constants alive
  std::vector<LoadedFunction> functions_;
  mutable runtime::ShapeCache<const Walk> walks_;
};

}  // namespace partita::ewise
