// ConstantPool: the compile-side owner of every constant tensor of a graph. Each
// constant has a ConstId; graph values and tensor attributes refer to constants by ID
// only. Bytes are shared (a mapped external-data file, a protobuf copy, a folded
// result), never duplicated by the pool.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "base/bytes.h"
#include "ir/dtype.h"
#include "ir/tensor.h"

namespace partita::ir {

using ConstId = uint32_t;
inline constexpr ConstId kNoConst = std::numeric_limits<ConstId>::max();

struct Constant {
  ConstId id = kNoConst;
  std::string name;  // for people; never used to decide anything
  DType dtype = DType::kUndefined;
  std::vector<int64_t> shape;
  std::string layout;  // empty: dense row-major; otherwise a backend-defined layout tag
  Bytes bytes;

  size_t nbytes() const { return bytes.size; }
  // A read-only view; kernels must not write through it.
  Tensor view() const { return Tensor{dtype, shape, const_cast<std::byte*>(bytes.data)}; }
};

class ConstantPool {
 public:
  // Adds a constant; `bytes.size` must equal numel * dtypeSize (checked).
  ConstId add(std::string name, DType dtype, std::vector<int64_t> shape, Bytes bytes,
              std::string layout = {});
  // Adds a copy of a tensor's bytes.
  ConstId addCopy(std::string name, const Tensor& t);

  const Constant& get(ConstId id) const;
  Constant& get(ConstId id);
  size_t size() const { return constants_.size(); }
  const std::vector<Constant>& all() const { return constants_; }

  // Content identity: same dtype, shape, layout and bytes.
  static bool identical(const Constant& a, const Constant& b);
  static uint64_t contentHash(const Constant& c);

 private:
  std::vector<Constant> constants_;  // index == ConstId
};

}  // namespace partita::ir
