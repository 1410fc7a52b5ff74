// Many sessions on one loaded model share its weights and run concurrently.
// Labelled "threads" in CTest (by name) so `make tsan` runs it under ThreadSanitizer.
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "compiler/artifact_writer.h"
#include "kernels/op_util.h"
#include "partita/npy.h"
#include "frontend/onnx/onnx_importer.h"
#include "partita/model.h"
#include "passes/pipeline.h"

namespace partita {
namespace {

TEST(SessionThreads, ConcurrentSessionsShareOneModel) {
  const std::string onnx = PARTITA_SOURCE_DIR "/models/fashion/fashion_cnn.onnx";
  const std::string pta = (std::filesystem::temp_directory_path() /
                           ("partita_threads_" + std::to_string(::getpid()) + ".pta")).string();
  ir::Graph g = frontend::importOnnx(onnx);
  passes::optimize(g);
  artifact::writeArtifact(g, pta);
  std::shared_ptr<const Model> model = Model::load(pta, {kernels::threadsUnlessTSan(2)});
  Tensor images = readNpy(PARTITA_SOURCE_DIR "/models/fashion/test_images.npy");

  // Reference from one session, then four threads each with its own session.
  Session ref(model);
  ref.setInput("input", images);
  ref.run();
  const Tensor expected = ref.outputs().at(0);

  constexpr int kThreads = 4;
  std::vector<int> mismatches(kThreads, -1);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      Session s(model);
      s.setInput("input", images);
      int bad = 0;
      for (int i = 0; i < 3; ++i) {
        s.run();
        const Tensor& out = s.outputs().at(0);
        bad += out.nbytes() != expected.nbytes() || std::memcmp(out.data(), expected.data(), out.nbytes()) != 0;
      }
      mismatches[size_t(t)] = bad;
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(mismatches[size_t(t)], 0) << "thread " << t;
  std::filesystem::remove(pta);
}

// Thread counts belong to a model, not the process: a model loaded for 1 thread and
// one loaded for 2, run at the same time from two threads, each give what they give
// alone.
TEST(SessionThreads, TwoModelsAtDifferentThreadCounts) {
  const std::string onnx = PARTITA_SOURCE_DIR "/models/fashion/fashion_cnn.onnx";
  const std::string pta = (std::filesystem::temp_directory_path() /
                           ("partita_threads2_" + std::to_string(::getpid()) + ".pta")).string();
  ir::Graph g = frontend::importOnnx(onnx);
  passes::optimize(g);
  artifact::writeArtifact(g, pta);
  std::shared_ptr<const Model> one = Model::load(pta, {1});
  std::shared_ptr<const Model> two = Model::load(pta, {kernels::threadsUnlessTSan(2)});
  EXPECT_EQ(one->threads(), 1);
  Tensor images = readNpy(PARTITA_SOURCE_DIR "/models/fashion/test_images.npy");

  auto alone = [&](const std::shared_ptr<const Model>& m) {
    Session s(m);
    s.setInput("input", images);
    s.run();
    return s.outputs().at(0);
  };
  const Tensor want_one = alone(one), want_two = alone(two);
  int bad_one = 0, bad_two = 0;
  auto loop = [&](const std::shared_ptr<const Model>& m, const Tensor& want, int& bad) {
    Session s(m);
    s.setInput("input", images);
    for (int i = 0; i < 3; ++i) {
      s.run();
      const Tensor& out = s.outputs().at(0);
      bad += out.nbytes() != want.nbytes() || std::memcmp(out.data(), want.data(), out.nbytes()) != 0;
    }
  };
  std::thread a(loop, one, std::cref(want_one), std::ref(bad_one));
  std::thread b(loop, two, std::cref(want_two), std::ref(bad_two));
  a.join();
  b.join();
  EXPECT_EQ(bad_one, 0);
  EXPECT_EQ(bad_two, 0);
  for (int bad : {0, 1025}) {
    try {
      Model::load(pta, {bad});
      ADD_FAILURE() << "threads " << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_EQ(std::string(e.what()), "threads must be between 1 and 1024, not " + std::to_string(bad));
    }
  }
  std::filesystem::remove(pta);
}

// docs/threads.md: which OpenMP runtime serves the kernels and how its idle threads wait.
TEST(SessionThreads, ThreadRuntimeInfoNamesTheRuntimeAndTheWait) {
  const ThreadRuntimeInfo info = threadRuntimeInfo();
#if defined(PARTITA_OPENMP_LLVM)
  EXPECT_EQ(info.openmp_runtime.rfind("libomp", 0), 0u) << info.openmp_runtime;
#else
  EXPECT_EQ(info.openmp_runtime.rfind("libgomp", 0), 0u) << info.openmp_runtime;
#endif
  const std::string& p = info.wait_policy;
  EXPECT_TRUE(p == "adaptive" || p == "adaptive-team" || p == "spin" || p == "block" || p.rfind("runtime default (", 0) == 0) << p;
#if defined(PARTITA_HAVE_DNNL)
  // This binary links libdnnl: one runtime serves both (tests/CMakeLists.txt checks the
  // mixed case, oneDNN on libgomp, through the CLI).
  EXPECT_EQ(info.dnnl_openmp_runtime, info.openmp_runtime);
#endif
}

}  // namespace
}  // namespace partita
