"""Item 4: errors are partita.Error subclasses matching the C++ error codes, with the C++
messages unchanged (the CLI prints the same message after "error: ")."""
import os
import pathlib

import pytest
from onnx import TensorProto, helper

import partita
from conftest import cli, make_model


def cli_error(*args):
    r = cli(*args, check=False)
    assert r.returncode == 1, r
    assert r.stderr.startswith("error: "), r.stderr
    return r.stderr[len("error: "):].rstrip("\n")


def test_hierarchy():
    for cls in (partita.InvalidModel, partita.Unsupported, partita.InvalidArgument, partita.InvalidArtifact,
                partita.IoError, partita.InternalError):
        assert issubclass(cls, partita.Error) and issubclass(cls, Exception)
        assert cls.__module__ == "partita"
    assert issubclass(partita.InvalidArgument, ValueError)
    assert issubclass(partita.IoError, OSError)


def test_invalid_artifact_message_unchanged(tmp_path, fashion_pta):
    data = bytearray(pathlib.Path(fashion_pta).read_bytes())
    data[200] ^= 0x40  # inside the manifest
    bad = tmp_path / "bad.pta"
    bad.write_bytes(bytes(data))
    expected = cli_error("inspect", str(bad))
    assert "checksum mismatch" in expected
    for call in (lambda: partita.load(str(bad)), lambda: partita.inspect(str(bad)),
                 lambda: partita.InferenceSession(str(bad))):
        with pytest.raises(partita.InvalidArtifact) as e:
            call()
        assert str(e.value) == expected
    with pytest.raises(partita.InvalidArtifact, match="invalid artifact '<bytes>'"):
        partita.load(bytes(data))
    with pytest.raises(partita.InvalidArtifact):
        partita.load(b"not an artifact")


def test_corrupted_weights_found_by_verify(tmp_path, fashion_pta):
    data = bytearray(pathlib.Path(fashion_pta).read_bytes())
    data[-100] ^= 0x01  # inside the last tensor
    bad = tmp_path / "w.pta"
    bad.write_bytes(bytes(data))
    partita.inspect(str(bad))  # weights are checked on demand
    with pytest.raises(partita.InvalidArtifact, match=r"are corrupted \(checksum mismatch\)") as e:
        partita.inspect(str(bad), verify=True)
    assert str(e.value) == cli_error("inspect", str(bad), "--verify")


def test_invalid_model_message_unchanged(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07\x12garbage that is no protobuf")
    expected = cli_error("run", str(bad))
    with pytest.raises(partita.InvalidModel) as e:
        partita.InferenceSession(str(bad))
    assert str(e.value) == expected
    with pytest.raises(partita.InvalidModel):
        partita.compile(str(bad), tmp_path / "x.pta")
    assert not (tmp_path / "x.pta").exists()


def test_unsupported_message_unchanged(tmp_path):
    model = make_model([helper.make_node("Frobnicate", ["x"], ["y"], domain="com.example", name="f")],
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                       [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], domains=[("com.example", 1)])
    path = tmp_path / "u.onnx"
    path.write_bytes(model.SerializeToString())
    expected = cli_error("compile", str(path), "-o", str(tmp_path / "u.pta"))
    with pytest.raises(partita.Unsupported) as e:
        partita.compile(str(path), tmp_path / "u.pta")
    assert str(e.value) == expected
    with pytest.raises(partita.Unsupported):
        partita.InferenceSession(model.SerializeToString())


def test_io_errors(tmp_path, add_model):
    missing = str(tmp_path / "missing.pta")
    expected = cli_error("inspect", missing)
    with pytest.raises(partita.IoError) as e:
        partita.load(missing)
    assert str(e.value) == expected
    assert isinstance(e.value, OSError)
    fifo = tmp_path / "fifo.onnx"
    os.mkfifo(fifo)  # refused, not waited on
    with pytest.raises(partita.IoError, match="is a FIFO, not a regular file"):
        partita.InferenceSession(str(fifo))
    with pytest.raises(partita.IoError):
        partita.compile(add_model, tmp_path / "no-such-dir" / "m.pta")


def test_bad_arguments(tmp_path, add_model):
    with pytest.raises(partita.InvalidArgument, match="must be a path"):
        partita.load(3.5)
    with pytest.raises(partita.InvalidArgument):
        partita.load(str(tmp_path), threads=0)
    with pytest.raises(TypeError):
        partita.load(str(tmp_path), 2)  # threads is keyword-only
    with pytest.raises(partita.InvalidArgument, match="must be a path"):
        partita.InferenceSession(None)
