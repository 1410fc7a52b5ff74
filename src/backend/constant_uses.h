// ConstantUses: the one builder of a module's constant uses and embedded data, shared
// by the backends' compile halves. A backend records, as it lowers:
//   borrow(id)                         the module reads stored constant `id` as it is;
//   derive(source, ...) -> id          it made a tensor from `source` (a re-layout, a
//                                      fold); the ConstantSink assigns its ID;
//   embed(bytes, absorbed) -> offset   it baked bytes computed from `absorbed` into
//                                      its blob; embedConstant(id) embeds one constant
//                                      as it is, once; absorb(id) records an embed use
//                                      whose value went elsewhere (an immediate).
// uses() is the declaration the module image carries: one use per ID, ascending; a
// constant both borrowed and embedded is a borrow (the store must hold it anyway, an
// embedded copy would only add bytes). Embedded tensors each start at a multiple of
// runtime::kEmbeddedAlignment, zero padding in between.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "backend/constant_sink.h"
#include "ir/constant_pool.h"
#include "runtime/module.h"

namespace partita::backend {

class ConstantUses {
 public:
  explicit ConstantUses(ConstantSink& sink) : sink_(sink) {}

  void borrow(ir::ConstId id) { record({id, runtime::ConstUseKind::kBorrow, ir::kNoConst}); }

  ir::ConstId derive(ir::ConstId source, std::string name, ir::DType dtype, std::vector<int64_t> shape,
                     Bytes bytes, std::string layout) {
    ir::ConstId id = sink_.add(std::move(name), dtype, std::move(shape), std::move(bytes), std::move(layout));
    record({id, runtime::ConstUseKind::kDerive, source});
    return id;
  }

  // Appends `n` bytes at the next aligned offset of the embedded data and returns that
  // offset; each of `absorbed` gets an embed use.
  uint64_t embed(const void* data, size_t n, const std::vector<ir::ConstId>& absorbed) {
    embedded_.resize(alignUp(embedded_.size()), std::byte{0});
    const uint64_t offset = embedded_.size();
    const auto* p = static_cast<const std::byte*>(data);
    embedded_.insert(embedded_.end(), p, p + n);
    for (ir::ConstId id : absorbed) absorb(id);
    return offset;
  }

  // Embeds constant `c` as it is, once: a second call returns the first offset.
  uint64_t embedConstant(const ir::Constant& c) {
    auto it = embedded_at_.find(c.id);
    if (it != embedded_at_.end()) {
      absorb(c.id);
      return it->second;
    }
    uint64_t offset = embed(c.bytes.data, c.nbytes(), {c.id});
    embedded_at_.emplace(c.id, offset);
    return offset;
  }

  void absorb(ir::ConstId id) { record({id, runtime::ConstUseKind::kEmbed, ir::kNoConst}); }

  // The embedded data so far. `padded_end`: zero-pad its end to the alignment too
  // (a blob format may want its data size to be a multiple of it).
  const std::vector<std::byte>& embedded() const { return embedded_; }
  std::vector<std::byte> takeEmbedded(bool padded_end) {
    if (padded_end) embedded_.resize(alignUp(embedded_.size()), std::byte{0});
    embedded_at_.clear();
    return std::move(embedded_);
  }

  std::vector<runtime::ConstUse> uses() const {
    std::vector<runtime::ConstUse> out;
    out.reserve(by_id_.size());
    for (const auto& [id, u] : by_id_) out.push_back(u);
    return out;
  }

 private:
  static size_t alignUp(size_t n) {
    return (n + runtime::kEmbeddedAlignment - 1) / runtime::kEmbeddedAlignment * runtime::kEmbeddedAlignment;
  }
  // One use per ID: the first recorded, except that a borrow replaces an embed.
  void record(const runtime::ConstUse& u) {
    auto [it, fresh] = by_id_.emplace(u.id, u);
    if (!fresh && u.kind == runtime::ConstUseKind::kBorrow) it->second = u;
  }

  ConstantSink& sink_;
  std::map<ir::ConstId, runtime::ConstUse> by_id_;
  std::vector<std::byte> embedded_;
  std::map<ir::ConstId, uint64_t> embedded_at_;
};

}  // namespace partita::backend
