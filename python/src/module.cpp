// partita._partita: the native half of the Python package (python/partita/ is the
// other). Models, sessions, compile, load and inspect over the public C++ API
// (include/partita/); numpy arrays in and out (numpy_tensor.h). Every call that runs,
// compiles, loads or inspects releases the GIL while partita works.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "numpy_tensor.h"
#include "partita/compiler.h"
#include "partita/error.h"
#include "partita/inspect.h"
#include "partita/model.h"

namespace partita::python {

namespace {

// ---- errors ---------------------------------------------------------------------

constexpr size_t kErrorCodes = 6;
PyObject* g_error = nullptr;                       // partita.Error
std::array<PyObject*, kErrorCodes> g_by_code{};  // by ErrorCode

void defineErrors(py::module_& m) {
  g_error = PyErr_NewExceptionWithDoc(
      "partita.Error",
      "Base of every error partita raises. Its subclasses match the C++ error codes; the "
      "message is the C++ partita::Error's, unchanged.",
      PyExc_Exception, nullptr);
  if (!g_error) throw py::error_already_set();
  m.add_object("Error", g_error);
  struct Sub {
    ErrorCode code;
    const char* name;
    PyObject* also;  // a built-in exception it also is, or nullptr
    const char* doc;
  };
  const Sub subs[] = {
      {ErrorCode::kInvalidModel, "InvalidModel", nullptr, "A malformed or inconsistent ONNX model."},
      {ErrorCode::kUnsupported, "Unsupported", nullptr, "A valid model using something partita does not implement."},
      {ErrorCode::kInvalidArgument, "InvalidArgument", PyExc_ValueError,
       "Bad input from the caller: a feed's name, dtype or shape, an option, a provider. Also a ValueError."},
      {ErrorCode::kInvalidArtifact, "InvalidArtifact", nullptr, "A corrupted, truncated or foreign .pta file."},
      {ErrorCode::kIo, "IoError", PyExc_OSError, "The file system said no. Also an OSError."},
      {ErrorCode::kInternal, "InternalError", nullptr, "A bug in partita."},
  };
  for (const Sub& s : subs) {
    PyObject* bases = s.also ? PyTuple_Pack(2, g_error, s.also) : PyTuple_Pack(1, g_error);
    if (!bases) throw py::error_already_set();
    PyObject* cls = PyErr_NewExceptionWithDoc((std::string("partita.") + s.name).c_str(), s.doc, bases, nullptr);
    Py_DECREF(bases);
    if (!cls) throw py::error_already_set();
    m.add_object(s.name, cls);
    g_by_code[size_t(s.code)] = cls;  // the module holds a reference too; ours lives as long as the process
  }
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      const size_t code = size_t(e.code());
      PyErr_SetString(code < kErrorCodes && g_by_code[code] ? g_by_code[code] : g_error, e.what());
    }
  });
}

// ---- inputs and outputs ---------------------------------------------------------

// A graph input or output as ONNX Runtime's NodeArg describes it.
struct NodeArg {
  IoInfo info;

  py::list shape() const {
    py::list dims;
    for (size_t i = 0; i < info.shape.size(); ++i) {
      if (info.shape[i] >= 0)
        dims.append(info.shape[i]);
      else if (i < info.dim_names.size() && !info.dim_names[i].empty())
        dims.append(info.dim_names[i]);
      else
        dims.append(py::none());
    }
    return dims;
  }
  std::string repr() const {
    return "NodeArg(name='" + info.name + "', type='" + ortTypeName(info.dtype) + "', shape=" +
           std::string(py::repr(shape())) + ")";
  }
};

std::vector<NodeArg> nodeArgs(const std::vector<IoInfo>& infos) {
  std::vector<NodeArg> out;
  for (const IoInfo& i : infos) out.push_back({i});
  return out;
}

std::string nameList(const std::vector<IoInfo>& infos) {
  std::string s;
  for (const IoInfo& i : infos) s += (s.empty() ? "" : ", ") + i.name;
  return s;
}

// ---- models and sessions ----------------------------------------------------------

// A loaded or compiled model, and the sessions InferenceSession.run takes turns with:
// one per concurrent run, made when no idle one is left and kept for later runs.
class PyModel {
 public:
  PyModel(std::shared_ptr<const Model> model, bool artifact) : model_(std::move(model)), artifact_(artifact) {}

