// Hostile and damaged files: each gets Error(kInvalidArtifact) with a message saying
// what is wrong, and never a crash.
#include "runtime/artifact_reader.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include <gtest/gtest.h>
#include <unistd.h>

#include "compiler/artifact_testing.h"
#include "base/byte_io.h"
#include "runtime/manifest.h"
#include "compiler/artifact_writer.h"
#include "partita/error.h"

namespace partita::artifact {
namespace {

namespace fs = std::filesystem;
using Buffer = std::vector<std::byte>;

Buffer artifactBytes(const ir::Graph& g, const std::vector<backend::ModuleImage>& modules) {
  std::string path = (fs::temp_directory_path() / ("partita-reader-test-" + std::to_string(getpid()) + ".pta"));
  writeArtifact(g, modules, path);
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  fs::remove(path);
  Buffer b(chars.size());
  std::memcpy(b.data(), chars.data(), chars.size());
  return b;
}

// A valid artifact with a module section: sections 0 manifest, 1 module, 2 weights.
// Constants: 0 W1 float32[16,16], 1 b1 [16], 2 W2 [16,16], 3 b2 [16]. Modules: 0 a
// vendor module that borrows b1, 1 the graph executor.
const Buffer& sample() {
  static const Buffer bytes = [] {
    backend::ModuleImage mod{"test.vendor", std::vector<std::byte>(200, std::byte{'x'}),
                             {{1, UseKind::kBorrow, ir::kNoConst}}, 0};
    return artifactBytes(testing::mlpGraph(16, 16, 16), {mod});
  }();
  return bytes;
}

std::vector<SectionEntry> sectionsOf(const Buffer& b) {
  Header h = decodeHeader(b.data());
  std::vector<SectionEntry> s;
  for (uint32_t i = 0; i < h.section_count; ++i)
    s.push_back(decodeSectionEntry(b.data() + h.section_table_offset + i * kSectionEntrySize));
  return s;
}

void setSection(Buffer& b, size_t i, const SectionEntry& e) {
  encodeSectionEntry(e, b.data() + kHeaderSize + i * kSectionEntrySize);
}

// The error message of opening `b`, or "" when it opens.
std::string openError(const Buffer& b, OpenOptions options = {}) {
  try {
    readArtifact(testing::bytesOf(b), "x.pta", options);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArtifact) << e.what();
    return e.what();
  }
  return "";
}

#define EXPECT_OPEN_FAILS(buffer, text)                                                     \
  do {                                                                                      \
    std::string msg_ = openError(buffer);                                                   \
    EXPECT_NE(msg_.find(text), std::string::npos) << "message: '" << msg_ << "'";         \
    EXPECT_EQ(msg_.rfind("invalid artifact 'x.pta': ", 0), 0u) << msg_;                     \
  } while (0)

// Re-encodes the manifest after `edit` and reseals the file.
template <typename Edit>
Buffer withManifest(Edit edit) {
  Buffer b = sample();
  SectionEntry ms = sectionsOf(b)[0];
  Manifest m = decodeManifest(b.data() + ms.offset, size_t(ms.size));
  edit(m);
  Buffer enc = encodeManifest(m);
  EXPECT_EQ(enc.size(), ms.size) << "the edit must keep the manifest's size";
  std::memcpy(b.data() + ms.offset, enc.data(), enc.size());
  testing::reseal(b);
  return b;
}

TEST(ArtifactReader, SampleOpens) {
  EXPECT_EQ(openError(sample(), {.verify_weights = true}), "");
  ASSERT_EQ(sectionsOf(sample()).size(), 3u);
}

TEST(ArtifactReader, TruncatedAtEverySectionBoundary) {
  const Buffer& full = sample();
  std::vector<uint64_t> cuts = {0, 4, 8, kHeaderSize - 1, kHeaderSize, kHeaderSize + kSectionEntrySize};
  for (const SectionEntry& s : sectionsOf(full)) {
    cuts.push_back(s.offset);
    cuts.push_back(s.offset + s.size / 2);
    cuts.push_back(s.offset + s.size - 1);
  }
  for (uint64_t cut : cuts) {
    ASSERT_LT(cut, full.size());
    Buffer b(full.begin(), full.begin() + std::ptrdiff_t(cut));
    SCOPED_TRACE("cut at " + std::to_string(cut));
    EXPECT_OPEN_FAILS(b, "truncated");
  }
}

// A truncated file whose header was patched to the new size still fails: its
// sections now point outside the file.
TEST(ArtifactReader, TruncatedWithPatchedHeader) {
  const Buffer& full = sample();
  SectionEntry ws = sectionsOf(full)[2];
  Buffer b(full.begin(), full.begin() + std::ptrdiff_t(ws.offset + ws.size / 2));
  Header h = decodeHeader(b.data());
  h.file_size = b.size();
  encodeHeader(h, b.data());
  testing::reseal(b);
  EXPECT_OPEN_FAILS(b, "section 2 (weights) [" + std::to_string(ws.offset) + ", " +
                           std::to_string(ws.offset + ws.size) + ") lies outside the file");
}

TEST(ArtifactReader, FlippedByteInEachSection) {
  const Buffer& full = sample();
  std::vector<SectionEntry> s = sectionsOf(full);
  auto flipped = [&](uint64_t at) {
    Buffer b = full;
    b[at] ^= std::byte{0x10};
    return b;
  };
  EXPECT_OPEN_FAILS(flipped(20), "header checksum mismatch");
  EXPECT_OPEN_FAILS(flipped(kHeaderSize + 10), "section table checksum mismatch");
  EXPECT_OPEN_FAILS(flipped(s[0].offset + s[0].size / 2), "section 0 (manifest) checksum mismatch");
  EXPECT_OPEN_FAILS(flipped(s[1].offset + 7), "section 1 (module) checksum mismatch");

  // Weights: checked on demand; the message names the tensor.
  const uint64_t w2_offset = [&] {
    Artifact a = readArtifact(testing::bytesOf(full), "x.pta");
    return a.findConstant(2)->offset;
  }();
  Buffer b = flipped(w2_offset + 100);
  Artifact a = readArtifact(testing::bytesOf(b), "x.pta");
  try {
    verifyWeights(a);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArtifact);
    EXPECT_EQ(std::string(e.what()),
              "invalid artifact 'x.pta': the weights of constant 2 ('W2') are corrupted (checksum mismatch)");
  }
  EXPECT_NE(openError(b, {.verify_weights = true}).find("constant 2 ('W2') are corrupted"), std::string::npos);
}

