#include "numpy_tensor.h"

#include <array>
#include <memory>

#include "partita/error.h"

namespace partita::python {

namespace {

constexpr size_t kDTypes = 14;  // DType values 0..13

struct DTypeNames {
  DType dtype;
  const char* numpy;  // numpy's name, nullptr when numpy has none
  const char* ort;    // ONNX's name in ORT's type strings
};
constexpr DTypeNames kNames[] = {
    {DType::kFloat32, "float32", "float"},   {DType::kFloat16, "float16", "float16"},
    {DType::kBFloat16, nullptr, "bfloat16"}, {DType::kFloat64, "float64", "double"},
    {DType::kInt8, "int8", "int8"},          {DType::kInt16, "int16", "int16"},
    {DType::kInt32, "int32", "int32"},       {DType::kInt64, "int64", "int64"},
    {DType::kUInt8, "uint8", "uint8"},       {DType::kUInt16, "uint16", "uint16"},
    {DType::kUInt32, "uint32", "uint32"},    {DType::kUInt64, "uint64", "uint64"},
    {DType::kBool, "bool", "bool"},
};

const DTypeNames* namesOf(DType t) {
  for (const DTypeNames& n : kNames)
    if (n.dtype == t) return &n;
  return nullptr;
}

// numpy dtype objects by DType, made once at import (numpyDtypesInit) and kept for the
// life of the process.
std::array<PyObject*, kDTypes> g_numpy{};

// The partita dtype of a numpy array's elements, from numpy's kind and item size;
// kUndefined when there is none (complex, strings, objects, records, datetimes).
DType dtypeOfNumpy(char kind, int64_t itemsize) {
  switch (kind) {
    case 'f': return itemsize == 2 ? DType::kFloat16 : itemsize == 4 ? DType::kFloat32 : itemsize == 8 ? DType::kFloat64 : DType::kUndefined;
    case 'i': return itemsize == 1 ? DType::kInt8 : itemsize == 2 ? DType::kInt16 : itemsize == 4 ? DType::kInt32 : itemsize == 8 ? DType::kInt64 : DType::kUndefined;
    case 'u': return itemsize == 1 ? DType::kUInt8 : itemsize == 2 ? DType::kUInt16 : itemsize == 4 ? DType::kUInt32 : itemsize == 8 ? DType::kUInt64 : DType::kUndefined;
    case 'b': return itemsize == 1 ? DType::kBool : DType::kUndefined;
    default: return DType::kUndefined;
  }
}

}  // namespace

std::string pyTypeName(py::handle h) { return py::str(py::type::handle_of(h).attr("__name__")); }

void numpyDtypesInit() {
  for (const DTypeNames& n : kNames)
    if (n.numpy) g_numpy[size_t(n.dtype)] = py::dtype(n.numpy).release().ptr();
}

py::dtype numpyDtype(DType t, const std::string& what) {
  const size_t i = size_t(t);
  if (i < kDTypes && g_numpy[i]) return py::reinterpret_borrow<py::dtype>(g_numpy[i]);
  throw Error(ErrorCode::kUnsupported,
              what + " is " + std::string(dtypeName(t)) + ", which numpy has no type for");
}

std::string ortTypeName(DType t) {
  const DTypeNames* n = namesOf(t);
  return std::string("tensor(") + (n ? n->ort : "undefined") + ")";
}

CopyStats& copyStats() {
  static CopyStats stats;
  return stats;
}

Feeds readFeeds(py::handle feed) {
  if (!PyDict_Check(feed.ptr()))
    throw Error(ErrorCode::kInvalidArgument,
                "the feed must be a dict of input name -> numpy.ndarray, not " + pyTypeName(feed));
  Feeds f;
  const size_t n = size_t(PyDict_Size(feed.ptr()));
  f.names.reserve(n);
  f.views.reserve(n);
  f.keep.reserve(n);
  for (auto [key, value] : py::reinterpret_borrow<py::dict>(feed)) {
    if (!PyUnicode_Check(key.ptr()))
      throw Error(ErrorCode::kInvalidArgument, "feed keys must be input names (str), not " + pyTypeName(key));
    std::string name = py::reinterpret_borrow<py::str>(key);
    if (!py::isinstance<py::array>(value))
      throw Error(ErrorCode::kInvalidArgument,
                  "input '" + name + "' must be a numpy.ndarray, not " + pyTypeName(value));
    auto array = py::reinterpret_borrow<py::array>(value);
    py::dtype dt = array.dtype();
    const DType dtype = dtypeOfNumpy(dt.kind(), int64_t(dt.itemsize()));
    if (dtype == DType::kUndefined)
      throw Error(ErrorCode::kInvalidArgument,
                  "input '" + name + "': numpy dtype " + std::string(py::str(dt)) +
                      " has no partita dtype (float32, float16, float64, int8/16/32/64, uint8/16/32/64, bool)");
    const bool in_place = (array.flags() & py::array::c_style) && (array.flags() & py::detail::npy_api::NPY_ARRAY_ALIGNED_) &&
                          dt.byteorder() != '>' && !dt.has_fields();
    if (!in_place) {
      // A contiguous, aligned, native-order copy of the same dtype.
      auto& api = py::detail::npy_api::get();
      PyObject* copy = api.PyArray_FromAny_(array.ptr(), numpyDtype(dtype, "input").release().ptr(), 0, 0,
                                            py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_ |
                                                py::detail::npy_api::NPY_ARRAY_ALIGNED_ |
                                                py::detail::npy_api::NPY_ARRAY_ENSUREARRAY_,
                                            nullptr);
      if (!copy) throw py::error_already_set();
      array = py::reinterpret_steal<py::array>(copy);
      copyStats().arrays += 1;
      copyStats().bytes += uint64_t(array.nbytes());
    }
    TensorView view;
    view.dtype = dtype;
    view.shape.assign(array.shape(), array.shape() + array.ndim());
    view.data = const_cast<void*>(array.data());
    f.names.push_back(std::move(name));
    f.views.push_back(std::move(view));
    f.keep.push_back(std::move(array));
  }
  return f;
}

std::vector<Tensor> runSession(Session& session, const Feeds& feeds) {
  session.clearInputs();
  for (size_t i = 0; i < feeds.views.size(); ++i) session.setInput(feeds.names[i], feeds.views[i]);
  session.run();
  return session.takeOutputs();
}

py::array toArray(Tensor&& t, const std::string& name) {
  py::dtype dt = numpyDtype(t.dtype(), "output '" + name + "'");
  auto owner = std::make_unique<Tensor>(std::move(t));
  void* data = owner->data();
  std::vector<py::ssize_t> shape(owner->shape().begin(), owner->shape().end());
  py::capsule base(owner.get(), [](void* p) { delete static_cast<Tensor*>(p); });
  owner.release();  // the capsule frees it with the array
  return py::array(dt, std::move(shape), std::vector<py::ssize_t>{}, data, base);
}

}  // namespace partita::python
