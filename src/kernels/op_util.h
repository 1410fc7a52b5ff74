// Shared pieces for host op definitions: broadcasting, axes, reading small integer
// tensors, strides, dtype dispatch.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/op_registry.h"
#include "partita/error.h"

namespace partita::kernels {

// numpy-style broadcast of two types; symbolic dims broadcast when equal or against 1.
// Returns false when the shapes cannot broadcast.
bool broadcastTypes(const ir::TensorType& a, const ir::TensorType& b, ir::TensorType& out);
std::vector<int64_t> broadcastShapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b);  // throws on mismatch

// Normalises a possibly negative axis into [0, rank) (or [0, rank] when `inclusive`).
// Throws Error(kInvalidModel) naming `what` when out of range.
int64_t normalizeAxis(int64_t axis, int64_t rank, const std::string& what, bool inclusive = false);

// Dimension arithmetic of inference and kernels: a*b and a+b, failing through the
// context (InferContext or KernelContext, so the message names the node) when the
// result leaves int64. A model's dims and attribute values can be anything.
template <typename Ctx>
int64_t checkedDim(const Ctx& c, bool overflowed, int64_t result, int64_t a, const char* op, int64_t b) {
  if (overflowed) c.fail(std::to_string(a) + op + std::to_string(b) + " overflows a 64-bit dimension");
  return result;
}
template <typename Ctx>
int64_t mulDims(const Ctx& c, int64_t a, int64_t b) {
  int64_t r = 0;
  const bool overflowed = __builtin_mul_overflow(a, b, &r);  // before r is read
  return checkedDim(c, overflowed, r, a, " x ", b);
}
template <typename Ctx>
int64_t addDims(const Ctx& c, int64_t a, int64_t b) {
  int64_t r = 0;
  const bool overflowed = __builtin_add_overflow(a, b, &r);
  return checkedDim(c, overflowed, r, a, " + ", b);
}

// Reads an int32/int64 tensor as int64 values.
std::vector<int64_t> readInts(const ir::Tensor& t);
// Reads a float-like tensor's first element as double (for scalar operands).
double readScalar(const ir::Tensor& t, int64_t index = 0);

// Row-major strides of a shape.
std::vector<int64_t> stridesOf(const std::vector<int64_t>& shape);

// Kernels run on the calling thread's OpenMP team size (omp_get_max_threads()), which
// the executor sets from its model's RunOptions at the start of every run: a
// per-thread setting, so models at different thread counts can share a process.

// For tests of many sessions on many threads, run under ThreadSanitizer by `make
// tsan`: libgomp is not instrumented, so TSan cannot see OpenMP's barriers and
// reports every kernel's team as racing (and spends minutes deduplicating the
// reports). Tests load their models with threadsUnlessTSan(n): 1 under TSan, so the
// threads TSan checks are the sessions' own; n elsewhere.
constexpr int threadsUnlessTSan(int n) {
#if defined(__SANITIZE_THREAD__)
  return 1;
#else
  return n;
#endif
}

// The thread count a kernel splits its work for (its parts: tiles, GEMM row blocks),
// which may exceed the team that runs the parts. A run on a team of one in place of
// its model's team (docs/threads.md: block mode) keeps the team's split, so its
// results are the team's bit for bit: a BLAS call's rounding can depend on its shape.
// Unless set on this thread (setSplitThreads, 0 to unset): the team size (1 inside a
// parallel region).
int splitThreads();
// Sets this thread's split; returns the one it replaces.
int setSplitThreads(int threads);

// Fails the node unless it has between `min_inputs` and `max_inputs` inputs, the
// first `min_inputs` present, and at least one output.
inline void checkArity(const InferContext& c, size_t min_inputs, size_t max_inputs) {
  if (c.numInputs() < min_inputs || c.numInputs() > max_inputs)
    c.fail("expects " +
           (min_inputs == max_inputs ? std::to_string(min_inputs)
                                     : std::to_string(min_inputs) + " to " + std::to_string(max_inputs)) +
           " inputs, got " + std::to_string(c.numInputs()));
  for (size_t i = 0; i < min_inputs; ++i)
    if (!c.hasInput(i)) c.fail("input " + std::to_string(i) + " is missing");
  if (c.outputs.empty()) c.fail("has no output");
}

// Copies a type to every output and sets dtype; handy for shape-preserving ops.
inline void sameAsInput(InferContext& c, size_t input = 0) {
  for (auto& o : c.outputs) o = c.input(input);
}

}  // namespace partita::kernels

// Dispatch a template over the numeric dtypes: PARTITA_DISPATCH(dtype, T, { body using T }).
#define PARTITA_DISPATCH_CASE(DT, TYPE, ...) \
  case ::partita::ir::DType::DT: {           \
    using T = TYPE;                          \
    __VA_ARGS__;                             \
    break;                                   \
  }
#define PARTITA_DISPATCH_ALL(dtype, what, ...)                                                  \
  switch (dtype) {                                                                               \
    PARTITA_DISPATCH_CASE(kFloat32, float, __VA_ARGS__)                                          \
    PARTITA_DISPATCH_CASE(kFloat64, double, __VA_ARGS__)                                         \
    PARTITA_DISPATCH_CASE(kInt8, int8_t, __VA_ARGS__)                                            \
    PARTITA_DISPATCH_CASE(kInt16, int16_t, __VA_ARGS__)                                          \
    PARTITA_DISPATCH_CASE(kInt32, int32_t, __VA_ARGS__)                                          \
    PARTITA_DISPATCH_CASE(kInt64, int64_t, __VA_ARGS__)                                          \
    PARTITA_DISPATCH_CASE(kUInt8, uint8_t, __VA_ARGS__)                                          \
    PARTITA_DISPATCH_CASE(kUInt16, uint16_t, __VA_ARGS__)                                        \
    PARTITA_DISPATCH_CASE(kUInt32, uint32_t, __VA_ARGS__)                                        \
    PARTITA_DISPATCH_CASE(kUInt64, uint64_t, __VA_ARGS__)                                        \
    PARTITA_DISPATCH_CASE(kBool, bool, __VA_ARGS__)                                              \
    default:                                                                                     \
      throw ::partita::Error(::partita::ErrorCode::kUnsupported,                                \
                             std::string(what) + ": dtype " +                                   \
                                 std::string(::partita::ir::dtypeName(dtype)) + " not supported"); \
  }
