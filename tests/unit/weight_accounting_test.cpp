// "All, some or none": for every mix of backends, the linked artifact's weight section
// holds exactly the distinct tensors some module needs (borrowed or derived), each
// once, plus alignment padding -- nothing twice, nothing unneeded, nothing that only
// lives embedded in a module blob -- and the artifact computes what the host computes.
//
// The checker recomputes the expectation from the file alone: the set of needed IDs
// is the union of the modules' borrow and derive uses (the host graph executor's
// included), and distinct means same dtype, shape, layout and bytes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include "api/module_kinds.h"
#include "runtime/artifact_reader.h"
#include "compiler/artifact_writer.h"
#include "backend/backend_testing.h"
#include "partita/error.h"
#include "passes/passes.h"
#include "runtime/graph_executor.h"

namespace partita {
namespace {

using backend::testing::GraphBuilder;
using backend::testing::randomFloats;

struct Linked {
  std::string path;
  artifact::LinkReport written;
  artifact::Artifact a;
  backend::PartitionResult parts;
};

class WeightAccounting : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const std::string& p : paths_) std::filesystem::remove(p);
  }

  // Infers shapes (folding off: the constants stay as built), partitions, links and
  // reopens the artifact.
  Linked link(const GraphBuilder& b, std::vector<std::string> backends,
              std::map<std::string, std::set<std::string>> deny = {}) {
    ir::Graph g = b.g;
    passes::FoldOptions fold;
    fold.max_growth_bytes = 0;
    passes::inferShapes(g, fold);
    backend::PartitionOptions o;
    o.backends = std::move(backends);
    o.deny_ops = std::move(deny);
    Linked l;
    l.parts = backend::partitionGraph(g, o);
    l.path = (std::filesystem::temp_directory_path() /
              ("partita_accounting_" + std::to_string(::getpid()) + "_" + std::to_string(paths_.size()) + ".pta"))
                 .string();
    paths_.push_back(l.path);
    l.written = artifact::writeArtifact(g, l.parts.modules, l.path);
    l.a = artifact::openArtifact(l.path);
    return l;
  }

  // Runs the artifact and the host-only graph on the same inputs (outputs within
  // `atol` plus 1e-4 relative).
  void expectSameResultsAsHost(const Linked& l, const GraphBuilder& b, double atol = 1e-5) {
    ir::Graph host = b.g;
    passes::FoldOptions fold;
    fold.max_growth_bytes = 0;
    passes::inferShapes(host, fold);
    auto host_graph = std::make_shared<ir::Graph>(std::move(host));
    auto host_store = std::make_shared<runtime::ConstStore>(runtime::ConstStore::fromPool(host_graph->constants));
    runtime::GraphExecutor want_exec(host_graph, host_store);
    runtime::GraphExecutor got_exec(l.a.graph, l.a.store, artifact::loadModules(l.a, api::builtinModuleKinds()));
    std::vector<ir::OwnedTensor> in = backend::testing::randomInputs(*host_graph, 17);
    std::vector<ir::Tensor> views;
    for (const auto& t : in) views.push_back(t.view());
    auto s1 = want_exec.newRunState();
    auto s2 = got_exec.newRunState();
    std::vector<ir::OwnedTensor> want = want_exec.run(*s1, views), got = got_exec.run(*s2, views);
    ASSERT_EQ(want.size(), got.size());
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_LE(backend::testing::closeness(got[i], want[i], 1e-4, atol), 1.0) << "output " << i;
  }

 private:
  std::vector<std::string> paths_;
};

// What the file must hold, recomputed from its module table and constant table.
struct Expectation {
  std::set<ir::ConstId> needed;        // borrowed or derived by some module
  std::set<ir::ConstId> embedded_only;  // embedded by some module, needed by none
  uint64_t distinct_bytes = 0;
  size_t distinct = 0, distinct_nonempty = 0;
  uint64_t max_padding = 0;
};

