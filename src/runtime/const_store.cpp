#include "runtime/const_store.h"

#include "partita/error.h"

namespace partita::runtime {

void ConstStore::add(ir::ConstId id, ir::DType dtype, std::vector<int64_t> shape, Bytes bytes,
                     std::string layout) {
  if (id >= entries_.size()) entries_.resize(size_t(id) + 1);
  Entry& e = entries_[id];
  e.present = true;
  e.view = ir::Tensor{dtype, std::move(shape), const_cast<std::byte*>(bytes.data)};
  e.layout = std::move(layout);
  e.bytes = std::move(bytes);
}

ConstStore ConstStore::fromPool(const ir::ConstantPool& pool) {
  ConstStore store;
  for (const ir::Constant& c : pool.all()) store.add(c.id, c.dtype, c.shape, c.bytes, c.layout);
  return store;
}

const ir::Tensor& ConstStore::get(ir::ConstId id) const {
  if (!has(id)) throw Error(ErrorCode::kInvalidArtifact, "constant " + std::to_string(id) + " is not in the weight store");
  return entries_[id].view;
}

const std::string& ConstStore::layout(ir::ConstId id) const {
  get(id);
  return entries_[id].layout;
}

const Bytes& ConstStore::bytes(ir::ConstId id) const {
  get(id);
  return entries_[id].bytes;
}

}  // namespace partita::runtime
