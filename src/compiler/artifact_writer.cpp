#include "compiler/artifact_writer.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <unordered_map>

#include <xxhash.h>

#include "base/atomic_file.h"
#include "compiler/manifest_encode.h"
#include "runtime/manifest.h"
#include "kernels/op_registry.h"
#include "partita/error.h"
#include "runtime/graph_executor.h"

namespace partita::artifact {

namespace {

constexpr const char* kProducer = "partita 0.1.0";

// One distinct tensor in the weight section.
struct Extent {
  const ir::Constant* constant = nullptr;  // the first constant with these bytes
  uint64_t hash = 0;
  uint64_t offset = 0;  // from the start of the weight section
  bool hashed = false;  // else the hash is computed as the bytes are written
};

// Every node is a host op or a call of an existing module function.
// Call nodes name a function that exists (host kernels were checked after
// partitioning: backend::checkHostKernels).
void checkCalls(const ir::Graph& graph, const std::vector<backend::ModuleImage>& modules) {
  for (const ir::Node& n : graph.nodes) {
    for (const auto& [name, a] : n.attrs.all())  // bodies of If, Loop and Scan call modules too
      if (a.kind == ir::Attribute::Kind::kGraph && a.graph) checkCalls(*a.graph, modules);
    if (!runtime::isCallNode(n)) continue;
    int64_t m = n.attrs.getInt("module", -1), f = n.attrs.getInt("function", -1);
    if (m < 0 || size_t(m) >= modules.size() || f < 0 || uint64_t(f) >= modules[size_t(m)].num_functions)
      throw Error(ErrorCode::kInternal, "call node '" + n.name + "' calls function " + std::to_string(f) +
                                            " of module " + std::to_string(m) + ", which does not exist");
  }
}

// The constants the graph executor reads at run time: constant values some node or
// graph output reads, and tensor attributes, in the graph and its subgraphs (If, Loop
// and Scan bodies read the same store).
void collectGraphConstants(const ir::Graph& graph, std::set<ir::ConstId>& ids) {
  std::vector<int> uses = graph.useCounts();
  for (size_t v = 0; v < graph.values.size(); ++v)
    if (graph.values[v].isConstant() && uses[v] > 0) ids.insert(graph.values[v].constant);
  for (const ir::Node& n : graph.nodes)
    for (const auto& [name, a] : n.attrs.all()) {
      if (a.kind == ir::Attribute::Kind::kTensor) ids.insert(a.tensor);
      if (a.kind == ir::Attribute::Kind::kGraph && a.graph) collectGraphConstants(*a.graph, ids);
    }
}
std::vector<ir::ConstId> graphConstants(const ir::Graph& graph) {
  std::set<ir::ConstId> ids;
  collectGraphConstants(graph, ids);
  return {ids.begin(), ids.end()};
}

// Constant values nothing reads are detached (in subgraphs too, which are copied for
// that) so the executor does not ask the store for constants that were not stored.
void detachUnreadConstants(ir::Graph& g) {
  std::vector<int> uses = g.useCounts();
  for (size_t v = 0; v < g.values.size(); ++v)
    if (uses[v] == 0) g.values[v].constant = ir::kNoConst;
  for (ir::Node& n : g.nodes)
    for (const auto& [name, a] : n.attrs.all())
      if (a.kind == ir::Attribute::Kind::kGraph && a.graph) {
        std::shared_ptr<ir::Graph> copy = a.graph->clone();
        detachUnreadConstants(*copy);
        n.attrs.setGraph(name, std::move(copy));
      }
}

// External modules first (index = the Call nodes' "module"), the graph executor last.
std::vector<ModuleEntry> moduleTable(const ir::Graph& graph, const std::vector<backend::ModuleImage>& modules) {
  const size_t npool = graph.constants.size();
  std::vector<ModuleEntry> table;
  uint32_t section = 1;  // section 0 is the manifest
  for (const backend::ModuleImage& image : modules) {
    if (image.kind.empty() || image.kind == kHostGraphModule)
      throw Error(ErrorCode::kInternal, "a module needs a kind of its own, not '" + image.kind + "'");
    ModuleEntry e{image.kind, section++, image.num_functions, image.uses, image.assumptions};
    std::sort(e.uses.begin(), e.uses.end(), [](const ConstUse& a, const ConstUse& b) { return a.id < b.id; });
    for (size_t i = 0; i < e.uses.size(); ++i) {
      const ConstUse& u = e.uses[i];
      const std::string who = "module '" + image.kind + "'";
      if (u.id >= npool)
        throw Error(ErrorCode::kInternal, who + " uses constant " + std::to_string(u.id) + " which nobody provides");
      if (i > 0 && e.uses[i - 1].id == u.id)
        throw Error(ErrorCode::kInternal, who + " declares constant " + std::to_string(u.id) + " twice");
      if (u.kind != UseKind::kBorrow && u.kind != UseKind::kDerive && u.kind != UseKind::kEmbed)
        throw Error(ErrorCode::kInternal, who + ": constant " + std::to_string(u.id) + " has an unknown use kind");
      if ((u.kind == UseKind::kDerive) != (u.source != ir::kNoConst))
        throw Error(ErrorCode::kInternal,
                    who + ": constant " + std::to_string(u.id) + ": a derive use, and only it, names a source");
    }
    table.push_back(std::move(e));
  }
  ModuleEntry host{std::string(kHostGraphModule), kNoSection, 0, {}, {}};
  for (ir::ConstId id : graphConstants(graph)) host.uses.push_back({id, UseKind::kBorrow, ir::kNoConst});
  table.push_back(std::move(host));
  return table;
}

// Places each extent at its alignment (format.h tensorAlignment): page-aligned tensors
// first, then the rest by decreasing alignment and size (ties by ID, so the layout is
// deterministic), each into the first gap that alignment left before it or at the end.
// Sizes that are multiples of their alignment then pack with no padding at all.
// Returns the section size.
uint64_t layoutWeights(std::vector<Extent>& extents) {
  struct Gap {
    uint64_t begin, end;
  };
  std::vector<size_t> order(extents.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto key = [&](size_t i) {
    uint64_t n = extents[i].constant->nbytes();
    return std::tuple(tensorAlignment(n), n, -int64_t(extents[i].constant->id));
  };
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return key(a) > key(b); });
  std::vector<Gap> gaps;
  uint64_t end = 0;
  for (size_t i : order) {
    Extent& e = extents[i];
    uint64_t n = e.constant->nbytes();
    uint64_t align = tensorAlignment(n);
    bool placed = false;
    for (Gap& g : gaps) {
      uint64_t at = alignUp(g.begin, align);
      if (at + n > g.end) continue;
      e.offset = at;
      g.begin = at + n;
      placed = true;
      break;
    }
    if (placed) continue;
    uint64_t at = alignUp(end, align);
    if (at > end) gaps.push_back({end, at});
    e.offset = at;
    end = at + n;
  }
  return end;
}

std::vector<std::byte> encodeTable(Header& header, const std::vector<SectionEntry>& sections) {
  std::vector<std::byte> out(kHeaderSize + sections.size() * kSectionEntrySize);
  for (size_t i = 0; i < sections.size(); ++i)
    encodeSectionEntry(sections[i], out.data() + kHeaderSize + i * kSectionEntrySize);
  header.section_count = uint32_t(sections.size());
  header.section_table_offset = kHeaderSize;
  header.section_table_checksum = hashBytes(out.data() + kHeaderSize, sections.size() * kSectionEntrySize);
  encodeHeader(header, out.data());
  return out;
}

class HashState {
 public:
  HashState() : state_(XXH3_createState()) {
    if (!state_) throw std::bad_alloc();
    XXH3_64bits_reset(state_);
  }
  ~HashState() { XXH3_freeState(state_); }
  HashState(const HashState&) = delete;
  HashState& operator=(const HashState&) = delete;
  void update(const void* p, size_t n) { XXH3_64bits_update(state_, p, n); }
  uint64_t digest() const { return XXH3_64bits_digest(state_); }

