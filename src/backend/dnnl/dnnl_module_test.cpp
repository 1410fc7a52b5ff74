// The dnnl runtime module: zero-copy constants (the memory handles are the store's
// pointers, read-only mappings work, nothing executes at load), load-time checks
// (malformed blobs, undeclared constants, layouts that do not fit) and concurrent runs.
#include "api/module_kinds.h"
#include "backend/dnnl/dnnl_kernels.h"
#include "backend/dnnl/dnnl_module.h"

#include <gtest/gtest.h>
#include <omp.h>
#include <sys/mman.h>

#include <cstring>
#include <functional>
#include <map>
#include <thread>

#include "backend/dnnl/dnnl_memory_desc.h"
#include "compiler/partition.h"
#include "backend/dnnl/dnnl_primitive.h"
#include "backend/dnnl/dnnl_testing.h"
#include "kernels/op_util.h"
#include "partita/error.h"
#include "runtime/team_wait.h"

namespace partita::dnnl_backend {
namespace {

using testing::Compiled;
using testing::GraphBuilder;
using testing::randomFloats;

// conv(3x3, 16->32) + relu, maxpool, 1x1 conv (20 outputs: padded in blocked layouts),
// global pool, flatten, gemm with 1000 outputs: a small classifier in one region.
GraphBuilder smallNet() {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 16, 12, 12});
  ir::AttributeMap pads;
  pads.setInts("pads", {1, 1, 1, 1});
  ir::ValueId c = b.node("Relu", {b.node("Conv",
                                         {x, b.constant("w1", {32, 16, 3, 3}, randomFloats(32 * 16 * 9, 1)),
                                          b.constant("b1", {32}, randomFloats(32, 2))},
                                         pads)});
  ir::AttributeMap pool;
  pool.setInts("kernel_shape", {2, 2});
  pool.setInts("strides", {2, 2});
  ir::ValueId p = b.node("MaxPool", {c}, pool);
  ir::ValueId c2 = b.node("Conv", {p, b.constant("w2", {20, 32, 1, 1}, randomFloats(20 * 32, 3))});
  ir::AttributeMap flat;
  flat.setInt("axis", 1);
  ir::ValueId f = b.node("Flatten", {b.node("GlobalAveragePool", {c2})}, flat);
  ir::AttributeMap gemm;
  gemm.setInt("transB", 1);
  b.output(b.node("Gemm",
                  {f, b.constant("fc", {1000, 20}, randomFloats(20000, 4)),
                   b.constant("fb", {1000}, randomFloats(1000, 5))},
                  gemm));
  return b;
}

const DnnlModule& moduleOf(const Compiled& c) { return dynamic_cast<const DnnlModule&>(*c.modules.at(0)); }

// Reloads module 0 of `c` from `blob` and `uses` over `store`.
std::shared_ptr<runtime::RuntimeModule> reload(const Compiled& c, std::vector<std::byte> blob,
                                               const runtime::ConstStore& store,
                                               std::vector<runtime::ConstUse> uses = {}) {
  if (uses.empty()) uses = c.parts.modules.at(0).uses;
  runtime::ModuleLoadContext ctx{Bytes::fromVector(std::move(blob)), &store, uses, 2, {}};
  return api::builtinModuleKinds().load("dnnl", ctx);
}

std::string loadError(const Compiled& c, std::vector<std::byte> blob, const runtime::ConstStore& store,
                      std::vector<runtime::ConstUse> uses = {},
                      ErrorCode want = ErrorCode::kInvalidArtifact) {
  try {
    reload(c, std::move(blob), store, std::move(uses));
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), want) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "load succeeded";
  return {};
}

TEST(DnnlModule, ConstantsAreTheStoresBytes) {
  Compiled c = testing::compile(smallNet().g, {"dnnl", "host"});
  ASSERT_EQ(c.modules.size(), 1u);
  const auto handles = moduleOf(c).constantHandles();
  ASSERT_FALSE(handles.empty());
  size_t derived = 0;
  for (const auto& [id, handle] : handles) {
    EXPECT_EQ(handle, c.store->get(id).data) << "constant " << id;
    derived += !c.store->layout(id).empty();
  }
  EXPECT_GE(derived, 3u);  // both convs and the fully connected layer
  // Every derived constant declared as such, with its source.
  for (const auto& u : c.parts.modules[0].uses)
    if (u.kind == runtime::ConstUseKind::kDerive) {
      EXPECT_NE(u.source, ir::kNoConst);
      EXPECT_FALSE(c.graph->constants.get(u.id).layout.empty());
    }
}

// A module's own workspace (the dnnl module's temporaries, sized as its blob says) is
// held to the session's TensorLimits::max_bytes as any value is: an executor whose
// limit lies between the graph's values and the module's workspace is refused, naming
// the module; at the default limit the same modules run.
TEST(DnnlModule, AWorkspaceOverTheLimitIsRefused) {
  Compiled c = testing::compile(smallNet().g, {"dnnl", "host"});
  ASSERT_EQ(c.modules.size(), 1u);
  const size_t workspace = c.modules[0]->scratchpadBytes();
  uint64_t largest_value = 0;  // of the values the executor holds: inputs and what its nodes make
  auto widen = [&](ir::ValueId v) {
    const ir::TensorType& t = c.graph->typeOf(v);
    largest_value = std::max<uint64_t>(largest_value, uint64_t(t.numel()) * ir::dtypeSize(t.dtype));
  };
  for (ir::ValueId v : c.graph->inputs) widen(v);
  for (const ir::Node& n : c.graph->nodes)
    for (ir::ValueId v : n.outputs) widen(v);
  ASSERT_LT(largest_value, workspace) << "the test needs a workspace larger than every value";
  runtime::RunOptions small;
  small.limits.max_bytes = workspace - 1;
  try {
    runtime::GraphExecutor exec(c.graph, c.store, c.modules, small);
    FAIL() << "a workspace over the limit was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidModel);
    EXPECT_NE(std::string(e.what()).find("module 0 (dnnl): its workspace of " + std::to_string(workspace) +
                                         " bytes is over the limit"),
              std::string::npos)
        << e.what();
  }
  small.limits.max_bytes = workspace;
  EXPECT_NO_THROW(runtime::GraphExecutor(c.graph, c.store, c.modules, small));
}

