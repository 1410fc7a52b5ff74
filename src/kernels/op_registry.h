// The host backend's operator table: for each ONNX op type, a shape/type inference
// function and a kernel. Inference runs at compile time (with the values of constant
// inputs when known) and again at run time for values whose shapes depend on data
// (then every input value is known). Kernels run on dense row-major tensors.
// The registry is immutable after construction: thread-safe to read.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "ir/aggregate.h"
#include "ir/graph.h"
#include "ir/limits.h"
#include "ir/tensor.h"

namespace partita::kernels {

// A Reshape attribute of partita's own (never read from a model file): per entry of
// the target, -1 to take the target's entry, k >= 0 to copy dim k of the input. Made by
// passes::foldReshapeTargets from targets computed with Shape.
inline constexpr const char* kDimsFromInputAttr = "partita.dims_from_input";

// Resolves a ConstId (e.g. a tensor attribute such as ConstantOfShape's "value") to
// its bytes: the compiler's pool at compile time, the weight store at run time.
class ConstResolver {
 public:
  virtual ~ConstResolver() = default;
  virtual ir::Tensor constant(ir::ConstId id) const = 0;
};

// Adapter over a compile-side pool.
class PoolResolver : public ConstResolver {
 public:
  explicit PoolResolver(const ir::ConstantPool& pool) : pool_(pool) {}
  ir::Tensor constant(ir::ConstId id) const override { return pool_.get(id).view(); }

 private:
  const ir::ConstantPool& pool_;
};

struct InferContext {
  const ir::Node& node;
  std::vector<ir::TensorType> inputs;       // dtype kUndefined for an omitted input
  std::vector<const ir::Tensor*> values;    // the value of an input when known, else nullptr
  std::vector<ir::TensorType> outputs;      // to be filled, one per node output
  const ConstResolver* constants = nullptr; // for tensor attributes
  ir::TensorLimits limits;                  // ranks and sizes the outputs may have
  const ir::Graph* graph = nullptr;         // when known: messages name the outputs

  size_t numInputs() const { return inputs.size(); }
  bool hasInput(size_t i) const { return i < inputs.size() && inputs[i].dtype != ir::DType::kUndefined; }
  // Input i's type; fails (naming the node) when the node has fewer inputs.
  const ir::TensorType& input(size_t i) const {
    if (i >= inputs.size()) fail("needs input " + std::to_string(i) + " but has " + std::to_string(inputs.size()));
    return inputs[i];
  }
  const ir::Tensor* value(size_t i) const { return i < values.size() ? values[i] : nullptr; }
  int opset() const { return node.opset; }
  const ir::AttributeMap& attrs() const { return node.attrs; }
  // Throws Error(kInvalidModel) naming the node: "<op> node '<name>': <msg>", or with
  // `graph` "<op> node '<name>' (making 'y'): <msg>".
  [[noreturn]] void fail(const std::string& msg) const;
};

struct KernelContext {
  const ir::Node& node;
  const ConstResolver* constants = nullptr;  // for tensor attributes
  std::vector<ir::Tensor> inputs;   // undefined Tensor for an omitted input
  std::vector<ir::Tensor> outputs;  // allocated by the caller with the inferred shapes
  int threads = 1;

  int opset() const { return node.opset; }
  const ir::AttributeMap& attrs() const { return node.attrs; }
  bool hasInput(size_t i) const { return i < inputs.size() && inputs[i].defined(); }
  [[noreturn]] void fail(const std::string& msg) const;
};

// The kernel of an op that reads or makes sequence or optional values (the Sequence*
// and Optional* ops, SplitToSequence, ConcatFromSequence; Identity of such a value).
// It makes its outputs itself: a sequence's length and an element's shape are data, so
// nothing of it is planned (ir/aggregate.h has the memory rule).
struct ValueKernelContext {
  const ir::Node& node;
  std::vector<ir::Tensor> inputs;            // undefined for an omitted input; sequences and optionals boxed
  std::vector<ir::TensorType> output_types;  // the types the outputs were compiled for
  std::vector<ir::OwnedTensor> tensors;      // per output of kind tensor: the tensor made
  std::vector<ir::AggregatePtr> aggregates;  // per output of another kind: the value made
  ir::TensorLimits limits;

