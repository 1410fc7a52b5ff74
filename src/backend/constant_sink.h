// ConstantSink: where a backend's compile step puts the tensors it derives (oneDNN's
// packed weight layouts, folded weights). The backend sees the graph read-only; the
// sink hands back the ConstId the derived tensor will have in the graph's constant
// pool, which the module declares as a kDerive use.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/bytes.h"
#include "ir/constant_pool.h"
#include "ir/dtype.h"
#include "ir/type.h"
#include "partita/error.h"

namespace partita::backend {

class ConstantSink {
 public:
  virtual ~ConstantSink() = default;
  // Takes a derived tensor (`bytes.size` == numel * dtype size; `layout` empty for
  // dense row-major, else the backend's layout tag) and returns its ConstId.
  virtual ir::ConstId add(std::string name, ir::DType dtype, std::vector<int64_t> shape, Bytes bytes,
                          std::string layout) = 0;
};

// The partitioner's sink: IDs continue the pool's numbering (pool.size(), +1, ...),
// the tensors wait here and commit() appends them to the pool, in order, after the
// backend's compile returns, so the backend's read-only graph never changes under it.
class PendingConstants final : public ConstantSink {
 public:
  explicit PendingConstants(const ir::ConstantPool& pool) : first_(ir::ConstId(pool.size())) {}

  ir::ConstId add(std::string name, ir::DType dtype, std::vector<int64_t> shape, Bytes bytes,
                  std::string layout) override {
    if (size_t(ir::shapeNumel(shape)) * ir::dtypeSize(dtype) != bytes.size)
      throw Error(ErrorCode::kInternal, "derived constant '" + name + "': " + std::to_string(bytes.size) +
                                            " bytes do not match its dtype and shape");
    pending_.push_back({std::move(name), dtype, std::move(shape), std::move(layout), std::move(bytes)});
    return first_ + ir::ConstId(pending_.size() - 1);
  }

  size_t size() const { return pending_.size(); }

  // Appends the pending tensors to `pool` (the pool given to the constructor, unchanged
  // since) so that each gets the ID add() returned.
  void commit(ir::ConstantPool& pool) {
    if (pool.size() != first_)
      throw Error(ErrorCode::kInternal, "the constant pool changed while a backend was deriving constants");
    for (Pending& p : pending_)
      pool.add(std::move(p.name), p.dtype, std::move(p.shape), std::move(p.bytes), std::move(p.layout));
    pending_.clear();
    first_ = ir::ConstId(pool.size());
  }

 private:
  struct Pending {
    std::string name;
    ir::DType dtype;
    std::vector<int64_t> shape;
    std::string layout;
    Bytes bytes;
  };
  ir::ConstId first_;
  std::vector<Pending> pending_;
};

}  // namespace partita::backend
