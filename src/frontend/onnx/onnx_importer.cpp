#include "frontend/onnx/onnx_importer.h"

#include <google/protobuf/io/coded_stream.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>

#include "kernels/op_registry.h"
#include "base/mapped_file.h"
#include "partita/error.h"

namespace partita::frontend {

namespace {

// Kernels implement opsets 7..17 of the default domain. Older models (opset 1..6: the
// PyTorch test models, many older exports) are imported as opset 7 when every op they
// use has the same definition in both opsets (per ONNX's schema registry), or is an
// op with a known rewrite to its opset-7 form (see upgradeToOpset7).
constexpr int kMinOpset = 7;
constexpr int kMaxOpset = 17;

[[noreturn]] void invalid(const std::string& msg) { throw Error(ErrorCode::kInvalidModel, msg); }
[[noreturn]] void unsupported(const std::string& msg) { throw Error(ErrorCode::kUnsupported, msg); }

std::string inQuotes(const std::string& s) { return "'" + s + "'"; }

std::string onnxTypeName(int t) {
  if (onnx::TensorProto_DataType_IsValid(t)) {
    std::string n = onnx::TensorProto_DataType_Name(onnx::TensorProto_DataType(t));
    std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return n;
  }
  return "data type " + std::to_string(t);
}

// Maps an ONNX element type, throwing kUnsupported (string, complex) or kInvalidModel.
ir::DType requireDType(int t, const std::string& what) {
  ir::DType d = ir::dtypeFromOnnx(t);
  if (d != ir::DType::kUndefined) return d;
  if (t == onnx::TensorProto::UNDEFINED) invalid(what + " has no element type");
  if (onnx::TensorProto_DataType_IsValid(t))
    unsupported(what + " has element type " + onnxTypeName(t) + ", which partita does not support");
  invalid(what + " has an unknown element type " + std::to_string(t));
}

// Parses a protobuf message from bytes without protobuf's default 64 MB-era limits.
template <typename Message>
bool parseMessage(Message& m, const Bytes& bytes) {
  if (bytes.size > size_t(INT_MAX)) return false;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data), int(bytes.size));
  in.SetTotalBytesLimit(INT_MAX);
  in.SetRecursionLimit(256);
  return m.ParseFromCodedStream(&in) && in.ConsumedEntireMessage();
}

bool isLexicallyInside(const std::filesystem::path& rel) {
  if (rel.empty() || rel.is_absolute() || rel.has_root_name()) return false;
  for (const auto& part : rel)
    if (part == "..") return false;
  return true;
}

// Converts TensorProtos to (dtype, shape, bytes). Keeps external-data files mapped
// once each; raw bytes are moved out of the protobuf, not copied.
class TensorReader {
 public:
  explicit TensorReader(std::filesystem::path base_dir) : base_dir_(std::move(base_dir)) {}

  struct Result {
    ir::DType dtype = ir::DType::kUndefined;
    std::vector<int64_t> shape;
    Bytes bytes;
  };

  // `what` names the tensor in error messages ("initializer 'w'").
  Result read(onnx::TensorProto& t, const std::string& what) {
    Result r;
    r.dtype = requireDType(t.data_type(), what);
    int64_t numel = 1;
    for (int64_t d : t.dims()) {
      if (d < 0) invalid(what + " has a negative dimension " + std::to_string(d));
      if (d != 0 && numel > (int64_t(1) << 50) / d) invalid(what + " is impossibly large");
      numel *= d;
      r.shape.push_back(d);
    }
    if (t.has_segment()) unsupported(what + " is segmented, which partita does not support");
    const size_t esize = ir::dtypeSize(r.dtype);
    const size_t nbytes = size_t(numel) * esize;

    if (t.data_location() == onnx::TensorProto::EXTERNAL) {
      r.bytes = readExternal(t, what, nbytes);
      return r;
    }
    if (t.has_raw_data()) {
      if (t.raw_data().size() != nbytes)
        invalid(what + " of type " + std::string(ir::dtypeName(r.dtype)) + ir::shapeStr(r.shape) + " needs " +
                std::to_string(nbytes) + " bytes of raw_data but has " + std::to_string(t.raw_data().size()));
      auto holder = std::make_shared<std::string>(std::move(*t.mutable_raw_data()));
      r.bytes = Bytes{holder, reinterpret_cast<const std::byte*>(holder->data()), holder->size()};
      return r;
    }
    r.bytes = readTyped(t, r.dtype, numel, what);
    return r;
  }