// Weights behind a read-only mapping (as in a mapped artifact): load and run must
// neither write nor copy them.
TEST(DnnlModule, RunsOverReadOnlyMappedConstants) {
  Compiled c = testing::compile(smallNet().g, {"dnnl", "host"});
  size_t total = 0;
  for (const ir::Constant& k : c.graph->constants.all()) total += (k.nbytes() + 4095) / 4096 * 4096;
  void* map = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(map, MAP_FAILED);
  std::shared_ptr<void> owner(map, [total](void* p) { munmap(p, total); });
  runtime::ConstStore store;
  size_t off = 0;
  for (const ir::Constant& k : c.graph->constants.all()) {
    std::memcpy(static_cast<char*>(map) + off, k.bytes.data, k.nbytes());
    store.add(k.id, k.dtype, k.shape, Bytes{owner, static_cast<std::byte*>(map) + off, k.nbytes()}, k.layout);
    off += (k.nbytes() + 4095) / 4096 * 4096;
  }
  ASSERT_EQ(mprotect(map, total, PROT_READ), 0);
  auto m = reload(c, c.parts.modules[0].blob, store);
  const auto& mod = dynamic_cast<const DnnlModule&>(*m);
  for (const auto& [id, handle] : mod.constantHandles()) EXPECT_EQ(handle, store.get(id).data);

  std::vector<ir::OwnedTensor> inputs = testing::randomInputs(*c.graph, 3);
  ir::OwnedTensor out(ir::DType::kFloat32, {1, 1000});
  m->run(0, {inputs[0].view()}, {out.view()});
  std::vector<ir::OwnedTensor> want = c.run(inputs);
  EXPECT_EQ(testing::closeness(out, want[0], 0, 0), 0.0);  // bit-identical to the in-memory store
}

// With oneDNN's verbose mode on, loading prints no execution (no weight reorder);
// a run executes exactly the steps of the function.
TEST(DnnlModule, LoadExecutesNothing) {
  Compiled c = testing::compile(smallNet().g, {"dnnl", "host"});
  runtime::ConstStore store = runtime::ConstStore::fromPool(c.graph->constants);
  dnnl::set_verbose(1);
  ::testing::internal::CaptureStdout();
  auto m = reload(c, c.parts.modules[0].blob, store);
  std::fflush(stdout);
  std::string load_log = ::testing::internal::GetCapturedStdout();
  std::vector<ir::OwnedTensor> inputs = testing::randomInputs(*c.graph, 3);
  ir::OwnedTensor out(ir::DType::kFloat32, {1, 1000});
  ::testing::internal::CaptureStdout();
  m->run(0, {inputs[0].view()}, {out.view()});
  std::fflush(stdout);
  std::string run_log = ::testing::internal::GetCapturedStdout();
  dnnl::set_verbose(0);

  auto count = [](const std::string& log, const std::string& what) {
    size_t n = 0;
    for (size_t at = log.find(what); at != std::string::npos; at = log.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count(load_log, "onednn_verbose,exec"), 0u) << load_log;
  const auto steps = dynamic_cast<const DnnlModule&>(*m).steps(0);
  // Every step but the module's own kernels and loops (the global pool: channel_mean;
  // the max pool: partita:max_pool) is a oneDNN primitive.
  const size_t primitives = size_t(std::count_if(steps.begin(), steps.end(), [](const DnnlModule::StepInfo& s) {
    return s.implementation.rfind("partita:", 0) != 0;
  }));
  EXPECT_LT(primitives, steps.size());
  EXPECT_EQ(count(run_log, "onednn_verbose,exec"), primitives) << run_log;
  size_t reorder_steps = 0;
  for (const auto& s : steps) reorder_steps += s.kind == StepKind::kReorder;
  EXPECT_EQ(count(run_log, "exec,cpu,reorder"), reorder_steps) << run_log;
  EXPECT_EQ(count(run_log, "exec,cpu,convolution"), 2u) << run_log;
}

TEST(DnnlModule, RejectsMalformedBlobs) {
  Compiled c = testing::compile(smallNet().g, {"dnnl", "host"});
  const std::vector<std::byte>& blob = c.parts.modules[0].blob;
  for (size_t cut : {size_t(0), size_t(3), size_t(20), blob.size() / 2, blob.size() - 1}) {
    SCOPED_TRACE(cut);
    std::string msg = loadError(c, std::vector<std::byte>(blob.begin(), blob.begin() + long(cut)), *c.store);
    EXPECT_NE(msg.find("dnnl module blob"), std::string::npos) << msg;
  }
  std::vector<std::byte> bad = blob;
  bad[0] = std::byte{'X'};
  EXPECT_NE(loadError(c, bad, *c.store).find("not a dnnl module blob"), std::string::npos);
  bad = blob;
  bad[4] = std::byte{99};
  EXPECT_NE(loadError(c, bad, *c.store).find("version"), std::string::npos);
}

// Every single-byte corruption of a blob either still loads or is refused with
// partita::Error; nothing else escapes (and nothing crashes, under ASan too).
TEST(DnnlModule, CorruptedBlobsNeverCrashLoad) {
  GraphBuilder b;  // derived conv and matmul weights, a post-op, an embedded scalar
  ir::ValueId x = b.input("x", {1, 4, 5, 5});
  ir::ValueId c = b.node("Relu", {b.node("Conv", {x, b.constant("w", {4, 4, 3, 3}, randomFloats(144, 1))})});
  ir::AttributeMap flat;
  flat.setInt("axis", 1);
  ir::ValueId y =
      b.node("MatMul", {b.node("Flatten", {c}, flat), b.constant("fc", {36, 20}, randomFloats(720, 2))});
  b.output(b.node("Mul", {y, b.constant("k", {}, {0.5f})}));
  Compiled c0 = testing::compile(b.g, {"dnnl", "host"});
  const std::vector<std::byte>& blob = c0.parts.modules.at(0).blob;
  size_t refused = 0;
  for (size_t i = 0; i < blob.size(); ++i) {
    std::vector<std::byte> bad = blob;
    bad[i] ^= std::byte{0xff};
    try {
      reload(c0, bad, *c0.store);
    } catch (const Error&) {
      ++refused;
    }
  }
  EXPECT_GT(refused, blob.size() / 4);
}

TEST(DnnlModule, RejectsUndeclaredOrMislaidConstants) {
  Compiled c = testing::compile(smallNet().g, {"dnnl", "host"});
  const auto& image = c.parts.modules[0];
  // A use the module did not declare.
  std::vector<runtime::ConstUse> fewer(image.uses.begin() + 1, image.uses.end());
  std::string msg = loadError(c, image.blob, *c.store, fewer);
  EXPECT_NE(msg.find("did not declare"), std::string::npos) << msg;
  // A derived constant whose stored layout differs from what the blob reads.
  runtime::ConstStore store;
  for (const ir::Constant& k : c.graph->constants.all())
    store.add(k.id, k.dtype, k.shape, k.bytes, k.layout.empty() ? k.layout : k.layout + "x");
  msg = loadError(c, image.blob, store);
  EXPECT_NE(msg.find("has layout"), std::string::npos) << msg;
}

// A blob whose recorded weight layout is not what oneDNN here picks (its choice
// depends on the CPU and the thread count): load creates the primitive over the
// recorded layout, so the stored weights are used as they are, and the results match.
TEST(DnnlModule, KeepsTheRecordedLayoutWhenThisMachineWouldChooseAnother) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 16, 8, 8});
  const std::vector<float> wdata = randomFloats(16 * 16 * 9, 1);
  b.output(b.node("Conv", {x, b.constant("w", {16, 16, 3, 3}, wdata)}));
  Compiled c = testing::compile(b.g, {"dnnl", "host"});
  const auto& image = c.parts.modules[0];
  Program p = readProgram(image.blob.data(), image.blob.size());
  Arg* w = nullptr;
  for (Step& s : p.functions[0].steps)
    if (s.kind == StepKind::kConvolution) w = s.find(DNNL_ARG_WEIGHTS);
  ASSERT_NE(w, nullptr);
  ASSERT_TRUE(w->chosen);
  memory::desc plain = plainDesc({16, 16, 3, 3});
  ASSERT_FALSE(sameDesc(w->md, plain));
  w->md = plain;  // the layout "another machine" chose; the store holds the plain weights
  runtime::ConstStore store;
  for (const ir::Constant& k : c.graph->constants.all()) {
    if (k.id == ir::ConstId(w->index))
      store.add(k.id, ir::DType::kFloat32, {16, 16, 3, 3}, Bytes::copyOf(wdata.data(), wdata.size() * sizeof(float)));
    else
      store.add(k.id, k.dtype, k.shape, k.bytes, k.layout);
  }
  std::shared_ptr<runtime::RuntimeModule> loaded = reload(c, writeProgram(p), store);
  const auto& mod = dynamic_cast<const DnnlModule&>(*loaded);
  EXPECT_EQ(mod.fallbackSteps(), 1u);
  EXPECT_EQ(moduleOf(c).fallbackSteps(), 0u);

  std::vector<ir::OwnedTensor> in = testing::randomInputs(*c.graph, 7);
  ir::OwnedTensor want(ir::DType::kFloat32, {1, 16, 6, 6}), got(ir::DType::kFloat32, {1, 16, 6, 6});
  moduleOf(c).run(0, {in[0].view()}, {want.view()});
  mod.run(0, {in[0].view()}, {got.view()});
  EXPECT_LE(testing::closeness(got, want), 1.0);
}

