// The ONNX graph builder: parses the ModelProto, checks the opset imports, and turns
// initializers, graph inputs, nodes (in dependency order) and outputs into an ir::Graph,
// collecting every unsupported op use into one error. Tensor data is read by
// onnx_tensor_reader.h, old-opset nodes are upgraded by onnx_legacy_opset.h.
#include "frontend/onnx/onnx_importer.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>
#include <utility>

#include "base/mapped_file.h"
#include "frontend/onnx/onnx_legacy_opset.h"
#include "frontend/onnx/onnx_tensor_reader.h"
#include "kernels/op_registry.h"
#include "partita/error.h"

namespace partita::frontend {

namespace {

using onnx_import::invalid;
using onnx_import::kMinOpset;
using onnx_import::parseMessage;
using onnx_import::requireDType;
using onnx_import::TensorReader;
using onnx_import::unsupported;

// Kernels implement opsets 7..21 of the default domain. Older models (opset 1..6) are
// imported as opset 7 when every op they use has the same definition in both opsets or
// a known rewrite (onnx_legacy_opset.h). Within the range, each node resolves to its
// op's newest definition at or below the model's opset (kernels/op_arity.inc); a node
// whose definition there is newer than what its kernel implements is refused by name
// (kernels::unimplementedVersion, docs/ops.md).
constexpr int kMaxOpset = 21;
// Any domain's version must be at least 1 and fit an int (Node::opset).
constexpr int64_t kMaxOpsetVersion = INT_MAX;

std::string inQuotes(const std::string& s) { return "'" + s + "'"; }

ir::TensorType tensorTypeFromProto(const onnx::TypeProto::Tensor& tt, const std::string& what) {
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

// A tensor, a sequence of tensors, or an optional of either (ir::ValueKind); maps,
// sparse tensors and nested sequences are refused by name. An absent type is an
// unknown one (dtype kUndefined) unless `must_be_known`.
ir::TensorType typeFromProto(const onnx::TypeProto& tp, const std::string& what, bool must_be_known,
                             int depth = 0) {
  auto refuse = [&](const char* kind) {
    unsupported(what + " is " + kind +
                "; partita supports tensors, sequences of tensors and optionals of those");
  };
  switch (tp.value_case()) {
    case onnx::TypeProto::kTensorType:
      return tensorTypeFromProto(tp.tensor_type(), what);
    case onnx::TypeProto::kSequenceType: {
      const onnx::TypeProto& elem = tp.sequence_type().elem_type();
      if (elem.value_case() == onnx::TypeProto::VALUE_NOT_SET) return ir::TensorType::sequenceOf({});
      if (!elem.has_tensor_type()) refuse("a sequence of non-tensors");
      return ir::TensorType::sequenceOf(tensorTypeFromProto(elem.tensor_type(), what));
    }
    case onnx::TypeProto::kOptionalType: {
      const onnx::TypeProto& elem = tp.optional_type().elem_type();
      if (depth > 0 || elem.has_optional_type()) refuse("an optional of an optional");
      if (elem.value_case() == onnx::TypeProto::VALUE_NOT_SET) return ir::TensorType::optionalOf({});
      return ir::TensorType::optionalOf(typeFromProto(elem, what, true, depth + 1));
    }
    case onnx::TypeProto::VALUE_NOT_SET:
      if (must_be_known && depth > 0) refuse("of no type");
      return {};
    case onnx::TypeProto::kMapType:
      refuse("a map");
      return {};
    case onnx::TypeProto::kSparseTensorType:
      refuse("a sparse tensor");
      return {};
    default:
      refuse("not a tensor");
      return {};
  }
}

// The outer-scope values the subgraphs of one control-flow node read, in the order
// they were first read; the node passes them as its last inputs (Graph::captures).
struct NodeCaptures {
  std::vector<ir::ValueId> outer;  // in the enclosing graph
};

// One graph being imported: the main graph, or a subgraph inside the scope of the
// graph holding its node. Names resolve here first, then outward; an outer value a
// subgraph reads becomes one of its inputs (structurally, never looked up by name at
// run time), and an outer constant becomes a constant value of the subgraph with the
// same ConstId.
struct Scope {
  ir::Graph* graph = nullptr;
  Scope* parent = nullptr;
  NodeCaptures* captures = nullptr;              // a subgraph's: its node's list
  std::map<size_t, ir::ValueId> captured;        // capture index -> this graph's input value
  std::unordered_map<std::string, ir::ValueId> names;
  std::unordered_map<std::string, const onnx::TypeProto*> declared;
  int depth = 0;
};

struct UnsupportedUse {
  int opset = 0;
  std::vector<std::string> nodes;
  std::string reason;  // e.g. "subgraph attribute 'body'"
};

class Importer {
 public:
  Importer(std::string path, const ImportOptions& options)
      : path_(std::move(path)),
        options_(options),
        tensors_(std::filesystem::path(path_).parent_path(), options.external_data_root) {}
  // A model given as bytes: `name` stands for its file in messages; no external data.
  Importer(Bytes model, std::string name, const ImportOptions& options)
      : path_(std::move(name)), options_(options), memory_(std::move(model)), tensors_(TensorReader::withoutFiles()) {}

  ir::Graph run() {
    loadModel();
    readOpsets();
    const onnx::GraphProto& gp = model_.graph();
    graph_.name = gp.name();
    if (gp.sparse_initializer_size() > 0) unsupported(where() + "sparse initializers are not supported");
    Scope main;
    main.graph = &graph_;
    scope_ = &main;
    addInitializers(*model_.mutable_graph());
    addInputs(gp);
    collectValueInfo(gp);
    addNodes(gp);
    addOutputs(gp);
    applyInputShapes();
    reportUnsupported();
    if (options_.sources) {
      if (!memory_) options_.sources->push_back(model_file_);
      for (const SourceFile& f : tensors_.files()) options_.sources->push_back(f);
    }
    return std::move(graph_);
  }

 private:
  std::string where() const { return path_ + ": "; }

  void loadModel() {
    Bytes file;
    if (memory_) {
      file = *memory_;
    } else {
      OpenedFile opened = openRegularFile(path_);
      model_file_ = {opened.id(), "the input model '" + path_ + "'"};
      file = mapFile(opened);
    }
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
      // Checked as read: an int64 version cut to int would turn 2^62 into 0.
      if (op.version() < 1 || op.version() > kMaxOpsetVersion)
        unsupported(where() + "the model uses opset " + std::to_string(op.version()) + " of " +
                    (domain.empty() ? "the default ONNX domain; " + supportedOpsets()
                                    : "domain '" + domain + "', which is out of range (1.." +
                                          std::to_string(kMaxOpsetVersion) + ")"));
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
      unsupported(where() + "the model uses opset " + std::to_string(it->second) + " of the default ONNX domain; " +
                  supportedOpsets());
  }

  static std::string supportedOpsets() {
    return "partita supports opsets " + std::to_string(kMinOpset) + ".." + std::to_string(kMaxOpset) +
           " (and older models whose ops are unchanged in opset " + std::to_string(kMinOpset) + ")";
  }

  ir::Graph& cur() { return *scope_->graph; }

  // The value `name` names in scope `s`: its own, else an outer one (captured).
  ir::ValueId resolve(Scope& s, const std::string& name) {
    auto it = s.names.find(name);
    if (it != s.names.end()) return it->second;
    if (!s.parent) return ir::kNoValue;
    ir::ValueId outer = resolve(*s.parent, name);
    if (outer == ir::kNoValue) return ir::kNoValue;
    const ir::Value& ov = s.parent->graph->value(outer);
    ir::ValueId inner;
    if (ov.isConstant()) {
      inner = constantValue(*s.graph, name, ov.constant);
    } else {
      std::vector<ir::ValueId>& outer_ids = s.captures->outer;
      size_t k = size_t(std::find(outer_ids.begin(), outer_ids.end(), outer) - outer_ids.begin());
      if (k == outer_ids.size()) outer_ids.push_back(outer);
      inner = s.graph->addValue(name, ov.type);
      s.captured[k] = inner;
    }
    s.names.emplace(name, inner);
    return inner;
  }
  ir::ValueId lookup(const std::string& name) { return resolve(*scope_, name); }

  // A constant value of `g` for constant `id` of the one pool (subgraphs have none).
  ir::ValueId constantValue(ir::Graph& g, const std::string& name, ir::ConstId id) {
    const ir::Constant& c = graph_.constants.get(id);
    ir::ValueId v = g.addValue(name, ir::TensorType::of(c.dtype, c.shape));
    g.value(v).constant = id;
    return v;
  }

  void define(const std::string& name, ir::ValueId id, const std::string& who) {
    if (name.empty()) invalid(where() + who + " defines a value with an empty name");
    if (!scope_->names.emplace(name, id).second) invalid(where() + who + " redefines value '" + name + "'");
  }

  // A subgraph's initializers go into the one pool too (the writer stores identical
  // bytes once).
  void addInitializers(onnx::GraphProto& gp) {
    for (int i = 0; i < gp.initializer_size(); ++i) {
      onnx::TensorProto& t = *gp.mutable_initializer(i);
      std::string what = "initializer '" + t.name() + "'";
      auto r = tensors_.read(t, what);
      checkConstant(r, what);
      ir::ConstId id = graph_.constants.add(t.name(), r.dtype, std::move(r.shape), std::move(r.bytes));
      ir::ValueId v = constantValue(cur(), t.name(), id);
      define(t.name(), v, what);
    }
  }

  void addInputs(const onnx::GraphProto& gp) {
    const bool main = scope_->parent == nullptr;
    for (const auto& in : gp.input()) {
      auto own = scope_->names.find(in.name());
      if (own != scope_->names.end()) {
        // Older models list initializers among the inputs too; those stay constants.
        if (cur().value(own->second).isConstant()) continue;
        invalid(where() + "graph input '" + in.name() + "' is listed twice");
      }
      const std::string what = (main ? "graph input '" : "subgraph '" + gp.name() + "' input '") + in.name() + "'";
      ir::TensorType t = typeFromProto(in.type(), what, true);
      if (main && t.dtype == ir::DType::kUndefined) invalid(where() + what + " has no element type");
      // Unless --shape fixes it (checked then), a declared input must keep the limits.
      if (!main || !options_.input_shapes.count(in.name()))
        ir::checkLimits(t, options_.limits, ErrorCode::kInvalidModel, where() + what);
      ir::ValueId v = cur().addValue(in.name(), t);
      define(in.name(), v, main ? "graph input" : what);
      cur().inputs.push_back(v);
    }
  }

  void collectValueInfo(const onnx::GraphProto& gp) {
    for (const auto& vi : gp.value_info()) scope_->declared[vi.name()] = &vi.type();
    for (const auto& vi : gp.output()) scope_->declared[vi.name()] = &vi.type();
  }

  ir::TensorType declaredType(const std::string& name) {
    auto it = scope_->declared.find(name);
    if (it == scope_->declared.end()) return {};
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
      checkConstant(r, what);
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
    define(out, constantValue(cur(), out, id), what);
  }

  ir::Attribute convertAttribute(const onnx::AttributeProto& a, const std::string& node_name,
                                 bool& is_subgraph, NodeCaptures& captures) {
    const std::string what = "attribute '" + a.name() + "' of node '" + node_name + "'";
    if (a.name().rfind("partita.", 0) == 0)
      invalid(where() + what + ": names starting with 'partita.' are partita's own, not a model's");
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
        checkConstant(rt, what);
        r.kind = ir::Attribute::Kind::kTensor;
        r.tensor = graph_.constants.add(node_name + "." + a.name(), rt.dtype, std::move(rt.shape),
                                        std::move(rt.bytes));
        break;
      }
      case AP::GRAPH:
        is_subgraph = true;
        r.kind = ir::Attribute::Kind::kGraph;
        r.graph = importSubgraph(a.g(), node_name, a.name(), captures);
        break;
      case AP::TYPE_PROTO: {
        // Optional's `type`: kept as ints {value kind, ONNX element type code} (docs/ops.md).
        const ir::TensorType t = typeFromProto(a.tp(), where() + what, true);
        if (t.kind == ir::ValueKind::kOptional) unsupported(where() + what + " is an optional type");
        const onnx::TypeProto& elem =
            t.kind == ir::ValueKind::kSequence ? a.tp().sequence_type().elem_type() : a.tp();
        r.kind = ir::Attribute::Kind::kInts;
        r.ints = {int64_t(t.kind), int64_t(elem.tensor_type().elem_type())};
        break;
      }
      case AP::GRAPHS:
        unsupported(where() + what + " is a list of graphs, which partita does not support");
      default:
        unsupported(where() + what + " has type " + AP::AttributeType_Name(type) +
                    ", which partita does not support");
    }
    return r;
  }