 private:
  Bytes readExternal(const onnx::TensorProto& t, const std::string& what, size_t nbytes) {
    std::string location;
    int64_t offset = 0, length = -1;
    for (const auto& kv : t.external_data()) {
      try {
        if (kv.key() == "location") {
          location = kv.value();
        } else if (kv.key() == "offset") {
          offset = std::stoll(kv.value());
        } else if (kv.key() == "length") {
          length = std::stoll(kv.value());
        }
      } catch (const std::exception&) {
        invalid(what + ": external data " + kv.key() + " '" + kv.value() + "' is not a number");
      }
    }
    if (location.empty()) invalid(what + " has external data without a location");
    std::filesystem::path rel(location);
    if (!isLexicallyInside(rel))
      invalid(what + ": external data location '" + location +
              "' must be a relative path inside the model's directory");
    if (offset < 0) invalid(what + ": external data offset " + std::to_string(offset) + " is negative");
    std::string file = (base_dir_ / rel).string();
    auto it = files_.find(file);
    if (it == files_.end()) it = files_.emplace(file, mapFile(file)).first;
    const Bytes& whole = it->second;
    size_t len =
        length < 0 ? (size_t(offset) <= whole.size ? whole.size - size_t(offset) : 0) : size_t(length);
    if (size_t(offset) > whole.size || len > whole.size - size_t(offset))
      invalid(what + ": external data range [" + std::to_string(offset) + ", " + std::to_string(offset) +
              "+" + std::to_string(len) + ") is outside '" + file + "' (" + std::to_string(whole.size) +
              " bytes)");
    if (len != nbytes)
      invalid(what + " needs " + std::to_string(nbytes) + " bytes but its external data in '" + file +
              "' has " + std::to_string(len));
    return whole.slice(size_t(offset), len);
  }

  template <typename Dst, typename Field>
  static Bytes convert(const Field& field, int64_t numel, const std::string& what, const char* field_name) {
    if (int64_t(field.size()) != numel)
      invalid(what + " has " + std::to_string(field.size()) + " values in " + field_name +
              " but its shape holds " + std::to_string(numel));
    std::vector<std::byte> out(size_t(numel) * sizeof(Dst));
    Dst* dst = reinterpret_cast<Dst*>(out.data());
    for (int64_t i = 0; i < numel; ++i) dst[i] = static_cast<Dst>(field.Get(int(i)));
    return Bytes::fromVector(std::move(out));
  }

  static Bytes readTyped(const onnx::TensorProto& t, ir::DType dtype, int64_t numel,
                         const std::string& what) {
    using D = ir::DType;
    switch (dtype) {
      case D::kFloat32:
        return convert<float>(t.float_data(), numel, what, "float_data");
      case D::kFloat64:
        return convert<double>(t.double_data(), numel, what, "double_data");
      case D::kInt64:
        return convert<int64_t>(t.int64_data(), numel, what, "int64_data");
      case D::kInt32:
        return convert<int32_t>(t.int32_data(), numel, what, "int32_data");
      // The ONNX spec stores these narrower types one per int32_data entry
      // (float16/bfloat16 as their raw 16-bit patterns).
      case D::kInt16:
        return convert<int16_t>(t.int32_data(), numel, what, "int32_data");
      case D::kInt8:
        return convert<int8_t>(t.int32_data(), numel, what, "int32_data");
      case D::kUInt16:
      case D::kFloat16:
      case D::kBFloat16:
        return convert<uint16_t>(t.int32_data(), numel, what, "int32_data");
      case D::kUInt8:
        return convert<uint8_t>(t.int32_data(), numel, what, "int32_data");
      case D::kBool: {
        if (int64_t(t.int32_data_size()) != numel)
          invalid(what + " has " + std::to_string(t.int32_data_size()) +
                  " values in int32_data but its shape holds " + std::to_string(numel));
        std::vector<std::byte> out(static_cast<size_t>(numel));
        for (int64_t i = 0; i < numel; ++i) out[size_t(i)] = std::byte(t.int32_data(int(i)) != 0);
        return Bytes::fromVector(std::move(out));
      }
      case D::kUInt32:
        return convert<uint32_t>(t.uint64_data(), numel, what, "uint64_data");
      case D::kUInt64:
        return convert<uint64_t>(t.uint64_data(), numel, what, "uint64_data");
      default:
        unsupported(what + ": element type " + std::string(ir::dtypeName(dtype)) + " is not supported");
    }
  }

