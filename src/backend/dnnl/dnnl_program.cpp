#include "backend/dnnl/dnnl_program.h"

#include "backend/dnnl/dnnl_kernels.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "backend/dnnl/dnnl_blob_io.h"
#include "backend/dnnl/dnnl_memory_desc.h"
#include "ir/limits.h"
#include "kernels/known_values.h"
#include "partita/error.h"

namespace partita::dnnl_backend {

const char* stepKindName(StepKind k) {
  switch (k) {
    case StepKind::kReorder:
      return "reorder";
    case StepKind::kConvolution:
      return "convolution";
    case StepKind::kDeconvolution:
      return "deconvolution";
    case StepKind::kMatMul:
      return "matmul";
    case StepKind::kPooling:
      return "pooling";
    case StepKind::kEltwise:
      return "eltwise";
    case StepKind::kBinary:
      return "binary";
    case StepKind::kSoftmax:
      return "softmax";
    case StepKind::kLogSoftmax:
      return "logsoftmax";
    case StepKind::kLayerNorm:
      return "layer_normalization";
    case StepKind::kBatchNorm:
      return "batch_normalization";
    case StepKind::kConcat:
      return "concat";
    case StepKind::kPrelu:
      return "prelu";
    case StepKind::kReduction:
      return "reduction";
    case StepKind::kResampling:
      return "resampling";
    case StepKind::kRnn:
      return "rnn";
    case StepKind::kDynamicQuantize:
      return "dynamic_quantize";
    case StepKind::kSwish:
      return "swish";
    case StepKind::kScaleChannels:
      return "scale_channels";
    case StepKind::kChannelMean:
      return "channel_mean";
    case StepKind::kInt8MaxPool:
      return "int8_max_pool";
    case StepKind::kAddLayerNorm:
      return "add_layer_norm";
    case StepKind::kSoftmaxRows:
      return "softmax_rows";
    case StepKind::kBiasGelu:
      return "bias_gelu";
    case StepKind::kAddRowCopy:
      return "add_row_copy";
    case StepKind::kMatVec:
      return "mat_vec";
  }
  return "?";
}

const Arg* Step::find(int key) const {
  for (const Arg& a : args)
    if (a.key == key) return &a;
  return nullptr;
}

Arg* Step::find(int key) {
  for (Arg& a : args)
    if (a.key == key) return &a;
  return nullptr;
}

namespace {

void writeStep(BlobWriter& w, const Step& s) {
  w.u8(uint8_t(s.kind));
  w.str(s.label);
  w.i32(s.alg);
  w.ints(s.strides);
  w.ints(s.dilates);
  w.ints(s.pad_l);
  w.ints(s.pad_r);
  w.ints(s.kernel);
  w.f32(s.alpha);
  w.f32(s.beta);
  w.f32(s.epsilon);
  w.i64(s.axis);
  w.u32(s.flags | (s.quant.empty() ? 0 : kQuantizedFlag));
  w.u32(uint32_t(s.args.size()));
  for (const Arg& a : s.args) {
    w.i32(a.key);
    w.u8(uint8_t(a.source));
    w.u8(a.chosen ? 1 : 0);
    w.u64(a.index);
    writeDesc(w, a.md);
  }
  w.u32(uint32_t(s.post_ops.size()));
  for (const PostOp& p : s.post_ops) {
    w.u8(uint8_t(p.kind));
    w.i32(p.alg);
    w.f32(p.alpha);
    w.f32(p.beta);
    w.f32(p.scale);
  }
  if (s.quant.empty()) return;
  w.u32(uint32_t(s.quant.output_scales.size()));
  for (float x : s.quant.output_scales) w.f32(x);
  w.i32(s.quant.scale_dim);
  w.i32(s.quant.src_zero_point);
  w.i32(s.quant.dst_zero_point);
}

Step readStep(BlobReader& r) {
  Step s;
  uint8_t kind = r.u8();
  if (kind < uint8_t(StepKind::kReorder) || kind > uint8_t(StepKind::kMatVec))
    r.fail("step kind: unknown step kind " + std::to_string(kind));
  s.kind = StepKind(kind);
  s.label = r.str();
  s.alg = r.i32();
  s.strides = r.ints(DNNL_MAX_NDIMS);
  s.dilates = r.ints(DNNL_MAX_NDIMS);
  s.pad_l = r.ints(DNNL_MAX_NDIMS);
  s.pad_r = r.ints(DNNL_MAX_NDIMS);
  s.kernel = r.ints(DNNL_MAX_NDIMS);
  s.alpha = r.f32();
  s.beta = r.f32();
  s.epsilon = r.f32();
  s.axis = r.i64();
  s.flags = r.u32();
  uint32_t nargs = r.count(26, "argument count");
  for (uint32_t i = 0; i < nargs; ++i) {
    Arg a;
    a.key = r.i32();
    uint8_t src = r.u8();
    if (src < uint8_t(ArgSource::kBuffer) || src > uint8_t(ArgSource::kEmbedded))
      r.fail("argument source: unknown source " + std::to_string(src));
    a.source = ArgSource(src);
    a.chosen = r.u8() != 0;
    // Only a primitive's source, destination and weights have layouts oneDNN chooses;
    // asked for another argument's (a post-op's operand past the step's post-ops),
    // oneDNN 2.6 reads memory it never wrote.
    if (a.chosen && a.key != DNNL_ARG_SRC && a.key != DNNL_ARG_DST && a.key != DNNL_ARG_WEIGHTS &&
        a.key != DNNL_ARG_WEIGHTS_LAYER && a.key != DNNL_ARG_WEIGHTS_ITER)
      r.fail("argument " + std::to_string(a.key) + " cannot have a layout oneDNN chooses");
    a.index = r.u64();
    a.md = readDesc(r);
    s.args.push_back(std::move(a));
  }
  uint32_t nposts = r.count(17, "post-op count");
  for (uint32_t i = 0; i < nposts; ++i) {
    PostOp p;
    uint8_t k = r.u8();
    if (k < uint8_t(PostOp::Kind::kEltwise) || k > uint8_t(PostOp::Kind::kBinary))
      r.fail("post-op kind: unknown post-op kind " + std::to_string(k));
    p.kind = PostOp::Kind(k);
    p.alg = r.i32();
    p.alpha = r.f32();
    p.beta = r.f32();
    p.scale = r.f32();
    s.post_ops.push_back(p);
  }
  if (s.flags & kQuantizedFlag) {
    s.flags &= ~kQuantizedFlag;
    const uint32_t n = r.count(4, "output scale count");
    for (uint32_t i = 0; i < n; ++i) s.quant.output_scales.push_back(r.f32());
    s.quant.scale_dim = r.i32();
    if (s.quant.scale_dim < kSourceScales || s.quant.scale_dim >= DNNL_MAX_NDIMS)
      r.fail("output scale dimension out of range");
    if (s.quant.scale_dim == kSourceScales && (s.kind != StepKind::kBinary || s.quant.output_scales.size() != 2))
      r.fail("source scales on a step that is not a binary one");
    s.quant.src_zero_point = r.i32();
    s.quant.dst_zero_point = r.i32();
  }
  return s;
}


// ---- shape-polymorphic functions (blob version 2) ----

// Whether a region graph holds shape computations (they start at Shape or Size; blob
// version 4, docs/backends.md).
bool computesShapes(const ir::Graph& g) {
  return std::any_of(g.nodes.begin(), g.nodes.end(), kernels::isShapeOf);
}

constexpr size_t kMaxPolyRank = 16;  // TensorLimits' default rank

void writeType(BlobWriter& w, const ir::TensorType& t) {
  w.u8(uint8_t(t.dtype));
  w.u8(t.has_rank ? 1 : 0);
  w.u32(uint32_t(t.dims.size()));
  for (const ir::Dim& d : t.dims) {
    w.i64(d.value);
    w.str(d.symbol);
  }
}

ir::DType readDType(BlobReader& r, const char* what) {
  uint8_t code = r.u8();
  if (code >= ir::kNumDTypes) r.fail(std::string(what) + ": unknown data type " + std::to_string(code));
  return ir::DType(code);
}

ir::TensorType readType(BlobReader& r) {
  ir::TensorType t;
  t.dtype = readDType(r, "value type");
  t.has_rank = r.u8() != 0;
  uint32_t rank = r.count(12, "value rank");
  if (rank > kMaxPolyRank || (!t.has_rank && rank != 0)) r.fail("value type: rank " + std::to_string(rank));
  t.dims.resize(rank);
  for (ir::Dim& d : t.dims) {
    d.value = r.i64();
    if (d.value < -1 || d.value > (int64_t(1) << 40)) r.fail("value type: dimension " + std::to_string(d.value));
    d.symbol = r.str();
    if (d.value >= 0 && !d.symbol.empty()) r.fail("value type: a known dimension with a symbol");
  }
  return t;
}

void writeAttribute(BlobWriter& w, const std::string& name, const ir::Attribute& a) {
  w.str(name);
  w.u8(uint8_t(a.kind));
  switch (a.kind) {
    case ir::Attribute::Kind::kInt:
      w.i64(a.i);
      break;
    case ir::Attribute::Kind::kFloat:
      w.f32(a.f);
      break;
    case ir::Attribute::Kind::kString:
      w.str(a.s);
      break;
    case ir::Attribute::Kind::kInts:
      w.ints(a.ints);
      break;
    case ir::Attribute::Kind::kFloats:
      w.u32(uint32_t(a.floats.size()));
      for (float f : a.floats) w.f32(f);
      break;
    case ir::Attribute::Kind::kStrings:
      w.u32(uint32_t(a.strings.size()));
      for (const std::string& x : a.strings) w.str(x);
      break;
    case ir::Attribute::Kind::kTensor:
      throw Error(ErrorCode::kInternal, "dnnl backend: a shape-polymorphic region has a tensor attribute '" + name + "'");
    case ir::Attribute::Kind::kGraph:
      throw Error(ErrorCode::kInternal, "dnnl backend: a region has a graph attribute '" + name + "'");
  }
}

void readAttribute(BlobReader& r, ir::AttributeMap& attrs) {
  std::string name = r.str();
  ir::Attribute a;
  uint8_t kind = r.u8();
  switch (kind) {
    case uint8_t(ir::Attribute::Kind::kInt):
      a.i = r.i64();
      break;
    case uint8_t(ir::Attribute::Kind::kFloat):
      a.f = r.f32();
      break;
    case uint8_t(ir::Attribute::Kind::kString):
      a.s = r.str();
      break;
    case uint8_t(ir::Attribute::Kind::kInts):
      a.ints = r.ints(1 << 16);
      break;
    case uint8_t(ir::Attribute::Kind::kFloats): {
      uint32_t n = r.count(4, "attribute floats");
      for (uint32_t i = 0; i < n; ++i) a.floats.push_back(r.f32());
      break;
    }
    case uint8_t(ir::Attribute::Kind::kStrings): {
      uint32_t n = r.count(4, "attribute strings");
      for (uint32_t i = 0; i < n; ++i) a.strings.push_back(r.str());
      break;
    }
    default:
      r.fail("attribute '" + name + "': kind " + std::to_string(kind) + " (a region's attributes are numbers and strings)");
  }
  a.kind = ir::Attribute::Kind(kind);
  if (attrs.has(name)) r.fail("attribute '" + name + "' given twice");
  attrs.set(name, std::move(a));
}

void writeIds(BlobWriter& w, const std::vector<int32_t>& ids) {
  w.u32(uint32_t(ids.size()));
  for (int32_t id : ids) w.i32(id);
}

std::vector<int32_t> readIds(BlobReader& r, size_t limit, bool omitted_allowed, const char* what) {
  uint32_t n = r.count(4, what);
  std::vector<int32_t> out(n);
  for (int32_t& id : out) {
    id = r.i32();
    if (id == ir::kNoValue && omitted_allowed) continue;
    if (id < 0 || size_t(id) >= limit) r.fail(std::string(what) + ": value " + std::to_string(id) + " out of range");
  }
  return out;
}

void writePoly(BlobWriter& w, const PolyFunction& p) {
  const ir::Graph& g = p.graph;
  w.u32(uint32_t(p.representative.size()));
  for (const std::vector<int64_t>& shape : p.representative) w.ints(shape);
  w.u32(uint32_t(g.constants.size()));
  for (size_t c = 0; c < g.constants.size(); ++c) {
    const ir::Constant& k = g.constants.get(ir::ConstId(c));
    w.u32(p.global[c]);
    w.u8(uint8_t(k.dtype));
    w.ints(k.shape);
    w.i64(p.bytes_at[c]);
  }
  w.u32(uint32_t(g.values.size()));
  for (const ir::Value& v : g.values) {
    w.str(v.name);
    writeType(w, v.type);
    w.i32(v.isConstant() ? int32_t(v.constant) : -1);
  }
  w.u32(uint32_t(g.nodes.size()));
  for (const ir::Node& n : g.nodes) {
    w.str(n.op_type);
    w.str(n.domain);
    w.str(n.name);
    w.i32(n.opset);
    writeIds(w, n.inputs);
    writeIds(w, n.outputs);
    w.u32(uint32_t(n.attrs.all().size()));
    for (const auto& [name, a] : n.attrs.all()) writeAttribute(w, name, a);
  }
  writeIds(w, g.inputs);
  writeIds(w, g.outputs);
  w.u32(uint32_t(p.weights.size()));
  for (const PolyFunction::Weights& x : p.weights) {
    w.u32(x.source);
    w.u8(x.folded ? 1 : 0);
    writeDesc(w, x.md);
  }
  w.u32(uint32_t(p.derived.size()));
  for (const PolyFunction::Derived& x : p.derived) {
    w.u32(x.source);
    w.u8(x.same_values ? 1 : 0);
    writeDesc(w, x.md);
    w.u32(x.id);
  }
  w.u32(uint32_t(p.embedded.size()));
  for (const PolyFunction::Embedded& x : p.embedded) {
    w.u32(uint32_t(x.absorbed.size()));
    for (ir::ConstId id : x.absorbed) w.u32(id);
    writeDesc(w, x.md);
    w.u64(x.offset);
  }
}

// Reads a region graph; constant bytes are views into the blob's embedded data (at
// `embedded`, `embedded_size` bytes; known once the functions are read: the caller
// binds them after). Structural checks here, semantic ones (Graph::verify, inference
// at the representative shapes) by the module at load.
std::shared_ptr<PolyFunction> readPoly(BlobReader& r, uint32_t num_inputs, uint32_t num_outputs) {
  auto p = std::make_shared<PolyFunction>();
  ir::Graph& g = p->graph;
  uint32_t nrep = r.count(4, "representative shape count");
  if (nrep != num_inputs) r.fail("shape-polymorphic function: " + std::to_string(nrep) + " representative shapes for " +
                                 std::to_string(num_inputs) + " inputs");
  for (uint32_t i = 0; i < nrep; ++i) {
    std::vector<int64_t> shape = r.ints(kMaxPolyRank);
    for (int64_t d : shape)
      if (d < 1 || d > (int64_t(1) << 40)) r.fail("representative shape: dimension " + std::to_string(d));
    p->representative.push_back(std::move(shape));
  }
  uint32_t nconst = r.count(21, "region constant count");
  for (uint32_t c = 0; c < nconst; ++c) {
    ir::ConstId global = r.u32();
    if (global >= ir::kNoConst) r.fail("region constant: id out of range");
    ir::DType dtype = readDType(r, "region constant");
    std::vector<int64_t> shape = r.ints(kMaxPolyRank);
    for (int64_t d : shape)
      if (d < 0 || d > (int64_t(1) << 40)) r.fail("region constant: dimension " + std::to_string(d));
    int64_t at = r.i64();
    if (at < -1) r.fail("region constant: offset " + std::to_string(at));
    std::optional<uint64_t> nbytes = ir::checkedNbytes(dtype, shape);
    if (!nbytes || *nbytes > (uint64_t(1) << 40)) r.fail("region constant: too large");
    p->global.push_back(global);
    p->bytes_at.push_back(at);
    g.constants.add("", dtype, std::move(shape), Bytes{nullptr, nullptr, size_t(*nbytes)});
  }
  uint32_t nvalues = r.count(18, "region value count");
  for (uint32_t v = 0; v < nvalues; ++v) {
    ir::Value value;
    value.name = r.str();
    value.type = readType(r);
    int32_t c = r.i32();
    if (c < -1 || c >= int32_t(nconst)) r.fail("region value: constant " + std::to_string(c) + " out of range");
    value.constant = c < 0 ? ir::kNoConst : ir::ConstId(c);
    g.values.push_back(std::move(value));
  }
  uint32_t nnodes = r.count(26, "region node count");
  for (uint32_t n = 0; n < nnodes; ++n) {
    ir::Node node;
    node.op_type = r.str();
    node.domain = r.str();
    node.name = r.str();
    node.opset = r.i32();
    if (node.opset < 1 || node.opset > 1000) r.fail("region node: opset " + std::to_string(node.opset));
    node.inputs = readIds(r, nvalues, true, "region node inputs");
    node.outputs = readIds(r, nvalues, true, "region node outputs");
    uint32_t nattrs = r.count(6, "attribute count");
    for (uint32_t a = 0; a < nattrs; ++a) readAttribute(r, node.attrs);
    for (ir::ValueId out : node.outputs)
      if (out != ir::kNoValue) {
        if (g.values[size_t(out)].producer != ir::kNoNode || g.values[size_t(out)].isConstant())
          r.fail("region node: value " + std::to_string(out) + " is made twice");
        g.values[size_t(out)].producer = ir::NodeId(n);
      }
    g.nodes.push_back(std::move(node));
  }
  g.inputs = readIds(r, nvalues, false, "region inputs");
  g.outputs = readIds(r, nvalues, false, "region outputs");
  if (g.inputs.size() != num_inputs || g.outputs.size() != num_outputs)
    r.fail("shape-polymorphic function: its region has " + std::to_string(g.inputs.size()) + " inputs and " +
           std::to_string(g.outputs.size()) + " outputs");
  // A record's layout: float16 is a mat_vec's weights' type only, which a
  // shape-polymorphic function never has.
  auto recordDesc = [&r] {
    memory::desc md = readDesc(r);
    if (md.data.data_type == dnnl_f16) r.fail("shape-polymorphic record: float16 (only a mat_vec's weights are)");
    return md;
  };
  uint32_t nweights = r.count(6, "weights record count");
  for (uint32_t i = 0; i < nweights; ++i) {
    PolyFunction::Weights x;
    x.source = r.u32();
    x.folded = r.u8() != 0;
    x.md = recordDesc();
    p->weights.push_back(std::move(x));
  }
  uint32_t nderived = r.count(10, "derived record count");
  for (uint32_t i = 0; i < nderived; ++i) {
    PolyFunction::Derived x;
    x.source = r.u32();
    x.same_values = r.u8() != 0;
    x.md = recordDesc();
    x.id = r.u32();
    p->derived.push_back(std::move(x));
  }
  uint32_t nembedded = r.count(12, "embedded record count");
  for (uint32_t i = 0; i < nembedded; ++i) {
    PolyFunction::Embedded x;
    uint32_t nabsorbed = r.count(4, "absorbed count");
    for (uint32_t k = 0; k < nabsorbed; ++k) x.absorbed.push_back(r.u32());
    x.md = recordDesc();
    x.offset = r.u64();
    p->embedded.push_back(std::move(x));
  }
  return p;
}

void check(bool ok, const std::string& msg) {
  if (!ok) throw Error(ErrorCode::kInvalidArtifact, "dnnl module blob: " + msg);
}

void validate(const Program& p, size_t blob_size) {
  for (size_t f = 0; f < p.functions.size(); ++f) {
    const Function& fn = p.functions[f];
    const std::string where = "function " + std::to_string(f);
    std::vector<int> outputs_seen(fn.num_outputs, 0);
    for (const Buffer& b : fn.buffers) {
      if (b.kind == BufferKind::kInput)
        check(b.index < fn.num_inputs, where + ": input buffer index out of range");
      if (b.kind == BufferKind::kOutput) {
        check(b.index < fn.num_outputs, where + ": output buffer index out of range");
        ++outputs_seen[b.index];
      }
    }
    for (size_t i = 0; i < fn.buffers.size(); ++i) {
      const Buffer& b = fn.buffers[i];
      if (!b.view) continue;
      const std::string at = where + " buffer " + std::to_string(i);
      check(b.kind == BufferKind::kTemp && !b.zero_padded, at + ": a view must be a plain temporary");
      check(b.index < fn.buffers.size() && b.index != i, at + ": a view of a buffer out of range");
      const Buffer& parent = fn.buffers[b.index];
      check(parent.kind == BufferKind::kTemp && !parent.view && !parent.zero_padded,
            at + ": a view must be of a temporary that is no view and has no padding");
      // Compared without a sum: nothing can wrap.
      check(b.offset <= parent.bytes && b.bytes <= parent.bytes - b.offset, at + ": a view outside its buffer");
    }
    for (uint32_t o = 0; o < fn.num_outputs; ++o)
      check(outputs_seen[o] == 1,
            where + ": output " + std::to_string(o) + " has " + std::to_string(outputs_seen[o]) + " buffers");
    for (size_t s = 0; s < fn.steps.size(); ++s) {
      if (isOwnKernel(fn.steps[s].kind))
        checkOwnKernelStep(fn.steps[s], where + " step " + std::to_string(s) + " (" + fn.steps[s].label + ")");
      for (const Arg& a : fn.steps[s].args) {
        const std::string at = where + " step " + std::to_string(s) + " (" + fn.steps[s].label + ")";
        if (a.source == ArgSource::kBuffer) {
          check(a.index < fn.buffers.size(), at + ": buffer index out of range");
          check(extentBytes(a.md) <= fn.buffers[a.index].bytes, at + ": argument larger than its buffer");
        } else if (a.source == ArgSource::kConstant) {
          check(a.index < ir::kNoConst, at + ": constant id out of range");
        } else {
          check(a.index <= p.embedded_size && extentBytes(a.md) <= p.embedded_size - a.index,
                at + ": embedded argument outside the embedded data");
        }
      }
    }
  }
  check(p.embedded_offset <= blob_size && p.embedded_size <= blob_size - p.embedded_offset,
        "embedded data outside the blob");
  for (size_t f = 0; f < p.functions.size(); ++f) {
    const PolyFunction* poly = p.functions[f].poly.get();
    if (!poly) continue;
    const std::string where = "function " + std::to_string(f) + " (shape-polymorphic)";
    for (size_t c = 0; c < poly->bytes_at.size(); ++c) {
      if (poly->bytes_at[c] < 0) continue;
      const uint64_t at = uint64_t(poly->bytes_at[c]), n = poly->graph.constants.get(ir::ConstId(c)).nbytes();
      check(at <= p.embedded_size && n <= p.embedded_size - at, where + ": a region constant outside the embedded data");
    }
    for (const PolyFunction::Embedded& e : poly->embedded)
      check(e.offset <= p.embedded_size && extentBytes(e.md) <= p.embedded_size - e.offset,
            where + ": an embedded record outside the embedded data");
  }
}

}  // namespace

std::vector<std::byte> writeProgram(const Program& p) {
  BlobWriter w;
  w.raw(kBlobMagic, 4);
  bool polymorphic = false, views = false, shape_computations = false, scaled_softmax = false,
       quantized_copy = false, swish_mean = false, mat_vec = false, poly_views = false;
  for (const Function& fn : p.functions) {
    polymorphic |= fn.poly != nullptr;
    for (const Step& s : fn.steps) {
      scaled_softmax |= s.kind == StepKind::kSoftmaxRows && s.alpha != 0;
      quantized_copy |= s.kind == StepKind::kAddRowCopy && s.find(kQuantizedResultArg);
      swish_mean |= s.kind == StepKind::kSwish && s.find(DNNL_ARG_DST_1);
      mat_vec |= s.kind == StepKind::kMatVec;
    }
    shape_computations |= fn.poly && computesShapes(fn.poly->graph);
    for (const Buffer& b : fn.buffers) {
      views |= b.view;
      poly_views |= b.view && fn.poly;
    }
  }
  const uint32_t version = poly_views           ? 9
                           : mat_vec            ? 8
                           : swish_mean         ? 7
                           : quantized_copy     ? 6
                           : scaled_softmax     ? 5
                           : shape_computations ? 4
                           : views              ? 3
                           : polymorphic        ? 2
                                                : 1;
  w.u32(version);
  const dnnl_version_t* v = dnnl_version();
  w.u32(uint32_t(v->major));
  w.u32(uint32_t(v->minor));
  w.u32(uint32_t(p.functions.size()));
  size_t embedded_at = w.size();
  w.u64(0);
  w.u64(p.embedded.size());
  for (const Function& fn : p.functions) {
    w.u32(fn.num_inputs);
    w.u32(fn.num_outputs);
    w.u32(uint32_t(fn.buffers.size()));
    for (const Buffer& b : fn.buffers) {
      w.u8(uint8_t(b.kind));
      w.u8(uint8_t((b.zero_padded ? 1 : 0) | (b.view ? 2 : 0)));
      w.u32(b.index);
      w.u64(b.bytes);
      if (b.view) w.u64(b.offset);
    }
    w.u32(uint32_t(fn.steps.size()));
    for (const Step& s : fn.steps) writeStep(w, s);
    if (version >= 2) {
      w.u8(fn.poly ? 1 : 0);
      if (fn.poly) writePoly(w, *fn.poly);
    }
  }
  w.alignTo(kEmbeddedAlignment);
  w.patchU64(embedded_at, w.size());
  w.raw(p.embedded.data(), p.embedded.size());
  return std::move(w.bytes());
}

Program readProgram(const std::byte* data, size_t size) {
  BlobReader r(data, size, "dnnl module blob");
  char magic[4];
  for (char& c : magic) c = char(r.u8());
  if (std::memcmp(magic, kBlobMagic, 4) != 0) r.fail("magic: not a dnnl module blob");
  uint32_t version = r.u32();
  if (version < 1 || version > kBlobVersion)
    r.fail("version: blob version " + std::to_string(version) + ", this build reads versions 1 to " +
           std::to_string(kBlobVersion));
  r.u32();  // oneDNN major version
  r.u32();  // oneDNN minor version
  Program p;
  uint32_t nfunctions = r.count(12, "function count");
  p.embedded_offset = r.u64();
  p.embedded_size = r.u64();
  p.functions.resize(nfunctions);
  for (Function& fn : p.functions) {
    fn.num_inputs = r.u32();
    fn.num_outputs = r.u32();
    uint32_t nbuffers = r.count(14, "buffer count");
    // Every region input and output has its own buffer.
    if (fn.num_inputs > nbuffers || fn.num_outputs > nbuffers)
      r.fail("input/output count: more inputs or outputs than buffers");
    fn.buffers.resize(nbuffers);
    for (Buffer& b : fn.buffers) {
      uint8_t kind = r.u8();
      if (kind < uint8_t(BufferKind::kTemp) || kind > uint8_t(BufferKind::kOutput))
        r.fail("buffer kind: unknown buffer kind " + std::to_string(kind));
      b.kind = BufferKind(kind);
      const uint8_t flags = r.u8();
      if (flags > (version >= 3 ? 3 : 1)) r.fail("buffer flags: unknown flags " + std::to_string(flags));
      b.zero_padded = (flags & 1) != 0;
      b.view = (flags & 2) != 0;
      b.index = r.u32();
      b.bytes = r.u64();
      if (b.bytes > (uint64_t(1) << 40)) r.fail("buffer size: larger than 1 TiB");
      if (b.view) b.offset = r.u64();
    }
    uint32_t nsteps = r.count(40, "step count");
    fn.steps.reserve(nsteps);
    for (uint32_t s = 0; s < nsteps; ++s) {
      fn.steps.push_back(readStep(r));
      if (version < 5 && fn.steps.back().kind == StepKind::kSoftmaxRows && fn.steps.back().alpha != 0)
        r.fail("step: a softmax_rows with a scale in a version " + std::to_string(version) + " blob (version 5)");
      if (version < 6 && fn.steps.back().kind == StepKind::kAddRowCopy && fn.steps.back().find(kQuantizedResultArg))
        r.fail("step: an add_row_copy with a quantized result in a version " + std::to_string(version) +
               " blob (version 6)");
      if (version < 7 && fn.steps.back().kind == StepKind::kSwish && fn.steps.back().find(DNNL_ARG_DST_1))
        r.fail("step: a swish with a mean in a version " + std::to_string(version) + " blob (version 7)");
      if (version < 8 && fn.steps.back().kind == StepKind::kMatVec)
        r.fail("step: a mat_vec in a version " + std::to_string(version) + " blob (version 8)");
      // float16 is a mat_vec's weights' type only: no oneDNN primitive computes it here.
      for (const Arg& a : fn.steps.back().args)
        if (a.md.data.data_type == dnnl_f16 &&
            (fn.steps.back().kind != StepKind::kMatVec || a.key != DNNL_ARG_WEIGHTS))
          r.fail("step: float16 argument " + std::to_string(a.key) + " (only a mat_vec's weights are float16)");
    }
    if (version >= 2) {
      uint8_t poly = r.u8();
      if (poly > 1) r.fail("shape-polymorphic flag: " + std::to_string(poly));
      if (poly) fn.poly = readPoly(r, fn.num_inputs, fn.num_outputs);
      if (poly && version < 4 && computesShapes(fn.poly->graph))
        r.fail("shape-polymorphic function: a version " + std::to_string(version) +
               " blob whose region graph computes shapes (version 4)");
      bool views = false;
      for (const Buffer& b : fn.buffers) views |= b.view;
      if (poly && version < 9 && views)
        r.fail("shape-polymorphic function: a version " + std::to_string(version) +
               " blob with a buffer that is a view (version 9)");
    }
  }
  validate(p, size);
  // Region constants kept in the blob: views into its embedded data.
  for (Function& fn : p.functions) {
    if (!fn.poly) continue;
    for (size_t c = 0; c < fn.poly->bytes_at.size(); ++c)
      if (fn.poly->bytes_at[c] >= 0)
        fn.poly->graph.constants.get(ir::ConstId(c)).bytes.data = data + p.embedded_offset + fn.poly->bytes_at[c];
  }
  return p;
}

}  // namespace partita::dnnl_backend