// A blob's axis and concat sources are checked before oneDNN sees them: oneDNN 2.6
// does not range-check a concat axis (a fuzzed blob with axis 48127 crashed libdnnl).
TEST(DnnlModule, RefusesConcatAxisAndSourcesThatDoNotFit) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {2, 8});
  ir::ValueId r = b.node("Relu", {x});
  ir::AttributeMap cat;
  cat.setInt("axis", 1);
  b.output(b.node("Relu", {b.node("Concat", {r, b.node("Sigmoid", {x})}, cat)}));
  Compiled c = testing::compile(b.g, {"dnnl", "host"});
  ASSERT_EQ(c.parts.modules.size(), 1u);
  const auto& image = c.parts.modules[0];
  auto edited = [&](auto edit) {
    Program p = readProgram(image.blob.data(), image.blob.size());
    Step* concat = nullptr;
    for (Step& s : p.functions[0].steps)
      if (s.kind == StepKind::kConcat) concat = &s;
    EXPECT_NE(concat, nullptr);
    if (concat) edit(*concat);
    return writeProgram(p);
  };
  EXPECT_NE(loadError(c, edited([](Step& s) { s.axis = 48127; }), *c.store).find("has axis 48127 for rank 2"),
            std::string::npos);
  EXPECT_NE(loadError(c, edited([](Step& s) { s.axis = -1; }), *c.store).find("has axis -1"), std::string::npos);
  EXPECT_NE(loadError(c, edited([](Step& s) { s.find(DNNL_ARG_MULTIPLE_SRC)->md = plainDesc({1, 8}); }),
                      *c.store)
                .find("does not fit"),
            std::string::npos);
  EXPECT_NE(loadError(c, edited([](Step& s) { s.find(DNNL_ARG_MULTIPLE_SRC)->md = plainDesc({2, 7}); }),
                      *c.store)
                .find("do not add up"),
            std::string::npos);
  EXPECT_NE(loadError(c, edited([](Step& s) { s.find(DNNL_ARG_MULTIPLE_SRC + 1)->md = plainDesc({2, 2, 4}); }),
                      *c.store)
                .find("does not fit"),
            std::string::npos);
}

