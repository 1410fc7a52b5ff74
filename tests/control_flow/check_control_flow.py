#!/usr/bin/python3
"""Control flow end to end (CTest `control_flow_models`; docs/control_flow.md).

Models with If, Loop and Scan: four exported from PyTorch (torch.jit.script control
flow exports as If/Loop; gru_decode, a greedy decoding Loop over a GRU that stops at
its end token or at max_len, is scripts/export_recurrent.py's), two built with
onnx.helper (PyTorch exports no Scan, and
the branches with identical but separate initializers). Each runs

  - from the .onnx (compiled in memory),
  - from a .pta compiled for the host alone,
  - from a .pta compiled with --backends dnnl,ewise,host,

and every output is compared with ONNX Runtime (onnxruntime-node, when installed in
bench/node_modules) and with the model's own reference (PyTorch or numpy), within
max|a-e|/max|e| <= 1e-4. `partita inspect` must show the subgraphs, and the artifact
of the model whose branches hold the same weight twice must store it once.

Usage: check_control_flow.py PARTITA_BINARY WORK_DIR [NODE_MODULES]
"""
import os
import re
import subprocess
import sys

import numpy as np
import onnx
import torch
import torch.nn as nn
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "scripts"))
import export_recurrent  # noqa: E402

TOL = 1e-4


class IfConv(nn.Module):
    """A voice-activity-style front end: an If on an int64 sample rate picks one of
    two Conv branches, a Conv after it."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(1, 8, 3, padding=1)
        self.b = nn.Conv2d(1, 8, 5, padding=2)
        self.c = nn.Conv2d(8, 4, 1)

    def forward(self, x, sr):
        if bool(sr[0] == 16000):
            y = torch.relu(self.a(x))
        else:
            y = torch.sigmoid(self.b(x)) * 2.0
        return self.c(y)


class Decoder(nn.Module):
    """Greedy decoding: a Loop over a small recurrent cell whose outputs (tokens and
    states) grow by one row per iteration (shapes change across iterations)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 16)
        self.w = nn.Linear(16, 16)
        self.u = nn.Linear(16, 16)
        self.out = nn.Linear(16, 10)

    def forward(self, h, steps):
        tok = torch.zeros(1, dtype=torch.long)
        toks = torch.zeros(0, dtype=torch.long)
        hs = torch.zeros(0, 16)
        for _ in range(int(steps)):
            h = torch.tanh(self.w(self.emb(tok)) + self.u(h))
            tok = torch.argmax(self.out(h), dim=1)
            toks = torch.cat([toks, tok])
            hs = torch.cat([hs, h], 0)
        return toks, hs, h


