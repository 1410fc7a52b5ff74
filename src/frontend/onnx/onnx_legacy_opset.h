// Importing models of opsets 1..6 of the default ONNX domain (the PyTorch test models,
// many older exports) as opset 7, the oldest opset the kernels implement. A node whose
// op has the same definition in both opsets (per ONNX's schema registry) is kept as it
// is. The ops whose old forms differ only in ways with a known rewrite (legacy
// broadcasting with an axis, consumed_inputs, is_test, Gemm's broadcast, PRelu's
// per-channel slope) are rewritten to their opset-7 form, which may add Unsqueeze nodes
// or reshaped constants to the graph. Any other changed op is reported as unsupported.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "ir/graph.h"

namespace partita::kernels {
class OpRegistry;
}

namespace partita::frontend::onnx_import {

// The oldest opset of the default domain the kernels implement; older models are
// imported as this one.
inline constexpr int kMinOpset = 7;

class LegacyOpsetUpgrader {
 public:
  // Records an op use that cannot be imported: (op key, opset, node name, reason).
  using NoteUnsupported = std::function<void(const std::string& key, int opset, const std::string& node_name,
                                             std::string reason)>;

  // `legacy_opset` is the model's default-domain opset (1..6); `ops` is the registry the
  // import checks against; `where` prefixes error messages ("model.onnx: ").
  LegacyOpsetUpgrader(int legacy_opset, ir::Graph& graph, const kernels::OpRegistry& ops, std::string where,
                      NoteUnsupported note);

  // Imports `node` (default domain, known to the registry, not yet added to the graph)
  // as opset 7, or notes it under `key` as unsupported when its definition changed in
  // between and no rewrite is known. Throws Error(kUnsupported) for a legacy broadcast
  // on inputs of unknown rank, Error(kInvalidModel) for a broadcast axis that does not fit.
  void upgrade(ir::Node& node, const std::string& key);

 private:
  // Rank of a value when the model tells it (declared type or constant), else -1.
  int64_t knownRank(ir::ValueId v) const;
  // Gives `v` `extra` trailing dimensions of size 1, so that numpy broadcasting aligns
  // it where a legacy broadcast (or a per-channel PRelu slope) aligned it.
  ir::ValueId appendUnitDims(ir::ValueId v, int64_t extra, const std::string& node_name);
  void upgradeToOpset7(ir::Node& node);

  int legacy_opset_;
  ir::Graph& graph_;
  const kernels::OpRegistry& ops_;
  std::string where_;
  NoteUnsupported note_;
};

}  // namespace partita::frontend::onnx_import
