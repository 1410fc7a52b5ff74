// Writer and bounds-checked reader for the dnnl module blob (little-endian, as the
// artifact's metadata: artifact/byte_io.h). A short or
// malformed blob throws Error(kInvalidArtifact) naming what was being read.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "base/byte_io.h"
#include "partita/error.h"

namespace partita::dnnl_backend {

// The writer is the artifact's own little-endian writer.
using BlobWriter = artifact::ByteWriter;

class BlobReader {
 public:
  BlobReader(const std::byte* data, size_t size) : data_(data), size_(size) {}

  uint8_t u8(const char* what) { return uint8_t(get(1, what)); }
  uint32_t u32(const char* what) { return uint32_t(get(4, what)); }
  int32_t i32(const char* what) { return int32_t(uint32_t(get(4, what))); }
  uint64_t u64(const char* what) { return get(8, what); }
  int64_t i64(const char* what) { return int64_t(get(8, what)); }
  float f32(const char* what) { return std::bit_cast<float>(uint32_t(get(4, what))); }
  std::string str(const char* what) {
    uint32_t n = u32(what);
    need(n, what);
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }
  std::vector<int64_t> ints(const char* what, size_t max_count = 64) {
    uint32_t n = u32(what);
    if (n > max_count) fail(what, "count " + std::to_string(n) + " is too large");
    std::vector<int64_t> v(n);
    for (auto& x : v) x = i64(what);
    return v;
  }
  // A count of items that each take at least `min_item_bytes`: checked against what is left.
  uint32_t count(const char* what, size_t min_item_bytes) {
    uint32_t n = u32(what);
    if (min_item_bytes && uint64_t(n) * min_item_bytes > size_ - pos_)
      fail(what, "count " + std::to_string(n) + " exceeds the blob");
    return n;
  }
  size_t pos() const { return pos_; }
  size_t size() const { return size_; }
  [[noreturn]] void fail(const char* what, const std::string& msg) const {
    throw Error(ErrorCode::kInvalidArtifact,
                "dnnl module blob: " + std::string(what) + " at byte " + std::to_string(pos_) + ": " + msg);
  }

 private:
  void need(size_t n, const char* what) const {
    if (n > size_ - pos_) fail(what, "truncated (" + std::to_string(size_) + " bytes in all)");
  }
  uint64_t get(size_t n, const char* what) {
    need(n, what);
    uint64_t v = artifact::loadLE(data_ + pos_, n);
    pos_ += n;
    return v;
  }
  const std::byte* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace partita::dnnl_backend