  // The names a node reads: its inputs and, for a control-flow node, every name its
  // subgraphs read (outer values among them).
  static void namesRead(const onnx::NodeProto& n, std::vector<std::string>& out, int depth = 0) {
    for (const auto& in : n.input()) out.push_back(in);
    if (depth >= ir::kMaxGraphDepth) return;  // importSubgraph refuses it with a message
    for (const auto& a : n.attribute())
      if (a.has_g())
        for (const auto& sub : a.g().node()) namesRead(sub, out, depth + 1);
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
    std::vector<std::string> reads;
    for (int i = 0; i < n; ++i) {
      reads.clear();
      namesRead(gp.node(i), reads);
      std::set<int> from;
      for (const auto& in : reads) {
        auto it = producer.find(in);
        if (in.empty() || it == producer.end() || scope_->names.count(in) || it->second == i) continue;
        from.insert(it->second);
      }
      for (int p : from) {
        ++indegree[size_t(i)];
        users[size_t(p)].push_back(i);
      }
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

  // Imports the body `gp` of attribute `attr` of node `node_name` as a graph nested in
  // the current scope. The outer values it reads are appended to `captures` (shared by
  // the node's subgraphs); finishSubgraph gives it their inputs once all are known.
  std::shared_ptr<ir::Graph> importSubgraph(const onnx::GraphProto& gp, const std::string& node_name,
                                            const std::string& attr, NodeCaptures& captures) {
    const std::string what = "subgraph '" + attr + "' of node '" + node_name + "'";
    if (scope_->depth + 1 >= ir::kMaxGraphDepth)
      invalid(where() + what + " nests subgraphs deeper than " + std::to_string(ir::kMaxGraphDepth) + " levels");
    if (legacy_opset_) unsupported(where() + what + ": subgraphs in models of opset < " + std::to_string(kMinOpset) + " are not supported");
    if (gp.sparse_initializer_size() > 0) unsupported(where() + what + " has sparse initializers, which are not supported");
    auto g = std::make_shared<ir::Graph>();
    g->name = gp.name().empty() ? node_name + "." + attr : gp.name();
    Scope inner;
    inner.graph = g.get();
    inner.parent = scope_;
    inner.captures = &captures;
    inner.depth = scope_->depth + 1;
    Scope* outer = scope_;
    scope_ = &inner;
    try {
      // The reader moves tensor bytes out of the message; model_ is ours to change.
      onnx::GraphProto& body = const_cast<onnx::GraphProto&>(gp);
      addInitializers(body);
      addInputs(body);
      collectValueInfo(body);
      addNodes(body);
      for (const auto& out : body.output()) {
        ir::ValueId v = lookup(out.name());
        if (v == ir::kNoValue)
          invalid(where() + what + ": output '" + out.name() + "' is never produced");
        ir::Value& val = g->value(v);
        ir::TensorType t = typeFromProto(out.type(), what + " output '" + out.name() + "'", true);
        if (val.producer != ir::kNoNode && val.type.dtype == ir::DType::kUndefined) val.type = t;
        g->outputs.push_back(v);
      }
      if (g->outputs.empty()) invalid(where() + what + " has no outputs");
    } catch (const Error& e) {
      scope_ = outer;
      // Name the control-flow node too: the error may be deep inside its body.
      const std::string msg = e.what();
      if (msg.find("(in subgraph") != std::string::npos) throw;
      throw Error(e.code(), msg + " (in " + what + ")");
    } catch (...) {
      scope_ = outer;
      throw;
    }
    scope_ = outer;
    pending_.push_back({g, std::move(inner.captured)});
    return g;
  }

  // After a node's subgraphs are imported: each gets one input per captured outer value
  // (in the node's order; a value another subgraph read is an unused input here).
  void finishSubgraphs(const NodeCaptures& captures, size_t first_pending) {
    for (size_t p = first_pending; p < pending_.size(); ++p) {
      auto& [g, captured] = pending_[p];
      for (size_t k = 0; k < captures.outer.size(); ++k) {
        auto it = captured.find(k);
        ir::ValueId v = it != captured.end() ? it->second
                                             : g->addValue(scope_->graph->value(captures.outer[k]).name,
                                                           scope_->graph->typeOf(captures.outer[k]));
        g->inputs.push_back(v);
      }
      g->captures = uint32_t(captures.outer.size());
    }
    pending_.resize(first_pending);
  }

  // The ONNX inputs a control-flow node has (omitted trailing ones included), from its
  // subgraph's formal inputs.
  static size_t formalInputs(const ir::Node& node) {
    const ir::Graph* body = nullptr;
    for (const auto& [name, a] : node.attrs.all())
      if (a.kind == ir::Attribute::Kind::kGraph) body = a.graph.get();
    if (!body) return node.inputs.size();
    const size_t body_formal = body->inputs.size() - body->captures;
    if (node.domain.empty() && node.op_type == "Loop") return std::max(node.inputs.size(), body_formal);
    if (node.domain.empty() && node.op_type == "Scan" && node.opset >= 9)
      return std::max(node.inputs.size(), body_formal);
    if (node.domain.empty() && node.op_type == "Scan") return std::max(node.inputs.size(), body_formal + 1);
    return node.inputs.size();
  }

  void addNodes(const onnx::GraphProto& gp) {
    const auto& registry = options_.ops ? *options_.ops : kernels::OpRegistry::global();
    onnx_import::LegacyOpsetUpgrader legacy(
        legacy_opset_, graph_, registry, where(),
        [this](const std::string& key, int opset, const std::string& node_name, std::string reason) {
          noteUnsupported(key, opset, node_name, std::move(reason));
        });
    const bool main = scope_->parent == nullptr;
    for (int idx : topologicalOrder(gp)) {
      const onnx::NodeProto& n = gp.node(idx);
      std::string domain = n.domain() == "ai.onnx" ? "" : n.domain();
      std::string node_name = n.name().empty() ? n.op_type() + "_" + std::to_string(idx) : n.name();
      if (!main && n.name().empty()) node_name = cur().name + "/" + node_name;
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
      std::string key = domain.empty() ? n.op_type() : domain + "." + n.op_type();
      const bool known = registry.find(domain, n.op_type()) != nullptr;
      bool has_subgraph = false;
      NodeCaptures captures;
      const size_t first_pending = pending_.size();
      for (const auto& a : n.attribute()) {
        bool sub = false;
        if (!known && (a.has_g() || a.graphs_size() > 0)) {  // reported below as unsupported
          has_subgraph = true;
          continue;
        }
        ir::Attribute attr = convertAttribute(a, node_name, sub, captures);
        has_subgraph |= sub;
        node.attrs.set(a.name(), std::move(attr));
      }
      finishSubgraphs(captures, first_pending);
      for (const auto& in : n.input()) {
        if (in.empty()) {
          node.inputs.push_back(ir::kNoValue);
          continue;
        }
        ir::ValueId v = lookup(in);
        if (v == ir::kNoValue && !(has_subgraph && !known))
          invalid(where() + "node '" + node_name + "' (" + n.op_type() + ") reads '" + in +
                  "', which nothing defines");
        node.inputs.push_back(v);
      }
      while (!node.inputs.empty() && node.inputs.back() == ir::kNoValue) node.inputs.pop_back();
      if (has_subgraph && known) {
        node.inputs.resize(formalInputs(node), ir::kNoValue);
        node.inputs.insert(node.inputs.end(), captures.outer.begin(), captures.outer.end());
      }
      for (const auto& out : n.output()) {
        if (out.empty()) {
          node.outputs.push_back(ir::kNoValue);
          continue;
        }
        ir::ValueId v = cur().addValue(out, declaredType(out));
        define(out, v, "node '" + node_name + "'");
        node.outputs.push_back(v);
      }
      const kernels::OpDef* def = registry.find(domain, n.op_type());
      std::string version_gap = def ? kernels::unimplementedVersion(*def, node) : std::string();
      if (!known)
        noteUnsupported(key, node.opset, node_name);
      else if (!version_gap.empty())
        noteUnsupported(key, node.opset, node_name, version_gap);
      else if (legacy_opset_ && domain.empty())
        legacy.upgrade(node, key);
      cur().addNode(std::move(node));
    }
  }

  void addOutputs(const onnx::GraphProto& gp) {
    for (const auto& out : gp.output()) {
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
      ir::checkLimits(t, options_.limits, ErrorCode::kInvalidArgument,
                      "input shape " + ir::shapeStr(shape) + " given for '" + name + "'");
    }
  }

  // A constant's bytes are real (the file holds them), but its rank and its size must
  // still keep the limits: kernels walk its dims.
  void checkConstant(const TensorReader::Result& r, const std::string& what) const {
    ir::checkLimits(ir::TensorType::of(r.dtype, r.shape), options_.limits, ErrorCode::kInvalidModel, where() + what);
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
  std::optional<Bytes> memory_;  // the model's bytes when it was given in memory
  onnx::ModelProto model_;
  TensorReader tensors_;
  SourceFile model_file_;
  ir::Graph graph_;
  std::map<std::string, int> opsets_;  // domain ("" = default) -> version
  int legacy_opset_ = 0;               // the opset (1..6) of an old model being imported as opset 7
  Scope* scope_ = nullptr;  // the graph being imported
  // Subgraphs of the node being imported, and which of their values are captures.
  std::vector<std::pair<std::shared_ptr<ir::Graph>, std::map<size_t, ir::ValueId>>> pending_;
  std::map<std::string, UnsupportedUse> unsupported_;  // op type -> where it is used
};

}  // namespace

ir::Graph importOnnx(const std::string& path, const ImportOptions& options) {
  GOOGLE_PROTOBUF_VERIFY_VERSION;
  return Importer(path, options).run();
}

ir::Graph importOnnxBytes(Bytes model, const std::string& name, const ImportOptions& options) {
  GOOGLE_PROTOBUF_VERIFY_VERSION;
  return Importer(std::move(model), name, options).run();
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

}  // namespace partita::frontend
