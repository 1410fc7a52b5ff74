#!/usr/bin/python3
"""Writes minimal reproducers of fuzz findings that lie outside the importer, the .npy
reader, the artifact reader and the harnesses (README.md lists them and whose they
are). Each is a tiny ONNX model; replay one with
    build-fuzz/bin/onnx_fuzzer fuzz/findings/onnx/<name>.onnx
or through the CLI, e.g. build/bin/partita compile fuzz/findings/onnx/<name>.onnx -o /tmp/x.pta
Usage: /usr/bin/python3 fuzz/findings/make_findings.py"""

import os

import numpy as np
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
F = TensorProto.FLOAT


def save(name, nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, "finding", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    os.makedirs(os.path.join(HERE, "onnx"), exist_ok=True)
    with open(os.path.join(HERE, "onnx", name + ".onnx"), "wb") as f:
        f.write(m.SerializeToString())


def ints(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.int64), name)


def floats(name, values):
    return numpy_helper.from_array(np.array(values, dtype=np.float32), name)


def main():
    n = helper.make_node
    vi = helper.make_tensor_value_info
    big = [2**53 + 2, 2**61 + 3]  # each dim fits int64, their product does not
    save("reshape_huge_target",
         [n("Reshape", ["x", "shape"], ["y"])],
         [vi("x", F, [2, 3])], [vi("y", F, None)], [ints("shape", big)])
    save("constant_of_shape_huge",
         [n("ConstantOfShape", ["shape"], ["y"])],
         [], [vi("y", F, None)], [ints("shape", big)])
    save("expand_huge",
         [n("Expand", ["x", "shape"], ["y"])],
         [vi("x", F, [1, 1])], [vi("y", F, None)], [ints("shape", big)])
    save("pad_huge",
         [n("Pad", ["x", "pads"], ["y"])],
         [vi("x", F, [1, 1, 3, 3])], [vi("y", F, None)], [ints("pads", [0, 0, 2**32, 2**32, 0, 0, 0, 0])])
    save("resize_huge_scale",
         [n("Resize", ["x", "", "scales"], ["y"], mode="nearest")],
         [vi("x", F, [1, 1, 3, 3])], [vi("y", F, None)], [floats("scales", [1, 1, 1e22, 1])])
    save("sigmoid_nan",
         [n("Add", ["x", "w"], ["a"]), n("Sigmoid", ["a"], ["y"])],
         [vi("x", F, [1])], [vi("y", F, [1])], [floats("w", [np.nan])])
    save("selu_nan",
         [n("Add", ["x", "w"], ["a"]), n("Selu", ["a"], ["y"])],
         [vi("x", F, [1])], [vi("y", F, [1])], [floats("w", [np.nan])])
    # A reflect Pad that takes the one channel away (-1) and lengthens H by 2^32 + 257,
    # then an AveragePool: no planes, 537 M output rows.
    save("pool_no_channels_tall_output",
         [n("Pad", ["x", "pads"], ["p"], mode="reflect"),
          n("AveragePool", ["p"], ["y"], kernel_shape=[2, 2], strides=[8, 65])],
         [vi("x", F, [1, 1, 3, 3])], [vi("y", F, None)], [ints("pads", [0, -1, 1, 1, 0, 0, 2**32 + 256, 1])])
    # Symbolic height and width, then a TopK of 2^30 + 3 elements: every representative
    # side up to 16384 leaves the TopK refusing its shape.
    save("topk_huge_k_symbolic_sides",
         [n("ConvTranspose", ["x", "w"], ["c"], strides=[2, 2]), n("Flatten", ["c"], ["f"]),
          n("TopK", ["f", "k"], ["y", "i"])],
         [vi("x", F, [1, 2, "h", "w"])], [vi("y", F, None), vi("i", TensorProto.INT64, None)],
         [floats("w", np.linspace(-1, 1, 8).reshape(2, 1, 2, 2)), ints("k", [2**30 + 3])])


if __name__ == "__main__":
    main()
