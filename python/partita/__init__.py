"""partita from Python: compile ONNX models into one artifact file (.pta) and run them.

Two ways in:

* ONNX Runtime's surface, so that swapping the import is all that changes::

      import partita as ort
      sess = ort.InferenceSession("model.onnx", providers=["dnnl", "host"])
      (logits,) = sess.run(None, {"input": x})

* partita's own API::

      partita.compile("model.onnx", "model.pta", backends=["dnnl", "host"])
      model = partita.load("model.pta", threads=2)
      outputs = model.session().run({"input": x})   # {name: numpy.ndarray}
      facts = partita.inspect("model.pta")           # what `partita inspect` prints, as a dict

Inputs are numpy arrays; one that is C-contiguous, aligned, native-endian and of the
model's dtype is read in place. Outputs are numpy arrays that own partita's output
memory (no copy). Runs release the GIL. Errors are partita.Error subclasses with the
C++ messages. See docs/python.md.
"""
import os as _os


def _one_openmp_runtime():
    """One OpenMP runtime for partita, the oneDNN it shares and what loads later
    (docs/threads.md). The native module is linked against LLVM's libomp, which serves
    its own calls whatever else is loaded; Debian's libdnnl needs GCC's libgomp. libomp
    is made global before the module loads, so that libdnnl (and packages imported
    later, such as torch) bind to it too. When libdnnl is already loaded without libomp
    (torch imported first), its calls are bound to libgomp for good: oneDNN then keeps a
    pool of threads of its own, beside partita's, and follows libgomp's thread count,
    which is slower; the warning says so."""
    import ctypes
    try:
        with open("/proc/self/maps") as f:
            maps = f.read()
    except OSError:
        return
    if "libdnnl.so" in maps and "libomp.so" not in maps:
        import warnings
        warnings.warn("partita: libdnnl was loaded before partita (by torch?) and runs on GCC's libgomp, "
                      "partita's kernels on LLVM's libomp: two thread pools, slower runs. Import partita "
                      "before such packages (docs/threads.md).", RuntimeWarning, stacklevel=3)
        return
    try:
        ctypes.CDLL("libomp.so.5", mode=ctypes.RTLD_GLOBAL)
    except OSError:
        pass  # not installed where the loader looks: the module's own dependencies decide


_one_openmp_runtime()

from ._partita import (  # noqa: F401,E402  (re-exported)
    BACKENDS,
    Error,
    InternalError,
    InvalidArgument,
    InvalidArtifact,
    InvalidModel,
    IoError,
    Model,
    NodeArg,
    Session,
    Unsupported,
    __version__,
    inspect,
    load,
)
from . import _partita

__all__ = [
    "BACKENDS", "Error", "InferenceSession", "InternalError", "InvalidArgument", "InvalidArtifact",
    "InvalidModel", "IoError", "Model", "NodeArg", "Session", "SessionOptions", "Unsupported",
    "compile", "get_available_providers", "get_device", "inspect", "load",
]

# ONNX Runtime's execution provider names -> partita's backends, and back.
_PROVIDER_TO_BACKEND = {"CPUExecutionProvider": "host", "DnnlExecutionProvider": "dnnl"}
_BACKEND_TO_PROVIDER = {b: p for p, b in _PROVIDER_TO_BACKEND.items()}

_DEFAULT_THREADS = 2


def _model_bytes_or_path(model):
    """A path, bytes-like, or onnx.ModelProto (serialized here) -> path or bytes."""
    if isinstance(model, (str, bytes, bytearray, memoryview, _os.PathLike)):
        return model
    serialize = getattr(model, "SerializeToString", None)
    if callable(serialize):  # onnx.ModelProto, without importing onnx here
        return serialize()
    raise InvalidArgument(
        f"the model must be a path, bytes or an onnx.ModelProto, not {type(model).__name__}")


def compile(model, output_path, backends=None, shapes=None, threads=_DEFAULT_THREADS, allow=None,
            deny=None, min_region_size=1, external_data_root=None, precision="fp32"):
    """Compiles an ONNX model into one artifact file, as `partita compile` does.

    model: a path to a .onnx, its bytes, or an onnx.ModelProto (bytes and ModelProto
        cannot use ONNX external data: there is no folder to find it in).
    output_path: the .pta to write; nothing is written unless the whole compile succeeds.
    backends: in priority order, e.g. ["dnnl", "host"] (default ["host"]); the host runs
        whatever no other backend takes.
    shapes: {input name: [dims]} fixing symbolic input dimensions.
    threads: the thread count the artifact will run at (oneDNN picks weight layouts for it).
    allow / deny: {backend: ["Conv", "Relu"]} (or "Conv,Relu"): only / never these ops.
    min_region_size: smaller regions stay on the host.
    external_data_root: a folder also trusted for ONNX external data.
    precision: float16/bfloat16 compute: "fp32" (converted to float32 at compile time),
        "bf16" (and oneDNN computes Conv/MatMul/Gemm in bfloat16) or "keep" (docs/precision.md).

    Returns the byte accounting: {"path", "bytes": {...}, "modules": [...]}.
    The GIL is released while it compiles.
    """
    return _partita._compile(
        _model_bytes_or_path(model), _os.fspath(output_path),
        list(backends) if backends is not None else None,
        {k: [int(d) for d in v] for k, v in shapes.items()} if shapes is not None else None,
        int(threads), allow, deny, int(min_region_size),
        _os.fspath(external_data_root) if external_data_root is not None else None, str(precision))


