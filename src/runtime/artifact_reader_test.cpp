// Hostile and damaged files: each gets Error(kInvalidArtifact) with a message saying
// what is wrong, and never a crash.
#include "runtime/artifact_reader.h"
#include "runtime/executor_kinds.h"
#include "runtime/graph_executor.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include <gtest/gtest.h>
#include <unistd.h>

#include "compiler/artifact_testing.h"
#include "base/byte_io.h"
#include "compiler/manifest_encode.h"
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
                             {{1, UseKind::kBorrow, ir::kNoConst}}, 0, {}};
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

// Re-encodes the manifest after `edit` and reseals the file. The manifest may change
// size within the alignment gap before the module section.
template <typename Edit>
Buffer withManifest(Edit edit) {
  Buffer b = sample();
  SectionEntry ms = sectionsOf(b)[0];
  const uint64_t room = sectionsOf(b)[1].offset - ms.offset;
  Manifest m = decodeManifest(b.data() + ms.offset, size_t(ms.size));
  edit(m);
  Buffer enc = encodeManifest(m);
  EXPECT_LE(enc.size(), room) << "the edit must fit in the gap before the module section";
  std::memset(b.data() + ms.offset, 0, size_t(room));
  std::memcpy(b.data() + ms.offset, enc.data(), std::min<size_t>(enc.size(), size_t(room)));
  ms.size = std::min<uint64_t>(enc.size(), room);
  setSection(b, 0, ms);
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
  Buffer b = artifactBytes(testing::mlpGraph(16, 15, 13), {});  // 60- and 52-byte biases leave padding
  Artifact a = readArtifact(testing::bytesOf(b), "x.pta");
  std::vector<std::pair<uint64_t, uint64_t>> places;
  for (const ConstantEntry& c : a.constants) places.emplace_back(c.offset, c.offset + c.nbytes);
  std::sort(places.begin(), places.end());
  uint64_t padding = 0;
  for (size_t i = 1; i < places.size() && !padding; ++i)
    if (places[i].first > places[i - 1].second) padding = places[i - 1].second;
  ASSERT_NE(padding, 0u) << "no padding between tensors";
  b[padding] ^= std::byte{1};
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
  h.version = 3;
  encodeHeader(h, v.data());
  EXPECT_OPEN_FAILS(v, "format version 3 is not supported (this build reads version 2)");
  h.version = 1;
  encodeHeader(h, v.data());
  EXPECT_OPEN_FAILS(v, "version 1 artifact: recompile with this partita");
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
  EXPECT_OPEN_FAILS(withManifest([](Manifest& m) { m.modules[0].uses[0].id = 77; }),
                    "module 0 ('test.vendor') uses constant 77 which is not in the constant table");
  EXPECT_OPEN_FAILS(withManifest([](Manifest& m) { m.modules[0].section = 2; }),
                    "refers to section 2 which is not a module section");
  EXPECT_OPEN_FAILS(withManifest([](Manifest& m) { m.modules[1].kind = "host.grapx"; }),
                    "expected one 'host.graph' module, last in the module table; found 0");
  EXPECT_OPEN_FAILS(withManifest([](Manifest& m) { std::swap(m.modules[0].kind, m.modules[1].kind); }),
                    "module 0 ('host.graph') must have neither a section nor functions");
  EXPECT_OPEN_FAILS(withManifest([](Manifest& m) {
                      m.producer = "partita";  // shorter, and shared with the domain
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

// Consumers are not in the file: decoding derives them from the module table.
TEST(ArtifactReader, ConsumersDerivedFromUses) {
  SectionEntry ms = sectionsOf(sample())[0];
  Manifest m = decodeManifest(sample().data() + ms.offset, size_t(ms.size));
  ASSERT_EQ(m.constants.size(), 4u);
  EXPECT_EQ(m.constants[0].consumers, std::vector<uint32_t>{1});
  EXPECT_EQ(m.constants[1].consumers, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(m.executor, "graph");
  EXPECT_TRUE(m.metadata.empty());
}

TEST(ArtifactReader, MalformedManifestEncoding) {
  Buffer b = sample();
  SectionEntry ms = sectionsOf(b)[0];
  // The string table's count, made huge (a 5-byte varint of 2^32 - 1).
  const uint8_t huge[5] = {0xff, 0xff, 0xff, 0xff, 0x0f};
  std::memcpy(b.data() + ms.offset, huge, 5);
  testing::reseal(b);
  EXPECT_OPEN_FAILS(b, "the manifest is malformed at byte 5: a count of 4294967295 strings that cannot fit");

  // The last byte (a graph output's index) turned into a varint that runs past the end.
  Buffer c = sample();
  c[size_t(ms.offset + ms.size - 1)] = std::byte{0x80};
  testing::reseal(c);
  EXPECT_OPEN_FAILS(c, "the manifest is malformed at byte " + std::to_string(ms.size) + ": a varint runs past the end");
}

// Hand-built manifests for the bounds of the compact encoding. Strings: "", "partita",
// "graph", "host.graph", "x"; no constants; the host module; graph 0 with one value
// 'x' (float32[3]) that is its input and output, and optionally one node with one
// attribute.
struct HandManifest {
  uint64_t producer = 1;
  uint64_t executor = 2;
  uint8_t value_kind = 0;
  uint8_t dtype = 1;
  uint64_t graphs = 1;
  int attribute_kind = 0;  // 0: no node
  uint64_t constants = 0;
  uint64_t graph_input = 1;  // value index + 1
  bool cut_last = false;   // the last varint continues past the end
  uint64_t payload = 0;    // the attribute's payload
  bool body_refers_to_itself = false;  // graph 1 holds a node whose graph attribute is graph 1

  std::vector<std::byte> bytes() const {
    ByteWriter w;
    w.varint(5);
    for (const char* s : {"", "partita", "graph", "host.graph", "x"}) w.vstr(s);
    w.varint(producer);
    w.varint(executor);
    w.varint(0);  // metadata
    w.varint(constants);
    w.varint(1);  // modules
    w.varint(3);  // host.graph
    w.varint(0);  // no section
    w.varint(0);  // no functions
    w.varint(0);  // no uses
    w.varint(0);  // no assumptions
    w.varint(graphs);
    w.varint(0);  // graph name ""
    w.varint(1);  // values
    w.varint(4);  // 'x'
    w.u8(value_kind);
    w.u8(dtype);
    w.varint(2);  // rank 1
    w.varint(4);  // dim 3
    w.varint(0);  // not a constant
    w.varint(attribute_kind ? 1 : 0);
    if (attribute_kind) {
      w.varint(4);  // op_type 'x'
      w.varint(0);  // default domain
      w.varint(13);
      w.varint(0);  // name ""
      w.varint(1);
      w.varint(1);  // input: value 0
      w.varint(0);  // no outputs
      w.varint(1);  // one attribute
      w.varint(4);  // named 'x'
      w.u8(uint8_t(attribute_kind));
      w.varint(payload);  // payload (an int, a string index, a graph index)
    }
    w.varint(1);
    w.varint(graph_input);  // inputs: value 0
    w.varint(1);
    w.u8(cut_last ? 0x81 : 1);  // outputs: value 0
    // Graphs 1..: one value, at most one node, no inputs or outputs, no captures.
    for (uint64_t g = 1; g < graphs; ++g) {
      w.varint(0);  // name ""
      w.varint(1);  // values
      w.varint(4);
      w.u8(0);
      w.u8(1);
      w.varint(0);  // unranked
      w.varint(0);  // not a constant
      const bool self = body_refers_to_itself && g == 1;
      w.varint(self ? 1 : 0);
      if (self) {
        for (uint64_t v : {4, 0, 13, 0, 0, 0, 1, 4}) w.varint(v);  // op 'x', no inputs or outputs, 1 attribute 'x'
        w.u8(8);
        w.varint(1);
      }
      w.varint(0);  // inputs
      w.varint(0);  // outputs
      w.varint(0);  // captures
    }
    return std::move(w.bytes());
  }
};

std::string decodeError(const HandManifest& h) {
  std::vector<std::byte> b = h.bytes();
  try {
    decodeManifest(b.data(), b.size());
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArtifact) << e.what();
    return e.what();
  }
  return "";
}

#define EXPECT_DECODE_FAILS(hand, text)                                             \
  do {                                                                              \
    std::string msg_ = decodeError(hand);                                           \
    EXPECT_NE(msg_.find(text), std::string::npos) << "message: '" << msg_ << "'"; \
  } while (0)

TEST(ManifestEncoding, HandBuiltDecodes) {
  std::vector<std::byte> b = HandManifest{}.bytes();
  Manifest m = decodeManifest(b.data(), b.size());
  EXPECT_EQ(m.producer, "partita");
  EXPECT_EQ(m.executor, "graph");
  ASSERT_EQ(m.graph.values.size(), 1u);
  EXPECT_EQ(m.graph.values[0].type.str(), "float32[3]");
  EXPECT_EQ(decodeError({.attribute_kind = 1}), "");
  // The encoder's output round-trips to the same bytes.
  EXPECT_EQ(encodeManifest(m), b);
}

TEST(ManifestEncoding, StringIndexOutOfRange) {
  EXPECT_DECODE_FAILS(HandManifest{.producer = 5}, "string index 5 is out of range (the string table has 5)");
  EXPECT_DECODE_FAILS(HandManifest{.producer = 1u << 20}, "string index 1048576 is out of range");
}

TEST(ManifestEncoding, VarintPastTheEndOrTooLong) {
  HandManifest h{.cut_last = true};
  EXPECT_DECODE_FAILS(h, "malformed at byte " + std::to_string(h.bytes().size()) + ": a varint runs past the end");
  const uint8_t eleven[11] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
  ByteReader r(reinterpret_cast<const std::byte*>(eleven), sizeof eleven, "the test");
  try {
    r.varint();
    ADD_FAILURE() << "an 11-byte varint decoded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a varint overflows 64 bits"), std::string::npos) << e.what();
  }
  EXPECT_DECODE_FAILS(HandManifest{.constants = 1000}, "a count of 1000 constants that cannot fit");
}

TEST(ManifestEncoding, ValueIndexOutOfRange) {
  EXPECT_DECODE_FAILS(HandManifest{.graph_input = 2}, "graph inputs refer to value 1 of 1");
  EXPECT_DECODE_FAILS(HandManifest{.graph_input = 0}, "graph inputs refer to value -1 of 1");
  // Found by reading while fuzzing: 2^63 read as int64 and minus one overflowed.
  EXPECT_DECODE_FAILS(HandManifest{.graph_input = uint64_t(1) << 63}, "graph inputs refer to value 9223372036854775807 of 1");
  EXPECT_DECODE_FAILS(HandManifest{.graph_input = ~uint64_t(0)}, "graph inputs refer to value 18446744073709551614 of 1");
}

TEST(ManifestEncoding, SequenceValuesDecode) {
  std::vector<std::byte> b = HandManifest{.value_kind = 1}.bytes();
  Manifest m = decodeManifest(b.data(), b.size());
  EXPECT_EQ(m.graph.values[0].type.str(), "seq(float32[3])");
}

TEST(ManifestEncoding, UnsupportedKinds) {
  // An optional is followed by the kind it holds: a tensor or a sequence.
  EXPECT_DECODE_FAILS((HandManifest{.value_kind = 2, .dtype = 2}),
                      "an optional of value kind 2 (it holds a tensor or a sequence)");
  EXPECT_DECODE_FAILS(HandManifest{.value_kind = 9}, "unknown value kind 9");
  EXPECT_DECODE_FAILS(HandManifest{.dtype = 14}, "unknown dtype code 14");  // reserved: float8
  EXPECT_DECODE_FAILS(HandManifest{.dtype = 19}, "unknown dtype code 19");  // reserved: int4
  EXPECT_DECODE_FAILS(HandManifest{.attribute_kind = 8},
                      "node '' attribute 'x' refers to graph 0 of 1 (graph 0 is the entry program)");
  EXPECT_DECODE_FAILS(HandManifest{.attribute_kind = 9}, "unknown attribute kind 9");
  EXPECT_DECODE_FAILS(HandManifest{.graphs = 2}, "1 graphs are not reached from graph 0 (unused or in a cycle)");
  // An executor kind is the loader's to accept (executor_kinds.h): decoding keeps it.
  HandManifest other{.executor = 4};
  std::vector<std::byte> bytes = other.bytes();
  EXPECT_EQ(decodeManifest(bytes.data(), bytes.size()).executor, "x");
}

// Graph attributes (If/Loop/Scan bodies) must make a tree below graph 0.
TEST(ManifestEncoding, SubgraphsFormATree) {
  HandManifest ok{.graphs = 2, .attribute_kind = 8, .payload = 1};
  std::vector<std::byte> bytes = ok.bytes();
  Manifest m = decodeManifest(bytes.data(), bytes.size());
  ASSERT_EQ(m.graph.nodes.size(), 1u);
  EXPECT_NE(m.graph.nodes[0].attrs.getGraph("x"), nullptr);
  EXPECT_DECODE_FAILS((HandManifest{.graphs = 2, .attribute_kind = 8, .payload = 5}), "refers to graph 5 of 2");
  EXPECT_DECODE_FAILS((HandManifest{.graphs = 3, .attribute_kind = 8, .payload = 1}),
                      "1 graphs are not reached from graph 0");
  EXPECT_DECODE_FAILS((HandManifest{.graphs = 2, .attribute_kind = 8, .payload = 1, .body_refers_to_itself = true}),
                      "graph 1 is the body of more than one attribute");
  EXPECT_DECODE_FAILS((HandManifest{.graphs = 3, .attribute_kind = 8, .payload = 2, .body_refers_to_itself = true}),
                      "graphs are not reached from graph 0 (unused or in a cycle)");
}

TEST(ExecutorKinds, UnknownKindIsRefusedByName) {
  Artifact a;
  a.path = "later.pta";
  a.executor = "control-flow";
  runtime::ExecutorKinds kinds({runtime::graphExecutorKind()});
  EXPECT_NE(kinds.find("graph"), nullptr);
  try {
    kinds.create(a, runtime::ModuleKinds{}, runtime::RunOptions{});
    ADD_FAILURE() << "an unknown executor kind was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_EQ(std::string(e.what()),
              "'later.pta' needs executor kind 'control-flow', which this build of partita does not have");
  }
  EXPECT_THROW(runtime::ExecutorKinds({runtime::graphExecutorKind(), runtime::graphExecutorKind()}), Error);
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
// The loader checks a graph as the importer does (runtime::validateGraph): a linker
// that was handed a bad graph, or an edited manifest, is refused before anything runs.
namespace {
std::string loadError(const ir::Graph& g) {
  Buffer b = artifactBytes(g, {});
  try {
    Artifact a = readArtifact(testing::bytesOf(b), "x.pta");
    runtime::GraphExecutor exec(a.graph, a.store);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArtifact) << e.what();
    return e.what();
  }
  return "";
}
}  // namespace

TEST(ArtifactLoadValidation, NodesAreCheckedAsTheImporterChecksThem) {
  auto f32 = [](std::vector<int64_t> s) { return ir::TensorType::of(ir::DType::kFloat32, s); };
  {  // a Transpose perm out of range
    ir::Graph g;
    ir::ValueId x = g.addValue("x", f32({2, 3}));
    g.inputs.push_back(x);
    g.outputs.push_back(testing::addNode(g, "Transpose", "t", {x}, f32({3, 2})));
    g.nodes.back().attrs.setInts("perm", {1, 5});
    EXPECT_EQ(loadError(g), "the graph does not check: Transpose node 't' (making 't'): perm is not a permutation");
  }
  {  // a node whose output is recorded bigger than it is
    ir::Graph g = testing::mlpGraph(4, 4, 4);
    g.value(g.nodes[2].outputs[0]).type = f32({2, 4096});
    EXPECT_EQ(loadError(g), "value 'relu' (made by Relu node 'relu') is typed float32[2,4096] but its inputs make "
                            "float32[2,4]");
  }
  {  // another dtype
    ir::Graph g = testing::mlpGraph(4, 4, 4);
    g.value(g.nodes[2].outputs[0]).type = ir::TensorType::of(ir::DType::kFloat64, {2, 4});
    EXPECT_NE(loadError(g).find("is typed float64[2,4] but its inputs make float32[2,4]"), std::string::npos);
  }
  {  // a node with an input too many for its schema
    ir::Graph g = testing::mlpGraph(4, 4, 4);
    g.nodes[2].inputs.push_back(g.inputs[0]);
    EXPECT_EQ(loadError(g), "the graph does not check: Relu node 'relu': has 2 inputs, opset 13 allows 1");
  }
  {  // a tensor input without an element type (fuzz finding: a DynamicQuantizeLinear read
     // a zero-byte-element tensor of 32 elements as floats, past its allocation)
    ir::Graph g;
    ir::ValueId x = g.addValue("x", ir::TensorType::of(ir::DType::kUndefined, {4, 8}));
    g.inputs.push_back(x);
    g.outputs.push_back(testing::addNode(g, "Relu", "r", {x}, ir::TensorType::of(ir::DType::kUndefined, {4, 8})));
    EXPECT_EQ(loadError(g), "graph input 'x' has no element type");
  }
}

// Sequences and optionals in an artifact: written with their kinds, read back, run;
// and a hostile graph feeding a sequence to a tensor op is refused at load.
TEST(ArtifactLoadValidation, SequenceValues) {
  auto f32 = [](std::vector<int64_t> s) { return ir::TensorType::of(ir::DType::kFloat32, s); };
  auto seqGraph = [&](const char* reader, ir::TensorType out_type) {
    ir::Graph g;
    ir::ValueId x = g.addValue("x", f32({2}));
    ir::ValueId y = g.addValue("y", f32({3}));
    g.inputs = {x, y};
    ir::ValueId s =
        testing::addNode(g, "SequenceConstruct", "s", {x, y}, ir::TensorType::sequenceOf(f32({-1})));
    g.value(s).type.dims[0] = ir::Dim{};
    g.outputs.push_back(testing::addNode(g, reader, "r", {s}, std::move(out_type)));
    return g;
  };
  {  // SequenceLength of a SequenceConstruct: loads and runs
    Buffer b = artifactBytes(seqGraph("SequenceLength", ir::TensorType::of(ir::DType::kInt64, {})), {});
    Artifact a = readArtifact(testing::bytesOf(b), "x.pta");
    EXPECT_EQ(a.graph->values[2].type.str(), "seq(float32[?])");
    runtime::GraphExecutor exec(a.graph, a.store);
    auto state = exec.newState();
    std::vector<float> xs = {1, 2}, ys = {3, 4, 5};
    std::vector<ir::OwnedTensor> out = exec.run(*state, {ir::Tensor{ir::DType::kFloat32, {2}, xs.data()},
                                                         ir::Tensor{ir::DType::kFloat32, {3}, ys.data()}});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(*out[0].as<int64_t>(), 2);
  }
  // A sequence fed to Relu (recorded as if Relu took it): refused at load, by name.
  EXPECT_EQ(
      loadError(seqGraph("Relu", f32({2}))),
      "the graph does not check: Relu node 'r' (making 'r'): input 0 ('s') is a sequence of float32 tensors, "
      "but Relu takes tensors only");
  // A sequence op's output recorded as a tensor.
  EXPECT_EQ(
      loadError(seqGraph("SequenceErase", f32({2}))),
      "value 'r' (made by SequenceErase node 'r') is typed float32[2] but its inputs make seq(float32[?])");
}

}  // namespace partita::artifact
