#!/usr/bin/python3
"""Writes the fuzz targets' committed seed corpora under fuzz/corpus/:

  onnx/      tiny valid ONNX models made with onnx.helper (Conv, MatMul, Gemm, Reshape,
             Gather, Concat, Slice, Transpose, pooling, Softmax, an elementwise chain,
             a symbolic-dim input, a Reshape whose shape is an input);
  npy/       a few .npy files (numpy's own writer: versions, dtypes, shapes);
  artifact/  with --partita PATH: some of the ONNX seeds compiled by the real CLI (host,
             and dnnl,host, so module blobs are in the corpus); the rest of that folder
             comes from `build-fuzz/bin/artifact_fuzz_seeds fuzz/corpus/artifact`.

Deterministic: the same script writes the same bytes. Keep the corpus small (~200 KB).
Usage: /usr/bin/python3 fuzz/make_seeds.py [--partita build/bin/partita]
"""

import argparse
import io
import os
import subprocess
import tempfile

import numpy as np
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")
F = TensorProto.FLOAT


def weights(name, shape, seed):
    rng = np.random.default_rng(seed)
    return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)


def ints(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def model(nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, "seed", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m.SerializeToString()


def vi(name, shape, dtype=F):
    return helper.make_tensor_value_info(name, dtype, shape)


def onnx_seeds():
    n = helper.make_node
    s = {}
    s["conv_relu_pool"] = model(
        [n("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], strides=[1, 1]),
         n("Relu", ["c"], ["r"]),
         n("MaxPool", ["r"], ["y"], kernel_shape=[2, 2], strides=[2, 2])],
        [vi("x", [1, 2, 4, 4])], [vi("y", [1, 3, 2, 2])],
        [weights("w", [3, 2, 3, 3], 1), weights("b", [3], 2)])
    s["matmul_add_softmax"] = model(
        [n("MatMul", ["x", "w"], ["m"]), n("Add", ["m", "b"], ["a"]), n("Softmax", ["a"], ["y"], axis=-1)],
        [vi("x", [2, 4])], [vi("y", [2, 3])], [weights("w", [4, 3], 3), weights("b", [3], 4)])
    s["gemm_sigmoid"] = model(
        [n("Gemm", ["x", "w", "b"], ["g"], transB=1), n("Sigmoid", ["g"], ["y"])],
        [vi("x", [2, 4])], [vi("y", [2, 3])], [weights("w", [3, 4], 5), weights("b", [3], 6)])
    s["reshape_transpose"] = model(
        [n("Reshape", ["x", "shape"], ["r"]), n("Transpose", ["r"], ["y"], perm=[1, 0])],
        [vi("x", [2, 3, 2])], [vi("y", [6, 2])], [ints("shape", [2, 6])])
    s["gather_axis1"] = model(
        [n("Gather", ["x", "idx"], ["y"], axis=1)],
        [vi("x", [2, 5])], [vi("y", [2, 3])], [ints("idx", [4, 0, -1])])
    s["concat_slice"] = model(
        [n("Concat", ["x", "c"], ["k"], axis=0),
         n("Slice", ["k", "starts", "ends", "axes", "steps"], ["y"])],
        [vi("x", [2, 3])], [vi("y", [2, 3])],
        [weights("c", [2, 3], 7), ints("starts", [1]), ints("ends", [4]), ints("axes", [0]), ints("steps", [2])])
    s["symbolic_batch"] = model(
        [n("MatMul", ["x", "w"], ["m"]), n("Relu", ["m"], ["y"])],
        [vi("x", ["batch", 4])], [vi("y", ["batch", 2])], [weights("w", [4, 2], 8)])
    s["reshape_from_input"] = model(
        [n("Reshape", ["x", "shape"], ["y"])],
        [vi("x", [2, 3]), vi("shape", [2], TensorProto.INT64)], [vi("y", None)])
    s["ewise_chain"] = model(
        [n("Mul", ["x", "k"], ["a"]), n("Add", ["a", "x"], ["b"]), n("Tanh", ["b"], ["c"]),
         n("Sub", ["c", "k"], ["y"])],
        [vi("x", [2, 4])], [vi("y", [2, 4])], [weights("k", [4], 9)])
    s["constant_of_shape_expand"] = model(
        [n("Constant", [], ["shape"], value=ints("v", [2, 3])),
         n("ConstantOfShape", ["shape"], ["z"], value=numpy_helper.from_array(np.array([1.5], np.float32))),
         n("Expand", ["x", "shape"], ["e"]), n("Add", ["z", "e"], ["y"])],
        [vi("x", [1, 3])], [vi("y", [2, 3])])
    s["reduce_globalpool_flatten"] = model(
        [n("GlobalAveragePool", ["x"], ["p"]), n("Flatten", ["p"], ["f"]),
         n("ReduceSum", ["f"], ["y"], axes=[1], keepdims=0)],
        [vi("x", [1, 3, 2, 2])], [vi("y", [1])], opset=13)
    return s


def npy_seeds():
    s = {}
    arrays = {
        "f32_2x3": np.arange(6, dtype=np.float32).reshape(2, 3),
        "i64_vec": np.array([1, -2, 3], dtype=np.int64),
        "u8_scalar": np.array(7, dtype=np.uint8),
        "bool_empty": np.zeros((0, 4), dtype=np.bool_),
        "f16_1x2x2": np.ones((1, 2, 2), dtype=np.float16),
    }
    for name, a in arrays.items():
        buf = io.BytesIO()
        np.save(buf, a, allow_pickle=False)
        s[name] = buf.getvalue()
    # Format version 2.0 (a 4-byte header length).
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.arange(4, dtype=np.int32), version=(2, 0))
    s["i32_v2"] = buf.getvalue()
    return s


def write(folder, name, data):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partita", help="the partita CLI: also compile some ONNX seeds into artifact seeds")
    args = ap.parse_args()
    onnx = onnx_seeds()
    for name, data in onnx.items():
        write(os.path.join(CORPUS, "onnx"), name + ".onnx", data)
    for name, data in npy_seeds().items():
        write(os.path.join(CORPUS, "npy"), name + ".npy", data)
    if args.partita:
        os.makedirs(os.path.join(CORPUS, "artifact"), exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            for name in ("conv_relu_pool", "matmul_add_softmax", "gather_axis1", "reshape_from_input",
                         "ewise_chain"):
                src = os.path.join(tmp, name + ".onnx")
                write(tmp, name + ".onnx", onnx[name])
                made = []
                for backends in ("host", "dnnl,ewise,host"):
                    out = os.path.join(CORPUS, "artifact", "%s_%s.pta" % (name, backends.split(",")[0]))
                    subprocess.run([args.partita, "compile", src, "-o", out, "--backends", backends,
                                    "--threads", "1", "-q"], check=True)
                    with open(out, "rb") as f:
                        data = f.read()
                    if data in made:  # no backend took anything: the host's artifact again
                        os.remove(out)
                    made.append(data)


if __name__ == "__main__":
    main()
