#!/usr/bin/python3
"""Opset 16-21 ops against ONNX Runtime (CTests `opset_<case>`; docs/ops.md).

Each case is one small model built with onnx.helper directly: Debian's onnx 1.12
knows opsets up to 17 and its checker refuses later ones, so no checker or shape
inference runs. ONNX Runtime (bench/node_modules/onnxruntime-node, via
ort_reference.js) gives the reference outputs; partita runs the model from .onnx on
the host, from .onnx with --backends dnnl,ewise,host, and from a compiled .pta, and
each output must match: max|a-e| / max|e| <= 1e-4 for floats, exactly otherwise.
Error cases (refused opsets and types, and bad data for the new kernels) check
partita's message instead.

Usage: check_opset_ops.py PARTITA_BINARY WORK_DIR CASE   (--list prints the cases)
Exit 77 (CTest: skipped) when onnxruntime-node is not installed (bench/run.sh does).
"""
import os
import subprocess
import sys

import numpy as np
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
ORT = os.path.join(HERE, "..", "..", "bench", "node_modules", "onnxruntime-node")
TOL = 1e-4
F = TensorProto.FLOAT
I64 = TensorProto.INT64
IR_FOR_OPSET = {11: 6, 13: 7, 15: 8, 16: 8, 17: 8, 18: 8, 19: 9, 20: 9, 21: 10, 22: 10}

rng = np.random.default_rng(7)


def rand(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def model(opset, nodes, inputs, outputs, inits=(), extra_opsets=()):
    """inputs/outputs: (name, elem_type, shape or None)."""
    g = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), *extra_opsets])
    m.ir_version = IR_FOR_OPSET[opset]
    return m


def const(name, array):
    return helper.make_tensor(name, {np.dtype(np.int64): I64, np.dtype(np.float32): F,
                                     np.dtype(np.int32): TensorProto.INT32}[array.dtype],
                              array.shape, array.flatten().tolist())


def unary(op, opset, x, **attrs):
    return model(opset, [helper.make_node(op, ["x"], ["y"], **attrs)], [("x", F, list(x.shape))], [("y", F, None)]), {"x": x}


CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


# ---- opset 18 ----------------------------------------------------------------------
@case
def reduce_mean_axes_input():
    x = rand(2, 3, 4)
    return model(18, [helper.make_node("ReduceMean", ["x", "axes"], ["y"], keepdims=0)],
                 [("x", F, [2, 3, 4])], [("y", F, None)], [const("axes", np.array([0, -1], np.int64))]), {"x": x}


@case
def reduce_max_noop_with_empty_axes():
    return model(18, [helper.make_node("ReduceMax", ["x"], ["y"], noop_with_empty_axes=1)],
                 [("x", F, [2, 3])], [("y", F, None)]), {"x": rand(2, 3)}


@case
def reduce_l2_axes_from_input():
    # The axes are a graph input: known only at run time.
    return model(18, [helper.make_node("ReduceL2", ["x", "axes"], ["y"])],
                 [("x", F, [3, 4, 5]), ("axes", I64, [1])], [("y", F, None)]), {
                     "x": rand(3, 4, 5), "axes": np.array([1], np.int64)}


@case
def reduce_max_min_bool_20():
    B = TensorProto.BOOL
    return model(20, [helper.make_node("ReduceMax", ["x", "axes"], ["any"], keepdims=0),
                      helper.make_node("ReduceMin", ["x"], ["all"], keepdims=1)],
                 [("x", B, [3, 4])], [("any", B, None), ("all", B, None)],
                 [const("axes", np.array([1], np.int64))]), {"x": rng.random((3, 4)) > 0.6}


@case
def reduce_logsumexp_all():
    return model(18, [helper.make_node("ReduceLogSumExp", ["x"], ["y"], keepdims=1)],
                 [("x", F, [2, 5])], [("y", F, None)]), {"x": rand(2, 5)}


@case
def split_num_outputs_uneven():
    return model(18, [helper.make_node("Split", ["x"], ["a", "b", "c"], axis=1, num_outputs=3)],
                 [("x", F, [2, 7])], [("a", F, None), ("b", F, None), ("c", F, None)]), {"x": rand(2, 7)}


