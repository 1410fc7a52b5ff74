// Little-endian writer and bounds-checked reader for the dnnl module blob. A short or
// malformed blob throws Error(kInvalidArtifact) naming what was being read.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "partita/error.h"

namespace partita::dnnl_backend {

class BlobWriter {
 public:
  void u8(uint8_t v) { put(v, 1); }
  void u32(uint32_t v) { put(v, 4); }
  void i32(int32_t v) { put(uint32_t(v), 4); }
  void u64(uint64_t v) { put(v, 8); }
  void i64(int64_t v) { put(uint64_t(v), 8); }
  void f32(float v) { put(std::bit_cast<uint32_t>(v), 4); }
  void str(const std::string& s) {
    u32(uint32_t(s.size()));
    raw(s.data(), s.size());
  }
  void ints(const std::vector<int64_t>& v) {
    u32(uint32_t(v.size()));
    for (int64_t x : v) i64(x);
  }
  void raw(const void* p, size_t n) {
    const auto* b = static_cast<const std::byte*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  void patchU64(size_t at, uint64_t v) {
    for (size_t i = 0; i < 8; ++i) out_.at(at + i) = std::byte(uint8_t(v >> (8 * i)));
  }
  void alignTo(size_t a) { out_.resize((out_.size() + a - 1) / a * a, std::byte{0}); }
  size_t size() const { return out_.size(); }
  std::vector<std::byte>& bytes() { return out_; }

 private:
  void put(uint64_t v, size_t n) {
    for (size_t i = 0; i < n; ++i) out_.push_back(std::byte(uint8_t(v >> (8 * i))));
  }
  std::vector<std::byte> out_;
};

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
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v |= uint64_t(uint8_t(data_[pos_ + i])) << (8 * i);
    pos_ += n;
    return v;
  }
  const std::byte* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace partita::dnnl_backend
