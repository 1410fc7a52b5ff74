// Little-endian encoding for the artifact's metadata. ByteWriter appends to a vector;
// ByteReader reads from a range it never leaves: every read is bounds-checked and a
// short or malformed input throws Error(kInvalidArtifact) saying what and where.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "partita/error.h"

namespace partita::artifact {

inline void storeLE(std::byte* out, uint64_t v, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = std::byte(uint8_t(v >> (8 * i)));
}
inline uint64_t loadLE(const std::byte* in, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= uint64_t(uint8_t(in[i])) << (8 * i);
  return v;
}

class ByteWriter {
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
  void vstr(const std::string& s) {
    varint(s.size());
    raw(s.data(), s.size());
  }
  void ints(const std::vector<int64_t>& v) {
    u32(uint32_t(v.size()));
    for (int64_t x : v) i64(x);
  }
  // LEB128: 7 bits a byte, low bits first, the high bit set on every byte but the last.
  void varint(uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(std::byte(uint8_t(v) | 0x80));
      v >>= 7;
    }
    out_.push_back(std::byte(uint8_t(v)));
  }
  // Signed LEB128 via zigzag: 0, -1, 1, -2, ... -> 0, 1, 2, 3, ...
  void svarint(int64_t v) { varint((uint64_t(v) << 1) ^ uint64_t(v >> 63)); }
  void raw(const void* p, size_t n) {
    const auto* b = static_cast<const std::byte*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  // Overwrites 8 bytes written earlier (e.g. a size known only later).
  void patchU64(size_t at, uint64_t v) { storeLE(&out_.at(at + 7) - 7, v, 8); }
  void alignTo(size_t a) { out_.resize((out_.size() + a - 1) / a * a, std::byte{0}); }
  size_t size() const { return out_.size(); }
  std::vector<std::byte>& bytes() { return out_; }

 private:
  void put(uint64_t v, size_t n) {
    size_t at = out_.size();
    out_.resize(at + n);
    storeLE(out_.data() + at, v, n);
  }
  std::vector<std::byte> out_;
};

class ByteReader {
 public:
  // `what` names the thing being read in error messages, e.g. "manifest".
  ByteReader(const std::byte* data, size_t size, std::string what)
      : data_(data), size_(size), what_(std::move(what)) {}

  uint8_t u8() { return uint8_t(get(1)); }
  uint32_t u32() { return uint32_t(get(4)); }
  int32_t i32() { return int32_t(uint32_t(get(4))); }
  uint64_t u64() { return get(8); }
  int64_t i64() { return int64_t(get(8)); }
  float f32() { return std::bit_cast<float>(uint32_t(get(4))); }
  std::string str() {
    uint32_t n = u32();
    need(n, "a string");
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }
  // What ByteWriter::ints wrote; more than `max_count` values is malformed.
  std::vector<int64_t> ints(size_t max_count = 64) {
    uint32_t n = u32();
    if (n > max_count) fail("a list of " + std::to_string(n) + " integers (at most " + std::to_string(max_count) + ")");
    std::vector<int64_t> v(n);
    for (int64_t& x : v) x = i64();
    return v;
  }
  // LEB128 (see ByteWriter::varint): at most 10 bytes, no bits beyond 64.
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      if (pos_ >= size_) fail("a varint runs past the end");
      uint8_t b = uint8_t(data_[pos_++]);
      if (shift == 63 && b > 1) fail("a varint overflows 64 bits");
      v |= uint64_t(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
      if (shift == 63) fail("a varint overflows 64 bits");
    }
  }
  int64_t svarint() {
    uint64_t u = varint();
    return int64_t(u >> 1) ^ -int64_t(u & 1);
  }
  // A varint that must fit in 32 bits; `what` names it in the error.
  uint32_t varint32(const char* what) {
    uint64_t v = varint();
    if (v > UINT32_MAX) fail(std::string(what) + " " + std::to_string(v) + " is out of range");
    return uint32_t(v);
  }
  // A varint count of items that each take at least `min_item_bytes` bytes: checked
  // against what is left before anyone allocates for it.
  uint32_t vcount(size_t min_item_bytes, const char* items) {
    uint64_t n = varint();
    if (n > UINT32_MAX || (min_item_bytes && n * min_item_bytes > size_ - pos_))
      fail("a count of " + std::to_string(n) + " " + items + " that cannot fit in the " +
           std::to_string(size_ - pos_) + " bytes left");
    return uint32_t(n);
  }
  // A varint-length string (the manifest's string table).
  std::string vstr() {
    uint64_t n = varint();
    need(n > size_ ? size_ + 1 : size_t(n), "a string");
    std::string s(reinterpret_cast<const char*>(data_ + pos_), size_t(n));
    pos_ += size_t(n);
    return s;
  }
  // A count of items that each take at least `min_item_bytes` bytes: checked against
  // what is left before anyone allocates for it.
  uint32_t count(size_t min_item_bytes, const char* items) {
    uint32_t n = u32();
    if (min_item_bytes && uint64_t(n) * min_item_bytes > size_ - pos_)
      fail("a count of " + std::to_string(n) + " " + items + " that cannot fit in the " +
           std::to_string(size_ - pos_) + " bytes left");
    return n;
  }

  size_t position() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }
  [[noreturn]] void fail(const std::string& msg) const {
    throw Error(ErrorCode::kInvalidArtifact, what_ + " is malformed at byte " + std::to_string(pos_) + ": " + msg);
  }

 private:
  void need(size_t n, const char* what) {
    if (n > size_ - pos_)
      fail("needs " + std::to_string(n) + " bytes for " + what + " but only " + std::to_string(size_ - pos_) +
           " are left");
  }
  uint64_t get(size_t n) {
    need(n, "a number");
    uint64_t v = loadLE(data_ + pos_, n);
    pos_ += n;
    return v;
  }

  const std::byte* data_;
  size_t size_;
  size_t pos_ = 0;
  std::string what_;
};

}  // namespace partita::artifact
