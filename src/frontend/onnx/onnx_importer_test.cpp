#include "frontend/onnx/onnx_importer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include "kernels/op_registry.h"
#include "partita/error.h"
#include "passes/passes.h"

namespace partita::frontend {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// A registry with a few ops that only need to exist (the importer never runs them).
const kernels::OpRegistry& testOps() {
  static const kernels::OpRegistry r = [] {
    kernels::OpRegistry reg;
    reg.add("Relu", kernels::OpDef{});
    reg.add("Add", kernels::OpDef{});
    reg.add("ConstantOfShape", kernels::OpDef{});
    reg.add("Gelu", kernels::OpDef{}, "com.example");
    return reg;
  }();
  return r;
}

class OnnxImporterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "partita_onnx_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  static onnx::ModelProto newModel(int opset = 13) {
    onnx::ModelProto m;
    m.set_ir_version(7);
    auto* op = m.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    m.mutable_graph()->set_name("g");
    return m;
  }

  static void setType(onnx::ValueInfoProto* vi, const std::string& name, int elem,
                      const std::vector<std::string>& dims) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem);
    auto* shape = tt->mutable_shape();
    for (const std::string& d : dims) {
      auto* dim = shape->add_dim();
      if (!d.empty() && std::isdigit(static_cast<unsigned char>(d[0])))
        dim->set_dim_value(std::stoll(d));
      else if (!d.empty())
        dim->set_dim_param(d);
    }
  }
  static void addInput(onnx::ModelProto& m, const std::string& name, int elem,
                       const std::vector<std::string>& dims) {
    setType(m.mutable_graph()->add_input(), name, elem, dims);
  }
  static void addOutput(onnx::ModelProto& m, const std::string& name, int elem = onnx::TensorProto::FLOAT,
                        const std::vector<std::string>& dims = {}) {
    setType(m.mutable_graph()->add_output(), name, elem, dims);
  }
  static onnx::NodeProto* addNode(onnx::ModelProto& m, const std::string& op, std::vector<std::string> inputs,
                                  std::vector<std::string> outputs, const std::string& name = "") {
    auto* n = m.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (auto& i : inputs) n->add_input(i);
    for (auto& o : outputs) n->add_output(o);
    return n;
  }

  // x (float32 of `dims`) -> Relu -> y.
  static onnx::ModelProto reluModel(const std::vector<std::string>& dims) {
    onnx::ModelProto m = newModel();
    addInput(m, "x", onnx::TensorProto::FLOAT, dims);
    addNode(m, "Relu", {"x"}, {"y"});
    addOutput(m, "y");
    return m;
  }

  std::string write(const onnx::ModelProto& m, const std::string& file = "model.onnx") {
    std::string path = (dir_ / file).string();
    std::ofstream out(path, std::ios::binary);
    m.SerializeToOstream(&out);
    return path;
  }
  std::string writeBytes(const std::string& file, const std::string& bytes) {
    std::string path = (dir_ / file).string();
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), std::streamsize(bytes.size()));
    return path;
  }

  ImportOptions opts() const {
    ImportOptions o;
    o.ops = &testOps();
    return o;
  }
  ir::Graph import(const onnx::ModelProto& m, ImportOptions o) { return importOnnx(write(m), o); }
  ir::Graph import(const onnx::ModelProto& m) { return import(m, opts()); }

  static const ir::Constant& constantOf(const ir::Graph& g, const std::string& value_name) {
    for (const ir::Value& v : g.values)
      if (v.name == value_name && v.isConstant()) return g.constants.get(v.constant);
    throw std::runtime_error("no constant value " + value_name);
  }
  template <typename T>
  static std::vector<T> valuesOf(const ir::Constant& c) {
    std::vector<T> out(c.nbytes() / sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), c.bytes.data, c.nbytes());
    return out;
  }
  static ErrorCode codeOf(const std::function<void()>& f, std::string* message) {
    try {
      f();
    } catch (const Error& e) {
      *message = e.what();
      return e.code();
    }
    *message = "(no error)";
    return ErrorCode::kInternal;
  }

  fs::path dir_;
};

