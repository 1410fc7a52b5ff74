// The dnnl module being compiled: its program (one Function per region) and, through
// backend::ConstantUses, its constant uses, embedded bytes and derived constants. The
// lowering of every region of a compile call adds to one ModuleBuilder; finish() turns
// it into the ModuleImage the linker gets.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/constant_uses.h"
#include "backend/dnnl/dnnl_constant_args.h"
#include "backend/dnnl/dnnl_memory_desc.h"
#include "backend/dnnl/dnnl_program.h"
#include "ir/graph.h"

namespace partita::dnnl_backend {

class ModuleBuilder final : public ConstantArgs {
 public:
  ModuleBuilder(const ir::Graph& g, backend::ConstantSink& sink) : module_graph_(g), g_(&g), uses_(sink) {}

  const ir::Graph& graph() const { return module_graph_; }
  Program& program() { return program_; }

  // While a shape-polymorphic function is lowered: constant IDs are those of its
  // region graph `g` (`poly.global` maps them to the module graph's), and what the
  // lowering makes is recorded in `poly` for the run-time half's replays.
  void beginPolymorphic(const ir::Graph& g, PolyFunction& poly);
  void endPolymorphic();
  // Raw bytes in the blob's embedded data (no constant use): a region constant's value.
  uint64_t embedBytes(const void* data, size_t n) { return uses_.embed(data, n, {}); }

  Arg borrow(int key, ir::ConstId id, const memory::desc& md) override;
  Arg embed(int key, const void* data, const memory::desc& md, const std::vector<ir::ConstId>& absorbed) override;
  // Reorders `data` (laid out as `from`; the values of constant `source`, or values
  // computed from it) into `to` and hands the result to the sink as a derived constant.
  // When `same_values_as_source`, one source reordered the same way twice is derived
  // once (shared weights).
  ir::ConstId derive(ir::ConstId source, const memory::desc& from, const void* data, const memory::desc& to,
                     bool same_values_as_source) override;
  void chosenWeights(ir::ConstId source, bool folded, const memory::desc& md) override;
  bool polymorphic() const override { return poly_ != nullptr; }
  // Weights layouts to use instead of oneDNN's choice, by the module's ConstId of their
  // source and `folded` (a polymorphic function's, chosen to hold at other shapes).
  void pinWeights(std::map<std::pair<ir::ConstId, bool>, memory::desc> pins) { pins_ = std::move(pins); }
  std::optional<memory::desc> storedWeights(ir::ConstId source, bool folded) override;

  backend::ModuleImage finish();

 private:
  ir::ConstId global(ir::ConstId id) const;

  const ir::Graph& module_graph_;
  const ir::Graph* g_;              // the graph being lowered
  PolyFunction* poly_ = nullptr;    // set while a polymorphic function is lowered
  Program program_;
  backend::ConstantUses uses_;
  std::map<std::pair<ir::ConstId, std::string>, ir::ConstId> derived_;
  std::map<std::pair<ir::ConstId, bool>, memory::desc> pins_;
};

}  // namespace partita::dnnl_backend
