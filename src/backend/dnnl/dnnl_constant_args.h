// Where a FunctionLowering (dnnl_function_lowering.h) puts the constant arguments of
// the steps it makes. Two implementations: the compiler's ModuleBuilder
// (dnnl_module_builder.h: reorders weights into derived constants, embeds bytes in the
// blob) and, at run time, the replay of a shape-polymorphic function (dnnl_replay.h:
// finds the constants and embedded bytes the compiler made, never computes or
// repacks anything). IDs are those of the graph being lowered.
#pragma once

#include <cstdint>
#include <dnnl.hpp>
#include <optional>
#include <string>
#include <vector>

#include "backend/dnnl/dnnl_program.h"
#include "ir/constant_pool.h"

namespace partita::dnnl_backend {

// Error(kInternal) "dnnl backend: <msg>": the lowering met something the claim should
// have refused.
[[noreturn]] void internal(const std::string& msg);

class ConstantArgs {
 public:
  virtual ~ConstantArgs() = default;

  // An argument that reads constant `id` as it is (its bytes must fit `md`).
  virtual Arg borrow(int key, ir::ConstId id, const dnnl::memory::desc& md) = 0;
  // Bytes baked into the blob; `absorbed` are the constants they were computed from.
  virtual Arg embed(int key, const void* data, const dnnl::memory::desc& md,
                    const std::vector<ir::ConstId>& absorbed) = 0;
  // `data` (laid out as `from`; the values of `source` or computed from them)
  // reordered into `to`, as a derived constant: its ID.
  virtual ir::ConstId derive(ir::ConstId source, const dnnl::memory::desc& from, const void* data,
                             const dnnl::memory::desc& to, bool same_values_as_source) = 0;

  // Whether constant bytes are there to compute from. False in a replay: `data`
  // arguments may then point anywhere (they are never read), and derive and embed find
  // what the compiler made from the same constants.
  virtual bool computes() const { return true; }
  // Whether a shape-polymorphic function is being lowered (its replays must find the
  // same constants at every shape).
  virtual bool polymorphic() const { return false; }
  // The weights of a Conv, ConvTranspose or MatMul read from constant `source`
  // (`folded`: computed from it, e.g. a BatchNormalization folded in): in a replay
  // the layout the compiler stored them in, which the step must then read (oneDNN
  // does not choose again); nullopt when compiling.
  virtual std::optional<dnnl::memory::desc> storedWeights(ir::ConstId source, bool folded) {
    return std::nullopt;
  }
  // The layout oneDNN chose for those weights (the compiler records it).
  virtual void chosenWeights(ir::ConstId source, bool folded, const dnnl::memory::desc& md) {}
};

}  // namespace partita::dnnl_backend
