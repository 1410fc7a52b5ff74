#include "api/module_kinds.h"
#include "compiler/artifact_writer.h"
#include "compiler/partition.h"

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compiler/artifact_testing.h"
#include "runtime/artifact_reader.h"
#include "partita/error.h"
#include "runtime/graph_executor.h"

namespace partita::artifact {
namespace {

namespace fs = std::filesystem;
using testing::mlpGraph;

// A fresh directory per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "partita-artifact-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  std::vector<std::string> list() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(path_)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  fs::path path_;
};

std::vector<char> readAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<ir::OwnedTensor> runGraph(std::shared_ptr<const ir::Graph> g, std::shared_ptr<const runtime::ConstStore> s,
                                      const ir::Tensor& x) {
  runtime::GraphExecutor exec(std::move(g), std::move(s));
  auto state = exec.newRunState();
  return exec.run(*state, {x});
}

TEST(ArtifactWriter, RoundTripsGraphAndConstantsZeroCopy) {
  TempDir dir;
  ir::Graph g = mlpGraph(64, 96, 32);
  LinkReport report = writeArtifact(g, dir / "m.pta");
  Artifact a = openArtifact(dir / "m.pta");

  EXPECT_EQ(a.graph->str(), g.str());
  EXPECT_EQ(a.producer, "partita 0.1.0");
  ASSERT_EQ(a.modules.size(), 1u);
  EXPECT_EQ(a.modules[0].kind, "host.graph");
  EXPECT_EQ(a.modules[0].section, kNoSection);
  ASSERT_EQ(a.constants.size(), 4u);
  const auto* begin = a.file.data;
  for (const ir::Constant& c : g.constants.all()) {
    const ir::Tensor& t = a.store->get(c.id);
    EXPECT_EQ(t.dtype, c.dtype);
    EXPECT_EQ(t.shape, c.shape);
    ASSERT_EQ(t.nbytes(), c.nbytes());
    EXPECT_EQ(std::memcmp(t.data, c.bytes.data, c.nbytes()), 0) << c.name;
    // Zero copy: the view points into the mapped file, aligned.
    auto* p = static_cast<const std::byte*>(t.data);
    EXPECT_GE(p, begin);
    EXPECT_LE(p + t.nbytes(), begin + a.file.size);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << c.name;
    const ConstantEntry* e = a.findConstant(c.id);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->name, c.name);
    EXPECT_EQ(e->consumers, std::vector<uint32_t>{0});
    EXPECT_EQ(e->hash, hashBytes(c.bytes.data, c.nbytes()));
  }
  EXPECT_EQ(byteAccounting(a), report);
  EXPECT_NO_THROW(verifyWeights(a));
}

TEST(ArtifactWriter, RunsLikeTheSourceGraph) {
  TempDir dir;
  ir::Graph g = mlpGraph(16, 24, 8);
  writeArtifact(g, dir / "m.pta");
  Artifact a = openArtifact(dir / "m.pta");
  std::vector<float> xs = testing::randomFloats(2 * 16, 7);
  ir::Tensor x{ir::DType::kFloat32, {2, 16}, xs.data()};
  auto pool_store = std::make_shared<runtime::ConstStore>(runtime::ConstStore::fromPool(g.constants));
  auto want = runGraph(std::make_shared<ir::Graph>(g), pool_store, x);
  auto got = runGraph(a.graph, a.store, x);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].shape(), (std::vector<int64_t>{2, 8}));
  EXPECT_EQ(std::memcmp(got[0].data(), want[0].data(), want[0].nbytes()), 0);
}

