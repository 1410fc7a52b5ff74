#!/usr/bin/python3
"""No slow paths inside oneDNN regions: small models shaped like the bench set and like
shipped detectors (conv blocks, depthwise, squeeze-excite, attention, upsampling FPN
necks, keyword-spotting CNNs) compiled with --backends dnnl,host and run once with
ONEDNN_VERBOSE=1. Every primitive oneDNN executes must come from an optimized
implementation: none whose name starts with "ref" (oneDNN's reference C++ loops).
Each model also names primitive kinds it must reach, so a model that silently fell
back to the host cannot pass: a kind counts when oneDNN ran it or when the dnnl module
ran it with its own code (a `partita:` implementation in the run's --profile trace,
e.g. a concat of channels-last tensors). The convolutional ones run again with symbolic dims,
compiled without --shape and run far from the representative shape (the stored weights
layouts must still find fast kernels). Checks names, not times.

  /usr/bin/python3 tests/dnnl_impls/check_impls.py --partita build/bin/partita
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT
rng = np.random.default_rng(0)
POLYMORPHIC = False


class Builder:
    def __init__(self):
        self.nodes, self.inits, self.n = [], [], 0

    def const(self, shape, scale=0.1):
        name = "c%d" % len(self.inits)
        self.inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def ints(self, values):
        name = "c%d" % len(self.inits)
        self.inits.append(numpy_helper.from_array(np.array(values, np.int64), name))
        return name

    def floats(self, values):
        name = "c%d" % len(self.inits)
        self.inits.append(numpy_helper.from_array(np.array(values, np.float32), name))
        return name

    def uint8(self, value):
        name = "c%d" % len(self.inits)
        self.inits.append(numpy_helper.from_array(np.array(value, np.uint8), name))
        return name

    def op(self, op_type, inputs, **attrs):
        self.n += 1
        out = "t%d" % self.n
        self.nodes.append(helper.make_node(op_type, inputs, [out], name="%s_%d" % (op_type, self.n), **attrs))
        return out

    def conv(self, x, cin, cout, k, stride=1, group=1, act="Relu"):
        y = self.op("Conv", [x, self.const([cout, cin // group, k, k]), self.const([cout])],
                    kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4, group=group)
        return self.op(act, [y]) if act else y

    def model(self, x_shape, out, path):
        if POLYMORPHIC:  # the batch and every spatial dim symbolic, as detectors ship
            x_shape = ["batch", x_shape[1]] + ["side%d" % i for i in range(len(x_shape) - 2)]
        g = helper.make_graph(self.nodes, "m", [helper.make_tensor_value_info("x", F, x_shape)],
                              [helper.make_tensor_value_info(out, F, None)], self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])  # HardSwish is opset 14
        m.ir_version = 8
        with open(path, "wb") as f:
            f.write(m.SerializeToString())


def resnet_block(path):
    b = Builder()
    y = b.conv("x", 3, 32, 7, stride=2)
    y = b.op("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    z = b.conv(y, 32, 32, 3)
    z = b.conv(z, 32, 32, 3, act=None)
    y = b.op("Relu", [b.op("Add", [z, y])])
    y = b.op("Flatten", [b.op("GlobalAveragePool", [y])])
    y = b.op("Gemm", [y, b.const([10, 32]), b.const([10])], transB=1)
    b.model([1, 3, 64, 64], y, path)
    return {"convolution", "pooling", "matmul"}


def mobile_block(path):
    """Inverted residual with depthwise 3x3 and 5x5, HardSwish, squeeze-excite."""
    b = Builder()
    y = b.conv("x", 3, 16, 3, stride=2, act="HardSwish")
    e = b.conv(y, 16, 64, 1, act="Relu")
    d = b.conv(e, 64, 64, 3, group=64, act="HardSwish")
    d = b.conv(d, 64, 64, 5, group=64, act="Relu")
    s = b.op("GlobalAveragePool", [d])
    s = b.conv(s, 64, 16, 1, act="Relu")
    s = b.conv(s, 16, 64, 1, act="HardSigmoid")
    d = b.op("Mul", [d, s])
    p = b.conv(d, 64, 16, 1, act=None)
    y = b.op("Add", [p, y])
    b.model([1, 3, 64, 64], y, path)
    # The squeeze-excite's pool and Mul are partita's own kernels (channel_mean,
    # scale_channels): no oneDNN primitive, so not in the verbose log.
    return {"convolution"}


def fpn_neck(path):
    """OCR-detector neck: strided backbone, nearest 2x Resize + Add, a ConvTranspose
    2x2 stride 2 upsampler, Concat, Sigmoid head."""
    b = Builder()
    c2 = b.conv("x", 3, 24, 3, stride=2)
    c3 = b.conv(c2, 24, 24, 3, stride=2)
    c4 = b.conv(c3, 24, 24, 3, stride=2)
    up = b.op("Resize", [c4, "", b.floats([1, 1, 2, 2])], mode="nearest",
              coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    p3 = b.op("Add", [up, c3])
    up = b.op("Resize", [p3, "", b.floats([1, 1, 2, 2])], mode="linear")
    p2 = b.op("Add", [up, c2])
    d = b.op("ConvTranspose", [p2, b.const([24, 24, 2, 2]), b.const([24])], kernel_shape=[2, 2], strides=[2, 2])
    d = b.op("Relu", [d])
    u = b.op("ConvTranspose", [p3, b.const([24, 24, 2, 2]), b.const([24])], kernel_shape=[2, 2], strides=[2, 2])
    cat = b.op("Concat", [b.op("Resize", [u, "", b.floats([1, 1, 2, 2])], mode="nearest",
                                  coordinate_transformation_mode="asymmetric", nearest_mode="floor"), d], axis=1)
    y = b.op("Sigmoid", [b.conv(cat, 48, 1, 3, act=None)])
    b.model([1, 3, 96, 128], y, path)
    return {"convolution", "resampling", "concat"}


def kws_cnn(path):
    """Keyword-spotting embedding CNN: LeakyRelu, elementwise Max of two branches, MaxPool."""
    b = Builder()
    a = b.conv("x", 1, 32, 3, act=None)
    a = b.op("LeakyRelu", [a], alpha=0.2)
    c = b.conv("x", 1, 32, 3, act=None)
    c = b.op("LeakyRelu", [c], alpha=0.2)
    m = b.op("Max", [a, c])
    m = b.op("MaxPool", [m], kernel_shape=[2, 2], strides=[2, 2])
    n = b.op("Min", [b.conv(m, 32, 32, 3, act=None), b.floats([6.0])])
    b.model([1, 1, 76, 32], n, path)
    return {"convolution", "binary", "pooling"}


def shuffle_block(path):
    """ShuffleNetV2 units: channels split in halves (Slice), a 1x1 / depthwise 3x3 / 1x1
    branch on one half, Concat, channel shuffle (Reshape, Transpose, Reshape); 58
    channels a half, which channel blocks of 16 pad (oneDNN 2.6 then concatenates with
    its reference code)."""
    b = Builder()
    y = b.conv("x", 3, 116, 3, stride=2)
    for _ in range(2):
        x1 = b.op("Slice", [y, b.ints([0]), b.ints([58]), b.ints([1])])
        x2 = b.op("Slice", [y, b.ints([58]), b.ints([116]), b.ints([1])])
        z = b.conv(x2, 58, 58, 1)
        z = b.conv(z, 58, 58, 3, group=58, act=None)
        z = b.conv(z, 58, 58, 1)
        cat = b.op("Concat", [x1, z], axis=1)
        shape = b.op("Shape", [cat])
        n, hw = (b.op("Slice", [shape, b.ints([s]), b.ints([e])]) for s, e in ((0, 1), (2, 4)))
        split = b.op("Concat", [n, b.ints([2, 58]), hw], axis=0)
        t = b.op("Transpose", [b.op("Reshape", [cat, split])], perm=[0, 2, 1, 3, 4])
        y = b.op("Reshape", [t, b.op("Concat", [n, b.ints([116]), hw], axis=0)])
    b.model([1, 3, 32, 32], y, path)
    return {"convolution", "concat", "reorder"}


def encoder(path):
    """One attention block: MatMul projections, Softmax, LayerNormalization written out."""
    b = Builder()
    h, s = 64, 32
    q = b.op("MatMul", ["x", b.const([h, h])])
    k = b.op("MatMul", ["x", b.const([h, h])])
    v = b.op("MatMul", ["x", b.const([h, h])])
    att = b.op("Softmax", [b.op("Div", [b.op("MatMul", [q, b.op("Transpose", [k], perm=[0, 2, 1])]),
                                        b.floats([8.0])])], axis=-1)
    o = b.op("Add", [b.op("MatMul", [att, v]), "x"])
    mean = b.op("ReduceMean", [o], axes=[-1])
    d = b.op("Sub", [o, mean])
    var = b.op("ReduceMean", [b.op("Pow", [d, b.floats([2.0])])], axes=[-1])
    n = b.op("Div", [d, b.op("Sqrt", [b.op("Add", [var, b.floats([1e-5])])])])
    y = b.op("Add", [b.op("Mul", [n, b.const([h], 1.0)]), b.const([h])])
    b.model([1, s, h], y, path)
    return {"matmul"}  # the Softmax along the last dim is the module's own kernel (step kind 23)


def qdq_cnn(path):
    """A static int8 (QDQ) block: int8 weights through DequantizeLinear, each activation
    through a per-tensor QuantizeLinear -> DequantizeLinear pair, a residual Add between
    pairs. The convolutions run on oneDNN's int8 kernels (QLinearConv, the residual Add
    and Relu as one int8 binary step), the quantization of the input and the
    dequantizations as int8 reorders; the MaxPool whose output is not quantized again,
    and the convolution reading it, stay float."""
    b = Builder()

    def qdq(x, scale, zero):
        s, z = b.floats([scale]), b.uint8(zero)
        return b.op("DequantizeLinear", [b.op("QuantizeLinear", [x, s, z]), s, z])

    def qconv(x, cin, cout, k, act="Relu"):
        w = (rng.standard_normal((cout, cin, k, k)) * 0.1).astype(np.float32)
        ws = np.abs(w).reshape(cout, -1).max(axis=1) / 127
        wq = np.clip(np.rint(w / ws[:, None, None, None]), -127, 127).astype(np.int8)
        name = "c%d" % len(b.inits)
        b.inits += [numpy_helper.from_array(wq, name), numpy_helper.from_array(ws.astype(np.float32), name + "_s"),
                    numpy_helper.from_array(np.zeros(cout, np.int8), name + "_z")]
        wd = b.op("DequantizeLinear", [name, name + "_s", name + "_z"], axis=0)
        y = b.op("Conv", [x, wd, b.const([cout])], kernel_shape=[k, k], pads=[k // 2] * 4)
        return b.op(act, [y]) if act else y

    y = qdq("x", 0.02, 128)
    y = qdq(qconv(y, 3, 32, 3), 0.03, 0)
    z = qdq(qconv(y, 32, 32, 3, act=None), 0.03, 128)
    y = qdq(b.op("Relu", [b.op("Add", [z, y])]), 0.03, 0)
    y = b.op("MaxPool", [y], kernel_shape=[2, 2], strides=[2, 2])
    y = qdq(qconv(y, 32, 16, 1), 0.02, 0)
    b.model([1, 3, 32, 32], y, path)
    return {"convolution", "pooling", "int8 convolution", "int8 reorder"}



def dynamic_cnn(path):
    """A dynamic-int8 CNN (scripts/quantize_int8.py dynamic: DynamicQuantizeLinear ->
    ConvInteger -> Cast -> Mul chains, as the U-Net's): the quantization of each
    activation runs in the oneDNN region (as the module's own kernel, which
    ONEDNN_VERBOSE does not list: dnnl_kernels.h), the convolutions in float32 with the
    scale products as their post-ops (no steps of their own since the prescale), all in
    one region."""
    b = Builder()
    y = b.conv("x", 3, 16, 3)
    y = b.op("MaxPool", [b.conv(y, 16, 16, 3)], kernel_shape=[2, 2], strides=[2, 2])
    y = b.conv(y, 16, 24, 3)
    b.model([1, 3, 48, 64], y, path)
    m = onnx.load(path)  # the quantizer's checker wants the output's rank
    for i in range(4):
        m.graph.output[0].type.tensor_type.shape.dim.add().dim_param = "o%d" % i
    onnx.save(m, path)
    subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                                                 "quantize_int8.py"), "dynamic", path, path], check=True,
                   capture_output=True)
    return {"convolution"}


MODELS = [resnet_block, mobile_block, fpn_neck, kws_cnn, shuffle_block, encoder, qdq_cnn, dynamic_cnn]
# The convolutional models again with symbolic dims: compiled without --shape (the
# weights layouts chosen at the representative shape, 224 a side) and run at these
# shapes, far from it: the stored layouts must still find fast kernels there.
POLY_RUNS = {resnet_block: [1, 3, 320, 448], mobile_block: [2, 3, 96, 160], fpn_neck: [1, 3, 640, 640],
             kws_cnn: [1, 1, 152, 40], shuffle_block: [2, 3, 64, 96], dynamic_cnn: [1, 3, 96, 136]}


def run_model(args, make, tmp, polymorphic):
    global POLYMORPHIC
    POLYMORPHIC = polymorphic
    name = make.__name__ + (" (symbolic dims, run at %s)" % "x".join(map(str, POLY_RUNS[make])) if polymorphic else "")
    path = os.path.join(tmp, make.__name__ + ("_poly" if polymorphic else "") + ".onnx")
    want_kinds = make(path)
    env = dict(os.environ, ONEDNN_VERBOSE="1")
    if polymorphic:
        pta, x = path[:-5] + ".pta", path[:-5] + ".x.npy"
        np.save(x, rng.standard_normal(POLY_RUNS[make]).astype(np.float32))
        r = subprocess.run([args.partita, "compile", path, "-o", pta, "--backends", "dnnl,host", "-t", "1"],
                           capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            return ["%s: partita compile failed (%d): %s" % (name, r.returncode, r.stderr.strip())]
        cmd = [args.partita, "run", pta, "-i", "x=" + x, "-q", "-t", "1"]
    else:
        cmd = [args.partita, "run", path, "--backends", "dnnl,host", "-q", "-t", "1"]
    trace = path[:-5] + ".trace.json"
    cmd += ["--profile", trace, "--profile-top", "0"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    if r.returncode != 0:
        return ["%s: partita run failed (%d): %s" % (name, r.returncode, r.stderr.strip())]
    failures = []
    impls = {}
    for line in r.stdout.splitlines():
        f = line.split(",")
        if len(f) > 4 and f[0] == "onednn_verbose" and f[1] == "exec":
            # A primitive reading or writing uint8/int8 data also counts as "int8 <kind>".
            kind = ("int8 " if any(t in line for t in ("src_u8", "src_s8", "dst_u8", "dst_s8")) else "") + f[3]
            impls.setdefault((kind, f[4]), 0)
            impls[(kind, f[4])] += 1
    # Steps of the dnnl module that are its own code, not a oneDNN primitive.
    with open(trace) as f:
        for e in json.load(f):  # (the JSON array form of the Trace Event Format)
            a = e.get("args", {})
            if e.get("cat") == "primitive" and a.get("backend") == "dnnl" and a.get("impl", "").startswith("partita:"):
                impls.setdefault((a["kind"], a["impl"]), 0)
                impls[(a["kind"], a["impl"])] += 1
    kinds = {k.split("_v2")[0] for k, _ in impls}
    kinds |= {k.split(" ", 1)[1] for k in kinds if k.startswith("int8 ")}
    print("%s: %s" % (name, ", ".join("%s %s x%d" % (k, i, n) for (k, i), n in sorted(impls.items()))))
    for (kind, impl), n in impls.items():
        if impl.startswith("ref"):
            failures.append("%s: %d %s primitive(s) run oneDNN's reference implementation %s" % (name, n, kind, impl))
    missing = want_kinds - kinds
    if missing:
        failures.append("%s: expected the dnnl module to run %s, saw only %s"
                        % (name, ", ".join(sorted(missing)), ", ".join(sorted(kinds))))
    if "deconvolution" in kinds:
        failures.append("%s: an upsampling ConvTranspose ran as a deconvolution primitive" % name)
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partita", required=True)
    args = ap.parse_args()
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        for make in MODELS:
            failures += run_model(args, make, tmp, False)
        for make in POLY_RUNS:
            failures += run_model(args, make, tmp, True)
    for f in failures:
        print("FAIL " + f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
