// What the decoders of ONNX nodes (dnnl_decode_*.cpp, dnnl_patterns.cpp) share:
// refusing with a reason, checking operands, reading constant inputs, and asking the
// host's readers of ONNX semantics (src/kernels) instead of reading a node a second way.
#pragma once

#include <cstdint>
#include <dnnl.hpp>
#include <optional>
#include <string>
#include <vector>

#include "backend/graph_constants.h"
#include "ir/graph.h"
#include "kernels/nn_window.h"
#include "partita/error.h"

namespace partita::dnnl_backend {

using backend::constantOf;
using backend::constantScalar;
using backend::isConstant;

inline constexpr size_t kMaxRank = DNNL_MAX_NDIMS;

// ONNX Runtime's contrib Gelu (com.microsoft), which the host registers infer-only.
inline bool isContribGelu(const ir::Node& n) { return n.domain == "com.microsoft" && n.op_type == "Gelu"; }

// A refusal: says `msg` through `why` (when asked) and returns nullopt / false.
std::nullopt_t no(std::string* why, const std::string& msg);
bool noBool(std::string* why, const std::string& msg);

// A statically shaped float32 tensor of rank <= 12 with at least one element.
bool isDenseF32(const ir::Graph& g, ir::ValueId v, std::string* why, const char* what);
std::vector<int64_t> shapeOf(const ir::Graph& g, ir::ValueId v);
// Only output 0 is produced; any other output must be omitted.
bool onlyFirstOutput(const ir::Node& n, std::string* why);
// Input 0 and output 0 dense float32, other outputs omitted.
bool unaryShape(const ir::Graph& g, const ir::Node& n, std::string* why);

// A constant int32/int64 tensor's values (Slice's starts, ReduceSum's axes), read as
// the host reads them.
std::optional<std::vector<int64_t>> constantInts(const ir::Graph& g, ir::ValueId v);

// Runs one of the host's readers of ONNX semantics (kernels/nn_window.h,
// kernels/shape_slice.h, kernels::normalizeAxis), which throw on a node the host
// refuses: nullopt then, with the host's message in `why`. The host's inference has
// read the same node before, so in a compiled graph this is a safety net.
template <typename F>
auto hostOr(std::string* why, F&& f) -> std::optional<decltype(f())> {
  try {
    return f();
  } catch (const Error& e) {
    return no(why, e.what());
  }
}

// What the host's templated readers call to refuse a node (the `fail` of their
// InferContext or KernelContext): an Error naming the node, which hostOr catches.
struct NodeRefusal {
  const ir::Node& node;
  [[noreturn]] void fail(const std::string& msg) const { kernels::failNode(node, msg); }
};

// `axis` (negative counts from the back) in [0, rank), as the host normalises it.
std::optional<int64_t> normalizedAxis(int64_t axis, int64_t rank, std::string* why);

}  // namespace partita::dnnl_backend
