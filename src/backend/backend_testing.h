// Test support for backends (tests only): building small graphs by hand and running
// them through the same path as compileOnnx (shape inference, partitioning, store,
// module load, graph executor) with a chosen backend list.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "api/module_kinds.h"
#include "kernels/op_util.h"
#include "compiler/partition.h"
#include "ir/graph.h"
#include "passes/passes.h"
#include "runtime/const_store.h"
#include "runtime/graph_executor.h"
#include "runtime/module.h"

namespace partita::backend::testing {

class GraphBuilder {
 public:
  ir::ValueId input(const std::string& name, std::vector<int64_t> shape);
  // An input with symbolic dims, e.g. {ir::Dim::symbolic("N"), ir::Dim::known(3), ir::Dim{}}.
  ir::ValueId symbolicInput(const std::string& name, std::vector<ir::Dim> dims);
  ir::ValueId constant(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& data);
  ir::ValueId constantInts(const std::string& name, std::vector<int64_t> shape,
                           const std::vector<int64_t>& data);
  // Adds a node with one output (type left to shape inference) and returns the output.
  ir::ValueId node(const std::string& op, std::vector<ir::ValueId> inputs, ir::AttributeMap attrs = {},
                   int opset = 17, const std::string& name = "");
  void output(ir::ValueId v) { g.outputs.push_back(v); }

  ir::Graph g;

 private:
  int counter_ = 0;
};

struct Compiled {
  std::shared_ptr<ir::Graph> graph;  // partitioned
  backend::PartitionResult parts;
  std::shared_ptr<runtime::ConstStore> store;
  std::vector<std::shared_ptr<const runtime::RuntimeModule>> modules;
  std::shared_ptr<runtime::GraphExecutor> executor;

  std::vector<ir::OwnedTensor> run(const std::vector<ir::OwnedTensor>& inputs) const;
};

// Deterministic pseudo-random floats in [lo, hi).
inline std::vector<float> randomFloats(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::vector<float> v(n);
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (float& f : v) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    double unit = double(s >> 11) / double(uint64_t(1) << 53);
    f = float(lo + (hi - lo) * unit);
  }
  return v;
}

inline ir::ValueId GraphBuilder::input(const std::string& name, std::vector<int64_t> shape) {
  ir::ValueId v = g.addValue(name, ir::TensorType::of(ir::DType::kFloat32, shape));
  g.inputs.push_back(v);
  return v;
}

inline ir::ValueId GraphBuilder::symbolicInput(const std::string& name, std::vector<ir::Dim> dims) {
  ir::ValueId v = g.addValue(name, ir::TensorType{ir::DType::kFloat32, true, std::move(dims)});
  g.inputs.push_back(v);
  return v;
}

inline ir::ValueId GraphBuilder::constant(const std::string& name, std::vector<int64_t> shape,
                                          const std::vector<float>& data) {
  ir::ConstId c = g.constants.add(name, ir::DType::kFloat32, std::move(shape),
                                  Bytes::copyOf(data.data(), data.size() * sizeof(float)));
  return g.addConstantValue(name, c);
}

inline ir::ValueId GraphBuilder::constantInts(const std::string& name, std::vector<int64_t> shape,
                                              const std::vector<int64_t>& data) {
  ir::ConstId c = g.constants.add(name, ir::DType::kInt64, std::move(shape),
                                  Bytes::copyOf(data.data(), data.size() * sizeof(int64_t)));
  return g.addConstantValue(name, c);
}

inline ir::ValueId GraphBuilder::node(const std::string& op, std::vector<ir::ValueId> inputs,
                                      ir::AttributeMap attrs, int opset, const std::string& name) {
  std::string n = name.empty() ? op + "_" + std::to_string(counter_++) : name;
  ir::ValueId out = g.addValue(n + "_out");
  ir::Node node;
  node.op_type = op;
  node.opset = opset;
  node.name = n;
  node.inputs = std::move(inputs);
  node.outputs = {out};
  node.attrs = std::move(attrs);
  g.addNode(std::move(node));
  return out;
}

