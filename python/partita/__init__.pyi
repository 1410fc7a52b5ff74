# Type stubs of the partita package (python/partita/__init__.py and the native
# module partita._partita). docs/python.md describes the behaviour.
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

__version__: str
BACKENDS: List[str]

_Path = Union[str, os.PathLike[str]]
_Bytes = Union[bytes, bytearray, memoryview]
_Provider = Union[str, Tuple[str, Dict[str, Any]]]

class Error(Exception):
    """Base of every partita error; the message is the C++ partita::Error's."""

class InvalidModel(Error):
    """A malformed or inconsistent ONNX model."""

class Unsupported(Error):
    """A valid model using something partita does not implement."""

class InvalidArgument(Error, ValueError):
    """Bad input from the caller: a feed's name, dtype or shape, an option, a provider."""

class InvalidArtifact(Error):
    """A corrupted, truncated or foreign .pta file."""

class IoError(Error, OSError):
    """The file system said no."""

class InternalError(Error):
    """A bug in partita."""

class NodeArg:
    """A model input or output, as ONNX Runtime's NodeArg."""
    @property
    def name(self) -> str: ...
    @property
    def shape(self) -> List[Union[int, str, None]]:
        """int where fixed, the symbol (str) where symbolic, None where neither."""
    @property
    def type(self) -> str:
        """ONNX Runtime's type string, e.g. 'tensor(float)'."""
    @property
    def dtype(self) -> Optional[np.dtype[Any]]:
        """The numpy dtype (None for bfloat16)."""

class Session:
    """One model's run state; runs on one Session from several threads take turns."""
    def run(self, feeds: Mapping[str, npt.NDArray[Any]]) -> Dict[str, npt.NDArray[Any]]:
        """{input name: array} -> {output name: array}, in output order; releases the GIL."""
    @property
    def model(self) -> Model: ...

class Model:
    """A loaded or compiled model, immutable and shared by its sessions."""
    @property
    def inputs(self) -> List[NodeArg]: ...
    @property
    def outputs(self) -> List[NodeArg]: ...
    @property
    def threads(self) -> int: ...
    @property
    def backends(self) -> List[str]:
        """External backends whose modules it calls, e.g. ['dnnl']; the host is implicit."""
    @property
    def planned_activation_bytes(self) -> int: ...
    @property
    def from_artifact(self) -> bool: ...
    def session(self) -> Session: ...

def load(artifact: Union[_Path, _Bytes], *, threads: int = 2) -> Model:
    """Loads a .pta (a path is mapped once; bytes are copied once)."""

def compile(
    model: Union[_Path, _Bytes, Any],
    output_path: _Path,
    backends: Optional[Sequence[str]] = None,
    shapes: Optional[Mapping[str, Sequence[int]]] = None,
    threads: int = 2,
    allow: Optional[Mapping[str, Union[str, Sequence[str]]]] = None,
    deny: Optional[Mapping[str, Union[str, Sequence[str]]]] = None,
    min_region_size: int = 1,
    external_data_root: Optional[_Path] = None,
    precision: str = "fp32",
) -> Dict[str, Any]:
    """Compiles an ONNX model (path, bytes or onnx.ModelProto) into one .pta file;
    returns {"path", "bytes": {...}, "modules": [...]}."""

def inspect(artifact: _Path, *, dot: bool = False, verify: bool = False) -> Any:
    """What `partita inspect` reports, as a dict; with dot=True, the Graphviz text (str)."""

def get_available_providers() -> List[str]: ...
def get_device() -> str: ...

class SessionOptions:
    intra_op_num_threads: int
    inter_op_num_threads: int
    graph_optimization_level: Any
    log_severity_level: int
    def __init__(self) -> None: ...

class InferenceSession:
    """ONNX Runtime's InferenceSession over partita."""
    def __init__(
        self,
        path_or_bytes: Union[_Path, _Bytes],
        sess_options: Optional[SessionOptions] = None,
        providers: Optional[Sequence[_Provider]] = None,
        provider_options: Optional[Sequence[Dict[str, Any]]] = None,
        **kwargs: Any,
    ) -> None: ...
    @property
    def model(self) -> Model: ...
    def get_inputs(self) -> List[NodeArg]: ...
    def get_outputs(self) -> List[NodeArg]: ...
    def get_overridable_initializers(self) -> List[NodeArg]: ...
    def get_providers(self) -> List[str]: ...
    def get_provider_options(self) -> Dict[str, Dict[str, Any]]: ...
    def get_session_options(self) -> SessionOptions: ...
    def run(
        self,
        output_names: Optional[Sequence[str]],
        input_feed: Mapping[str, npt.NDArray[Any]],
        run_options: Any = None,
    ) -> List[npt.NDArray[Any]]: ...