  const Model& model() const { return *model_; }
  const std::shared_ptr<const Model>& shared() const { return model_; }
  bool fromArtifact() const { return artifact_; }

  // A session for one run, returned to the pool when the lease ends.
  class Lease {
   public:
    explicit Lease(PyModel& owner) : owner_(owner), session_(owner.take()) {}
    ~Lease() { owner_.give(std::move(session_)); }
    Session& session() { return *session_; }

   private:
    PyModel& owner_;
    std::unique_ptr<Session> session_;
  };

 private:
  std::unique_ptr<Session> take() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!idle_.empty()) {
        std::unique_ptr<Session> s = std::move(idle_.back());
        idle_.pop_back();
        return s;
      }
    }
    return std::make_unique<Session>(model_);  // its activation arena, outside the lock
  }
  void give(std::unique_ptr<Session> s) {
    std::lock_guard<std::mutex> lock(mu_);
    idle_.push_back(std::move(s));
  }

  std::shared_ptr<const Model> model_;
  bool artifact_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Session>> idle_;
};

// The indices of the outputs asked for, in the order asked; None or an empty list
// asks for every output (as in ONNX Runtime).
std::vector<size_t> outputIndices(const Model& model, py::handle names) {
  const std::vector<IoInfo>& outs = model.outputs();
  std::vector<size_t> idx;
  if (names.is_none()) {
    for (size_t i = 0; i < outs.size(); ++i) idx.push_back(i);
    return idx;
  }
  if (!PyList_Check(names.ptr()) && !PyTuple_Check(names.ptr()))
    throw Error(ErrorCode::kInvalidArgument, "output_names must be None or a list of output names, not " +
                                                 pyTypeName(names));
  for (py::handle h : names) {
    if (!PyUnicode_Check(h.ptr()))
      throw Error(ErrorCode::kInvalidArgument, "output_names must hold str, not " +
                                                   pyTypeName(h));
    const std::string name = py::reinterpret_borrow<py::str>(h);
    size_t i = 0;
    while (i < outs.size() && outs[i].name != name) ++i;
    if (i == outs.size())
      throw Error(ErrorCode::kInvalidArgument,
                  "the model has no output named '" + name + "' (outputs: " + nameList(outs) + ")");
    idx.push_back(i);
  }
  if (idx.empty())
    for (size_t i = 0; i < outs.size(); ++i) idx.push_back(i);
  return idx;
}

// InferenceSession.run: a pooled session, the outputs asked for as a list.
py::list runPooled(PyModel& pm, py::handle output_names, py::handle feed) {
  const std::vector<size_t> wanted = outputIndices(pm.model(), output_names);
  const Feeds feeds = readFeeds(feed);
  std::vector<Tensor> outs;
  {
    py::gil_scoped_release nogil;
    PyModel::Lease lease(pm);
    outs = runSession(lease.session(), feeds);
  }
  const std::vector<IoInfo>& infos = pm.model().outputs();
  std::vector<py::object> made(outs.size());
  py::list result;
  for (size_t i : wanted) {
    if (!made[i]) made[i] = toArray(std::move(outs[i]), infos[i].name);
    result.append(made[i]);
  }
  return result;
}

// Model.session(): one partita Session; runs from several threads take turns.
class PySession {
 public:
  explicit PySession(std::shared_ptr<PyModel> model)
      : model_(std::move(model)), session_(std::make_unique<Session>(model_->shared())) {}

  py::dict run(py::handle feed) {
    const Feeds feeds = readFeeds(feed);
    std::vector<Tensor> outs;
    {
      py::gil_scoped_release nogil;
      std::lock_guard<std::mutex> lock(mu_);  // taken without the GIL: no lock-order cycle
      outs = runSession(*session_, feeds);
    }
    const std::vector<IoInfo>& infos = model_->model().outputs();
    py::dict result;
    for (size_t i = 0; i < outs.size(); ++i) result[py::str(infos[i].name)] = toArray(std::move(outs[i]), infos[i].name);
    return result;
  }
  const std::shared_ptr<PyModel>& model() const { return model_; }

 private:
  std::shared_ptr<PyModel> model_;
  std::unique_ptr<Session> session_;
  std::mutex mu_;
};