TEST(ArtifactWriter, AccountingAddsUp) {
  TempDir dir;
  LinkReport r = writeArtifact(mlpGraph(40, 50, 30), dir / "m.pta");
  EXPECT_EQ(r.file_bytes, fs::file_size(dir / "m.pta"));
  EXPECT_EQ(r.file_bytes, r.metadata_bytes + r.module_bytes + r.distinct_weight_bytes + r.padding_bytes);
  EXPECT_EQ(r.weight_section_bytes, r.distinct_weight_bytes + r.weight_padding_bytes);
  EXPECT_EQ(r.weight_bytes, uint64_t(40 * 50 + 50 + 50 * 30 + 30) * 4);
  EXPECT_EQ(r.distinct_weight_bytes, r.weight_bytes);
  EXPECT_EQ(r.constants, 4u);
  EXPECT_EQ(r.distinct_constants, 4u);
  EXPECT_LT(r.weight_padding_bytes, 4u * 64);
}

// Tied weights: W2 repeats W1's bytes. The file holds them once, and is smaller than
// an untied model (W2 differing in one byte) by exactly the repeated tensor.
TEST(ArtifactWriter, StoresRepeatedTensorsOnce) {
  TempDir dir;
  ir::Graph tied = mlpGraph(64, 64, 64, /*tied=*/true);
  ir::Graph untied = mlpGraph(64, 64, 64, /*tied=*/true);
  {  // same names, same sizes, one byte different
    ir::Constant& w2 = untied.constants.get(2);
    std::vector<std::byte> bytes(w2.bytes.data, w2.bytes.data + w2.bytes.size);
    bytes[0] ^= std::byte{1};
    w2.bytes = Bytes::fromVector(std::move(bytes));
  }
  LinkReport rt = writeArtifact(tied, dir / "tied.pta");
  LinkReport ru = writeArtifact(untied, dir / "untied.pta");
  const uint64_t w = 64 * 64 * 4;
  EXPECT_EQ(rt.weight_bytes, ru.weight_bytes);
  EXPECT_EQ(rt.weight_bytes - rt.distinct_weight_bytes, w);
  EXPECT_EQ(ru.weight_bytes, ru.distinct_weight_bytes);
  EXPECT_EQ(rt.distinct_constants + 1, rt.constants);
  EXPECT_EQ(fs::file_size(dir / "untied.pta") - fs::file_size(dir / "tied.pta"), w);

  Artifact a = openArtifact(dir / "tied.pta");
  EXPECT_EQ(a.findConstant(0)->offset, a.findConstant(2)->offset);
  EXPECT_EQ(a.store->get(0).data, a.store->get(2).data);
  EXPECT_EQ(a.findConstant(2)->name, "W2");
}

TEST(ArtifactWriter, DropsConstantsNothingUses) {
  TempDir dir;
  ir::Graph g = mlpGraph(8, 8, 8);
  ir::ConstId unused = testing::addFloats(g, "unused", {256}, testing::randomFloats(256, 9));
  g.addConstantValue("unused", unused);  // a value nobody reads
  LinkReport r = writeArtifact(g, dir / "m.pta");
  EXPECT_EQ(r.constants, 4u);
  Artifact a = openArtifact(dir / "m.pta");
  EXPECT_EQ(a.findConstant(unused), nullptr);
  EXPECT_FALSE(a.store->has(unused));
  EXPECT_EQ(r.weight_bytes, uint64_t(8 * 8 * 2 + 8 * 2) * 4);
}