def get_available_providers():
    """The providers this build has, in ONNX Runtime's names where ONNX Runtime has one
    (host: CPUExecutionProvider, dnnl: DnnlExecutionProvider), else partita's."""
    return [_BACKEND_TO_PROVIDER.get(b, b) for b in BACKENDS if b != "host"] + ["CPUExecutionProvider"]


def get_device():
    """As ONNX Runtime's: partita runs on the CPU."""
    return "CPU"


class SessionOptions:
    """ONNX Runtime's SessionOptions, as far as partita has a meaning for it.

    intra_op_num_threads: kernel threads of each run; 0 (the default, as in ONNX
        Runtime) means partita's default, 2.
    Other attributes ONNX Runtime code sets (graph_optimization_level, execution_mode,
    inter_op_num_threads, log_severity_level, ...) are accepted and have no effect.
    """

    def __init__(self):
        self.intra_op_num_threads = 0
        self.inter_op_num_threads = 0
        self.graph_optimization_level = None
        self.log_severity_level = 2

    def _threads(self):
        n = self.intra_op_num_threads
        if not isinstance(n, int) or n < 0:
            raise InvalidArgument(f"intra_op_num_threads must be an int >= 0, not {n!r}")
        return n or _DEFAULT_THREADS


def _backends_of(providers):
    """ONNX Runtime's providers argument -> partita backend names (None when not given)."""
    if providers is None or len(providers) == 0:
        return None
    backends = []
    for p in providers:
        name = p[0] if isinstance(p, (tuple, list)) else p  # (name, options): options are not used
        if not isinstance(name, str):
            raise InvalidArgument(f"a provider must be a name (str) or (name, options), not {p!r}")
        backend = _PROVIDER_TO_BACKEND.get(name, name)
        if backend not in BACKENDS:
            known = ", ".join(sorted(set(BACKENDS) | set(_PROVIDER_TO_BACKEND)))
            raise InvalidArgument(f"unknown provider '{name}' (this build has: {known})")
        if backend not in backends:
            backends.append(backend)
    return backends


class InferenceSession:
    """ONNX Runtime's InferenceSession over partita.

    path_or_bytes: a .onnx (compiled in memory) or a .pta (mapped), as a path or as bytes
        (the bytes of a .pta are copied once, into memory the session owns). Which one it
        is comes from the file's first bytes, not its name.
    sess_options: a SessionOptions (intra_op_num_threads sets the kernel threads).
    providers: backends in priority order, in partita's names (["dnnl", "host"]) or
        ONNX Runtime's (CPUExecutionProvider = host, DnnlExecutionProvider = dnnl); the
        host always runs what no other takes. Default: ["host"] for ONNX, the backends it
        was compiled for for a .pta. For a .pta, every backend it was compiled for must
        be among them, or partita.InvalidArgument is raised.

    run() may be called from several threads at once: the session keeps a pool of
    partita sessions (one per concurrent run) and releases the GIL while running.
    """

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None, **kwargs):
        self._options = sess_options if sess_options is not None else SessionOptions()
        threads = self._options._threads() if hasattr(self._options, "_threads") else _DEFAULT_THREADS
        backends = _backends_of(providers)
        if isinstance(path_or_bytes, _os.PathLike):
            path_or_bytes = _os.fspath(path_or_bytes)
        self._model = _partita._open(path_or_bytes, backends, threads)
        if backends is None:
            backends = list(self._model.backends) + ["host"] if self._model.from_artifact else ["host"]
        elif "host" not in backends:
            backends.append("host")
        self._backends = backends
        self._model_path = path_or_bytes if isinstance(path_or_bytes, str) else None

    @property
    def model(self):
        """The partita.Model underneath (inputs, outputs, threads, backends, session())."""
        return self._model

    def get_inputs(self):
        """The model's inputs: NodeArg objects with .name, .shape and .type."""
        return self._model.inputs

    def get_outputs(self):
        """The model's outputs: NodeArg objects with .name, .shape and .type."""
        return self._model.outputs

    def get_overridable_initializers(self):
        """As ONNX Runtime's; partita has no overridable initializers: []."""
        return []

    def get_providers(self):
        """The providers in priority order, in ONNX Runtime's names where it has one
        (dnnl: DnnlExecutionProvider, host: CPUExecutionProvider, always last)."""
        return [_BACKEND_TO_PROVIDER.get(b, b) for b in self._backends]

    def get_provider_options(self):
        """As ONNX Runtime's: {provider: {}} (partita's backends take no options here)."""
        return {p: {} for p in self.get_providers()}

    def get_session_options(self):
        """The SessionOptions the session was made with."""
        return self._options

    def run(self, output_names, input_feed, run_options=None):
        """Runs the model.

        output_names: the outputs wanted, in the order wanted; None (or []) for all.
        input_feed: {input name: numpy.ndarray}; every input must be given.
        run_options: accepted for ONNX Runtime's signature; not used.

        Returns a list of numpy arrays in the order asked. Raises partita.InvalidArgument
        for an unknown input or output name, a missing input, a wrong dtype or shape, or
        a value that is not a numpy array (partita does not convert lists).
        """
        return self._model._run(output_names, input_feed)
