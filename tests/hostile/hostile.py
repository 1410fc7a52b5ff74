"""The hostile-input suite's shared pieces: what a case is, and a workspace to build it in.

A case builds its files (FIFOs, symlinks, crafted .onnx/.npy/.pb files, read-only
targets, hard links) in its own fresh folder, names the command to run there, and says
what the command must print. The runner (run_hostile.py) then asserts that the command
 - exits with a non-zero status (or 0 for a case marked succeed=True), not by a signal;
 - finishes within the timeout (a FIFO opened for reading would block forever);
 - prints every expected substring, and nothing of the C++ standard library's own text
   (std::..., vector::_M_range_check, bad_alloc, "terminate called", sanitizer reports);
 - leaves its folder exactly as it was: every entry's type, mode, inode and (for regular
   files) bytes, and no new entry (no artifact, no temporary), unless the case lists the
   names it may change.
Cases never touch files outside their folder: no real device node is ever a target.
"""

import dataclasses
import hashlib
import os
import socket
import stat
import struct
import subprocess
from pathlib import Path
from typing import Callable, List, Optional

# Text that means a standard-library exception (or a crash report) reached the user.
FORBIDDEN = [
    "std::", "vector::", "_M_range_check", "bad_alloc", "basic_string", "max_size()",
    "terminate called", "what():", "AddressSanitizer", "UndefinedBehaviorSanitizer", "runtime error:",
]


@dataclasses.dataclass
class Case:
    name: str
    # Builds the case's files in the workspace and returns the program's arguments.
    build: Callable[["Workspace"], List[str]]
    # Substrings that must all appear in the output (stdout + stderr).
    expect: List[str]
    # "partita" or "partita-run".
    tool: str = "partita"
    # True: a correct result is expected (exit 0), not an error.
    succeed: bool = False
    # Names (relative to the workspace) the command may create or change.
    may_change: List[str] = dataclasses.field(default_factory=list)
    timeout: Optional[float] = None


class Workspace:
    """A case's own folder, with helpers that build hostile files in it."""

    def __init__(self, root: Path, bin_dir: Path):
        self.dir = root
        self.bin = bin_dir  # the folder holding partita and partita-run
        self.dir.mkdir(parents=True)

    def p(self, name: str) -> str:
        return str(self.dir / name)

    def mkdir(self, name: str) -> str:
        (self.dir / name).mkdir(parents=True, exist_ok=True)
        return self.p(name)

    def write(self, name: str, data: bytes, mode: Optional[int] = None) -> str:
        path = self.dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        if mode is not None:
            os.chmod(path, mode)
        return str(path)

    def fifo(self, name: str) -> str:
        (self.dir / name).parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(self.p(name), 0o644)
        return self.p(name)

    def unix_socket(self, name: str) -> str:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(self.p(name))  # the file stays after close; nobody listens
        s.close()
        return self.p(name)

    def symlink(self, target: str, name: str) -> str:
        (self.dir / name).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, self.p(name))
        return self.p(name)

    def hardlink(self, existing: str, name: str) -> str:
        os.link(self.p(existing), self.p(name))
        return self.p(name)

    # --- tensors and models --------------------------------------------------------

    def npy_raw(self, name: str, header: str, data: bytes, version: int = 1, magic: bytes = b"\x93NUMPY") -> str:
        """A .npy file with this header text (padded as numpy pads it) and these data bytes."""
        h = header.encode("latin1")
        lenbytes = 2 if version == 1 else 4
        pad = (64 - (len(magic) + 2 + lenbytes + len(h) + 1) % 64) % 64
        h = h + b" " * pad + b"\n"
        length = struct.pack("<H" if version == 1 else "<I", len(h))
        return self.write(name, magic + bytes([version, 0]) + length + h + data)

    def npy(self, name: str, shape, descr: str = "<f4", data: Optional[bytes] = None) -> str:
        count = 1
        for d in shape:
            count *= d
        shape_text = "(" + "".join(f"{d}, " for d in shape).rstrip(" ") + ")"
        if len(shape) == 1:
            shape_text = f"({shape[0]},)"
        header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape_text)
        if data is None:
            data = b"\0" * (count * int(descr[2:]))
        return self.npy_raw(name, header, data)

    def pb(self, name: str, tensor) -> str:
        return self.write(name, tensor.SerializeToString())

    def tensor(self, dims, raw: Optional[bytes] = None, external=None, name: str = "w"):
        """An onnx TensorProto float32 `dims`: raw_data, or external data key/values."""
        from onnx import TensorProto
        t = TensorProto()
        t.name = name
        t.data_type = TensorProto.FLOAT
        t.dims.extend(dims)
        if external is not None:
            t.data_location = TensorProto.EXTERNAL
            for k, v in external:
                e = t.external_data.add()
                e.key, e.value = k, v
        else:
            count = 1
            for d in dims:
                count *= d
            t.raw_data = raw if raw is not None else b"\0" * (4 * count)
        return t

    def model(self, name: str, external=None, x_dims=(4,)) -> str:
        """y = x + w with x float32 `x_dims` (strings are symbolic) and w float32[4]: w's
        bytes inline, or external data with these key/value entries."""
        from onnx import TensorProto, helper
        w = self.tensor([4], external=external) if external is not None else self.tensor([4], raw=b"\0" * 16)
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_dims))
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
        g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"])], "g", [x], [y], [w])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        m.ir_version = 8
        return self.write(name, m.SerializeToString())

    def compile(self, model: str, name: str) -> str:
        """Compiles `model` (a path) into the artifact `name` with the real CLI, for cases
        that need a valid .pta to start from."""
        subprocess.run([str(self.bin / "partita"), "compile", model, "-o", self.p(name), "-q"], check=True,
                       cwd=self.dir, stdin=subprocess.DEVNULL, timeout=60)
        return self.p(name)

    def weights(self, name: str, count: int = 4) -> str:
        """`count` float32 values 0, 1, 2, ... as a raw external-data file."""
        return self.write(name, struct.pack("<%df" % count, *range(count)))


def snapshot(root: Path):
    """Every entry under `root` (symlinks not followed, FIFOs never opened): type, mode,
    inode, size and, for regular files, a hash of the bytes."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            path = os.path.join(dirpath, n)
            st = os.lstat(path)
            entry = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_ino, st.st_size)
            if stat.S_ISREG(st.st_mode):
                with open(path, "rb") as f:
                    entry += (hashlib.sha256(f.read()).hexdigest(),)
            elif stat.S_ISLNK(st.st_mode):
                entry += (os.readlink(path),)
            out[os.path.relpath(path, root)] = entry
    return out