@case
def pad_axes_input():
    return model(18, [helper.make_node("Pad", ["x", "pads", "v", "axes"], ["y"], mode="constant")],
                 [("x", F, [2, 3, 4])], [("y", F, None)],
                 [const("pads", np.array([1, 2, 0, 1], np.int64)), const("v", np.array(1.5, np.float32)),
                  const("axes", np.array([-1, 1], np.int64))]), {"x": rand(2, 3, 4)}


@case
def pad_wrap():
    return model(19, [helper.make_node("Pad", ["x", "pads"], ["y"], mode="wrap")],
                 [("x", F, [3, 4])], [("y", F, None)], [const("pads", np.array([1, 2, 2, 3], np.int64))]), {
                     "x": rand(3, 4)}


@case
def scatter_elements_max():
    return model(18, [helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1, reduction="max")],
                 [("x", F, [2, 4]), ("u", F, [2, 3])], [("y", F, None)],
                 [const("i", np.array([[0, 1, 1], [3, 3, 0]], np.int64))]), {"x": rand(2, 4), "u": rand(2, 3)}


@case
def scatternd_min():
    return model(18, [helper.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction="min")],
                 [("x", F, [4, 3]), ("u", F, [3, 3])], [("y", F, None)],
                 [const("i", np.array([[1], [3], [1]], np.int64))]), {"x": rand(4, 3), "u": rand(3, 3)}


@case
def lppool_ceil_dilations():
    return unary("LpPool", 18, np.abs(rand(1, 2, 7, 8)), kernel_shape=[2, 3], strides=[2, 2], dilations=[2, 1],
                 ceil_mode=1, p=3)


@case
def resize_antialias_linear():
    return model(18, [helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear", antialias=1)],
                 [("x", F, [1, 2, 12, 10])], [("y", F, None)],
                 [const("scales", np.array([1, 1, 0.4, 0.6], np.float32))]), {"x": rand(1, 2, 12, 10)}


@case
def resize_antialias_cubic_sizes():
    return model(18, [helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="cubic", antialias=1,
                                       exclude_outside=1)],
                 [("x", F, [1, 1, 9, 11])], [("y", F, None)],
                 [const("sizes", np.array([1, 1, 4, 5], np.int64))]), {"x": rand(1, 1, 9, 11)}


@case
def resize_axes_keep_aspect():
    return model(18, [helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], mode="linear", axes=[3, 2],
                                       keep_aspect_ratio_policy="not_larger")],
                 [("x", F, [1, 2, 6, 8])], [("y", F, None)],
                 [const("sizes", np.array([12, 9], np.int64))]), {"x": rand(1, 2, 6, 8)}


@case
def resize_half_pixel_symmetric():
    return model(19, [helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="linear",
                                       coordinate_transformation_mode="half_pixel_symmetric")],
                 [("x", F, [1, 1, 5, 7])], [("y", F, None)],
                 [const("scales", np.array([1, 1, 1.7, 0.75], np.float32))]), {"x": rand(1, 1, 5, 7)}


@case
def col2im():
    return model(18, [helper.make_node("Col2Im", ["x", "image", "block"], ["y"], strides=[1, 2], pads=[1, 0, 0, 1],
                                       dilations=[1, 1])],
                 [("x", F, [2, 3 * 4, 15])], [("y", F, None)],
                 [const("image", np.array([5, 6], np.int64)), const("block", np.array([2, 2], np.int64))]), {
                     "x": rand(2, 12, 15)}


@case
def center_crop_pad():
    return model(18, [helper.make_node("CenterCropPad", ["x", "shape"], ["y"], axes=[1, -1])],
                 [("x", F, [2, 5, 4])], [("y", F, None)], [const("shape", np.array([2, 7], np.int64))]), {
                     "x": rand(2, 5, 4)}


@case
def group_normalization_18():
    # Opset 18's definition: one scale and bias per group.
    return model(18, [helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2, epsilon=1e-3)],
                 [("x", F, [2, 4, 3, 3])], [("y", F, None)],
                 [const("s", rand(2)), const("b", rand(2))]), {"x": rand(2, 4, 3, 3)}