Expectation expectationOf(const artifact::Artifact& a) {
  Expectation e;
  std::set<ir::ConstId> embedded;
  for (const artifact::ModuleEntry& m : a.modules)
    for (const artifact::ConstUse& u : m.uses)
      (u.kind == artifact::UseKind::kEmbed ? embedded : e.needed).insert(u.id);
  for (ir::ConstId id : embedded)
    if (!e.needed.count(id)) e.embedded_only.insert(id);
  // Distinct by content, confirmed byte for byte (the hash only groups candidates).
  std::map<std::tuple<ir::DType, std::vector<int64_t>, std::string, uint64_t>, std::vector<ir::ConstId>> groups;
  for (ir::ConstId id : e.needed) {
    const artifact::ConstantEntry* c = a.findConstant(id);
    if (!c) continue;
    auto& members = groups[{c->dtype, c->shape, c->layout, c->hash}];
    bool same = false;
    for (ir::ConstId other : members) {
      const Bytes &x = a.store->bytes(id), &y = a.store->bytes(other);
      same |= x.size == y.size && std::memcmp(x.data, y.data, x.size) == 0;
    }
    if (same) continue;
    members.push_back(id);
    ++e.distinct;
    e.distinct_nonempty += c->nbytes > 0;
    e.distinct_bytes += c->nbytes;
    e.max_padding += artifact::tensorAlignment(c->nbytes) - 1;
  }
  return e;
}

// The weight section holds exactly the needed distinct tensors plus padding.
void expectExactWeights(const Linked& l) {
  const artifact::Artifact& a = l.a;
  const Expectation e = expectationOf(a);
  const artifact::LinkReport r = artifact::byteAccounting(a);
  EXPECT_EQ(r, l.written) << "the writer's and the reader's accounting differ";
  for (const artifact::ConstantEntry& c : a.constants) {
    const bool stored = c.storage == artifact::Storage::kWeights;
    EXPECT_EQ(stored, e.needed.count(c.id) == 1) << "constant " << c.id << " '" << c.name << "'";
    if (e.embedded_only.count(c.id)) {
      EXPECT_EQ(c.storage, artifact::Storage::kEmbedded) << c.id;
    }
    if (stored) {
      EXPECT_EQ(c.offset % artifact::tensorAlignment(c.nbytes), 0u) << c.id;
    }
  }
  for (ir::ConstId id : e.needed) EXPECT_NE(a.findConstant(id), nullptr) << "needed constant " << id << " missing";
  EXPECT_EQ(r.distinct_weight_bytes, e.distinct_bytes);
  EXPECT_EQ(r.distinct_constants, e.distinct);
  EXPECT_EQ(r.weight_section_bytes, r.distinct_weight_bytes + r.weight_padding_bytes);
  EXPECT_LE(r.weight_padding_bytes, e.max_padding);
  // Same content, same place; different content, different places.
  std::set<uint64_t> offsets;
  for (const artifact::ConstantEntry& c : a.constants)
    if (c.storage == artifact::Storage::kWeights && c.nbytes > 0) offsets.insert(c.offset);
  EXPECT_EQ(offsets.size(), e.distinct_nonempty) << "distinct tensors must not share bytes";
}

size_t countUses(const artifact::Artifact& a, artifact::UseKind kind) {
  size_t n = 0;
  for (const artifact::ModuleEntry& m : a.modules)
    for (const artifact::ConstUse& u : m.uses) n += u.kind == kind;
  return n;
}

const artifact::ModuleEntry& hostModule(const artifact::Artifact& a) { return a.modules.back(); }

