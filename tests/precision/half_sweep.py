#!/usr/bin/python3
"""Runs ONNX's node conformance cases again in float16 or bfloat16.

Each case of tests/conformance/node.passing whose model computes in float32 is
rewritten so that it computes in the narrower type: its float32 initializers,
Constant values, value types and dtype attributes become float16 (bfloat16), its
float32 graph inputs are cast to the narrow type right after entering the graph and
its float32 outputs cast back to float32 right before leaving it (so the data files
stay float32). The narrow model runs on partita's host (in memory, through the Python
package) on the case's inputs and its outputs are compared with the float32
reference outputs, with a tolerance for the narrow type:
    |a - e| <= atol + rtol * |e|,  atol = rtol * max|e| / 8
(rtol 1e-2 for float16, 6e-2 for bfloat16).

Cases with Cast/CastLike (whose meaning depends on the types) or without float32
tensors are not rewritten.

  half_sweep.py --dtype float16 --precision keep|fp32 --build build [--write LIST | --expect LIST] [--filter RE]

Each case is compiled to an artifact with partita.compile(precision=...) and run from it:
with keep the host's float16/bfloat16 kernels run, with fp32 the lowering pass makes a
float32 graph.
"""
import argparse
import os
import re
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# float32 -> float16 / bfloat16 tensors as the model converter makes them.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from make_float16 import narrow_tensor  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.environ.get("PARTITA_ONNX_TESTDATA", "/usr/share/libonnx-testdata/data")
# Cast/CastLike: their types are their meaning. The others take float32 (not half)
# scales or operands in every opset the node data has (opsets <= 17).
SKIP_OPS = {"Cast", "CastLike", "QLinearConv", "QLinearMatMul", "QuantizeLinear", "DequantizeLinear",
            "DynamicQuantizeLinear", "Range"}
TMP = None
PRECISION = "keep"


def retype(vi, target):
    tt = vi.type.tensor_type
    if vi.type.HasField("tensor_type") and tt.elem_type == TensorProto.FLOAT:
        tt.elem_type = target
        return True
    return False


def narrow_graph(g, target):
    for i, t in enumerate(g.initializer):
        n = narrow_tensor(t, target)
        if n is not None:
            g.initializer[i].CopyFrom(n)
    for vi in g.value_info:
        retype(vi, target)
    for node in g.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                n = narrow_tensor(a.t, target)
                if n is not None:
                    a.t.CopyFrom(n)
            elif a.type == onnx.AttributeProto.GRAPH:
                narrow_graph(a.g, target)
            elif a.name == "dtype" and a.type == onnx.AttributeProto.INT and a.i == TensorProto.FLOAT:
                a.i = target


def rewrite(model, target):
    """The narrow model, or None when the case is not rewritten."""
    g = model.graph
    ops = set()

    def collect(graph):
        for n in graph.node:
            ops.add(n.op_type)
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    collect(a.g)

    collect(g)
    if ops & SKIP_OPS:
        return None
    floats = [vi for vi in list(g.input) + list(g.output) if vi.type.tensor_type.elem_type == TensorProto.FLOAT]
    floats += [t for t in g.initializer if t.data_type == TensorProto.FLOAT]
    if not floats:
        return None
    narrow_graph(g, target)
    init_names = {t.name for t in g.initializer}
    front = []
    for vi in g.input:
        if vi.name in init_names or vi.type.tensor_type.elem_type != TensorProto.FLOAT:
            continue
        inner = vi.name
        vi.name = inner + "__f32"
        front.append(helper.make_node("Cast", [vi.name], [inner], to=target, name="cast_in_" + inner))
    back = []
    for vi in g.output:
        if vi.type.tensor_type.elem_type != TensorProto.FLOAT:
            continue
        inner = vi.name
        vi.name = inner + "__f32"
        back.append(helper.make_node("Cast", [inner], [vi.name], to=TensorProto.FLOAT, name="cast_out_" + inner))
    nodes = front + list(g.node) + back
    del g.node[:]
    g.node.extend(nodes)
    # The Casts added need opset 6 or later ("to" as a number); older models' ops are
    # unchanged up to opset 7 where partita takes them.
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx") and o.version < 7:
            o.version = 7
    return model


