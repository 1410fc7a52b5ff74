// If, Loop and Scan from ONNX models built here: outer values read by bodies, loops
// whose carried values grow and pass straight through, a constant If folded away,
// artifacts with nested graphs, and bad input named by node (docs/control_flow.md).
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "base/temp_dir_testing.h"
#include "compiler/compile.h"
#include "frontend/onnx/onnx_importer.h"
#include "partita/compiler.h"
#include "partita/error.h"
#include "partita/model.h"
#include "passes/pipeline.h"
#include "runtime/artifact_reader.h"
#include "runtime/executor.h"
#include "runtime/module.h"

namespace partita {
namespace {

using onnx::TensorProto;

void setType(onnx::ValueInfoProto* vi, const std::string& name, int elem, const std::vector<int64_t>& dims,
             bool ranked = true) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  if (!ranked) return;
  auto* shape = tt->mutable_shape();
  for (int64_t d : dims) {
    auto* dim = shape->add_dim();
    if (d >= 0) dim->set_dim_value(d);
  }
}

onnx::NodeProto* addNode(onnx::GraphProto& g, const std::string& op, std::vector<std::string> in,
                         std::vector<std::string> out, const std::string& name = "") {
  auto* n = g.add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (auto& s : in) n->add_input(s);
  for (auto& s : out) n->add_output(s);
  return n;
}

void addInts(onnx::NodeProto* n, const std::string& name, std::vector<int64_t> v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

void addInt(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

onnx::GraphProto* addGraph(onnx::NodeProto* n, const std::string& attr, const std::string& name) {
  auto* a = n->add_attribute();
  a->set_name(attr);
  a->set_type(onnx::AttributeProto::GRAPH);
  a->mutable_g()->set_name(name);
  return a->mutable_g();
}

void addFloats(onnx::GraphProto& g, const std::string& name, const std::vector<int64_t>& dims,
               const std::vector<float>& v) {
  auto* t = g.add_initializer();
  t->set_name(name);
  t->set_data_type(TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  for (float x : v) t->add_float_data(x);
}

void addInt64s(onnx::GraphProto& g, const std::string& name, const std::vector<int64_t>& dims,
               const std::vector<int64_t>& v) {
  auto* t = g.add_initializer();
  t->set_name(name);
  t->set_data_type(TensorProto::INT64);
  for (int64_t d : dims) t->add_dims(d);
  for (int64_t x : v) t->add_int64_data(x);
}

onnx::ModelProto newModel(int opset = 16) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(opset);
  m.mutable_graph()->set_name("g");
  return m;
}

std::string bytesOf(const onnx::ModelProto& m) {
  std::string s;
  m.SerializeToString(&s);
  return s;
}

Tensor floats(std::vector<int64_t> shape, std::vector<float> v) {
  Tensor t(DType::kFloat32, std::move(shape));
  std::memcpy(t.data(), v.data(), v.size() * sizeof(float));
  return t;
}
Tensor scalarBool(bool b) {
  Tensor t(DType::kBool, {});
  *t.as<bool>() = b;
  return t;
}
Tensor scalarInt(int64_t v, std::vector<int64_t> shape = {}) {
  Tensor t(DType::kInt64, std::move(shape));
  *t.as<int64_t>() = v;
  return t;
}
std::vector<float> valuesOf(const Tensor& t) {
  return std::vector<float>(t.as<float>(), t.as<float>() + t.numel());
}

// Runs a model from bytes in memory and from an artifact; both results must agree.
std::vector<std::vector<Tensor>> runBoth(const onnx::ModelProto& m, const std::vector<std::pair<std::string, Tensor>>& in) {
  const std::string bytes = bytesOf(m);
  testing::TempDir dir;
  const std::string pta = dir.path("m.pta");
  compileBytesToArtifact(bytes.data(), bytes.size(), "m.onnx", pta);
  std::vector<std::vector<Tensor>> results;
  for (auto model : {compileOnnxBytes(bytes.data(), bytes.size(), "m.onnx"), Model::load(pta)}) {
    Session s(model);
    for (const auto& [name, t] : in) s.setInput(name, t);
    s.run();
    results.push_back(s.outputs());
  }
  EXPECT_EQ(results[0].size(), results[1].size());
  for (size_t i = 0; i < results[0].size() && i < results[1].size(); ++i) {
    EXPECT_EQ(results[0][i].shape(), results[1][i].shape());
    EXPECT_EQ(results[0][i].nbytes(), results[1][i].nbytes());
    if (results[0][i].nbytes() == results[1][i].nbytes()) {
      EXPECT_EQ(std::memcmp(results[0][i].data(), results[1][i].data(), results[0][i].nbytes()), 0) << "output " << i;
    }
  }
  return results;
}

std::string errorOf(const onnx::ModelProto& m) {
  const std::string bytes = bytesOf(m);
  try {
    auto model = compileOnnxBytes(bytes.data(), bytes.size(), "m.onnx");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// x[3], cond -> If: then x + c (c a then-branch initializer), else x * x (x from outside).
onnx::ModelProto ifModel() {
  onnx::ModelProto m = newModel();
  auto& g = *m.mutable_graph();
  setType(g.add_input(), "x", TensorProto::FLOAT, {3});
  setType(g.add_input(), "cond", TensorProto::BOOL, {});
  auto* n = addNode(g, "If", {"cond"}, {"y"}, "if0");
  auto* then_g = addGraph(n, "then_branch", "then");
  addFloats(*then_g, "c", {3}, {10, 20, 30});
  addNode(*then_g, "Add", {"x", "c"}, {"t"});
  setType(then_g->add_output(), "t", TensorProto::FLOAT, {3});
  auto* else_g = addGraph(n, "else_branch", "else");
  addNode(*else_g, "Mul", {"x", "x"}, {"e"});
  setType(else_g->add_output(), "e", TensorProto::FLOAT, {3});
  setType(g.add_output(), "y", TensorProto::FLOAT, {3});
  return m;
}

TEST(ControlFlow, IfRunsTheBranchTakenWithOuterValues) {
  onnx::ModelProto m = ifModel();
  auto r = runBoth(m, {{"x", floats({3}, {1, 2, 3})}, {"cond", scalarBool(true)}});
  EXPECT_EQ(valuesOf(r[0][0]), (std::vector<float>{11, 22, 33}));
  r = runBoth(m, {{"x", floats({3}, {1, 2, 3})}, {"cond", scalarBool(false)}});
  EXPECT_EQ(valuesOf(r[0][0]), (std::vector<float>{1, 4, 9}));
}

TEST(ControlFlow, IfOnAConstantIsFolded) {
  onnx::ModelProto m = ifModel();
  auto& g = *m.mutable_graph();
  g.mutable_input()->DeleteSubrange(1, 1);
  auto* t = g.add_initializer();
  t->set_name("cond");
  t->set_data_type(TensorProto::BOOL);
  t->add_int32_data(0);
  const std::string bytes = bytesOf(m);
  CompiledGraph c = compileGraphFromBytes(Bytes::copyOf(bytes.data(), bytes.size()), "m.onnx", {});
  for (const ir::Node& n : c.graph.nodes) EXPECT_NE(n.op_type, "If") << c.graph.str();
  auto r = runBoth(m, {{"x", floats({3}, {1, 2, 3})}});
  EXPECT_EQ(valuesOf(r[0][0]), (std::vector<float>{1, 4, 9}));
}

// Loop M times: y grows by one element per iteration (Concat), s passes straight
// through, the iteration number is a scan output.
onnx::ModelProto loopModel() {
  onnx::ModelProto m = newModel();
  auto& g = *m.mutable_graph();
  setType(g.add_input(), "M", TensorProto::INT64, {});
  setType(g.add_input(), "y0", TensorProto::FLOAT, {1});
  setType(g.add_input(), "s0", TensorProto::FLOAT, {2});
  setType(g.add_input(), "k", TensorProto::FLOAT, {1});
  auto* n = addNode(g, "Loop", {"M", "", "y0", "s0"}, {"y", "s", "iters"}, "loop0");
  auto* body = addGraph(n, "body", "body");
  setType(body->add_input(), "i", TensorProto::INT64, {});
  setType(body->add_input(), "c", TensorProto::BOOL, {});
  setType(body->add_input(), "y_in", TensorProto::FLOAT, {-1}, false);
  setType(body->add_input(), "s_in", TensorProto::FLOAT, {2});
  addNode(*body, "Identity", {"c"}, {"c_out"});
  auto* cast = addNode(*body, "Cast", {"i"}, {"fi"});
  addInt(cast, "to", TensorProto::FLOAT);
  addInt64s(*body, "axes", {1}, {0});
  addNode(*body, "Unsqueeze", {"fi", "axes"}, {"fi1"});
  addNode(*body, "Mul", {"fi1", "k"}, {"fk"});  // k: an outer value
  auto* concat = addNode(*body, "Concat", {"y_in", "fk"}, {"y_out"});
  addInt(concat, "axis", 0);
  setType(body->add_output(), "c_out", TensorProto::BOOL, {});
  setType(body->add_output(), "y_out", TensorProto::FLOAT, {-1});
  setType(body->add_output(), "s_in", TensorProto::FLOAT, {2});
  setType(body->add_output(), "i", TensorProto::INT64, {});
  setType(g.add_output(), "y", TensorProto::FLOAT, {-1});
  setType(g.add_output(), "s", TensorProto::FLOAT, {2});
  setType(g.add_output(), "iters", TensorProto::INT64, {-1});
  return m;
}

TEST(ControlFlow, LoopCarriesGrowingAndPassedThroughValues) {
  onnx::ModelProto m = loopModel();
  auto r = runBoth(m, {{"M", scalarInt(5)}, {"y0", floats({1}, {7})}, {"s0", floats({2}, {3, 4})},
                       {"k", floats({1}, {2})}});
  EXPECT_EQ(valuesOf(r[0][0]), (std::vector<float>{7, 0, 2, 4, 6, 8}));
  EXPECT_EQ(valuesOf(r[0][1]), (std::vector<float>{3, 4}));
  ASSERT_EQ(r[0][2].shape(), (std::vector<int64_t>{5}));
  EXPECT_EQ(std::vector<int64_t>(r[0][2].as<int64_t>(), r[0][2].as<int64_t>() + 5), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  // No iteration at all: the initial values, and empty scan outputs.
  r = runBoth(m, {{"M", scalarInt(0)}, {"y0", floats({1}, {7})}, {"s0", floats({2}, {3, 4})}, {"k", floats({1}, {2})}});
  EXPECT_EQ(valuesOf(r[0][0]), (std::vector<float>{7}));
  EXPECT_EQ(r[0][2].shape(), (std::vector<int64_t>{0}));
}

// A Loop that would not end (a trip count of 2^62; M omitted with a condition that stays
// true is the same) stops at LoadOptions::max_loop_iterations with an error naming it;
// a loop of exactly the limit runs.
TEST(ControlFlow, LoopStopsAtTheIterationLimit) {
  const std::string bytes = bytesOf(loopModel());
  testing::TempDir dir;
  const std::string pta = dir.path("loop.pta");
  compileBytesToArtifact(bytes.data(), bytes.size(), "m.onnx", pta);
  LoadOptions options;
  options.max_loop_iterations = 100;
  Session s(Model::load(pta, options));
  const Tensor y0 = floats({1}, {7}), s0 = floats({2}, {3, 4}), k = floats({1}, {2}), m100 = scalarInt(100),
               endless = scalarInt(int64_t(1) << 62);
  s.setInput("y0", y0);
  s.setInput("s0", s0);
  s.setInput("k", k);
  s.setInput("M", m100);
  s.run();
  EXPECT_EQ(s.outputs()[2].shape(), (std::vector<int64_t>{100}));
  s.setInput("M", endless);
  try {
    s.run();
    ADD_FAILURE() << "an endless loop ran to its end";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'loop0'"), std::string::npos) << what;
    EXPECT_NE(what.find("ran 100 iterations and would run more"), std::string::npos) << what;
  }
}

// The limit from the environment when the options leave it at 0, with the same
// parsing as PARTITA_SHAPE_CACHE: a number in range, else an error naming the variable.
TEST(ControlFlow, IterationLimitAndShapeCacheFromTheEnvironment) {
  unsetenv("PARTITA_MAX_LOOP_ITERATIONS");
  EXPECT_EQ(runtime::loopIterationLimit(0), runtime::kDefaultMaxLoopIterations);
  EXPECT_EQ(runtime::loopIterationLimit(7), 7u);
  setenv("PARTITA_MAX_LOOP_ITERATIONS", "500", 1);
  EXPECT_EQ(runtime::loopIterationLimit(0), 500u);
  EXPECT_EQ(runtime::loopIterationLimit(7), 7u);
  for (const char* bad : {"0", "-3", "12x", "99999999999999999999999", "4611686018427387905"}) {
    setenv("PARTITA_MAX_LOOP_ITERATIONS", bad, 1);
    try {
      runtime::loopIterationLimit(0);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_EQ(std::string(e.what()),
                std::string("PARTITA_MAX_LOOP_ITERATIONS must be a number from 1 to 2^62, not '") + bad + "'");
    }
  }
  unsetenv("PARTITA_MAX_LOOP_ITERATIONS");
  setenv("PARTITA_SHAPE_CACHE", "4097", 1);
  try {
    runtime::shapeCacheEntries(0);
    ADD_FAILURE() << "accepted 4097";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "PARTITA_SHAPE_CACHE must be a number from 1 to 4096, not '4097'");
  }
  setenv("PARTITA_SHAPE_CACHE", "3", 1);
  EXPECT_EQ(runtime::shapeCacheEntries(0), 3u);
  unsetenv("PARTITA_SHAPE_CACHE");
}

// Scan over x[T,2] in reverse along axis 0 and z[2,T] along axis 1: a running sum.
TEST(ControlFlow, ScanAxesAndDirections) {
  onnx::ModelProto m = newModel();
  auto& g = *m.mutable_graph();
  setType(g.add_input(), "s0", TensorProto::FLOAT, {2});
  setType(g.add_input(), "x", TensorProto::FLOAT, {3, 2});
  setType(g.add_input(), "z", TensorProto::FLOAT, {2, 3});
  auto* n = addNode(g, "Scan", {"s0", "x", "z"}, {"s", "ys"}, "scan0");
  addInt(n, "num_scan_inputs", 2);
  addInts(n, "scan_input_axes", {0, 1});
  addInts(n, "scan_input_directions", {1, 0});
  addInts(n, "scan_output_axes", {1});
  auto* body = addGraph(n, "body", "body");
  setType(body->add_input(), "s_in", TensorProto::FLOAT, {2});
  setType(body->add_input(), "x_t", TensorProto::FLOAT, {2});
  setType(body->add_input(), "z_t", TensorProto::FLOAT, {2});
  addNode(*body, "Add", {"s_in", "x_t"}, {"a"});
  addNode(*body, "Add", {"a", "z_t"}, {"s_out"});
  addNode(*body, "Identity", {"s_out"}, {"y_t"});
  setType(body->add_output(), "s_out", TensorProto::FLOAT, {2});
  setType(body->add_output(), "y_t", TensorProto::FLOAT, {2});
  setType(g.add_output(), "s", TensorProto::FLOAT, {2});
  setType(g.add_output(), "ys", TensorProto::FLOAT, {2, 3});
  // x rows (reversed): [5,6], [3,4], [1,2]; z columns: [10,40], [20,50], [30,60].
  auto r = runBoth(m, {{"s0", floats({2}, {0, 0})}, {"x", floats({3, 2}, {1, 2, 3, 4, 5, 6})},
                       {"z", floats({2, 3}, {10, 20, 30, 40, 50, 60})}});
  EXPECT_EQ(valuesOf(r[0][0]), (std::vector<float>{69, 162}));
  // ys[:, t] = running sums 15,46 / 38,100 / 69,162, laid out along axis 1.
  EXPECT_EQ(valuesOf(r[0][1]), (std::vector<float>{15, 38, 69, 46, 100, 162}));
}

TEST(ControlFlow, ArtifactKeepsNestedGraphsAndTheirConstants) {
  onnx::ModelProto m = ifModel();
  const std::string bytes = bytesOf(m);
  testing::TempDir dir;
  const std::string pta = dir.path("m.pta");
  compileBytesToArtifact(bytes.data(), bytes.size(), "m.onnx", pta);
  artifact::Artifact a = artifact::openArtifact(pta);
  ASSERT_EQ(a.graph->nodes.size(), 1u);
  const ir::Graph* then_g = a.graph->nodes[0].attrs.getGraph("then_branch");
  ASSERT_NE(then_g, nullptr);
  EXPECT_EQ(then_g->captures, 1u);
  bool reads_constant = false;
  for (const ir::Value& v : then_g->values) reads_constant |= v.isConstant() && a.store->has(v.constant);
  EXPECT_TRUE(reads_constant) << "the branch's initializer is in the one weight table";
}

// A sample-rate switch over symbolic dims: an If on an input whose branches make
// different lengths ([N,4,?]), then a Conv. With oneDNN each branch's Conv and the
// Conv after the If are regions (shape-polymorphic), and the results match the host's.
TEST(ControlFlow, IfOnAnInputOverSymbolicDimsHasRegionsInsideAndAfter) {
  onnx::ModelProto m = newModel();
  auto& g = *m.mutable_graph();
  setType(g.add_input(), "x", TensorProto::FLOAT, {-1, 1, -1});
  setType(g.add_input(), "cond", TensorProto::BOOL, {});
  auto* n = addNode(g, "If", {"cond"}, {"y"}, "sr_if");
  for (const auto& [attr, kernel, stride] : {std::tuple{"then_branch", 4, 2}, std::tuple{"else_branch", 2, 1}}) {
    auto* b = addGraph(n, attr, attr);
    std::vector<float> w(size_t(4 * kernel));
    for (size_t i = 0; i < w.size(); ++i) w[i] = 0.1f * float(i % 7) - 0.2f * float(stride);
    addFloats(*b, std::string("w_") + attr, {4, 1, kernel}, w);
    auto* conv = addNode(*b, "Conv", {"x", std::string("w_") + attr}, {std::string("c_") + attr});
    addInts(conv, "strides", {stride});
    addNode(*b, "Relu", {std::string("c_") + attr}, {std::string("r_") + attr});
    setType(b->add_output(), std::string("r_") + attr, TensorProto::FLOAT, {-1, 4, -1});
  }
  addFloats(g, "w_after", {2, 4, 1}, {0.5f, -1, 0.25f, 2, 1, 1, -0.5f, 0.75f});
  addNode(g, "Conv", {"y", "w_after"}, {"z"}, "after");
  setType(g.add_output(), "z", TensorProto::FLOAT, {-1, 2, -1});
  const std::string bytes = bytesOf(m);

  CompileOptions dnnl;
  dnnl.backends = {"dnnl", "host"};
  CompiledGraph c = compileGraphFromBytes(Bytes::copyOf(bytes.data(), bytes.size()), "m.onnx", dnnl);
  auto calls = [](const ir::Graph& graph) {
    return std::count_if(graph.nodes.begin(), graph.nodes.end(), [](const ir::Node& x) { return x.op_type == "Call"; });
  };
  EXPECT_EQ(calls(c.graph), 1) << c.graph.str();  // the Conv after the If
  for (const ir::Node& node : c.graph.nodes) {
    if (node.op_type != "If") continue;
    for (const char* attr : {"then_branch", "else_branch"}) EXPECT_EQ(calls(*node.attrs.find(attr)->graph), 1) << attr;
  }

  auto on_host = compileOnnxBytes(bytes.data(), bytes.size(), "m.onnx");
  auto on_dnnl = compileOnnxBytes(bytes.data(), bytes.size(), "m.onnx", dnnl);
  for (int64_t length : {9, 16}) {
    std::vector<float> x(size_t(2 * length));
    for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 37 % 11) - 5) * 0.3f;
    for (bool cond : {true, false}) {
      std::vector<Tensor> out;
      const Tensor x_in = floats({2, 1, length}, x), cond_in = scalarBool(cond);  // bound, not copied
      for (const auto& model : {on_host, on_dnnl}) {
        Session s(model);
        s.setInput("x", x_in);
        s.setInput("cond", cond_in);
        s.run();
        out.push_back(s.outputs()[0]);
      }
      const int64_t frames = cond ? (length - 4) / 2 + 1 : length - 1;
      ASSERT_EQ(out[1].shape(), (std::vector<int64_t>{2, 2, frames}));
      ASSERT_EQ(out[0].shape(), out[1].shape());
      for (int64_t i = 0; i < out[0].numel(); ++i)
        EXPECT_NEAR(out[1].as<float>()[i], out[0].as<float>()[i], 1e-5f) << "length " << length << " cond " << cond;
    }
  }
}

TEST(ControlFlow, BadInputIsNamedByNode) {
  {  // a body reading a name nothing defines
    onnx::ModelProto m = ifModel();
    auto* then_g = m.mutable_graph()->mutable_node(0)->mutable_attribute(0)->mutable_g();
    then_g->mutable_node(0)->set_input(1, "nowhere");
    const std::string e = errorOf(m);
    EXPECT_NE(e.find("reads 'nowhere', which nothing defines"), std::string::npos) << e;
    EXPECT_NE(e.find("node 'if0'"), std::string::npos) << e;
  }
  {  // branches making different element types
    onnx::ModelProto m = ifModel();
    auto* else_g = m.mutable_graph()->mutable_node(0)->mutable_attribute(1)->mutable_g();
    else_g->clear_node();
    else_g->clear_output();
    addInt64s(*else_g, "e", {3}, {1, 2, 3});
    setType(else_g->add_output(), "e", TensorProto::INT64, {3});
    m.mutable_graph()->mutable_output(0)->mutable_type()->mutable_tensor_type()->set_elem_type(TensorProto::UNDEFINED);
    const std::string e = errorOf(m);
    EXPECT_NE(e.find("If node 'if0'"), std::string::npos) << e;
    EXPECT_NE(e.find("in then_branch but int64[3] in else_branch"), std::string::npos) << e;
  }
  {  // a Loop condition that is not a scalar
    onnx::ModelProto m = loopModel();
    auto& g = *m.mutable_graph();
    setType(g.add_input(), "cond", TensorProto::BOOL, {2});
    g.mutable_node(0)->set_input(1, "cond");
    const std::string e = errorOf(m);
    EXPECT_NE(e.find("Loop node 'loop0'"), std::string::npos) << e;
    EXPECT_NE(e.find("the condition must be a scalar (one element) but is bool[2]"), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace partita
