#!/usr/bin/python3
"""Single LSTM / GRU / RNN nodes with every attribute, against ONNX Runtime (CTest
`recurrent_attributes`; docs/recurrent.md).

Each case is one node built with onnx.helper (random weights, biases, peepholes and
initial states as initializers or inputs), run by ONNX Runtime (bench/ort_runner.js)
and by partita with `--backends host` and `--backends dnnl,ewise,host` (the cases
oneDNN takes run there, the others stay on the host); every output must agree within
max|a-e| / max|e| <= 1e-5. Covered: directions forward / reverse / bidirectional,
sequence_lens (ragged, zero, reverse), initial_h / initial_c, peepholes, clip, every
activation with activation_alpha / activation_beta, input_forget,
linear_before_reset, layout 1, omitted outputs, float64. Then bad nodes must fail
with a clear message naming the node (exit code 1, no signal).

Exits 77 (CTest: skipped) when node or onnxruntime-node is missing.

Usage: check_recurrent_attributes.py PARTITA_BINARY WORK_DIR
"""
import os
import shutil
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ORT_RUNNER = os.path.join(ROOT, "bench", "ort_runner.js")
TOL = 1e-5
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
OUTS = {"LSTM": ["Y", "Y_h", "Y_c"], "GRU": ["Y", "Y_h"], "RNN": ["Y", "Y_h"]}


def case(op, seq=5, batch=3, inp=4, hidden=6, direction="forward", layout=0, attrs=None, with_b=True,
         lens=None, h0=True, c0=False, peep=False, outputs=None, dtype=np.float32, const_state=False, seed=0,
         on_dnnl=False):
    # on_dnnl: with --backends dnnl,ewise,host the node must run on oneDNN (no host node).
    return dict(op=op, seq=seq, batch=batch, inp=inp, hidden=hidden, direction=direction, layout=layout,
                attrs=attrs or {}, with_b=with_b, lens=lens, h0=h0, c0=c0, peep=peep, outputs=outputs,
                dtype=dtype, const_state=const_state, seed=seed, on_dnnl=on_dnnl)


