"""Items 5 and 6: the package imports from build/python with Debian's python3, installs
where that python3 finds it, has its stub and docstrings, and examples/classify.py gives
the C++ example's output."""
import os
import subprocess
import sys

import partita
from conftest import BIN_DIR, BUILD_DIR, FASHION, SOURCE_DIR, cli

PYTHON = "/usr/bin/python3"


def test_runs_on_debians_python():
    assert sys.executable == PYTHON or os.path.realpath(sys.executable) == os.path.realpath(PYTHON)
    assert os.path.dirname(partita.__file__) == os.path.join(BUILD_DIR, "python", "partita")


def test_import_from_the_build_tree():
    env = dict(os.environ, PYTHONPATH=os.path.join(BUILD_DIR, "python"))
    r = subprocess.run([PYTHON, "-c", "import partita; print(partita.__version__, partita.BACKENDS)"],
                       capture_output=True, text=True, env=env, cwd="/")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("0.1.0 ['host'")


def test_cmake_install_puts_it_where_debians_python_looks(tmp_path):
    prefix = tmp_path / "usr" / "local"
    r = subprocess.run(["cmake", "--install", BUILD_DIR, "--component", "python", "--prefix", str(prefix)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = prefix / "lib" / version / "dist-packages"
    installed = sorted(os.listdir(site / "partita"))
    assert "__init__.py" in installed and "__init__.pyi" in installed and "py.typed" in installed
    assert any(f.startswith("_partita") and f.endswith(".so") for f in installed)
    # /usr/local/lib/pythonX.Y/dist-packages is on Debian's python3's path
    r = subprocess.run([PYTHON, "-c", "import sys; print('\\n'.join(sys.path))"], capture_output=True, text=True,
                       env={"PATH": "/usr/bin:/bin"})
    assert f"/usr/local/lib/{version}/dist-packages" in r.stdout.splitlines()
    # and the installed copy works on its own (outside the build tree)
    r = subprocess.run([PYTHON, "-c", "import partita; print(partita.__file__); "
                        "print(partita.InferenceSession(" + repr(os.path.join(FASHION, "fashion_cnn.onnx")) +
                        ").get_inputs()[0].shape)"],
                       capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site)},
                       cwd="/")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [str(site / "partita" / "__init__.py"), "[100, 1, 28, 28]"]


def test_docstrings_and_stub():
    for obj in (partita.InferenceSession, partita.InferenceSession.run, partita.compile, partita.load,
                partita.inspect, partita.Model, partita.Model.session, partita.Session.run, partita.SessionOptions,
                partita.NodeArg, partita.Error, partita.InvalidArgument):
        assert obj.__doc__ and len(obj.__doc__) > 20, obj
    stub = open(os.path.join(os.path.dirname(partita.__file__), "__init__.pyi")).read()
    for name in partita.__all__:
        assert f"def {name}(" in stub or f"class {name}" in stub or f"{name}:" in stub, name


def test_classify_example_matches_the_cpp_example(tmp_path):
    pta = tmp_path / "fashion_cnn.pta"
    cli("compile", os.path.join(FASHION, "fashion_cnn.onnx"), "-o", str(pta), "-q")
    data = [os.path.join(FASHION, f) for f in ("test_images.npy", "test_labels.npy", "classes.txt")]
    cpp = subprocess.run([os.path.join(BIN_DIR, "classify"), str(pta), *data], capture_output=True, text=True)
    assert cpp.returncode == 0, cpp.stderr
    env = dict(os.environ, PYTHONPATH=os.path.join(BUILD_DIR, "python"))
    for model in (str(pta), os.path.join(FASHION, "fashion_cnn.onnx")):
        py = subprocess.run([PYTHON, os.path.join(SOURCE_DIR, "examples", "classify.py"), model, *data],
                            capture_output=True, text=True, env=env)
        assert py.returncode == 0, py.stderr
        assert py.stdout == cpp.stdout
    assert "accuracy: " in cpp.stdout