// ---- opening models ---------------------------------------------------------------

// The bytes of a bytes-like object (bytes, bytearray, memoryview of contiguous bytes),
// or nullopt for anything else.
struct ByteView {
  const void* data;
  size_t size;
  py::object keep;  // the buffer export that pins them
};
std::optional<ByteView> bytesOf(py::handle source) {
  if (PyBytes_Check(source.ptr()))
    return ByteView{PyBytes_AS_STRING(source.ptr()), size_t(PyBytes_GET_SIZE(source.ptr())),
                    py::reinterpret_borrow<py::object>(source)};
  if (!PyObject_CheckBuffer(source.ptr())) return std::nullopt;
  py::memoryview view = py::memoryview(py::reinterpret_borrow<py::object>(source));
  py::buffer_info info = py::reinterpret_borrow<py::buffer>(view).request();
  if (info.ndim > 1 || (info.ndim == 1 && info.strides[0] != info.itemsize))
    throw Error(ErrorCode::kInvalidArgument, "model bytes must be a contiguous bytes-like object");
  return ByteView{info.ptr, size_t(info.size * info.itemsize), view};
}

std::string pathOf(py::handle source, const char* what) {
  py::object path;
  try {
    path = py::module_::import("os").attr("fspath")(source);
  } catch (py::error_already_set&) {
    throw Error(ErrorCode::kInvalidArgument, std::string(what) + " must be a path (str or os.PathLike) or bytes, not " +
                                                 pyTypeName(source));
  }
  if (!PyUnicode_Check(path.ptr()))
    throw Error(ErrorCode::kInvalidArgument, std::string(what) + " must be a str path, not a bytes path");
  return py::cast<std::string>(path);
}

// Whether the file at `path` is an artifact, by its first bytes; by its name when it
// cannot be read here (partita's own open then says why, in its words).
bool isArtifactFile(const std::string& path) {
  const bool named_pta = path.size() >= 4 && path.compare(path.size() - 4, 4, ".pta") == 0;
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return named_pta;
  struct stat st;
  char head[8];
  bool artifact = named_pta;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
    artifact = ::pread(fd, head, sizeof head, 0) == ssize_t(sizeof head) && hasArtifactSignature(head, sizeof head);
  ::close(fd);
  return artifact;
}

constexpr const char* kBytesName = "<bytes>";

// InferenceSession's model: an artifact is loaded (mapped, or its bytes copied once),
// anything else compiled in memory as ONNX for `backends`. For an artifact, the
// backends it calls must all be among `backends` when those are given.
std::shared_ptr<PyModel> openModel(py::handle source, std::optional<std::vector<std::string>> backends, int threads) {
  CompileOptions compile;
  compile.threads = threads;
  if (backends) compile.backends = *backends;
  const LoadOptions load{threads};
  std::shared_ptr<const Model> model;
  bool artifact = false;
  std::string name = kBytesName;
  if (std::optional<ByteView> bytes = bytesOf(source)) {
    py::gil_scoped_release nogil;
    artifact = hasArtifactSignature(bytes->data, bytes->size);
    model = artifact ? Model::loadBytes(bytes->data, bytes->size, name, load)
                     : compileOnnxBytes(bytes->data, bytes->size, name, compile);
  } else {
    name = pathOf(source, "the model");
    py::gil_scoped_release nogil;
    artifact = isArtifactFile(name);
    model = artifact ? Model::load(name, load) : compileOnnx(name, compile);
  }
  if (artifact && backends) {
    for (const std::string& b : model->backends()) {
      bool given = false;
      for (const std::string& g : *backends) given |= g == b;
      if (given) continue;
      std::string runs;
      for (const std::string& k : model->backends()) runs += k + ", ";
      std::string listed;
      for (const std::string& g : *backends) listed += (listed.empty() ? "" : ", ") + g;
      throw Error(ErrorCode::kInvalidArgument, "the artifact '" + name + "' was compiled for " + runs +
                                                   "host, but the providers given are " + listed +
                                                   ": an artifact runs on the backends it was compiled for "
                                                   "(compile it again, or pass providers=None)");
    }
  }
  return std::make_shared<PyModel>(std::move(model), artifact);
}

