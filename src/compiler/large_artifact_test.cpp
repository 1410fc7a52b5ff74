// 64-bit offsets and sizes for real: a file over 4 GiB with a single tensor over
// 2 GiB. The tensors are mostly zeros backed by the kernel's zero page, and the writer
// leaves zero pages as holes, so the test needs neither the RAM nor the disk.
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include <gtest/gtest.h>

#include "runtime/artifact_reader.h"
#include "compiler/artifact_writer.h"
#include "partita/error.h"

namespace partita::artifact {
namespace {

namespace fs = std::filesystem;

struct AnonymousMapping {
  void* addr = nullptr;
  size_t size = 0;
  ~AnonymousMapping() {
    if (addr) munmap(addr, size);
  }
};

// `n` zero bytes that cost no memory: a read-only private anonymous mapping, populated
// up front (every page maps the kernel's zero page; populating in the kernel is much
// cheaper than faulting page by page later). poke() makes single pages writable.
Bytes lazyZeros(size_t n) {
  auto m = std::make_shared<AnonymousMapping>();
  void* p = mmap(nullptr, n, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  m->addr = p;
  m->size = n;
  return Bytes{m, static_cast<const std::byte*>(p), n};
}

void poke(const Bytes& b, size_t at, uint8_t v) {
  auto* page = const_cast<std::byte*>(b.data) + at / 4096 * 4096;
  ASSERT_EQ(mprotect(page, 4096, PROT_READ | PROT_WRITE), 0);
  page[at % 4096] = std::byte{v};
}
uint8_t peek(const ir::Tensor& t, size_t at) { return static_cast<const uint8_t*>(t.data)[at]; }

TEST(ArtifactLarge, FileOver4GiBWithATensorOver2GiB) {
  const size_t big = (size_t(5) << 29);     // 2.5 GiB
  const size_t second = (size_t(7) << 28);  // 1.75 GiB
  ir::Graph g;
  Bytes a = lazyZeros(big), b = lazyZeros(second);
  poke(a, 0, 1);
  poke(a, big - 1, 2);
  poke(b, 0, 3);
  poke(b, second - 1, 4);
  uint8_t tail[64];
  for (int i = 0; i < 64; ++i) tail[i] = uint8_t(i + 1);
  ir::ConstId ia = g.constants.add("a", ir::DType::kUInt8, {int64_t(big)}, a);
  ir::ConstId ib = g.constants.add("b", ir::DType::kUInt8, {int64_t(second)}, b);
  ir::ConstId ic = g.constants.add("c", ir::DType::kUInt8, {64}, Bytes::copyOf(tail, 64));
  g.outputs = {g.addConstantValue("a", ia), g.addConstantValue("b", ib), g.addConstantValue("c", ic)};

  std::string path = (fs::temp_directory_path() / ("partita-large-" + std::to_string(getpid()) + ".pta")).string();
  struct Remove {
    std::string p;
    ~Remove() { fs::remove(p); }
  } remove{path};
  LinkReport r = writeArtifact(g, path);
  EXPECT_GT(r.file_bytes, uint64_t(4) << 30);
  EXPECT_EQ(r.distinct_weight_bytes, big + second + 64);
  EXPECT_EQ(fs::file_size(path), r.file_bytes);
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_LT(uint64_t(st.st_blocks) * 512, uint64_t(64) << 20) << "zero pages should be holes";

  Artifact art = openArtifact(path);
  EXPECT_EQ(byteAccounting(art), r);
  const ConstantEntry* ec = art.findConstant(ic);
  ASSERT_NE(ec, nullptr);
  EXPECT_GT(ec->offset, uint64_t(4) << 30);
  EXPECT_EQ(art.findConstant(ia)->nbytes, big);
  const ir::Tensor& ta = art.store->get(ia);
  const ir::Tensor& tb = art.store->get(ib);
  const ir::Tensor& tc = art.store->get(ic);
  EXPECT_EQ(ta.shape, std::vector<int64_t>{int64_t(big)});
  EXPECT_EQ(peek(ta, 0), 1);
  EXPECT_EQ(peek(ta, 1), 0);
  EXPECT_EQ(peek(ta, big - 1), 2);
  EXPECT_EQ(peek(tb, 0), 3);
  EXPECT_EQ(peek(tb, second - 1), 4);
  EXPECT_EQ(std::memcmp(tc.data, tail, 64), 0);
  // (verifyWeights would read all 4.25 GiB back; the small tests cover it.)
}

}  // namespace
}  // namespace partita::artifact