// oneDNN 2.6 builds tables per output position when it makes a convolution, ten times
// larger where padding dominates: a [1, 3, 20, 24] image padded by 5,898,241 on the
// right made it allocate more than 24 GB (the test below, with other bytes flipped,
// found it). Such a convolution stays on the host, and a blob whose convolution step
// pads wider than its kernel is refused by name before oneDNN sees it.
TEST(DnnlModule, AConvolutionWhoseTablesWouldBeHugeStaysOnTheHost) {
  auto net = [](std::vector<int64_t> pads) {
    GraphBuilder b;
    ir::ValueId x = b.input("x", {1, 3, 20, 24});
    ir::AttributeMap a;
    a.setInts("pads", std::move(pads));
    b.output(b.node("Relu", {b.node("Conv", {x, b.constant("w", {8, 3, 3, 3}, randomFloats(8 * 27, 3))}, a)}));
    return std::move(b.g);
  };
  Compiled huge = testing::compile(net({1, 1, 1, 5898241}), {"dnnl", "host"});
  for (const auto& m : huge.parts.modules)
    for (const Function& fn : readProgram(m.blob.data(), m.blob.size()).functions)
      for (const Step& st : fn.steps) EXPECT_NE(st.kind, StepKind::kConvolution);
  Compiled c = testing::compile(net({1, 1, 1, 1}), {"dnnl", "host"});
  ASSERT_EQ(c.parts.modules.size(), 1u);
  const auto& image = c.parts.modules[0];
  Program p = readProgram(image.blob.data(), image.blob.size());
  bool edited = false;
  for (Step& st : p.functions.at(0).steps)
    if (st.kind == StepKind::kConvolution) {
      st.pad_r = {1, 5898241};
      edited = true;
    }
  ASSERT_TRUE(edited);
  EXPECT_NE(loadError(c, writeProgram(p), *c.store).find("padding 1, 5898241 on spatial dim 1 is wider than the "
                                                             "kernel's extent 3"),
            std::string::npos);
}

// Sigmoid then Relu over [2, 8] compiled onto one dnnl module: a blob to edit.
Compiled sigmoidReluOnDnnl() {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {2, 8});
  b.output(b.node("Relu", {b.node("Sigmoid", {x})}));
  return testing::compile(b.g, {"dnnl", "host"});
}

// A descriptor's padding is only what oneDNN's layouts have: each dim rounded up to
// its inner blocks, no padded offsets (a fuzzed blob's plain pooling destination with
// a padded dim of 2^29 + 1 made oneDNN 2.6 run its reference pooling for minutes;
// fuzz/findings/artifact/dnnl_padded_plain_pooling_timeout.pta).
TEST(DnnlModule, RefusesPaddingThatNoLayoutHas) {
  Compiled c = sigmoidReluOnDnnl();
  ASSERT_EQ(c.parts.modules.size(), 1u);
  const auto& image = c.parts.modules[0];
  for (int64_t padded : {int64_t(9), (int64_t(1) << 29) + 1}) {
    Program p = readProgram(image.blob.data(), image.blob.size());
    ASSERT_FALSE(p.functions.at(0).steps.empty());
    p.functions[0].steps[0].args.at(0).md.data.padded_dims[1] = padded;
    EXPECT_NE(loadError(c, writeProgram(p), *c.store)
                  .find("padded dimension " + std::to_string(padded) + " (offset 0) where dimension 8 in blocks of 1 gives 8"),
              std::string::npos);
  }
  Program p = readProgram(image.blob.data(), image.blob.size());
  p.functions[0].steps[0].args.at(0).md.data.padded_offsets[1] = 1;
  EXPECT_NE(loadError(c, writeProgram(p), *c.store).find("(offset 1)"), std::string::npos);
}

// Only a source, destination or weights argument may have a layout oneDNN chooses: a
// fuzzed blob that marked a post-op's operand so made the load ask oneDNN 2.6 for the
// layout of a post-op the step does not have, which it read from memory it never wrote
// (fuzz/findings/artifact/dnnl_chosen_post_op_operand.pta).
TEST(DnnlModule, RefusesAChosenLayoutForAnotherArgument) {
  Compiled c = sigmoidReluOnDnnl();
  ASSERT_EQ(c.parts.modules.size(), 1u);
  const auto& image = c.parts.modules[0];
  Program p = readProgram(image.blob.data(), image.blob.size());
  ASSERT_FALSE(p.functions.at(0).steps.empty());
  Step& step = p.functions[0].steps[0];
  step.args.push_back(Arg{DNNL_ARG_ATTR_MULTIPLE_POST_OP(2) | DNNL_ARG_SRC_1, ArgSource::kBuffer, 0,
                          plainDesc({2, 8}), true});
  const std::vector<std::byte> blob = writeProgram(p);
  EXPECT_NE(loadError(c, blob, *c.store).find("argument 49154 cannot have a layout oneDNN chooses"),
            std::string::npos);
}

// Module 0 of `c` loaded as compiled, with its assumptions (`edit` applied) and `threads`.
std::shared_ptr<DnnlModule> reloadAssuming(const Compiled& c, int threads,
                                           const std::pair<std::string, std::string>& edit = {}) {
  const backend::ModuleImage& image = c.parts.modules.at(0);
  auto assumptions = image.assumptions;
  for (auto& [key, value] : assumptions)
    if (key == edit.first) value = edit.second;
  runtime::ModuleLoadContext ctx{Bytes::copyOf(image.blob.data(), image.blob.size()), c.store.get(), image.uses,
                                 threads, assumptions};
  return DnnlModule::load(ctx);
}

std::string assumptionError(const Compiled& c, const std::pair<std::string, std::string>& edit) {
  try {
    reloadAssuming(c, 2, edit);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "load succeeded with " << edit.first << " = " << edit.second;
  return {};
}

TEST(DnnlModule, RecordsWhatItsLayoutsAssume) {
  omp_set_num_threads(3);  // as the compiler driver does from CompileOptions::threads
  Compiled c = testing::compile(smallNet().g, {"dnnl", "host"});
  const auto& a = c.parts.modules.at(0).assumptions;
  const std::map<std::string, std::string> got(a.begin(), a.end());
  EXPECT_EQ(got.size(), a.size());
  const dnnl_version_t* v = dnnl_version();
  EXPECT_EQ(got.at("dnnl.version"),
            std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch));
  EXPECT_EQ(got.at("isa"), effectiveIsaName());
  EXPECT_EQ(got.at("isa").find("dnnl_cpu_isa_"), std::string::npos);  // a known name
  EXPECT_EQ(got.at("threads"), "3");
}

