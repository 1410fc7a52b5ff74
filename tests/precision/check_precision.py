#!/usr/bin/python3
"""Reduced precision through the Python package (docs/precision.md), as pytest tests:

  * a float16 convolution net (Casts at the graph boundary, float16 weights and compute,
    as float16 converters write them) compiled with precision fp32 becomes a float32
    graph: no Cast and no float16 constant left, its weights stored once as float32
    constants named "<name>:float16->float32", oneDNN takes the convolutions; with keep
    the host runs it in float16. Both agree with a float32 reference within 1e-2.
  * QuantizeLinear / DequantizeLinear / DynamicQuantizeLinear against numpy references
    (per tensor, per axis, blocked), and the errors for bad scales, zero points and
    per-axis lengths.

  PYTHONPATH=build/python /usr/bin/python3 -m pytest tests/precision/check_precision.py
"""
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import partita

F16 = TensorProto.FLOAT16
F32 = TensorProto.FLOAT


def conv_net_f16(seed=0, target=F16):
    """x float32[1,4,12,12] -> Cast f16 -> Conv 3x3 -> Relu -> Conv 1x1 (+ residual Add)
    -> GlobalAveragePool -> Flatten -> Gemm -> Cast f32 -> y float32[1,5]."""
    rng = np.random.default_rng(seed)
    w1 = (rng.standard_normal((8, 4, 3, 3)) * 0.3).astype(np.float32)
    b1 = (rng.standard_normal(8) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((8, 8, 1, 1)) * 0.3).astype(np.float32)
    wf = (rng.standard_normal((5, 8)) * 0.3).astype(np.float32)
    bf = (rng.standard_normal(5) * 0.1).astype(np.float32)
    np_t = np.float16 if target == F16 else None

    def init(name, a):
        if target == F16:
            return numpy_helper.from_array(a.astype(np.float16), name)
        bits = a.view(np.uint32)
        t = helper.make_tensor(name, TensorProto.BFLOAT16, a.shape,
                               ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16).tobytes(), raw=True)
        return t

    nodes = [
        helper.make_node("Cast", ["x"], ["xh"], to=target, name="cast_in"),
        helper.make_node("Conv", ["xh", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], name="conv2"),
        helper.make_node("Add", ["c2", "r1"], ["a2"], name="residual"),
        helper.make_node("GlobalAveragePool", ["a2"], ["p"], name="pool"),
        helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["yh"], transB=1, name="fc"),
        helper.make_node("Cast", ["yh"], ["y"], to=F32, name="cast_out"),
    ]
    g = helper.make_graph(nodes, "f16net", [helper.make_tensor_value_info("x", F32, [1, 4, 12, 12])],
                          [helper.make_tensor_value_info("y", F32, [1, 5])],
                          [init("w1", w1), init("b1", b1), init("w2", w2), init("wf", wf), init("bf", bf)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])

    def reference(x):
        import torch
        t = lambda a: torch.from_numpy(a)
        r1 = torch.relu(torch.nn.functional.conv2d(t(x), t(w1), t(b1), padding=1))
        a2 = torch.nn.functional.conv2d(r1, t(w2)) + r1
        f = a2.mean(dim=(2, 3))
        return (f @ t(wf).T + t(bf)).numpy()

    return model, reference


def rel_err(a, e):
    return float(np.max(np.abs(a - e)) / np.max(np.abs(e)))


@pytest.fixture
def tmp(tmp_path):
    return str(tmp_path)


@pytest.mark.parametrize("target", [F16, TensorProto.BFLOAT16])
def test_fp32_policy_makes_a_float32_graph(tmp, target):
    model, reference = conv_net_f16(target=target)
    pta = os.path.join(tmp, "m.pta")
    partita.compile(model, pta, backends=["dnnl", "host"], precision="fp32")
    info = partita.inspect(pta)
    ops = [op for r in info["partition"] for op in r["ops"]]
    assert "Cast" not in ops, info["partition"]
    dnnl_ops = [op for r in info["partition"] if r["backend"] == "dnnl" for op in r["ops"]]
    assert dnnl_ops.count("Conv") == 2, info["partition"]
    dtypes = {c["dtype"] for c in info["constants"]}
    assert "bfloat16" not in dtypes, info["constants"]
    # float16 only as the classifier's mat_vec weights, derived from the float32 ones
    # (float16 holds every converted value exactly; docs/precision.md).
    for c in info["constants"]:
        if c["dtype"] == "float16":
            assert c["derived_from"] is not None and c["name"].startswith("wf:"), c
    src = "float16" if target == F16 else "bfloat16"
    names = [c["name"] for c in info["constants"]]
    assert any(n == "wf:%s->float32" % src for n in names), names
    x = np.random.default_rng(1).standard_normal((1, 4, 12, 12)).astype(np.float32)
    (y,) = partita.InferenceSession(pta).run(None, {"x": x})
    assert y.dtype == np.float32 and y.shape == (1, 5)
    assert rel_err(y, reference(x)) < (1e-2 if target == F16 else 3e-2)