def compare(actual, expected, rtol):
    a = np.asarray(actual, np.float64)
    e = np.asarray(expected, np.float64)
    if a.shape != e.shape:
        return f"shape {a.shape}, expected {e.shape}"
    if e.dtype.kind != "f" and a.dtype.kind != "f":
        return None if np.array_equal(a, e) else "integer values differ"
    finite = np.isfinite(e)
    if not np.array_equal(np.isnan(a), np.isnan(e)) or not np.array_equal(a[np.isinf(e)], e[np.isinf(e)]):
        return "nan/inf pattern differs"
    if not finite.any():
        return None
    scale = float(np.max(np.abs(e[finite]))) if e.size else 0.0
    atol = rtol * scale / 8
    err = np.abs(a[finite] - e[finite])
    bad = err > atol + rtol * np.abs(e[finite])
    if bad.any():
        return f"{int(bad.sum())} of {e.size} elements differ, max abs error {float(err.max()):.4g} (scale {scale:.4g})"
    return None


def run_case(partita, case_dir, target, rtol):
    model = onnx.load(os.path.join(case_dir, "model.onnx"))
    narrow = rewrite(model, target)
    if narrow is None:
        return "SKIP", "not rewritten"
    pta = os.path.join(TMP, "case.pta")
    partita.compile(narrow.SerializeToString(), pta, precision=PRECISION)
    sess = partita.InferenceSession(pta)
    names = [i.name for i in sess.get_inputs()]
    for set_dir in sorted(d for d in os.listdir(case_dir) if d.startswith("test_data_set_")):
        path = os.path.join(case_dir, set_dir)
        ins = sorted(f for f in os.listdir(path) if f.startswith("input_"))
        outs = sorted(f for f in os.listdir(path) if f.startswith("output_"))
        key = lambda f: int(f.split("_")[1].split(".")[0])
        ins.sort(key=key)
        outs.sort(key=key)
        feeds = {}
        for name, f in zip(names, ins):
            feeds[name] = numpy_helper.to_array(onnx.load_tensor(os.path.join(path, f)))
        got = sess.run(None, feeds)
        for i, f in enumerate(outs):
            want = numpy_helper.to_array(onnx.load_tensor(os.path.join(path, f)))
            why = compare(got[i], want, rtol)
            if why:
                return "FAIL", f"output {i}: {why}"
    return "PASS", ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", choices=["float16", "bfloat16"], default="float16")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--filter", default="")
    ap.add_argument("--write", help="write the passing cases to this list")
    ap.add_argument("--expect", help="fail unless every case of this list passes")
    ap.add_argument("--precision", default="keep", help="keep (host float16 kernels) or fp32 (lowered)")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    global TMP, PRECISION
    import tempfile
    TMP = tempfile.mkdtemp(prefix="half_sweep")
    PRECISION = args.precision
    sys.path.insert(0, os.path.join(args.build, "python"))
    import partita

    target = TensorProto.FLOAT16 if args.dtype == "float16" else TensorProto.BFLOAT16
    rtol = 1e-2 if args.dtype == "float16" else 6e-2
    with open(os.path.join(ROOT, "tests/conformance/node.passing")) as f:
        cases = [l.strip() for l in f if l.strip() and not l.startswith("#")]
    if args.expect:
        with open(args.expect) as f:
            cases = [l.strip() for l in f if l.strip() and not l.startswith("#")]
    if args.filter:
        cases = [c for c in cases if re.search(args.filter, c)]
    counts, passing, failures = {}, [], []
    for case in cases:
        try:
            status, why = run_case(partita, os.path.join(DATA, "node", case), target, rtol)
        except Exception as e:  # a partita.Error: unsupported or invalid
            status, why = "ERROR", str(e).splitlines()[0][:300]
        counts[status] = counts.get(status, 0) + 1
        if status == "PASS":
            passing.append(case)
        elif status != "SKIP":
            failures.append(case)
        if args.verbose or (status not in ("PASS", "SKIP")):
            print(f"{status:5} {case}: {why}")
    print("total", len(cases), " ".join(f"{k}={v}" for k, v in sorted(counts.items())))
    if args.write:
        with open(args.write, "w") as f:
            f.write(f"# node cases that pass in {args.dtype} (tests/precision/half_sweep.py --write)\n")
            f.write("".join(c + "\n" for c in passing))
    if args.expect and failures:
        print(f"{len(failures)} listed cases fail in {args.dtype}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