TEST(ArtifactWriter, PageAlignsLargeTensorsAndFillsTheGaps) {
  TempDir dir;
  ir::Graph g;
  std::vector<ir::ValueId> outs;
  // small, big (1 MiB exactly), small, big, small: bigs first, the smalls into the gap
  // page alignment left after the first big one.
  const int64_t sizes[] = {100, 262144, 50, 290000, 16};  // c3 leaves a 3,264-byte gap
  for (int i = 0; i < 5; ++i) {
    std::string name = "c" + std::to_string(i);
    ir::ConstId id = testing::addFloats(g, name, {sizes[i]}, testing::randomFloats(size_t(sizes[i]), 20 + i));
    outs.push_back(g.addConstantValue(name, id));
  }
  g.outputs = outs;
  LinkReport r = writeArtifact(g, dir / "m.pta");
  Artifact a = openArtifact(dir / "m.pta");
  for (const ConstantEntry& c : a.constants) {
    EXPECT_EQ(c.offset % tensorAlignment(c.nbytes), 0u) << c.name;
    if (c.nbytes >= (1 << 20)) {
      EXPECT_EQ(c.offset % 4096, 0u) << c.name;
    }
  }
  // The larger big tensor (c3) comes first; c0, c2 and c4 fill the gap before c1.
  EXPECT_LT(a.findConstant(3)->offset, a.findConstant(1)->offset);
  for (ir::ConstId small : {0u, 2u, 4u}) EXPECT_LT(a.findConstant(small)->offset, a.findConstant(1)->offset);
  EXPECT_EQ(r.weight_section_bytes, r.distinct_weight_bytes + r.weight_padding_bytes);
  EXPECT_LT(r.weight_padding_bytes, 4096u);
  EXPECT_EQ(byteAccounting(a), r);
}

TEST(ArtifactWriter, EmptyTensorsShareOneEmptyPlace) {
  TempDir dir;
  ir::Graph g;
  ir::ConstId e0 = g.constants.add("e0", ir::DType::kFloat32, {0}, Bytes{});
  ir::ConstId e1 = g.constants.add("e1", ir::DType::kInt64, {0, 3}, Bytes{});
  ir::ConstId c = testing::addFloats(g, "c", {3}, {1, 2, 3});
  g.outputs = {g.addConstantValue("e0", e0), g.addConstantValue("e1", e1), g.addConstantValue("c", c)};
  LinkReport r = writeArtifact(g, dir / "m.pta");
  EXPECT_EQ(r.constants, 3u);
  EXPECT_EQ(r.distinct_constants, 2u);
  EXPECT_EQ(r.distinct_weight_bytes, 12u);
  Artifact a = openArtifact(dir / "m.pta", {.verify_weights = true});
  EXPECT_EQ(a.store->get(e1).shape, (std::vector<int64_t>{0, 3}));
  EXPECT_EQ(a.store->get(e1).dtype, ir::DType::kInt64);
  EXPECT_EQ(a.store->get(c).as<float>()[2], 3.0f);
  EXPECT_EQ(byteAccounting(a), r);
}

TEST(ArtifactWriter, IsDeterministic) {
  TempDir dir;
  writeArtifact(mlpGraph(33, 17, 5, false, 3), dir / "a.pta");
  writeArtifact(mlpGraph(33, 17, 5, false, 3), dir / "b.pta");
  std::vector<char> a = readAll(dir / "a.pta"), b = readAll(dir / "b.pta");
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, b);
}