  std::filesystem::path base_dir_;
  std::map<std::string, Bytes> files_;
};

ir::TensorType typeFromProto(const onnx::TypeProto& tp, const std::string& what, bool must_be_tensor) {
  if (!tp.has_tensor_type()) {
    if (!must_be_tensor || tp.value_case() == onnx::TypeProto::VALUE_NOT_SET) return {};
    const char* kind = tp.has_sequence_type()        ? "a sequence"
                       : tp.has_map_type()           ? "a map"
                       : tp.has_optional_type()      ? "an optional"
                       : tp.has_sparse_tensor_type() ? "a sparse tensor"
                                                     : "not a tensor";
    unsupported(what + " is " + kind + "; partita supports only tensor values");
  }
  const auto& tt = tp.tensor_type();
  ir::TensorType t;
  if (tt.elem_type() != onnx::TensorProto::UNDEFINED) t.dtype = requireDType(tt.elem_type(), what);
  if (!tt.has_shape()) return ir::TensorType::unranked(t.dtype);
  t.has_rank = true;
  for (const auto& d : tt.shape().dim()) {
    if (d.has_dim_value() && d.dim_value() >= 0)
      t.dims.push_back(ir::Dim::known(d.dim_value()));
    else if (d.has_dim_param())
      t.dims.push_back(ir::Dim::symbolic(d.dim_param()));
    else
      t.dims.push_back(ir::Dim{});
  }
  return t;
}

struct UnsupportedUse {
  int opset = 0;
  std::vector<std::string> nodes;
  std::string reason;  // e.g. "subgraph attribute 'body'"
};

class Importer {
 public:
  Importer(std::string path, const ImportOptions& options)
      : path_(std::move(path)), options_(options), tensors_(std::filesystem::path(path_).parent_path()) {}

  ir::Graph run() {
    loadModel();
    readOpsets();
    const onnx::GraphProto& gp = model_.graph();
    graph_.name = gp.name();
    if (gp.sparse_initializer_size() > 0) unsupported(where() + "sparse initializers are not supported");
    addInitializers();
    addInputs();
    collectValueInfo();
    addNodes();
    addOutputs();
    applyInputShapes();
    reportUnsupported();
    return std::move(graph_);
  }

 private:
  std::string where() const { return path_ + ": "; }

  void loadModel() {
    Bytes file = mapFile(path_);
    if (file.size == 0) invalid(path_ + ": not a valid ONNX model: the file is empty");
    if (file.size > size_t(INT_MAX))
      unsupported(path_ +
                  ": the model file is larger than 2 GiB, which protobuf cannot parse; "
                  "store its weights as ONNX external data");
    if (!parseMessage(model_, file)) invalid(path_ + ": not a valid ONNX model: protobuf parsing failed");
    if (!model_.has_graph()) invalid(path_ + ": not a valid ONNX model: it has no graph");
  }

  void readOpsets() {
    for (const auto& op : model_.opset_import()) {
      std::string domain = op.domain() == "ai.onnx" ? "" : op.domain();
      opsets_[domain] = int(op.version());
    }
    // IR version 3 and older models may omit the import; ONNX then means opset 1.
    auto it = opsets_.find("");
    if (it == opsets_.end()) {
      if (model_.opset_import_size() == 0)
        unsupported(where() + "the model declares no opset; partita supports opsets " +
                    std::to_string(kMinOpset) + ".." + std::to_string(kMaxOpset));
      return;  // only custom domains: each op is checked against the registry
    }
    if (it->second >= 1 && it->second < kMinOpset) {
      legacy_opset_ = it->second;
      it->second = kMinOpset;
      return;
    }
    if (it->second < kMinOpset || it->second > kMaxOpset)
      unsupported(where() + "the model uses opset " + std::to_string(it->second) +
                  " of the default ONNX domain; partita supports opsets " + std::to_string(kMinOpset) + ".." +
                  std::to_string(kMaxOpset) + " (and older models whose ops are unchanged in opset " +
                  std::to_string(kMinOpset) + ")");
  }

  ir::ValueId lookup(const std::string& name) const {
    auto it = names_.find(name);
    return it == names_.end() ? ir::kNoValue : it->second;
  }

