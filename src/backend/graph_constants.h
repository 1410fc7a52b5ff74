// Reading a graph's constant inputs at compile time: what backends' claims ask of a
// node's operands (is it a constant, which one, its value when it is one float).
// Shared by the compile halves of dnnl and ewise so that both read constants alike.
#pragma once

#include <cstring>
#include <optional>

#include "ir/graph.h"

namespace partita::backend {

// Whether `v` is given (not an omitted optional input) and a constant.
inline bool isConstant(const ir::Graph& g, ir::ValueId v) {
  return v != ir::kNoValue && g.value(v).isConstant();
}

// The constant behind a constant value.
inline const ir::Constant& constantOf(const ir::Graph& g, ir::ValueId v) {
  return g.constants.get(g.value(v).constant);
}

// The value of a dense float32 constant with one element (a Clip bound, an epsilon),
// if `v` is one.
inline std::optional<float> constantScalar(const ir::Graph& g, ir::ValueId v) {
  if (!isConstant(g, v)) return std::nullopt;
  const ir::Constant& c = constantOf(g, v);
  if (c.dtype != ir::DType::kFloat32 || ir::shapeNumel(c.shape) != 1 || !c.layout.empty())
    return std::nullopt;
  float f;
  std::memcpy(&f, c.bytes.data, sizeof f);
  return f;
}

}  // namespace partita::backend
