// The dnnl module being compiled: its program (one Function per region) and, through
// backend::ConstantUses, its constant uses, embedded bytes and derived constants. The
// lowering of every region of a compile call adds to one ModuleBuilder; finish() turns
// it into the ModuleImage the linker gets.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/constant_uses.h"
#include "backend/dnnl/dnnl_memory_desc.h"
#include "backend/dnnl/dnnl_program.h"
#include "ir/graph.h"

namespace partita::dnnl_backend {

// Error(kInternal) "dnnl backend: <msg>": the lowering met something the claim should
// have refused.
[[noreturn]] void internal(const std::string& msg);

class ModuleBuilder {
 public:
  ModuleBuilder(const ir::Graph& g, backend::ConstantSink& sink) : g_(g), uses_(sink) {}

  const ir::Graph& graph() const { return g_; }
  Program& program() { return program_; }

  // An argument that reads stored constant `id` as it is (its bytes must fit `md`).
  Arg borrow(int key, ir::ConstId id, const memory::desc& md);

  // Bakes `data` into the blob; `absorbed` are the constants it was computed from.
  Arg embed(int key, const void* data, const memory::desc& md, const std::vector<ir::ConstId>& absorbed);

  // Reorders `data` (laid out as `from`; the values of constant `source`, or values
  // computed from it) into `to` and hands the result to the sink as a derived constant.
  // When `same_values_as_source`, one source reordered the same way twice is derived
  // once (shared weights).
  ir::ConstId derive(ir::ConstId source, const memory::desc& from, const void* data, const memory::desc& to,
                     bool same_values_as_source);

  backend::ModuleImage finish();

 private:
  const ir::Graph& g_;
  Program program_;
  backend::ConstantUses uses_;
  std::map<std::pair<ir::ConstId, std::string>, ir::ConstId> derived_;
};

}  // namespace partita::dnnl_backend