TEST(DnnlModule, RefusesAnotherIsaOrOneDnnVersion) {
  Compiled c = testing::compile(smallNet().g, {"dnnl", "host"});
  const std::string isa = effectiveIsaName(), version = dnnlVersionString();
  std::string msg = assumptionError(c, {"isa", isa == "avx2" ? "avx512_core_amx" : "avx2"});
  EXPECT_NE(msg.find("CPU ISA " + std::string(isa == "avx2" ? "avx512_core_amx" : "avx2")), std::string::npos) << msg;
  EXPECT_NE(msg.find("this machine has CPU ISA " + isa), std::string::npos) << msg;
  EXPECT_NE(msg.find("recompile the model"), std::string::npos) << msg;
  msg = assumptionError(c, {"dnnl.version", "1.0.0"});
  EXPECT_NE(msg.find("compiled for oneDNN version 1.0.0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("this machine has oneDNN version " + version), std::string::npos) << msg;
  EXPECT_NE(msg.find("recompile the model"), std::string::npos) << msg;
  // As recorded: loads, and says nothing about threads.
  auto same = reloadAssuming(c, 2, {"threads", "2"});
  EXPECT_EQ(same->recordedThreads(), 2);
  EXPECT_FALSE(same->threadsMismatch());
  // Written by hand without assumptions (older blobs): loads unchecked.
  auto none = std::dynamic_pointer_cast<DnnlModule>(reload(c, c.parts.modules[0].blob, *c.store));
  ASSERT_NE(none, nullptr);
  EXPECT_EQ(none->recordedThreads(), 0);
  EXPECT_FALSE(none->threadsMismatch());
}

TEST(DnnlModule, LoadsAtAnotherThreadCountThanCompiled) {
  omp_set_num_threads(2);
  Compiled c = testing::compile(smallNet().g, {"dnnl", "host"});
  std::vector<ir::OwnedTensor> inputs = testing::randomInputs(*c.graph, 11);
  ir::OwnedTensor want(ir::DType::kFloat32, {1, 1000});
  moduleOf(c).run(0, {inputs[0].view()}, {want.view()});
  for (int threads : {1, 3}) {
    auto m = reloadAssuming(c, threads);
    EXPECT_EQ(m->recordedThreads(), 2);
    EXPECT_TRUE(m->threadsMismatch());
    ir::OwnedTensor got(ir::DType::kFloat32, {1, 1000});
    m->run(0, {inputs[0].view()}, {got.view()});
    EXPECT_LE(testing::closeness(got, want), 1.0) << threads << " threads";
  }
  omp_set_num_threads(2);
}

// A run on a team of one (the adaptive wait's block mode sets it, unless
// PARTITA_THREAD_WAIT=adaptive-team, CTest threads_adaptive_team) uses primitives made
// for one thread, made at its first such run, with the same results. Under
// adaptive-team the module keeps no steps for that and runs its own primitives.
TEST(DnnlModule, RunsOnATeamOfOneWithOneThreadPrimitives) {
  omp_set_num_threads(2);
  Compiled c = testing::compile(smallNet().g, {"dnnl", "host"});
  std::vector<ir::OwnedTensor> inputs = testing::randomInputs(*c.graph, 12);
  auto m = reloadAssuming(c, 2);
  ir::OwnedTensor want(ir::DType::kFloat32, {1, 1000});
  m->run(0, {inputs[0].view()}, {want.view()});
  EXPECT_EQ(m->serialPrimitivesCreated(), 0u);
  omp_set_num_threads(1);
  for (int run = 0; run < 2; ++run) {
    ir::OwnedTensor got(ir::DType::kFloat32, {1, 1000});
    m->run(0, {inputs[0].view()}, {got.view()});
    EXPECT_LE(testing::closeness(got, want), 1.0) << "run " << run;
  }
  omp_set_num_threads(2);
  // The 3x3 convolution (663,552 multiply-adds) is made for two threads: it got a
  // one-thread twin, once; the other steps run alone anyway.
  const size_t made = m->serialPrimitivesCreated();
  if (runtime::teamWaitMayRunAlone())
    EXPECT_GE(made, 1u);
  else
    EXPECT_EQ(made, 0u);
  ir::OwnedTensor again(ir::DType::kFloat32, {1, 1000});
  m->run(0, {inputs[0].view()}, {again.view()});
  EXPECT_LE(testing::closeness(again, want), 1.0);
  EXPECT_EQ(m->serialPrimitivesCreated(), made);
}

// On a team, temporaries that add up to at most kPrivateBuffersBytes get bytes of their
// own (no step reuses bytes another step's threads wrote); on one thread they share by
// lifetime. Same results either way.
TEST(DnnlModule, TeamGivesSmallFunctionsPrivateBuffers) {
  omp_set_num_threads(2);
  Compiled c = testing::compile(smallNet().g, {"dnnl", "host"});
  std::vector<ir::OwnedTensor> inputs = testing::randomInputs(*c.graph, 21);
  auto one = reloadAssuming(c, 1), two = reloadAssuming(c, 2);
  EXPECT_GT(two->arenaBytes(), one->arenaBytes());
  EXPECT_LE(two->arenaBytes(), kPrivateBuffersBytes);
  ir::OwnedTensor a(ir::DType::kFloat32, {1, 1000}), b(ir::DType::kFloat32, {1, 1000});
  omp_set_num_threads(1);
  one->run(0, {inputs[0].view()}, {a.view()});
  omp_set_num_threads(2);
  two->run(0, {inputs[0].view()}, {b.view()});
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.nbytes()), 0);
}

