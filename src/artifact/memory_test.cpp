// Promise 2 (DESIGN.md), measured: loading an artifact and running it once grows the
// process's private (anonymous) memory by no more than the planned activations plus
// 5 % of the weight bytes -- the weights stay in the file's page cache, shared.
// Also the file-size promise on real models: file bytes / distinct weight bytes <= 1.01.
#include <malloc.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <unistd.h>

#include "artifact/artifact_testing.h"
#include "artifact/reader.h"
#include "artifact/writer.h"
#include "frontend/onnx/onnx_importer.h"
#include "passes/pipeline.h"
#include "runtime/graph_executor.h"

namespace partita::artifact {
namespace {

namespace fs = std::filesystem;

// Anonymous (private, not file-backed) memory of this process, from smaps_rollup.
uint64_t anonymousBytes() {
  std::ifstream in("/proc/self/smaps_rollup");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Anonymous:", 0) != 0) continue;
    std::istringstream fields(line.substr(10));
    uint64_t kb = 0;
    fields >> kb;
    return kb * 1024;
  }
  ADD_FAILURE() << "no Anonymous: line in /proc/self/smaps_rollup";
  return 0;
}

std::vector<ir::OwnedTensor> zeroInputs(const ir::Graph& g) {
  std::vector<ir::OwnedTensor> inputs;
  for (ir::ValueId v : g.inputs) {
    inputs.emplace_back(g.typeOf(v).dtype, g.typeOf(v).staticShape());
    std::memset(inputs.back().data(), 0, inputs.back().nbytes());
  }
  return inputs;
}

std::vector<ir::Tensor> views(const std::vector<ir::OwnedTensor>& ts) {
  std::vector<ir::Tensor> v;
  for (const auto& t : ts) v.push_back(t.view());
  return v;
}

struct Growth {
  uint64_t anonymous = 0;  // growth over open + executor + first run
  uint64_t activations = 0;
  uint64_t weights = 0;
  uint64_t budget() const { return activations + weights / 20; }
};

// Warms up the kernels' libraries on the source graph (OpenBLAS buffers and OpenMP
// threads are per process, not per model), then measures opening `path` and one run.
Growth measure(const ir::Graph& source, const std::string& path, std::vector<ir::OwnedTensor>* outputs) {
  // A fixed mmap threshold: big blocks (arenas, kernel scratch) go back to the system
  // when freed, instead of glibc raising the threshold and keeping them in its heap.
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  std::vector<ir::OwnedTensor> inputs = zeroInputs(source);
  {
    auto store = std::make_shared<runtime::ConstStore>(runtime::ConstStore::fromPool(source.constants));
    runtime::GraphExecutor warm(std::make_shared<ir::Graph>(source), store);
    auto state = warm.newRunState();
    warm.run(*state, views(inputs));
  }
  Growth g;
  uint64_t before = anonymousBytes();
  {
    Artifact a = openArtifact(path);
    runtime::GraphExecutor exec(a.graph, a.store);
    auto state = exec.newRunState();
    *outputs = exec.run(*state, views(inputs));
    uint64_t after = anonymousBytes();
    g.anonymous = after > before ? after - before : 0;
    g.activations = exec.plannedActivationBytes();
    g.weights = byteAccounting(a).weight_bytes;
  }
  return g;
}

std::string tempPath(const std::string& name) {
  return (fs::temp_directory_path() / ("partita-mem-" + std::to_string(getpid()) + "-" + name)).string();
}

// Under ASan/TSan the allocator keeps freed blocks in a quarantine and adds shadow
// memory, so private-memory growth measures the sanitizer, not partita. The demo and
// ResNet-18 budgets leave little slack; they run in the normal build only.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif

TEST(ArtifactMemory, LoadAndFirstRunAddOnlyActivations) {
  ir::Graph g = testing::mlpGraph(1024, 2048, 1024, false, 4);  // 16 MiB of weights
  std::string path = tempPath("mlp.pta");
  writeArtifact(g, path);
  std::vector<ir::OwnedTensor> out;
  Growth growth = measure(g, path, &out);
  fs::remove(path);
  EXPECT_LE(growth.anonymous, growth.budget())
      << "anonymous growth " << growth.anonymous << " > activations " << growth.activations << " + 5% of "
      << growth.weights;
  std::printf("[ mlp ] weights %llu, activations %llu, anonymous growth %llu\n",
              (unsigned long long)growth.weights, (unsigned long long)growth.activations,
              (unsigned long long)growth.anonymous);
}

// A real model: compiled, linked, loaded and run; the same outputs as running the
// compiled graph directly, the file-size ratio and the memory bound.
void checkModel(const std::string& onnx, double max_ratio) {
  ir::Graph g = frontend::importOnnx(onnx);
  passes::optimize(g);
  std::string path = tempPath(fs::path(onnx).stem().string() + ".pta");
  LinkReport r = writeArtifact(g, path);
  std::vector<ir::OwnedTensor> got;
  Growth growth = measure(g, path, &got);
  fs::remove(path);

  std::printf("[ %s ] file %llu, distinct weights %llu (ratio %.5f), padding %llu, metadata %llu; "
              "activations %llu, anonymous growth %llu (budget %llu)\n",
              fs::path(onnx).stem().c_str(), (unsigned long long)r.file_bytes,
              (unsigned long long)r.distinct_weight_bytes, r.overheadRatio(), (unsigned long long)r.padding_bytes,
              (unsigned long long)r.metadata_bytes, (unsigned long long)growth.activations,
              (unsigned long long)growth.anonymous, (unsigned long long)growth.budget());
  EXPECT_LE(r.overheadRatio(), max_ratio);
  EXPECT_LE(growth.anonymous, growth.budget());

  auto store = std::make_shared<runtime::ConstStore>(runtime::ConstStore::fromPool(g.constants));
  runtime::GraphExecutor direct(std::make_shared<ir::Graph>(g), store);
  auto state = direct.newRunState();
  std::vector<ir::OwnedTensor> inputs = zeroInputs(g);
  std::vector<ir::OwnedTensor> want = direct.run(*state, views(inputs));
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].nbytes(), want[i].nbytes());
    EXPECT_EQ(std::memcmp(got[i].data(), want[i].data(), want[i].nbytes()), 0) << "output " << i;
  }
}

TEST(ArtifactMemory, DemoModel) {
  if (kSanitized) GTEST_SKIP() << "memory figures are not meaningful under a sanitizer";
  checkModel(std::string(PARTITA_SOURCE_DIR) + "/models/fashion/fashion_cnn.onnx", 1.01); }

// ResNet-18 (random weights) from scripts/export_models.py, exported on first use into
// <build>/models-artifact-test (its own folder: other tests export into <build>/models
// concurrently).
TEST(ArtifactMemory, ResNet18) {
  if (kSanitized) GTEST_SKIP() << "memory figures are not meaningful under a sanitizer";
  std::string dir = std::string(PARTITA_BINARY_DIR) + "/models-artifact-test";
  std::string onnx = dir + "/resnet18.onnx";
  if (!fs::exists(onnx)) {
    std::string cmd = "/usr/bin/python3 " PARTITA_SOURCE_DIR "/scripts/export_models.py --out " + dir +
                      " --models resnet18 > /dev/null";
    if (std::system(cmd.c_str()) != 0 || !fs::exists(onnx)) GTEST_SKIP() << "could not export ResNet-18: " << cmd;
  }
  checkModel(onnx, 1.01);
}

}  // namespace
}  // namespace partita::artifact