// conv(3x3) + bias + relu, conv(1x1), global pool, flatten, gemm.
GraphBuilder smallCnn(uint64_t seed = 1) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 4, 10, 10});
  ir::AttributeMap pads;
  pads.setInts("pads", {1, 1, 1, 1});
  ir::ValueId t = b.node("Conv",
                         {x, b.constant("w1", {8, 4, 3, 3}, randomFloats(8 * 4 * 9, seed)),
                          b.constant("b1", {8}, randomFloats(8, seed + 1))},
                         pads);
  t = b.node("Relu", {t});
  t = b.node("Conv", {t, b.constant("w2", {16, 8, 1, 1}, randomFloats(16 * 8, seed + 2))});
  ir::AttributeMap flat;
  flat.setInt("axis", 1);
  t = b.node("Flatten", {b.node("GlobalAveragePool", {t})}, flat);
  ir::AttributeMap gemm;
  gemm.setInt("transB", 1);
  b.output(b.node("Gemm",
                  {t, b.constant("fc", {10, 16}, randomFloats(160, seed + 3)),
                   b.constant("fb", {10}, randomFloats(10, seed + 4))},
                  gemm));
  return b;
}

TEST_F(WeightAccounting, HostOnly) {
  GraphBuilder b = smallCnn();
  Linked l = link(b, {"host"});
  expectExactWeights(l);
  EXPECT_EQ(l.a.modules.size(), 1u);
  EXPECT_EQ(hostModule(l.a).uses.size(), 5u);
  EXPECT_EQ(l.written.distinct_constants, 5u);
  expectSameResultsAsHost(l, b);
}

#if PARTITA_HAVE_DNNL
// Everything offloaded: the host executor needs no constant, oneDNN's weights are
// stored in its layouts (derived) and the plain originals are not stored.
TEST_F(WeightAccounting, AllOnDnnl) {
  GraphBuilder b = smallCnn();
  Linked l = link(b, {"dnnl", "host"});
  expectExactWeights(l);
  ASSERT_EQ(l.a.modules.size(), 2u);
  EXPECT_EQ(l.a.modules[0].kind, "dnnl");
  EXPECT_TRUE(hostModule(l.a).uses.empty());
  EXPECT_GE(countUses(l.a, artifact::UseKind::kDerive), 1u);
  for (const artifact::ModuleEntry& m : l.a.modules)
    for (const artifact::ConstUse& u : m.uses)
      if (u.kind == artifact::UseKind::kDerive) {
        const artifact::ConstantEntry* source = l.a.findConstant(u.source);
        EXPECT_TRUE(!source || source->storage != artifact::Storage::kWeights)
            << "plain original of a derived weight stored";
      }
  expectSameResultsAsHost(l, b);
}

// Some on oneDNN, some on the host (Relu and GlobalAveragePool denied to dnnl).
TEST_F(WeightAccounting, Mixed) {
  GraphBuilder b = smallCnn();
  Linked l = link(b, {"dnnl", "host"}, {{"dnnl", {"Relu", "GlobalAveragePool"}}});
  expectExactWeights(l);
  EXPECT_GE(l.parts.regions.size(), 2u);
  expectSameResultsAsHost(l, b);
}

// One weight read by a oneDNN convolution and by a host node: stored plain for the
// host and in oneDNN's layout for the convolution, both needed and counted once each.
TEST_F(WeightAccounting, OneWeightUsedByHostAndDnnl) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 4, 8, 8});
  ir::ValueId w = b.constant("w", {16, 4, 3, 3}, randomFloats(16 * 4 * 9, 3));
  b.output(b.node("Conv", {x, w}));
  b.output(b.node("Add", {b.input("y", {16, 4, 3, 3}), w}));  // on the host: denied to dnnl
  Linked l = link(b, {"dnnl", "host"}, {{"dnnl", {"Add"}}});
  expectExactWeights(l);
  const ir::ConstId wid = b.g.value(w).constant;
  const artifact::ConstantEntry* plain = l.a.findConstant(wid);
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(plain->storage, artifact::Storage::kWeights);
  bool derived = false, borrowed = false;
  for (const artifact::ConstUse& u : l.a.modules[0].uses) {
    if (u.kind == artifact::UseKind::kDerive && u.source == wid) {
      derived = true;
      EXPECT_NE(l.a.findConstant(u.id)->layout, plain->layout);
    }
    borrowed |= u.kind == artifact::UseKind::kBorrow && u.id == wid;  // oneDNN chose the plain layout
  }
  EXPECT_NE(derived, borrowed);
  EXPECT_EQ(l.written.distinct_constants, derived ? 2u : 1u);
  expectSameResultsAsHost(l, b);
}

