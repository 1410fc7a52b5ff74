// Partitioning: each enabled backend, in priority order, claims the nodes it
// supports; adjacent claimed nodes of one backend merge into regions without
// creating cycles; each region is compiled by its backend and replaced in the main
// graph by one `partita.Call` node. Nodes nobody claims stay host nodes.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "ir/graph.h"
#include "runtime/module.h"

namespace partita::backend {

struct PartitionOptions {
  std::vector<std::string> backends = {"host"};            // priority order; "host" may be omitted
  std::map<std::string, std::set<std::string>> allow_ops;  // backend -> only these op types
  std::map<std::string, std::set<std::string>> deny_ops;   // backend -> never these op types
  size_t min_region_size = 1;  // smaller regions go back to the host
  // Graphs with symbolic dims: representative shapes of inputs (name -> full shape),
  // representativeGraph()'s hints.
  std::map<std::string, std::vector<int64_t>> shape_hints;
  // Give shape-polymorphic regions probe shapes (Region::probes) to check layouts at.
  bool layout_probes = true;
  // Backend::setFloatPrecision: "fp32" or "bf16" (CompileOptions::precision).
  std::string float_precision = "fp32";
  // Offer nodes with symbolic dims to the backends (shape-polymorphic regions). Off for
  // the bodies of Loop and Scan, whose shapes may change on every iteration.
  bool shape_polymorphic = true;
};

struct RegionSummary {
  std::string backend;
  size_t module = 0, function = 0;
  std::vector<std::string> ops;    // op types in order ("domain.Op" outside the default domain)
  std::vector<std::string> nodes;  // node names in order
  // The region's partita.Call node carries both lists as strings attributes "ops" and
  // "nodes", so an artifact records its partition.
  // A shape-polymorphic region: its inputs' representative shapes ("1x3x224x224"),
  // also the Call node's strings attribute "representative". Empty otherwise.
  std::vector<std::string> representative;
};

struct PartitionResult {
  std::vector<backend::ModuleImage> modules;  // index = the Call nodes' "module" attribute
  std::vector<RegionSummary> regions;
};

// Rewrites `g` in place. Throws Error(kInvalidArgument) for an unknown backend name,
// and Error(kUnsupported) before any backend compiles when a node left on the host has
// no host kernel (an infer-only op no enabled backend took), naming the op, its nodes
// and each backend's reason: the one host-kernel check of the compiler.
PartitionResult partitionGraph(ir::Graph& g, const PartitionOptions& options);

}  // namespace partita::backend
