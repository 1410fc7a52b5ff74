#include "runtime/artifact_reader.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <functional>
#include <set>

#include "ir/limits.h"
#include "runtime/manifest.h"
#include "base/mapped_file.h"
#include "partita/error.h"
#include "runtime/graph_executor.h"

namespace partita::artifact {

namespace {

class Validator {
 public:
  explicit Validator(const std::string& name) : name_(name) {}
  [[noreturn]] void fail(const std::string& msg) const {
    throw Error(ErrorCode::kInvalidArtifact, "invalid artifact '" + name_ + "': " + msg);
  }

 private:
  const std::string& name_;
};

std::string constName(const ConstantEntry& c) {
  return "constant " + std::to_string(c.id) + (c.name.empty() ? "" : " ('" + c.name + "')");
}

std::string range(uint64_t begin, uint64_t size) {
  return "[" + std::to_string(begin) + ", " + (size > UINT64_MAX - begin ? "overflow" : std::to_string(begin + size)) + ")";
}

bool isPowerOfTwo(uint64_t v) { return v && (v & (v - 1)) == 0; }

void checkHeader(const Validator& v, const Bytes& file, Header& header) {
  const std::byte* p = file.data;
  if (file.size > 0 && std::memcmp(p, kMagic.data(), std::min(file.size, kMagic.size())) != 0)
    v.fail("not a partita artifact (wrong magic bytes)");
  if (file.size < kHeaderSize)
    v.fail("truncated: " + std::to_string(file.size) + " bytes, less than the " + std::to_string(kHeaderSize) +
           "-byte header");
  header = decodeHeader(p);
  if (header.version == 1)
    v.fail("version 1 artifact: recompile with this partita (it reads format version " +
           std::to_string(kFormatVersion) + ")");
  if (header.version != kFormatVersion)
    v.fail("format version " + std::to_string(header.version) + " is not supported (this build reads version " +
           std::to_string(kFormatVersion) + ")");
  if (headerChecksum(p) != header.header_checksum) v.fail("header checksum mismatch: the header is corrupted");
  if (header.header_size != kHeaderSize || header.section_entry_size != kSectionEntrySize)
    v.fail("unexpected header or section entry size");
  if (header.file_size != file.size)
    v.fail(std::string(file.size < header.file_size ? "truncated" : "wrong size") + ": the header says " +
           std::to_string(header.file_size) + " bytes but the file has " + std::to_string(file.size));
  if (header.section_count == 0 || header.section_count > kMaxSections)
    v.fail("section count " + std::to_string(header.section_count) + " is out of range");
  uint64_t table_bytes = uint64_t(header.section_count) * kSectionEntrySize;
  if (header.section_table_offset < kHeaderSize || header.section_table_offset > file.size ||
      table_bytes > file.size - header.section_table_offset)
    v.fail("the section table " + range(header.section_table_offset, table_bytes) + " lies outside the file (" +
           std::to_string(file.size) + " bytes)");
  if (hashBytes(p + header.section_table_offset, table_bytes) != header.section_table_checksum)
    v.fail("section table checksum mismatch: the section table is corrupted");
}

void checkSections(const Validator& v, const Bytes& file, const Header& header,
                   std::vector<SectionEntry>& sections) {
  const uint64_t table_end = header.section_table_offset + uint64_t(header.section_count) * kSectionEntrySize;
  sections.resize(header.section_count);
  int manifests = 0, weights = 0;
  for (size_t i = 0; i < sections.size(); ++i) {
    SectionEntry& s = sections[i];
    s = decodeSectionEntry(file.data + header.section_table_offset + i * kSectionEntrySize);
    const std::string what = "section " + std::to_string(i);
    if (sectionKindName(s.kind) == "unknown")
      v.fail(what + " has unknown kind " + std::to_string(uint32_t(s.kind)));
    if (s.kind == SectionKind::kManifest) ++manifests;
    if (s.kind == SectionKind::kWeights) ++weights;
    if (s.offset > file.size || s.size > file.size - s.offset)
      v.fail(what + " (" + std::string(sectionKindName(s.kind)) + ") " + range(s.offset, s.size) +
             " lies outside the file (" + std::to_string(file.size) + " bytes)");
    if (s.offset < table_end)
      v.fail(what + " (" + std::string(sectionKindName(s.kind)) + ") overlaps the header or section table");
    if (!isPowerOfTwo(s.alignment) || s.offset % s.alignment != 0)
      v.fail(what + " offset " + std::to_string(s.offset) + " is not aligned to " + std::to_string(s.alignment));
  }
  if (manifests != 1 || weights != 1)
    v.fail("expected one manifest and one weight section, found " + std::to_string(manifests) + " and " +
           std::to_string(weights));
  std::vector<size_t> order(sections.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::pair(sections[a].offset, sections[a].size) < std::pair(sections[b].offset, sections[b].size);
  });
  for (size_t k = 1; k < order.size(); ++k) {
    const SectionEntry& a = sections[order[k - 1]];
    const SectionEntry& b = sections[order[k]];
    if (a.offset + a.size > b.offset && a.size && b.size)
      v.fail("sections " + std::to_string(order[k - 1]) + " " + range(a.offset, a.size) + " and " +
             std::to_string(order[k]) + " " + range(b.offset, b.size) + " overlap");
  }
  for (size_t i = 0; i < sections.size(); ++i) {
    const SectionEntry& s = sections[i];
    if (s.kind == SectionKind::kWeights) continue;  // on demand: verifyWeights
    if (hashBytes(file.data + s.offset, size_t(s.size)) != s.checksum)
      v.fail("section " + std::to_string(i) + " (" + std::string(sectionKindName(s.kind)) +
             ") checksum mismatch: the file is corrupted");
  }
}

size_t findSection(const std::vector<SectionEntry>& sections, SectionKind kind) {
  for (size_t i = 0; i < sections.size(); ++i)
    if (sections[i].kind == kind) return i;
  return sections.size();
}

void checkConstants(const Validator& v, const Artifact& a) {
  const SectionEntry& ws = a.sections[findSection(a.sections, SectionKind::kWeights)];
  std::map<std::pair<uint64_t, uint64_t>, const ConstantEntry*> extents;  // (offset, size) -> first constant
  for (size_t i = 0; i < a.constants.size(); ++i) {
    const ConstantEntry& c = a.constants[i];
    const std::string who = constName(c);
    if (c.id >= kMaxConstIds) v.fail(who + ": the id is out of range");
    if (i > 0 && a.constants[i - 1].id >= c.id) v.fail("the constant table is not in ascending id order at " + who);
    if (c.dtype == ir::DType::kUndefined) v.fail(who + " has no dtype");
    std::optional<uint64_t> checked = ir::checkedNbytes(c.dtype, c.shape);
    if (!checked) v.fail(who + " has an invalid shape " + ir::shapeStr(c.shape));
    const uint64_t dense = *checked;
    if (c.layout.empty() && dense != c.nbytes)
      v.fail(who + " of type " + std::string(ir::dtypeName(c.dtype)) + ir::shapeStr(c.shape) + " needs " +
             std::to_string(dense) + " bytes but its entry says " + std::to_string(c.nbytes));
    if (c.consumers.empty()) v.fail(who + " has no consumer");
    for (size_t k = 0; k < c.consumers.size(); ++k)
      if (c.consumers[k] >= a.modules.size() || (k > 0 && c.consumers[k - 1] >= c.consumers[k]))
        v.fail(who + " lists an invalid consumer module " + std::to_string(c.consumers[k]));
    if (c.storage == Storage::kEmbedded) {
      if (c.offset != 0) v.fail(who + " is embedded but has an offset");
      continue;
    }
    if (c.offset < ws.offset || c.offset > ws.offset + ws.size || c.nbytes > ws.offset + ws.size - c.offset) {
      std::string into;
      for (size_t s = 0; s < a.sections.size(); ++s) {
        const SectionEntry& o = a.sections[s];
        if (c.offset >= o.offset && c.offset < o.offset + o.size)
          into = " (it starts inside section " + std::to_string(s) + ", " + std::string(sectionKindName(o.kind)) + ")";
      }
      v.fail(who + " at " + range(c.offset, c.nbytes) + " lies outside the weight section " +
             range(ws.offset, ws.size) + into);
    }
    uint64_t align = tensorAlignment(c.nbytes);
    if (c.offset % align != 0)
      v.fail(who + " at offset " + std::to_string(c.offset) + " is not aligned to " + std::to_string(align));
    auto [it, inserted] = extents.emplace(std::pair(c.offset, c.nbytes), &c);
    if (!inserted && it->second->hash != c.hash)
      v.fail(who + " and " + constName(*it->second) + " share their bytes but not their hash");
  }
  // Distinct tensors never overlap.
  const ConstantEntry* prev = nullptr;
  for (const auto& [extent, c] : extents) {
    if (c->nbytes == 0) continue;
    if (prev && prev->offset + prev->nbytes > extent.first)
      v.fail(constName(*prev) + " and " + constName(*c) + " overlap in the weight section");
    prev = c;
  }
}

void checkModules(const Validator& v, const Artifact& a) {
  std::vector<int> section_users(a.sections.size(), 0);
  int host_graphs = 0;
  for (size_t m = 0; m < a.modules.size(); ++m) {
    const ModuleEntry& mod = a.modules[m];
    const std::string who = "module " + std::to_string(m) + " ('" + mod.kind + "')";
    if (mod.kind.empty()) v.fail(who + " has no kind");
    if (mod.kind == kHostGraphModule) {
      ++host_graphs;
      if (mod.section != kNoSection || mod.num_functions != 0)
        v.fail(who + " must have neither a section nor functions (its graph is in the manifest)");
    } else if (mod.section != kNoSection) {
      if (mod.section >= a.sections.size() || a.sections[mod.section].kind != SectionKind::kModule)
        v.fail(who + " refers to section " + std::to_string(mod.section) + " which is not a module section");
      ++section_users[mod.section];
    }
    for (size_t k = 0; k < mod.uses.size(); ++k) {
      const ConstUse& u = mod.uses[k];
      if (k > 0 && mod.uses[k - 1].id >= u.id)
        v.fail(who + ": its constant uses are not in ascending id order at " + std::to_string(u.id));
      const ConstantEntry* c = a.findConstant(u.id);
      if (!c) v.fail(who + " uses constant " + std::to_string(u.id) + " which is not in the constant table");
      if (u.kind != UseKind::kEmbed && c->storage != Storage::kWeights)
        v.fail(who + " needs " + constName(*c) + " from the weight store, but it is not stored");
      if ((u.kind == UseKind::kDerive) != (u.source != ir::kNoConst))
        v.fail(who + ": the use of " + constName(*c) + " has an unexpected source");
      if (mod.kind == kHostGraphModule && u.kind != UseKind::kBorrow)
        v.fail(who + " may only borrow constants");
    }
  }
  if (host_graphs != 1 || a.modules.back().kind != kHostGraphModule)
    v.fail("expected one '" + std::string(kHostGraphModule) + "' module, last in the module table; found " +
           std::to_string(host_graphs));
  for (size_t s = 0; s < a.sections.size(); ++s)
    if (a.sections[s].kind == SectionKind::kModule && section_users[s] != 1)
      v.fail("module section " + std::to_string(s) + " belongs to " + std::to_string(section_users[s]) +
             " modules instead of one");
}

// Checks the graph against the constant table and the store (the one table of
// constants at run time; the graph gets no pool of its own): what the executor reads
// must be stored, declared by the graph module, and dense with the value's type.
std::shared_ptr<ir::Graph> buildGraph(const Validator& v, const Artifact& a, ir::Graph graph) {
  const ModuleEntry* host = &a.modules.back();
  std::set<ir::ConstId> declared;
  for (const ConstUse& u : host->uses) declared.insert(u.id);
  const runtime::ConstStore& store = *a.store;

  auto checkRef = [&](ir::ConstId id, const std::string& where) {
    if (!declared.count(id))
      v.fail(where + " reads constant " + std::to_string(id) + " which the graph module does not declare");
    if (!store.layout(id).empty())
      v.fail(where + " reads constant " + std::to_string(id) + ", which is packed in layout '" + store.layout(id) +
             "' that only its module can read");
  };
  // The graph and its subgraphs (If/Loop/Scan bodies) alike: the same store, the same
  // rules. The decoder bounded their nesting (ir::kMaxGraphDepth).
  std::function<void(const ir::Graph&, const std::string&)> checkGraph = [&](const ir::Graph& g,
                                                                             const std::string& in) {
    for (const ir::Value& val : g.values) {
      if (val.isConstant()) checkRef(val.constant, in + "value '" + val.name + "'");
      if (val.type.isStatic() && !ir::checkedNbytes(val.type.dtype, val.type.staticShape()))
        v.fail(in + "value '" + val.name + "' has an impossible type " + val.type.str());
    }
    for (const ir::Node& n : g.nodes) {
      for (const auto& [name, attr] : n.attrs.all()) {
        if (attr.kind == ir::Attribute::Kind::kTensor)
          checkRef(attr.tensor, in + "node '" + n.name + "' attribute '" + name + "'");
        if (attr.kind == ir::Attribute::Kind::kGraph && attr.graph)
          checkGraph(*attr.graph, in + "subgraph '" + name + "' of node '" + n.name + "': ");
      }
      if (!runtime::isCallNode(n)) continue;
      const ir::Attribute* m = n.attrs.find("module");
      const ir::Attribute* f = n.attrs.find("function");
      bool ok = m && f && m->kind == ir::Attribute::Kind::kInt && f->kind == ir::Attribute::Kind::kInt && m->i >= 0 &&
                uint64_t(m->i) + 1 < a.modules.size() && f->i >= 0 &&
                uint64_t(f->i) < a.modules[size_t(m->i)].num_functions;
      if (!ok) v.fail(in + "call node '" + n.name + "' does not name a function of an external module");
    }
  };
  checkGraph(graph, "");
  try {
    graph.verify([&store](ir::ConstId id) -> std::optional<ir::ConstantInfo> {
      if (!store.has(id)) return std::nullopt;
      const ir::Tensor& t = store.get(id);
      return ir::ConstantInfo{t.dtype, &t.shape, !store.layout(id).empty()};
    });
  } catch (const Error& e) {
    v.fail(std::string("the graph is inconsistent: ") + e.what());
  }
  return std::make_shared<ir::Graph>(std::move(graph));
}

}  // namespace

