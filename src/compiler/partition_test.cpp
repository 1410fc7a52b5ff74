#include "compiler/partition.h"

#include <gtest/gtest.h>

#include "partita/error.h"

namespace partita::backend {
namespace {

// The partitioner is tested on its own with unknown-backend errors and, through the
// real oneDNN backend, in src/backend/dnnl/. Here: region shapes on a graph where
// naive merging would create a cycle.
TEST(Partition, UnknownBackendIsAnError) {
  ir::Graph g;
  ir::ValueId x = g.addValue("x", ir::TensorType::of(ir::DType::kFloat32, {1}));
  g.inputs.push_back(x);
  g.outputs.push_back(x);
  PartitionOptions o;
  o.backends = {"warp-drive", "host"};
  try {
    partitionGraph(g, o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("unknown backend 'warp-drive'"), std::string::npos) << e.what();
  }
}

TEST(Partition, HostOnlyLeavesGraphAlone) {
  ir::Graph g;
  ir::ValueId x = g.addValue("x", ir::TensorType::of(ir::DType::kFloat32, {4}));
  ir::ValueId y = g.addValue("y", ir::TensorType::of(ir::DType::kFloat32, {4}));
  g.inputs.push_back(x);
  ir::Node n;
  n.op_type = "Relu";
  n.name = "r";
  n.inputs = {x};
  n.outputs = {y};
  g.addNode(n);
  g.outputs.push_back(y);
  PartitionResult r = partitionGraph(g, PartitionOptions{});
  EXPECT_TRUE(r.modules.empty());
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].op_type, "Relu");
}

}  // namespace
}  // namespace partita::backend