std::shared_ptr<PyModel> loadModel(py::handle source, int threads) {
  const LoadOptions load{threads};
  std::shared_ptr<const Model> model;
  if (std::optional<ByteView> bytes = bytesOf(source)) {
    py::gil_scoped_release nogil;
    model = Model::loadBytes(bytes->data, bytes->size, kBytesName, load);
  } else {
    const std::string path = pathOf(source, "the artifact");
    py::gil_scoped_release nogil;
    model = Model::load(path, load);
  }
  return std::make_shared<PyModel>(std::move(model), true);
}

// ---- compile ----------------------------------------------------------------------

// {backend: ["Conv", "Relu"]} or {backend: "Conv,Relu"}.
std::map<std::string, std::vector<std::string>> opLists(const py::handle lists, const char* what) {
  std::map<std::string, std::vector<std::string>> out;
  if (lists.is_none()) return out;
  if (!PyDict_Check(lists.ptr()))
    throw Error(ErrorCode::kInvalidArgument, std::string(what) + " must be a dict of backend -> op types");
  for (auto [key, value] : py::reinterpret_borrow<py::dict>(lists)) {
    const std::string backend = py::cast<std::string>(key);
    std::vector<std::string>& ops = out[backend];
    if (PyUnicode_Check(value.ptr())) {
      std::string s = py::cast<std::string>(value);
      for (size_t start = 0; start <= s.size();) {
        size_t comma = s.find(',', start);
        if (comma == std::string::npos) comma = s.size();
        if (comma > start) ops.push_back(s.substr(start, comma - start));
        start = comma + 1;
      }
    } else {
      ops = py::cast<std::vector<std::string>>(value);
    }
  }
  return out;
}

py::dict byteDict(const ByteAccounting& r) {
  using namespace pybind11::literals;
  return py::dict("file"_a = r.file_bytes, "weight_section"_a = r.weight_section_bytes, "weights"_a = r.weight_bytes,
                  "distinct_weights"_a = r.distinct_weight_bytes, "padding"_a = r.padding_bytes,
                  "weight_padding"_a = r.weight_padding_bytes, "metadata"_a = r.metadata_bytes,
                  "modules"_a = r.module_bytes, "embedded"_a = r.embedded_bytes, "constants"_a = r.constants,
                  "distinct_constants"_a = r.distinct_constants, "file_over_distinct_weights"_a = r.overheadRatio());
}

py::dict compileModel(py::handle model, const std::string& output_path,
                      std::optional<std::vector<std::string>> backends,
                      std::optional<std::map<std::string, std::vector<int64_t>>> shapes, int threads,
                      py::handle allow, py::handle deny, size_t min_region_size,
                      std::optional<std::string> external_data_root, const std::string& precision) {
  CompileOptions o;
  o.precision = precisionFromName(precision);
  if (backends) o.backends = *backends;
  if (shapes) o.input_shapes = *shapes;
  o.threads = threads;
  o.allow_ops = opLists(allow, "allow");
  o.deny_ops = opLists(deny, "deny");
  o.min_region_size = min_region_size;
  if (external_data_root) o.external_data_root = *external_data_root;
  CompileReport report;
  if (std::optional<ByteView> bytes = bytesOf(model)) {
    py::gil_scoped_release nogil;
    report = compileBytesToArtifact(bytes->data, bytes->size, kBytesName, output_path, o);
  } else {
    const std::string path = pathOf(model, "the model");
    py::gil_scoped_release nogil;
    report = compileToArtifact(path, output_path, o);
  }
  using namespace pybind11::literals;
  py::list modules;
  for (const CompileReport::Module& m : report.modules)
    modules.append(py::dict("kind"_a = m.kind, "functions"_a = m.functions, "constant_uses"_a = m.constant_uses,
                            "bytes"_a = m.bytes));
  return py::dict("path"_a = output_path, "bytes"_a = byteDict(report.bytes), "modules"_a = modules);
}

// ---- inspect ----------------------------------------------------------------------

// -1 (none) -> None.
py::object optionalInt(int64_t v) { return v < 0 ? py::object(py::none()) : py::object(py::int_(v)); }