  void define(const std::string& name, ir::ValueId id, const std::string& who) {
    if (name.empty()) invalid(where() + who + " defines a value with an empty name");
    if (!names_.emplace(name, id).second) invalid(where() + who + " redefines value '" + name + "'");
  }

  void addInitializers() {
    onnx::GraphProto& gp = *model_.mutable_graph();
    for (int i = 0; i < gp.initializer_size(); ++i) {
      onnx::TensorProto& t = *gp.mutable_initializer(i);
      std::string what = "initializer '" + t.name() + "'";
      auto r = tensors_.read(t, what);
      ir::ConstId id = graph_.constants.add(t.name(), r.dtype, std::move(r.shape), std::move(r.bytes));
      ir::ValueId v = graph_.addConstantValue(t.name(), id);
      define(t.name(), v, what);
    }
  }

  void addInputs() {
    for (const auto& in : model_.graph().input()) {
      if (lookup(in.name()) != ir::kNoValue) {
        // Older models list initializers among the inputs too; those stay constants.
        if (graph_.value(lookup(in.name())).isConstant()) continue;
        invalid(where() + "graph input '" + in.name() + "' is listed twice");
      }
      ir::TensorType t = typeFromProto(in.type(), "graph input '" + in.name() + "'", true);
      if (t.dtype == ir::DType::kUndefined)
        invalid(where() + "graph input '" + in.name() + "' has no element type");
      ir::ValueId v = graph_.addValue(in.name(), t);
      define(in.name(), v, "graph input");
      graph_.inputs.push_back(v);
    }
  }

  void collectValueInfo() {
    for (const auto& vi : model_.graph().value_info()) declared_[vi.name()] = &vi.type();
    for (const auto& vi : model_.graph().output()) declared_[vi.name()] = &vi.type();
  }

  ir::TensorType declaredType(const std::string& name) {
    auto it = declared_.find(name);
    if (it == declared_.end()) return {};
    return typeFromProto(*it->second, "value '" + name + "'", false);
  }

  int opsetOf(const std::string& domain) const {
    auto it = opsets_.find(domain);
    return it == opsets_.end() ? 0 : it->second;
  }

  void noteUnsupported(const std::string& key, int opset, const std::string& node_name,
                       std::string reason = {}) {
    auto [it, fresh] = unsupported_.try_emplace(key);
    if (fresh) {
      it->second.opset = opset;
      it->second.reason = std::move(reason);
    }
    it->second.nodes.push_back(node_name);
  }

  // Constant nodes become constant values (never nodes).
  void addConstantNode(const onnx::NodeProto& n, const std::string& node_name) {
    if (n.output_size() != 1)
      invalid(where() + "Constant node '" + node_name + "' must have exactly one output");
    const std::string& out = n.output(0);
    std::string what = "Constant node '" + node_name + "'";
    if (n.attribute_size() != 1) invalid(where() + what + " must have exactly one value attribute");
    const onnx::AttributeProto& a = n.attribute(0);
    ir::ConstId id = ir::kNoConst;
    auto scalarOrList = [&](auto values, ir::DType dtype, bool scalar) {
      using T = typename decltype(values)::value_type;
      std::vector<int64_t> shape;
      if (!scalar) shape.push_back(int64_t(values.size()));
      return graph_.constants.add(out, dtype, shape, Bytes::copyOf(values.data(), values.size() * sizeof(T)));
    };
    if (a.name() == "value") {
      onnx::TensorProto t = a.t();
      auto r = tensors_.read(t, what);
      id = graph_.constants.add(out, r.dtype, std::move(r.shape), std::move(r.bytes));
    } else if (a.name() == "value_float") {
      id = scalarOrList(std::vector<float>{a.f()}, ir::DType::kFloat32, true);
    } else if (a.name() == "value_floats") {
      id = scalarOrList(std::vector<float>(a.floats().begin(), a.floats().end()), ir::DType::kFloat32, false);
    } else if (a.name() == "value_int") {
      id = scalarOrList(std::vector<int64_t>{a.i()}, ir::DType::kInt64, true);
    } else if (a.name() == "value_ints") {
      id = scalarOrList(std::vector<int64_t>(a.ints().begin(), a.ints().end()), ir::DType::kInt64, false);
    } else if (a.name() == "value_string" || a.name() == "value_strings") {
      unsupported(where() + what + ": string constants are not supported");
    } else if (a.name() == "sparse_value") {
      unsupported(where() + what + ": sparse constants are not supported");
    } else {
      invalid(where() + what + " has an unknown attribute '" + a.name() + "'");
    }
    define(out, graph_.addConstantValue(out, id), what);
  }