TEST(ArtifactWriter, KeepsModulesDerivedLayoutsAndEmbeddedConstants) {
  TempDir dir;
  ir::Graph g = mlpGraph(16, 16, 16);
  // A backend's derived re-layout of W1 and a constant only its blob holds.
  std::vector<float> blocked = testing::randomFloats(16 * 16, 1);
  ir::ConstId derived = g.constants.add("W1.blocked", ir::DType::kFloat32, {16, 16},
                                        Bytes::copyOf(blocked.data(), blocked.size() * 4), "AB16b16a");
  ir::ConstId embedded = testing::addFloats(g, "lut", {32}, testing::randomFloats(32, 5));
  std::string code = "vendor code";
  backend::ModuleImage mod{"test.vendor",
                           {reinterpret_cast<const std::byte*>(code.data()),
                            reinterpret_cast<const std::byte*>(code.data()) + code.size()},
                           {{embedded, UseKind::kEmbed, ir::kNoConst},
                            {1, UseKind::kBorrow, ir::kNoConst},
                            {derived, UseKind::kDerive, 0}},
                           0,
                           {}};
  LinkReport r = writeArtifact(g, {mod}, dir / "m.pta");
  EXPECT_EQ(r.module_bytes, code.size());
  EXPECT_EQ(r.embedded_bytes, 32u * 4);
  // W1 and its derived copy have the same bytes but not the same layout: both stored.
  EXPECT_EQ(r.distinct_constants, 5u);

  Artifact a = openArtifact(dir / "m.pta");
  ASSERT_EQ(a.modules.size(), 2u);  // external modules first, the graph executor last
  EXPECT_EQ(a.modules[0].kind, "test.vendor");
  EXPECT_EQ(a.modules[0].section, 1u);
  EXPECT_EQ(a.modules[1].kind, "host.graph");
  EXPECT_EQ(a.modules[0].uses, (std::vector<ConstUse>{{1, UseKind::kBorrow, ir::kNoConst},
                                                       {derived, UseKind::kDerive, 0},
                                                       {embedded, UseKind::kEmbed, ir::kNoConst}}));
  Bytes blob = a.moduleBlob(0);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(blob.data), blob.size), code);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(blob.data) % 64, 0u);
  EXPECT_EQ(a.findConstant(derived)->layout, "AB16b16a");
  EXPECT_EQ(a.store->layout(derived), "AB16b16a");
  EXPECT_EQ(a.findConstant(0)->consumers, std::vector<uint32_t>{1});
  EXPECT_EQ(a.findConstant(1)->consumers, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(a.findConstant(derived)->consumers, std::vector<uint32_t>{0});
  EXPECT_EQ(a.findConstant(embedded)->storage, Storage::kEmbedded);
  EXPECT_FALSE(a.store->has(embedded));
  EXPECT_EQ(byteAccounting(a), r);
}

// A graph whose middle runs in an external module: the module borrows its constant
// from the artifact's store by ID (zero copy) and runs through a partita.Call node.
TEST(ArtifactWriter, ExternalModuleRunsFromTheArtifact) {
  TempDir dir;
  ir::Graph g;
  auto f32 = ir::TensorType::of(ir::DType::kFloat32, {4});
  ir::ValueId x = g.addValue("x", f32);
  g.inputs = {x};
  ir::ConstId c = testing::addFloats(g, "c", {4}, {10, 20, 30, 40});
  ir::ValueId h = testing::addNode(g, "Relu", "relu", {x}, f32);
  ir::ValueId y = g.addValue("y", f32);
  ir::Node call;
  call.domain = runtime::kCallDomain;
  call.op_type = runtime::kCallOp;
  call.name = "call0";
  call.inputs = {h};
  call.outputs = {y};
  call.attrs.setInt("module", 0);
  call.attrs.setInt("function", 0);
  g.addNode(std::move(call));
  g.outputs = {y};
  writeArtifact(g, {testing::addConstImage(c)}, dir / "m.pta");

  Artifact a = openArtifact(dir / "m.pta");
  EXPECT_EQ(a.findConstant(c)->consumers, std::vector<uint32_t>{0});  // only the module uses it
  runtime::GraphExecutor exec(a.graph, a.store, loadModules(a, testing::addConstModuleKinds()));
  auto state = exec.newRunState();
  float xs[4] = {-1, 2, -3, 4};
  auto out = exec.run(*state, {ir::Tensor{ir::DType::kFloat32, {4}, xs}});
  EXPECT_EQ(std::vector<float>(out[0].as<float>(), out[0].as<float>() + 4), (std::vector<float>{10, 22, 30, 44}));

  ir::Graph bad = g;
  bad.nodes[1].attrs.setInt("function", 3);
  EXPECT_THROW(writeArtifact(bad, {testing::addConstImage(c)}, dir / "bad.pta"), Error);
}