@case
def group_normalization_21():
    # Opset 21's definition: one scale and bias per channel.
    return model(21, [helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=3)],
                 [("x", F, [2, 6, 5])], [("y", F, None)],
                 [const("s", rand(6)), const("b", rand(6))]), {"x": rand(2, 6, 5)}


@case
def bitwise_ops():
    a = rng.integers(-100, 100, (3, 4)).astype(np.int32)
    b = rng.integers(-100, 100, (4,)).astype(np.int32)
    I32 = TensorProto.INT32
    return model(18, [helper.make_node("BitwiseAnd", ["a", "b"], ["and"]),
                      helper.make_node("BitwiseOr", ["a", "b"], ["or"]),
                      helper.make_node("BitwiseXor", ["a", "b"], ["xor"]),
                      helper.make_node("BitwiseNot", ["a"], ["not"])],
                 [("a", I32, [3, 4]), ("b", I32, [4])],
                 [("and", I32, None), ("or", I32, None), ("xor", I32, None), ("not", I32, None)]), {"a": a, "b": b}


@case
def mish():
    return unary("Mish", 18, rand(3, 7) * 4)


# ---- opsets 19-21 ------------------------------------------------------------------
@case
def averagepool_dilations():
    return unary("AveragePool", 19, rand(1, 2, 9, 8), kernel_shape=[3, 2], strides=[2, 1], dilations=[2, 3],
                 pads=[1, 1, 1, 1])


@case
def averagepool_dilations_ceil_count_pad():
    return unary("AveragePool", 19, rand(1, 1, 8, 9), kernel_shape=[2, 2], strides=[2, 2], dilations=[2, 2],
                 pads=[1, 0, 1, 1], ceil_mode=1, count_include_pad=1)


@case
def deform_conv():
    x, w = rand(1, 4, 6, 7), rand(6, 2, 3, 3)
    off = rand(1, 2 * 2 * 9, 4, 3) * 1.5
    mask = np.abs(rand(1, 2 * 9, 4, 3))
    return model(19, [helper.make_node("DeformConv", ["x", "w", "off", "b", "mask"], ["y"], group=2, offset_group=2,
                                       strides=[1, 2], pads=[0, 0, 0, 0], kernel_shape=[3, 3])],
                 [("x", F, [1, 4, 6, 7]), ("off", F, [1, 36, 4, 3]), ("mask", F, [1, 18, 4, 3])], [("y", F, None)],
                 [const("w", w), const("b", rand(6))]), {"x": x, "off": off, "mask": mask}


@case
def gelu():
    return unary("Gelu", 20, rand(4, 5) * 3)


