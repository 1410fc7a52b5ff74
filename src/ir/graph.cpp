#include "ir/graph.h"

#include <ostream>
#include <sstream>

#include "partita/error.h"

namespace partita::ir {

ValueId Graph::addValue(std::string vname, TensorType type) {
  values.push_back(Value{std::move(vname), std::move(type), kNoNode, kNoConst});
  return ValueId(values.size() - 1);
}

ValueId Graph::addConstantValue(std::string vname, ConstId id) {
  const Constant& c = constants.get(id);
  ValueId v = addValue(std::move(vname), TensorType::of(c.dtype, c.shape));
  values[size_t(v)].constant = id;
  return v;
}

NodeId Graph::addNode(Node node) {
  NodeId id = NodeId(nodes.size());
  for (ValueId out : node.outputs)
    if (out != kNoValue) value(out).producer = id;
  nodes.push_back(std::move(node));
  return id;
}

std::vector<int> Graph::useCounts() const {
  std::vector<int> uses(values.size(), 0);
  for (const Node& n : nodes)
    for (ValueId in : n.inputs)
      if (in != kNoValue) ++uses[size_t(in)];
  for (ValueId out : outputs) ++uses[size_t(out)];
  return uses;
}

bool Node::hasSubgraphs() const {
  for (const auto& [name, a] : attrs.all())
    if (a.kind == Attribute::Kind::kGraph) return true;
  return false;
}

size_t Node::numCaptures() const {
  for (const auto& [name, a] : attrs.all())
    if (a.kind == Attribute::Kind::kGraph && a.graph) return a.graph->captures;
  return 0;
}

std::shared_ptr<Graph> Graph::clone() const {
  auto g = std::make_shared<Graph>(*this);
  for (Node& n : g->nodes)
    for (const auto& [aname, a] : n.attrs.all())
      if (a.kind == Attribute::Kind::kGraph && a.graph) n.attrs.setGraph(aname, a.graph->clone());
  return g;
}

namespace {
[[noreturn]] void fail(const std::string& what) {
  throw Error(ErrorCode::kInternal, "graph verification failed: " + what);
}

void verifyGraph(const Graph& g, const ConstantLookup& lookup, int depth);

// A control-flow node's subgraphs: present, not too deep, each with the node's captures.
void verifySubgraphs(const Node& node, const std::string& where, const ConstantLookup& lookup, int depth) {
  bool first = true;
  uint32_t captures = 0;
  for (const auto& [aname, a] : node.attrs.all()) {
    if (a.kind != Attribute::Kind::kGraph) continue;
    if (!a.graph) fail(where + " attribute '" + aname + "' has no graph");
    if (depth + 1 >= kMaxGraphDepth)
      fail(where + " nests subgraphs deeper than " + std::to_string(kMaxGraphDepth) + " levels");
    const Graph& sub = *a.graph;
    if (!sub.constants.all().empty()) fail(where + " subgraph '" + aname + "' has a constant pool of its own");
    if (first) captures = sub.captures;
    first = false;
    if (sub.captures != captures)
      fail(where + " subgraphs read different outer values (" + std::to_string(captures) + " and " +
           std::to_string(sub.captures) + ")");
    if (sub.captures > sub.inputs.size() || sub.captures > node.inputs.size())
      fail(where + " subgraph '" + aname + "' reads " + std::to_string(sub.captures) +
           " outer values but has " + std::to_string(sub.inputs.size()) + " inputs and its node " +
           std::to_string(node.inputs.size()));
    for (size_t k = node.inputs.size() - sub.captures; k < node.inputs.size(); ++k)
      if (node.inputs[k] == kNoValue) fail(where + " passes an omitted value to its subgraphs");
    verifyGraph(sub, lookup, depth + 1);
  }
}
}  // namespace

void Graph::verify() const {
  verify([this](ConstId id) -> std::optional<ConstantInfo> {
    if (id >= constants.size()) return std::nullopt;
    const Constant& c = constants.get(id);
    return ConstantInfo{c.dtype, &c.shape, !c.layout.empty()};
  });
}

void Graph::verify(const ConstantLookup& lookup) const { verifyGraph(*this, lookup, 0); }

namespace {
void verifyGraph(const Graph& g, const ConstantLookup& lookup, int depth) {
  const auto& values = g.values;
  const auto& nodes = g.nodes;
  const auto& inputs = g.inputs;
  const auto& outputs = g.outputs;
  const auto nvalues = ValueId(values.size());
  std::vector<bool> available(values.size(), false);
  std::vector<bool> produced(values.size(), false);
  for (ValueId in : inputs) {
    if (in < 0 || in >= nvalues) fail("graph input id out of range");
    available[size_t(in)] = true;
  }
  for (ValueId v = 0; v < nvalues; ++v) {
    const Value& val = values[size_t(v)];
    if (!val.isConstant()) continue;
    const std::optional<ConstantInfo> c = lookup(val.constant);
    if (!c) fail("value '" + val.name + "' refers to missing constant " + std::to_string(val.constant));
    if (!c->packed && (c->dtype != val.type.dtype || !val.type.isStatic() || *c->shape != val.type.staticShape()))
      fail("constant value '" + val.name + "' has type " + val.type.str() + " but its constant is " +
           std::string(dtypeName(c->dtype)) + shapeStr(*c->shape));
    available[size_t(v)] = true;
  }
  for (size_t n = 0; n < nodes.size(); ++n) {
    const Node& node = nodes[n];
    const std::string where = "node " + std::to_string(n) + " (" + node.op_type + " '" + node.name + "')";
    for (ValueId in : node.inputs) {
      if (in == kNoValue) continue;
      if (in < 0 || in >= nvalues) fail(where + " has an input id out of range");
      if (!available[size_t(in)])
        fail(where + " reads '" + values[size_t(in)].name + "' before it is produced");
    }
    for (ValueId out : node.outputs) {
      if (out == kNoValue) continue;
      if (out < 0 || out >= nvalues) fail(where + " has an output id out of range");
      if (produced[size_t(out)] || available[size_t(out)])
        fail(where + " produces '" + values[size_t(out)].name + "' which already has a producer");
      if (values[size_t(out)].producer != NodeId(n))
        fail(where + " output '" + values[size_t(out)].name + "' has the wrong producer");
      produced[size_t(out)] = true;
      available[size_t(out)] = true;
    }
    for (const auto& [aname, attr] : node.attrs.all())
      if (attr.kind == Attribute::Kind::kTensor && !lookup(attr.tensor))
        fail(where + " attribute '" + aname + "' refers to a missing constant");
    verifySubgraphs(node, where, lookup, depth);
  }
  for (ValueId out : outputs) {
    if (out < 0 || out >= nvalues) fail("graph output id out of range");
    if (!available[size_t(out)]) fail("graph output '" + values[size_t(out)].name + "' is never produced");
  }
  if (g.captures > inputs.size()) fail("the graph reads more outer values than it has inputs");
}
}  // namespace

namespace {
void printAttr(std::ostream& os, const Graph& g, const Attribute& a) {
  auto list = [&os](const auto& v) {
    os << '[';
    for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
    os << ']';
  };
  switch (a.kind) {
    case Attribute::Kind::kInt: os << a.i; break;
    case Attribute::Kind::kFloat: os << a.f; break;
    case Attribute::Kind::kString: os << '"' << a.s << '"'; break;
    case Attribute::Kind::kInts: list(a.ints); break;
    case Attribute::Kind::kFloats: list(a.floats); break;
    case Attribute::Kind::kStrings: list(a.strings); break;
    case Attribute::Kind::kTensor: {
      os << "const#" << a.tensor;
      if (a.tensor < g.constants.size()) {  // a loaded graph's constants are in the store, not here
        const Constant& c = g.constants.get(a.tensor);
        os << ':' << dtypeName(c.dtype) << shapeStr(c.shape);
      }
      break;
    }
    case Attribute::Kind::kGraph:
      os << "graph '" << (a.graph ? a.graph->name : std::string()) << "'";
      break;
  }
}
}  // namespace

void Graph::print(std::ostream& os) const {
  auto vname = [this](ValueId v) -> std::string {
    if (v == kNoValue) return "_";
    const Value& val = values[size_t(v)];
    return "%" + val.name;
  };
  os << "graph " << (name.empty() ? "main" : name) << " (";
  for (size_t i = 0; i < inputs.size(); ++i)
    os << (i ? ", " : "") << vname(inputs[i]) << ": " << typeOf(inputs[i]).str();
  os << ") {\n";
  for (ValueId v = 0; v < ValueId(values.size()); ++v) {
    const Value& val = values[size_t(v)];
    if (!val.isConstant()) continue;
    os << "  " << vname(v) << ": " << val.type.str() << " = const#" << val.constant << '\n';
  }
  for (const Node& n : nodes) {
    os << "  ";
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      os << (i ? ", " : "") << vname(n.outputs[i]);
      if (n.outputs[i] != kNoValue) os << ": " << typeOf(n.outputs[i]).str();
    }
    os << " = " << (n.domain.empty() ? "" : n.domain + ".") << n.op_type << '(';
    for (size_t i = 0; i < n.inputs.size(); ++i) os << (i ? ", " : "") << vname(n.inputs[i]);
    os << ')';
    if (!n.attrs.all().empty()) {
      os << " {";
      bool first = true;
      for (const auto& [k, a] : n.attrs.all()) {
        os << (first ? "" : ", ") << k << '=';
        printAttr(os, *this, a);
        first = false;
      }
      os << '}';
    }
    os << '\n';
    for (const auto& [k, a] : n.attrs.all()) {
      if (a.kind != Attribute::Kind::kGraph || !a.graph) continue;
      // The subgraph indented under its node; its last `captures` inputs are outer values.
      std::string text = a.graph->str();
      size_t start = 0;
      while (start < text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        os << "    " << (start == 0 ? k + ": " : "") << text.substr(start, end - start) << '\n';
        start = end + 1;
      }
    }
  }
  os << "  return ";
  for (size_t i = 0; i < outputs.size(); ++i) os << (i ? ", " : "") << vname(outputs[i]);
  os << "\n}\n";
}

std::string Graph::str() const {
  std::ostringstream os;
  print(os);
  return os.str();
}

}  // namespace partita::ir