TEST(ArtifactWriter, RejectsAModuleUsingAMissingConstant) {
  TempDir dir;
  backend::ModuleImage mod{"test.vendor", {}, {{99, UseKind::kBorrow, ir::kNoConst}}, 0, {}};
  try {
    writeArtifact(mlpGraph(4, 4, 4), {mod}, dir / "m.pta");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInternal);
    EXPECT_NE(std::string(e.what()).find("constant 99 which nobody provides"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(dir.list().empty());
}

// A failing link leaves no file and does not touch an existing artifact.
// Host kernels are checked once, after partitioning and before anything is written.
TEST(ArtifactWriter, UnsupportedOpIsRefusedBeforeLinking) {
  ir::Graph g = mlpGraph(8, 8, 8);
  g.nodes[2].op_type = "NoSuchOp";
  try {
    backend::partitionGraph(g, backend::PartitionOptions{});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_EQ(std::string(e.what()),
              "no host kernel for NoSuchOp (node 'relu'), and no external backend is enabled (see --backends)");
  }
}

// RLIMIT_FSIZE stands in for a full disk: writes past it fail with EFBIG (SIGXFSZ ignored).
TEST(ArtifactWriter, DiskFullLeavesExistingArtifactAlone) {
  TempDir dir;
  writeArtifact(mlpGraph(8, 8, 8), dir / "m.pta");
  std::vector<char> before = readAll(dir / "m.pta");
  ir::Graph big = mlpGraph(512, 512, 512);  // ~2 MB of weights

  struct rlimit old {};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = 64 * 1024;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  bool threw = false;
  std::string message;
  try {
    writeArtifact(big, dir / "m.pta");
  } catch (const Error& e) {
    threw = e.code() == ErrorCode::kIo;
    message = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_TRUE(threw);
  EXPECT_NE(message.find("cannot write '" + (dir / "m.pta") + "': File too large"), std::string::npos) << message;
  EXPECT_EQ(readAll(dir / "m.pta"), before);
  EXPECT_EQ(dir.list(), std::vector<std::string>{"m.pta"});
}

// A writer killed mid-write (here by SIGXFSZ, at a deterministic point) leaves
// neither a partial artifact nor a temporary file, and the old artifact intact.
TEST(ArtifactWriter, KilledWriterLeavesNothingBehind) {
  TempDir dir;
  writeArtifact(mlpGraph(8, 8, 8), dir / "m.pta");
  std::vector<char> before = readAll(dir / "m.pta");
  ir::Graph big = mlpGraph(512, 512, 512);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::signal(SIGXFSZ, SIG_DFL);
    struct rlimit small {};
    getrlimit(RLIMIT_FSIZE, &small);
    small.rlim_cur = 256 * 1024;
    setrlimit(RLIMIT_FSIZE, &small);
    try {
      writeArtifact(big, dir / "m.pta");
    } catch (...) {
    }
    _exit(0);  // not reached: SIGXFSZ kills the process
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGXFSZ);
  EXPECT_EQ(readAll(dir / "m.pta"), before);
  EXPECT_EQ(dir.list(), std::vector<std::string>{"m.pta"});
}

TEST(ArtifactWriter, ReplacesAnExistingArtifact) {
  TempDir dir;
  writeArtifact(mlpGraph(8, 8, 8), dir / "m.pta");
  LinkReport r = writeArtifact(mlpGraph(16, 8, 8), dir / "m.pta");
  EXPECT_EQ(fs::file_size(dir / "m.pta"), r.file_bytes);
  EXPECT_EQ(openArtifact(dir / "m.pta").graph->typeOf(0).str(), "float32[2,16]");
  EXPECT_EQ(dir.list(), std::vector<std::string>{"m.pta"});
}

TEST(ArtifactWriter, ReportsAnUnwritableDirectory) {
  try {
    writeArtifact(mlpGraph(4, 4, 4), "/nonexistent-dir/m.pta");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
    EXPECT_NE(std::string(e.what()).find("/nonexistent-dir"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace partita::artifact