CASES = {
    "lstm_forward": case("LSTM", c0=True, on_dnnl=True),
    # Both directions as oneDNN's bidirectional_concat (Y a permuted view of its rows).
    "lstm_bidirectional": case("LSTM", direction="bidirectional", c0=True, peep=True, on_dnnl=True),
    "lstm_bidirectional_only_y": case("LSTM", direction="bidirectional", outputs=["Y"], h0=False, on_dnnl=True),
    "gru_bidirectional_lbr": case("GRU", direction="bidirectional", attrs={"linear_before_reset": 1},
                                  on_dnnl=True),
    "rnn_bidirectional_relu": case("RNN", direction="bidirectional", attrs={"activations": ["Relu", "Relu"]},
                                   on_dnnl=True),
    "lstm_reverse_peephole": case("LSTM", direction="reverse", c0=True, peep=True),
    "lstm_bidirectional_ragged": case("LSTM", direction="bidirectional", c0=True, peep=True, lens=[5, 2, 0]),
    "lstm_reverse_ragged": case("LSTM", direction="reverse", lens=[3, 5, 1], c0=True),
    "lstm_clip_input_forget": case("LSTM", attrs={"clip": 0.7, "input_forget": 1}, c0=True, peep=True),
    "lstm_activations": case("LSTM", attrs={"activations": ["HardSigmoid", "LeakyRelu", "Softsign"],
                                            "activation_alpha": [0.3, 0.2], "activation_beta": [0.4]}, c0=True),
    "lstm_activations_bidir": case("LSTM", direction="bidirectional", attrs={
        "activations": ["Sigmoid", "ScaledTanh", "Affine", "HardSigmoid", "Elu", "Softplus"],
        "activation_alpha": [0.9, 0.5, 0.25, 1.2], "activation_beta": [1.1, 0.1, 0.6]}),
    "lstm_layout1": case("LSTM", layout=1, c0=True, peep=True),
    "lstm_layout1_bidir_ragged": case("LSTM", layout=1, direction="bidirectional", c0=True, lens=[4, 5, 1]),
    "lstm_no_bias_no_state": case("LSTM", with_b=False, h0=False),
    "lstm_only_yc": case("LSTM", c0=True, outputs=["", "", "Y_c"]),
    "lstm_only_yh": case("LSTM", c0=True, outputs=["", "Y_h"]),
    "lstm_only_y": case("LSTM", outputs=["Y"]),
    "lstm_const_state": case("LSTM", c0=True, const_state=True),
    "lstm_float64": case("LSTM", c0=True, peep=True, dtype=np.float64),
    "gru_forward": case("GRU"),
    "gru_lbr": case("GRU", attrs={"linear_before_reset": 1}),
    "gru_reverse_lbr": case("GRU", direction="reverse", attrs={"linear_before_reset": 1}),
    "gru_bidirectional_ragged": case("GRU", direction="bidirectional", lens=[2, 5, 3]),
    "gru_clip_activations": case("GRU", attrs={"clip": 0.5, "activations": ["ThresholdedRelu", "Relu"],
                                               "activation_alpha": [0.1]}),
    "gru_layout1": case("GRU", layout=1, attrs={"linear_before_reset": 1}),
    "gru_no_bias": case("GRU", with_b=False),
    "rnn_tanh": case("RNN"),
    "rnn_relu_reverse": case("RNN", direction="reverse", attrs={"activations": ["Relu"]}),
    "rnn_sigmoid": case("RNN", attrs={"activations": ["Sigmoid"]}),
    "rnn_bidir_affine_clip": case("RNN", direction="bidirectional",
                                  attrs={"activations": ["Affine", "Tanh"], "activation_alpha": [0.7],
                                         "activation_beta": [0.2], "clip": 0.9}),
    "rnn_layout1_ragged": case("RNN", layout=1, lens=[5, 1, 3]),
    "rnn_seq1_batch1": case("RNN", seq=1, batch=1, hidden=64, inp=64),
    "lstm_long": case("LSTM", seq=40, batch=2, inp=32, hidden=48, c0=True),
    # Past 8 rows the per-step products go to BLAS; below, panels of 64 floats / 32
    # doubles plus the remaining columns.
    "lstm_batch10_ragged": case("LSTM", batch=10, hidden=20, c0=True, lens=[5, 4, 3, 2, 1, 0, 5, 5, 2, 3]),
    "gru_batch12": case("GRU", batch=12, hidden=40, direction="bidirectional"),
    "gru_panels": case("GRU", batch=5, hidden=40, seq=7),
    "gru_panels_float64": case("GRU", batch=7, hidden=40, seq=4, dtype=np.float64,
                               attrs={"linear_before_reset": 1}),
}

# name -> (node kwargs, message the error must contain)
BAD = {
    "bad_activation": (dict(op="LSTM", attrs={"activations": ["Sigmoid", "Cosh", "Tanh"]}), "unknown activation 'Cosh'"),
    "bad_direction": (dict(op="GRU", attrs={"direction": "sideways"}), "direction must be forward"),
    "bad_activation_count": (dict(op="LSTM", attrs={"activations": ["Sigmoid", "Tanh"]}), "activations lists 2"),
    "bad_hidden": (dict(op="RNN", attrs={"hidden_size": 5}), "expected [1,5,4]"),
    "bad_lens": (dict(op="RNN", lens=[9, 1, 1]), "sequence_lens holds 9"),
    "bad_layout": (dict(op="GRU", attrs={"layout": 2}), "layout must be 0 or 1"),
}