py::dict infoDict(const ArtifactInfo& a) {
  using namespace pybind11::literals;
  py::list sections, modules, constants, partition;
  for (const ArtifactInfo::Section& s : a.sections)
    sections.append(py::dict("kind"_a = s.kind, "offset"_a = s.offset, "size"_a = s.size,
                             "alignment"_a = s.alignment, "checksum"_a = s.checksum));
  for (const ArtifactInfo::Module& m : a.modules) {
    py::list uses;
    std::map<std::string, size_t> counts;
    for (const ArtifactInfo::ConstantUse& u : m.uses) {
      uses.append(py::dict("id"_a = u.id, "kind"_a = u.kind, "source"_a = optionalInt(u.source)));
      ++counts[u.kind];
    }
    py::dict assumptions;
    for (const auto& [k, v] : m.assumptions) assumptions[py::str(k)] = v;
    modules.append(py::dict("kind"_a = m.kind, "section"_a = optionalInt(m.section), "functions"_a = m.functions,
                            "uses"_a = uses, "use_counts"_a = counts, "assumptions"_a = assumptions));
  }
  for (const ArtifactInfo::Constant& c : a.constants)
    constants.append(py::dict(
        "id"_a = c.id, "name"_a = c.name, "dtype"_a = std::string(dtypeName(c.dtype)), "shape"_a = c.shape,
        "layout"_a = c.layout.empty() ? py::object(py::none()) : py::object(py::str(c.layout)), "bytes"_a = c.bytes,
        "derived_from"_a = optionalInt(c.derived_from),
        "storage"_a = c.storage, "offset"_a = optionalInt(c.offset), "hash"_a = c.hash, "modules"_a = c.modules,
        "same_bytes_as"_a = optionalInt(c.same_bytes_as)));
  for (const ArtifactInfo::Region& r : a.partition)
    partition.append(py::dict("name"_a = r.name, "backend"_a = r.backend, "ops"_a = r.ops, "nodes"_a = r.nodes,
                              "recorded"_a = r.recorded));
  py::dict bytes = byteDict(a.bytes);
  bytes["manifest"] = a.manifest_bytes;
  const ArtifactInfo::Memory& mem = a.memory;
  py::dict memory = mem.planned ? py::dict("planned"_a = true, "activations"_a = mem.activation_bytes,
                                           "module_scratch"_a = mem.module_scratch_bytes,
                                           "growth_budget"_a = mem.growth_budget)
                                : py::dict("planned"_a = false, "not_planned"_a = mem.not_planned);
  py::dict header("format_version"_a = a.format_version, "file_bytes"_a = a.file_bytes, "producer"_a = a.producer,
                  "checksum"_a = a.header_checksum, "executor"_a = a.executor);
  return py::dict("path"_a = a.path, "header"_a = header, "sections"_a = sections, "modules"_a = modules,
                  "constants"_a = constants, "partition"_a = partition, "bytes"_a = bytes, "memory"_a = memory);
}

py::object inspectPath(py::handle source, bool dot, bool verify) {
  const std::string path = pathOf(source, "the artifact");
  if (dot) {
    std::string text;
    {
      py::gil_scoped_release nogil;
      text = inspectDot(path);
    }
    return py::str(text);
  }
  ArtifactInfo info;
  {
    py::gil_scoped_release nogil;
    info = inspectArtifact(path, {verify});
  }
  return infoDict(info);
}

}  // namespace

}  // namespace partita::python

namespace pp = partita::python;
namespace py = pybind11;

