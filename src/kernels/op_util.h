// Shared pieces for host op definitions: broadcasting, axes, reading small integer
// tensors, strides, the kernel thread count (and its TSan guard), and dtype dispatch.
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

// Reads an int32/int64 tensor as int64 values.
std::vector<int64_t> readInts(const ir::Tensor& t);
// Reads a float-like tensor's first element as double (for scalar operands).
double readScalar(const ir::Tensor& t, int64_t index = 0);

// Row-major strides of a shape.
std::vector<int64_t> stridesOf(const std::vector<int64_t>& shape);

// Number of OpenMP threads kernels should use (set by the executor / CLI --threads).
int kernelThreads();
void setKernelThreads(int n);

// For tests of many sessions on many threads, run under ThreadSanitizer by `make
// tsan`: libgomp is not instrumented, so TSan cannot see OpenMP's barriers and
// reports every kernel's team as racing (and spends minutes deduplicating the
// reports). Under TSan this sets one kernel thread for its lifetime, so the threads
// TSan checks are the sessions' own; elsewhere it does nothing.
class KernelThreadsForTSan {
 public:
#if defined(__SANITIZE_THREAD__)
  KernelThreadsForTSan() : saved_(kernelThreads()) { setKernelThreads(1); }
  ~KernelThreadsForTSan() { setKernelThreads(saved_); }

 private:
  int saved_;
#endif
};

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