Bytes Artifact::section(size_t index) const {
  const SectionEntry& s = sections.at(index);
  return file.slice(size_t(s.offset), size_t(s.size));
}

Bytes Artifact::moduleBlob(size_t module) const {
  const ModuleEntry& m = modules.at(module);
  if (m.section == kNoSection) return Bytes{file.owner, nullptr, 0};
  return section(m.section);
}

const ConstantEntry* Artifact::findConstant(ir::ConstId id) const {
  auto it = std::lower_bound(constants.begin(), constants.end(), id,
                             [](const ConstantEntry& c, ir::ConstId want) { return c.id < want; });
  return it != constants.end() && it->id == id ? &*it : nullptr;
}

Artifact openArtifact(const std::string& path, const OpenOptions& options) {
  return readArtifact(mapFile(path), path, options);
}

Artifact readArtifact(Bytes file, const std::string& name, const OpenOptions& options) {
  Validator v(name);
  Artifact a;
  a.path = name;
  a.file = std::move(file);
  checkHeader(v, a.file, a.header);
  checkSections(v, a.file, a.header, a.sections);

  const SectionEntry& ms = a.sections[findSection(a.sections, SectionKind::kManifest)];
  Manifest manifest;
  try {
    manifest = decodeManifest(a.file.data + ms.offset, size_t(ms.size));
  } catch (const Error& e) {
    v.fail(e.what());
  }
  a.producer = std::move(manifest.producer);
  a.executor = std::move(manifest.executor);
  a.modules = std::move(manifest.modules);
  a.constants = std::move(manifest.constants);
  checkConstants(v, a);
  checkModules(v, a);
  auto store = std::make_shared<runtime::ConstStore>();
  for (const ConstantEntry& c : a.constants)
    if (c.storage == Storage::kWeights)
      store->add(c.id, c.dtype, c.shape, a.file.slice(size_t(c.offset), size_t(c.nbytes)), c.layout);
  a.store = std::move(store);
  a.graph = buildGraph(v, a, std::move(manifest.graph));
  if (options.verify_weights) verifyWeights(a);
  return a;
}