class SharedWeight(nn.Module):
    """Both branches of an If use one Conv's weight."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)

    def forward(self, x, flag):
        if bool(flag[0] > 0):
            y = self.conv(x)
        else:
            y = self.conv(torch.relu(x)) * 2.0
        return y


def scan_model(path):
    """Scan, cumulative: a state s[4] plus x_t @ W (W an initializer of the body) times
    an outer-scope scale, over x[T,4] forward along axis 0 and z[4,T] in reverse along
    axis 1; scan outputs along axes 0 and 1 (the second in reverse)."""
    rng = np.random.RandomState(3)
    w = rng.randn(4, 4).astype(np.float32)
    body = helper.make_graph(
        [helper.make_node("MatMul", ["x_t", "W"], ["xw"]),
         helper.make_node("Mul", ["xw", "scale"], ["xws"]),
         helper.make_node("Add", ["s_in", "xws"], ["s_a"]),
         helper.make_node("Add", ["s_a", "z_t"], ["s_out"]),
         helper.make_node("Relu", ["s_out"], ["y_t"]),
         helper.make_node("Neg", ["s_out"], ["n_t"])],
        "scan_body",
        [helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [4]),
         helper.make_tensor_value_info("x_t", TensorProto.FLOAT, [4]),
         helper.make_tensor_value_info("z_t", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [4]),
         helper.make_tensor_value_info("y_t", TensorProto.FLOAT, [4]),
         helper.make_tensor_value_info("n_t", TensorProto.FLOAT, [4])],
        [numpy_helper.from_array(w, "W")])
    scan = helper.make_node("Scan", ["s0", "x", "z"], ["s_final", "ys", "ns"], body=body, num_scan_inputs=2,
                            scan_input_axes=[0, 1], scan_input_directions=[0, 1],
                            scan_output_axes=[0, 1], scan_output_directions=[0, 1])
    graph = helper.make_graph(
        [scan], "scan_cumulative",
        [helper.make_tensor_value_info("s0", TensorProto.FLOAT, [4]),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", 4]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [4, "T"]),
         helper.make_tensor_value_info("scale", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("s_final", TensorProto.FLOAT, [4]),
         helper.make_tensor_value_info("ys", TensorProto.FLOAT, ["T", 4]),
         helper.make_tensor_value_info("ns", TensorProto.FLOAT, [4, "T"])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)]), path)

    def reference(s0, x, z, scale):
        s, ys, ns = s0.copy(), [], []
        t_len = x.shape[0]
        for t in range(t_len):
            s = s + (x[t] @ w) * scale + z[:, t_len - 1 - t]
            ys.append(np.maximum(s, 0))
            ns.append(-s)
        return {"s_final": s, "ys": np.stack(ys), "ns": np.stack(ns[::-1], 1)}
    return reference


def same_bytes_model(path):
    """An If whose branches each hold their own initializer with the same bytes (a
    [16,8,3,3] Conv weight): stored once in the artifact."""
    rng = np.random.RandomState(5)
    w = rng.randn(16, 8, 3, 3).astype(np.float32)

    def branch(name, act, weight_name):
        return helper.make_graph(
            [helper.make_node("Conv", ["x", weight_name], [name + "_c"], pads=[1, 1, 1, 1]),
             helper.make_node(act, [name + "_c"], [name + "_y"])],
            name, [], [helper.make_tensor_value_info(name + "_y", TensorProto.FLOAT, [1, 16, 8, 8])],
            [numpy_helper.from_array(w, weight_name)])
    node = helper.make_node("If", ["cond"], ["y"], then_branch=branch("then", "Relu", "w_then"),
                            else_branch=branch("else", "Sigmoid", "w_else"))
    graph = helper.make_graph(
        [node], "same_bytes",
        [helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 8, 8])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)]), path)
    conv = nn.Conv2d(8, 16, 3, padding=1, bias=False)
    with torch.no_grad():
        conv.weight.copy_(torch.from_numpy(w))

    def reference(cond, x):
        with torch.no_grad():
            c = conv(torch.from_numpy(x))
            return {"y": (torch.relu(c) if cond else torch.sigmoid(c)).numpy()}
    return reference, w.nbytes


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"FAILED: {' '.join(cmd)}\n{r.stdout}{r.stderr}")
    return r.stdout


def relative(a, e):
    if a.shape != e.shape:
        return float("inf")
    if e.size == 0:
        return 0.0
    a, e = a.astype(np.float64), e.astype(np.float64)
    return float(np.abs(a - e).max() / max(np.abs(e).max(), 1e-30))


def seeded(ctor):
    """`ctor` made with torch's seed 0 (the weights scripts/export_recurrent.py exports)."""
    def make():
        torch.manual_seed(0)
        return ctor()
    return make


def torch_reference(model):
    def reference(*inputs):
        with torch.no_grad():
            out = model(*[torch.from_numpy(np.array(i)) for i in inputs])
        out = out if isinstance(out, tuple) else (out,)
        return [o.numpy() for o in out]
    return reference