TEST(DnnlModule, ConcurrentRunsShareOneModule) {
  Compiled c = testing::compile(smallNet().g, {"dnnl", "host"});
  const auto& mod = moduleOf(c);
  EXPECT_GT(mod.scratchpadBytes(), 0u);
  std::vector<std::vector<ir::OwnedTensor>> inputs, want;
  for (uint64_t i = 0; i < 4; ++i) {
    inputs.push_back(testing::randomInputs(*c.graph, 100 + i));
    want.push_back(c.run(inputs.back()));
  }
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (size_t t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      auto state = c.executor->newRunState();
      for (int r = 0; r < 15; ++r) {
        std::vector<ir::Tensor> views = {inputs[t][0].view()};
        std::vector<ir::OwnedTensor> got = c.executor->run(*state, views);
        if (std::memcmp(got[0].data(), want[t][0].data(), got[0].nbytes()) != 0) ++mismatches[t];
      }
    });
  for (auto& th : threads) th.join();
  for (size_t t = 0; t < 4; ++t) EXPECT_EQ(mismatches[t], 0) << "thread " << t;
  EXPECT_GE(mod.workspacesCreated(), 1u);
  EXPECT_LE(mod.workspacesCreated(), 4u);
}

TEST(DnnlModule, ChecksCallArity) {
  Compiled c = testing::compile(smallNet().g, {"dnnl", "host"});
  ir::OwnedTensor small(ir::DType::kFloat32, {1, 16, 12, 11});
  ir::OwnedTensor out(ir::DType::kFloat32, {1, 1000});
  try {
    moduleOf(c).run(0, {small.view()}, {out.view()});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input 0 must be float32"), std::string::npos) << e.what();
  }
  EXPECT_THROW(moduleOf(c).run(3, {small.view()}, {out.view()}), Error);
}

// Winograd weights (oneDNN's `wino` format kind) round-trip through the blob, and a
// load takes a recorded wino layout only as the chosen weights of a convolution and
// only when oneDNN makes the same one here: its fields are oneDNN's internals.
TEST(DnnlModule, WinogradWeightsOnlyAsOneDnnMakesThem) {
  const memory::dims src_dims = {1, 16, 8, 8}, w_dims = {16, 16, 3, 3};
  dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_winograd,
                                    anyDesc(std::vector<int64_t>(src_dims.begin(), src_dims.end())),
                                    anyDesc(std::vector<int64_t>(w_dims.begin(), w_dims.end())),
                                    anyDesc(std::vector<int64_t>{1, 16, 8, 8}), {1, 1}, {1, 1}, {1, 1});
  const memory::desc wino = dnnl::convolution_forward::primitive_desc(d, cpuEngine()).weights_desc();
  ASSERT_EQ(wino.data.format_kind, dnnl_format_kind_wino);
  BlobWriter bw;
  writeDesc(bw, wino);
  BlobReader br(bw.bytes().data(), bw.bytes().size(), "test descriptor");
  EXPECT_TRUE(sameDesc(readDesc(br), wino));
  EXPECT_EQ(formatTag(wino), "wino");

  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 16, 8, 8});
  ir::AttributeMap pads;
  pads.setInts("pads", {1, 1, 1, 1});
  b.output(b.node("Conv", {x, b.constant("w", {16, 16, 3, 3}, randomFloats(16 * 16 * 9, 1))}, pads));
  Compiled host = testing::compile(b.g, {"host"});
  // As the compiler partitions a float16 model computed in float32.
  Compiled c = host;
  backend::PartitionOptions o;
  o.backends = {"dnnl", "host"};
  o.float_precision = "fp32-half";
  ir::Graph g = *host.graph;
  c.parts = backend::partitionGraph(g, o);
  c.graph = std::make_shared<ir::Graph>(std::move(g));
  runtime::ConstStore store = runtime::ConstStore::fromPool(c.graph->constants);
  const auto& image = c.parts.modules.at(0);
  Program p = readProgram(image.blob.data(), image.blob.size());
  Arg* w = nullptr;
  for (Step& s : p.functions[0].steps)
    if (s.kind == StepKind::kConvolution) w = s.find(DNNL_ARG_WEIGHTS);
  ASSERT_NE(w, nullptr);
  ASSERT_EQ(w->md.data.format_kind, dnnl_format_kind_wino);
  std::shared_ptr<runtime::RuntimeModule> loaded = reload(c, image.blob, store);
  std::vector<ir::OwnedTensor> in = testing::randomInputs(*host.graph, 3);
  ir::OwnedTensor got(ir::DType::kFloat32, {1, 16, 8, 8});
  loaded->run(0, {in[0].view()}, {got.view()});
  EXPECT_LE(testing::relativeError(got, host.run(in)[0]), 1e-5);
  auto altered = [&](bool chosen, int oc_block_delta) {
    Program q = p;
    for (Step& s : q.functions[0].steps)
      if (s.kind == StepKind::kConvolution) {
        Arg* a = s.find(DNNL_ARG_WEIGHTS);
        a->md.data.format_desc.wino_desc.oc_block += oc_block_delta;
        a->chosen = chosen;
      }
    return writeProgram(q);
  };
  std::string e = loadError(c, altered(false, 0), store);
  EXPECT_NE(e.find("Winograd"), std::string::npos) << e;
  e = loadError(c, altered(true, 1), store, {}, ErrorCode::kUnsupported);
  EXPECT_NE(e.find("Winograd"), std::string::npos) << e;
}

// A SqueezeNet fire module: a 1x1 squeeze, then a 1x1 and a 3x3 expand concatenated
// along the channels, read by the next squeeze.
GraphBuilder fireModule() {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 32, 12, 12});
  ir::AttributeMap pads;
  pads.setInts("pads", {1, 1, 1, 1});
  ir::ValueId s = b.node("Relu", {b.node("Conv", {x, b.constant("ws", {16, 32, 1, 1}, randomFloats(512, 1)),
                                                  b.constant("bs", {16}, randomFloats(16, 2))})});
  ir::ValueId e1 = b.node("Relu", {b.node("Conv", {s, b.constant("we1", {48, 16, 1, 1}, randomFloats(768, 3)),
                                                   b.constant("be1", {48}, randomFloats(48, 4))})});
  ir::ValueId e3 = b.node(
      "Relu", {b.node("Conv", {s, b.constant("we3", {32, 16, 3, 3}, randomFloats(32 * 16 * 9, 5)),
                               b.constant("be3", {32}, randomFloats(32, 6))},
                      pads)});
  ir::AttributeMap axis;
  axis.setInt("axis", 1);
  ir::ValueId cat = b.node("Concat", {e1, e3}, axis);
  b.output(b.node("Conv", {cat, b.constant("wn", {16, 80, 1, 1}, randomFloats(16 * 80, 7))}));
  return b;
}