TEST(ArtifactReader, FlippedPaddingInTheWeightSection) {
  Buffer b = artifactBytes(testing::mlpGraph(16, 15, 16), {});  // b1 is 60 bytes: 4 bytes of padding follow
  Artifact a = readArtifact(testing::bytesOf(b), "x.pta");
  const ConstantEntry* b1 = a.findConstant(1);
  ASSERT_EQ(b1->nbytes, 60u);
  b[b1->offset + 61] ^= std::byte{1};
  EXPECT_EQ(openError(b), "");  // weights (and their padding) are checked on demand
  EXPECT_EQ(openError(b, {.verify_weights = true}),
            "invalid artifact 'x.pta': the weight section is corrupted (checksum mismatch in the padding between "
            "tensors)");
}

TEST(ArtifactReader, WrongMagicOrVersion) {
  Buffer b = sample();
  b[1] = std::byte{'X'};
  EXPECT_OPEN_FAILS(b, "not a partita artifact (wrong magic bytes)");

  Buffer text(100, std::byte{'a'});
  EXPECT_OPEN_FAILS(text, "not a partita artifact");

  Buffer v = sample();
  Header h = decodeHeader(v.data());
  h.version = 2;
  encodeHeader(h, v.data());
  EXPECT_OPEN_FAILS(v, "format version 2 is not supported (this build reads version 1)");
}

