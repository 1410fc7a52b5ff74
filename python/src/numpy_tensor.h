// numpy arrays <-> partita tensors for the Python binding, without copies where the
// layout allows: a feed that is C-contiguous, aligned, in native byte order and of a
// partita dtype is read in place; an output Tensor becomes the memory of its numpy
// array (the array's base owns it).
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <atomic>
#include <string>
#include <vector>

#include "partita/model.h"

namespace partita::python {

namespace py = pybind11;

// Makes the numpy dtype objects numpyDtype returns; once, when the module is imported.
void numpyDtypesInit();

// The numpy dtype of a partita dtype. Throws Error(kUnsupported) naming `what` for a
// dtype numpy has no type for (bfloat16).
py::dtype numpyDtype(DType t, const std::string& what);
// ONNX Runtime's type string: "tensor(float)", "tensor(int64)", ...
std::string ortTypeName(DType t);

// One run's inputs, converted under the GIL and read without it. Each view points into
// an array `keep` holds: the caller's own, or a contiguous copy made here.
struct Feeds {
  std::vector<std::string> names;
  std::vector<TensorView> views;
  std::vector<py::object> keep;
};

// Reads a feed dict {input name: numpy.ndarray}. Throws Error(kInvalidArgument) for a
// feed that is not a dict, a key that is not a str, a value that is not an ndarray and
// an array whose dtype partita has no dtype for; names, dtypes and shapes are checked
// against the model by Session::setInput, with its messages.
Feeds readFeeds(py::handle feed);

// Binds `feeds` to `session` (forgetting any earlier binding), runs it and hands its
// outputs over. Called without the GIL.
std::vector<Tensor> runSession(Session& session, const Feeds& feeds);

// The array over `t`'s memory, owning it (no copy). `name` is for messages.
py::array toArray(Tensor&& t, const std::string& name);

// The name of `h`'s type ("list", "NoneType"), for messages.
std::string pyTypeName(py::handle h);

// Counters of the inputs that had to be copied (non-contiguous, misaligned, or in
// foreign byte order), for tests and measurements.
struct CopyStats {
  std::atomic<uint64_t> arrays{0};
  std::atomic<uint64_t> bytes{0};
};
CopyStats& copyStats();

}  // namespace partita::python