// Two oneDNN regions (a host node between them) whose convolutions have identical
// weights under different IDs: both derive the same packed tensor, stored once.
TEST_F(WeightAccounting, IdenticalWeightsInTwoRegions) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 8, 8, 8});
  ir::AttributeMap pads;
  pads.setInts("pads", {1, 1, 1, 1});
  const std::vector<float> w = randomFloats(8 * 8 * 9, 5);
  ir::ValueId t = b.node("Conv", {x, b.constant("w_a", {8, 8, 3, 3}, w)}, pads);
  t = b.node("Floor", {t});  // a host node between the regions
  t = b.node("Conv", {t, b.constant("w_b", {8, 8, 3, 3}, w)}, pads);
  b.output(t);
  Linked l = link(b, {"dnnl", "host"}, {{"dnnl", {"Floor"}}});
  expectExactWeights(l);
  EXPECT_EQ(l.parts.regions.size(), 2u);
  std::vector<const artifact::ConstantEntry*> derived;
  for (const artifact::ConstUse& u : l.a.modules[0].uses)
    if (u.kind == artifact::UseKind::kDerive) derived.push_back(l.a.findConstant(u.id));
  ASSERT_EQ(derived.size(), 2u);
  EXPECT_EQ(derived[0]->offset, derived[1]->offset);
  EXPECT_EQ(l.written.constants, 2u);
  EXPECT_EQ(l.written.distinct_constants, 1u);
  EXPECT_EQ(l.written.distinct_weight_bytes, derived[0]->nbytes);
  expectSameResultsAsHost(l, b);
}

// Every kind of use in one artifact: dnnl derives and borrows, ewise embeds and
// borrows, the host borrows.
TEST_F(WeightAccounting, DnnlEwiseAndHostTogether) {
  GraphBuilder b = smallCnn(7);
  // After the network's output: an elementwise tail on ewise (denied to dnnl) whose
  // small constants ewise embeds.
  GraphBuilder c;
  c.g = b.g;
  ir::ValueId logits = c.g.outputs.at(0);
  c.g.outputs.clear();
  ir::ValueId t = c.node("Mul", {logits, c.constant("scale", {10}, randomFloats(10, 21))});
  t = c.node("Add", {t, c.constant("offset", {1, 10}, randomFloats(10, 22))});
  c.output(c.node("Sigmoid", {t}));
  Linked l = link(c, {"dnnl", "ewise", "host"}, {{"dnnl", {"Mul", "Add", "Sigmoid"}}});
  expectExactWeights(l);
  std::set<std::string> kinds;
  for (const artifact::ModuleEntry& m : l.a.modules) kinds.insert(m.kind);
  EXPECT_EQ(kinds, (std::set<std::string>{"dnnl", "ewise", "host.graph"}));
  EXPECT_GE(countUses(l.a, artifact::UseKind::kEmbed), 2u);
  EXPECT_GE(countUses(l.a, artifact::UseKind::kDerive), 1u);
  expectSameResultsAsHost(l, c);
}
#endif

// The embedding backend alone: its small constants live only in its blob and the
// weight section leaves them out; a large one is borrowed and stored.
TEST_F(WeightAccounting, EmbeddedConstantsAreNotStored) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 8, 64, 64});
  ir::ValueId scale = b.constant("scale", {8, 1, 1}, randomFloats(8, 1));
  ir::ValueId shift = b.constant("shift", {8, 1, 1}, randomFloats(8, 2));
  ir::ValueId big = b.constant("big", {8, 64, 64}, randomFloats(8 * 64 * 64, 3));
  ir::ValueId t = b.node("Add", {b.node("Mul", {x, scale}), shift});
  b.output(b.node("Relu", {b.node("Add", {t, big})}));
  Linked l = link(b, {"ewise", "host"});
  expectExactWeights(l);
  EXPECT_EQ(l.a.findConstant(b.g.value(scale).constant)->storage, artifact::Storage::kEmbedded);
  EXPECT_EQ(l.a.findConstant(b.g.value(shift).constant)->storage, artifact::Storage::kEmbedded);
  EXPECT_EQ(l.a.findConstant(b.g.value(big).constant)->storage, artifact::Storage::kWeights);
  EXPECT_EQ(l.written.embedded_bytes, 2u * 8 * sizeof(float));
  EXPECT_EQ(l.written.distinct_weight_bytes, 8u * 64 * 64 * sizeof(float));
  expectSameResultsAsHost(l, b);
}