 private:
  XXH3_state_t* state_;
};

// The extents (placed by layoutWeights) in file order.
std::vector<Extent*> inFileOrder(std::vector<Extent>& extents) {
  std::vector<Extent*> order;
  for (Extent& e : extents) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const Extent* a, const Extent* b) { return a->offset < b->offset; });
  return order;
}

// The weight section's checksum (its bytes up to the end of the last extent, the
// padding between extents zero), filling in the extent hashes not computed yet; in
// chunks small enough that hashing a chunk twice (the section, and the tensor) reads
// it from memory once.
uint64_t hashWeights(std::vector<Extent>& extents) {
  constexpr uint64_t kChunk = 256 * 1024;
  static const std::byte kZeros[kPageAlignment] = {};
  HashState section;
  uint64_t at = 0;
  for (Extent* e : inFileOrder(extents)) {
    while (at < e->offset) {
      size_t n = size_t(std::min<uint64_t>(e->offset - at, sizeof kZeros));
      section.update(kZeros, n);
      at += n;
    }
    const Bytes& b = e->constant->bytes;
    HashState tensor;
    for (uint64_t done = 0; done < b.size; done += kChunk) {
      const size_t n = size_t(std::min<uint64_t>(b.size - done, kChunk));
      section.update(b.data + done, n);
      if (!e->hashed) tensor.update(b.data + done, n);
    }
    if (!e->hashed) {
      e->hash = tensor.digest();
      e->hashed = true;
    }
    at = e->offset + b.size;
  }
  return section.digest();
}

}  // namespace