TEST_F(OnnxImporterTest, RawAndTypedInitializers) {
  onnx::ModelProto m = newModel();
  auto* g = m.mutable_graph();
  auto add = [&](const std::string& name, int type, std::vector<int64_t> dims) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(type);
    for (int64_t d : dims) t->add_dims(d);
    addOutput(m, name, type);
    return t;
  };
  float raw[3] = {1.5f, -2.0f, 3.25f};
  add("raw_f32", onnx::TensorProto::FLOAT, {3})
      ->set_raw_data(std::string(reinterpret_cast<char*>(raw), sizeof(raw)));
  auto* f = add("f32", onnx::TensorProto::FLOAT, {2, 2});
  for (float v : {1.f, 2.f, 3.f, 4.f}) f->add_float_data(v);
  auto* i64 = add("i64", onnx::TensorProto::INT64, {2});
  i64->add_int64_data(-7);
  i64->add_int64_data(int64_t(1) << 40);
  auto* i32 = add("i32", onnx::TensorProto::INT32, {});
  i32->add_int32_data(-5);
  auto* h = add("f16", onnx::TensorProto::FLOAT16, {2});
  h->add_int32_data(0x3C00);  // 1.0
  h->add_int32_data(0xC000);  // -2.0
  auto* b = add("bool", onnx::TensorProto::BOOL, {3});
  for (int v : {1, 0, 1}) b->add_int32_data(v);
  auto* i8 = add("i8", onnx::TensorProto::INT8, {2});
  i8->add_int32_data(-128);
  i8->add_int32_data(127);
  auto* u8 = add("u8", onnx::TensorProto::UINT8, {1});
  u8->add_int32_data(255);
  auto* d = add("f64", onnx::TensorProto::DOUBLE, {1});
  d->add_double_data(0.125);
  auto* u32 = add("u32", onnx::TensorProto::UINT32, {1});
  u32->add_uint64_data(4000000000u);
  auto* u64 = add("u64", onnx::TensorProto::UINT64, {1});
  u64->add_uint64_data(uint64_t(1) << 63);

  ir::Graph graph = import(m);
  EXPECT_TRUE(graph.inputs.empty());
  EXPECT_EQ(graph.outputs.size(), 11u);
  EXPECT_TRUE(graph.nodes.empty());

  const ir::Constant& rf = constantOf(graph, "raw_f32");
  EXPECT_EQ(rf.dtype, ir::DType::kFloat32);
  EXPECT_EQ(rf.shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(valuesOf<float>(rf), (std::vector<float>{1.5f, -2.0f, 3.25f}));
  EXPECT_EQ(valuesOf<float>(constantOf(graph, "f32")), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(constantOf(graph, "f32").shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(valuesOf<int64_t>(constantOf(graph, "i64")), (std::vector<int64_t>{-7, int64_t(1) << 40}));
  EXPECT_EQ(constantOf(graph, "i32").shape, std::vector<int64_t>{});
  EXPECT_EQ(valuesOf<int32_t>(constantOf(graph, "i32")), (std::vector<int32_t>{-5}));
  EXPECT_EQ(constantOf(graph, "f16").dtype, ir::DType::kFloat16);
  EXPECT_EQ(valuesOf<uint16_t>(constantOf(graph, "f16")), (std::vector<uint16_t>{0x3C00, 0xC000}));
  EXPECT_EQ(valuesOf<uint8_t>(constantOf(graph, "bool")), (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(valuesOf<int8_t>(constantOf(graph, "i8")), (std::vector<int8_t>{-128, 127}));
  EXPECT_EQ(valuesOf<uint8_t>(constantOf(graph, "u8")), (std::vector<uint8_t>{255}));
  EXPECT_EQ(valuesOf<double>(constantOf(graph, "f64")), (std::vector<double>{0.125}));
  EXPECT_EQ(valuesOf<uint32_t>(constantOf(graph, "u32")), (std::vector<uint32_t>{4000000000u}));
  EXPECT_EQ(valuesOf<uint64_t>(constantOf(graph, "u64")), (std::vector<uint64_t>{uint64_t(1) << 63}));
  EXPECT_EQ(graph.typeOf(graph.outputs[0]).str(), "float32[3]");
}

TEST_F(OnnxImporterTest, InitializerWithWrongSizeIsInvalid) {
  onnx::ModelProto m = newModel();
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(4);
  t->set_raw_data(std::string(12, '\0'));
  addOutput(m, "w");
  std::string msg;
  EXPECT_EQ(codeOf([&] { import(m); }, &msg), ErrorCode::kInvalidModel);
  EXPECT_THAT(msg, HasSubstr("initializer 'w'"));
  EXPECT_THAT(msg, HasSubstr("needs 16 bytes of raw_data but has 12"));
}

TEST_F(OnnxImporterTest, InitializersListedAsInputsStayConstants) {
  onnx::ModelProto m = newModel();
  addInput(m, "x", onnx::TensorProto::FLOAT, {"N", "3"});
  addInput(m, "w", onnx::TensorProto::FLOAT, {"3"});
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(3);
  for (float v : {1.f, 2.f, 3.f}) t->add_float_data(v);
  addNode(m, "Add", {"x", "w"}, {"y"}, "add");
  addOutput(m, "y", onnx::TensorProto::FLOAT, {"N", "3"});

  ir::Graph g = import(m);
  ASSERT_EQ(g.inputs.size(), 1u);
  EXPECT_EQ(g.value(g.inputs[0]).name, "x");
  EXPECT_EQ(g.typeOf(g.inputs[0]).str(), "float32[N,3]");
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].opset, 13);
  EXPECT_TRUE(g.value(g.nodes[0].inputs[1]).isConstant());
  EXPECT_EQ(g.typeOf(g.outputs[0]).str(), "float32[N,3]");
  g.verify();
}

TEST_F(OnnxImporterTest, ExternalDataIsMappedAndSliced) {
  // weights.bin: 8 bytes of padding, a float32[4], then an int64[2].
  std::string blob(8, 'x');
  float w[4] = {0.5f, 1.5f, 2.5f, 3.5f};
  int64_t s[2] = {-1, 42};
  blob.append(reinterpret_cast<char*>(w), sizeof(w));
  blob.append(reinterpret_cast<char*>(s), sizeof(s));
  writeBytes("weights.bin", blob);

  onnx::ModelProto m = newModel();
  auto external = [&](const std::string& name, int type, int64_t dim, size_t offset, size_t length) {
    auto* t = m.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(type);
    t->add_dims(dim);
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    auto kv = [&](const char* k, const std::string& v) {
      auto* e = t->add_external_data();
      e->set_key(k);
      e->set_value(v);
    };
    kv("location", "weights.bin");
    kv("offset", std::to_string(offset));
    kv("length", std::to_string(length));
    addOutput(m, name, type);
  };
  external("w", onnx::TensorProto::FLOAT, 4, 8, 16);
  external("s", onnx::TensorProto::INT64, 2, 24, 16);

  ir::Graph g = import(m);
  const ir::Constant& cw = constantOf(g, "w");
  const ir::Constant& cs = constantOf(g, "s");
  EXPECT_EQ(valuesOf<float>(cw), (std::vector<float>{0.5f, 1.5f, 2.5f, 3.5f}));
  EXPECT_EQ(valuesOf<int64_t>(cs), (std::vector<int64_t>{-1, 42}));
  // Zero copy: both are slices of one mapping of the file.
  EXPECT_EQ(cw.bytes.owner.get(), cs.bytes.owner.get());
  EXPECT_EQ(cs.bytes.data - cw.bytes.data, 16);
}

TEST_F(OnnxImporterTest, ExternalDataOutOfRangeIsAClearError) {
  writeBytes("weights.bin", std::string(20, '\0'));
  onnx::ModelProto m = newModel();
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(4);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* e = t->add_external_data();
  e->set_key("location");
  e->set_value("weights.bin");
  e = t->add_external_data();
  e->set_key("offset");
  e->set_value("8");
  e = t->add_external_data();
  e->set_key("length");
  e->set_value("16");
  addOutput(m, "w");
  std::string msg;
  EXPECT_EQ(codeOf([&] { import(m); }, &msg), ErrorCode::kInvalidModel);
  EXPECT_THAT(msg, HasSubstr("initializer 'w'"));
  EXPECT_THAT(msg, HasSubstr("outside"));
  EXPECT_THAT(msg, HasSubstr("(20 bytes)"));

  // A location outside the model's folder is refused.
  t->mutable_external_data(0)->set_value("../weights.bin");
  EXPECT_EQ(codeOf([&] { import(m); }, &msg), ErrorCode::kInvalidModel);
  EXPECT_THAT(msg, HasSubstr("must be a relative path inside the model's directory"));

  // A missing file is an I/O error naming it.
  t->mutable_external_data(0)->set_value("missing.bin");
  EXPECT_EQ(codeOf([&] { import(m); }, &msg), ErrorCode::kIo);
  EXPECT_THAT(msg, HasSubstr("missing.bin"));
}

// codeOf's answer when nothing was thrown.
constexpr ErrorCode kImported = ErrorCode::kInternal;

// An initializer w: float32[4] stored externally with these key/value entries.
onnx::ModelProto externalModel(const std::vector<std::pair<std::string, std::string>>& entries) {
  onnx::ModelProto m;
  m.set_ir_version(7);
  auto* op = m.add_opset_import();
  op->set_version(13);
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(4);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  for (const auto& [k, v] : entries) {
    auto* e = t->add_external_data();
    e->set_key(k);
    e->set_value(v);
  }
  auto* out = m.mutable_graph()->add_output();
  out->set_name("w");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  return m;
}

TEST_F(OnnxImporterTest, ExternalDataKeysAreParsedStrictly) {
  writeBytes("weights.bin", std::string(32, '\0'));
  std::string msg;
  auto refused = [&](std::vector<std::pair<std::string, std::string>> kv) {
    return codeOf([&] { import(externalModel(kv)); }, &msg);
  };
  EXPECT_EQ(refused({{"location", "weights.bin"}, {"offset", "16"}}), kImported);
  for (const char* bad : {"16xyz", "-5", "+16", " 16", "0x10", "99999999999999999999", ""}) {
    EXPECT_EQ(refused({{"location", "weights.bin"}, {"offset", bad}}), ErrorCode::kInvalidModel) << bad;
    EXPECT_THAT(msg, HasSubstr("external data offset '" + std::string(bad) + "' is not a non-negative decimal integer"));
    EXPECT_EQ(refused({{"location", "weights.bin"}, {"length", bad}}), ErrorCode::kInvalidModel) << bad;
    EXPECT_THAT(msg, HasSubstr("external data length '" + std::string(bad) + "'"));
  }
  EXPECT_EQ(refused({{"location", "weights.bin"}, {"offset", "9223372036854775807"}, {"length", "16"}}),
            ErrorCode::kInvalidModel);
  EXPECT_THAT(msg, HasSubstr("offset 9223372036854775807 is past the end of 'weights.bin' (32 bytes)"));
  EXPECT_EQ(refused({{"location", "weights.bin"}, {"offset", "8"}, {"length", "9223372036854775807"}}),
            ErrorCode::kInvalidModel);
  EXPECT_THAT(msg, HasSubstr("is outside 'weights.bin' (32 bytes)"));
  EXPECT_EQ(refused({{"location", "weights.bin"}, {"offset", "8"}, {"length", "8"}}), ErrorCode::kInvalidModel);
  EXPECT_THAT(msg, HasSubstr("needs 16 bytes but its external data in 'weights.bin' has 8"));
  EXPECT_EQ(refused({{"location", "weights.bin"}, {"offset", "16"}, {"offset", "0"}}), ErrorCode::kInvalidModel);
  EXPECT_THAT(msg, HasSubstr("external data key 'offset' is given twice"));
  EXPECT_EQ(refused({{"location", "weights.bin"}, {"basepath", "/etc"}}), ErrorCode::kInvalidModel);
  EXPECT_THAT(msg, HasSubstr("unknown key 'basepath'"));
  EXPECT_EQ(refused({{"location", "weights.bin"}, {"offset", "16"}, {"checksum", "abc"}}), kImported);
}

TEST_F(OnnxImporterTest, ExternalDataMustStayBeneathTheModelsFolder) {
  fs::create_directories(dir_ / "m" / "sub");
  fs::create_directories(dir_ / "blobs");
  writeBytes("blobs/secret.bin", std::string(16, 's'));
  writeBytes("m/w.bin", std::string(16, 'w'));
  fs::create_symlink("../../blobs/secret.bin", dir_ / "m/sub/out.bin");
  fs::create_symlink("../w.bin", dir_ / "m/sub/in.bin");
  fs::create_symlink("../blobs", dir_ / "m/blobdir");
  ASSERT_EQ(::mkfifo((dir_ / "m/pipe.bin").c_str(), 0644), 0);
  std::string msg;
  auto importAt = [&](const std::string& location, const std::string& root = "") {
    ImportOptions o = opts();
    o.external_data_root = root;
    return codeOf([&] { importOnnx(write(externalModel({{"location", location}}), "m/model.onnx"), o); }, &msg);
  };
  EXPECT_EQ(importAt("sub/in.bin"), kImported);  // a symlink inside the folder: fine
  for (const char* loc : {"sub/out.bin", "blobdir/secret.bin"}) {
    EXPECT_EQ(importAt(loc), ErrorCode::kIo) << loc;
    EXPECT_THAT(msg, HasSubstr("initializer 'w': external data '" + std::string(loc) + "'"));
    EXPECT_THAT(msg, HasSubstr("resolves to '" + fs::canonical(dir_ / "blobs/secret.bin").string() + "'"));
    EXPECT_THAT(msg, HasSubstr("--external-data-root"));
    // A trusted root lets it through.
    EXPECT_EQ(importAt(loc, (dir_ / "blobs").string()), kImported) << msg;
  }
  EXPECT_EQ(importAt("pipe.bin"), ErrorCode::kIo);
  EXPECT_THAT(msg, HasSubstr("is a FIFO, not a regular file"));
  EXPECT_EQ(importAt("sub"), ErrorCode::kIo);
  EXPECT_THAT(msg, HasSubstr("is a directory, not a regular file"));
}

TEST_F(OnnxImporterTest, ReportsTheFilesItRead) {
  writeBytes("w.bin", std::string(16, 'w'));
  std::vector<SourceFile> sources;
  ImportOptions o = opts();
  o.sources = &sources;
  std::string model = write(externalModel({{"location", "w.bin"}}));
  importOnnx(model, o);
  ASSERT_EQ(sources.size(), 2u);
  FileId model_id, data_id;
  ASSERT_TRUE(fileIdOf(model, model_id));
  ASSERT_TRUE(fileIdOf((dir_ / "w.bin").string(), data_id));
  EXPECT_EQ(sources[0].id, model_id);
  EXPECT_THAT(sources[0].what, HasSubstr("the input model"));
  EXPECT_EQ(sources[1].id, data_id);
  EXPECT_THAT(sources[1].what, HasSubstr("external data 'w.bin'"));
}

TEST_F(OnnxImporterTest, ImportsFromBytesWithoutExternalData) {
  onnx::ModelProto m = newModel();
  addInput(m, "x", onnx::TensorProto::FLOAT, {"2"});
  addNode(m, "Relu", {"x"}, {"y"});
  addOutput(m, "y");
  std::string bytes = m.SerializeAsString();
  std::vector<SourceFile> sources;
  ImportOptions o = opts();
  o.sources = &sources;
  ir::Graph g = importOnnxBytes(Bytes::copyOf(bytes.data(), bytes.size()), "mem.onnx", o);
  EXPECT_EQ(g.nodes.size(), 1u);
  EXPECT_TRUE(sources.empty());
  // A model in memory has no folder to read external data from, whatever files exist.
  writeBytes("w.bin", std::string(16, 'w'));
  std::string ext = externalModel({{"location", "w.bin"}}).SerializeAsString();
  std::string msg;
  EXPECT_EQ(codeOf([&] { importOnnxBytes(Bytes::copyOf(ext.data(), ext.size()), "mem.onnx", opts()); }, &msg),
            ErrorCode::kInvalidModel);
  EXPECT_THAT(msg, HasSubstr("initializer 'w': external data 'w.bin' cannot be read: the model was given as bytes"));
  EXPECT_EQ(codeOf([&] { importOnnxBytes(Bytes::copyOf("\xff\xff", 2), "mem.onnx", opts()); }, &msg),
            ErrorCode::kInvalidModel);
  EXPECT_THAT(msg, HasSubstr("mem.onnx: not a valid ONNX model"));
}

TEST_F(OnnxImporterTest, ConstantNodesBecomeConstants) {
  onnx::ModelProto m = newModel();
  auto constant = [&](const std::string& out) {
    auto* n = addNode(m, "Constant", {}, {out});
    addOutput(m, out, onnx::TensorProto::UNDEFINED);
    return n->add_attribute();
  };
  auto* a = constant("t");
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto::INT32);
  a->mutable_t()->add_dims(2);
  a->mutable_t()->add_int32_data(3);
  a->mutable_t()->add_int32_data(4);
  a = constant("f");
  a->set_name("value_float");
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(2.5f);
  a = constant("fs");
  a->set_name("value_floats");
  a->set_type(onnx::AttributeProto::FLOATS);
  a->add_floats(1.f);
  a->add_floats(-1.f);
  a = constant("i");
  a->set_name("value_int");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(9);
  a = constant("is");
  a->set_name("value_ints");
  a->set_type(onnx::AttributeProto::INTS);
  for (int v : {1, 2, 3}) a->add_ints(v);

  ir::Graph g = import(m);
  EXPECT_TRUE(g.nodes.empty());
  EXPECT_EQ(valuesOf<int32_t>(constantOf(g, "t")), (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(constantOf(g, "f").shape, std::vector<int64_t>{});
  EXPECT_EQ(valuesOf<float>(constantOf(g, "f")), (std::vector<float>{2.5f}));
  EXPECT_EQ(valuesOf<float>(constantOf(g, "fs")), (std::vector<float>{1.f, -1.f}));
  EXPECT_EQ(constantOf(g, "i").dtype, ir::DType::kInt64);
  EXPECT_EQ(valuesOf<int64_t>(constantOf(g, "i")), (std::vector<int64_t>{9}));
  EXPECT_EQ(valuesOf<int64_t>(constantOf(g, "is")), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(g.typeOf(g.outputs[4]).str(), "int64[3]");
  g.verify();
}

TEST_F(OnnxImporterTest, AttributesAndTensorAttributes) {
  onnx::ModelProto m = newModel(9);
  addInput(m, "shape", onnx::TensorProto::INT64, {"2"});
  auto* n = addNode(m, "ConstantOfShape", {"shape"}, {"y"});
  auto* a = n->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  a->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
  a->mutable_t()->add_dims(1);
  a->mutable_t()->add_float_data(7.f);
  n = addNode(m, "Relu", {"y"}, {"z"});
  a = n->add_attribute();
  a->set_name("ints");
  a->set_type(onnx::AttributeProto::INTS);
  a->add_ints(4);
  a = n->add_attribute();
  a->set_name("mode");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s("edge");
  addOutput(m, "z", onnx::TensorProto::FLOAT, {"A", "B"});

  ir::Graph g = import(m);
  ASSERT_EQ(g.nodes.size(), 2u);
  // Generated names: "<OpType>_<index>".
  EXPECT_EQ(g.nodes[0].name, "ConstantOfShape_0");
  EXPECT_EQ(g.nodes[1].name, "Relu_1");
  EXPECT_EQ(g.nodes[0].opset, 9);
  ir::ConstId id = g.nodes[0].attrs.getTensor("value");
  ASSERT_NE(id, ir::kNoConst);
  EXPECT_EQ(valuesOf<float>(g.constants.get(id)), (std::vector<float>{7.f}));
  EXPECT_EQ(g.nodes[1].attrs.getInts("ints"), (std::vector<int64_t>{4}));
  EXPECT_EQ(g.nodes[1].attrs.getString("mode", ""), "edge");
  g.verify();
}

TEST_F(OnnxImporterTest, UnsupportedOpsAreListedInOneError) {
  onnx::ModelProto m = newModel(13);
  addInput(m, "x", onnx::TensorProto::FLOAT, {"4"});
  auto loop = [&](const std::string& name, const std::string& in, const std::string& out) {
    auto* n = addNode(m, "Loop", {"", "", in}, {out}, name);
    auto* a = n->add_attribute();
    a->set_name("body");
    a->set_type(onnx::AttributeProto::GRAPH);
    a->mutable_g()->set_name("body");
  };
  loop("loop_0", "x", "a");
  loop("loop_1", "a", "b");
  addNode(m, "NoSuchOp", {"b"}, {"c"}, "nms");
  addNode(m, "Relu", {"c"}, {"d"}, "relu");
  addOutput(m, "d");
  std::string msg;
  EXPECT_EQ(codeOf([&] { import(m); }, &msg), ErrorCode::kUnsupported);
  EXPECT_THAT(msg, HasSubstr("model uses 2 unsupported op types: Loop (opset 13; nodes 'loop_0', 'loop_1'), "
                             "NoSuchOp (opset 13; node 'nms')"));
}

TEST_F(OnnxImporterTest, OtherDomainsUseTheirOwnOpset) {
  onnx::ModelProto m = newModel(13);
  auto* op = m.add_opset_import();
  op->set_domain("com.example");
  op->set_version(2);
  addInput(m, "x", onnx::TensorProto::FLOAT, {"4"});
  addNode(m, "Gelu", {"x"}, {"y"}, "gelu")->set_domain("com.example");
  addNode(m, "Swish", {"y"}, {"z"}, "swish")->set_domain("com.example");
  addOutput(m, "z");
  std::string msg;
  EXPECT_EQ(codeOf([&] { import(m); }, &msg), ErrorCode::kUnsupported);
  EXPECT_THAT(msg, HasSubstr("model uses 1 unsupported op type: com.example.Swish (opset 2; node 'swish')"));

  m.mutable_graph()->mutable_node(1)->set_op_type("Gelu");
  ir::Graph g = import(m);
  EXPECT_EQ(g.nodes[0].domain, "com.example");
  EXPECT_EQ(g.nodes[0].opset, 2);
}

TEST_F(OnnxImporterTest, OpsetsAboveTwentyOneAreUnsupported) {
  for (int opset : {0, 22}) {
    onnx::ModelProto m = newModel(opset);
    addInput(m, "x", onnx::TensorProto::FLOAT, {"4"});
    addNode(m, "Relu", {"x"}, {"y"});
    addOutput(m, "y");
    std::string msg;
    EXPECT_EQ(codeOf([&] { import(m); }, &msg), ErrorCode::kUnsupported);
    EXPECT_THAT(msg, HasSubstr("opset " + std::to_string(opset)));
    EXPECT_THAT(msg, HasSubstr("supports opsets 7..21"));
  }
  for (int opset : {18, 21}) {
    onnx::ModelProto m = reluModel({"4"});
    m.mutable_opset_import(0)->set_version(opset);
    EXPECT_NO_THROW(import(m)) << "opset " << opset;
  }
}

// A node resolves to its op's newest definition at or below the model's opset; one newer
// than what the kernel implements is refused by node, op and versions, as is an op ONNX
// added only after the model's opset.
TEST_F(OnnxImporterTest, DefinitionsNewerThanTheKernelsAreNamed) {
  kernels::OpRegistry reg;
  reg.add("Pad", kernels::OpDef{});                          // implements up to opset 17
  reg.add("Resize", kernels::OpDef{nullptr, nullptr, 19});  // up to Resize-19
  reg.add("Gelu", kernels::OpDef{nullptr, nullptr, 20});
  ImportOptions o;
  o.ops = &reg;
  auto one = [&](int opset, const std::string& op) {
    onnx::ModelProto m = newModel(opset);
    addInput(m, "x", onnx::TensorProto::FLOAT, {"4"});
    addNode(m, op, {"x"}, {"y"}, "n");
    addOutput(m, "y");
    return m;
  };
  std::string msg;
  EXPECT_NO_THROW(import(one(17, "Pad"), o));  // Pad-13
  EXPECT_NO_THROW(import(one(21, "Resize"), o));
  EXPECT_EQ(codeOf([&] { import(one(19, "Pad"), o); }, &msg), ErrorCode::kUnsupported);
  EXPECT_THAT(msg, HasSubstr("Pad (opset 19; opset 19 gives it Pad's opset-19 definition, which partita does not "
                             "implement (it implements Pad up to the opset-13 definition); node 'n')"));
  EXPECT_EQ(codeOf([&] { import(one(18, "Pad"), o); }, &msg), ErrorCode::kUnsupported);
  EXPECT_THAT(msg, HasSubstr("Pad's opset-18 definition"));
  EXPECT_EQ(codeOf([&] { import(one(17, "Gelu"), o); }, &msg), ErrorCode::kUnsupported);
  EXPECT_THAT(msg, HasSubstr("Gelu (opset 17; Gelu is not an op of opset 17 (ONNX added it in opset 20); node 'n')"));
  EXPECT_EQ(kernels::schemaVersion("", "Resize", 21), 19);
  EXPECT_EQ(kernels::schemaVersion("", "ReduceMean", 20), 18);
  EXPECT_EQ(kernels::schemaVersion("", "Relu", 21), 14);
  EXPECT_EQ(kernels::schemaVersion("com.example", "Relu", 21), 0);
}

TEST_F(OnnxImporterTest, Float8AndInt4TensorsAreNamed) {
  const std::pair<int, const char*> types[] = {{17, "float8e4m3fn"}, {19, "float8e5m2"}, {22, "int4"}};
  for (const auto& [type, name] : types) {
    onnx::ModelProto m = reluModel({"4"});
    m.mutable_opset_import(0)->set_version(21);
    auto* t = m.mutable_graph()->add_initializer();
    t->set_name("w");
    t->set_data_type(type);
    t->add_dims(2);
    t->set_raw_data(std::string(2, '\0'));
    std::string msg;
    EXPECT_EQ(codeOf([&] { import(m); }, &msg), ErrorCode::kUnsupported);
    EXPECT_THAT(msg, HasSubstr(std::string("initializer 'w' has element type ") + name +
                               ", which partita does not support"));
  }
}

TEST_F(OnnxImporterTest, OpsetVersionsAreCheckedAsRead) {
  // 2^62 cut to an int is 0: the message must say 2^62.
  const int64_t big = int64_t(1) << 62;
  onnx::ModelProto m = reluModel({"4"});
  m.mutable_opset_import(0)->set_version(big);
  std::string msg;
  EXPECT_EQ(codeOf([&] { import(m); }, &msg), ErrorCode::kUnsupported);
  EXPECT_THAT(msg, HasSubstr("opset " + std::to_string(big) + " of the default ONNX domain"));
  onnx::ModelProto custom = reluModel({"4"});
  auto* op = custom.add_opset_import();
  op->set_domain("com.example");
  op->set_version(-3);
  EXPECT_EQ(codeOf([&] { import(custom); }, &msg), ErrorCode::kUnsupported);
  EXPECT_THAT(msg, HasSubstr("opset -3 of domain 'com.example', which is out of range"));
}

TEST_F(OnnxImporterTest, DeclaredInputsAndConstantsKeepTheLimits) {
  std::string msg;
  onnx::ModelProto huge = reluModel({"4611686018427387904", "4"});
  EXPECT_EQ(codeOf([&] { import(huge); }, &msg), ErrorCode::kInvalidModel);
  EXPECT_THAT(msg, HasSubstr("graph input 'x': float32[4611686018427387904,4] has more bytes than 64 bits count"));

  onnx::ModelProto deep = reluModel(std::vector<std::string>(17, "1"));
  EXPECT_EQ(codeOf([&] { import(deep); }, &msg), ErrorCode::kInvalidModel);
  EXPECT_THAT(msg, HasSubstr("graph input 'x': rank 17 is over the limit of 16"));
  // A raised limit lets it through.
  ImportOptions roomy = opts();
  roomy.limits.max_rank = 17;
  EXPECT_EQ(import(deep, roomy).typeOf(import(deep, roomy).inputs[0]).rank(), 17u);

  // A symbolic input fixed past the limit is the caller's error.
  onnx::ModelProto sym = reluModel({"N"});
  ImportOptions fixed = opts();
  fixed.input_shapes["x"] = {int64_t(1) << 40};
  EXPECT_EQ(codeOf([&] { import(sym, fixed); }, &msg), ErrorCode::kInvalidArgument);
  EXPECT_THAT(msg, HasSubstr("given for 'x': float32[1099511627776] needs 4398046511104 bytes"));

  // An initializer of rank 17 (its bytes are real, its dims still too many).
  onnx::ModelProto init = newModel();
  auto* w = init.mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  for (int i = 0; i < 17; ++i) w->add_dims(1);
  w->add_float_data(1.f);
  addNode(init, "Relu", {"w"}, {"y"});
  addOutput(init, "y");
  EXPECT_EQ(codeOf([&] { import(init); }, &msg), ErrorCode::kInvalidModel);
  EXPECT_THAT(msg, HasSubstr("initializer 'w': rank 17"));
}

TEST_F(OnnxImporterTest, Opset6IsUpgradedToNumpyBroadcasting) {
  onnx::ModelProto m = newModel(6);
  addInput(m, "x", onnx::TensorProto::FLOAT, {"2", "3", "4"});
  addInput(m, "b", onnx::TensorProto::FLOAT, {"3"});
  auto* slope = m.mutable_graph()->add_initializer();
  slope->set_name("slope");
  slope->set_data_type(onnx::TensorProto::FLOAT);
  slope->add_dims(3);
  for (float v : {0.1f, 0.2f, 0.3f}) slope->add_float_data(v);
  auto* add = addNode(m, "Add", {"x", "b"}, {"y"}, "add");
  auto* a = add->add_attribute();
  a->set_name("broadcast");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(1);
  a = add->add_attribute();
  a->set_name("axis");
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(1);
  addNode(m, "PRelu", {"x", "slope"}, {"z"}, "prelu");
  addOutput(m, "y");
  addOutput(m, "z");

  kernels::OpRegistry ops = testOps();
  ops.add("PRelu", kernels::OpDef{});
  ops.add("Unsqueeze", kernels::OpDef{});
  ImportOptions o = opts();
  o.ops = &ops;
  ir::Graph g = import(m, o);
  g.verify();
  // b (a graph input) is unsqueezed to [3,1]; the per-channel slope constant becomes [3,1].
  ASSERT_EQ(g.nodes.size(), 3u);
  EXPECT_EQ(g.nodes[0].op_type, "Unsqueeze");
  EXPECT_EQ(g.nodes[0].attrs.getInts("axes"), (std::vector<int64_t>{1}));
  EXPECT_EQ(g.typeOf(g.nodes[0].outputs[0]).str(), "float32[3,1]");
  EXPECT_EQ(g.nodes[1].op_type, "Add");
  EXPECT_EQ(g.nodes[1].opset, 7);
  EXPECT_FALSE(g.nodes[1].attrs.has("broadcast"));
  EXPECT_FALSE(g.nodes[1].attrs.has("axis"));
  EXPECT_EQ(g.nodes[1].inputs[1], g.nodes[0].outputs[0]);
  const ir::Value& s = g.value(g.nodes[2].inputs[1]);
  ASSERT_TRUE(s.isConstant());
  EXPECT_EQ(g.constants.get(s.constant).shape, (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(valuesOf<float>(g.constants.get(s.constant)), (std::vector<float>{0.1f, 0.2f, 0.3f}));
}

TEST_F(OnnxImporterTest, OldOpsetsImportOnlyOpsUnchangedSinceThen) {
  // Relu's definition changed at opset 6 (consumed_inputs dropped): fine from opset 6,
  // unsupported in an opset-5 model. Abs is likewise. Not never changed.
  onnx::ModelProto m = newModel(5);
  addInput(m, "x", onnx::TensorProto::BOOL, {"4"});
  addNode(m, "Not", {"x"}, {"y"}, "not");
  addOutput(m, "y", onnx::TensorProto::BOOL);
  kernels::OpRegistry ops = testOps();
  ops.add("Not", kernels::OpDef{});
  ImportOptions o = opts();
  o.ops = &ops;
  ir::Graph g = import(m, o);
  ASSERT_EQ(g.nodes.size(), 1u);
  EXPECT_EQ(g.nodes[0].opset, 7);

  addNode(m, "Relu", {"y"}, {"z"}, "relu");
  m.mutable_graph()->mutable_output(0)->set_name("z");
  std::string msg;
  EXPECT_EQ(codeOf([&] { import(m, o); }, &msg), ErrorCode::kUnsupported);
  EXPECT_THAT(msg, HasSubstr("Relu (opset 5; its opset-5 definition differs from opset 7; node 'relu')"));

  m.mutable_opset_import(0)->set_version(6);
  g = import(m, o);
  EXPECT_EQ(g.nodes[1].opset, 7);
}

TEST_F(OnnxImporterTest, TruncatedGarbageAndEmptyFilesAreInvalidModels) {
  onnx::ModelProto m = newModel();
  addInput(m, "x", onnx::TensorProto::FLOAT, {"1", "3", "224", "224"});
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(256);
  t->set_raw_data(std::string(1024, '\1'));
  addNode(m, "Add", {"x", "w"}, {"y"});
  addOutput(m, "y");
  std::string full = m.SerializeAsString();

  std::string msg;
  std::string truncated = writeBytes("truncated.onnx", full.substr(0, full.size() / 2));
  EXPECT_EQ(codeOf([&] { importOnnx(truncated, opts()); }, &msg), ErrorCode::kInvalidModel);
  EXPECT_THAT(msg, HasSubstr(truncated + ": not a valid ONNX model: "));

  std::string garbage_bytes;
  uint32_t x = 12345;
  for (int i = 0; i < 4096; ++i) {
    x = x * 1103515245u + 12345u;
    garbage_bytes.push_back(char(x >> 24));
  }
  std::string garbage = writeBytes("garbage.onnx", garbage_bytes);
  EXPECT_EQ(codeOf([&] { importOnnx(garbage, opts()); }, &msg), ErrorCode::kInvalidModel);
  EXPECT_THAT(msg, HasSubstr(garbage + ": not a valid ONNX model: "));

  std::string text = writeBytes("text.onnx", "this is not a model\n");
  EXPECT_EQ(codeOf([&] { importOnnx(text, opts()); }, &msg), ErrorCode::kInvalidModel);
  EXPECT_THAT(msg, HasSubstr(text + ": not a valid ONNX model: "));

  std::string empty = writeBytes("empty.onnx", "");
  EXPECT_EQ(codeOf([&] { importOnnx(empty, opts()); }, &msg), ErrorCode::kInvalidModel);
  EXPECT_THAT(msg, HasSubstr(empty + ": not a valid ONNX model: the file is empty"));

  std::string missing = (dir_ / "missing.onnx").string();
  EXPECT_EQ(codeOf([&] { importOnnx(missing, opts()); }, &msg), ErrorCode::kIo);
  EXPECT_THAT(msg, HasSubstr(missing));
}

TEST_F(OnnxImporterTest, InputShapesOverrideSymbolicDims) {
  onnx::ModelProto m = newModel();
  addInput(m, "x", onnx::TensorProto::FLOAT, {"N", "3", "", "W"});
  addNode(m, "Relu", {"x"}, {"y"});
  addOutput(m, "y");
  ImportOptions o = opts();
  ir::Graph plain = import(m, o);
  EXPECT_EQ(plain.typeOf(plain.inputs[0]).str(), "float32[N,3,?,W]");

  o.input_shapes["x"] = {2, 3, 8, 8};
  ir::Graph fixed = import(m, o);
  EXPECT_EQ(fixed.typeOf(fixed.inputs[0]).str(), "float32[2,3,8,8]");

  std::string msg;
  o.input_shapes["x"] = {2, 3, 8};
  EXPECT_EQ(codeOf([&] { import(m, o); }, &msg), ErrorCode::kInvalidArgument);
  EXPECT_THAT(msg, HasSubstr("'x'"));
  EXPECT_THAT(msg, HasSubstr("rank 3"));

  o.input_shapes["x"] = {2, 4, 8, 8};
  EXPECT_EQ(codeOf([&] { import(m, o); }, &msg), ErrorCode::kInvalidArgument);
  EXPECT_THAT(msg, HasSubstr("conflicts with its static dimension 1"));

  o.input_shapes.clear();
  o.input_shapes["images"] = {1};
  EXPECT_EQ(codeOf([&] { import(m, o); }, &msg), ErrorCode::kInvalidArgument);
  EXPECT_THAT(msg, HasSubstr("'images', which is not an input of the model (inputs: 'x')"));
}

TEST_F(OnnxImporterTest, UndefinedInputsAndNonTensorValuesAreReported) {
  onnx::ModelProto m = newModel();
  addInput(m, "x", onnx::TensorProto::FLOAT, {"4"});
  addNode(m, "Add", {"x", "nowhere"}, {"y"}, "add");
  addOutput(m, "y");
  std::string msg;
  EXPECT_EQ(codeOf([&] { import(m); }, &msg), ErrorCode::kInvalidModel);
  EXPECT_THAT(msg, HasSubstr("node 'add' (Add) reads 'nowhere', which nothing defines"));

  onnx::ModelProto s = newModel();
  auto* in = s.mutable_graph()->add_input();
  in->set_name("seq");
  in->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(1);
  addNode(s, "Relu", {"seq"}, {"y"});
  addOutput(s, "y");
  // A sequence imports; the op that reads it as a tensor is refused by name.
  ir::Graph sg = import(s);
  EXPECT_EQ(sg.typeOf(sg.inputs[0]).str(), "seq(float32[*])");
  EXPECT_EQ(codeOf([&] { passes::inferShapes(sg); }, &msg), ErrorCode::kInvalidModel);
  EXPECT_THAT(msg,
              HasSubstr("input 0 ('seq') is a sequence of float32 tensors, but Relu takes tensors only"));

  onnx::ModelProto mp = newModel();
  auto* map_in = mp.mutable_graph()->add_input();
  map_in->set_name("m");
  map_in->mutable_type()->mutable_map_type()->set_key_type(7);
  addNode(mp, "Relu", {"m"}, {"y"});
  addOutput(mp, "y");
  EXPECT_EQ(codeOf([&] { import(mp); }, &msg), ErrorCode::kUnsupported);
  EXPECT_THAT(
      msg,
      HasSubstr("graph input 'm' is a map; partita supports tensors, sequences of tensors and optionals"));

  onnx::ModelProto str = newModel();
  addInput(str, "text", onnx::TensorProto::STRING, {"2"});
  addNode(str, "Relu", {"text"}, {"y"});
  addOutput(str, "y");
  EXPECT_EQ(codeOf([&] { import(str); }, &msg), ErrorCode::kUnsupported);
  EXPECT_THAT(msg, HasSubstr("element type string"));
}

TEST_F(OnnxImporterTest, NodesOutOfOrderAreSorted) {
  onnx::ModelProto m = newModel();
  addInput(m, "x", onnx::TensorProto::FLOAT, {"4"});
  addNode(m, "Relu", {"a"}, {"b"}, "second");
  addNode(m, "Relu", {"x"}, {"a"}, "first");
  addOutput(m, "b");
  ir::Graph g = import(m);
  ASSERT_EQ(g.nodes.size(), 2u);
  EXPECT_EQ(g.nodes[0].name, "first");
  EXPECT_EQ(g.nodes[1].name, "second");
  g.verify();
}

TEST_F(OnnxImporterTest, ReadsTensorProtoFiles) {
  onnx::TensorProto t;
  t.set_name("input_0");
  t.set_data_type(onnx::TensorProto::INT64);
  t.add_dims(2);
  t.add_dims(1);
  t.add_int64_data(5);
  t.add_int64_data(-6);
  std::string path = writeBytes("input_0.pb", t.SerializeAsString());
  ir::OwnedTensor r = readTensorProtoFile(path);
  EXPECT_EQ(r.dtype(), ir::DType::kInt64);
  EXPECT_EQ(r.shape(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(r.as<int64_t>()[0], 5);
  EXPECT_EQ(r.as<int64_t>()[1], -6);

  std::string msg;
  std::string bad = writeBytes("bad.pb", "\xff\xff\xff\xff garbage");
  EXPECT_EQ(codeOf([&] { readTensorProtoFile(bad); }, &msg), ErrorCode::kInvalidModel);
  EXPECT_THAT(msg, HasSubstr(bad + ": not a valid TensorProto file"));

  t.add_int64_data(7);  // 3 values for 2 elements
  std::string wrong = writeBytes("wrong.pb", t.SerializeAsString());
  EXPECT_EQ(codeOf([&] { readTensorProtoFile(wrong); }, &msg), ErrorCode::kInvalidModel);
  EXPECT_THAT(msg, HasSubstr("has 3 values in int64_data but its shape holds 2"));
}

}  // namespace
}  // namespace partita::frontend
