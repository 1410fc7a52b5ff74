"""docs/threads.md: one OpenMP runtime for partita, the oneDNN it shares and packages
imported after it; a warning when oneDNN was loaded on GCC's libgomp before partita."""
import os
import subprocess

from conftest import BUILD_DIR, SOURCE_DIR

PYTHON = "/usr/bin/python3"

# Prints where libdnnl's and torch's GOMP_parallel calls went (LD_DEBUG=bindings is
# read from stderr by the test), after a run on oneDNN.
SCRIPT = """
import sys
first = sys.argv[1]
if first == "torch":
    import torch
import numpy as np
import partita
if first != "torch":
    import torch
x = np.load(sys.argv[2])
s = partita.InferenceSession(sys.argv[3], providers=["dnnl", "host"])
s.run(None, {"input": x})
torch.nn.functional.conv2d(torch.ones(1, 3, 8, 8), torch.ones(4, 3, 3, 3))
"""


def run(first):
    fashion = os.path.join(SOURCE_DIR, "models", "fashion")
    env = dict(os.environ, PYTHONPATH=os.path.join(BUILD_DIR, "python"), LD_DEBUG="bindings")
    r = subprocess.run([PYTHON, "-W", "always", "-c", SCRIPT, first, os.path.join(fashion, "test_images.npy"),
                        os.path.join(fashion, "fashion_cnn.onnx")], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    bound = {}
    for line in r.stderr.splitlines():
        if "normal symbol `GOMP_parallel'" not in line:
            continue
        user, target = line.split("binding file ")[1].split(" [")[0], line.split(" to ")[1].split(" [")[0]
        bound[os.path.basename(user).split(".")[0]] = os.path.basename(target)
    warned = "RuntimeWarning: partita: libdnnl was loaded before partita" in r.stderr
    return bound, warned


def test_partita_first_puts_onednn_and_torch_on_libomp():
    bound, warned = run("partita")
    assert not warned
    assert bound["libdnnl"].startswith("libomp"), bound
    assert bound["_partita"].startswith("libomp"), bound
    assert bound["libtorch_cpu"].startswith("libomp"), bound


def test_torch_first_leaves_onednn_on_libgomp_and_warns():
    bound, warned = run("torch")
    assert warned
    assert bound["libdnnl"].startswith("libgomp"), bound
    assert bound["_partita"].startswith("libomp"), bound