// An embedded constant that a host node also reads is stored for the host, once.
TEST_F(WeightAccounting, EmbeddedConstantAlsoBorrowedByTheHostIsStoredOnce) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 8, 16, 16});
  ir::ValueId scale = b.constant("scale", {8, 1, 1}, randomFloats(8, 1));
  b.output(b.node("Relu", {b.node("Mul", {x, scale})}));
  b.output(b.node("Add", {b.input("y", {2, 8, 1, 1}), scale}));  // on the host: denied to ewise
  Linked l = link(b, {"ewise", "host"}, {{"ewise", {"Add"}}});
  expectExactWeights(l);
  const artifact::ConstantEntry* c = l.a.findConstant(b.g.value(scale).constant);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->storage, artifact::Storage::kWeights);
  EXPECT_EQ(c->consumers.size(), 2u);  // ewise (embed) and the host (borrow)
  EXPECT_EQ(l.written.distinct_weight_bytes, 8u * sizeof(float));
  expectSameResultsAsHost(l, b);
}

#if PARTITA_HAVE_DNNL
template <typename T>
ir::ValueId typedConstant(GraphBuilder& b, const std::string& name, ir::DType dtype, std::vector<int64_t> shape,
                          const std::vector<T>& data) {
  ir::ConstId c = b.g.constants.add(name, dtype, std::move(shape), Bytes::copyOf(data.data(), data.size() * sizeof(T)));
  return b.g.addConstantValue(name, c);
}

