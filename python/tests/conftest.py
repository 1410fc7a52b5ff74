"""Shared fixtures of the Python package's tests (run by `make test` through CTest, with
PYTHONPATH=build/python and Debian's /usr/bin/python3; see python/CMakeLists.txt)."""
import os
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import partita

SOURCE_DIR = os.environ.get("PARTITA_SOURCE_DIR", os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
BUILD_DIR = os.environ.get("PARTITA_BUILD_DIR", os.path.join(SOURCE_DIR, "build"))
BIN_DIR = os.environ.get("PARTITA_BIN_DIR", os.path.join(BUILD_DIR, "bin"))
MODELS_DIR = os.path.join(BUILD_DIR, "models")  # scripts/export_models.py's output (CTest fixture)
FASHION = os.path.join(SOURCE_DIR, "models", "fashion")


def largest_rel(actual, expected):
    """max|a - e| / max|e|, the project's agreement measure."""
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    assert actual.shape == expected.shape
    return float(np.max(np.abs(actual - expected)) / np.max(np.abs(expected)))


def cli(*args, check=True):
    """Runs build/bin/partita; returns the CompletedProcess (stdout and stderr as text)."""
    r = subprocess.run([os.path.join(BIN_DIR, "partita"), *args], capture_output=True, text=True)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def make_model(nodes, inputs, outputs, initializers=(), opset=13, domains=()):
    """An ONNX ModelProto from helper pieces; `domains`: (domain, version) opsets too."""
    graph = helper.make_graph(list(nodes), "g", list(inputs), list(outputs), initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)] +
                              [helper.make_opsetid(d, v) for d, v in domains])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


@pytest.fixture(scope="session")
def add_model():
    """y = x + b for float32 x[2,3] (b a constant): small and exact."""
    b = helper.make_tensor("b", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0])
    return make_model(
        [helper.make_node("Add", ["x", "b"], ["y"], name="add")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], [b])


@pytest.fixture(scope="session")
def two_io_model():
    """Two inputs and two outputs: s = a + c, d = a - c, over float32[batch, 4]
    (`batch` symbolic) and c float32[N?, 4] with an unnamed first dimension."""
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, ["batch", 4])
    c = helper.make_tensor_value_info("c", TensorProto.FLOAT, [None, 4])
    return make_model(
        [helper.make_node("Add", ["a", "c"], ["s"], name="add"), helper.make_node("Sub", ["a", "c"], ["d"], name="sub")],
        [a, c],
        [helper.make_tensor_value_info("s", TensorProto.FLOAT, ["batch", 4]),
         helper.make_tensor_value_info("d", TensorProto.FLOAT, ["batch", 4])])


@pytest.fixture(scope="session")
def fashion_onnx():
    return os.path.join(FASHION, "fashion_cnn.onnx")


@pytest.fixture(scope="session")
def fashion_images():
    return np.load(os.path.join(FASHION, "test_images.npy"))


@pytest.fixture(scope="session")
def fashion_pta(tmp_path_factory, fashion_onnx):
    """The demo model compiled with dnnl,host by partita.compile."""
    path = str(tmp_path_factory.mktemp("fashion") / "fashion_cnn.pta")
    partita.compile(fashion_onnx, path, backends=["dnnl", "host"])
    return path


def exported(name):
    """(onnx path, input, PyTorch's output) of a model scripts/export_models.py wrote."""
    onnx_path = os.path.join(MODELS_DIR, name + ".onnx")
    if not os.path.isfile(onnx_path):
        pytest.fail(f"{onnx_path} is missing: the CTest fixture python_models exports it "
                    f"(scripts/export_models.py --out {MODELS_DIR} --models {name})")
    return (onnx_path, np.load(os.path.join(MODELS_DIR, name + ".input.npy")),
            np.load(os.path.join(MODELS_DIR, name + ".expected.npy")))