  ir::Attribute convertAttribute(const onnx::AttributeProto& a, const std::string& node_name,
                                 bool& is_subgraph) {
    const std::string what = "attribute '" + a.name() + "' of node '" + node_name + "'";
    using AP = onnx::AttributeProto;
    ir::Attribute r;
    AP::AttributeType type = a.type();
    if (type == AP::UNDEFINED) {  // very old models: infer from the field that is set
      if (a.has_f())
        type = AP::FLOAT;
      else if (a.has_i())
        type = AP::INT;
      else if (a.has_s())
        type = AP::STRING;
      else if (a.has_t())
        type = AP::TENSOR;
      else if (a.has_g())
        type = AP::GRAPH;
      else if (a.floats_size())
        type = AP::FLOATS;
      else if (a.ints_size())
        type = AP::INTS;
      else if (a.strings_size())
        type = AP::STRINGS;
      else if (a.graphs_size())
        type = AP::GRAPHS;
      else
        invalid(where() + what + " has no type and no value");
    }
    switch (type) {
      case AP::FLOAT:
        r.kind = ir::Attribute::Kind::kFloat;
        r.f = a.f();
        break;
      case AP::INT:
        r.kind = ir::Attribute::Kind::kInt;
        r.i = a.i();
        break;
      case AP::STRING:
        r.kind = ir::Attribute::Kind::kString;
        r.s = a.s();
        break;
      case AP::FLOATS:
        r.kind = ir::Attribute::Kind::kFloats;
        r.floats.assign(a.floats().begin(), a.floats().end());
        break;
      case AP::INTS:
        r.kind = ir::Attribute::Kind::kInts;
        r.ints.assign(a.ints().begin(), a.ints().end());
        break;
      case AP::STRINGS:
        r.kind = ir::Attribute::Kind::kStrings;
        r.strings.assign(a.strings().begin(), a.strings().end());
        break;
      case AP::TENSOR: {
        onnx::TensorProto t = a.t();
        auto rt = tensors_.read(t, what);
        r.kind = ir::Attribute::Kind::kTensor;
        r.tensor = graph_.constants.add(node_name + "." + a.name(), rt.dtype, std::move(rt.shape),
                                        std::move(rt.bytes));
        break;
      }
      case AP::GRAPH:
      case AP::GRAPHS:
        is_subgraph = true;
        break;
      default:
        unsupported(where() + what + " has type " + AP::AttributeType_Name(type) +
                    ", which partita does not support");
    }
    return r;
  }

  // Orders node indices so that each node comes after the producers of its inputs
  // (ONNX requires this already; tolerate models that break it).
  std::vector<int> topologicalOrder(const onnx::GraphProto& gp) const {
    const int n = gp.node_size();
    std::unordered_map<std::string, int> producer;
    for (int i = 0; i < n; ++i)
      for (const auto& o : gp.node(i).output())
        if (!o.empty()) producer.emplace(o, i);
    std::vector<int> indegree(static_cast<size_t>(n), 0);
    std::vector<std::vector<int>> users(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i)
      for (const auto& in : gp.node(i).input()) {
        auto it = producer.find(in);
        if (in.empty() || it == producer.end() || names_.count(in)) continue;
        ++indegree[size_t(i)];
        users[size_t(it->second)].push_back(i);
      }
    std::vector<int> order;
    order.reserve(size_t(n));
    std::set<int> ready;
    for (int i = 0; i < n; ++i)
      if (indegree[size_t(i)] == 0) ready.insert(i);
    while (!ready.empty()) {
      int i = *ready.begin();
      ready.erase(ready.begin());
      order.push_back(i);
      for (int u : users[size_t(i)])
        if (--indegree[size_t(u)] == 0) ready.insert(u);
    }
    if (int(order.size()) != n) invalid(where() + "the graph has a cycle");
    return order;
  }

