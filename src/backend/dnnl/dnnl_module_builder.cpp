#include "backend/dnnl/dnnl_module_builder.h"

#include "backend/dnnl/dnnl_module.h"
#include "partita/error.h"

namespace partita::dnnl_backend {

void ModuleBuilder::beginPolymorphic(const ir::Graph& g, PolyFunction& poly) {
  g_ = &g;
  poly_ = &poly;
}

void ModuleBuilder::endPolymorphic() {
  g_ = &module_graph_;
  poly_ = nullptr;
}

ir::ConstId ModuleBuilder::global(ir::ConstId id) const {
  if (!poly_) return id;
  if (id >= poly_->global.size()) internal("region constant " + std::to_string(id) + " out of range");
  return poly_->global[id];
}

Arg ModuleBuilder::borrow(int key, ir::ConstId id, const memory::desc& md) {
  if (md.get_size() != g_->constants.get(id).nbytes()) internal("borrowed constant size mismatch");
  uses_.borrow(global(id));
  return Arg{key, ArgSource::kConstant, global(id), md, false};
}

Arg ModuleBuilder::embed(int key, const void* data, const memory::desc& md,
                         const std::vector<ir::ConstId>& absorbed) {
  std::vector<ir::ConstId> globals;
  for (ir::ConstId id : absorbed) globals.push_back(global(id));
  uint64_t offset = uses_.embed(data, md.get_size(), globals);
  if (poly_) poly_->embedded.push_back({globals, md, offset});
  return Arg{key, ArgSource::kEmbedded, offset, md, false};
}

ir::ConstId ModuleBuilder::derive(ir::ConstId local_source, const memory::desc& from, const void* data,
                                  const memory::desc& to, bool same_values_as_source) {
  const ir::ConstId source = global(local_source);
  const std::string layout = layoutTag(to);
  const std::pair<ir::ConstId, std::string> key{source, layoutString(to) + "|" + layoutString(from)};
  ir::ConstId id = ir::kNoConst;
  if (same_values_as_source) {
    auto it = derived_.find(key);
    if (it != derived_.end()) id = it->second;
  }
  if (id == ir::kNoConst) {
    std::vector<std::byte> bytes(to.get_size(), std::byte{0});  // padding stays zero
    const dnnl::engine& eng = cpuEngine();
    dnnl::memory src(from, eng, const_cast<void*>(data));
    dnnl::memory dst(to, eng, bytes.data());
    dnnl::stream stream(eng);
    dnnl::reorder(src, dst).execute(stream, src, dst);
    stream.wait();
    // The shape of a derived constant is the padded shape of its layout: numel * 4 == bytes
    // (int8 weights: numel == bytes, with oneDNN's compensation after them).
    const ir::DType container = (to.data.data_type == dnnl_s8 || to.data.data_type == dnnl_u8) ? ir::DType::kInt8
                                : to.data.data_type == dnnl_f16                                 ? ir::DType::kFloat16
                                                                                                : ir::DType::kFloat32;
    const size_t element = ir::dtypeSize(container);
    std::vector<int64_t> shape(to.data.padded_dims, to.data.padded_dims + to.data.ndims);
    if (size_t(ir::shapeNumel(shape)) * element != bytes.size()) shape = {int64_t(bytes.size() / element)};
    // The source's name: the manifest's string table then stores it once, and the
    // layout column tells the two apart.
    std::string name = module_graph_.constants.get(source).name;
    id = uses_.derive(source, std::move(name), container, std::move(shape),
                      Bytes::fromVector(std::move(bytes)), layout);
    if (same_values_as_source) derived_[key] = id;
  }
  if (poly_) poly_->derived.push_back({source, same_values_as_source, to, id});
  return id;
}

void ModuleBuilder::chosenWeights(ir::ConstId source, bool folded, const memory::desc& md) {
  if (poly_) poly_->weights.push_back({global(source), folded, md});
}

std::optional<memory::desc> ModuleBuilder::storedWeights(ir::ConstId source, bool folded) {
  auto it = pins_.find({global(source), folded});
  if (it == pins_.end()) return std::nullopt;
  return it->second;
}

backend::ModuleImage ModuleBuilder::finish() {
  program_.embedded = uses_.takeEmbedded(/*padded_end=*/false);
  backend::ModuleImage image;
  image.kind = kModuleKind;
  image.blob = writeProgram(program_);
  image.uses = uses_.uses();
  image.num_functions = uint32_t(program_.functions.size());
  return image;
}

}  // namespace partita::dnnl_backend
