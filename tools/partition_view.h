// The partition an artifact records, as `partita inspect` shows it: the executor
// graph's units in execution order (each partita.Call node, each run of consecutive
// host nodes) as text, and the whole executor graph as Graphviz. What a Call node
// replaced comes from its "ops" and "nodes" attributes (written by the partitioner).
#pragma once

#include <string>
#include <vector>

#include "runtime/artifact_reader.h"

namespace partita::cli {

struct PartitionUnit {
  std::string name;                // the Call node's name, or "host" for a run of host nodes
  std::string backend;             // the called module's kind, or "host"
  std::vector<std::string> ops;    // op types ("domain.Op" outside the default domain)
  std::vector<std::string> nodes;  // node names, parallel to ops
  bool recorded = true;            // false: a Call node without the lists (an older artifact)
  // A shape-polymorphic region (some value it reads or makes has symbolic dims): its
  // inputs ("x float32[batch,3,h,w]") and the shapes its module was compiled for first
  // (the Call node's "representative" attribute).
  bool polymorphic = false;
  std::vector<std::string> inputs, representative;
};

// The units of `a.graph` in execution order.
std::vector<PartitionUnit> partitionUnits(const artifact::Artifact& a);

// "partition: 1 region on dnnl (49 nodes), 2 host nodes" and one line per unit (a
// shape-polymorphic region with a second line: its symbolic inputs and
// representative shapes), or "partition: host only (N nodes)".
std::string partitionText(const std::vector<PartitionUnit>& units);

// A Graphviz digraph of the executor graph: graph inputs and outputs as ellipses,
// host nodes and Call nodes as boxes filled with their backend's colour, a legend,
// one edge per value read (labelled with its type when the rank is known).
std::string partitionDot(const artifact::Artifact& a);

// Writes `text` to `path` all at once or not at all; Error(kIo) "cannot write ...".
void writeTextFile(const std::string& path, const std::string& text);

}  // namespace partita::cli