  void addNodes() {
    const onnx::GraphProto& gp = model_.graph();
    const auto& registry = options_.ops ? *options_.ops : kernels::OpRegistry::global();
    for (int idx : topologicalOrder(gp)) {
      const onnx::NodeProto& n = gp.node(idx);
      std::string domain = n.domain() == "ai.onnx" ? "" : n.domain();
      std::string node_name = n.name().empty() ? n.op_type() + "_" + std::to_string(idx) : n.name();
      if (n.op_type().empty()) invalid(where() + "node '" + node_name + "' has no op_type");
      if (!opsets_.count(domain))
        invalid(where() + "node '" + node_name + "' uses domain '" + domain +
                "' which the model does not import");
      if (domain.empty() && n.op_type() == "Constant") {
        addConstantNode(n, node_name);
        continue;
      }
      ir::Node node;
      node.op_type = n.op_type();
      node.domain = domain;
      node.opset = opsetOf(domain);
      node.name = node_name;
      bool has_subgraph = false;
      std::string subgraph_attr;
      for (const auto& a : n.attribute()) {
        bool sub = false;
        ir::Attribute attr = convertAttribute(a, node_name, sub);
        if (sub) {
          has_subgraph = true;
          subgraph_attr = a.name();
          continue;
        }
        node.attrs.set(a.name(), std::move(attr));
      }
      for (const auto& in : n.input()) {
        if (in.empty()) {
          node.inputs.push_back(ir::kNoValue);
          continue;
        }
        ir::ValueId v = lookup(in);
        if (v == ir::kNoValue && !has_subgraph)
          invalid(where() + "node '" + node_name + "' (" + n.op_type() + ") reads '" + in +
                  "', which nothing defines");
        node.inputs.push_back(v);
      }
      while (!node.inputs.empty() && node.inputs.back() == ir::kNoValue) node.inputs.pop_back();
      for (const auto& out : n.output()) {
        if (out.empty()) {
          node.outputs.push_back(ir::kNoValue);
          continue;
        }
        ir::ValueId v = graph_.addValue(out, declaredType(out));
        define(out, v, "node '" + node_name + "'");
        node.outputs.push_back(v);
      }
      std::string key = domain.empty() ? n.op_type() : domain + "." + n.op_type();
      if (!registry.find(domain, n.op_type()))
        noteUnsupported(key, node.opset, node_name);
      else if (has_subgraph)
        noteUnsupported(key, node.opset, node_name, "subgraph attribute '" + subgraph_attr + "'");
      else if (legacy_opset_ && domain.empty())
        upgradeLegacyNode(node, key);
      graph_.addNode(std::move(node));
    }
  }

  // Rank of a value when the model tells it (declared type or constant), else -1.
  int64_t knownRank(ir::ValueId v) const {
    if (v == ir::kNoValue) return -1;
    const ir::TensorType& t = graph_.typeOf(v);
    return t.has_rank ? int64_t(t.rank()) : -1;
  }

  // Gives `v` `extra` trailing dimensions of size 1, so that numpy broadcasting aligns
  // it where a legacy broadcast (or a per-channel PRelu slope) aligned it.
  ir::ValueId appendUnitDims(ir::ValueId v, int64_t extra, const std::string& node_name) {
    const ir::Value& val = graph_.value(v);
    std::string name = val.name + "/" + node_name + "/unsqueezed";
    if (val.isConstant()) {
      const ir::Constant& c = graph_.constants.get(val.constant);
      std::vector<int64_t> shape = c.shape;
      shape.insert(shape.end(), size_t(extra), 1);
      ir::ConstId id = graph_.constants.add(name, c.dtype, shape, c.bytes);  // same bytes, new shape
      return graph_.addConstantValue(name, id);
    }
    int64_t rank = knownRank(v);
    std::vector<int64_t> axes;
    for (int64_t i = 0; i < extra; ++i) axes.push_back(rank + i);
    ir::Node unsqueeze;
    unsqueeze.op_type = "Unsqueeze";
    unsqueeze.opset = kMinOpset;
    unsqueeze.name = node_name + "/unsqueeze";
    unsqueeze.attrs.setInts("axes", axes);
    unsqueeze.inputs = {v};
    ir::TensorType t = val.type;
    t.dims.insert(t.dims.end(), size_t(extra), ir::Dim::known(1));
    ir::ValueId out = graph_.addValue(name, t);
    unsqueeze.outputs = {out};
    if (!(options_.ops ? *options_.ops : kernels::OpRegistry::global()).find("", "Unsqueeze"))
      noteUnsupported("Unsqueeze", kMinOpset, unsqueeze.name);
    graph_.addNode(std::move(unsqueeze));
    return out;
  }

