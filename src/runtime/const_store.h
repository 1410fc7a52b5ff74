// ConstStore: the run-time table from ConstId to a read-only tensor view. The views
// point into memory the store keeps alive (the mapped artifact, or the compiler's
// constant pool when running straight from a model file); nothing is copied.
// Immutable after construction: thread-safe to read from many sessions.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ir/constant_pool.h"
#include "ir/tensor.h"

namespace partita::runtime {

class ConstStore {
 public:
  // Registers `id` as a view over `bytes` (which keeps its owner alive).
  void add(ir::ConstId id, ir::DType dtype, std::vector<int64_t> shape, Bytes bytes, std::string layout = {});
  // Views every constant of a compile-side pool (zero copy: shares the pool's bytes).
  static ConstStore fromPool(const ir::ConstantPool& pool);

  bool has(ir::ConstId id) const { return id < entries_.size() && entries_[id].present; }
  // Throws Error(kInvalidArtifact) when `id` is not in the store.
  const ir::Tensor& get(ir::ConstId id) const;
  const std::string& layout(ir::ConstId id) const;
  const Bytes& bytes(ir::ConstId id) const;
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    bool present = false;
    ir::Tensor view;
    std::string layout;
    Bytes bytes;
  };
  std::vector<Entry> entries_;  // indexed by ConstId
};

}  // namespace partita::runtime