size_t views(const Program& p) {
  size_t n = 0;
  for (const Function& fn : p.functions)
    for (const Buffer& b : fn.buffers) n += b.view;
  return n;
}

// With Winograd's algorithm for the 3x3 expand (a float16 model computed in float32),
// the fire module's convolutions work in 16-channel blocks and write their parts of
// the Concat in place: no concat step, two views into its buffer (blob version 3).
// In float32 the 3x3 stays on oneDNN's channels-last kernel and the Concat a step (run
// as block copies: planPlainConcat), in a version 1 blob as before.
TEST(DnnlModule, ConcatOfConvolutionsIsWrittenInPlace) {
  Compiled host = testing::compile(fireModule().g, {"host"});
  std::vector<ir::OwnedTensor> in = testing::randomInputs(*host.graph, 9);
  const ir::OwnedTensor want = host.run(in)[0];
  for (const char* precision : {"fp32-half", "fp32"}) {
    SCOPED_TRACE(precision);
    const bool half = std::string(precision) == "fp32-half";
    Compiled c = testing::compile(fireModule().g, {"dnnl", "host"}, 1, 0, precision);
    const auto& blob = c.parts.modules.at(0).blob;
    const Program p = readProgram(blob.data(), blob.size());
    uint32_t version = 0;
    std::memcpy(&version, blob.data() + 4, 4);
    EXPECT_EQ(version, half ? 3u : 1u);
    EXPECT_EQ(views(p), half ? 2u : 0u);
    size_t concats = 0;
    for (const Step& st : p.functions.at(0).steps) concats += st.kind == StepKind::kConcat;
    EXPECT_EQ(concats, half ? 0u : 1u);
    // The channels-last Concat left as a step runs as block copies, not oneDNN's.
    for (const DnnlModule::StepInfo& st : moduleOf(c).steps(0))
      if (st.kind == StepKind::kConcat) {
        EXPECT_EQ(st.implementation, "partita:concat");
      }
    if (half) {
      const Function& fn = p.functions.at(0);
      std::vector<uint64_t> offsets;
      for (const Buffer& b : fn.buffers)
        if (b.view) offsets.push_back(b.offset);
      EXPECT_EQ(offsets, (std::vector<uint64_t>{0, 48 * 12 * 12 * 4}));  // e1, then e3
    }
    EXPECT_LE(testing::relativeError(c.run(in)[0], want), 1e-5);
    // At one thread the temporaries share bytes by lifetime: a view's uses keep its
    // parent's bytes. (Without, the parent would take the squeeze output's bytes, which
    // the 1x1 expand's view overwrote before the 3x3 read them.)
    runtime::ModuleLoadContext one{Bytes::copyOf(blob.data(), blob.size()), c.store.get(), c.parts.modules.at(0).uses,
                                   1, {}};
    std::shared_ptr<runtime::RuntimeModule> m = api::builtinModuleKinds().load("dnnl", one);
    ir::OwnedTensor got(ir::DType::kFloat32, {1, 16, 12, 12});
    m->run(0, {in[0].view()}, {got.view()});
    EXPECT_LE(testing::relativeError(got, want), 1e-5);
  }
}

// SqueezeNet's shape: an RGB stem (3x3 stride 2, MaxPool), a fire module, a 1x1
// classifier, a global average pool. Where the fire module works in channel blocks
// (Winograd, "fp32-half"), the stem writes blocks from the image as it comes and the
// classifier reads the Concat's blocks: no reorder but the one to the plain graph
// output. In float32 the stem and the classifier stay channels-last, with reorders
// around them.
TEST(DnnlModule, StemAndHeadTakeTheFireModulesChannelBlocks) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 3, 29, 29});
  ir::AttributeMap stride2;
  stride2.setInts("strides", {2, 2});
  ir::ValueId stem = b.node("Relu", {b.node("Conv", {x, b.constant("w0", {32, 3, 3, 3}, randomFloats(32 * 27, 11)),
                                                     b.constant("b0", {32}, randomFloats(32, 12))},
                                            stride2)});
  ir::AttributeMap pool;
  pool.setInts("kernel_shape", {3, 3});
  pool.setInts("strides", {2, 2});
  ir::ValueId p = b.node("MaxPool", {stem}, pool);
  ir::AttributeMap pads;
  pads.setInts("pads", {1, 1, 1, 1});
  ir::ValueId sq = b.node("Relu", {b.node("Conv", {p, b.constant("ws", {16, 32, 1, 1}, randomFloats(512, 13)),
                                                   b.constant("bs", {16}, randomFloats(16, 14))})});
  ir::ValueId e1 = b.node("Relu", {b.node("Conv", {sq, b.constant("we1", {32, 16, 1, 1}, randomFloats(512, 15))})});
  ir::ValueId e3 =
      b.node("Relu", {b.node("Conv", {sq, b.constant("we3", {32, 16, 3, 3}, randomFloats(32 * 16 * 9, 16))}, pads)});
  ir::AttributeMap axis;
  axis.setInt("axis", 1);
  ir::ValueId cat = b.node("Concat", {e1, e3}, axis);
  ir::ValueId head = b.node("Relu", {b.node("Conv", {cat, b.constant("wc", {48, 64, 1, 1}, randomFloats(48 * 64, 17)),
                                                     b.constant("bc", {48}, randomFloats(48, 18))})});
  b.output(b.node("GlobalAveragePool", {head}));
  Compiled host = testing::compile(b.g, {"host"});
  std::vector<ir::OwnedTensor> in = testing::randomInputs(*host.graph, 19);
  const ir::OwnedTensor want = host.run(in)[0];
  for (const char* precision : {"fp32-half", "fp32"}) {
    SCOPED_TRACE(precision);
    const bool half = std::string(precision) == "fp32-half";
    for (int threads : {1, 2}) {
      Compiled c = testing::compile(b.g, {"dnnl", "host"}, threads, 0, precision);
      const auto& blob = c.parts.modules.at(0).blob;
      const Program prog = readProgram(blob.data(), blob.size());
      size_t reorders = 0;  // besides the pooled output's to the plain graph output
      std::string layouts;
      for (const Step& st : prog.functions.at(0).steps) {
        if (st.kind == StepKind::kReorder) {
          reorders += st.label.find("GlobalAveragePool") == std::string::npos;
          continue;
        }
        if (st.kind != StepKind::kConvolution) continue;
        layouts += formatTag(st.find(DNNL_ARG_SRC)->md) + ">" + formatTag(st.find(DNNL_ARG_DST)->md) + " ";
      }
      if (half) {
        EXPECT_EQ(reorders, 0u) << layouts;
        EXPECT_EQ(layouts.substr(0, layouts.find(' ')), "abcd>aBcd16b") << layouts;  // the stem
      } else {
        EXPECT_GT(reorders, 0u) << layouts;
      }
      EXPECT_LE(testing::relativeError(c.run(in)[0], want), 1e-5);
    }
  }
}