LinkReport writeArtifact(const ir::Graph& graph, const std::string& path) {
  return writeArtifact(graph, {}, path);
}

LinkReport writeArtifact(const ir::Graph& graph, const std::vector<backend::ModuleImage>& modules,
                         const std::string& path, const std::vector<SourceFile>& keep) {
  graph.verify();
  checkCalls(graph, modules);
  const ir::ConstantPool& pool = graph.constants;
  if (pool.size() > kMaxConstIds)
    throw Error(ErrorCode::kUnsupported, "the graph has " + std::to_string(pool.size()) +
                                             " constants; an artifact holds at most " + std::to_string(kMaxConstIds));

  Manifest manifest;
  manifest.producer = kProducer;
  manifest.modules = moduleTable(graph, modules);

  // What each constant is to the file: needed (stored), embedded only, or nothing.
  enum Need : uint8_t { kUnneeded, kEmbedOnly, kNeeded };
  std::vector<Need> need(pool.size(), kUnneeded);
  std::vector<std::vector<uint32_t>> consumers(pool.size());
  for (size_t m = 0; m < manifest.modules.size(); ++m)
    for (const ConstUse& u : manifest.modules[m].uses) {
      consumers[u.id].push_back(uint32_t(m));
      need[u.id] = std::max(need[u.id], u.kind == UseKind::kEmbed ? kEmbedOnly : kNeeded);
    }

  // Distinct tensors. Only constants that share dtype, shape, layout and size with
  // another can be equal; those are hashed now and confirmed byte-equal. The others
  // are hashed with the weight section (hashWeights), reading each weight byte once there.
  std::vector<Extent> extents;
  std::vector<size_t> extent_of(pool.size(), 0);
  std::vector<uint64_t> hash_of(pool.size(), 0);
  LinkReport report;
  std::map<std::tuple<ir::DType, std::vector<int64_t>, std::string, size_t>, std::vector<ir::ConstId>> groups;
  size_t empty_extent = SIZE_MAX;  // empty tensors all share one (empty) extent
  for (ir::ConstId id = 0; id < pool.size(); ++id) {
    const ir::Constant& c = pool.get(id);
    if (need[id] == kEmbedOnly) {
      hash_of[id] = ir::ConstantPool::contentHash(c);
      report.embedded_bytes += c.nbytes();
    }
    if (need[id] != kNeeded) continue;
    ++report.constants;
    report.weight_bytes += c.nbytes();
    groups[{c.dtype, c.shape, c.layout, c.nbytes()}].push_back(id);
  }
  for (const auto& [key, ids] : groups) {  // in key order; extents get ID order below
    std::unordered_multimap<uint64_t, size_t> by_hash;
    for (ir::ConstId id : ids) {
      const ir::Constant& c = pool.get(id);
      if (c.nbytes() == 0 && empty_extent != SIZE_MAX) {
        extent_of[id] = empty_extent;
        continue;
      }
      bool hashed = ids.size() > 1;
      if (hashed) hash_of[id] = ir::ConstantPool::contentHash(c);
      size_t found = SIZE_MAX;
      auto [lo, hi] = by_hash.equal_range(hash_of[id]);
      for (auto it = lo; hashed && it != hi && found == SIZE_MAX; ++it)
        if (ir::ConstantPool::identical(*extents[it->second].constant, c)) found = it->second;
      if (found == SIZE_MAX) {
        found = extents.size();
        extents.push_back({&c, hash_of[id], 0, hashed});
        if (hashed) by_hash.emplace(hash_of[id], found);
        if (c.nbytes() == 0) empty_extent = found;
        report.distinct_weight_bytes += c.nbytes();
      }
      extent_of[id] = found;
    }
  }
  // Deterministic placement in order of the first constant of each extent.
  {
    std::vector<size_t> order(extents.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return extents[a].constant->id < extents[b].constant->id; });
    std::vector<size_t> rank(extents.size());
    std::vector<Extent> sorted;
    for (size_t i = 0; i < order.size(); ++i) {
      rank[order[i]] = i;
      sorted.push_back(extents[order[i]]);
    }
    extents = std::move(sorted);
    for (ir::ConstId id = 0; id < pool.size(); ++id)
      if (need[id] == kNeeded) extent_of[id] = rank[extent_of[id]];
  }
  const uint64_t weights_size = layoutWeights(extents);
  uint64_t weights_align = 1;
  for (const Extent& e : extents) weights_align = std::max(weights_align, tensorAlignment(e.constant->nbytes()));

  // The graph as the executor will see it; constant values nothing reads are detached
  // so the executor does not ask the store for constants that were not stored.
  ir::Graph& g = manifest.graph;
  g.name = graph.name;
  g.values = graph.values;
  g.nodes = graph.nodes;
  g.inputs = graph.inputs;
  g.outputs = graph.outputs;
  detachUnreadConstants(g);

  // File layout: header, section table, manifest, module sections, weight section.
  // Constant offsets are absolute, and the manifest's size does not depend on them
  // (fixed-width fields), so encode once to size it and once more with real offsets.
  const size_t nsections = 2 + modules.size();
  auto encode = [&](uint64_t weights_offset) {
    manifest.constants.clear();
    for (ir::ConstId id = 0; id < pool.size(); ++id) {
      if (need[id] == kUnneeded) continue;
      const ir::Constant& c = pool.get(id);
      ConstantEntry e{id, c.name, c.dtype, c.shape, c.layout, Storage::kEmbedded, 0, c.nbytes(), hash_of[id],
                      consumers[id]};
      if (need[id] == kNeeded) {
        e.storage = Storage::kWeights;
        e.offset = weights_offset + extents[extent_of[id]].offset;
      }
      manifest.constants.push_back(std::move(e));
    }
    return encodeManifest(manifest);
  };
  std::vector<SectionEntry> sections(nsections);
  uint64_t pos = kHeaderSize + nsections * kSectionEntrySize;
  sections[0] = {SectionKind::kManifest, 8, alignUp(pos, 8), encode(0).size(), 0};
  pos = sections[0].offset + sections[0].size;
  for (size_t m = 0; m < modules.size(); ++m) {
    SectionEntry& s = sections[1 + m];
    s = {SectionKind::kModule, uint32_t(kTensorAlignment), alignUp(pos, kTensorAlignment), modules[m].blob.size(),
         hashBytes(modules[m].blob.data(), modules[m].blob.size())};
    pos = s.offset + s.size;
    report.module_bytes += s.size;
  }
  SectionEntry& ws = sections.back();
  ws = {SectionKind::kWeights, uint32_t(weights_align), alignUp(pos, weights_align), weights_size, 0};
  const uint64_t file_size = ws.offset + ws.size;

  // Every hash first: the header and manifest, written first, hold them.
  ws.checksum = hashWeights(extents);
  for (ir::ConstId id = 0; id < pool.size(); ++id)
    if (need[id] == kNeeded) hash_of[id] = extents[extent_of[id]].hash;
  std::vector<std::byte> manifest_bytes = encode(ws.offset);
  if (manifest_bytes.size() != sections[0].size)
    throw Error(ErrorCode::kInternal, "manifest size changed between encodings");
  sections[0].checksum = hashBytes(manifest_bytes.data(), manifest_bytes.size());
  Header header;
  header.file_size = file_size;
  std::vector<std::byte> head = encodeTable(header, sections);

  // Then the file front to back, in whole 2 MiB blocks (BlockWriter).
  AtomicFile file(path, keep);
  BlockWriter out(file, file_size);
  out.put(0, head.data(), head.size());
  out.put(sections[0].offset, manifest_bytes.data(), manifest_bytes.size());
  for (size_t m = 0; m < modules.size(); ++m)
    out.put(sections[1 + m].offset, modules[m].blob.data(), modules[m].blob.size());
  for (const Extent* e : inFileOrder(extents))
    out.put(ws.offset + e->offset, e->constant->bytes.data, e->constant->bytes.size);
  out.finish();
  file.commit();

  report.file_bytes = file_size;
  report.weight_section_bytes = ws.size;
  report.weight_padding_bytes = ws.size - report.distinct_weight_bytes;
  report.metadata_bytes = head.size() + manifest_bytes.size();
  report.padding_bytes = file_size - report.metadata_bytes - report.module_bytes - report.distinct_weight_bytes;
  report.distinct_constants = extents.size();
  return report;
}

}  // namespace partita::artifact
