// Node attributes. Tensor-valued attributes hold a ConstId into the graph's constant
// pool, never bytes. Graph-valued attributes (the bodies of If, Loop and Scan) hold a
// nested ir::Graph whose constants are in the same pool (docs/control_flow.md).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/constant_pool.h"

namespace partita::ir {

class Graph;

struct Attribute {
  // Stable numbering: written into artifacts.
  enum class Kind : uint8_t { kInt = 1, kFloat = 2, kString = 3, kInts = 4, kFloats = 5, kStrings = 6, kTensor = 7,
                            kGraph = 8 };
  Kind kind = Kind::kInt;
  int64_t i = 0;
  float f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<std::string> strings;
  ConstId tensor = kNoConst;
  std::shared_ptr<Graph> graph;  // kGraph: a subgraph, owned by the node (shared by copies of it)

  bool operator==(const Attribute&) const = default;
};

// Attributes by name, kept sorted so printing and serialisation are deterministic.
class AttributeMap {
 public:
  bool has(const std::string& name) const { return map_.count(name) != 0; }
  const Attribute* find(const std::string& name) const;
  void set(const std::string& name, Attribute a) { map_[name] = std::move(a); }
  void erase(const std::string& name) { map_.erase(name); }

  // Typed getters: the default when absent; Error(kInvalidModel) on a kind mismatch.
  int64_t getInt(const std::string& name, int64_t def) const;
  float getFloat(const std::string& name, float def) const;
  std::string getString(const std::string& name, const std::string& def) const;
  std::vector<int64_t> getInts(const std::string& name, std::vector<int64_t> def = {}) const;
  std::vector<float> getFloats(const std::string& name, std::vector<float> def = {}) const;
  std::vector<std::string> getStrings(const std::string& name) const;
  ConstId getTensor(const std::string& name) const;  // kNoConst when absent
  const Graph* getGraph(const std::string& name) const;  // nullptr when absent

  void setInt(const std::string& name, int64_t v);
  void setFloat(const std::string& name, float v);
  void setString(const std::string& name, std::string v);
  void setInts(const std::string& name, std::vector<int64_t> v);
  void setFloats(const std::string& name, std::vector<float> v);
  void setTensor(const std::string& name, ConstId id);
  void setGraph(const std::string& name, std::shared_ptr<Graph> g);

  const std::map<std::string, Attribute>& all() const { return map_; }
  bool operator==(const AttributeMap&) const = default;

 private:
  std::map<std::string, Attribute> map_;
};

}  // namespace partita::ir
