#include "partita/npy.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "ir/limits.h"
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

// Returns the text of a quoted value or tuple following `'key':` in the header dict.
std::string headerField(const std::string& header, const std::string& key, const std::string& path) {
  size_t k = header.find("'" + key + "'");
  if (k == std::string::npos) bad(path, "header has no '" + key + "'");
  size_t colon = header.find(':', k);
  if (colon == std::string::npos) bad(path, "malformed header");
  size_t i = colon + 1;
  while (i < header.size() && header[i] == ' ') ++i;
  if (i >= header.size()) bad(path, "malformed header");
  char open = header[i];
  char close = open == '\'' ? '\'' : open == '(' ? ')' : ',';
  size_t end = header.find(close, i + 1);
  if (end == std::string::npos) bad(path, "malformed header");
  if (open == '\'' || open == '(') return header.substr(i + 1, end - i - 1);
  return header.substr(i, end - i);
}

}  // namespace

ir::OwnedTensor readNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ErrorCode::kIo, "cannot open '" + path + "'");
  char magic[8];
  if (!in.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0) bad(path, "wrong magic");
  uint32_t header_len = 0;
  if (magic[6] == 1) {
    uint8_t b[2];
    if (!in.read(reinterpret_cast<char*>(b), 2)) bad(path, "truncated header");
    header_len = b[0] | (uint32_t(b[1]) << 8);
  } else if (magic[6] == 2 || magic[6] == 3) {
    uint8_t b[4];
    if (!in.read(reinterpret_cast<char*>(b), 4)) bad(path, "truncated header");
    header_len = b[0] | (uint32_t(b[1]) << 8) | (uint32_t(b[2]) << 16) | (uint32_t(b[3]) << 24);
  } else {
    bad(path, "unsupported format version " + std::to_string(int(magic[6])));
  }
  if (header_len > (1u << 20)) bad(path, "header too large");
  std::string header(header_len, '\0');
  if (!in.read(header.data(), header_len)) bad(path, "truncated header");

  std::string descr = headerField(header, "descr", path);
  ir::DType dtype = ir::DType::kUndefined;
  for (const auto& d : kDescrs)
    if (descr == d.descr || (descr.size() == 3 && descr[0] == '=' && descr.substr(1) == std::string(d.descr).substr(1)))
      dtype = d.dtype;
  if (dtype == ir::DType::kUndefined) bad(path, "unsupported dtype '" + descr + "'");
  if (headerField(header, "fortran_order", path).find("False") == std::string::npos)
    bad(path, "Fortran-ordered arrays are not supported");
  std::vector<int64_t> shape;
  std::stringstream dims(headerField(header, "shape", path));
  std::string item;
  while (std::getline(dims, item, ',')) {
    size_t a = item.find_first_not_of(' ');
    if (a == std::string::npos) continue;
    char* end = nullptr;
    long long v = std::strtoll(item.c_str() + a, &end, 10);
    if (end == item.c_str() + a || v < 0) bad(path, "bad shape entry '" + item + "'");
    shape.push_back(v);
  }
  // The size the header claims is checked against the file before anything is
  // allocated for it: a header can claim any shape.
  std::optional<uint64_t> bytes = ir::checkedNbytes(dtype, shape);
  if (!bytes) bad(path, "shape " + ir::shapeStr(shape) + " has more bytes than 64 bits count");
  const std::streamoff data_at = in.tellg();
  in.seekg(0, std::ios::end);
  const std::streamoff file_end = in.tellg();
  in.seekg(data_at);
  if (data_at < 0 || file_end < data_at || uint64_t(file_end - data_at) < *bytes)
    bad(path, "data is shorter than its shape " + ir::shapeStr(shape) + " needs (" + std::to_string(*bytes) +
                  " bytes)");
  ir::OwnedTensor t(dtype, shape);
  if (t.nbytes() && !in.read(static_cast<char*>(t.data()), std::streamsize(t.nbytes())))
    bad(path, "data is shorter than its shape " + ir::shapeStr(shape) + " needs");
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
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(ErrorCode::kIo, "cannot write '" + path + "'");
    out.write("\x93NUMPY\x01\x00", 8);
    uint16_t len = uint16_t(header.size());
    char lb[2] = {char(len & 0xff), char(len >> 8)};
    out.write(lb, 2);
    out.write(header.data(), std::streamsize(header.size()));
    out.write(static_cast<const char*>(t.data), std::streamsize(t.nbytes()));
    if (!out) {
      std::remove(tmp.c_str());
      throw Error(ErrorCode::kIo, "cannot write '" + path + "'");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw Error(ErrorCode::kIo, "cannot write '" + path + "'");
  }
}

}  // namespace partita
