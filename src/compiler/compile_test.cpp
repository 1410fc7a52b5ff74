// `partita compile` and `partita inspect` end to end, through the command line:
// deterministic output, a failing compile that leaves nothing behind, inspect's
// report (including the partition and its Graphviz form), and a corrupted artifact
// rejected with a clear message.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "compiler/artifact_testing.h"
#include "runtime/artifact_reader.h"
#include "compiler/artifact_writer.h"
#include "frontend/onnx/onnx_importer.h"
#include "compiler/compile.h"
#include "passes/pipeline.h"
#include "runtime/graph_executor.h"

namespace {

namespace fs = std::filesystem;

const std::string kDemo = PARTITA_SOURCE_DIR "/models/fashion/fashion_cnn.onnx";

struct Result {
  int exit_code = -1;
  std::string output;  // stdout + stderr
};

std::string cliPath() {
  const char* cli = std::getenv("PARTITA_CLI");
  return cli ? cli : PARTITA_BINARY_DIR "/bin/partita";
}

// The runtime-only runner, built next to the CLI.
std::string runtimeRunnerPath() { return (fs::path(cliPath()).parent_path() / "partita-run").string(); }

Result runProgram(const std::string& exe, const std::string& args) {
  std::string cmd = exe + " " + args + " 2>&1";
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) r.output.append(buf, n);
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

Result runCli(const std::string& args) { return runProgram(cliPath(), args); }

std::string readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class ArtifactCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("partita_artifact_cli_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::vector<std::string> list() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  fs::path dir_;
};

TEST_F(ArtifactCli, CompilingTwiceGivesIdenticalFiles) {
  Result a = runCli("compile " + kDemo + " -o " + path("a.pta"));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_NE(a.output.find("wrote " + path("a.pta")), std::string::npos) << a.output;
  Result b = runCli("compile " + kDemo + " -o " + path("b.pta") + " --quiet");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_EQ(b.output, "");
  std::string fa = readAll(path("a.pta")), fb = readAll(path("b.pta"));
  ASSERT_GT(fa.size(), 800000u);
  EXPECT_TRUE(fa == fb) << "the two compiles differ";
}

// An unsupported op: exit 1 with a message naming it; no artifact written, the
// existing one untouched, no temporary left.
TEST_F(ArtifactCli, FailingCompileLeavesNothingBehind) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("g");
  for (const char* name : {"x", "y"}) {
    onnx::ValueInfoProto* vi = std::string(name) == "x" ? g->add_input() : g->add_output();
    vi->set_name(name);
    onnx::TypeProto::Tensor* t = vi->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    t->mutable_shape()->add_dim()->set_dim_value(4);
  }
  onnx::NodeProto* n = g->add_node();
  n->set_op_type("NoSuchOp");
  n->set_name("mystery");
  n->add_input("x");
  n->add_output("y");
  std::ofstream(path("bad.onnx"), std::ios::binary) << m.SerializeAsString();