TEST(ArtifactReader, SectionOffsetsOrSizesOutsideTheFile) {
  const Buffer& full = sample();
  {
    Buffer b = full;
    SectionEntry e = sectionsOf(b)[0];
    e.offset = b.size() + 64;
    setSection(b, 0, e);
    testing::reseal(b);
    EXPECT_OPEN_FAILS(b, "section 0 (manifest) [" + std::to_string(b.size() + 64));
    EXPECT_OPEN_FAILS(b, "lies outside the file (" + std::to_string(b.size()) + " bytes)");
  }
  {
    Buffer b = full;
    SectionEntry e = sectionsOf(b)[1];
    e.size = UINT64_MAX - 10;  // offset + size overflows
    setSection(b, 1, e);
    testing::reseal(b);
    EXPECT_OPEN_FAILS(b, "section 1 (module)");
    EXPECT_OPEN_FAILS(b, "overflow) lies outside the file");
  }
  {
    Buffer b = full;
    Header h = decodeHeader(b.data());
    h.section_count = 1000;
    encodeHeader(h, b.data());
    EXPECT_OPEN_FAILS(b, "the section table [64, 40064) lies outside the file");
  }
  {
    Buffer b = full;
    SectionEntry e = sectionsOf(b)[2];
    e.offset -= 8;  // still inside, but misaligned
    setSection(b, 2, e);
    testing::reseal(b);
    EXPECT_OPEN_FAILS(b, "is not aligned to 64");
  }
}

TEST(ArtifactReader, OverlappingSections) {
  Buffer b = sample();
  std::vector<SectionEntry> s = sectionsOf(b);
  s[0].size = s[1].offset - s[0].offset + 16;  // the manifest runs into the module section
  setSection(b, 0, s[0]);
  testing::reseal(b);
  EXPECT_OPEN_FAILS(b, "sections 0 [" + std::to_string(s[0].offset) + ", " + std::to_string(s[0].offset + s[0].size) +
                           ") and 1 [" + std::to_string(s[1].offset));
  EXPECT_OPEN_FAILS(b, "overlap");

  Buffer t = sample();
  SectionEntry e = sectionsOf(t)[0];
  e.offset = kHeaderSize;  // over the section table
  setSection(t, 0, e);
  testing::reseal(t);
  EXPECT_OPEN_FAILS(t, "section 0 (manifest) overlaps the header or section table");
}

TEST(ArtifactReader, ConstantPointingIntoAModuleSection) {
  const uint64_t module_offset = sectionsOf(sample())[1].offset;
  Buffer b = withManifest([&](Manifest& m) { m.constants[1].offset = module_offset; });
  EXPECT_OPEN_FAILS(b, "constant 1 ('b1') at [" + std::to_string(module_offset) + ", " +
                           std::to_string(module_offset + 64) + ") lies outside the weight section");
  EXPECT_OPEN_FAILS(b, "(it starts inside section 1, module)");
}

TEST(ArtifactReader, ConstantRunningPastTheWeightSection) {
  const SectionEntry ws = sectionsOf(sample())[2];
  // b2 (64 bytes) moved to the last 64 bytes of the section and grown to 128.
  Buffer c = withManifest([&](Manifest& m) {
    m.constants[3].offset = ws.offset + ws.size - 64;
    m.constants[3].nbytes = 128;
    m.constants[3].shape = {32};
  });
  EXPECT_OPEN_FAILS(c, "constant 3 ('b2') at [");
  EXPECT_OPEN_FAILS(c, "lies outside the weight section");
}

