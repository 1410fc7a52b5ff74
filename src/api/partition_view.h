// The partition an artifact records, as `partita inspect` shows it: the executor
// graph's units in execution order (each partita.Call node, each run of consecutive
// host nodes), as data and as text, and the whole executor graph as Graphviz. What a
// Call node replaced comes from its "ops" and "nodes" attributes (written by the
// partitioner).
#pragma once

#include <string>
#include <vector>

#include "partita/inspect.h"
#include "runtime/artifact_reader.h"

namespace partita::api {

using PartitionUnit = ArtifactInfo::Region;

// The units of `a.graph` (or of `g`, one of its subgraphs) in execution order.
std::vector<PartitionUnit> partitionUnits(const artifact::Artifact& a);
std::vector<PartitionUnit> partitionUnits(const artifact::Artifact& a, const ir::Graph& g);

// Every subgraph of `a.graph`, depth first: its path, partition and constants.
std::vector<ArtifactInfo::Subgraph> subgraphsOf(const artifact::Artifact& a);
// "subgraphs: 2" and per subgraph its path, counts, partition line and constant IDs;
// "" when there are none.
std::string subgraphText(const std::vector<ArtifactInfo::Subgraph>& subgraphs);

// "partition: 1 region on dnnl (49 nodes), 2 host nodes" and one line per unit (a
// shape-polymorphic region with a second line: its symbolic inputs and
// representative shapes), or "partition: host only (N nodes)".
std::string partitionText(const std::vector<PartitionUnit>& units);

// A Graphviz digraph of the executor graph: graph inputs and outputs as ellipses,
// host nodes and Call nodes as boxes filled with their backend's colour, a legend,
// one edge per value read (labelled with its type when the rank is known).
std::string partitionDot(const artifact::Artifact& a);

}  // namespace partita::api