inline std::vector<ir::OwnedTensor> Compiled::run(const std::vector<ir::OwnedTensor>& inputs) const {
  auto state = executor->newRunState();
  std::vector<ir::Tensor> views;
  for (const auto& t : inputs) views.push_back(t.view());
  return executor->run(*state, views);
}

// Infers shapes (folding off, so constants stay as the test built them), partitions
// for `backends` and loads every module (`shape_cache`: RunOptions::shape_cache;
// `float_precision`: PartitionOptions::float_precision).
inline Compiled compile(ir::Graph g, const std::vector<std::string>& backends, size_t min_region_size = 1,
                        size_t shape_cache = 0, const std::string& float_precision = "fp32") {
  Compiled c;
  c.graph = std::make_shared<ir::Graph>(std::move(g));
  passes::FoldOptions fold;
  fold.max_growth_bytes = 0;
  passes::inferShapes(*c.graph, fold);
  backend::PartitionOptions o;
  o.backends = backends;
  o.min_region_size = min_region_size;
  o.float_precision = float_precision;
  c.parts = backend::partitionGraph(*c.graph, o);
  c.store = std::make_shared<runtime::ConstStore>(runtime::ConstStore::fromPool(c.graph->constants));
  for (const backend::ModuleImage& image : c.parts.modules) {
    runtime::ModuleLoadContext ctx{Bytes::copyOf(image.blob.data(), image.blob.size()), c.store.get(),
                                   image.uses, kernels::threadsUnlessTSan(2), image.assumptions,
                                   runtime::shapeCacheEntries(shape_cache)};
    c.modules.push_back(api::builtinModuleKinds().load(image.kind, ctx));
  }
  c.executor = std::make_shared<runtime::GraphExecutor>(
      c.graph, c.store, c.modules, runtime::RunOptions{kernels::threadsUnlessTSan(2), {}, shape_cache});
  return c;
}

inline std::vector<ir::OwnedTensor> randomInputs(const ir::Graph& g, uint64_t seed) {
  std::vector<ir::OwnedTensor> out;
  for (ir::ValueId v : g.inputs) {
    const ir::TensorType& t = g.typeOf(v);
    ir::OwnedTensor x(ir::DType::kFloat32, t.staticShape());
    std::vector<float> r = randomFloats(size_t(x.numel()), seed++);
    std::memcpy(x.data(), r.data(), x.nbytes());
    out.push_back(std::move(x));
  }
  return out;
}

// max|a - e| / max|e| (shapes must match): the relative error the docs quote.
inline double relativeError(const ir::OwnedTensor& a, const ir::OwnedTensor& e) {
  EXPECT_EQ(a.shape(), e.shape());
  if (a.shape() != e.shape()) return INFINITY;
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    diff = std::max(diff, double(std::abs(a.as<float>()[i] - e.as<float>()[i])));
    scale = std::max(scale, double(std::abs(e.as<float>()[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

// A float32 tensor of `shape` with deterministic random values.
inline ir::OwnedTensor randomTensor(const std::vector<int64_t>& shape, uint64_t seed) {
  ir::OwnedTensor x(ir::DType::kFloat32, shape);
  std::vector<float> r = randomFloats(size_t(x.numel()), seed);
  std::memcpy(x.data(), r.data(), x.nbytes());
  return x;
}

// Largest |a-b| / (atol + rtol*|b|) over all elements (<= 1 means close); shapes must match.
inline double closeness(const ir::OwnedTensor& a, const ir::OwnedTensor& b, double rtol = 1e-4,
                        double atol = 1e-5) {
  EXPECT_EQ(a.shape(), b.shape());
  if (a.shape() != b.shape()) return INFINITY;
  double worst = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    double x = a.as<float>()[i], y = b.as<float>()[i];
    if (std::isnan(x) != std::isnan(y)) return INFINITY;
    if (std::isnan(x)) continue;
    if (std::isinf(x) || std::isinf(y)) {
      if (x != y) return INFINITY;
      continue;
    }
    worst = std::max(worst, std::abs(x - y) / (atol + rtol * std::abs(y)));
  }
  return worst;
}

}  // namespace partita::backend::testing