@case
def gelu_after_matmul():
    # On oneDNN a post-op of the MatMul.
    return model(20, [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Gelu", ["m"], ["y"])],
                 [("x", F, [4, 8])], [("y", F, None)], [const("w", rand(8, 6))]), {"x": rand(4, 8)}


@case
def gelu_tanh():
    return unary("Gelu", 20, rand(4, 5) * 3, approximate="tanh")


@case
def affine_grid():
    theta = rand(2, 2, 3)
    return model(20, [helper.make_node("AffineGrid", ["theta", "size"], ["grid"], align_corners=0)],
                 [("theta", F, [2, 2, 3])], [("grid", F, None)], [const("size", np.array([2, 3, 4, 5], np.int64))]), {
                     "theta": theta}


@case
def grid_sample_16_bicubic_border():
    return model(16, [helper.make_node("GridSample", ["x", "grid"], ["y"], mode="bicubic", padding_mode="border")],
                 [("x", F, [1, 2, 5, 6]), ("grid", F, [1, 3, 4, 2])], [("y", F, None)]), {
                     "x": rand(1, 2, 5, 6), "grid": rand(1, 3, 4, 2) * 0.8}


@case
def grid_sample_20_linear_reflection():
    return model(20, [helper.make_node("GridSample", ["x", "grid"], ["y"], mode="linear", padding_mode="reflection",
                                       align_corners=1)],
                 [("x", F, [2, 3, 4, 5]), ("grid", F, [2, 4, 3, 2])], [("y", F, None)]), {
                     "x": rand(2, 3, 4, 5), "grid": rand(2, 4, 3, 2) * 1.4}


@case
def grid_sample_20_cubic_reflection():
    return model(20, [helper.make_node("GridSample", ["x", "grid"], ["y"], mode="cubic", padding_mode="reflection")],
                 [("x", F, [1, 2, 5, 4]), ("grid", F, [1, 3, 5, 2])], [("y", F, None)]), {
                     "x": rand(1, 2, 5, 4), "grid": rand(1, 3, 5, 2) * 1.3}


@case
def grid_sample_20_3d_nearest():
    return model(20, [helper.make_node("GridSample", ["x", "grid"], ["y"], mode="nearest", padding_mode="zeros")],
                 [("x", F, [1, 2, 3, 4, 5]), ("grid", F, [1, 2, 3, 2, 3])], [("y", F, None)]), {
                     "x": rand(1, 2, 3, 4, 5), "grid": rand(1, 2, 3, 2, 3) * 0.9}


@case
def dft_20_axis_input():
    return model(20, [helper.make_node("DFT", ["x", "", "axis"], ["y"], onesided=1)],
                 [("x", F, [2, 8, 3, 1])], [("y", F, None)], [const("axis", np.array(1, np.int64))]), {
                     "x": rand(2, 8, 3, 1)}


@case
def dft_17_inverse_fft_length():
    # inverse, complex input, a power-of-two dft_length (the FFT path) longer than the signal
    return model(17, [helper.make_node("DFT", ["x", "n"], ["y"], axis=1, inverse=1)],
                 [("x", F, [2, 12, 3, 2])], [("y", F, None)], [const("n", np.array(16, np.int64))]), {
                     "x": rand(2, 12, 3, 2)}


@case
def stft_17_window_two_sided():
    return model(17, [helper.make_node("STFT", ["x", "step", "w"], ["y"], onesided=0)],
                 [("x", F, [2, 100, 1]), ("w", F, [32])], [("y", F, None)], [const("step", np.array(12, np.int64))]), {
                     "x": rand(2, 100, 1), "w": np.hanning(32).astype(np.float32)}


@case
def opset21_shape_ops():
    # Ops whose opset-19/21 definitions only added types.
    nodes = [helper.make_node("Reshape", ["x", "s"], ["r"]),
             helper.make_node("Transpose", ["r"], ["t"], perm=[1, 0]),
             helper.make_node("Cast", ["t"], ["c"], to=TensorProto.DOUBLE),
             helper.make_node("Shape", ["c"], ["sh"]),
             helper.make_node("Flatten", ["x"], ["f"], axis=2)]
    return model(21, nodes, [("x", F, [2, 3, 4])], [("c", TensorProto.DOUBLE, None), ("sh", I64, None),
                                                    ("f", F, None)],
                 [const("s", np.array([6, 4], np.int64))]), {"x": rand(2, 3, 4)}


@case
def torch_audio_model_at_opset_18():
    # A small keyword-spotting style model exported by PyTorch at opset 17 (reflect Pad,
    # Conv1d as an STFT, magnitude, log, Conv2d/BatchNorm/Relu, pooling, mean over
    # time, Linear, LogSoftmax), then upgraded to opset 18 as a newer exporter writes
    # it: every Reduce* takes its axes as an input.
    import io

    import onnx
    import torch
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stft = nn.Conv1d(1, 2 * 17, 32, stride=8, bias=False)
            self.conv = nn.Conv2d(1, 8, 3, padding=1)
            self.bn = nn.BatchNorm2d(8)
            self.fc = nn.Linear(8 * 8, 5)

        def forward(self, x):
            x = nn.functional.pad(x.unsqueeze(1), (16, 16), mode="reflect")
            re, im = self.stft(x).chunk(2, dim=1)
            mag = torch.log(re * re + im * im + 1e-6).unsqueeze(1)
            y = torch.relu(self.bn(self.conv(mag)))
            y = nn.functional.avg_pool2d(y, (2, 1))
            y = y.mean(dim=3) - y.amax(dim=3) * 0.1
            return torch.log_softmax(self.fc(y.flatten(1)), dim=-1)

    torch.manual_seed(0)
    net = Net().eval()
    net.bn.running_mean.uniform_(-0.5, 0.5)
    net.bn.running_var.uniform_(0.5, 1.5)
    x = torch.randn(2, 400)
    buf = io.BytesIO()
    torch.onnx.export(net, x, buf, opset_version=17, input_names=["x"], output_names=["y"])
    m = onnx.load_from_string(buf.getvalue())
    m.opset_import[0].version = 18
    m.ir_version = 8
    reduce_ops = {"ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin",
                  "ReduceProd", "ReduceSumSquare"}
    upgraded = 0
    for i, n in enumerate(m.graph.node):
        if n.op_type in reduce_ops:
            axes = [a for a in n.attribute if a.name == "axes"]
            if axes:
                name = f"axes_{i}"
                m.graph.initializer.append(const(name, np.array(axes[0].ints, np.int64)))
                n.attribute.remove(axes[0])
                n.input.append(name)
                upgraded += 1
    assert upgraded >= 2, "the export has no Reduce* with axes to upgrade"
    return m, {"x": x.numpy()}


# ---- errors ------------------------------------------------------------------------
ERRORS = {}


def error_case(fn):
    ERRORS[fn.__name__] = fn
    return fn


@error_case
def opset_22_is_refused():
    m, _ = unary("Relu", 21, rand(2))
    m.opset_import[0].version = 22
    return m, "the model uses opset 22 of the default ONNX domain; partita supports opsets 7..21"


@error_case
def float8_initializer_is_named():
    m, _ = unary("Relu", 21, rand(2))
    t = m.graph.initializer.add()
    t.name, t.data_type, t.raw_data = "w8", 17, b"\0\0"
    t.dims.append(2)
    return m, "initializer 'w8' has element type float8e4m3fn, which partita does not support"


@error_case
def gelu_before_opset_20_is_named():
    m, _ = unary("Gelu", 18, rand(2))
    return m, "Gelu (opset 18; Gelu is not an op of opset 18 (ONNX added it in opset 20); node"


@error_case
def grid_sample_20_refuses_16_mode_names():
    m, _ = model(20, [helper.make_node("GridSample", ["x", "g"], ["y"], mode="bilinear", name="gs")],
                 [("x", F, [1, 1, 2, 2]), ("g", F, [1, 1, 1, 2])], [("y", F, None)]), None
    return m, "GridSample node 'gs' (making 'y'): unknown mode 'bilinear' at opset 20 (linear, nearest or cubic)"


@error_case
def nll_target_out_of_range():
    m = model(13, [helper.make_node("NegativeLogLikelihoodLoss", ["x", "t"], ["y"], name="nll")],
              [("x", F, [2, 3]), ("t", I64, [2])], [("y", F, None)])
    return m, "NegativeLogLikelihoodLoss node 'nll': target value 5 is out of range [0, 3)", {
        "x": rand(2, 3), "t": np.array([1, 5], np.int64)}


@error_case
def roialign_batch_index_out_of_range():
    m = model(16, [helper.make_node("RoiAlign", ["x", "r", "b"], ["y"], name="roi")],
              [("x", F, [1, 1, 4, 4]), ("r", F, [1, 4]), ("b", I64, [1])], [("y", F, None)])
    return m, "RoiAlign node 'roi': batch index 3 is out of range [0, 1)", {
        "x": rand(1, 1, 4, 4), "r": np.array([[0, 0, 2, 2]], np.float32), "b": np.array([3], np.int64)}


@error_case
def maxunpool_index_outside_output():
    m = model(11, [helper.make_node("MaxUnpool", ["x", "i"], ["y"], kernel_shape=[2, 2], strides=[2, 2], name="up")],
              [("x", F, [1, 1, 1, 1]), ("i", I64, [1, 1, 1, 1])], [("y", F, None)])
    return m, "MaxUnpool node 'up': index 4 is outside the output [1,1,2,2]", {
        "x": rand(1, 1, 1, 1), "i": np.array([4], np.int64).reshape(1, 1, 1, 1)}


# ---- random ops: shapes, types, ranges (no reference values) -------------------------
PROPERTIES = {}


def property_case(fn):
    PROPERTIES[fn.__name__] = fn
    return fn


@property_case
def random_ops():
    """RandomUniform (seeded), RandomNormalLike, Bernoulli and Multinomial: ONNX Runtime
    gives the shapes and types; values must be in range; seeded draws repeat, unseeded
    ones differ from run to run (so nothing was folded into a constant)."""
    nodes = [helper.make_node("RandomUniform", [], ["u"], shape=[3, 4], low=-2.0, high=3.0, seed=5.0),
             helper.make_node("RandomUniform", [], ["u_free"], shape=[64], dtype=TensorProto.DOUBLE),
             helper.make_node("RandomNormalLike", ["x"], ["nl"], mean=10.0, scale=0.5),
             helper.make_node("Bernoulli", ["p"], ["b"]),
             helper.make_node("Multinomial", ["logits"], ["mn"], sample_size=6, dtype=TensorProto.INT64)]
    m = model(15, nodes, [("x", F, [5, 6]), ("p", F, [40]), ("logits", F, [2, 3])],
              [("u", F, None), ("u_free", TensorProto.DOUBLE, None), ("nl", F, None), ("b", F, None),
               ("mn", I64, None)])
    inputs = {"x": rand(5, 6), "p": rng.random(40).astype(np.float32), "logits": rand(2, 3)}

    def check(out):
        u, nl, b, mn = out["u"], out["nl"], out["b"], out["mn"]
        bad = []
        if not (np.all(u >= -2) and np.all(u < 3)):
            bad.append("RandomUniform outside [low, high)")
        if abs(float(nl.mean()) - 10) > 1:
            bad.append(f"RandomNormalLike mean {nl.mean()}")
        if not np.all((b == 0) | (b == 1)):
            bad.append("Bernoulli not in {0, 1}")
        if not (np.all(mn >= 0) and np.all(mn < 3)):
            bad.append("Multinomial outside [0, classes)")
        return bad
    return m, inputs, check, ["u"], ["u_free"]


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def compare(name, got, want):
    if got.shape != want.shape:
        return f"{name}: shape {got.shape}, ONNX Runtime {want.shape}"
    if got.dtype != want.dtype:
        return f"{name}: dtype {got.dtype}, ONNX Runtime {want.dtype}"
    if np.issubdtype(want.dtype, np.floating):
        scale = max(float(np.max(np.abs(want))) if want.size else 0.0, 1e-30)
        err = float(np.max(np.abs(got.astype(np.float64) - want))) / scale if want.size else 0.0
        if not err <= TOL:
            return f"{name}: max|a-e|/max|e| = {err:.3g} > {TOL}"
        return None
    if not np.array_equal(got, want):
        return f"{name}: values differ"
    return None


def check_case(partita, work, name):
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "model.onnx")
    if name in PROPERTIES:
        return check_properties(partita, d, path, name)
    if name in ERRORS:
        m, want, *inputs = ERRORS[name]()
        open(path, "wb").write(m.SerializeToString())
        cmd = [partita, "run", path, "--quiet"]
        for k, v in (inputs[0] if inputs else {}).items():
            np.save(os.path.join(d, f"in_{k}.npy"), v)
            cmd += ["--input", f"{k}={os.path.join(d, f'in_{k}.npy')}"]
        r = run(cmd)
        if r.returncode != 1 or want not in r.stderr:
            print(f"{name}: expected exit 1 with\n  {want}\ngot exit {r.returncode}:\n{r.stderr}{r.stdout}")
            return False
        print(f"{name}: ok ({r.stderr.strip().splitlines()[-1]})")
        return True
    m, inputs = CASES[name]()
    open(path, "wb").write(m.SerializeToString())
    args = []
    for k, v in inputs.items():
        p = os.path.join(d, f"in_{k}.npy")
        np.save(p, v)
        args.append(f"{k}={p}")
    ref = os.path.join(d, "ort")
    r = run(["node", os.path.join(HERE, "ort_reference.js"), path, ref, *args])
    if r.returncode != 0:
        print(f"{name}: ONNX Runtime failed:\n{r.stderr}")
        return False
    pta = os.path.join(d, "model.pta")
    r = run([partita, "compile", path, "-o", pta, "--backends", "dnnl,ewise,host", "--quiet"])
    if r.returncode != 0:
        print(f"{name}: partita compile failed:\n{r.stderr}")
        return False
    ok = True
    for label, target, extra in (("host", path, []), ("dnnl,ewise,host", path, ["--backends", "dnnl,ewise,host"]),
                                 (".pta", pta, [])):
        out = os.path.join(d, "out_" + label.replace(",", "_").replace(".", ""))
        cmd = [partita, "run", target, "--quiet", "--output-dir", out, *extra]
        for a in args:
            cmd += ["--input", a]
        r = run(cmd)
        if r.returncode != 0:
            print(f"{name} [{label}]: partita failed:\n{r.stderr}")
            ok = False
            continue
        for o in m.graph.output:
            want = np.load(os.path.join(ref, o.name + ".npy"))
            got = np.load(os.path.join(out, o.name + ".npy"))
            why = compare(o.name, got, want)
            if why:
                print(f"{name} [{label}]: {why}")
                ok = False
    if ok:
        print(f"{name}: ok (host, dnnl,ewise,host and .pta match ONNX Runtime)")
    return ok