// Views a hostile blob could declare: each refused with the buffer named.
TEST(DnnlProgram, MalformedViewsAreRefused) {
  Compiled c = testing::compile(fireModule().g, {"dnnl", "host"}, 1, 0, "fp32-half");
  const auto& blob = c.parts.modules.at(0).blob;
  const Program p = readProgram(blob.data(), blob.size());
  size_t view = 0;
  while (view < p.functions[0].buffers.size() && !p.functions[0].buffers[view].view) ++view;
  ASSERT_LT(view, p.functions[0].buffers.size());
  const uint32_t parent = p.functions[0].buffers[view].index;
  auto refused = [&](const std::function<void(Function&)>& alter, const std::string& words) {
    Program q = p;
    q.embedded.assign(blob.begin() + long(p.embedded_offset), blob.begin() + long(p.embedded_offset + p.embedded_size));
    alter(q.functions[0]);
    const std::vector<std::byte> bad = writeProgram(q);
    try {
      readProgram(bad.data(), bad.size());
      ADD_FAILURE() << "accepted: " << words;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArtifact);
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("buffer " + std::to_string(view)), std::string::npos) << e.what();
    }
  };
  refused([&](Function& fn) { fn.buffers[view].index = uint32_t(fn.buffers.size()); }, "out of range");
  refused([&](Function& fn) { fn.buffers[view].index = uint32_t(view); }, "out of range");
  refused([&](Function& fn) { fn.buffers[view].offset = fn.buffers[parent].bytes; }, "outside its buffer");
  refused([&](Function& fn) { fn.buffers[view].offset = ~uint64_t(0); }, "outside its buffer");
  refused([&](Function& fn) { fn.buffers[parent].view = true; }, "no view");
  refused([&](Function& fn) { fn.buffers[parent].kind = BufferKind::kOutput; }, "temporary");
  refused([&](Function& fn) { fn.buffers[view].zero_padded = true; }, "plain temporary");
  // A version 2 blob knows no views: its flag is an unknown one there.
  const std::string error = testing::readAsVersion(blob, 2);
  EXPECT_NE(error.find("unknown flags 2"), std::string::npos) << error;
}

TEST(DnnlProgram, BlobRoundTripIsByteIdentical) {
  Compiled c = testing::compile(smallNet().g, {"dnnl", "host"});
  const auto& blob = c.parts.modules[0].blob;
  Program p = readProgram(blob.data(), blob.size());
  std::vector<std::byte> again = writeProgram(p);
  // Embedded bytes are read in place; copy them back for the comparison.
  p.embedded.assign(blob.begin() + long(p.embedded_offset),
                    blob.begin() + long(p.embedded_offset + p.embedded_size));
  EXPECT_EQ(writeProgram(p), blob);
  // Compiling twice gives the same bytes.
  Compiled c2 = testing::compile(smallNet().g, {"dnnl", "host"});
  EXPECT_EQ(c2.parts.modules[0].blob, blob);
}

TEST(DnnlMemoryDesc, LayoutStringsAndEncoding) {
  memory::desc blocked(memory::dims{20, 3, 3, 3}, memory::data_type::f32, memory::format_tag::Acdb16a);
  EXPECT_EQ(formatTag(blocked), "Acdb16a");
  EXPECT_TRUE(hasPadding(blocked));
  EXPECT_FALSE(isPlainDense(blocked));
  EXPECT_EQ(layoutString(blocked),
            "dnnl:f32:Acdb16a:dims=20,3,3,3:padded=32,3,3,3:offsets=0,0,0,0:offset0=0:strides=432,16,144,48:"
            "blocks=16:"
            "block_dims=0");
  EXPECT_EQ(layoutTag(blocked), "dnnl:f32:Acdb16a:20,3,3,3");
  // The extent a descriptor reaches from its handle, which oneDNN's get_size() does
  // not give for a view with an offset (it says 0): a blob that claims a huge offset0
  // is refused against its buffer instead of crashing inside a kernel.
  EXPECT_EQ(extentBytes(blocked), blocked.get_size());
  memory::desc whole(memory::dims{4, 6}, memory::data_type::f32, memory::format_tag::ab);
  memory::desc view = whole.submemory_desc({4, 2}, {0, 1});
  EXPECT_EQ(view.get_size(), 0u);
  EXPECT_EQ(extentBytes(view), (1 + 3 * 6 + 1 + 1) * 4u);  // up to element [3, 2]
  view.data.offset0 = int64_t(1) << 40;
  EXPECT_GT(extentBytes(view), uint64_t(1) << 40);
  EXPECT_TRUE(isPlainDense(plainDesc({2, 1, 3})));
  EXPECT_EQ(plainDesc({}).dims(), memory::dims{1});
  BlobWriter w;
  writeDesc(w, blocked);
  writeDesc(w, anyDesc({4, 5}));
  BlobReader r(w.bytes().data(), w.bytes().size(), "test descriptors");
  EXPECT_TRUE(sameDesc(readDesc(r), blocked));
  EXPECT_TRUE(isAny(readDesc(r)));
  EXPECT_THROW(readDesc(r), Error);  // nothing left
}

}  // namespace
}  // namespace partita::dnnl_backend