// int8 on oneDNN next to int8 on the host: the QLinearConv's and a MatMulInteger's s8
// weights are derived into oneDNN's layout (the int8 originals leave the file), the
// int32 bias borrowed; the int8 operand of a host MatMulInteger is stored as it is.
TEST_F(WeightAccounting, Int8WeightsDerivedForDnnlAndStoredForTheHost) {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 4, 6, 6});
  ir::ValueId xs = typedConstant<float>(b, "xs", ir::DType::kFloat32, {}, {0.01f});
  ir::ValueId xz = typedConstant<uint8_t>(b, "xz", ir::DType::kUInt8, {}, {128});
  ir::ValueId ys = typedConstant<float>(b, "ys", ir::DType::kFloat32, {}, {0.02f});
  ir::ValueId yz = typedConstant<uint8_t>(b, "yz", ir::DType::kUInt8, {}, {5});
  std::vector<int8_t> wq(8 * 4 * 9);
  for (size_t i = 0; i < wq.size(); ++i) wq[i] = int8_t(int(i * 37 % 255) - 127);
  ir::ValueId w = typedConstant<int8_t>(b, "w", ir::DType::kInt8, {8, 4, 3, 3}, wq);
  ir::ValueId ws = typedConstant<float>(b, "ws", ir::DType::kFloat32, {8}, std::vector<float>(8, 0.003f));
  ir::ValueId wz = typedConstant<int8_t>(b, "wz", ir::DType::kInt8, {8}, std::vector<int8_t>(8, 0));
  std::vector<int32_t> bq(8);
  for (size_t i = 0; i < bq.size(); ++i) bq[i] = int32_t(i * 11) - 40;
  ir::ValueId bias = typedConstant<int32_t>(b, "bias", ir::DType::kInt32, {8}, bq);
  ir::AttributeMap pads;
  pads.setInts("pads", {1, 1, 1, 1});
  ir::ValueId xq = b.node("QuantizeLinear", {x, xs, xz}, {}, 13);
  ir::ValueId yq = b.node("QLinearConv", {xq, xs, xz, w, ws, wz, ys, yz, bias}, pads, 13);
  b.output(b.node("DequantizeLinear", {yq, ys, yz}, {}, 13));
  // On the host: MatMulInteger of a quantized input by an int8 constant with a nonzero
  // zero point (oneDNN's int8 matmul takes weights without one).
  ir::ValueId m = typedConstant<int8_t>(b, "m", ir::DType::kInt8, {3, 2}, {1, -2, 3, -4, 5, -6});
  ir::ValueId mz = typedConstant<int8_t>(b, "mz", ir::DType::kInt8, {}, {1});
  ir::ValueId aq = b.node("QuantizeLinear", {b.input("a", {2, 3}), xs, xz}, {}, 13);
  ir::AttributeMap to_float;
  to_float.setInt("to", 1);
  b.output(b.node("Cast", {b.node("MatMulInteger", {aq, m, xz, mz}, {}, 13)}, to_float, 13));
  // On oneDNN: a MatMulInteger whose int8 weights have no zero point (an int8 matmul,
  // the weights derived as s8, the original not stored).
  ir::ValueId m2 = typedConstant<int8_t>(b, "m2", ir::DType::kInt8, {3, 4}, {1, -2, 3, -4, 5, -6, 7, -8, 9, -10, 11, -12});
  ir::ValueId a2q = b.node("QuantizeLinear", {b.input("a2", {2, 3}), xs, xz}, {}, 13);
  b.output(b.node("MatMulInteger", {a2q, m2, xz}, {}, 13));
  Linked l = link(b, {"dnnl", "host"});
  expectExactWeights(l);
  const artifact::ConstantEntry* original = l.a.findConstant(b.g.value(w).constant);
  EXPECT_TRUE(!original || original->storage != artifact::Storage::kWeights) << "int8 original of derived weights stored";
  bool derived_s8 = false;
  for (const artifact::ConstUse& u : l.a.modules[0].uses)
    if (u.kind == artifact::UseKind::kDerive &&
        (u.source == b.g.value(w).constant || u.source == b.g.value(m2).constant)) {
      const artifact::ConstantEntry* d = l.a.findConstant(u.id);
      ASSERT_NE(d, nullptr);
      EXPECT_EQ(d->layout.rfind("dnnl:s8:", 0), 0u) << d->layout;
      EXPECT_EQ(d->dtype, ir::DType::kInt8);
      derived_s8 = true;
    }
  EXPECT_TRUE(derived_s8);
  const artifact::ConstantEntry* m2_original = l.a.findConstant(b.g.value(m2).constant);
  EXPECT_TRUE(!m2_original || m2_original->storage != artifact::Storage::kWeights)
      << "int8 original of the matmul's derived weights stored";
  const artifact::ConstantEntry* host_int8 = l.a.findConstant(b.g.value(m).constant);
  ASSERT_NE(host_int8, nullptr);
  EXPECT_EQ(host_int8->storage, artifact::Storage::kWeights);
  EXPECT_EQ(host_int8->nbytes, 6u);
  // The int8 convolution rounds x / x_scale as x * (1 / x_scale): one output step apart at most.
  expectSameResultsAsHost(l, b, 0.0201);
}