def check_properties(partita, d, path, name):
    m, inputs, check, same, differ = PROPERTIES[name]()
    open(path, "wb").write(m.SerializeToString())
    args = []
    for k, v in inputs.items():
        p = os.path.join(d, f"in_{k}.npy")
        np.save(p, v)
        args.append(f"{k}={p}")
    ref = os.path.join(d, "ort")
    r = run(["node", os.path.join(HERE, "ort_reference.js"), path, ref, *args])
    if r.returncode != 0:
        print(f"{name}: ONNX Runtime failed:\n{r.stderr}")
        return False
    runs = []
    for i in range(2):
        out = os.path.join(d, f"out_{i}")
        cmd = [partita, "run", path, "--quiet", "--output-dir", out, "--backends", "dnnl,ewise,host"]
        for a in args:
            cmd += ["--input", a]
        r = run(cmd)
        if r.returncode != 0:
            print(f"{name}: partita failed:\n{r.stderr}")
            return False
        runs.append({o.name: np.load(os.path.join(out, o.name + ".npy")) for o in m.graph.output})
    bad = []
    for o in m.graph.output:
        want = np.load(os.path.join(ref, o.name + ".npy"))
        got = runs[0][o.name]
        if got.shape != want.shape or got.dtype != want.dtype:
            bad.append(f"{o.name}: {got.dtype}{got.shape}, ONNX Runtime {want.dtype}{want.shape}")
    bad += check(runs[0])
    bad += [f"{k}: a seeded op drew different numbers in two runs" for k in same
            if not np.array_equal(runs[0][k], runs[1][k])]
    bad += [f"{k}: an unseeded op drew the same numbers in two runs" for k in differ
            if np.array_equal(runs[0][k], runs[1][k])]
    for b in bad:
        print(f"{name}: {b}")
    if not bad:
        print(f"{name}: ok (shapes and types as ONNX Runtime, values in range, seeds repeat)")
    return not bad


def main():
    if sys.argv[1:] == ["--list"]:
        print(";".join(list(CASES) + list(ERRORS) + list(PROPERTIES)))
        return 0
    partita, work, name = sys.argv[1:4]
    if name not in CASES and name not in ERRORS and name not in PROPERTIES:
        print(f"no case {name}")
        return 1
    if name not in ERRORS and not os.path.isdir(ORT):
        print(f"onnxruntime-node is not installed ({ORT}; bench/run.sh installs it): skipped")
        return 77
    return 0 if check_case(partita, work, name) else 1


if __name__ == "__main__":
    sys.exit(main())