TEST(ArtifactReader, InconsistentManifests) {
  EXPECT_OPEN_FAILS(withManifest([](Manifest& m) { m.constants[0].offset += 4; }), "is not aligned to 64");
  EXPECT_OPEN_FAILS(withManifest([](Manifest& m) { m.constants[0].nbytes -= 4; }),
                    "constant 0 ('W1') of type float32[16,16] needs 1024 bytes but its entry says 1020");
  EXPECT_OPEN_FAILS(withManifest([](Manifest& m) { m.constants[0].offset = m.constants[2].offset + 64; }),
                    "overlap in the weight section");
  EXPECT_OPEN_FAILS(withManifest([](Manifest& m) { m.constants[0].consumers = {0}; }),
                    "constant 0 ('W1'): its consumers do not match the module table");
  EXPECT_OPEN_FAILS(withManifest([](Manifest& m) { m.modules[0].uses[0].id = 77; }),
                    "module 0 ('test.vendor') uses constant 77 which is not in the constant table");
  EXPECT_OPEN_FAILS(withManifest([](Manifest& m) { m.modules[0].section = 2; }),
                    "refers to section 2 which is not a module section");
  EXPECT_OPEN_FAILS(withManifest([](Manifest& m) { m.modules[1].kind = "host.grapx"; }),
                    "expected one 'host.graph' module, last in the module table; found 0");
  EXPECT_OPEN_FAILS(withManifest([](Manifest& m) { std::swap(m.modules[0].kind, m.modules[1].kind); }),
                    "module 0 ('host.graph') must have neither a section nor functions");
  EXPECT_OPEN_FAILS(withManifest([](Manifest& m) {
                      m.producer = "partit";  // 7 bytes shorter, for the 7 of the domain
                      m.graph.nodes[2].domain = "partita";
                      m.graph.nodes[2].op_type = "Call";
                    }),
                    "call node 'relu' does not name a function of an external module");
  EXPECT_OPEN_FAILS(withManifest([](Manifest& m) { m.constants[2].storage = Storage::kEmbedded; }),
                    "constant 2 ('W2') is embedded but has an offset");
  EXPECT_OPEN_FAILS(withManifest([](Manifest& m) { m.graph.nodes[0].inputs[1] = 6; }),
                    "the graph is inconsistent: graph verification failed: node 0 (MatMul 'mm1') reads 'add1' before "
                    "it is produced");
  EXPECT_OPEN_FAILS(withManifest([](Manifest& m) { m.graph.values[1].constant = 1; }),
                    "the graph is inconsistent: graph verification failed: constant value 'W1' has type "
                    "float32[16,16] but its constant is float32[16]");
  EXPECT_OPEN_FAILS(withManifest([](Manifest& m) { m.graph.values[0].type.dims[0].value = int64_t(1) << 62; }),
                    "value 'x' has an impossible type");
}

TEST(ArtifactReader, MalformedManifestEncoding) {
  Buffer b = sample();
  SectionEntry ms = sectionsOf(b)[0];
  // The producer string's length, made huge.
  storeLE(b.data() + ms.offset, 0x7fffffff, 4);
  testing::reseal(b);
  EXPECT_OPEN_FAILS(b, "the manifest is malformed at byte 4: needs 2147483647 bytes for a string");

  Buffer c = sample();
  // The constant count (right after "partita 0.1.0"), made huge.
  storeLE(c.data() + ms.offset + 4 + 13, 0xffffffff, 4);
  testing::reseal(c);
  EXPECT_OPEN_FAILS(c, "a count of 4294967295 constants that cannot fit");
}

// Random damage, resealed so it gets past the checksums: always an Error or success.
TEST(ArtifactReader, RandomDamageNeverCrashes) {
  const Buffer& full = sample();
  SectionEntry ms = sectionsOf(full)[0];
  std::mt19937_64 rng(42);
  int rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    Buffer b = full;
    int flips = 1 + int(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      // Mostly the manifest (where parsing happens), sometimes anywhere.
      uint64_t at = rng() % 4 ? ms.offset + rng() % ms.size : rng() % b.size();
      b[at] = std::byte(uint8_t(rng()));
    }
    if (rng() % 2) testing::reseal(b);
    try {
      Artifact a = readArtifact(testing::bytesOf(b), "x.pta", {.verify_weights = true});
    } catch (const Error& e) {
      ASSERT_EQ(e.code(), ErrorCode::kInvalidArtifact) << e.what();
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 1000);
}

TEST(ArtifactReader, MissingFileIsAnIoError) {
  try {
    openArtifact("/nonexistent/m.pta");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/m.pta"), std::string::npos);
  }
}

}  // namespace
}  // namespace partita::artifact
