#include "backend/ewise/ewise_program.h"

#include <cstring>

#include "base/byte_io.h"
#include "ir/type.h"
#include "partita/error.h"

namespace partita::ewise {

namespace {

constexpr const char* kOpNames[] = {
    "",         "Add",      "Sub",  "Mul",  "Div",        "Max",         "Min",
    "Relu",     "LeakyRelu", "ThresholdedRelu", "Elu", "Selu", "Celu",   "Sigmoid",
    "HardSigmoid", "HardSwish", "Softplus", "Softsign", "Tanh", "Exp",     "Log",
    "Sqrt",     "Neg",      "Abs",  "Reciprocal", "Erf", "Floor", "Ceil", "Round",
    "Clip",
};
static_assert(sizeof(kOpNames) / sizeof(kOpNames[0]) == size_t(Op::kLast) + 1);

constexpr int64_t kMaxRank = 16;
constexpr int64_t kMaxElements = int64_t(1) << 40;

void writeOperand(artifact::ByteWriter& w, const Operand& o) {
  w.u8(uint8_t(o.kind));
  w.u32(o.index);
}

void writeShape(artifact::ByteWriter& w, const std::vector<int64_t>& shape) { w.ints(shape); }

// `run_time_dims`: a dim may be kRunTimeDim (a function's shape in a version 2 blob).
std::vector<int64_t> readShape(artifact::ByteReader& r, const char* what, bool run_time_dims = false) {
  uint32_t rank = r.count(8, what);
  if (rank > kMaxRank) r.fail(std::string(what) + " has rank " + std::to_string(rank) + " (at most 16)");
  std::vector<int64_t> shape(rank);
  int64_t numel = 1;
  for (int64_t& d : shape) {
    d = r.i64();
    if (run_time_dims && d == kRunTimeDim) continue;
    if (d <= 0 || d > kMaxElements || numel > kMaxElements / d)
      r.fail(std::string(what) + " has a dimension " + std::to_string(d) + " out of range");
    numel *= d;
  }
  return shape;
}

Operand readOperand(artifact::ByteReader& r) {
  Operand o;
  uint8_t kind = r.u8();
  if (kind > uint8_t(OperandKind::kConstant)) r.fail("unknown operand kind " + std::to_string(kind));
  o.kind = OperandKind(kind);
  o.index = r.u32();
  return o;
}

// Everything a run relies on, checked once at load.
void validateFunction(artifact::ByteReader& r, const Function& fn, uint64_t data_size, size_t index) {
  const std::string where = "function " + std::to_string(index) + ": ";
  if (fn.num_inputs > fn.num_registers) r.fail(where + "more inputs than registers");
  std::vector<bool> written(fn.num_registers, false);
  for (uint32_t i = 0; i < fn.num_inputs; ++i) written[i] = true;
  for (const ConstSlot& c : fn.constants) {
    if (c.shape.size() != fn.shape.size()) r.fail(where + "a constant's rank differs from the function's");
    for (size_t d = 0; d < c.shape.size(); ++d)
      if (c.shape[d] != 1 && c.shape[d] != fn.shape[d])
        r.fail(where + "constant " + std::to_string(c.id) + " does not broadcast to the function's shape");
    if (c.embedded) {
      const uint64_t bytes = uint64_t(ir::shapeNumel(c.shape)) * sizeof(float);
      if (c.offset % sizeof(float) != 0 || c.offset > data_size || bytes > data_size - c.offset)
        r.fail(where + "embedded constant " + std::to_string(c.id) + " lies outside the blob's data");
    }
  }
  auto checkRead = [&](const Operand& o, bool needed) {
    switch (o.kind) {
      case OperandKind::kNone:
        if (needed) r.fail(where + "an operand is missing");
        return;
      case OperandKind::kRegister:
        if (o.index >= fn.num_registers || !written[o.index])
          r.fail(where + "reads register " + std::to_string(o.index) + " before it is written");
        return;
      case OperandKind::kConstant:
        if (o.index >= fn.constants.size()) r.fail(where + "reads a constant slot that does not exist");
        return;
    }
  };
  for (const Instr& in : fn.code) {
    checkRead(in.a, true);
    checkRead(in.b, isBinary(in.op));
    if (!isBinary(in.op) && in.b.kind != OperandKind::kNone) r.fail(where + "a unary op has two operands");
    if (in.a.kind != OperandKind::kRegister && in.b.kind != OperandKind::kRegister)
      r.fail(where + "an instruction reads no register");
    if (in.dst < fn.num_inputs || in.dst >= fn.num_registers || written[in.dst])
      r.fail(where + "writes register " + std::to_string(in.dst) + ", which is an input or already written");
    written[in.dst] = true;
  }
  std::vector<bool> is_output(fn.num_registers, false);
  for (uint32_t o : fn.outputs) {
    if (o < fn.num_inputs || o >= fn.num_registers || !written[o] || is_output[o])
      r.fail(where + "output register " + std::to_string(o) + " is an input, unwritten or repeated");
    is_output[o] = true;
  }
}

}  // namespace

bool Function::polymorphic() const {
  for (int64_t d : shape)
    if (d == kRunTimeDim) return true;
  return false;
}

bool isBinary(Op op) { return uint8_t(op) >= uint8_t(Op::kAdd) && uint8_t(op) <= uint8_t(Op::kMin); }

const char* opName(Op op) {
  return uint8_t(op) >= 1 && uint8_t(op) <= uint8_t(Op::kLast) ? kOpNames[uint8_t(op)] : "?";
}

std::vector<std::byte> writeProgram(const Program& p) {
  artifact::ByteWriter w;
  w.raw(kBlobMagic, 4);
  bool polymorphic = false;
  for (const Function& fn : p.functions) polymorphic |= fn.polymorphic();
  w.u32(polymorphic ? kBlobVersion : 1);
  w.u32(uint32_t(p.functions.size()));
  for (const Function& fn : p.functions) {
    writeShape(w, fn.shape);
    w.u32(fn.num_inputs);
    w.u32(fn.num_registers);
    w.u32(uint32_t(fn.outputs.size()));
    for (uint32_t o : fn.outputs) w.u32(o);
    w.u32(uint32_t(fn.constants.size()));
    for (const ConstSlot& c : fn.constants) {
      w.u32(c.id);
      w.u8(c.embedded ? 1 : 0);
      w.u64(c.offset);
      writeShape(w, c.shape);
    }
    w.u32(uint32_t(fn.code.size()));
    for (const Instr& in : fn.code) {
      w.u8(uint8_t(in.op));
      w.u32(in.dst);
      writeOperand(w, in.a);
      writeOperand(w, in.b);
      w.f32(in.alpha);
      w.f32(in.beta);
    }
  }
  w.u64(p.data.size());
  w.alignTo(kEmbeddedAlignment);
  w.raw(p.data.data(), p.data.size());
  return std::move(w.bytes());
}

Program readProgram(const std::byte* data, size_t size) {
  artifact::ByteReader r(data, size, "ewise module blob");
  if (size < 4 || std::memcmp(data, kBlobMagic, 4) != 0) r.fail("not an ewise module blob (bad magic)");
  for (int i = 0; i < 4; ++i) r.u8();
  uint32_t version = r.u32();
  if (version < 1 || version > kBlobVersion)
    r.fail("blob version " + std::to_string(version) + ", this build reads versions 1 to " +
           std::to_string(kBlobVersion));
  Program p;
  p.functions.resize(r.count(16, "functions"));
  for (Function& fn : p.functions) {
    fn.shape = readShape(r, "a function's shape", version >= 2);
    fn.num_inputs = r.u32();
    fn.num_registers = r.count(0, "registers");
    if (fn.num_registers > 4096) r.fail("more than 4096 registers");
    fn.outputs.resize(r.count(4, "outputs"));
    for (uint32_t& o : fn.outputs) o = r.u32();
    fn.constants.resize(r.count(17, "constants"));
    for (ConstSlot& c : fn.constants) {
      c.id = r.u32();
      uint8_t embedded = r.u8();
      if (embedded > 1) r.fail("a constant's embedded flag is " + std::to_string(embedded));
      c.embedded = embedded == 1;
      c.offset = r.u64();
      c.shape = readShape(r, "a constant's shape");
    }
    fn.code.resize(r.count(23, "instructions"));
    for (Instr& in : fn.code) {
      uint8_t op = r.u8();
      if (op < 1 || op > uint8_t(Op::kLast)) r.fail("unknown op " + std::to_string(op));
      in.op = Op(op);
      in.dst = r.u32();
      in.a = readOperand(r);
      in.b = readOperand(r);
      in.alpha = r.f32();
      in.beta = r.f32();
    }
  }
  p.data_size = r.u64();
  p.data_offset = (r.position() + kEmbeddedAlignment - 1) / kEmbeddedAlignment * kEmbeddedAlignment;
  if (p.data_offset > size || p.data_size != size - p.data_offset)
    r.fail("the embedded data (" + std::to_string(p.data_size) + " bytes at " + std::to_string(p.data_offset) +
           ") does not end the blob of " + std::to_string(size) + " bytes");
  for (size_t i = 0; i < p.functions.size(); ++i) validateFunction(r, p.functions[i], p.data_size, i);
  return p;
}

}  // namespace partita::ewise