void verifyWeights(const Artifact& a) {
  Validator v(a.path);
  const SectionEntry& ws = a.sections[findSection(a.sections, SectionKind::kWeights)];
  if (hashBytes(a.file.data + ws.offset, size_t(ws.size)) == ws.checksum) return;
  std::set<std::pair<uint64_t, uint64_t>> checked;
  for (const ConstantEntry& c : a.constants) {
    if (c.storage != Storage::kWeights || !checked.insert({c.offset, c.nbytes}).second) continue;
    if (hashBytes(a.file.data + c.offset, size_t(c.nbytes)) != c.hash)
      v.fail("the weights of " + constName(c) + " are corrupted (checksum mismatch)");
  }
  v.fail("the weight section is corrupted (checksum mismatch in the padding between tensors)");
}

std::vector<std::shared_ptr<const runtime::RuntimeModule>> loadModules(const Artifact& a, const runtime::ModuleKinds& kinds, int threads,
                                                                       size_t shape_cache) {
  std::vector<std::shared_ptr<const runtime::RuntimeModule>> loaded;
  const size_t entries = runtime::shapeCacheEntries(shape_cache);
  for (size_t m = 0; m + 1 < a.modules.size(); ++m) {
    const ModuleEntry& mod = a.modules[m];
    loaded.push_back(
        kinds.load(mod.kind, {a.moduleBlob(m), a.store.get(), mod.uses, threads, mod.assumptions, entries}));
  }
  return loaded;
}