// Recurrent weights: an LSTM on oneDNN derives W, R (in the layout oneDNN chose) and
// the summed bias in oneDNN's gate order; a second LSTM with clip (host only) reads the same W, R and B plain.
// Each is stored plain once for the host and once derived; without the host LSTM the
// originals leave the file.
TEST_F(WeightAccounting, RecurrentWeightsDerivedAndShared) {
  for (bool with_host_reader : {true, false}) {
    GraphBuilder b;
    const int64_t hidden = 6, input = 4;
    ir::ValueId x = b.input("x", {5, 2, input});
    ir::ValueId w = b.constant("W", {1, 4 * hidden, input}, randomFloats(4 * hidden * input, 1));
    ir::ValueId r = b.constant("R", {1, 4 * hidden, hidden}, randomFloats(4 * hidden * hidden, 2));
    ir::ValueId bias = b.constant("B", {1, 8 * hidden}, randomFloats(8 * hidden, 3));
    ir::AttributeMap a;
    a.setInt("hidden_size", hidden);
    b.output(b.node("LSTM", {x, w, r, bias}, a, 14));
    if (with_host_reader) {
      a.setFloat("clip", 0.5f);  // oneDNN has no clip: the host runs it
      b.output(b.node("LSTM", {x, w, r, bias}, a, 14));
    }
    Linked l = link(b, {"dnnl", "host"});
    expectExactWeights(l);
    size_t derived = 0;
    uint64_t derived_bytes = 0;
    for (const artifact::ConstUse& u : l.a.modules[0].uses)
      if (u.kind == artifact::UseKind::kDerive) {
        ++derived;
        const artifact::ConstantEntry* c = l.a.findConstant(u.id);
        EXPECT_FALSE(c->layout.empty());
        derived_bytes += c->nbytes;
        if (u.source == b.g.value(bias).constant) {
          EXPECT_EQ(c->nbytes, 4u * hidden * sizeof(float));  // Wb + Rb
        }
      }
    EXPECT_EQ(derived, 3u);  // W, R (in the layout oneDNN chose, padded), B
    for (ir::ValueId v : {w, r, bias}) {
      const artifact::ConstantEntry* plain = l.a.findConstant(b.g.value(v).constant);
      const bool stored = plain && plain->storage == artifact::Storage::kWeights;
      EXPECT_EQ(stored, with_host_reader) << b.g.value(v).name;
    }
    const uint64_t plain_bytes = (4 * hidden * input + 4 * hidden * hidden + 8 * hidden) * sizeof(float);
    EXPECT_EQ(l.written.distinct_weight_bytes, derived_bytes + (with_host_reader ? plain_bytes : 0));
    expectSameResultsAsHost(l, b);
  }
}
#endif

// An If whose branches each read their own copy of one Conv weight (two IDs, the same
// bytes) and one shared constant (one ID): stored once each, with every mix of
// backends; the bodies run from the artifact as from the in-memory graph, both ways.
GraphBuilder ifWithSharedWeights() {
  GraphBuilder b;
  ir::ValueId x = b.input("x", {1, 4, 10, 10});
  ir::AttributeMap keep0;
  keep0.setInt("keepdims", 0);
  ir::ValueId zero = b.constant("zero", {}, {0.0f});
  ir::ValueId cond = b.node("Greater", {b.node("ReduceMean", {x}, keep0), zero});
  ir::ValueId t = b.node("Relu", {x});
  const std::vector<float> w = randomFloats(8 * 4 * 9, 31);
  const ir::ConstId w_then = b.g.constants.add("w_then", ir::DType::kFloat32, {8, 4, 3, 3}, Bytes::copyOf(w.data(), w.size() * 4));
  const ir::ConstId w_else = b.g.constants.add("w_else", ir::DType::kFloat32, {8, 4, 3, 3}, Bytes::copyOf(w.data(), w.size() * 4));
  const std::vector<float> bias = randomFloats(8, 32);
  const ir::ConstId shared = b.g.constants.add("bias", ir::DType::kFloat32, {1, 8, 1, 1}, Bytes::copyOf(bias.data(), 32));
  auto branch = [&](const std::string& name, ir::ConstId weight, const std::string& act) {
    auto g = std::make_shared<ir::Graph>();
    g->name = name;
    ir::ValueId in = g->addValue("t");
    ir::ValueId wv = g->addValue("w", ir::TensorType::of(ir::DType::kFloat32, {8, 4, 3, 3}));
    g->value(wv).constant = weight;
    ir::ValueId bv = g->addValue("bias", ir::TensorType::of(ir::DType::kFloat32, {1, 8, 1, 1}));
    g->value(bv).constant = shared;
    ir::ValueId c = g->addValue(name + "_conv"), a = g->addValue(name + "_act"), y = g->addValue(name + "_y");
    ir::Node conv;
    conv.op_type = "Conv";
    conv.opset = 17;
    conv.name = name + "_conv";
    conv.inputs = {in, wv};
    conv.outputs = {c};
    conv.attrs.setInts("pads", {1, 1, 1, 1});
    g->addNode(conv);
    ir::Node activation;
    activation.op_type = act;
    activation.opset = 17;
    activation.name = name + "_act";
    activation.inputs = {c};
    activation.outputs = {a};
    g->addNode(activation);
    ir::Node add;
    add.op_type = "Add";
    add.opset = 17;
    add.name = name + "_add";
    add.inputs = {a, bv};
    add.outputs = {y};
    g->addNode(add);
    g->inputs = {in};
    g->captures = 1;
    g->outputs = {y};
    return g;
  };
  ir::AttributeMap attrs;
  attrs.setGraph("then_branch", branch("then", w_then, "Relu"));
  attrs.setGraph("else_branch", branch("else", w_else, "Sigmoid"));
  b.output(b.node("If", {cond, t}, attrs, 17, "if"));
  return b;
}

