// The "ewise" module's program: chains of elementwise ops fused into one pass over
// memory. A function computes, for every element of one iteration shape, a short
// straight-line program over registers (one per value of the region); the region's
// inputs are read and its outputs written once, with nothing in between going back
// to memory. Constant operands broadcast into the iteration shape; small ones
// (scales, biases, bounds) are embedded in the blob, larger ones are borrowed from
// the shared weight store by ID. Blob format: docs/backends.md ("The ewise backend").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ir/constant_pool.h"
#include "runtime/module.h"

namespace partita::ewise {

inline constexpr char kModuleKind[] = "ewise";
inline constexpr char kBlobMagic[4] = {'P', 'E', 'W', '1'};
// Version 2 adds dims given at run time (kRunTimeDim in a function's shape); a blob
// with none is written as version 1, and both are read.
inline constexpr uint32_t kBlobVersion = 2;
inline constexpr int64_t kRunTimeDim = -1;
using runtime::kEmbeddedAlignment;  // embedded tensors start at multiples of it
// Constants with at most this many elements are embedded in the blob; larger ones are
// borrowed from the weight store.
inline constexpr int64_t kMaxEmbeddedElements = 4096;

// Stable numbering: written into blobs.
enum class Op : uint8_t {
  kAdd = 1, kSub, kMul, kDiv, kMax, kMin,  // binary
  kRelu, kLeakyRelu, kThresholdedRelu, kElu, kSelu, kCelu, kSigmoid, kHardSigmoid, kHardSwish, kSoftplus,
  kSoftsign, kTanh, kExp, kLog, kSqrt, kNeg, kAbs, kReciprocal, kErf, kFloor, kCeil, kRound,
  kClip,  // alpha = min, beta = max
  kLast = kClip,
};
bool isBinary(Op op);
const char* opName(Op op);  // the ONNX op type

enum class OperandKind : uint8_t {
  kNone = 0,      // unary ops' second operand
  kRegister = 1,  // index: a register of the function
  kConstant = 2,  // index: a constant slot of the function
};

struct Operand {
  OperandKind kind = OperandKind::kNone;
  uint32_t index = 0;
  bool operator==(const Operand&) const = default;
};

struct Instr {
  Op op = Op::kAdd;
  uint32_t dst = 0;  // a register written by this instruction only
  Operand a, b;
  float alpha = 0, beta = 0;  // the op's parameters (LeakyRelu alpha, Clip bounds, ...)
  bool operator==(const Instr&) const = default;
};

// A constant operand, broadcast into the function's iteration shape.
struct ConstSlot {
  ir::ConstId id = ir::kNoConst;
  bool embedded = false;
  uint64_t offset = 0;         // embedded: byte offset into the blob's data area
  std::vector<int64_t> shape;  // float32; the function's rank (leading 1s added); each dim 1 or the shape's
  bool operator==(const ConstSlot&) const = default;
};

struct Function {
  // Every input, output and register has this shape. A dim kRunTimeDim is symbolic in
  // the model (a shape-polymorphic function): the inputs give it at run time.
  std::vector<int64_t> shape;
  uint32_t num_inputs = 0;     // registers [0, num_inputs) are the inputs, in order
  uint32_t num_registers = 0;
  std::vector<uint32_t> outputs;  // the register holding each output
  std::vector<ConstSlot> constants;
  std::vector<Instr> code;
  bool polymorphic() const;
  bool operator==(const Function&) const = default;
};

struct Program {
  std::vector<Function> functions;
  std::vector<std::byte> data;  // compile side: the embedded constants' bytes
  // Read side: where the embedded bytes are inside the blob (zero copy).
  uint64_t data_offset = 0, data_size = 0;
};

std::vector<std::byte> writeProgram(const Program& p);
// Parses and checks a blob: indices in range, registers written once before they are
// read, shapes that broadcast, embedded ranges inside the blob. Throws
// Error(kInvalidArtifact) naming what is wrong for a truncated, corrupted or foreign blob.
Program readProgram(const std::byte* data, size_t size);

}  // namespace partita::ewise