  bool hasInput(size_t i) const { return i < inputs.size() && inputs[i].defined(); }
  const ir::AttributeMap& attrs() const { return node.attrs; }
  int opset() const { return node.opset; }
  [[noreturn]] void fail(const std::string& msg) const;
};

using InferFn = void (*)(InferContext&);
using KernelFn = void (*)(KernelContext&);
using ValueKernelFn = void (*)(ValueKernelContext&);

// An op the importer knows. `run` is null for an infer-only op: one whose shapes the
// compiler can infer but that only an external backend executes (e.g. the contrib
// Gelu that oneDNN runs as one primitive). Such a node must be claimed by an enabled
// backend; backend::checkHostKernels says so after partitioning.
//
// `newest` is the newest definition of a default-domain op that `infer` and `run`
// implement: the opset in which that definition appeared (op_arity.inc lists every
// opset where an op's definition changed). A node resolves to the newest definition at
// or below its model's opset; one newer than `newest` is refused by name
// (unimplementedVersion). Ops whose last change partita implements is at 17 or older
// keep the default. `deterministic` false (the random ops) keeps a node from being
// folded into a constant even when its inputs are constants.
//
// A control-flow op (If, Loop, Scan, SequenceMap) has no kernel either: the executor
// runs its subgraphs (runtime/control_flow.h); it is never folded and never sent to a
// backend.
//
// `run_values` is the kernel for nodes that read or make a sequence or optional value
// (ValueKernelContext); only ops with one (and If, Loop, SequenceMap) may have such
// inputs: inferNode refuses a non-tensor input anywhere else, so the other kernels,
// the partitioner's backends and the memory planner only ever see tensors.
struct OpDef {
  InferFn infer = nullptr;
  KernelFn run = nullptr;
  int newest = 17;
  bool deterministic = true;
  bool control_flow = false;
  ValueKernelFn run_values = nullptr;
  bool hasKernel() const { return run != nullptr; }
  // Whether the host runs it: a kernel, or subgraphs the executor runs.
  bool hostRuns() const { return run != nullptr || control_flow || run_values != nullptr; }
  // Whether its inputs may be sequences or optionals.
  bool takesAnyKind() const { return run_values != nullptr || control_flow; }
};

class OpRegistry {
 public:
  // The table with every host op registered.
  static const OpRegistry& global();

  void add(const std::string& op_type, OpDef def, const std::string& domain = "");
  const OpDef* find(const std::string& domain, const std::string& op_type) const;
  std::vector<std::string> opTypes() const;  // "Conv", "com.microsoft.Gelu", sorted

 private:
  std::map<std::pair<std::string, std::string>, OpDef> ops_;
};

// One registration function per kernel file.
void registerNnOps(OpRegistry& r);           // ops_nn.cpp: conv, pooling, matmul, gemm, norms, resize
void registerElementwiseOps(OpRegistry& r);  // ops_elementwise.cpp: unary, binary, activations, where, cast
void registerReduceOps(OpRegistry& r);       // ops_reduce.cpp: Reduce*, ArgMax/ArgMin, softmax family
void registerShapeOps(OpRegistry& r);        // ops_shape.cpp: reshape, transpose, slice, gather, ...
void registerControlFlowOps(OpRegistry& r);  // control_flow.cpp: If, Loop, Scan (inference only)
void registerSequenceOps(OpRegistry& r);     // sequence_ops.cpp: Sequence*, Optional*, SplitToSequence, ...
// Identity's value kernel (a sequence or optional passed on, shared, not copied).
void runIdentityValue(ValueKernelContext& c);

// The opset in which the definition of default-domain op `op_type` that applies at
// `opset` appeared (the newest version at or below it in op_arity.inc); 0 when ONNX
// has no such op at that opset (or for other domains).
int schemaVersion(const std::string& domain, const std::string& op_type, int opset);

// Empty when `def` implements the definition `node` resolves to, else the reason:
// "its opset-19 definition (changed from opset 18), which partita does not implement".
std::string unimplementedVersion(const OpDef& def, const ir::Node& node);

// Checks the node's input and output counts against its ONNX schema at the node's
// opset (op_arity.inc, generated from ONNX's schemas); ops outside the default
// domain or newer than the table are left to their inference functions.
// Error(kInvalidModel) naming the node otherwise.
void checkArity(const ir::Node& node);

// Checks arity, then runs inference for `node` on input types (and known values).
// Returns output types, each checked against `limits`: Error(kInvalidModel) naming the
// node and the output (by its name in `graph` when given) for a rank or size over the
// limits. The one validation of a node: the importer's shape inference and the loader
// (runtime::validateGraph) both come through here.
std::vector<ir::TensorType> inferNode(const ir::Node& node, const std::vector<ir::TensorType>& inputs,
                                      const std::vector<const ir::Tensor*>& values,
                                      const ConstResolver* constants, const ir::TensorLimits& limits = {},
                                      const ir::Graph* graph = nullptr);

}  // namespace partita::kernels
