#include "ir/attribute.h"

#include "partita/error.h"

namespace partita::ir {

namespace {
const Attribute* expect(const AttributeMap& m, const std::string& name, Attribute::Kind kind) {
  const Attribute* a = m.find(name);
  if (a && a->kind != kind)
    throw Error(ErrorCode::kInvalidModel, "attribute '" + name + "' has the wrong kind");
  return a;
}
}  // namespace

const Attribute* AttributeMap::find(const std::string& name) const {
  auto it = map_.find(name);
  return it == map_.end() ? nullptr : &it->second;
}

int64_t AttributeMap::getInt(const std::string& name, int64_t def) const {
  const Attribute* a = expect(*this, name, Attribute::Kind::kInt);
  return a ? a->i : def;
}
float AttributeMap::getFloat(const std::string& name, float def) const {
  const Attribute* a = expect(*this, name, Attribute::Kind::kFloat);
  return a ? a->f : def;
}
std::string AttributeMap::getString(const std::string& name, const std::string& def) const {
  const Attribute* a = expect(*this, name, Attribute::Kind::kString);
  return a ? a->s : def;
}
std::vector<int64_t> AttributeMap::getInts(const std::string& name, std::vector<int64_t> def) const {
  const Attribute* a = expect(*this, name, Attribute::Kind::kInts);
  return a ? a->ints : def;
}
std::vector<float> AttributeMap::getFloats(const std::string& name, std::vector<float> def) const {
  const Attribute* a = expect(*this, name, Attribute::Kind::kFloats);
  return a ? a->floats : def;
}
std::vector<std::string> AttributeMap::getStrings(const std::string& name) const {
  const Attribute* a = expect(*this, name, Attribute::Kind::kStrings);
  return a ? a->strings : std::vector<std::string>{};
}
ConstId AttributeMap::getTensor(const std::string& name) const {
  const Attribute* a = expect(*this, name, Attribute::Kind::kTensor);
  return a ? a->tensor : kNoConst;
}

const Graph* AttributeMap::getGraph(const std::string& name) const {
  const Attribute* a = expect(*this, name, Attribute::Kind::kGraph);
  return a ? a->graph.get() : nullptr;
}

void AttributeMap::setInt(const std::string& name, int64_t v) {
  Attribute a; a.kind = Attribute::Kind::kInt; a.i = v; set(name, std::move(a));
}
void AttributeMap::setFloat(const std::string& name, float v) {
  Attribute a; a.kind = Attribute::Kind::kFloat; a.f = v; set(name, std::move(a));
}
void AttributeMap::setString(const std::string& name, std::string v) {
  Attribute a; a.kind = Attribute::Kind::kString; a.s = std::move(v); set(name, std::move(a));
}
void AttributeMap::setInts(const std::string& name, std::vector<int64_t> v) {
  Attribute a; a.kind = Attribute::Kind::kInts; a.ints = std::move(v); set(name, std::move(a));
}
void AttributeMap::setFloats(const std::string& name, std::vector<float> v) {
  Attribute a; a.kind = Attribute::Kind::kFloats; a.floats = std::move(v); set(name, std::move(a));
}
void AttributeMap::setTensor(const std::string& name, ConstId id) {
  Attribute a; a.kind = Attribute::Kind::kTensor; a.tensor = id; set(name, std::move(a));
}
void AttributeMap::setGraph(const std::string& name, std::shared_ptr<Graph> g) {
  Attribute a; a.kind = Attribute::Kind::kGraph; a.graph = std::move(g); set(name, std::move(a));
}

}  // namespace partita::ir