  // Imports a node of an opset-1..6 model as opset 7, or notes it as unsupported when
  // its definition changed in between and no rewrite is known.
  void upgradeLegacyNode(ir::Node& node, const std::string& key) {
    const onnx::OpSchema* old_schema = onnx::OpSchemaRegistry::Schema(node.op_type, legacy_opset_, "");
    const onnx::OpSchema* new_schema = onnx::OpSchemaRegistry::Schema(node.op_type, kMinOpset, "");
    if (!old_schema || !new_schema) return;  // not an ONNX op (then also not in the registry)
    if (old_schema->SinceVersion() == new_schema->SinceVersion()) return;  // unchanged
    // Ops whose opset-1..6 forms differ from opset 7 only in ways upgradeToOpset7 rewrites.
    static const std::set<std::string> kRewritten = {
        "Add",    "Sub",  "Mul",   "Div",         "Pow",
        "And",    "Or",   "Xor",   "Equal",       "Greater",
        "Less",   "Gemm", "PRelu", "AveragePool", "BatchNormalization",
        "Dropout"};
    if (kRewritten.count(node.op_type)) {
      upgradeToOpset7(node);
      return;
    }
    noteUnsupported(key, legacy_opset_, node.name,
                    "its opset-" + std::to_string(legacy_opset_) + " definition differs from opset " +
                        std::to_string(kMinOpset));
  }

  void upgradeToOpset7(ir::Node& node) {
    node.attrs.erase("consumed_inputs");  // an opset-1 memory hint without meaning
    static const std::set<std::string> kLegacyBroadcast = {"Add", "Sub", "Mul",   "Div",     "Pow", "And",
                                                           "Or",  "Xor", "Equal", "Greater", "Less"};
    const std::string& op = node.op_type;
    if (kLegacyBroadcast.count(op)) {
      // Opset 1..6: with broadcast=1 and `axis`, B's dims align with A's starting at axis.
      if (node.attrs.getInt("broadcast", 0) != 0 && node.attrs.has("axis") && node.inputs.size() == 2) {
        int64_t ra = knownRank(node.inputs[0]), rb = knownRank(node.inputs[1]);
        if (ra < 0 || rb < 0)
          unsupported(where() + op + " node '" + node.name +
                      "' uses legacy (opset < 7) broadcasting with an axis on inputs of unknown rank");
        int64_t axis = node.attrs.getInt("axis", 0);
        if (axis < 0) axis += ra;
        int64_t extra = ra - axis - rb;
        if (axis < 0 || extra < 0)
          invalid(where() + op + " node '" + node.name + "': broadcast axis " +
                  std::to_string(node.attrs.getInt("axis", 0)) + " does not fit ranks " + std::to_string(ra) +
                  " and " + std::to_string(rb));
        if (extra > 0) node.inputs[1] = appendUnitDims(node.inputs[1], extra, node.name);
      }
      node.attrs.erase("broadcast");
      node.attrs.erase("axis");
    } else if (op == "Gemm") {
      node.attrs.erase("broadcast");  // opset 7 always broadcasts C
    } else if (op == "PRelu" && node.inputs.size() == 2) {
      // Opset 6 applies a 1-D slope per channel (axis 1); numpy broadcasting would
      // align it with the last axis.
      int64_t rx = knownRank(node.inputs[0]);
      const ir::TensorType& st = graph_.typeOf(node.inputs[1]);
      if (rx >= 3 && st.isStatic() && st.rank() == 1 && st.dims[0].value > 1)
        node.inputs[1] = appendUnitDims(node.inputs[1], rx - 2, node.name);
    } else if (op == "BatchNormalization" || op == "Dropout") {
      node.attrs.erase("is_test");
    }
    // AveragePool-7 only adds count_include_pad, whose default (0) is the older behavior.
  }

  void addOutputs() {
    for (const auto& out : model_.graph().output()) {
      ir::ValueId v = lookup(out.name());
      if (v == ir::kNoValue) invalid(where() + "graph output '" + out.name() + "' is never produced");
      ir::Value& val = graph_.value(v);
      ir::TensorType t = typeFromProto(out.type(), "graph output '" + out.name() + "'", true);
      if (val.producer != ir::kNoNode && val.type.dtype == ir::DType::kUndefined) val.type = t;
      graph_.outputs.push_back(v);
    }
    if (graph_.outputs.empty()) invalid(where() + "the graph has no outputs");
  }

