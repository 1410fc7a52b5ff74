#include "backend/dnnl/dnnl_program.h"

#include <cstring>

#include "backend/dnnl/dnnl_blob_io.h"
#include "backend/dnnl/dnnl_memory_desc.h"
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
  w.u32(s.flags);
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
}

Step readStep(BlobReader& r) {
  Step s;
  uint8_t kind = r.u8();
  if (kind < uint8_t(StepKind::kReorder) || kind > uint8_t(StepKind::kResampling))
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
  return s;
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
    for (uint32_t o = 0; o < fn.num_outputs; ++o)
      check(outputs_seen[o] == 1,
            where + ": output " + std::to_string(o) + " has " + std::to_string(outputs_seen[o]) + " buffers");
    for (size_t s = 0; s < fn.steps.size(); ++s)
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
  check(p.embedded_offset <= blob_size && p.embedded_size <= blob_size - p.embedded_offset,
        "embedded data outside the blob");
}

}  // namespace

std::vector<std::byte> writeProgram(const Program& p) {
  BlobWriter w;
  w.raw(kBlobMagic, 4);
  w.u32(kBlobVersion);
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
      w.u8(b.zero_padded ? 1 : 0);
      w.u32(b.index);
      w.u64(b.bytes);
    }
    w.u32(uint32_t(fn.steps.size()));
    for (const Step& s : fn.steps) writeStep(w, s);
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
  if (version != kBlobVersion)
    r.fail("version: blob version " + std::to_string(version) + ", this build reads version " +
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
      b.zero_padded = r.u8() != 0;
      b.index = r.u32();
      b.bytes = r.u64();
      if (b.bytes > (uint64_t(1) << 40)) r.fail("buffer size: larger than 1 TiB");
    }
    uint32_t nsteps = r.count(40, "step count");
    fn.steps.reserve(nsteps);
    for (uint32_t s = 0; s < nsteps; ++s) fn.steps.push_back(readStep(r));
  }
  validate(p, size);
  return p;
}

}  // namespace partita::dnnl_backend