def main():
    partita, work = sys.argv[1], sys.argv[2]
    node_modules = os.path.abspath(sys.argv[3]) if len(sys.argv) > 3 else ""
    have_ort = bool(node_modules) and os.path.isdir(os.path.join(node_modules, "onnxruntime-node"))
    ort_js = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ort_outputs.js")
    os.makedirs(work, exist_ok=True)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    failures = []
    if not have_ort:
        print("note: onnxruntime-node not found (run bench/run.sh once); comparing with the models' own references only")

    cases = []  # (name, onnx path, input names, list of input sets, reference(inputs) -> {name: array})
    # PyTorch models, scripted so that their control flow exports as If/Loop.
    decode = [np.random.RandomState(s).randn(1, 1, 64).astype(np.float32) for s in (9, 10)]
    for name, ctor, example, names, outs, sets in [
        ("if_conv", IfConv, (torch.randn(1, 1, 16, 16), torch.tensor([16000])), ["x", "sr"], ["y"],
         [[np.random.RandomState(1).randn(1, 1, 16, 16).astype(np.float32), np.array([16000], np.int64)],
          [np.random.RandomState(2).randn(1, 1, 16, 16).astype(np.float32), np.array([8000], np.int64)]]),
        ("loop_decode", Decoder, (torch.randn(1, 16), torch.tensor(3)), ["h", "steps"], ["toks", "hs", "h_last"],
         [[np.random.RandomState(3).randn(1, 16).astype(np.float32), np.array(6, np.int64)],
          [np.random.RandomState(4).randn(1, 16).astype(np.float32), np.array(1, np.int64)]]),
        ("if_shared_weight", SharedWeight, (torch.randn(1, 3, 8, 8), torch.tensor([1])), ["x", "flag"], ["y"],
         [[np.random.RandomState(5).randn(1, 3, 8, 8).astype(np.float32), np.array([1], np.int64)],
          [np.random.RandomState(6).randn(1, 3, 8, 8).astype(np.float32), np.array([0], np.int64)]]),
        # The weights of export_recurrent.py's export: stops at its end token (13 iterations
        # of 32), at max_len 3, and after none. (Its example draws nothing from torch's RNG,
        # so the models above keep their weights.)
        ("gru_decode", seeded(export_recurrent.GruDecoder), (torch.zeros(1, 1, 64), torch.tensor(5)),
         ["h", "max_len"],
         ["tokens", "scores", "h_last"],
         [list(export_recurrent.decode_inputs(torch.Generator().manual_seed(6), 32).values()),
          [decode[0], np.array(3, np.int64)], [decode[1], np.array(0, np.int64)]]),
    ]:
        model = ctor().eval()
        path = os.path.join(work, name + ".onnx")
        torch.onnx.export(torch.jit.script(model), example, path, opset_version=16, input_names=names,
                          output_names=outs)
        ref = torch_reference(model)
        cases.append((name, path, names, sets, lambda ins, ref=ref, outs=outs: dict(zip(outs, ref(*ins)))))

    scan_path = os.path.join(work, "scan_cumulative.onnx")
    scan_ref = scan_model(scan_path)
    rs = np.random.RandomState(7)
    scan_sets = [[rs.randn(4).astype(np.float32), rs.randn(t, 4).astype(np.float32), rs.randn(4, t).astype(np.float32),
                  np.array([0.5], np.float32)] for t in (5, 1, 9)]
    cases.append(("scan_cumulative", scan_path, ["s0", "x", "z", "scale"], scan_sets, lambda ins: scan_ref(*ins)))

    same_path = os.path.join(work, "if_same_bytes.onnx")
    same_ref, weight_bytes = same_bytes_model(same_path)
    rs = np.random.RandomState(8)
    same_sets = [[np.array(c), rs.randn(1, 8, 8, 8).astype(np.float32)] for c in (True, False)]
    cases.append(("if_same_bytes", same_path, ["cond", "x"], same_sets, lambda ins: same_ref(*ins)))

    for name, path, names, sets, reference in cases:
        ptas = {}
        for mix in ("host", "dnnl,ewise,host"):
            pta = os.path.join(work, f"{name}.{mix.replace(',', '_')}.pta")
            run([partita, "compile", path, "-o", pta, "--backends", mix])
            ptas[mix] = pta
        inspect = run([partita, "inspect", ptas["dnnl,ewise,host"]])
        if "subgraphs:" not in inspect and name != "if_same_bytes":
            failures.append(f"{name}: partita inspect shows no subgraphs")
        if name == "if_same_bytes":
            # Two initializers with the same bytes, one in each branch: stored once.
            for mix, pta in ptas.items():
                text = run([partita, "inspect", pta])
                m = re.search(r"distinct weights\s+(\d+)\s+in (\d+) tensors", text)
                stored = int(m.group(1)) if m else -1
                print(f"  {name} ({mix}): distinct weights {stored} bytes (one weight: {weight_bytes})")
                if mix == "host" and stored != weight_bytes:
                    failures.append(f"{name} ({mix}): stores {stored} weight bytes, not {weight_bytes}")
        for i, inputs in enumerate(sets):
            in_args = []
            for n, v in zip(names, inputs):
                p = os.path.join(work, f"{name}.{i}.{n}.npy")
                np.save(p, v)
                in_args += ["-i", f"{n}={p}"]
            want = {k: np.asarray(v) for k, v in reference(inputs).items()}
            ort = {}
            if have_ort:
                ort_dir = os.path.join(work, f"{name}.{i}.ort")
                run(["node", ort_js, node_modules, path, ort_dir] + [a for a in in_args if a != "-i"])
                ort = {k: np.load(os.path.join(ort_dir, k + ".npy")) for k in want}
            for label, model in (("onnx", path), ("pta host", ptas["host"]), ("pta dnnl,ewise,host", ptas["dnnl,ewise,host"])):
                out_dir = os.path.join(work, f"{name}.{i}.{label.replace(' ', '_').replace(',', '_')}")
                run([partita, "run", model, *in_args, "-o", out_dir, "-q"])
                errs = []
                for k, e in want.items():
                    got = np.load(os.path.join(out_dir, k + ".npy"))
                    err = relative(got, e)
                    err_ort = relative(got, ort[k]) if k in ort else 0.0
                    errs.append(f"{k}{list(got.shape)} {err:.1e}" + (f"/ort {err_ort:.1e}" if k in ort else ""))
                    if not (err <= TOL and err_ort <= TOL):
                        failures.append(f"{name} set {i} from {label}: {k} {list(got.shape)} vs {list(e.shape)}: "
                                        f"reference {err:.2e}, ORT {err_ort:.2e}")
                print(f"{name} set {i} {label}: " + ", ".join(errs))
    if failures:
        print("\n".join(failures))
        sys.exit(1)
    print("all outputs agree")


if __name__ == "__main__":
    main()