  void applyInputShapes() {
    for (const auto& [name, shape] : options_.input_shapes) {
      ir::ValueId v = lookup(name);
      if (v == ir::kNoValue ||
          std::find(graph_.inputs.begin(), graph_.inputs.end(), v) == graph_.inputs.end()) {
        std::string names;
        for (ir::ValueId in : graph_.inputs)
          names += (names.empty() ? "" : ", ") + inQuotes(graph_.value(in).name);
        throw Error(ErrorCode::kInvalidArgument,
                    "input shape given for '" + name +
                        "', which is not an input of the model (inputs: " + names + ")");
      }
      ir::TensorType& t = graph_.value(v).type;
      if (t.has_rank && t.rank() != shape.size())
        throw Error(ErrorCode::kInvalidArgument, "input shape " + ir::shapeStr(shape) + " given for '" +
                                                     name + "' has rank " + std::to_string(shape.size()) +
                                                     " but the input is " + t.str());
      for (size_t i = 0; i < shape.size(); ++i) {
        if (shape[i] < 0)
          throw Error(ErrorCode::kInvalidArgument, "input shape " + ir::shapeStr(shape) + " given for '" +
                                                       name + "' has a negative dimension");
        if (t.has_rank && t.dims[i].isKnown() && t.dims[i].value != shape[i])
          throw Error(ErrorCode::kInvalidArgument, "input shape " + ir::shapeStr(shape) + " given for '" +
                                                       name + "' conflicts with its static dimension " +
                                                       std::to_string(i) + " in " + t.str());
      }
      t = ir::TensorType::of(t.dtype, shape);
    }
  }

  void reportUnsupported() {
    if (unsupported_.empty()) return;
    std::string msg = "model uses " + std::to_string(unsupported_.size()) + " unsupported op type" +
                      (unsupported_.size() == 1 ? "" : "s") + ": ";
    bool first = true;
    for (const auto& [op, use] : unsupported_) {
      if (!first) msg += ", ";
      first = false;
      msg += op + " (opset " + std::to_string(use.opset) + "; ";
      if (!use.reason.empty()) msg += use.reason + "; ";
      msg += use.nodes.size() == 1 ? "node " : "nodes ";
      const size_t shown = std::min<size_t>(use.nodes.size(), 8);
      for (size_t i = 0; i < shown; ++i) msg += (i ? ", " : "") + inQuotes(use.nodes[i]);
      if (use.nodes.size() > shown) msg += " and " + std::to_string(use.nodes.size() - shown) + " more";
      msg += ")";
    }
    unsupported(where() + msg);
  }

  std::string path_;
  const ImportOptions& options_;
  onnx::ModelProto model_;
  TensorReader tensors_;
  ir::Graph graph_;
  std::map<std::string, int> opsets_;  // domain ("" = default) -> version
  int legacy_opset_ = 0;               // the opset (1..6) of an old model being imported as opset 7
  std::unordered_map<std::string, ir::ValueId> names_;
  std::unordered_map<std::string, const onnx::TypeProto*> declared_;
  std::map<std::string, UnsupportedUse> unsupported_;  // op type -> where it is used
};

}  // namespace

ir::Graph importOnnx(const std::string& path, const ImportOptions& options) {
  GOOGLE_PROTOBUF_VERIFY_VERSION;
  return Importer(path, options).run();
}

OnnxFileBytes onnxFileBytes(const std::string& path) {
  Bytes file = mapFile(path);
  onnx::ModelProto model;
  if (!parseMessage(model, file)) invalid(path + ": not a valid ONNX model: protobuf parsing failed");
  OnnxFileBytes r;
  r.file_bytes = file.size;
  for (const onnx::TensorProto& t : model.graph().initializer()) r.weight_bytes += t.raw_data().size();
  return r;
}

ir::OwnedTensor readTensorProtoFile(const std::string& path) {
  Bytes file = mapFile(path);
  onnx::TensorProto t;
  if (!parseMessage(t, file)) invalid(path + ": not a valid TensorProto file: protobuf parsing failed");
  TensorReader reader(std::filesystem::path(path).parent_path());
  auto r = reader.read(t, path + ": tensor '" + t.name() + "'");
  ir::OwnedTensor out(r.dtype, r.shape);
  if (r.bytes.size) std::memcpy(out.data(), r.bytes.data, r.bytes.size);
  return out;
}

}  // namespace partita::frontend
