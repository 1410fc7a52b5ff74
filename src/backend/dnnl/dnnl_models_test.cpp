// The dnnl backend on ONNX models: the ONNX backend test cases of the ops it takes
// (compared with their reference outputs, with ONNX's tolerances) and the fashion
// demo CNN (compared with PyTorch's logits), each run with --backends dnnl,host.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <regex>

#include "backend/dnnl/dnnl_claims.h"
#include "backend/dnnl/dnnl_testing.h"
#include "partita/npy.h"
#include "frontend/onnx/onnx_importer.h"
#include "partita/error.h"
#include "passes/pipeline.h"

namespace partita::dnnl_backend {
namespace {

namespace fs = std::filesystem;

const char* const kNodeCases = "/usr/share/libonnx-testdata/data/node";

std::vector<ir::OwnedTensor> readSet(const fs::path& dir, const char* prefix) {
  std::vector<ir::OwnedTensor> out;
  for (int i = 0;; ++i) {
    fs::path p = dir / (std::string(prefix) + std::to_string(i) + ".pb");
    if (!fs::exists(p)) break;
    out.push_back(frontend::readTensorProtoFile(p.string()));
  }
  return out;
}

struct CaseOutcome {
  bool ran_on_dnnl = false;
  std::string failure;  // empty: passed
};

CaseOutcome runCase(const fs::path& dir) {
  CaseOutcome o;
  ir::Graph g;
  try {
    g = frontend::importOnnx((dir / "model.onnx").string());
    passes::optimize(g);
  } catch (const Error&) {
    return o;  // not importable here: not this backend's business
  }
  // PARTITA_DNNL_LIST_HOST_CASES=1 prints why each node stays on the host.
  if (std::getenv("PARTITA_DNNL_LIST_HOST_CASES"))
    for (const ir::Node& n : g.nodes) {
      std::string why;
      if (!supportsNode(g, n, &why))
        std::printf("  %s %s: %s\n", dir.filename().c_str(), n.op_type.c_str(), why.c_str());
    }
  testing::Compiled c = testing::compile(std::move(g), {"dnnl", "host"});
  o.ran_on_dnnl = testing::dnnlRegions(c) > 0;
  if (!o.ran_on_dnnl) return o;
  fs::path set = dir / "test_data_set_0";
  std::vector<ir::OwnedTensor> inputs = readSet(set, "input_"), want = readSet(set, "output_");
  std::vector<ir::OwnedTensor> got;
  try {
    got = c.run(inputs);
  } catch (const Error& e) {
    o.failure = e.what();
    return o;
  }
  if (got.size() != want.size()) {
    o.failure = "output count";
    return o;
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i].dtype() != ir::DType::kFloat32) continue;  // outputs the host computed
    double worst = testing::closeness(got[i], want[i], 1e-3, 1e-7);
    if (!(worst <= 1.0))
      o.failure = "output " + std::to_string(i) + " off by " + std::to_string(worst) + "x tolerance";
  }
  return o;
}

TEST(DnnlConformance, NodeCasesOfClaimedOps) {
  if (!fs::exists(kNodeCases)) GTEST_SKIP() << "no ONNX test data at " << kNodeCases;
  const char* const kOps[] = {"conv",
                              "convtranspose",
                              "maxpool",
                              "averagepool",
                              "globalaveragepool",
                              "globalmaxpool",
                              "gemm",
                              "matmul",
                              "relu",
                              "leakyrelu",
                              "elu",
                              "selu",
                              "sigmoid",
                              "hardsigmoid",
                              "hardswish",
                              "tanh",
                              "abs",
                              "sqrt",
                              "exp",
                              "log",
                              "softplus",
                              "neg",
                              "clip",
                              "round",
                              "pow",
                              "softmax",
                              "logsoftmax",
                              "layer_normalization",
                              "batchnorm",
                              "add",
                              "sub",
                              "mul",
                              "div",
                              "max",
                              "min",
                              "concat",
                              "prelu",
                              "flatten",
                              "reshape",
                              "squeeze",
                              "unsqueeze",
                              "identity",
                              "dropout",
                              "transpose",
                              "slice",
                              "reduce_mean",
                              "reduce_sum",
                              "reduce_max",
                              "reduce_min",
                              "reduce_prod",
                              "reduce_l1",
                              "reduce_l2",
                              "reduce_sum_square"};
  std::string alternatives;
  for (const char* op : kOps) alternatives += (alternatives.empty() ? "" : "|") + std::string(op);
  const std::regex ops("test_(" + alternatives + ")(_.*)?");
  std::vector<fs::path> cases;
  for (const auto& e : fs::directory_iterator(kNodeCases))
    if (std::regex_match(e.path().filename().string(), ops)) cases.push_back(e.path());
  std::sort(cases.begin(), cases.end());
  size_t on_dnnl = 0;
  std::vector<std::string> failures;
  for (const fs::path& dir : cases) {
    CaseOutcome o = runCase(dir);
    on_dnnl += o.ran_on_dnnl;
    if (!o.ran_on_dnnl && std::getenv("PARTITA_DNNL_LIST_HOST_CASES"))
      std::printf("host only: %s\n", dir.filename().string().c_str());
    if (!o.failure.empty()) failures.push_back(dir.filename().string() + ": " + o.failure);
  }
  std::string all;
  for (const auto& f : failures) all += "\n  " + f;
  EXPECT_TRUE(failures.empty()) << failures.size() << " case(s) failed with dnnl,host:" << all;
  // Most float cases of these ops must actually run on oneDNN.
  EXPECT_GE(on_dnnl, 150u) << "of " << cases.size() << " cases";
}

TEST(DnnlModels, FashionCnnMatchesPyTorch) {
  const fs::path dir = fs::path(PARTITA_SOURCE_DIR) / "models" / "fashion";
  if (!fs::exists(dir / "fashion_cnn.onnx")) GTEST_SKIP();
  ir::OwnedTensor images = readNpy((dir / "test_images.npy").string());
  ir::OwnedTensor want = readNpy((dir / "expected_logits.npy").string());
  ir::Graph g = frontend::importOnnx((dir / "fashion_cnn.onnx").string());
  passes::optimize(g);
  testing::Compiled dnnl = testing::compile(std::move(g), {"dnnl", "host"});
  EXPECT_EQ(testing::dnnlRegions(dnnl), 1u);
  std::vector<ir::OwnedTensor> inputs;
  inputs.push_back(images);
  std::vector<ir::OwnedTensor> got = dnnl.run(inputs);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_LE(testing::closeness(got[0], want, 1e-4, 1e-4), 1.0);
}

}  // namespace
}  // namespace partita::dnnl_backend