LinkReport byteAccounting(const Artifact& a) {
  LinkReport r;
  r.file_bytes = a.file.size;
  std::set<std::pair<uint64_t, uint64_t>> seen;
  for (const ConstantEntry& c : a.constants) {
    if (c.storage == Storage::kEmbedded) {
      r.embedded_bytes += c.nbytes;
      continue;
    }
    ++r.constants;
    r.weight_bytes += c.nbytes;
    if (seen.insert({c.offset, c.nbytes}).second) {
      ++r.distinct_constants;
      r.distinct_weight_bytes += c.nbytes;
    }
  }
  r.metadata_bytes = a.header.section_table_offset + uint64_t(a.sections.size()) * kSectionEntrySize;
  for (const SectionEntry& s : a.sections) {
    if (s.kind == SectionKind::kManifest) r.metadata_bytes += s.size;
    if (s.kind == SectionKind::kModule) r.module_bytes += s.size;
    if (s.kind == SectionKind::kWeights) r.weight_section_bytes = s.size;
  }
  r.weight_padding_bytes = r.weight_section_bytes - r.distinct_weight_bytes;
  r.padding_bytes = r.file_bytes - r.metadata_bytes - r.module_bytes - r.distinct_weight_bytes;
  return r;
}

}  // namespace partita::artifact