TEST_F(WeightAccounting, IfBranchesHoldingOneWeightStoreItOnce) {
  std::vector<std::vector<std::string>> mixes = {{"host"}, {"ewise", "host"}};
#if PARTITA_HAVE_DNNL
  mixes.push_back({"dnnl", "host"});
  mixes.push_back({"dnnl", "ewise", "host"});
#endif
  for (const auto& mix : mixes) {
    SCOPED_TRACE(mix.size() > 1 ? mix[0] + "," + mix[1] : mix[0]);
    GraphBuilder b = ifWithSharedWeights();
    Linked l = link(b, mix);
    expectExactWeights(l);
    // Stored: zero, w_then, w_else (one place), bias; distinct: three tensors.
    EXPECT_EQ(l.written.distinct_constants, 3u);
    EXPECT_EQ(l.written.distinct_weight_bytes, (8u * 4 * 9 + 8 + 1) * sizeof(float));
    const artifact::ConstantEntry* a = l.a.findConstant(1);
    const artifact::ConstantEntry* c = l.a.findConstant(2);
    ASSERT_TRUE(a && c);
    EXPECT_EQ(a->offset, c->offset) << "the two branches' weights must share one place";
    // Both branches, from the artifact and from the graph in memory.
    ir::Graph host = b.g;
    passes::FoldOptions fold;
    fold.max_growth_bytes = 0;
    passes::inferShapes(host, fold);
    auto host_graph = std::make_shared<ir::Graph>(std::move(host));
    auto host_store = std::make_shared<runtime::ConstStore>(runtime::ConstStore::fromPool(host_graph->constants));
    runtime::GraphExecutor want_exec(host_graph, host_store);
    runtime::GraphExecutor got_exec(l.a.graph, l.a.store, artifact::loadModules(l.a, api::builtinModuleKinds()));
    auto s1 = want_exec.newRunState();
    auto s2 = got_exec.newRunState();
    std::set<bool> taken;
    for (uint64_t seed = 1; seed < 40 && taken.size() < 2; ++seed) {
      std::vector<ir::OwnedTensor> in = backend::testing::randomInputs(*host_graph, seed);
      double mean = 0;
      for (int64_t i = 0; i < in[0].numel(); ++i) mean += in[0].as<float>()[i];
      taken.insert(mean > 0);
      std::vector<ir::Tensor> views = {in[0].view()};
      std::vector<ir::OwnedTensor> want = want_exec.run(*s1, views), got = got_exec.run(*s2, views);
      ASSERT_EQ(got.size(), 1u);
      EXPECT_LE(backend::testing::closeness(got[0], want[0]), 1.0) << "seed " << seed;
    }
    EXPECT_EQ(taken.size(), 2u) << "both branches ran";
  }
}

}  // namespace
}  // namespace partita
