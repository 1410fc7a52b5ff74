#include "partita/npy.h"

#include <cstdio>
#include <cstring>
#include <optional>
#include <string_view>
#include <utility>

#include "base/atomic_file.h"
#include "base/checked_int.h"
#include "base/mapped_file.h"
#include "ir/tensor.h"
#include "partita/error.h"

namespace partita {

namespace {

struct DescrEntry {
  const char* descr;
  ir::DType dtype;
};
constexpr DescrEntry kDescrs[] = {
    {"<f4", ir::DType::kFloat32}, {"<f2", ir::DType::kFloat16}, {"<f8", ir::DType::kFloat64},
    {"|i1", ir::DType::kInt8},    {"<i2", ir::DType::kInt16},   {"<i4", ir::DType::kInt32},
    {"<i8", ir::DType::kInt64},   {"|u1", ir::DType::kUInt8},   {"<u2", ir::DType::kUInt16},
    {"<u4", ir::DType::kUInt32},  {"<u8", ir::DType::kUInt64},  {"|b1", ir::DType::kBool},
};

[[noreturn]] void bad(const std::string& path, const std::string& what) {
  throw Error(ErrorCode::kInvalidArgument, path + ": not a readable .npy file: " + what);
}

// The header is a Python dict literal, as numpy writes it:
//   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// Exactly these three keys; strings in either quotes; the shape a tuple of plain
// decimal integers ("(4,)" for one dim, "()" for a scalar). Anything else is refused.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& path) : s_(text), path_(path) {}

  struct Header {
    std::string descr;
    bool fortran_order = false;
    std::vector<int64_t> shape;
  };

  Header parse() {
    Header h;
    bool have_descr = false, have_order = false, have_shape = false;
    expect('{');
    while (!peek('}')) {
      std::string key = quoted("a key");
      expect(':');
      auto once = [&](bool& seen) {
        if (seen) fail("header gives '" + key + "' twice");
        seen = true;
      };
      if (key == "descr") {
        once(have_descr);
        h.descr = quoted("the descr string");
      } else if (key == "fortran_order") {
        once(have_order);
        h.fortran_order = boolean();
      } else if (key == "shape") {
        once(have_shape);
        h.shape = tuple();
      } else {
        fail("header has an unknown key '" + key + "' (a .npy header has descr, fortran_order and shape)");
      }
      if (!peek('}')) expect(',');
    }
    expect('}');
    skipSpace();
    if (i_ != s_.size()) fail("header has text after its closing '}'");
    if (!have_descr) fail("header has no 'descr'");
    if (!have_order) fail("header has no 'fortran_order'");
    if (!have_shape) fail("header has no 'shape'");
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& what) { bad(path_, what); }
  void skipSpace() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  bool peek(char c) {
    skipSpace();
    return i_ < s_.size() && s_[i_] == c;
  }
  void expect(char c) {
    if (!peek(c)) fail(std::string("malformed header: expected '") + c + "' at byte " + std::to_string(i_));
    ++i_;
  }
  std::string quoted(const char* what) {
    skipSpace();
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"'))
      fail(std::string("malformed header: expected ") + what + " at byte " + std::to_string(i_));
    char q = s_[i_++];
    size_t end = s_.find(q, i_);
    if (end == std::string_view::npos) fail("malformed header: unterminated string");
    std::string v(s_.substr(i_, end - i_));
    i_ = end + 1;
    return v;
  }
  bool boolean() {
    skipSpace();
    for (auto [word, value] : {std::pair{std::string_view("True"), true}, std::pair{std::string_view("False"), false}})
      if (s_.substr(i_, word.size()) == word) {
        i_ += word.size();
        return value;
      }
    fail("malformed header: fortran_order is not True or False");
  }
  std::vector<int64_t> tuple() {
    std::vector<int64_t> dims;
    expect('(');
    bool trailing_comma = false;
    while (!peek(')')) {
      if (i_ >= s_.size()) fail("malformed header: the shape tuple is not closed");
      size_t a = i_;
      while (i_ < s_.size() && s_[i_] != ',' && s_[i_] != ')' && s_[i_] != ' ') ++i_;
      std::string_view item = s_.substr(a, i_ - a);
      std::optional<int64_t> v = parseDecimal(item);
      if (!v)
        fail("shape entry '" + std::string(item) + "' is not a non-negative decimal integer (at most 2^63-1)");
      dims.push_back(*v);
      trailing_comma = peek(',');
      if (trailing_comma) ++i_;
      else if (!peek(')')) fail("malformed header: the shape tuple is not closed");
    }
    expect(')');
    if (dims.size() == 1 && !trailing_comma) fail("shape '(" + std::to_string(dims[0]) + ")' is not a tuple (write '(" + std::to_string(dims[0]) + ",)')");
    if (dims.size() > kMaxRank) fail("shape has " + std::to_string(dims.size()) + " dims; at most " + std::to_string(kMaxRank));
    return dims;
  }

