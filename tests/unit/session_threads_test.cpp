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
  [[maybe_unused]] const kernels::KernelThreadsForTSan one_team_per_run;
  const std::string onnx = PARTITA_SOURCE_DIR "/models/fashion/fashion_cnn.onnx";
  const std::string pta = (std::filesystem::temp_directory_path() /
                           ("partita_threads_" + std::to_string(::getpid()) + ".pta")).string();
  ir::Graph g = frontend::importOnnx(onnx);
  passes::optimize(g);
  artifact::writeArtifact(g, pta);
  std::shared_ptr<const Model> model = Model::load(pta);
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

}  // namespace
}  // namespace partita
