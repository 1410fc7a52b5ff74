// Sequence and optional ops (opset 11 and 15-18): SequenceConstruct, SequenceEmpty,
// SequenceAt, SequenceInsert, SequenceErase, SequenceLength, SplitToSequence,
// ConcatFromSequence, Optional, OptionalHasElement, OptionalGetElement; and Identity
// of a sequence or optional. Their kernels are value kernels (op_registry.h): they
// make their outputs themselves, as immutable shared values (ir/aggregate.h), and a
// sequence made from another shares the element tensors it keeps.
#include <algorithm>
#include <cstring>

#include "kernels/control_flow.h"
#include "kernels/op_registry.h"
#include "kernels/op_util.h"

namespace partita::kernels {

namespace {

using ir::DType;
using ir::TensorType;
using ir::ValueKind;

// ---- inference -------------------------------------------------------------------

const TensorType& sequenceInput(const InferContext& c, size_t i) {
  const TensorType& t = c.input(i);
  if (t.kind != ValueKind::kSequence)
    c.fail("input " + std::to_string(i) + " must be a sequence but is " + t.kindStr());
  return t;
}

const TensorType& tensorInput(const InferContext& c, size_t i) {
  const TensorType& t = c.input(i);
  if (!t.isTensor()) c.fail("input " + std::to_string(i) + " must be a tensor but is " + t.kindStr());
  return t;
}

// A position input: an int32/int64 scalar.
void checkPosition(const InferContext& c, size_t i) {
  if (!c.hasInput(i)) return;
  const TensorType& t = tensorInput(c, i);
  if (t.dtype != DType::kInt32 && t.dtype != DType::kInt64)
    c.fail("the position must be an int32 or int64 integer but is " + t.str());
  // ONNX says a scalar; its own test data (and ONNX Runtime) also take one element.
  if (t.isStatic() && t.numel() != 1) c.fail("the position must be one integer but is " + t.str());
}

void checkElementDType(const InferContext& c, const TensorType& seq, const TensorType& t) {
  if (seq.dtype != DType::kUndefined && t.dtype != DType::kUndefined && seq.dtype != t.dtype)
    c.fail("inserts " + t.kindStr() + " into " + seq.kindStr());
}

void inferSequenceConstruct(InferContext& c) {
  TensorType elem = tensorInput(c, 0);
  for (size_t i = 1; i < c.numInputs(); ++i) {
    const TensorType& t = tensorInput(c, i);
    if (t.dtype != elem.dtype)
      c.fail("input " + std::to_string(i) + " is " + t.str() + " but input 0 is " + elem.str() +
             ": a sequence holds one element type");
    elem = mergeTypes(elem, t);
  }
  c.outputs[0] = TensorType::sequenceOf(elem);
}

// An element type given as an ONNX TensorProto data type code.
DType onnxDType(const InferContext& c, int64_t code, const std::string& what) {
  const DType d = ir::dtypeFromOnnx(code);
  if (d == DType::kUndefined)
    c.fail(what + " holds element type code " + std::to_string(code) + ", which partita does not support");
  return d;
}

void inferSequenceEmpty(InferContext& c) {
  constexpr int64_t kOnnxFloat = 1;
  c.outputs[0] = TensorType::sequenceOf(
      TensorType::unranked(onnxDType(c, c.attrs().getInt("dtype", kOnnxFloat), "attribute 'dtype'")));
}

void inferSequenceAt(InferContext& c) {
  const TensorType& seq = sequenceInput(c, 0);
  checkPosition(c, 1);
  c.outputs[0] = seq.element();
}

void inferSequenceInsert(InferContext& c) {
  const TensorType& seq = sequenceInput(c, 0);
  const TensorType& t = tensorInput(c, 1);
  checkElementDType(c, seq, t);
  checkPosition(c, 2);
  TensorType elem = seq.element();
  // Nothing is known of an empty sequence's elements (SequenceEmpty: unranked).
  c.outputs[0] = TensorType::sequenceOf(elem.has_rank ? mergeTypes(elem, t) : TensorType::unranked(t.dtype));
}

void inferSequenceErase(InferContext& c) {
  c.outputs[0] = sequenceInput(c, 0);
  checkPosition(c, 1);
}

void inferSequenceLength(InferContext& c) {
  sequenceInput(c, 0);
  c.outputs[0] = TensorType::of(DType::kInt64, {});
}

void inferSplitToSequence(InferContext& c) {
  const TensorType& x = tensorInput(c, 0);
  TensorType elem = x;
  if (c.hasInput(1)) {
    const TensorType& split = tensorInput(c, 1);
    if (split.dtype != DType::kInt32 && split.dtype != DType::kInt64)
      c.fail("'split' must be int32 or int64 but is " + split.str());
    if (split.has_rank && split.rank() > 1) c.fail("'split' must be a scalar or 1-D but is " + split.str());
  }
  if (x.has_rank) {
    const int64_t axis = normalizeAxis(c.attrs().getInt("axis", 0), int64_t(x.rank()),
                                       c.node.op_type + " node '" + c.node.name + "' axis");
    if (c.hasInput(1))
      elem.dims[size_t(axis)] = ir::Dim{};  // the last chunk may be shorter
    else if (c.attrs().getInt("keepdims", 1) == 0)
      elem.dims.erase(elem.dims.begin() + axis);
    else
      elem.dims[size_t(axis)] = ir::Dim::known(1);
  }
  c.outputs[0] = TensorType::sequenceOf(elem);
}

void inferConcatFromSequence(InferContext& c) {
  const TensorType& seq = sequenceInput(c, 0);
  if (!c.attrs().has("axis")) c.fail("needs the attribute 'axis'");
  TensorType out = seq.element();
  if (!out.has_rank) {
    c.outputs[0] = out;
    return;
  }
  const bool new_axis = c.attrs().getInt("new_axis", 0) != 0;
  const int64_t rank = int64_t(out.rank());
  const int64_t axis = normalizeAxis(c.attrs().getInt("axis", 0), new_axis ? rank + 1 : rank,
                                     c.node.op_type + " node '" + c.node.name + "' axis");
  // The length along the axis is the sum over elements: data.
  if (new_axis)
    out.dims.insert(out.dims.begin() + axis, ir::Dim{});
  else
    out.dims[size_t(axis)] = ir::Dim{};
  c.outputs[0] = out;
}

// Optional's `type` attribute (a TypeProto), imported as ints {value kind, ONNX
// element type code}.
TensorType typeAttr(const InferContext& c) {
  const std::vector<int64_t> t = c.attrs().getInts("type");
  if (t.size() != 2 || (t[0] != int64_t(ValueKind::kTensor) && t[0] != int64_t(ValueKind::kSequence)))
    c.fail("with no input needs the attribute 'type' (a tensor or sequence type)");
  TensorType elem = TensorType::unranked(onnxDType(c, t[1], "attribute 'type'"));
  return t[0] == int64_t(ValueKind::kSequence) ? TensorType::sequenceOf(elem) : elem;
}

void inferOptional(InferContext& c) {
  if (c.hasInput(0)) {
    const TensorType& t = c.input(0);
    if (t.kind == ValueKind::kOptional) c.fail("input 0 is " + t.kindStr() + "; an optional cannot hold one");
    c.outputs[0] = TensorType::optionalOf(t);
  } else {
    c.outputs[0] = TensorType::optionalOf(typeAttr(c));
  }
}

void inferOptionalHasElement(InferContext& c) {
  // Before opset 18 the input is an optional; from 18 it may be any value, or omitted.
  if (c.hasInput(0) && c.opset() < 18 && c.input(0).kind != ValueKind::kOptional)
    c.fail("input 0 must be an optional but is " + c.input(0).kindStr() + " (opset 18 takes any value)");
  c.outputs[0] = TensorType::of(DType::kBool, {});
}

void inferOptionalGetElement(InferContext& c) {
  const TensorType& t = c.input(0);
  if (t.kind != ValueKind::kOptional && c.opset() < 18)
    c.fail("input 0 must be an optional but is " + t.kindStr() + " (opset 18 takes any value)");
  c.outputs[0] = t.contents();
}

// ---- kernels ---------------------------------------------------------------------

const ir::Aggregate& aggregateInput(const ValueKernelContext& c, size_t i) {
  if (!c.hasInput(i) || !ir::isBoxed(c.inputs[i]))
    c.fail("input " + std::to_string(i) + " is not a sequence or optional");
  return ir::unbox(c.inputs[i]);
}

// A sequence input; an optional holding one is taken as it (what a Loop carries).
const ir::Aggregate& sequenceArg(const ValueKernelContext& c, size_t i) {
  const ir::Aggregate& a = aggregateInput(c, i);
  if (a.kind == ValueKind::kOptional && !a.present)
    c.fail("input " + std::to_string(i) + " is an empty optional where a sequence is needed");
  return a;
}

ir::SharedTensor share(const ir::Tensor& t) {
  return std::make_shared<const ir::OwnedTensor>(ir::OwnedTensor::copyOf(t));
}

std::shared_ptr<ir::Aggregate> newSequence(DType dtype) {
  auto s = std::make_shared<ir::Aggregate>();
  s->kind = ValueKind::kSequence;
  s->dtype = dtype;
  return s;
}

// Reads a position input and checks it against [lo, hi] after adding `len` to a
// negative one (ONNX: negative positions count from the back).
int64_t position(const ValueKernelContext& c, size_t i, int64_t len, int64_t def, bool end_allowed) {
  int64_t p = def;
  if (c.hasInput(i)) {
    const ir::Tensor& t = c.inputs[i];
    if (t.numel() != 1) c.fail("the position must be one integer but is " + ir::typeOf(t).str());
    p = readInts(t)[0];
  }
  const int64_t hi = end_allowed ? len : len - 1;
  if (p < -len || p > hi)
    c.fail("position " + std::to_string(p) + " is out of range for a sequence of " + std::to_string(len) +
           " tensors (" +
           (len == 0 && !end_allowed ? std::string("it is empty")
                                     : std::to_string(-len) + ".." + std::to_string(hi)) +
           ")");
  return p < 0 ? p + len : p;
}

void runSequenceConstruct(ValueKernelContext& c) {
  auto s = newSequence(c.inputs[0].dtype);
  for (const ir::Tensor& t : c.inputs) {
    if (t.dtype != s->dtype) c.fail("its inputs have different element types");
    s->tensors.push_back(share(t));
  }
  c.aggregates[0] = std::move(s);
}

void runSequenceEmpty(ValueKernelContext& c) { c.aggregates[0] = newSequence(c.output_types[0].dtype); }

void runSequenceAt(ValueKernelContext& c) {
  const ir::Aggregate& s = sequenceArg(c, 0);
  const int64_t p = position(c, 1, int64_t(s.tensors.size()), 0, false);
  c.tensors[0] = ir::OwnedTensor::copyOf(s.tensors[size_t(p)]->view());
}

void runSequenceInsert(ValueKernelContext& c) {
  const ir::Aggregate& s = sequenceArg(c, 0);
  const ir::Tensor& t = c.inputs[1];
  if (t.dtype != s.dtype)
    c.fail("inserts a " + std::string(ir::dtypeName(t.dtype)) + " tensor into a sequence of " +
           std::string(ir::dtypeName(s.dtype)) + " tensors");
  const int64_t len = int64_t(s.tensors.size());
  const int64_t p = position(c, 2, len, len, true);
  auto r = newSequence(s.dtype);
  r->tensors = s.tensors;  // shared, not copied
  r->tensors.insert(r->tensors.begin() + p, share(t));
  c.aggregates[0] = std::move(r);
}

void runSequenceErase(ValueKernelContext& c) {
  const ir::Aggregate& s = sequenceArg(c, 0);
  const int64_t len = int64_t(s.tensors.size());
  const int64_t p = position(c, 1, len, len - 1, false);
  auto r = newSequence(s.dtype);
  r->tensors = s.tensors;
  r->tensors.erase(r->tensors.begin() + p);
  c.aggregates[0] = std::move(r);
}

void runSequenceLength(ValueKernelContext& c) {
  const ir::Aggregate& s = sequenceArg(c, 0);
  c.tensors[0] = ir::OwnedTensor(DType::kInt64, {});
  *c.tensors[0].as<int64_t>() = int64_t(s.tensors.size());
}

// Bytes of `shape` before, along and after `axis`: outer x len x inner elements.
struct AxisSplit {
  size_t outer = 1, len = 0, inner = 1;
};
AxisSplit splitAt(const std::vector<int64_t>& shape, int64_t axis, size_t elem_size) {
  AxisSplit s;
  for (int64_t d = 0; d < axis; ++d) s.outer *= size_t(shape[size_t(d)]);
  s.len = size_t(shape[size_t(axis)]);
  s.inner = elem_size;
  for (size_t d = size_t(axis) + 1; d < shape.size(); ++d) s.inner *= size_t(shape[d]);
  return s;
}

void runSplitToSequence(ValueKernelContext& c) {
  const ir::Tensor& x = c.inputs[0];
  if (x.rank() == 0) c.fail("cannot split a scalar");
  const int64_t rank = int64_t(x.rank());
  const int64_t axis =
      normalizeAxis(c.attrs().getInt("axis", 0), rank, c.node.op_type + " node '" + c.node.name + "' axis");
  const int64_t dim = x.shape[size_t(axis)];
  std::vector<int64_t> sizes;
  bool squeeze = false;
  if (!c.hasInput(1)) {
    sizes.assign(size_t(dim), 1);
    squeeze = c.attrs().getInt("keepdims", 1) == 0;
  } else {
    const std::vector<int64_t> split = readInts(c.inputs[1]);
    if (c.inputs[1].rank() == 0) {
      const int64_t n = split.at(0);
      if (n <= 0) c.fail("'split' must be positive but is " + std::to_string(n));
      for (int64_t done = 0; done < dim; done += n) sizes.push_back(std::min(n, dim - done));
    } else {
      int64_t total = 0;
      for (int64_t n : split) {
        if (n < 0) c.fail("'split' holds a negative length " + std::to_string(n));
        total += n;
        if (total > dim) break;
      }
      if (total != dim)
        c.fail("'split' " + ir::shapeStr(split) + " does not add up to " + std::to_string(dim) +
               ", the length of axis " + std::to_string(axis));
      sizes = split;
    }
  }
  const AxisSplit s = splitAt(x.shape, axis, ir::dtypeSize(x.dtype));
  auto r = newSequence(x.dtype);
  int64_t start = 0;
  for (int64_t n : sizes) {
    std::vector<int64_t> shape = x.shape;
    shape[size_t(axis)] = n;
    if (squeeze) shape.erase(shape.begin() + axis);
    auto part = std::make_shared<ir::OwnedTensor>(x.dtype, shape);
    auto* dst = static_cast<std::byte*>(part->data());
    const auto* src = static_cast<const std::byte*>(x.data);
    const size_t block = size_t(n) * s.inner;
    for (size_t o = 0; o < s.outer; ++o)
      if (block) std::memcpy(dst + o * block, src + (o * s.len + size_t(start)) * s.inner, block);
    r->tensors.push_back(std::move(part));
    start += n;
  }
  c.aggregates[0] = std::move(r);
}

void runConcatFromSequence(ValueKernelContext& c) {
  const ir::Aggregate& s = sequenceArg(c, 0);
  if (s.tensors.empty()) c.fail("cannot concatenate an empty sequence");
  const bool new_axis = c.attrs().getInt("new_axis", 0) != 0;
  const std::vector<int64_t>& first = s.tensors[0]->shape();
  const int64_t rank = int64_t(first.size());
  if (rank == 0 && !new_axis) c.fail("cannot concatenate scalars (without new_axis)");
  const int64_t axis = normalizeAxis(c.attrs().getInt("axis", 0), new_axis ? rank + 1 : rank,
                                     c.node.op_type + " node '" + c.node.name + "' axis");
  std::vector<int64_t> out_shape = first;
  if (new_axis) out_shape.insert(out_shape.begin() + axis, 0);
  int64_t total = 0;
  for (size_t i = 0; i < s.tensors.size(); ++i) {
    const std::vector<int64_t>& shape = s.tensors[i]->shape();
    bool fits = shape.size() == first.size();
    for (size_t d = 0; fits && d < shape.size(); ++d)
      fits = shape[d] == first[d] || (!new_axis && int64_t(d) == axis);
    if (!fits)
      c.fail("element " + std::to_string(i) + " is " + ir::typeOf(s.tensors[i]->view()).str() +
             " but element 0 is " + ir::typeOf(s.tensors[0]->view()).str() +
             ": they must agree on every dimension but axis " + std::to_string(axis));
    total = addDims(c, total, new_axis ? 1 : shape[size_t(axis)]);
  }
  out_shape[size_t(axis)] = total;
  ir::checkLimits(TensorType::of(s.dtype, out_shape), c.limits, ErrorCode::kInvalidArgument,
                  c.node.op_type + " node '" + c.node.name + "'");
  ir::OwnedTensor out(s.dtype, out_shape);
  const AxisSplit o = splitAt(out_shape, axis, ir::dtypeSize(s.dtype));
  size_t offset = 0;  // along the axis, in units of `inner`
  for (const ir::SharedTensor& t : s.tensors) {
    const size_t n = new_axis ? 1 : size_t(t->shape()[size_t(axis)]);
    const size_t block = n * o.inner;
    const auto* src = static_cast<const std::byte*>(t->data());
    auto* dst = static_cast<std::byte*>(out.data());
    for (size_t k = 0; k < o.outer; ++k)
      if (block) std::memcpy(dst + (k * o.len + offset) * o.inner, src + k * block, block);
    offset += n;
  }
  c.tensors[0] = std::move(out);
}

void runOptional(ValueKernelContext& c) {
  auto r = std::make_shared<ir::Aggregate>();
  r->kind = ValueKind::kOptional;
  const TensorType& t = c.output_types[0];
  r->inner = t.inner;
  r->dtype = t.dtype;
  if (!c.hasInput(0)) {
    r->present = false;
  } else if (ir::isBoxed(c.inputs[0])) {
    const ir::Aggregate& s = sequenceArg(c, 0);
    r->inner = ValueKind::kSequence;
    r->dtype = s.dtype;
    r->tensors = s.tensors;
  } else {
    r->inner = ValueKind::kTensor;
    r->dtype = c.inputs[0].dtype;
    r->tensors.push_back(share(c.inputs[0]));
  }
  c.aggregates[0] = std::move(r);
}

void runOptionalHasElement(ValueKernelContext& c) {
  bool has = c.hasInput(0);
  if (has && ir::isBoxed(c.inputs[0])) {
    const ir::Aggregate& a = ir::unbox(c.inputs[0]);
    has = a.kind != ValueKind::kOptional || a.present;
  }
  c.tensors[0] = ir::OwnedTensor(DType::kBool, {});
  *c.tensors[0].as<bool>() = has;
}

void runOptionalGetElement(ValueKernelContext& c) {
  if (!c.hasInput(0)) c.fail("input 0 is not given");
  if (!ir::isBoxed(c.inputs[0])) {  // a tensor (opset 18): itself
    c.tensors[0] = ir::OwnedTensor::copyOf(c.inputs[0]);
    return;
  }
  const ir::Aggregate& a = ir::unbox(c.inputs[0]);
  if (a.kind == ValueKind::kOptional && !a.present) c.fail("the optional is empty");
  if (a.kind == ValueKind::kSequence) {  // a sequence (opset 18, or what a Loop carried): itself
    c.aggregates[0] = a.shared_from_this();
  } else if (a.inner == ValueKind::kSequence) {
    auto r = newSequence(a.dtype);
    r->tensors = a.tensors;
    c.aggregates[0] = std::move(r);
  } else {
    c.tensors[0] = ir::OwnedTensor::copyOf(a.tensors.at(0)->view());
  }
}

}  // namespace

void runIdentityValue(ValueKernelContext& c) {
  if (!c.hasInput(0)) c.fail("input 0 is not given");
  if (ir::isBoxed(c.inputs[0]))
    c.aggregates[0] = ir::shareBoxed(c.inputs[0]);
  else
    c.tensors[0] = ir::OwnedTensor::copyOf(c.inputs[0]);
}

void registerSequenceOps(OpRegistry& r) {
  auto add = [&r](const char* op, InferFn infer, ValueKernelFn run, int newest = 17) {
    OpDef d{infer, nullptr, newest};
    d.run_values = run;
    r.add(op, d);
  };
  add("SequenceConstruct", inferSequenceConstruct, runSequenceConstruct);
  add("SequenceEmpty", inferSequenceEmpty, runSequenceEmpty);
  add("SequenceAt", inferSequenceAt, runSequenceAt);
  add("SequenceInsert", inferSequenceInsert, runSequenceInsert);
  add("SequenceErase", inferSequenceErase, runSequenceErase);
  add("SequenceLength", inferSequenceLength, runSequenceLength);
  add("SplitToSequence", inferSplitToSequence, runSplitToSequence);
  add("ConcatFromSequence", inferConcatFromSequence, runConcatFromSequence);
  add("Optional", inferOptional, runOptional);
  add("OptionalHasElement", inferOptionalHasElement, runOptionalHasElement, 18);
  add("OptionalGetElement", inferOptionalGetElement, runOptionalGetElement, 18);
}

}  // namespace partita::kernels