  static constexpr size_t kMaxRank = 64;  // numpy's own limit
  std::string_view s_;
  const std::string& path_;
  size_t i_ = 0;
};

}  // namespace

ir::OwnedTensor readNpy(const std::string& path) {
  Bytes file;
  try {
    file = mapFile(path);
  } catch (const Error& e) {
    throw Error(e.code(), std::string("cannot read .npy input: ") + e.what());
  }
  return readNpyBytes(file.data, file.size, path);
}

ir::OwnedTensor readNpyBytes(const void* data, size_t size, const std::string& path) {
  const auto* p = static_cast<const uint8_t*>(data);
  if (size < 10 || std::memcmp(p, "\x93NUMPY", 6) != 0) bad(path, "wrong magic (not a .npy file)");
  const int version = p[6];
  size_t len_bytes = 0;
  if (version == 1) len_bytes = 2;
  else if (version == 2 || version == 3) len_bytes = 4;
  else bad(path, "unsupported format version " + std::to_string(version));
  if (size < 8 + len_bytes) bad(path, "truncated header");
  uint64_t header_len = 0;
  for (size_t i = 0; i < len_bytes; ++i) header_len |= uint64_t(p[8 + i]) << (8 * i);
  if (header_len > (1u << 20)) bad(path, "header of " + std::to_string(header_len) + " bytes is too large (at most 1 MiB)");
  const uint64_t data_offset = 8 + len_bytes + header_len;
  if (data_offset > size) bad(path, "truncated header");
  HeaderParser::Header h =
      HeaderParser(std::string_view(reinterpret_cast<const char*>(p + 8 + len_bytes), header_len), path).parse();

  ir::DType dtype = ir::DType::kUndefined;
  for (const auto& d : kDescrs)
    if (h.descr == d.descr || (h.descr.size() == 3 && h.descr[0] == '=' && h.descr.substr(1) == std::string(d.descr).substr(1)))
      dtype = d.dtype;
  if (dtype == ir::DType::kUndefined) bad(path, "unsupported dtype '" + h.descr + "'");
  if (h.fortran_order) bad(path, "Fortran-ordered arrays are not supported");

  // Counts from the header are checked before anything is allocated: they must fit the
  // limit and describe exactly the bytes the file holds after the header.
  const std::string shape_str = ir::shapeStr(h.shape);
  uint64_t numel = 1;
  for (int64_t d : h.shape) {
    std::optional<uint64_t> n = mulAtMost(numel, uint64_t(d), kMaxInputTensorBytes);
    if (!n) bad(path, "shape " + shape_str + " has more than 2^40 elements");
    numel = *n;
  }
  std::optional<uint64_t> nbytes = mulAtMost(numel, ir::dtypeSize(dtype), kMaxInputTensorBytes);
  if (!nbytes) bad(path, "shape " + shape_str + " needs more than 2^40 bytes");
  const uint64_t have = size - data_offset;
  if (have < *nbytes)
    bad(path, "data is shorter than its shape needs: " + std::string(ir::dtypeName(dtype)) + shape_str + " needs " +
                  std::to_string(*nbytes) + " bytes, the file has " + std::to_string(have) + " after the header");
  if (have > *nbytes)
    bad(path, "the file has " + std::to_string(have - *nbytes) + " bytes after the data its header describes (" +
                  std::string(ir::dtypeName(dtype)) + shape_str + ": " + std::to_string(*nbytes) + " bytes)");
  ir::OwnedTensor t(dtype, h.shape);
  if (*nbytes) std::memcpy(t.data(), p + data_offset, size_t(*nbytes));
  return t;
}

void writeNpy(const std::string& path, const ir::Tensor& t) {
  const char* descr = nullptr;
  for (const auto& d : kDescrs)
    if (d.dtype == t.dtype) descr = d.descr;
  if (!descr) throw Error(ErrorCode::kUnsupported, "cannot write dtype " + std::string(ir::dtypeName(t.dtype)) + " to .npy");
  std::string shape = "(";
  for (size_t i = 0; i < t.shape.size(); ++i) shape += std::to_string(t.shape[i]) + (t.shape.size() == 1 || i + 1 < t.shape.size() ? "," : "");
  shape += ")";
  std::string header = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  // The atomic writer: no partial file, and never over a FIFO, device or read-only file.
  artifact::AtomicFile out(path);
  std::string head("\x93NUMPY\x01\x00", 8);
  uint16_t len = uint16_t(header.size());
  head += char(len & 0xff);
  head += char(len >> 8);
  head += header;
  out.writeAt(0, head.data(), head.size());
  out.writeAt(head.size(), t.data, t.nbytes());
  out.commit();
}

}  // namespace partita
