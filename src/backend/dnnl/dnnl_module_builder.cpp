#include "backend/dnnl/dnnl_module_builder.h"

#include "backend/dnnl/dnnl_module.h"
#include "partita/error.h"

namespace partita::dnnl_backend {

void internal(const std::string& msg) { throw Error(ErrorCode::kInternal, "dnnl backend: " + msg); }

Arg ModuleBuilder::borrow(int key, ir::ConstId id, const memory::desc& md) {
  if (md.get_size() != g_.constants.get(id).nbytes()) internal("borrowed constant size mismatch");
  uses_.borrow(id);
  return Arg{key, ArgSource::kConstant, id, md, false};
}

Arg ModuleBuilder::embed(int key, const void* data, const memory::desc& md,
                         const std::vector<ir::ConstId>& absorbed) {
  uint64_t offset = uses_.embed(data, md.get_size(), absorbed);
  return Arg{key, ArgSource::kEmbedded, offset, md, false};
}

ir::ConstId ModuleBuilder::derive(ir::ConstId source, const memory::desc& from, const void* data,
                                  const memory::desc& to, bool same_values_as_source) {
  const std::string layout = layoutTag(to);
  const std::pair<ir::ConstId, std::string> key{source, layoutString(to) + "|" + layoutString(from)};
  if (same_values_as_source) {
    auto it = derived_.find(key);
    if (it != derived_.end()) return it->second;
  }
  std::vector<std::byte> bytes(to.get_size(), std::byte{0});  // padding stays zero
  const dnnl::engine& eng = cpuEngine();
  dnnl::memory src(from, eng, const_cast<void*>(data));
  dnnl::memory dst(to, eng, bytes.data());
  dnnl::stream stream(eng);
  dnnl::reorder(src, dst).execute(stream, src, dst);
  stream.wait();
  // The shape of a derived constant is the padded shape of its layout: numel * 4 == bytes.
  std::vector<int64_t> shape(to.data.padded_dims, to.data.padded_dims + to.data.ndims);
  if (size_t(ir::shapeNumel(shape)) * sizeof(float) != bytes.size())
    shape = {int64_t(bytes.size() / sizeof(float))};
  // The source's name: the manifest's string table then stores it once, and the
  // layout column tells the two apart.
  std::string name = g_.constants.get(source).name;
  ir::ConstId id = uses_.derive(source, std::move(name), ir::DType::kFloat32, std::move(shape),
                                Bytes::fromVector(std::move(bytes)), layout);
  if (same_values_as_source) derived_[key] = id;
  return id;
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