def build(c, path, reference=False):
    """Writes the case's model; returns its feeds and output names. `reference`: the
    same computation as ONNX Runtime runs it (layout 0, float32): X and the states
    transposed, outputs to be transposed back (to_layout1)."""
    rng = np.random.RandomState(c["seed"] + 7)
    if reference:
        c = dict(c, dtype=np.float32)
    op, h, nd = c["op"], c["hidden"], 2 if c["direction"] == "bidirectional" else 1
    g = GATES[op]
    dt = c["dtype"]
    tp = TensorProto.DOUBLE if dt == np.float64 else TensorProto.FLOAT
    x_shape = [c["batch"], c["seq"], c["inp"]] if c["layout"] else [c["seq"], c["batch"], c["inp"]]
    state = [c["batch"], nd, h] if c["layout"] else [nd, c["batch"], h]
    inits, inputs, feeds = [], [helper.make_tensor_value_info("X", tp, x_shape)], {}
    feeds["X"] = rng.randn(*x_shape).astype(dt)
    as_ref = reference and c["layout"] == 1  # build layout 1's values, write layout 0
    if as_ref:
        x_shape = [c["seq"], c["batch"], c["inp"]]
        inputs = [helper.make_tensor_value_info("X", tp, x_shape)]
        feeds["X"] = feeds["X"].transpose(1, 0, 2).copy()

    def init(name, arr):
        inits.append(numpy_helper.from_array(arr, name))
        return name

    names = ["X", init("W", (0.5 * rng.randn(nd, g * h, c["inp"])).astype(dt)),
             init("R", (0.5 * rng.randn(nd, g * h, h)).astype(dt))]
    names.append(init("B", (0.3 * rng.randn(nd, 2 * g * h)).astype(dt)) if c["with_b"] else "")
    names.append(init("L", np.array(c["lens"], np.int32)) if c["lens"] is not None else "")
    for key, wanted in (("initial_h", c["h0"]), ("initial_c", c["c0"])):
        if key == "initial_c" and op != "LSTM":
            continue
        if not wanted:
            names.append("")
            continue
        v = rng.randn(*state).astype(dt)
        if as_ref:
            v = v.transpose(1, 0, 2).copy()
        if c["const_state"]:
            names.append(init(key, v))
        else:
            inputs.append(helper.make_tensor_value_info(key, tp, list(v.shape)))
            feeds[key] = v
            names.append(key)
    if op == "LSTM":
        names.append(init("P", (0.4 * rng.randn(nd, 3 * h)).astype(dt)) if c["peep"] else "")
    while names and names[-1] == "":
        names.pop()
    outs = c["outputs"] or OUTS[op]
    attrs = dict(dict(hidden_size=h, direction=c["direction"]), **c["attrs"])
    if c["layout"] and not as_ref:
        attrs["layout"] = 1
    node = helper.make_node(op, names, outs, name=f"{op.lower()}_node", **attrs)
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info(o, tp, None) for o in outs if o],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 7
    onnx.save(model, path)
    return feeds, [o for o in outs if o]


def to_layout1(name, v):
    """A layout-0 output in layout 1: Y [s, d, b, h] -> [b, s, d, h]; states [d, b, h] -> [b, d, h]."""
    return v.transpose(2, 0, 1, 3) if name == "Y" else v.transpose(1, 0, 2)


def relative(a, e):
    if a.shape != e.shape:
        return float("inf")
    return float(np.abs(a.astype(np.float64) - e).max() / max(np.abs(e).max(), 1e-30))


