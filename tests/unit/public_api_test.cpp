// The public API the Python package stands on (include/partita/), through the public
// headers only: compile to an artifact and from bytes, load from bytes, the facts of
// inspect, and a Session's outputs handed over without a copy.
#include <cstring>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "base/temp_dir_testing.h"
#include "partita/compiler.h"
#include "partita/inspect.h"
#include "partita/model.h"
#include "partita/npy.h"

namespace partita {
namespace {

const std::string kDemo = PARTITA_SOURCE_DIR "/models/fashion/fashion_cnn.onnx";

std::string readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Tensor runOnce(const std::shared_ptr<const Model>& model, const Tensor& images) {
  Session s(model);
  s.setInput("input", images);
  s.run();
  return s.outputs().at(0);
}

bool sameBytes(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

TEST(PublicApi, CompileToArtifactReportsWhatInspectFinds) {
  testing::TempDir dir;
  CompileOptions options;
  options.backends = {"dnnl", "host"};
  const CompileReport report = compileToArtifact(kDemo, dir.path("m.pta"), options);
  const ArtifactInfo info = inspectArtifact(dir.path("m.pta"), {.verify_weights = true});
  EXPECT_EQ(report.bytes, info.bytes);
  EXPECT_EQ(info.bytes.file_bytes, readAll(dir.path("m.pta")).size());
  ASSERT_EQ(report.modules.size(), 1u);
  EXPECT_EQ(report.modules[0].kind, "dnnl");
  ASSERT_EQ(info.modules.size(), 2u);
  EXPECT_EQ(info.modules[0].kind, "dnnl");
  EXPECT_EQ(info.modules[0].uses.size(), report.modules[0].constant_uses);
  EXPECT_EQ(info.modules[1].kind, "host.graph");
  ASSERT_EQ(info.partition.size(), 1u);
  EXPECT_EQ(info.partition[0].backend, "dnnl");
  EXPECT_EQ(info.partition[0].ops.size(), 12u);
  EXPECT_TRUE(info.memory.planned);
  EXPECT_EQ(inspectDot(dir.path("m.pta")).rfind("digraph partition {\n", 0), 0u);
  // A target the writer refuses (here the model itself) is refused, and left as it was.
  const std::string copy = dir.write("copy.onnx", readAll(kDemo));
  EXPECT_THROW(compileToArtifact(copy, copy, options), Error);
  EXPECT_EQ(readAll(copy), readAll(kDemo));
}

TEST(PublicApi, BytesCompileAndLoadLikeFiles) {
  testing::TempDir dir;
  const Tensor images = readNpy(PARTITA_SOURCE_DIR "/models/fashion/test_images.npy");
  const std::string onnx = readAll(kDemo);
  const Tensor from_file = runOnce(compileOnnx(kDemo), images);
  EXPECT_TRUE(sameBytes(runOnce(compileOnnxBytes(onnx.data(), onnx.size(), "m.onnx"), images), from_file));

  compileBytesToArtifact(onnx.data(), onnx.size(), "m.onnx", dir.path("m.pta"));
  std::string pta = readAll(dir.path("m.pta"));
  EXPECT_TRUE(hasArtifactSignature(pta.data(), pta.size()));
  EXPECT_FALSE(hasArtifactSignature(onnx.data(), onnx.size()));
  std::shared_ptr<const Model> model = Model::loadBytes(pta.data(), pta.size(), "m.pta");
  std::fill(pta.begin(), pta.end(), '\0');  // the model holds its own copy
  EXPECT_TRUE(sameBytes(runOnce(model, images), runOnce(Model::load(dir.path("m.pta")), images)));
  EXPECT_TRUE(model->backends().empty());
  try {
    Model::loadBytes(pta.data(), pta.size(), "zeros.pta");
    FAIL() << "zeros loaded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArtifact);
    EXPECT_NE(std::string(e.what()).find("zeros.pta"), std::string::npos) << e.what();
  }
}

TEST(PublicApi, TakeOutputsHandsThemOverAndClearInputsForgets) {
  CompileOptions options;
  options.backends = {"dnnl", "host"};
  std::shared_ptr<const Model> model = compileOnnx(kDemo, options);
  EXPECT_EQ(model->backends(), std::vector<std::string>{"dnnl"});
  const Tensor images = readNpy(PARTITA_SOURCE_DIR "/models/fashion/test_images.npy");
  Session s(model);
  s.setInput("input", images);
  s.run();
  const void* data = s.outputs().at(0).data();
  std::vector<Tensor> taken = s.takeOutputs();
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].data(), data);  // moved, not copied
  EXPECT_TRUE(s.outputs().empty());
  EXPECT_THROW(s.output("logits"), Error);
  s.clearInputs();
  try {
    s.run();
    FAIL() << "ran without its input";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "input 'input' was not set");
  }
}

// A session's next run writes its outputs into the last run's tensors (same dtype and
// shape: no allocation), with the new run's values; after takeOutputs() it makes new
// ones and leaves the taken ones alone.
TEST(PublicApi, RunsReuseTheirOutputTensors) {
  std::shared_ptr<const Model> model = compileOnnx(kDemo, CompileOptions{});
  const Tensor images = readNpy(PARTITA_SOURCE_DIR "/models/fashion/test_images.npy");
  Tensor other = images;
  for (int64_t i = 0; i < other.numel(); ++i) other.as<float>()[i] = 1.0f - images.as<float>()[i];
  const Tensor want = runOnce(model, images), want_other = runOnce(model, other);
  ASSERT_FALSE(sameBytes(want, want_other));
  Session s(model);
  s.setInput("input", images);
  s.run();
  const void* data = s.outputs().at(0).data();
  s.setInput("input", other);
  s.run();
  EXPECT_EQ(s.outputs().at(0).data(), data);
  EXPECT_TRUE(sameBytes(s.outputs().at(0), want_other));
  std::vector<Tensor> taken = s.takeOutputs();
  s.setInput("input", images);
  s.run();
  EXPECT_NE(s.outputs().at(0).data(), taken.at(0).data());
  EXPECT_TRUE(sameBytes(s.outputs().at(0), want));
  EXPECT_TRUE(sameBytes(taken.at(0), want_other));
}

TEST(PublicApi, BackendsAndDtypeNames) {
  const std::vector<std::string> backends = availableBackends();
  ASSERT_FALSE(backends.empty());
  EXPECT_EQ(backends[0], "host");
  EXPECT_EQ(dtypeName(DType::kFloat16), "float16");
  EXPECT_EQ(dtypeName(DType::kBool), "bool");
  EXPECT_EQ(dtypeName(static_cast<DType>(200)), "invalid");
}

}  // namespace
}  // namespace partita