@pytest.mark.parametrize("target", [F16, TensorProto.BFLOAT16])
def test_keep_policy_runs_half_on_the_host(tmp, target):
    model, reference = conv_net_f16(target=target)
    pta = os.path.join(tmp, "m.pta")
    partita.compile(model, pta, backends=["dnnl", "host"], precision="keep")
    info = partita.inspect(pta)
    assert all(r["backend"] == "host" for r in info["partition"]), info["partition"]
    src = "float16" if target == F16 else "bfloat16"
    assert any(c["dtype"] == src for c in info["constants"]), info["constants"]
    x = np.random.default_rng(2).standard_normal((1, 4, 12, 12)).astype(np.float32)
    (y,) = partita.InferenceSession(pta).run(None, {"x": x})
    assert rel_err(y, reference(x)) < (1e-2 if target == F16 else 3e-2)


def test_shared_half_constant_stays_when_a_kept_op_reads_it(tmp):
    # A float16 constant read by a Conv (retyped) and by a CastLike's `like` (kept):
    # the Conv gets a float32 copy, the original stays for the CastLike.
    w = numpy_helper.from_array(np.full((2, 2, 1, 1), 0.5, np.float16), "w")
    nodes = [
        helper.make_node("Cast", ["x"], ["xh"], to=F16),
        helper.make_node("Conv", ["xh", "w"], ["c"]),
        helper.make_node("CastLike", ["x", "w"], ["xl"]),
        helper.make_node("Cast", ["c"], ["y"], to=F32),
    ]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F32, [1, 2, 2, 2])],
                          [helper.make_tensor_value_info("y", F32, [1, 2, 2, 2]),
                           helper.make_tensor_value_info("xl", F16, [1, 2, 2, 2])], [w])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)])
    pta = os.path.join(tmp, "m.pta")
    partita.compile(model, pta, precision="fp32")
    x = np.arange(8, dtype=np.float32).reshape(1, 2, 2, 2)
    y, xl = partita.InferenceSession(pta).run(None, {"x": x})
    np.testing.assert_allclose(y, np.broadcast_to(x.sum(axis=1, keepdims=True) * 0.5, x.shape), rtol=1e-6)
    assert xl.dtype == np.float16
    np.testing.assert_array_equal(xl, x.astype(np.float16))


def test_unknown_precision_is_an_error(tmp):
    model, _ = conv_net_f16()
    with pytest.raises(Exception, match="unknown precision 'fp8'.*fp32, bf16 or keep"):
        partita.compile(model, os.path.join(tmp, "m.pta"), precision="fp8")


# ---- QuantizeLinear / DequantizeLinear -------------------------------------------------

def run_node(op, inputs, attrs=None, opset=13, initializers=(), out_types=None):
    """Runs one node on the host; `inputs` are (name, array) fed at run time, or
    initializers given separately (name, array)."""
    attrs = attrs or {}
    names = [n for n, _ in inputs] + [n for n, _ in initializers]
    outs = ["y"] if op != "DynamicQuantizeLinear" else ["y", "y_scale", "y_zero_point"]
    node = helper.make_node(op, names, outs, name="node", **attrs)
    vi = lambda n, a: helper.make_tensor_value_info(n, onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[a.dtype], a.shape)
    g = helper.make_graph([node], "g", [vi(n, a) for n, a in inputs],
                          [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outs],
                          [numpy_helper.from_array(a, n) for n, a in initializers])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    sess = partita.InferenceSession(model.SerializeToString())
    return sess.run(None, {n: a for n, a in inputs})


