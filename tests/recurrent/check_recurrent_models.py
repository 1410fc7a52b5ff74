#!/usr/bin/python3
"""Recurrent models exported from PyTorch (scripts/export_recurrent.py: a streaming
VAD-style Conv1d + LSTM with its state in and out, the same with a GRU, a two-layer
bidirectional GRU, a two-layer ReLU RNN, and vad_if, a VAD as shipped ones are
exported: one If on the sample rate between two STFT front ends, then a Conv1d encoder
and an LSTM with its state in and out; symbolic batch and length) against PyTorch
and ONNX Runtime (CTest `recurrent_models`; docs/recurrent.md, docs/control_flow.md).

Every output, at every exported size, from the .onnx and from a .pta, with
`--backends host` and `--backends dnnl,ewise,host`, must agree with PyTorch and with
ONNX Runtime (bench/ort_runner.js) within max|a-e| / max|e| <= 1e-4. The streaming
models also run five frames one after the other with the state fed back, compared
with PyTorch doing the same (vad_if: at both sample rates, two frame lengths each,
from the .onnx too, and ONNX Runtime the same way). With oneDNN, `partita inspect` must show the LSTM and the
GRU of the streaming models on dnnl (shape-polymorphic) and W and R stored only in
oneDNN's gate order and layout (derived: plain ldigo in the artifact compiled for two
threads, oneDNN's blocked choice in the one for one thread), not as ONNX's originals; for
vad_if it must also show both branches of the If with their STFT Conv chains on dnnl.

Exits 77 (CTest: skipped) when node or onnxruntime-node is missing.

Usage: check_recurrent_models.py PARTITA_BINARY WORK_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import export_recurrent as ex  # noqa: E402

TOL = 1e-4
ORT_RUNNER = os.path.join(ROOT, "bench", "ort_runner.js")


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise SystemExit(f"FAILED: {' '.join(cmd)}\n{r.stdout}{r.stderr}")
    return r.stdout


def relative(a, e):
    if a.shape != e.shape:
        return float("inf")
    return float(np.abs(a.astype(np.float64) - e).max() / max(np.abs(e).max(), 1e-30))


def ort_outputs(onnx_path, inputs, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    cmd = ["node", ORT_RUNNER, onnx_path, "--threads", "1", "--output-dir", out_dir]
    for name, path in inputs.items():
        cmd += ["--input", f"{name}={path}"]
    r = subprocess.run(cmd, input="quit\n", capture_output=True, text=True, cwd=os.path.dirname(ORT_RUNNER))
    if r.returncode != 0 or '"ready"' not in r.stdout:
        raise SystemExit(f"FAILED: {' '.join(cmd)}\n{r.stdout}{r.stderr}")


def partita_outputs(partita, model, inputs, out_dir, extra):
    shutil.rmtree(out_dir, ignore_errors=True)
    cmd = [partita, "run", model, "-o", out_dir, "-q"] + extra
    for name, path in inputs.items():
        cmd += ["-i", f"{name}={path}"]
    run(cmd)



def feed_frames(work, name, stream, runner, frames, pairs, run_frame):
    """Runs `frames` one after another through run_frame(inputs, out_dir), each run's
    output states (pairs: output, input, ...) fed back as the next one's inputs; the
    first run reads the stream's initial states. Returns the last run's out_dir."""
    state = {pairs[i + 1]: os.path.join(work, f"{name}.stream.{pairs[i + 1]}.npy") for i in range(0, len(pairs), 2)}
    out_dir = None
    for k, frame in enumerate(frames):
        frame_path = os.path.join(work, f"{name}.{stream}.frame{k}.npy")
        np.save(frame_path, frame)
        out_dir = os.path.join(work, f"{name}.{stream}.{runner}.{k}")
        run_frame(dict(state, input=frame_path), out_dir)
        state = {pairs[i + 1]: os.path.join(out_dir, f"{pairs[i]}.npy") for i in range(0, len(pairs), 2)}
    return out_dir


def stream_errors(out_dir, want, label, prefix):
    """Prints how far a stream's last outputs in out_dir are from `want` (name -> array)
    and returns a failure line, starting with `prefix`, for each one beyond TOL."""
    errs = {n: relative(np.load(os.path.join(out_dir, f"{n}.npy")), w) for n, w in want.items()}
    print(f"  {label}: " + ", ".join(f"{n} {e:.1e}" for n, e in errs.items()))
    return [f"{prefix}{n} after five frames differs by {e:.2e}" for n, e in errs.items() if e > TOL]

def main():
    partita, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    if shutil.which("node") is None or not os.path.isdir(os.path.join(ROOT, "bench", "node_modules",
                                                                      "onnxruntime-node")):
        print("SKIPPED: node or bench/node_modules/onnxruntime-node missing (./bench/run.sh installs it)")
        sys.exit(77)
    failures = []
    for name in ex.MODELS:
        if name != "gru_decode":
            ex.export_one(name, work)
    for name, (_, in_names, out_names, _, sizes) in ex.MODELS.items():
        if name == "gru_decode":
            continue  # a Loop, checked by control_flow_models
        onnx_path = os.path.join(work, f"{name}.onnx")
        artifacts = {}
        # oneDNN artifacts for 2 threads and for 1 (with one thread, oneDNN's brgemm
        # kernels and their blocked weight layout; with two, small steps keep plain ldigo).
        for label, backends, threads in (("host", "host", "2"), ("dnnl", "dnnl,ewise,host", "2"),
                                         ("dnnl1", "dnnl,ewise,host", "1")):
            pta = os.path.join(work, f"{name}.{label}.pta")
            run([partita, "compile", onnx_path, "-o", pta, "--backends", backends, "--threads", threads])
            artifacts[label] = pta
        inspect = run([partita, "inspect", artifacts["dnnl"]])
        partition = re.search(r"^partition: .*$", inspect, re.M).group(0)
        print(f"{name}: {partition}")
        if name in ex.STREAMING:
            # The recurrent node on oneDNN, its weights derived (oneDNN's gate order).
            if not re.search(r"on dnnl \([0-9]+ nodes, [0-9]+ shape-polymorphic\)", partition):
                failures.append(f"{name}: no shape-polymorphic dnnl region: {partition}")
            op = "GRU" if name == "gru_stream" else "LSTM"
            if f"{op} node" in inspect and "on host" in inspect.split(f"{op} node", 1)[1].split("\n", 1)[0]:
                failures.append(f"{name}: the {op} stayed on the host")
            # W and R derived in oneDNN's gate order, in the layout oneDNN chose for one
            # thread at either thread count (these RNNs are too small to share a
            # timestep between threads, stepOnOneThread): blocked for the LSTM's brgemm
            # kernels, ldigo for its linear-before-reset GRU; ONNX's originals not stored.
            one_thread = r"(?!abcde:)\S+:" if op == "LSTM" else r"\S+:"
            if name == "vad_if":
                # The regions inside the branches: each branch's STFT Conv and its 1x1 Conv on dnnl.
                for branch in ("then_branch", "else_branch"):
                    body = inspect.split(f"If '/If' {branch}:", 1)
                    if len(body) != 2 or not re.match(r"[^\n]*\n\s+partition: \d+ regions? on dnnl", body[1]) or \
                            len(re.findall(r"dnnl_region\S*\s+dnnl\s+\d+ nodes?:[^\n]*Conv",
                                           body[1].split("If '/If'", 1)[0])) < 1:
                        failures.append(f"{name}: partita inspect shows no dnnl region in {branch}:\n{inspect}")
            for label, want in (("dnnl", one_thread), ("dnnl1", one_thread)):
                text = inspect if label == "dnnl" else run([partita, "inspect", artifacts[label]])
                derived = re.findall(rf"^\s*\d+\s+\S+\s+float32\s+\[1,1,\d+,[34],64\]\s+dnnl:f32:{want}",
                                     text, re.M)
                plain = re.findall(rf"^\s*\d+\s+onnx::{op}_\S+\s+float32\s+\[1,\d+,\d+\]\s+-\s", text, re.M)
                if len(derived) != 2 or plain:
                    failures.append(f"{name} ({label}): W and R not derived as expected (or originals kept):\n{text}")
        configs = [("onnx host", onnx_path, ["--backends", "host"]),
                   ("onnx dnnl", onnx_path, ["--backends", "dnnl,ewise,host"]),
                   ("pta host", artifacts["host"], []), ("pta dnnl", artifacts["dnnl"], []),
                   ("pta dnnl 1 thread", artifacts["dnnl1"], ["--threads", "1"])]
        for label in sizes:
            inputs = {n: os.path.join(work, f"{name}.{label}.{n}.npy") for n in in_names}
            torch_out = {n: np.load(os.path.join(work, f"{name}.{label}.{n}.npy")) for n in out_names}
            ort_dir = os.path.join(work, f"{name}.{label}.ort")
            ort_outputs(onnx_path, inputs, ort_dir)
            ort_out = {n: np.load(os.path.join(ort_dir, f"{n}.npy")) for n in out_names}
            for n in out_names:
                e = relative(ort_out[n], torch_out[n])
                if e > TOL:
                    failures.append(f"{name}@{label}: ONNX Runtime's {n} differs from PyTorch's by {e:.2e}")
            for cname, model, extra in configs:
                out_dir = os.path.join(work, f"{name}.{label}.{cname.replace(' ', '_')}")
                partita_outputs(partita, model, inputs, out_dir, extra)
                worst = []
                for n in out_names:
                    got = np.load(os.path.join(out_dir, f"{n}.npy"))
                    et, eo = relative(got, torch_out[n]), relative(got, ort_out[n])
                    worst.append(f"{n} {et:.1e}/{eo:.1e}")
                    if et > TOL or eo > TOL:
                        failures.append(f"{name}@{label} {cname}: {n} vs PyTorch {et:.2e}, vs ORT {eo:.2e}")
                print(f"  {label} {cname}: vs PyTorch/ORT " + ", ".join(worst))
        for stream, (_, others) in ex.STREAMS.get(name, {}).items():
            pairs = ex.STREAMING[name]
            frames = np.load(os.path.join(work, f"{name}.{stream}.frames.npy"))
            want = {n: np.load(os.path.join(work, f"{name}.{stream}.{n}.npy")) for n in out_names}
            fixed = {k: os.path.join(work, f"{name}.{stream}.{k}.npy") for k in others}
            if name == "vad_if":
                # ONNX Runtime frame by frame too, its own state fed back.
                ort_dir = feed_frames(work, name, stream, "ort", frames, pairs,
                                      lambda inputs, out_dir: ort_outputs(onnx_path, dict(inputs, **fixed), out_dir))
                failures += stream_errors(ort_dir, want, f"{stream}: five frames, state fed back, ONNX Runtime vs PyTorch",
                                          f"{name} {stream}: ONNX Runtime's ")
            # From the artifacts (vad_if, the model as shipped ones are: from the .onnx too).
            for cname, model, extra in (configs if name == "vad_if" else configs[2:]):
                out_dir = feed_frames(work, name, stream, cname.replace(' ', '_'), frames, pairs,
                                      lambda inputs, out_dir: partita_outputs(partita, model, dict(inputs, **fixed),
                                                                              out_dir, extra))
                failures += stream_errors(out_dir, want,
                                          f"{stream}: five frames of {frames.shape[-1]} samples, state fed back, "
                                          f"{cname}", f"{name} {stream} {cname}: ")
    if failures:
        print("\n".join(failures))
        sys.exit(1)
    print("all outputs agree")


if __name__ == "__main__":
    main()
