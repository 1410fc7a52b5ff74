// The run-time half of shape-polymorphic functions (PolyFunction, dnnl_program.h):
// the region graph at concrete input shapes, and its lowering for them with the
// constants the compiler made. The compiler uses regionAt too, for the
// representative shapes, so that both lower the same graph.
#pragma once

#include <optional>
#include <vector>

#include "backend/backend.h"
#include "backend/dnnl/dnnl_constant_args.h"
#include "backend/dnnl/dnnl_program.h"
#include "ir/graph.h"

namespace partita::dnnl_backend {

// `region` with its inputs at `shapes` and every other value's type inferred from
// them by the host's inference (kernels::inferNode). Error(kInvalidArgument) naming
// the input or the node when the shapes do not fit (another rank, a fixed dim that
// differs, an input too small for a window, a value that would be empty).
ir::Graph regionAt(const ir::Graph& region, const std::vector<std::vector<int64_t>>& shapes);

// The node ids 0..n-1 of a region graph as a backend::Region, with its inputs and outputs.
backend::Region wholeRegion(const ir::Graph& region);

// Finds what the compiler recorded (PolyFunction's records) instead of computing:
// derive and embed return the constant and the bytes the compiler made for the same
// source (and layout, and absorbed constants), in the order it made them; weights are
// read in their stored layout. A lowering that asks for something the compiler did not
// make is Error(kUnsupported) (the shape needs a structure the compiler did not see).
class ReplayArgs final : public ConstantArgs {
 public:
  explicit ReplayArgs(const PolyFunction& poly);

  Arg borrow(int key, ir::ConstId id, const dnnl::memory::desc& md) override;
  Arg embed(int key, const void* data, const dnnl::memory::desc& md,
            const std::vector<ir::ConstId>& absorbed) override;
  ir::ConstId derive(ir::ConstId source, const dnnl::memory::desc& from, const void* data,
                     const dnnl::memory::desc& to, bool same_values_as_source) override;
  bool computes() const override { return false; }
  bool polymorphic() const override { return true; }
  std::optional<dnnl::memory::desc> storedWeights(ir::ConstId source, bool folded) override;

 private:
  ir::ConstId global(ir::ConstId id) const;

  const PolyFunction& poly_;
  std::vector<bool> weights_used_, derived_used_, embedded_used_;
};

// Lowers `poly` for inputs of `shapes` (regionAt, then FunctionLowering with
// ReplayArgs). Throws Error(kInvalidArgument) when the shapes do not fit, and
// Error(kUnsupported) when oneDNN or the lowering cannot compile the region for them.
Function replayFunction(const PolyFunction& poly, const std::vector<std::vector<int64_t>>& shapes);

}  // namespace partita::dnnl_backend