def quantize_ref(x, scale, zero, qtype):
    info = np.iinfo(qtype)
    return np.clip(np.rint(x / scale) + zero.astype(np.float32), info.min, info.max).astype(qtype)


@pytest.mark.parametrize("qtype", [np.uint8, np.int8])
def test_quantize_per_tensor_and_per_axis(qtype):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((2, 3, 4)) * 40).astype(np.float32)
    x[0, 0, :3] = [0.5, 1.5, -2.5]  # ties round to even
    scale = np.float32(0.5)
    zero = np.array(10 if qtype == np.uint8 else -3, qtype)
    (y,) = run_node("QuantizeLinear", [("x", x)], initializers=[("s", np.array(scale)), ("z", zero)])
    np.testing.assert_array_equal(y, quantize_ref(x, scale, zero, qtype))
    scales = np.array([0.25, 0.5, 1.0], np.float32)
    zeros = np.array([1, 2, 3], qtype)
    (y,) = run_node("QuantizeLinear", [("x", x)], {"axis": 1}, initializers=[("s", scales), ("z", zeros)])
    np.testing.assert_array_equal(y, quantize_ref(x, scales[None, :, None], zeros[None, :, None], qtype))
    (d,) = run_node("DequantizeLinear", [("q", y)], {"axis": 1}, initializers=[("s", scales), ("z", zeros)])
    np.testing.assert_array_equal(d, (y.astype(np.int32) - zeros[None, :, None]) * scales[None, :, None])


# Opsets 19 and 21 (half scales, block_size, output_dtype): src/kernels/nn_quant_linear_test.cpp,
# until the importer takes those opsets.


def test_dynamic_quantize_linear():
    x = np.array([[-1.0, 0.25, 3.0], [2.5, -0.75, 0.0]], np.float32)
    y, s, z = run_node("DynamicQuantizeLinear", [("x", x)], opset=11)
    scale = np.float32((3.0 - -1.0) / 255)
    zero = np.uint8(np.clip(np.rint(0 - -1.0 / scale), 0, 255))
    assert s == pytest.approx(scale) and z == zero
    np.testing.assert_array_equal(y, quantize_ref(x, scale, np.array(zero), np.uint8))
    y, s, z = run_node("DynamicQuantizeLinear", [("x", np.zeros((2, 2), np.float32))], opset=11)
    assert s == 1.0 and z == 0 and not y.any()


@pytest.mark.parametrize("scale, what", [(0.0, "zero"), (np.nan, "NaN"), (np.inf, "infinite")])
def test_bad_scales_are_errors(scale, what):
    x = np.ones((2, 2), np.float32)
    with pytest.raises(Exception, match="QuantizeLinear node 'node'.*y_scale is %s" % what):
        run_node("QuantizeLinear", [("x", x)], initializers=[("s", np.array(scale, np.float32))])
    # a scale fed at run time
    with pytest.raises(Exception, match="DequantizeLinear node 'node'.*x_scale\\[1\\] is %s" % what):
        run_node("DequantizeLinear", [("q", np.ones((2, 2), np.uint8)), ("s", np.array([1, scale], np.float32))],
                 {"axis": 1})


def test_mismatched_per_axis_lengths_are_errors():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(Exception, match="y_scale has 2 values but x has 3 along axis 1"):
        run_node("QuantizeLinear", [("x", x)], {"axis": 1}, initializers=[("s", np.ones(2, np.float32))])
    with pytest.raises(Exception, match="y_zero_point .* must have the shape of y_scale"):
        run_node("QuantizeLinear", [("x", x)], {"axis": 1},
                 initializers=[("s", np.ones(3, np.float32)), ("z", np.zeros(2, np.uint8))])


def test_zero_point_type_and_range_errors():
    with pytest.raises(Exception, match="x_zero_point is int8 but the quantized type is uint8"):
        run_node("DequantizeLinear", [("q", np.ones(2, np.uint8))],
                 initializers=[("s", np.array(1, np.float32)), ("z", np.array(0, np.int8))])
    with pytest.raises(Exception, match="x_zero_point must be 0 for int32 x"):
        run_node("DequantizeLinear", [("q", np.ones(2, np.int32))],
                 initializers=[("s", np.array(1, np.float32)), ("z", np.array(3, np.int32))])


# ---- bfloat16 compute on oneDNN ----------------------------------------------------------

