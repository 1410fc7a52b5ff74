#include "ir/constant_pool.h"

#include <cstring>
#include <optional>

#include "ir/limits.h"

#include "partita/error.h"

namespace partita::ir {

ConstId ConstantPool::add(std::string name, DType dtype, std::vector<int64_t> shape, Bytes bytes,
                          std::string layout) {
  std::optional<uint64_t> checked = checkedNbytes(dtype, shape);
  if (!checked)
    throw Error(ErrorCode::kInvalidModel, "constant '" + name + "' has type " + std::string(dtypeName(dtype)) +
                                              shapeStr(shape) +
                                              ": a negative dimension or more bytes than 64 bits count");
  const uint64_t expected = *checked;
  if (layout.empty() && bytes.size != expected)
    throw Error(ErrorCode::kInvalidModel, "constant '" + name + "' of type " +
                                              std::string(dtypeName(dtype)) + shapeStr(shape) +
                                              " needs " + std::to_string(expected) +
                                              " bytes but has " + std::to_string(bytes.size));
  Constant c;
  c.id = ConstId(constants_.size());
  c.name = std::move(name);
  c.dtype = dtype;
  c.shape = std::move(shape);
  c.layout = std::move(layout);
  c.bytes = std::move(bytes);
  constants_.push_back(std::move(c));
  return constants_.back().id;
}

ConstId ConstantPool::addCopy(std::string name, const Tensor& t) {
  return add(std::move(name), t.dtype, t.shape, Bytes::copyOf(t.data, t.nbytes()));
}

const Constant& ConstantPool::get(ConstId id) const {
  if (id >= constants_.size())
    throw Error(ErrorCode::kInternal, "no constant with id " + std::to_string(id));
  return constants_[id];
}

Constant& ConstantPool::get(ConstId id) {
  if (id >= constants_.size())
    throw Error(ErrorCode::kInternal, "no constant with id " + std::to_string(id));
  return constants_[id];
}

bool ConstantPool::identical(const Constant& a, const Constant& b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.layout == b.layout &&
         a.bytes.size == b.bytes.size &&
         (a.bytes.size == 0 || std::memcmp(a.bytes.data, b.bytes.data, a.bytes.size) == 0);
}

uint64_t ConstantPool::contentHash(const Constant& c) { return hashBytes(c.bytes.data, c.bytes.size); }

}  // namespace partita::ir
