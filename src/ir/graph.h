// Graph: a typed dataflow graph. Values are edges (each with a TensorType), nodes are
// operators in ONNX's vocabulary (op_type + domain + opset), and constants are values
// that refer to the graph's ConstantPool by ID. Nodes hold no tensor bytes.
// Not thread-safe for mutation; read-only use from many threads is fine.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ir/attribute.h"
#include "ir/constant_pool.h"
#include "ir/type.h"

namespace partita::ir {

using ValueId = int32_t;
using NodeId = int32_t;
inline constexpr ValueId kNoValue = -1;  // an omitted optional input or output
inline constexpr NodeId kNoNode = -1;

struct Value {
  std::string name;
  TensorType type;
  NodeId producer = kNoNode;  // kNoNode for graph inputs and constants
  ConstId constant = kNoConst;  // set when this value is a constant
  bool isConstant() const { return constant != kNoConst; }
};

struct Node {
  std::string op_type;
  std::string domain;  // "" is the default ONNX domain
  int opset = 0;       // the opset version of `domain` the model imports
  std::string name;
  std::vector<ValueId> inputs;   // kNoValue for an omitted optional input
  std::vector<ValueId> outputs;  // kNoValue for an omitted optional output
  AttributeMap attrs;

  // Whether input (output) i is given: in range and not an omitted optional (kNoValue).
  bool hasInput(size_t i) const { return i < inputs.size() && inputs[i] != kNoValue; }
  bool hasOutput(size_t i) const { return i < outputs.size() && outputs[i] != kNoValue; }

  // Control flow (If, Loop, Scan): whether a graph attribute holds a subgraph, and how
  // many of the node's inputs are outer-scope values its subgraphs read (its last
  // inputs, after the ONNX ones: Graph::captures of its subgraphs).
  bool hasSubgraphs() const;
  size_t numCaptures() const;
  // The ONNX inputs: inputs.size() - numCaptures().
  size_t numFormalInputs() const { return inputs.size() - numCaptures(); }
};

// What verify() needs of a constant: its type, and whether it is packed in a
// backend's layout (then only its module reads it, and the type is the logical one).
struct ConstantInfo {
  DType dtype = DType::kUndefined;
  const std::vector<int64_t>* shape = nullptr;
  bool packed = false;
};
using ConstantLookup = std::function<std::optional<ConstantInfo>(ConstId)>;

// Subgraphs nest at most this deep (a hostile model or artifact cannot make the
// recursive passes overflow the stack).
inline constexpr int kMaxGraphDepth = 64;

class Graph {
 public:
  std::string name;
  std::vector<Value> values;
  std::vector<Node> nodes;  // in a topological order once verify() passes
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  ConstantPool constants;  // empty in a subgraph: its constants are in the outermost graph's pool
  // A subgraph (the body of an If, Loop or Scan) reads outer-scope values through its
  // inputs, never by name: its last `captures` inputs are the values the node passes
  // as its last `captures` inputs, in that order (every subgraph of one node has the
  // same captures). 0 for the main graph.
  uint32_t captures = 0;

  ValueId addValue(std::string name, TensorType type = {});
  ValueId addConstantValue(std::string name, ConstId id);  // type taken from the constant
  NodeId addNode(Node node);  // sets producer of its outputs

  const Value& value(ValueId id) const { return values.at(size_t(id)); }
  Value& value(ValueId id) { return values.at(size_t(id)); }
  const TensorType& typeOf(ValueId id) const { return value(id).type; }

  // Per-value count of node inputs and graph outputs that read it.
  std::vector<int> useCounts() const;

  // Throws Error(kInternal) describing the first broken invariant: ids in range, each
  // value produced at most once, nodes in topological order, constants in the pool
  // with matching types, graph outputs produced.
  void verify() const;
  // The same checks against another table of constants (the run time's store, when
  // the graph's own pool is empty): `lookup` returns nullptr for an id it lacks.
  void verify(const ConstantLookup& lookup) const;

  // A deep copy: subgraphs are copied too, not shared (the pool is copied as is).
  std::shared_ptr<Graph> clone() const;

  // Readable text form, one node per line.
  void print(std::ostream& os) const;
  std::string str() const;
};

}  // namespace partita::ir