def main():
    partita, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    if shutil.which("node") is None or not os.path.isdir(os.path.join(ROOT, "bench", "node_modules",
                                                                      "onnxruntime-node")):
        print("SKIPPED: node or bench/node_modules/onnxruntime-node missing (./bench/run.sh installs it)")
        sys.exit(77)
    failures = []
    for name, c in CASES.items():
        path = os.path.join(work, f"{name}.onnx")
        feeds, outs = build(c, path)
        args = []
        for k, v in feeds.items():
            np.save(os.path.join(work, f"{name}.{k}.npy"), v)
            args.append(f"{k}={os.path.join(work, name + '.' + k + '.npy')}")
        ort_dir = os.path.join(work, f"{name}.ort")
        os.makedirs(ort_dir, exist_ok=True)
        # ONNX Runtime has neither layout 1 nor float64 recurrent ops: it runs the same
        # computation in layout 0 and float32.
        needs_ref = c["layout"] == 1 or c["dtype"] != np.float32
        ort_model, ort_args = path, args
        if needs_ref:
            ort_model = os.path.join(work, f"{name}.reference.onnx")
            ref_feeds, _ = build(c, ort_model, reference=True)
            ort_args = []
            for k, v in ref_feeds.items():
                np.save(os.path.join(work, f"{name}.ref.{k}.npy"), v.astype(np.float32))
                ort_args.append(f"{k}={os.path.join(work, name + '.ref.' + k + '.npy')}")
        cmd = ["node", ORT_RUNNER, ort_model, "--threads", "1", "--output-dir", ort_dir]
        for a in ort_args:
            cmd += ["--input", a]
        r = subprocess.run(cmd, input="quit\n", capture_output=True, text=True, cwd=os.path.dirname(ORT_RUNNER))
        if r.returncode != 0:
            failures.append(f"{name}: ONNX Runtime failed: {r.stdout}{r.stderr}")
            continue
        line = [name]
        for backends in ("host", "dnnl,ewise,host"):
            out_dir = os.path.join(work, f"{name}.{backends.split(',')[0]}")
            shutil.rmtree(out_dir, ignore_errors=True)
            cmd = [partita, "run", path, "-o", out_dir, "-q", "--backends", backends]
            for a in args:
                cmd += ["-i", a]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                failures.append(f"{name} ({backends}): partita failed: {r.stdout}{r.stderr}")
                continue
            if c["on_dnnl"] and backends != "host":
                pta = os.path.join(work, f"{name}.pta")
                r = subprocess.run([partita, "compile", path, "-o", pta, "--backends", backends],
                                   capture_output=True, text=True)
                r = subprocess.run([partita, "inspect", pta], capture_output=True, text=True)
                if r.returncode != 0 or "0 host nodes" not in r.stdout:
                    failures.append(f"{name}: expected the node on oneDNN: {r.stdout}{r.stderr}")
            for o in outs:
                want = np.load(os.path.join(ort_dir, f"{o}.npy"))
                if c["layout"] == 1:
                    want = to_layout1(o, want)
                e = relative(np.load(os.path.join(out_dir, f"{o}.npy")), want)
                line.append(f"{backends.split(',')[0]}:{o} {e:.1e}")
                if not e <= TOL:
                    failures.append(f"{name} ({backends}): {o} differs from ONNX Runtime by {e:.2e}")
        print("  ".join(line))
    for name, (kw, message) in BAD.items():
        path = os.path.join(work, f"{name}.onnx")
        feeds, _ = build(case(**kw), path)
        cmd = [partita, "run", path, "-o", os.path.join(work, name + ".out"), "-q"]
        for k, v in feeds.items():
            np.save(os.path.join(work, f"{name}.{k}.npy"), v)
            cmd += ["-i", f"{k}={os.path.join(work, name + '.' + k + '.npy')}"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        text = r.stdout + r.stderr
        ok = r.returncode == 1 and message in text and f"node '{kw['op'].lower()}_node'" in text
        print(f"{name}: exit {r.returncode}: {text.strip().splitlines()[-1] if text.strip() else ''}")
        if not ok:
            failures.append(f"{name}: expected exit 1 naming the node and '{message}', got {r.returncode}: {text}")
    if failures:
        print("\n".join(failures))
        sys.exit(1)
    print(f"{len(CASES)} cases agree with ONNX Runtime, {len(BAD)} bad nodes refused")


if __name__ == "__main__":
    main()
