#!/usr/bin/python3
"""Writes the fuzz targets' committed seed corpora under fuzz/corpus/:

  onnx/      tiny valid ONNX models made with onnx.helper (Conv, MatMul, Gemm, Reshape,
             Gather, Concat, Slice, Transpose, pooling, Softmax, an elementwise chain,
             a symbolic-dim input, a Reshape whose shape is an input, a float16 fire
             module whose Concat the dnnl module writes in place);
  npy/       a few .npy files (numpy's own writer: versions, dtypes, shapes);
  ../onnx.dict  a libFuzzer dictionary: ONNX's op types (bare, and as a NodeProto op_type
             field) and attribute names;
  artifact/  with --partita PATH: the ONNX seeds compiled by the real CLI (host, and
             dnnl,ewise,host when a backend takes something, so module blobs are in the
             corpus); the rest of that folder
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
    # Importer paths: typed fields instead of raw_data, Constant node forms, a tensor
    # attribute, an opset-6 model (legacy broadcast and consumed_inputs rewritten to opset
    # 7), ONNX Runtime's Gelu (infer-only: dnnl runs it), a value_info hint.
    typed = helper.make_tensor("w", F, [2, 2], [0.5, -1.0, 2.0, 0.25])
    half = helper.make_tensor("h", TensorProto.FLOAT16, [2], np.array([1, 2], np.float16).view(np.uint16).tolist())
    s["typed_fields_cast"] = model(
        [n("MatMul", ["x", "w"], ["m"]), n("Cast", ["h"], ["hf"], to=F), n("Add", ["m", "hf"], ["y"])],
        [vi("x", [1, 2])], [vi("y", [1, 2])], [typed, half])
    s["constant_forms"] = model(
        [n("Constant", [], ["a"], value_float=2.0), n("Constant", [], ["b"], value_floats=[1.0, 2.0, 3.0]),
         n("Constant", [], ["i"], value_ints=[0, 2]), n("Mul", ["x", "a"], ["m"]), n("Add", ["m", "b"], ["s"]),
         n("Gather", ["s", "i"], ["y"], axis=0)],
        [vi("x", [3])], [vi("y", [2])], opset=13)
    s["legacy_opset6"] = model(
        [n("Add", ["x", "b"], ["a"], broadcast=1, axis=1), n("Relu", ["a"], ["r"], consumed_inputs=[0]),
         n("BatchNormalization", ["r", "sc", "bi", "mu", "va"], ["y"], is_test=1, epsilon=1e-5)],
        [vi("x", [1, 3, 2, 2])], [vi("y", [1, 3, 2, 2])],
        [weights("b", [3], 10), weights("sc", [3], 11), weights("bi", [3], 12),
         numpy_helper.from_array(np.zeros(3, np.float32), "mu"), numpy_helper.from_array(np.ones(3, np.float32), "va")],
        opset=6)
    g = helper.make_graph(
        [n("MatMul", ["x", "w"], ["m"]), n("Gelu", ["m"], ["y"], domain="com.microsoft")], "seed",
        [vi("x", [2, 4])], [vi("y", [2, 4])], [weights("w", [4, 4], 13)],
        value_info=[vi("m", [2, 4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    s["ms_gelu_value_info"] = m.SerializeToString()
    s["pad_avgpool_resize"] = model(
        [n("Pad", ["x", "pads"], ["p"], mode="reflect"),
         n("AveragePool", ["p"], ["a"], kernel_shape=[2, 2], strides=[1, 1]),
         n("Resize", ["a", "", "scales"], ["y"], mode="nearest")],
        [vi("x", [1, 1, 3, 3])], [vi("y", [1, 1, 8, 8])],
        [ints("pads", [0, 0, 1, 1, 0, 0, 1, 1]),
         numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")])
    s["split_where_tile_range"] = model(
        [n("Split", ["x"], ["a", "b"], axis=1), n("Less", ["a", "b"], ["c"]), n("Where", ["c", "a", "b"], ["w"]),
         n("Range", ["start", "limit", "delta"], ["r"]), n("Tile", ["w", "reps"], ["t"]),
         n("Cast", ["r"], ["rf"], to=F), n("Add", ["t", "rf"], ["y"])],
        [vi("x", [2, 4])], [vi("y", [2, 4])],
        [ints("start", 0), ints("limit", 4), ints("delta", 1), ints("reps", [1, 2])])
    s["convtranspose_topk"] = model(
        [n("ConvTranspose", ["x", "w"], ["c"], strides=[2, 2]), n("Flatten", ["c"], ["f"]),
         n("TopK", ["f", "k"], ["y", "i"])],
        [vi("x", [1, 2, 2, 2])], [vi("y", [1, 3]), vi("i", [1, 3], TensorProto.INT64)],
        [weights("w", [2, 1, 2, 2], 14), ints("k", [3])])
    # The dnnl module's own kernels: a squeeze-excitation block (swish, channel mean,
    # per-channel scale) and an int8 max pool over a quantized convolution's output.
    s["squeeze_excite"] = model(
        [n("Conv", ["x", "w"], ["c"]), n("Sigmoid", ["c"], ["g"]), n("Mul", ["c", "g"], ["silu"]),
         n("GlobalAveragePool", ["silu"], ["p"]), n("Conv", ["p", "w1"], ["q"]), n("Relu", ["q"], ["r"]),
         n("Conv", ["r", "w2"], ["e"]), n("Sigmoid", ["e"], ["s"]), n("Mul", ["silu", "s"], ["y"])],
        [vi("x", [1, 16, 4, 4])], [vi("y", [1, 16, 4, 4])],
        [weights("w", [16, 16, 1, 1], 15), weights("w1", [4, 16, 1, 1], 16), weights("w2", [16, 4, 1, 1], 17)])
    u8 = lambda name, v: numpy_helper.from_array(np.array(v, np.uint8), name)
    f32 = lambda name, v: numpy_helper.from_array(np.array(v, np.float32), name)
    rng = np.random.default_rng(18)
    s["qconv_maxpool"] = model(
        [n("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
         n("QLinearConv", ["xq", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["yq"], pads=[1, 1, 1, 1]),
         n("MaxPool", ["yq"], ["pq"], kernel_shape=[2, 2], strides=[2, 2]),
         n("DequantizeLinear", ["pq", "ys", "yz"], ["y"])],
        [vi("x", [1, 4, 4, 4])], [vi("y", [1, 16, 2, 2])],
        [f32("xs", 0.02), u8("xz", 128), f32("ys", 0.05), u8("yz", 3),
         numpy_helper.from_array(rng.integers(-20, 20, (16, 4, 3, 3)).astype(np.int8), "w"), f32("ws", 0.01),
         numpy_helper.from_array(np.array(0, np.int8), "wz")])
    # A float16 fire module (SqueezeNet): computed in float32 with Winograd's 3x3, its
    # Concat written in place through buffer views (dnnl blob version 3).
    h16 = lambda name, shape, seed: numpy_helper.from_array(
        np.random.default_rng(seed).standard_normal(shape).astype(np.float16), name)
    s["fire_float16"] = model(
        [n("Cast", ["x"], ["xh"], to=TensorProto.FLOAT16),
         n("Conv", ["xh", "ws"], ["sq"]), n("Relu", ["sq"], ["sr"]),
         n("Conv", ["sr", "w1"], ["e1"]), n("Relu", ["e1"], ["r1"]),
         n("Conv", ["sr", "w3"], ["e3"], pads=[1, 1, 1, 1]), n("Relu", ["e3"], ["r3"]),
         n("Concat", ["r1", "r3"], ["cat"], axis=1), n("Cast", ["cat"], ["y"], to=F)],
        [vi("x", [1, 16, 6, 6])], [vi("y", [1, 32, 6, 6])],
        [h16("ws", [16, 16, 1, 1], 19), h16("w1", [16, 16, 1, 1], 20), h16("w3", [16, 16, 3, 3], 21)])
    # The same fire module pooled (3x3, stride 2, ceil mode) in its channel blocks: the
    # dnnl module runs that float32 max pool as its own loop (planFloatMaxPool).
    s["fire_float16_pool"] = model(
        [n("Cast", ["x"], ["xh"], to=TensorProto.FLOAT16),
         n("Conv", ["xh", "ws"], ["sq"]), n("Relu", ["sq"], ["sr"]),
         n("Conv", ["sr", "w1"], ["e1"]), n("Relu", ["e1"], ["r1"]),
         n("Conv", ["sr", "w3"], ["e3"], pads=[1, 1, 1, 1]), n("Relu", ["e3"], ["r3"]),
         n("Concat", ["r1", "r3"], ["cat"], axis=1),
         n("MaxPool", ["cat"], ["pool"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
         n("Cast", ["pool"], ["y"], to=F)],
        [vi("x", [1, 16, 6, 6])], [vi("y", [1, 32, 3, 3])],
        [h16("ws", [16, 16, 1, 1], 19), h16("w1", [16, 16, 1, 1], 20), h16("w3", [16, 16, 3, 3], 21)])
    # A dynamic-int8 attention block (two heads of 16 over 8 tokens, and over a symbolic
    # length), as ONNX Runtime's dynamic quantizer writes it: the dnnl module's int8
    # matmuls with run-time source scales and zero points, the QKV projection writing
    # the heads (its result in blocks of 16 columns, the heads views of it: in the
    # symbolic one a shape-polymorphic function with views, dnnl blob version 9), its
    # own softmax, the context written in [tokens, 32] by its matmul, bias + Gelu.
    i8 = lambda name, shape, seed: numpy_helper.from_array(
        np.random.default_rng(seed).integers(-60, 60, shape).astype(np.int8), name)

    def dynamic_matmul(x, w, out):
        return [n("DynamicQuantizeLinear", [x], [x + "_q", x + "_s", x + "_z"]),
                n("MatMulInteger", [x + "_q", w, x + "_z"], [out + "_i"]),
                n("Cast", [out + "_i"], [out + "_f"], to=F),
                n("Mul", [x + "_s", w + "_scale"], [out + "_sc"]),
                n("Mul", [out + "_f", out + "_sc"], [out])]

    heads = []
    for part, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
        heads += [n("Slice", ["qkvb", part + "_st", part + "_en", "ax2"], [part + "_s"]),
                  n("Reshape", [part + "_s", "heads_shape"], [part + "_r"]),
                  n("Transpose", [part + "_r"], [part + "_h"], perm=perm)]
    for name, seq in (("int8_attention", 8), ("int8_attention_seq", "seq")):
        s[name] = model(
            dynamic_matmul("x", "wqkv", "qkv") + [n("Add", ["qkv", "bqkv"], ["qkvb"])] + heads +
            [n("MatMul", ["q_h", "k_h"], ["scores"]), n("Div", ["scores", "four"], ["scaled"]),
             n("Softmax", ["scaled"], ["p"], axis=-1), n("MatMul", ["p", "v_h"], ["ctx"]),
             n("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]), n("Reshape", ["ctx_t", "model_shape"], ["ctx_m"])] +
            dynamic_matmul("ctx_m", "wo", "o") +
            [n("Add", ["o", "bo"], ["ob"]), n("Div", ["ob", "sqrt2"], ["od"]), n("Erf", ["od"], ["oe"]),
             n("Add", ["oe", "one"], ["oe1"]), n("Mul", ["ob", "oe1"], ["om"]), n("Mul", ["om", "half"], ["y"])],
            [vi("x", [1, seq, 32])], [vi("y", [1, seq, 32])],
            [i8("wqkv", [32, 96], 22), f32("wqkv_scale", 0.01), weights("bqkv", [96], 23),
             i8("wo", [32, 32], 24), f32("wo_scale", 0.02), weights("bo", [32], 25),
             ints("q_st", [0]), ints("q_en", [32]), ints("k_st", [32]), ints("k_en", [64]),
             ints("v_st", [64]), ints("v_en", [96]), ints("ax2", [2]),
             ints("heads_shape", [1, -1, 2, 16]), ints("model_shape", [1, -1, 32]),
             f32("four", 4.0), f32("sqrt2", 1.4142135), f32("one", 1.0), f32("half", 0.5)])
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


def onnx_dictionary():
    """libFuzzer dictionary lines: every default-domain op type, bare and as the bytes of
    a NodeProto op_type field (tag 0x22, length, name), and every attribute name."""
    from onnx import defs
    ops, attrs = set(), set()
    for schema in defs.get_all_schemas():
        if schema.domain in ("", "ai.onnx"):
            ops.add(schema.name)
            attrs.update(schema.attributes.keys())
    attrs.update(["value", "value_float", "value_floats", "value_int", "value_ints"])

    def quoted(data):
        return '"' + "".join(chr(b) if 32 <= b < 127 and chr(b) not in '"\\' else "\\x%02x" % b
                             for b in data) + '"'
    lines = [quoted(op.encode()) for op in sorted(ops)]
    lines += [quoted(b"\x22" + bytes([len(op)]) + op.encode()) for op in sorted(ops) if len(op) < 128]
    lines += [quoted(a.encode()) for a in sorted(attrs)]
    return ("# Written by fuzz/make_seeds.py: ONNX op types and attribute names.\n" +
            "\n".join(lines) + "\n").encode()


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
    write(HERE, "onnx.dict", onnx_dictionary())
    for name, data in npy_seeds().items():
        write(os.path.join(CORPUS, "npy"), name + ".npy", data)
    if args.partita:
        os.makedirs(os.path.join(CORPUS, "artifact"), exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            for name in sorted(onnx):
                src = os.path.join(tmp, name + ".onnx")
                write(tmp, name + ".onnx", onnx[name])
                made = []
                for backends in ("host", "dnnl,ewise,host"):
                    out = os.path.join(CORPUS, "artifact", "%s_%s.pta" % (name, backends.split(",")[0]))
                    done = subprocess.run([args.partita, "compile", src, "-o", out, "--backends", backends,
                                           "--threads", "1", "-q"], stderr=subprocess.DEVNULL)
                    if done.returncode != 0:  # e.g. com.microsoft.Gelu has no host kernel
                        continue
                    with open(out, "rb") as f:
                        data = f.read()
                    if data in made:  # no backend took anything: the host's artifact again
                        os.remove(out)
                    made.append(data)


if __name__ == "__main__":
    main()