PYBIND11_MODULE(_partita, m) {
  using namespace pybind11::literals;
  m.doc() = "partita's native module; use the package `partita`.";
  pp::numpyDtypesInit();
  pp::defineErrors(m);
  m.attr("__version__") = PARTITA_VERSION;
  m.attr("BACKENDS") = partita::availableBackends();

  py::class_<pp::NodeArg>(m, "NodeArg", "A model input or output, as ONNX Runtime's NodeArg.")
      .def_property_readonly("name", [](const pp::NodeArg& a) { return a.info.name; }, "Its name.")
      .def_property_readonly("shape", &pp::NodeArg::shape,
                             "Its dimensions: an int where fixed, the symbol's name (str) where symbolic, None "
                             "where neither.")
      .def_property_readonly("type", [](const pp::NodeArg& a) { return pp::ortTypeName(a.info.dtype); },
                             "ONNX Runtime's type string, e.g. 'tensor(float)'.")
      .def_property_readonly(
          "dtype",
          [](const pp::NodeArg& a) -> py::object {
            if (a.info.dtype == partita::DType::kBFloat16) return py::none();
            return pp::numpyDtype(a.info.dtype, "'" + a.info.name + "'");
          },
          "Its numpy dtype (None for bfloat16, which numpy lacks).")
      .def("__repr__", &pp::NodeArg::repr);

  py::class_<pp::PyModel, std::shared_ptr<pp::PyModel>>(
      m, "Model",
      "A loaded (or compiled) model: immutable, shared by its sessions. Make one with partita.load() or "
      "partita.InferenceSession.")
      .def_property_readonly("inputs", [](const pp::PyModel& pm) { return pp::nodeArgs(pm.model().inputs()); },
                             "The inputs, in order (NodeArg: name, shape, type, dtype).")
      .def_property_readonly("outputs", [](const pp::PyModel& pm) { return pp::nodeArgs(pm.model().outputs()); },
                             "The outputs, in order.")
      .def_property_readonly("threads", [](const pp::PyModel& pm) { return pm.model().threads(); },
                             "Kernel threads of each run.")
      .def_property_readonly("backends", [](const pp::PyModel& pm) { return pm.model().backends(); },
                             "The external backends whose modules it calls (e.g. ['dnnl']); the host is implicit.")
      .def_property_readonly("planned_activation_bytes",
                             [](const pp::PyModel& pm) { return pm.model().plannedActivationBytes(); },
                             "Bytes of the activation arena each session allocates.")
      .def_property_readonly("from_artifact", &pp::PyModel::fromArtifact,
                             "True when loaded from a .pta, False when compiled from ONNX in memory.")
      .def(
          "session", [](const std::shared_ptr<pp::PyModel>& pm) { return std::make_unique<pp::PySession>(pm); },
          "A new Session (its own activation memory) over this model.")
      .def("_run", &pp::runPooled, "output_names"_a, "input_feed"_a,
           "InferenceSession.run: a pooled session; the outputs asked for, as a list.")
      .def("__repr__", [](const pp::PyModel& pm) {
        std::string s = "<partita.Model inputs=[";
        for (const auto& i : pm.model().inputs()) s += (s.back() == '[' ? "" : ", ") + i.name;
        s += "] outputs=[";
        for (const auto& o : pm.model().outputs()) s += (s.back() == '[' ? "" : ", ") + o.name;
        return s + "] threads=" + std::to_string(pm.model().threads()) + ">";
      });

  py::class_<pp::PySession>(m, "Session",
                            "One model's run state (its activation memory). Runs from several threads on one "
                            "Session take turns; use one Session per thread to run them at once.")
      .def("run", &pp::PySession::run, "feeds"_a,
           "Runs the model on feeds {input name: numpy.ndarray} and returns {output name: numpy.ndarray} in "
           "output order. The GIL is released while it runs.")
      .def_property_readonly("model", &pp::PySession::model, "The Model it runs.");

  m.def("_open", &pp::openModel, "source"_a, "backends"_a, "threads"_a,
        "InferenceSession's model: a .pta loaded, anything else compiled in memory as ONNX.");
  m.def("load", &pp::loadModel, "artifact"_a, py::kw_only(), "threads"_a = 2,
        "Loads a .pta artifact (a path: mapped once; bytes: copied once) for runs at `threads` kernel threads.");
  m.def("_compile", &pp::compileModel, "model"_a, "output_path"_a, "backends"_a, "shapes"_a, "threads"_a, "allow"_a,
        "deny"_a, "min_region_size"_a, "external_data_root"_a, "precision"_a, "partita.compile's native half.");
  m.def("inspect", &pp::inspectPath, "artifact"_a, py::kw_only(), "dot"_a = false, "verify"_a = false,
        "What `partita inspect` reports about a .pta as a dict (dot=True: the partition as Graphviz text; "
        "verify=True: also check every weight checksum).");
  m.def(
      "_copy_stats",
      []() {
        return py::make_tuple(pp::copyStats().arrays.load(), pp::copyStats().bytes.load());
      },
      "(arrays, bytes) of inputs copied because they were not C-contiguous, aligned and native-endian.");
}