def cli():
    return os.path.join(os.environ.get("PARTITA_BIN_DIR", os.path.join(os.path.dirname(__file__), "../../build/bin")),
                        "partita")


@pytest.mark.parametrize("target", [F32, F16])
def test_bf16_policy_runs_bfloat16_kernels(tmp, target):
    import subprocess
    model, reference = conv_net_f16(target=F16)
    if target == F32:  # the same net in float32: bf16 applies to float32 models too
        for t in model.graph.initializer:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float32), t.name))
        for n in model.graph.node:
            for a in n.attribute:
                if n.op_type == "Cast" and a.name == "to":
                    a.i = F32
    path = os.path.join(tmp, "m.onnx")
    onnx.save(model, path)
    x = np.random.default_rng(5).standard_normal((1, 4, 12, 12)).astype(np.float32)
    np.save(os.path.join(tmp, "x.npy"), x)
    r = subprocess.run([cli(), "run", path, "--backends", "dnnl,host", "--precision", "bf16", "--input",
                        "x=" + os.path.join(tmp, "x.npy"), "--output-dir", tmp, "-q", "-t", "1"],
                       capture_output=True, text=True, env=dict(os.environ, ONEDNN_VERBOSE="1"), timeout=120)
    assert r.returncode == 0, r.stderr
    impls = [l.split(",") for l in r.stdout.splitlines() if l.startswith("onednn_verbose,exec")]
    convs = [f[4] for f in impls if f[3] == "convolution"]
    assert len(convs) == 2 and all("bf16" in i for i in convs), convs
    assert not [f for f in impls if f[4].startswith("ref")], impls
    y = np.load(os.path.join(tmp, "y.npy"))
    assert rel_err(y, reference(x)) < 3e-2


def conv3x3_net(dtype):
    """x float32[1,16,14,14] -> [Cast] -> Conv 3x3 16->32 (bias) -> Relu -> Conv 3x3 32->32
    -> [Cast] -> y float32: two convolutions oneDNN has Winograd kernels for."""
    rng = np.random.default_rng(7)
    w1 = (rng.standard_normal((32, 16, 3, 3)) * 0.1).astype(np.float32)
    b1 = (rng.standard_normal(32) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((32, 32, 3, 3)) * 0.1).astype(np.float32)
    np_t = np.float16 if dtype == F16 else np.float32
    inits = [numpy_helper.from_array(a.astype(np_t), n) for n, a in (("w1", w1), ("b1", b1), ("w2", w2))]
    nodes = [helper.make_node("Cast", ["x"], ["xh"], to=dtype),
             helper.make_node("Conv", ["xh", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Cast", ["c2"], ["y"], to=F32)]
    g = helper.make_graph(nodes, "conv3x3", [helper.make_tensor_value_info("x", F32, [1, 16, 14, 14])],
                          [helper.make_tensor_value_info("y", F32, [1, 32, 14, 14])], inits)

    def reference(x):
        import torch
        t = lambda a: torch.from_numpy(a.astype(np_t).astype(np.float32))
        r1 = torch.relu(torch.nn.functional.conv2d(torch.from_numpy(x), t(w1), t(b1), padding=1))
        return torch.nn.functional.conv2d(r1, t(w2), padding=1).numpy()

    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), reference


@pytest.mark.parametrize("dtype", [F16, F32])
def test_winograd_for_float16_models_only(tmp, dtype):
    """A float16 model computed in float32 may carry float16-sized errors: its 3x3
    convolutions take oneDNN's Winograd kernels (weights stored in oneDNN's `wino`
    layout, read back from the .pta); the same model in float32 keeps direct ones."""
    model, reference = conv3x3_net(dtype)
    pta = os.path.join(tmp, "m.pta")
    partita.compile(model, pta, backends=["dnnl", "host"], threads=1)
    layouts = [c["layout"] or "" for c in partita.inspect(pta)["constants"] if c["storage"] == "weights"]
    wino = [l for l in layouts if ":wino:" in l]
    assert len(wino) == (2 if dtype == F16 else 0), layouts
    x = np.random.default_rng(3).standard_normal((1, 16, 14, 14)).astype(np.float32)
    (y,) = partita.InferenceSession(pta, threads=1).run(None, {"x": x})
    assert rel_err(y, reference(x)) < (1e-4 if dtype == F16 else 1e-5)