  ASSERT_EQ(runCli("compile " + kDemo + " -o " + path("model.pta") + " -q").exit_code, 0);
  std::string before = readAll(path("model.pta"));
  Result r = runCli("compile " + path("bad.onnx") + " -o " + path("model.pta"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(r.output.rfind("error: ", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("NoSuchOp"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("mystery"), std::string::npos) << r.output;
  EXPECT_TRUE(readAll(path("model.pta")) == before);
  EXPECT_EQ(list(), (std::vector<std::string>{"bad.onnx", "model.pta"}));

  Result fresh = runCli("compile " + path("bad.onnx") + " -o " + path("fresh.pta"));
  EXPECT_EQ(fresh.exit_code, 1);
  EXPECT_FALSE(fs::exists(path("fresh.pta")));
}

TEST_F(ArtifactCli, InspectPrintsTablesAndAccounting) {
  ASSERT_EQ(runCli("compile " + kDemo + " -o " + path("m.pta") + " -q").exit_code, 0);
  Result r = runCli("inspect " + path("m.pta") + " --verify");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* needle :
       {"format version 2", "manifest", "weights", "host.graph", "borrow:10", "fc1.weight", "float32  [128,1568]",
        "file / distinct weights", "distinct weights", "padding", "metadata", "planned activations",
        "private growth budget", "weights verified"})
    EXPECT_NE(r.output.find(needle), std::string::npos) << "missing '" << needle << "' in:\n" << r.output;
}

TEST_F(ArtifactCli, InspectRejectsACorruptedArtifact) {
  ASSERT_EQ(runCli("compile " + kDemo + " -o " + path("m.pta") + " -q").exit_code, 0);
  std::string bytes = readAll(path("m.pta"));
  bytes[200] ^= 0x40;  // inside the manifest
  std::ofstream(path("bad.pta"), std::ios::binary) << bytes;
  Result r = runCli("inspect " + path("bad.pta"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(r.output, "error: invalid artifact '" + path("bad.pta") +
                          "': section 0 (manifest) checksum mismatch: the file is corrupted\n");

  std::string weights = readAll(path("m.pta"));
  weights[weights.size() - 100] ^= 0x01;  // inside the last tensor
  std::ofstream(path("w.pta"), std::ios::binary) << weights;
  EXPECT_EQ(runCli("inspect " + path("w.pta")).exit_code, 0);
  Result v = runCli("inspect " + path("w.pta") + " --verify");
  EXPECT_EQ(v.exit_code, 1);
  EXPECT_NE(v.output.find("error: invalid artifact '" + path("w.pta") + "': the weights of constant "), std::string::npos)
      << v.output;
  EXPECT_NE(v.output.find("') are corrupted (checksum mismatch)"), std::string::npos)
      << v.output;
}

// The partition block: one line per executor unit, consecutive host nodes collapsed.
TEST_F(ArtifactCli, InspectShowsHostOnlyPartition) {
  ASSERT_EQ(runCli("compile " + kDemo + " -o " + path("m.pta") + " -q").exit_code, 0);
  Result r = runCli("inspect " + path("m.pta"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\npartition: host only (12 nodes)\nconstants"), std::string::npos) << r.output;
}

#if PARTITA_HAVE_DNNL
TEST_F(ArtifactCli, InspectShowsTheDnnlPartition) {
  ASSERT_EQ(runCli("compile " + kDemo + " -o " + path("m.pta") + " -q --backends dnnl,host").exit_code, 0);
  Result r = runCli("inspect " + path("m.pta"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\npartition: 1 region on dnnl (12 nodes), 0 host nodes\n"
                          "  dnnl_region_0_0  dnnl  12 nodes: Relu x3, Conv x2, MaxPool x2, Gemm x2, Sub, "
                          "Div, Flatten\nconstants"),
            std::string::npos)
      << r.output;
}

// `compile --threads` tunes oneDNN's layouts for a thread count; the runtime-only
// partita-run gives the same outputs as partita run, and refuses what it cannot read.
TEST_F(ArtifactCli, RuntimeOnlyRunnerMatchesTheCli) {
  const std::string images = PARTITA_SOURCE_DIR "/models/fashion/test_images.npy";
  for (const char* threads : {"1", "2"}) {
    const std::string pta = path(std::string("m") + threads + ".pta");
    Result c = runCli("compile " + kDemo + " -o " + pta + " -q --backends dnnl,host --threads " + threads);
    ASSERT_EQ(c.exit_code, 0) << c.output;
    const std::string run_args = pta + " -i input=" + images + " -q -t " + threads + " -o ";
    Result a = runCli("run " + run_args + path(std::string("cli") + threads));
    ASSERT_EQ(a.exit_code, 0) << a.output;
    Result b = runProgram(runtimeRunnerPath(), run_args + path(std::string("rt") + threads));
    ASSERT_EQ(b.exit_code, 0) << b.output;
    const std::string out_a = readAll(path(std::string("cli") + threads) + "/logits.npy");
    ASSERT_GT(out_a.size(), 4000u);
    EXPECT_TRUE(out_a == readAll(path(std::string("rt") + threads) + "/logits.npy")) << threads << " threads";
  }
  Result pb = runProgram(runtimeRunnerPath(), path("m1.pta") + " -i input=x.pb");
  EXPECT_EQ(pb.exit_code, 1);
  EXPECT_NE(pb.output.find("partita-run reads .npy inputs"), std::string::npos) << pb.output;
  Result onnx = runProgram(runtimeRunnerPath(), kDemo);
  EXPECT_EQ(onnx.exit_code, 1);
  EXPECT_NE(onnx.output.find("error: "), std::string::npos) << onnx.output;
}

TEST_F(ArtifactCli, InspectShowsRegionsBetweenHostNodes) {
  const std::string flags = " -q --backends dnnl,host --deny dnnl=MaxPool,Flatten";
  ASSERT_EQ(runCli("compile " + kDemo + " -o " + path("m.pta") + flags).exit_code, 0);
  Result r = runCli("inspect " + path("m.pta"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\npartition: 3 regions on dnnl (9 nodes), 3 host nodes\n"
                          "  dnnl_region_0_0  dnnl  4 nodes: Sub, Div, Conv, Relu\n"
                          "  host                   1 node: MaxPool '/MaxPool'\n"
                          "  dnnl_region_0_1  dnnl  2 nodes: Conv, Relu\n"
                          "  host                   2 nodes: MaxPool '/MaxPool_1', Flatten '/Flatten'\n"
                          "  dnnl_region_0_2  dnnl  3 nodes: Gemm x2, Relu\n"),
            std::string::npos)
      << r.output;
}

TEST_F(ArtifactCli, InspectWritesThePartitionAsGraphviz) {
  const std::string flags = " -q --backends dnnl,host --deny dnnl=MaxPool,Flatten";
  ASSERT_EQ(runCli("compile " + kDemo + " -o " + path("m.pta") + flags).exit_code, 0);
  Result r = runCli("inspect " + path("m.pta") + " --dot " + path("m.dot"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("wrote " + path("m.dot")), std::string::npos) << r.output;
  std::string dot = readAll(path("m.dot"));
  EXPECT_EQ(dot.rfind("digraph partition {\n", 0), 0u) << dot;
  EXPECT_EQ(dot.substr(dot.size() - 2), "}\n");
  for (const char* needle :
       {"label=\"dnnl_region_0_1\\n2 nodes\\nConv, Relu\"", "fillcolor=\"#8dd3c7\"", "fillcolor=\"#d9d9d9\"",
        "label=\"MaxPool\\n/MaxPool\"", "in0 [shape=ellipse, label=\"input\\nfloat32[100,1,28,28]\"]",
        "shape=ellipse, label=\"logits\\nfloat32[100,10]\"", "-> out0", "subgraph cluster_legend",
        "label=\"dnnl\"", "label=\"host\""})
    EXPECT_NE(dot.find(needle), std::string::npos) << "missing '" << needle << "' in:\n" << dot;
  EXPECT_EQ(list(), (std::vector<std::string>{"m.dot", "m.pta"}));  // no temporary left
}

#endif

// Node and value names reach the labels with their quotes and backslashes escaped.
TEST_F(ArtifactCli, InspectDotEscapesNames) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("g");
  for (const char* name : {"x\"in", "y"}) {
    onnx::ValueInfoProto* vi = std::string(name) == "y" ? g->add_output() : g->add_input();
    vi->set_name(name);
    onnx::TypeProto::Tensor* t = vi->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    t->mutable_shape()->add_dim()->set_dim_value(4);
  }
  onnx::NodeProto* n = g->add_node();
  n->set_op_type("Relu");
  n->set_name("say \"hi\" \\o/");
  n->add_input("x\"in");
  n->add_output("y");
  std::ofstream(path("q.onnx"), std::ios::binary) << m.SerializeAsString();
  ASSERT_EQ(runCli("compile " + path("q.onnx") + " -o " + path("q.pta") + " -q").exit_code, 0);
  Result r = runCli("inspect " + path("q.pta") + " --dot " + path("q.dot"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("partition: host only (1 node)\n"), std::string::npos) << r.output;
  std::string dot = readAll(path("q.dot"));
  EXPECT_NE(dot.find(R"(n0 [shape=box, style=filled, fillcolor="#d9d9d9", label="Relu\nsay \"hi\" \\o/"];)"),
            std::string::npos)
      << dot;
  EXPECT_NE(dot.find(R"(in0 [shape=ellipse, label="x\"in\nfloat32[4]"];)"), std::string::npos) << dot;
}

TEST_F(ArtifactCli, InspectDotToAnUnwritablePathFails) {
  ASSERT_EQ(runCli("compile " + kDemo + " -o " + path("m.pta") + " -q").exit_code, 0);
  const std::string dot = path("no-such-dir/m.dot");
  Result r = runCli("inspect " + path("m.pta") + " --dot " + dot);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(r.output.rfind("error: cannot write '" + dot + "'", 0), 0u) << r.output;
  EXPECT_FALSE(fs::exists(dot));
  EXPECT_EQ(list(), (std::vector<std::string>{"m.pta"}));
}

// An ONNX model with tied weights (two initializers with the same bytes, as an
// encoder/decoder pair often has) links to a file smaller than the untied model by
// exactly the repeated tensor.
onnx::ModelProto twoLayerModel(bool tied) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("tied");
  for (const char* name : {"x", "y"}) {
    onnx::ValueInfoProto* vi = std::string(name) == "x" ? g->add_input() : g->add_output();
    vi->set_name(name);
    onnx::TypeProto::Tensor* t = vi->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    t->mutable_shape()->add_dim()->set_dim_value(2);
    t->mutable_shape()->add_dim()->set_dim_value(64);
  }
  std::vector<float> w = partita::artifact::testing::randomFloats(64 * 64, 3);
  for (const char* name : {"enc.weight", "dec.weight"}) {
    onnx::TensorProto* init = g->add_initializer();
    init->set_name(name);
    init->set_data_type(onnx::TensorProto::FLOAT);
    init->add_dims(64);
    init->add_dims(64);
    if (!tied && std::string(name) == "dec.weight") w[17] += 1.0f;
    init->set_raw_data(w.data(), w.size() * sizeof(float));
  }
  const char* io[2][3] = {{"x", "enc.weight", "h"}, {"h", "dec.weight", "y"}};
  for (auto& n : io) {
    onnx::NodeProto* node = g->add_node();
    node->set_op_type("MatMul");
    node->set_name(std::string("mm_") + n[2]);
    node->add_input(n[0]);
    node->add_input(n[1]);
    node->add_output(n[2]);
  }
  return m;
}

using ArtifactCompile = ArtifactCli;  // same temporary-directory fixture

TEST_F(ArtifactCompile, TiedOnnxWeightsAreStoredOnce) {
  using namespace partita;
  uint64_t sizes[2] = {};
  artifact::LinkReport reports[2];
  for (int tied = 0; tied < 2; ++tied) {
    std::string onnx = path(tied ? "tied.onnx" : "untied.onnx");
    std::ofstream(onnx, std::ios::binary) << twoLayerModel(tied).SerializeAsString();
    ir::Graph g = frontend::importOnnx(onnx);
    passes::optimize(g);
    reports[tied] = artifact::writeArtifact(g, onnx + ".pta");
    sizes[tied] = fs::file_size(onnx + ".pta");
  }
  const uint64_t w = 64 * 64 * 4;
  EXPECT_EQ(reports[0].weight_bytes, 2 * w);
  EXPECT_EQ(reports[0].distinct_weight_bytes, 2 * w);
  EXPECT_EQ(reports[1].weight_bytes, 2 * w);
  EXPECT_EQ(reports[1].distinct_weight_bytes, w);
  EXPECT_EQ(sizes[0] - sizes[1], w);

  artifact::Artifact a = artifact::openArtifact(path("tied.onnx.pta"));
  ASSERT_EQ(a.constants.size(), 2u);
  EXPECT_EQ(a.constants[0].offset, a.constants[1].offset);
  EXPECT_NE(a.constants[0].name, a.constants[1].name);
}

#if PARTITA_HAVE_DNNL
// What the partitioner records on each Call node survives the artifact round trip.
TEST_F(ArtifactCompile, CallNodesRecordTheirRegions) {
  using namespace partita;
  CompileOptions options;
  options.backends = {"dnnl", "host"};
  options.deny_ops["dnnl"] = {"MaxPool"};
  CompiledGraph c = compileGraph(kDemo, options);
  ASSERT_EQ(c.parts.regions.size(), 3u);
  artifact::writeArtifact(c.graph, c.parts.modules, path("m.pta"));
  artifact::Artifact a = artifact::openArtifact(path("m.pta"));
  size_t calls = 0;
  for (const ir::Node& n : a.graph->nodes) {
    if (n.op_type != runtime::kCallOp) continue;
    const backend::RegionSummary& s = c.parts.regions.at(calls++);
    EXPECT_EQ(n.attrs.getStrings("ops"), s.ops) << n.name;
    EXPECT_EQ(n.attrs.getStrings("nodes"), s.nodes) << n.name;
  }
  EXPECT_EQ(calls, 3u);
  EXPECT_EQ(c.parts.regions[1].ops, (std::vector<std::string>{"Conv", "Relu"}));
  EXPECT_EQ(c.parts.regions[1].nodes, (std::vector<std::string>{"/conv2/Conv", "/Relu_1"}));
}
#endif

}  // namespace
