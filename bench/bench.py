#!/usr/bin/env python3
"""partita's benchmark driver (`make bench` -> bench/run.sh -> this script).

For every model of the set (scripts/export_models.py at opset 13 with seeded random
weights, plus the demo model) it:
  * measures the .onnx size and its distinct weight bytes, compiles two artifacts
    (host only; oneDNN + host) and times the compiles;
  * starts one long-lived worker per runtime and thread count (partita host,
    partita oneDNN + host, ONNX Runtime via onnxruntime-node, PyTorch), each of which
    loads the model, runs once, reports memory and writes its output;
  * interleaves timed batches of the workers round-robin, so that drift of the machine
    hits every runtime alike, and keeps the per-run latencies;
  * compares every runtime's output with PyTorch's (the export's expected output);
  * times whole `partita-run X.pta` processes from start to first result, with the
    artifact in the page cache (warm) and after evicting it (cold), next to the
    reference "mmap + touch every page + one warm run";
then times partita and ONNX Runtime while busy loops keep every core busy
(bench/contention.py), runs the kernel micro-benchmarks and writes build/bench/results.json, the
committed copy bench/results/results.json, docs/benchmarks.md and the PNG charts
(bench/report.py).

Models as shipped (scripts/export_shipped.py: OCR detector and recognizer, audio
front end, keyword spotter, ShuffleNetV2, exported with symbolic dims) are entries
NAME@SIZE: each model is compiled once, without --shape (`--backends dnnl,ewise,host`),
and that one artifact is run at every size against ONNX Runtime on the same .onnx.

Streaming recurrent models (scripts/export_recurrent.py), entries NAME@stream: a
VAD-style Conv1d + LSTM (and the same with a GRU) whose state is an input and an
output, run frame by frame (512 samples a frame) with the state fed back after every
run (`--feedback hn=h` in the runners); each timed run is one frame. partita host,
partita oneDNN + host (one artifact, no --shape) and ONNX Runtime. `vad_if@stream` is
the same kind of model as shipped VADs are exported: one If on the sample rate
between two STFT front ends, the LSTM state one tensor (`state` -> `stateN`).

Decoding loop, `gru_decode@greedy` (scripts/export_recurrent.py): greedy decoding as an
ONNX Loop over a GRU decoder that stops at its end token (13 iterations); each timed
run is one whole decode. The same three runtimes.

Reduced-precision models, entries SOURCE@KIND (bench/precision_bench.py, `--models
precision` for all of them): static QDQ int8 ResNet-18 and demo CNN, dynamic int8
encoder and U-Net (two sizes), float16 versions of the fixed models, made from the
models above with scripts/quantize_int8.py and scripts/make_float16.py and cached in
BUILD/bench/precision/. partita on the reduced model, ONNX Runtime on the same file and
partita on the float32 model it was made from, in the same round robin (batches of
--precision-batch-s); results under "precision".

A runtime or feature that is missing shows as n/a with the reason, never a number.
"""
import argparse
import datetime
import hashlib
import json
import os
import platform
import queue
import shutil
import subprocess
import sys
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PYTHON = "/usr/bin/python3"

EXPORTED = ["resnet18", "mobilenet_v2", "squeezenet1_1", "efficientnet_b0", "bert_encoder"]
DEMO = "fashion_cnn"
# Models as shipped, NAME@SIZE (the sizes scripts/export_shipped.py writes inputs for).
SHIPPED = ["ocr_det@640x640", "ocr_det@960x544", "ocr_rec@w160", "ocr_rec@w320", "ocr_rec@w640",
           "audio_mel@1s", "audio_mel@2s", "kws_cnn@76", "kws_cnn@152", "kws_cnn@76b8",
           "shufflenet_v2@224", "shufflenet_v2@320", "shufflenet_v2@224b8"]
SHIPPED_RUNTIMES = ["partita_dnnl", "ort"]
# Streaming recurrent models, NAME@stream (scripts/export_recurrent.py): inputs, and the
# outputs fed back as inputs after every run (frame by frame).
STREAMING = ["vad_lstm@stream", "gru_stream@stream", "vad_if@stream"]
# The decoding Loop (same export script and runtimes; nothing fed back).
DECODING = ["gru_decode@greedy"]
STREAMING_IO = {"vad_lstm": (["input", "h", "c"], [("hn", "h"), ("cn", "c")]),
                "gru_stream": (["input", "h"], [("hn", "h")]),
                "vad_if": (["input", "state", "sr"], [("stateN", "state")]),
                "gru_decode": (["h", "max_len"], [])}
# The output compared with PyTorch's (the runners write output 0), when not `output`.
FIRST_OUTPUT = {"gru_decode": "tokens"}
STREAMING_RUNTIMES = ["partita_host", "partita_dnnl", "ort"]
SHIPPED_BACKENDS = "dnnl,ewise,host"
ENCODERS = {"bert_encoder"}

# Runtimes, in the order the report shows them.
RUNTIMES = ["partita_host", "partita_dnnl", "ort", "torch"]
RUNTIME_LABELS = {
    "partita_host": "partita (host)",
    "partita_dnnl": "partita (oneDNN + host)",
    "ort": "ONNX Runtime",
    "torch": "PyTorch",
}

# Outputs agree when max|a - e| / max|e| stays below this (float32, different
# summation orders and fused kernels; the models have random weights).
AGREE_TOL = 1e-3


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def last_line(text, limit=300):
    lines = [ln.strip() for ln in (text or "").strip().splitlines() if ln.strip()]
    return (lines[-1] if lines else "no output")[:limit]


def stats(ms):
    a = np.asarray(ms, dtype=np.float64)
    return {"n": int(a.size), "median_ms": float(np.median(a)), "p90_ms": float(np.percentile(a, 90)),
            "min_ms": float(a.min()), "mean_ms": float(a.mean()),
            "cv": float(a.std() / a.mean()) if a.mean() > 0 else 0.0}


# ---- machine --------------------------------------------------------------------

def machine_info():
    info = {"cpu": platform.processor() or "unknown", "cores": os.cpu_count(), "kernel": platform.release()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            info["memory_gib"] = round(int(f.readline().split()[1]) / 2**20, 1)
    except OSError:
        pass
    for pkg in ["libdnnl2", "python3-torch", "python3-onnx", "libopenblas0-pthread"]:
        try:
            out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True, text=True)
            if out.returncode == 0:
                info[f"version_{pkg}"] = out.stdout.strip()
        except OSError:
            pass
    try:
        rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True)
        info["commit"] = rev.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")
    except OSError:
        pass
    return info


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


# ---- models ---------------------------------------------------------------------

def script_digest(script):
    """What an export stamp records: the export script's content."""
    with open(script, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:16]


def run_export(script, out_dir, models):
    os.makedirs(out_dir, exist_ok=True)
    out = subprocess.run([PYTHON, script, "--out", out_dir, "--models", ",".join(models)],
                         capture_output=True, text=True)
    sys.stdout.write(out.stdout)
    if out.returncode != 0:
        sys.stderr.write(out.stderr)
        raise SystemExit("model export failed")


def export_models(models_dir, names):
    """Exports what is missing or stale (keyed by the export script's content)."""
    script = os.path.join(ROOT, "scripts", "export_models.py")
    digest = script_digest(script)
    stamp = os.path.join(models_dir, "export.stamp")
    fresh = os.path.exists(stamp) and open(stamp).read().strip() == digest
    todo = [n for n in names if not fresh or not all(
        os.path.exists(os.path.join(models_dir, f"{n}{ext}")) for ext in (".onnx", ".input.npy", ".expected.npy"))]
    if not todo:
        log(f"models up to date in {models_dir}")
        return {}
    log(f"exporting {','.join(todo)} (opset 13, seeded random weights)")
    t0 = time.perf_counter()
    run_export(script, models_dir, todo)
    if set(todo) == set(names) or fresh:
        with open(stamp, "w") as f:
            f.write(digest + "\n")
    return {"export_s": time.perf_counter() - t0}


def export_stamped(script_name, out_dir, names, all_models, what):
    """Runs scripts/<script_name> for all of `all_models` when one of the models `names`
    need is missing or the script changed since the stamp was written (the stamp covers
    the set)."""
    script = os.path.join(ROOT, "scripts", script_name)
    digest = script_digest(script)
    stamp = os.path.join(out_dir, "export.stamp")
    models = sorted({n.split("@")[0] for n in names})
    fresh = os.path.exists(stamp) and open(stamp).read().strip() == digest
    if fresh and all(os.path.exists(os.path.join(out_dir, m + ".onnx")) for m in models):
        return
    log(f"exporting {','.join(all_models)}{what} (scripts/{script_name})")
    run_export(script, out_dir, list(all_models))
    with open(stamp, "w") as f:
        f.write(digest + "\n")


def export_shipped(shipped_dir, names):
    """Exports the shipped-style models NAME@SIZE need, when missing or stale."""
    export_stamped("export_shipped.py", shipped_dir, names, SHIPPED_MODELS, " with symbolic dims")


SHIPPED_MODELS = sorted({n.split("@")[0] for n in SHIPPED})


def export_streaming(out_dir, names):
    """Exports the streaming recurrent models, when missing or stale."""
    export_stamped("export_recurrent.py", out_dir, names, sorted(STREAMING_IO), "")


def model_files(models_dir, name):
    if "@" in name and name.split("@")[0] in STREAMING_IO:
        model, size = name.split("@", 1)
        d = os.path.join(os.path.dirname(models_dir), "recurrent")
        ins, feedback = STREAMING_IO[model]
        return {"onnx": os.path.join(d, f"{model}.onnx"), "input": os.path.join(d, f"{model}.{size}.input.npy"),
                "inputs": [(n, os.path.join(d, f"{model}.{size}.{n}.npy")) for n in ins],
                "expected": os.path.join(d, f"{model}.{size}.{FIRST_OUTPUT.get(model, 'output')}.npy"),
                "input_name": "input", "feedback": feedback, "shipped": True, "streaming": True,
                "decoding": name in DECODING}
    if "@" in name:
        model, size = name.split("@", 1)
        d = os.path.join(os.path.dirname(models_dir), "shipped")
        return {"onnx": os.path.join(d, f"{model}.onnx"), "input": os.path.join(d, f"{model}.{size}.input.npy"),
                "expected": os.path.join(d, f"{model}.{size}.expected.npy"), "input_name": "input",
                "shipped": True}
    if name == DEMO:
        d = os.path.join(ROOT, "models", "fashion")
        return {"onnx": os.path.join(d, "fashion_cnn.onnx"), "input": os.path.join(d, "test_images.npy"),
                "expected": os.path.join(d, "expected_logits.npy"), "input_name": "input"}
    return {"onnx": os.path.join(models_dir, f"{name}.onnx"), "input": os.path.join(models_dir, f"{name}.input.npy"),
            "expected": os.path.join(models_dir, f"{name}.expected.npy"), "input_name": "input"}


def weight_bytes(onnx_path):
    """Total and distinct (by dtype, shape and content) bytes of the initializers and
    Constant-node tensors: what any artifact of the model has to store at least; the
    distinct bytes also by dtype."""
    import onnx
    import onnx.numpy_helper
    m = onnx.load(onnx_path)
    tensors = list(m.graph.initializer)
    for n in m.graph.node:
        if n.op_type == "Constant":
            tensors += [a.t for a in n.attribute if a.name == "value"]
    total, seen, by_dtype = 0, {}, {}
    for t in tensors:
        a = onnx.numpy_helper.to_array(t)
        b = np.ascontiguousarray(a).tobytes()
        total += len(b)
        key = (a.dtype.str, a.shape, hashlib.sha256(b).digest())
        if key not in seen:
            by_dtype[str(a.dtype)] = by_dtype.get(str(a.dtype), 0) + len(b)
        seen[key] = len(b)
    return {"weights_total_bytes": total, "weights_distinct_bytes": sum(seen.values()),
            "weights_distinct_by_dtype": by_dtype, "weights_count": len(tensors),
            "weights_distinct_count": len(seen), "nodes": len(m.graph.node)}


def compare(actual_path, expected_path):
    try:
        a = np.load(actual_path).astype(np.float64)
        e = np.load(expected_path).astype(np.float64)
    except (OSError, ValueError) as err:
        return {"ok": False, "error": f"cannot read output: {err}"}
    if a.shape != e.shape:
        return {"ok": False, "error": f"shape {a.shape} != expected {e.shape}"}
    diff = np.abs(a - e)
    rel = float(diff.max() / max(np.abs(e).max(), np.finfo(np.float32).tiny))
    return {"ok": bool(rel <= AGREE_TOL and np.isfinite(a).all()), "largest_rel_err": rel,
            "max_abs_err": float(diff.max())}


# ---- compile --------------------------------------------------------------------

_compiled = {}


def compile_artifacts(partita, files, work, name, thread_counts, only=None):
    """Compiles NAME.host.pta and NAME.dnnl.tN.pta for each thread count N (oneDNN picks
    weight layouts for the thread count it will run at: `partita compile --threads`).
    Returns {variant: info}; info["pta"] is the first thread count's artifact.
    A shipped model (one .onnx, several input sizes) is compiled once, without
    --shape, with SHIPPED_BACKENDS, and every size reuses those artifacts."""
    if files.get("shipped"):
        if files["onnx"] in _compiled:
            return json.loads(json.dumps(_compiled[files["onnx"]]))
        name = os.path.basename(files["onnx"])[:-len(".onnx")]
        work = os.path.join(os.path.dirname(work), name)
        os.makedirs(work, exist_ok=True)
    variants = (("partita_host", "host"), ("partita_dnnl", SHIPPED_BACKENDS)) if files.get("streaming") else \
        (("partita_dnnl", SHIPPED_BACKENDS),) if files.get("shipped") else \
        (("partita_host", "host"), ("partita_dnnl", "dnnl,host"))
    out = {}
    for variant, backends in variants:
        if only and variant not in only:
            continue
        per_threads = thread_counts if backends != "host" else thread_counts[:1]
        for threads in per_threads:
            suffix = f".t{threads}" if backends != "host" else ""
            pta = os.path.join(work, f"{name}.{variant.split('_')[1]}{suffix}.pta")
            if os.path.exists(pta):
                os.remove(pta)
            cmd = [partita, "compile", files["onnx"], "-o", pta, "--backends", backends, "--threads", str(threads)]
            t0 = time.perf_counter()
            res = subprocess.run(cmd, capture_output=True, text=True)
            dt = time.perf_counter() - t0
            if res.returncode != 0 or not os.path.exists(pta):
                out[variant] = {"na": f"`partita compile --backends {backends} --threads {threads}` failed: "
                                      f"{last_line(res.stderr + res.stdout)}"}
                break
            info = out.setdefault(variant, {"pta": pta, "compile_s": dt, "artifact_bytes": os.path.getsize(pta),
                                            "pta_by_threads": {}})
            info["pta_by_threads"][str(threads)] = pta
            insp = subprocess.run([partita, "inspect", pta], capture_output=True, text=True)
            if insp.returncode == 0:
                with open(pta + ".inspect.txt", "w") as f:
                    f.write(insp.stdout)
    if files.get("shipped"):
        if not files.get("streaming"):
            out["partita_host"] = {"na": "not measured for the shipped-style models"}
        _compiled[files["onnx"]] = out
    return out


def artifact_for(info, threads):
    """The artifact of a variant compiled for `threads` (or its only one)."""
    return info.get("pta_by_threads", {}).get(str(threads), info["pta"])


# ---- workers ----------------------------------------------------------------------

class Worker:
    """A runtime process speaking the runner protocol (see bench/model_runner.cpp)."""

    def __init__(self, key, cmd, log_path, cwd=None, env=None):
        self.key = key
        self.cmd = cmd
        self.log = open(log_path, "w")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     text=True, bufsize=1, cwd=cwd, env=env)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.times = []
        self.ready = None
        self.error = None

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def receive(self, timeout):
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no answer within {timeout:.0f} s")
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                self.proc.wait()
                self.log.flush()
                tail = last_line(open(self.log.name).read())
                raise RuntimeError(f"exited with {self.proc.returncode}: {tail}")
            line = line.strip()
            if not line.startswith("{"):
                continue  # stray prints of a library
            msg = json.loads(line)
            if msg.get("event") == "error":
                raise RuntimeError(msg.get("message", "error"))
            return msg

    def run(self, k, timeout):
        self.proc.stdin.write(f"run {k}\n")
        self.proc.stdin.flush()
        return self.receive(timeout)["ms"]

    def close(self):
        try:
            if self.proc.poll() is None:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired, ValueError):
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def worker_command(runtime, bins, files, name, threads, model_path, out_npy):
    inp = f"{files['input_name']}={files['input']}"
    if files.get("streaming"):  # several inputs, states fed back after every run
        args = []
        for n, path in files["inputs"]:
            args += ["--input", f"{n}={path}"]
        for out, inp_name in files["feedback"]:
            args += ["--feedback", f"{out}={inp_name}"]
        common = ["--threads", str(threads), "--output", out_npy] + args
        if runtime.startswith("partita"):
            backends = SHIPPED_BACKENDS if runtime == "partita_dnnl" else "host"
            return [bins["model_runner"], model_path, "--backends", backends] + common
        return ["node", os.path.join(HERE, "ort_runner.js"), files["onnx"]] + common
    if runtime.startswith("partita"):
        backends = "dnnl,host" if runtime == "partita_dnnl" else "host"
        if files.get("shipped") and runtime == "partita_dnnl":
            backends = SHIPPED_BACKENDS
        return [bins["model_runner"], model_path, "--input", inp, "--threads", str(threads), "--output", out_npy,
                "--backends", backends]
    if runtime == "ort":
        return ["node", os.path.join(HERE, "ort_runner.js"), files["onnx"], "--input", inp, "--threads",
                str(threads), "--output", out_npy]
    return [PYTHON, os.path.join(HERE, "torch_runner.py"), name, "--input", inp, "--threads", str(threads),
            "--output", out_npy]


def pin_worker(worker, cpus):
    """Pins every thread of a worker's process to `cpus` (threads it makes later inherit
    it from theirs). Best effort: a worker that exited is left to report why."""
    try:
        for tid in os.listdir(f"/proc/{worker.proc.pid}/task"):
            os.sched_setaffinity(int(tid), cpus)
    except (OSError, ValueError):
        pass


def time_workers(workers, opts, threads=None):
    """Warm-up, then round-robin timed batches until every worker has enough runs.

    At one thread every worker of a round runs on the same core, the next round on the
    next core: on this VM one core can run 15-20 % slower than the other for minutes
    (measured: four workers on one artifact, pinned two to each core, the pairs 1.75
    and 2.05 ms, which core was slow changing between rounds), and a worker left to the
    scheduler stays on the core it woke on, so a runtime's median depended on where its
    one process landed. Taking turns on the cores, every runtime sees each alike."""
    est = {}
    for w in workers:
        try:
            w.run(1, 120)  # a second untimed run after the first (ready) one
            ms = w.run(opts.warmup, 300)
            est[w.key] = max(float(np.median(ms)), 0.05)
        except Exception as e:  # noqa: BLE001 - reported as n/a
            w.error = f"warm-up failed: {e}"
        time.sleep(opts.settle)
    live = [w for w in workers if w.error is None]
    batch = {w.key: int(min(max(round(opts.batch_s * 1e3 / est[w.key]), 2), 200)) for w in live}
    cpus = sorted(os.sched_getaffinity(0))
    for r in range(opts.max_rounds):
        if threads == 1 and len(cpus) > 1:
            for w in live:
                pin_worker(w, {cpus[r % len(cpus)]})
        order = live[r % len(live):] + live[:r % len(live)] if live else []
        for w in order:
            if w.error:
                continue
            try:
                w.times += w.run(batch[w.key], 120 + 20 * batch[w.key] * est[w.key] / 1e3)
            except Exception as e:  # noqa: BLE001
                w.error = f"timing failed: {e}"
            time.sleep(opts.settle)  # let spinning pool threads of the previous worker park
        done = [w for w in live if w.error is None]
        if r + 1 >= opts.rounds and all(len(w.times) >= opts.min_runs for w in done):
            break


def start_worker(name, key, cmd, log_path, out_npy, entry, opts, env=None):
    """Starts a worker (it loads the model, runs once and writes output 0 to out_npy) and
    records its load time, first run and memory in entry; on failure entry["na"] says
    why and None is returned."""
    if os.path.exists(out_npy):
        os.remove(out_npy)
    log(f"{name}: start {key}")
    w = Worker(key, cmd, log_path, cwd=HERE, env=env)
    try:
        w.ready = w.receive(opts.load_timeout)
    except Exception as e:  # noqa: BLE001 - reported as n/a
        entry["na"] = f"failed to load or run: {e}"
        log(f"{name}: {key}: {entry['na']}")
        w.close()
        return None
    entry["load_ms"] = w.ready["load_ms"]
    entry["first_run_ms"] = w.ready["first_run_ms"]
    entry["memory"] = w.ready["memory"]
    return w


def time_and_record(name, workers, entries, threads, opts):
    """Times the started workers in the interleaved round robin (time_workers), then
    records each one's latency statistics in entries[worker.key] and closes it."""
    if workers:
        log(f"{name}: timing {len(workers)} workers at {threads} thread(s), interleaved")
        time_workers(workers, opts, threads)
    for w in workers:
        entry = entries[w.key]
        if w.error and len(w.times) < 2:
            entry["na"] = w.error
        elif w.times:
            entry.update(stats(w.times))
            if w.error:
                entry["note"] = w.error
        w.close()
        if "median_ms" in entry:
            err = entry.get("agreement", {}).get("largest_rel_err")
            log(f"{name}: {w.key}: median {entry['median_ms']:.3f} ms p90 {entry['p90_ms']:.3f} ms "
                f"(n={entry['n']})" + (f", output rel err {err:.2e}" if err is not None else ""))


def add_timing_options(ap):
    """The round robin's options (time_workers), shared with bench/precision_bench.py."""
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=5, help="minimum interleaved rounds")
    ap.add_argument("--max-rounds", type=int, default=12)
    ap.add_argument("--min-runs", type=int, default=20, help="minimum timed runs per worker")
    ap.add_argument("--batch-s", type=float, default=0.8, help="target seconds per timed batch")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--settle", type=float, default=0.05, help="pause between batches (s)")
    ap.add_argument("--load-timeout", type=float, default=600)
    ap.add_argument("--quick", action="store_true", help="few runs: checks the harness, numbers are rough")


def apply_timing_options(opts):
    """--quick's few runs, and --threads as a list."""
    if opts.quick:
        opts.rounds, opts.max_rounds, opts.min_runs, opts.batch_s = 2, 3, 4, 0.2
    opts.threads = [int(t) for t in str(opts.threads).split(",")]


def bench_model(name, files, bins, work, opts):
    res = {"name": name, "onnx_bytes": os.path.getsize(files["onnx"])}
    res.update(weight_bytes(files["onnx"]))
    model_dir = os.path.join(work, name)
    os.makedirs(model_dir, exist_ok=True)

    # Artifacts.
    if bins.get("partita"):
        arts = compile_artifacts(bins["partita"], files, model_dir, name, opts.threads)
    else:
        arts = {v: {"na": bins["partita_na"]} for v in ("partita_host", "partita_dnnl")}
    res["artifacts"] = arts
    for v, a in arts.items():
        log(f"{name}: {v}: " + (a["na"] if "na" in a else
                                f"compiled in {a['compile_s']:.2f} s, {a['artifact_bytes'] / 1e6:.2f} MB"))

    # Which model file each partita worker loads.
    sources = {}
    for v in ("partita_host", "partita_dnnl"):
        if not bins.get("model_runner"):
            sources[v] = (None, bins["model_runner_na"])
        elif "pta" in arts[v]:
            sources[v] = (arts[v]["pta"], None)
        else:
            # No artifact: latency can still be measured on the .onnx compiled in memory.
            sources[v] = (files["onnx"], None)
            arts[v]["latency_source"] = ".onnx compiled in memory (no artifact)"
    sources["ort"] = (files["onnx"], None if bins.get("ort") else bins.get("ort_na"))
    sources["torch"] = (files["onnx"], None)

    runs = {}
    runtimes = [r for r in opts.runtimes if r in STREAMING_RUNTIMES] if files.get("streaming") else \
        [r for r in opts.runtimes if r in SHIPPED_RUNTIMES] if files.get("shipped") else opts.runtimes
    for threads in opts.threads:
        workers, entries = [], {}
        for rt in runtimes:
            key = f"{rt}/t{threads}"
            model_path, na = sources[rt]
            if rt in arts and "pta" in arts[rt]:
                model_path = artifact_for(arts[rt], threads)
            entry = entries[key] = runs.setdefault(rt, {}).setdefault(str(threads), {})
            if na:
                entry["na"] = na
                continue
            out_npy = os.path.join(model_dir, f"{rt}.t{threads}.out.npy")
            cmd = worker_command(rt, bins, files, name, threads, model_path, out_npy)
            env = None
            if rt == "torch":
                # Debian's PyTorch calls OpenBLAS, whose own pool would otherwise use every core.
                env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
            w = start_worker(name, key, cmd, os.path.join(model_dir, f"{rt}.t{threads}.log"), out_npy, entry, opts,
                             env=env)
            if w:
                for k in ("ort_version", "torch_version"):
                    if k in w.ready:
                        res.setdefault("versions", {})[k] = w.ready[k]
                entry["agreement"] = compare(out_npy, files["expected"])
                workers.append(w)
        time_and_record(name, workers, entries, threads, opts)
    res["runs"] = runs

    # Process start -> first result.
    res["startup"] = {}
    res["shipped"] = bool(files.get("shipped"))
    res["streaming"] = bool(files.get("streaming"))
    res["decoding"] = bool(files.get("decoding"))
    for v in ("partita_host", "partita_dnnl"):
        if files.get("shipped"):
            res["startup"][v] = {"na": "not measured for the shipped-style models"}
            continue
        if "pta" not in arts[v] or not bins.get("partita"):
            res["startup"][v] = {"na": arts[v].get("na") or "no partita CLI"}
            continue
        res["startup"][v] = startup(bins, files, arts[v], runs.get(v, {}), opts)
    return res


def startup(bins, files, art, runs, opts):
    """Times whole `partita-run X.pta` processes, warm and cold, and the reference."""
    out = {}
    tool = bins.get("file_tool")
    for threads in opts.threads:
        # partita-run: the runtime-only runner a deployment would ship (no ONNX or
        # protobuf to load); `partita run` when it is not built.
        runner = [bins["partita_run"]] if bins.get("partita_run") else [bins["partita"], "run"]
        pta = artifact_for(art, threads)
        cmd = runner + [pta, "--input", f"{files['input_name']}={files['input']}", "--threads", str(threads),
                        "--quiet"]
        entry = out.setdefault(str(threads), {})

        def one():
            t0 = time.perf_counter()
            r = subprocess.run(cmd, capture_output=True, text=True)
            dt = (time.perf_counter() - t0) * 1e3
            if r.returncode != 0:
                raise RuntimeError(last_line(r.stderr + r.stdout))
            return dt

        touch_process = []  # the touch tool timed as a whole process, spawn to exit

        def touch():
            t0 = time.perf_counter()
            r = subprocess.run([tool, "touch", pta], capture_output=True, text=True, check=True)
            touch_process.append((time.perf_counter() - t0) * 1e3)
            return json.loads(r.stdout)["touch_ms"]

        def evict():
            subprocess.run([tool, "evict", pta], check=True)

        try:
            one()  # warms the page cache for the binary, libraries and the artifact
            entry["warm_ms"] = stats([one() for _ in range(opts.startup_runs)])
            if tool:
                entry["touch_warm_ms"] = float(np.median([touch() for _ in range(5)]))
                entry["touch_process_warm_ms"] = float(np.median(touch_process))
                cold, touch_cold, resident = [], [], []
                for _ in range(opts.startup_runs):
                    evict()
                    r = subprocess.run([tool, "resident", pta], capture_output=True, text=True, check=True)
                    resident.append(json.loads(r.stdout)["resident"])
                    cold.append(one())
                for _ in range(3):
                    evict()
                    touch_cold.append(touch())
                entry["cold_ms"] = stats(cold)
                entry["touch_cold_ms"] = float(np.median(touch_cold))
                entry["resident_after_evict"] = float(max(resident))
            else:
                entry["cold_na"] = bins["file_tool_na"]
            warm_run = runs.get(str(threads), {}).get("median_ms")
            if warm_run is not None:
                entry["warm_run_ms"] = warm_run
                entry["reference_warm_ms"] = entry.get("touch_warm_ms", 0.0) + warm_run
                if "touch_process_warm_ms" in entry:
                    entry["floor_warm_ms"] = entry["touch_process_warm_ms"] + warm_run
                if "touch_cold_ms" in entry:
                    entry["reference_cold_ms"] = entry["touch_cold_ms"] + warm_run
        except Exception as e:  # noqa: BLE001
            entry["na"] = f"`partita run` of the artifact failed: {e}"
    return out


# ---- kernels ----------------------------------------------------------------------

def kernel_bench(bins, opts, work):
    if not bins.get("kernels"):
        return {"na": bins["kernels_na"]}
    out_json = os.path.join(work, "kernels.json")
    # The report's kinds (the dynamic_quantize and encoder/ rows are for standalone runs).
    cmd = [bins["kernels"], f"--benchmark_min_time={opts.kernel_min_time}", "--benchmark_filter=^(conv|matmul|upsample)/",
           "--benchmark_format=json",
           f"--benchmark_out={out_json}", "--benchmark_out_format=json"]
    log("kernel micro-benchmarks: " + " ".join(cmd[1:2]))
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0 or not os.path.exists(out_json):
        return {"na": f"partita_bench_kernels failed: {last_line(r.stderr)}"}
    data = json.load(open(out_json))
    rows = {}
    for b in data.get("benchmarks", []):
        kind, shape, impl, t = b["name"].split("/")[:4]
        row = rows.setdefault(f"{kind}/{shape}/{t}", {"kind": kind, "shape": shape, "threads": int(t[1:])})
        if b.get("error_occurred"):
            row[impl] = {"na": b.get("error_message", "error")}
        else:
            row[impl] = {"gflops": b["FLOPS"] / 1e9, "time_us": b["real_time"] / 1e3
                         if b.get("time_unit") == "ns" else b["real_time"]}
    return {"rows": list(rows.values()), "context": {k: data.get("context", {}).get(k)
                                                      for k in ("num_cpus", "mhz_per_cpu", "caches")}}


# ---- main -------------------------------------------------------------------------

def find_bins(build):
    bins = {}
    b = os.path.join(build, "bin")
    for key, exe in (("partita", "partita"), ("partita_run", "partita-run"), ("model_runner", "partita_bench_model"),
                     ("file_tool", "partita_bench_file"), ("kernels", "partita_bench_kernels")):
        path = os.path.join(b, exe)
        if os.access(path, os.X_OK):
            bins[key] = path
            continue
        log_path = os.path.join(build, "bench", f"build-{exe}.log")
        if key == "partita":
            bins[f"{key}_na"] = f"{exe} is not built (the default build failed?)"
        elif os.path.exists(log_path):
            lines = [ln.strip() for ln in open(log_path, errors="replace")]
            errors = [ln for ln in lines if ("error:" in ln and "collect2" not in ln) or "undefined reference" in ln]
            first = errors[0] if errors else last_line("\n".join(lines))
            bins[f"{key}_na"] = f"{exe} failed to build: {first[:240]}"
        else:
            bins[f"{key}_na"] = f"{exe} is not built (bench/run.sh builds it)"
    if not shutil.which("node"):
        bins["ort_na"] = "node is not installed"
    elif not os.path.isdir(os.path.join(HERE, "node_modules", "onnxruntime-node")):
        bins["ort_na"] = "onnxruntime-node is not installed (cd bench && npm ci)"
    else:
        bins["ort"] = "node"
    return bins


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--models", default=",".join(EXPORTED + [DEMO] + SHIPPED + STREAMING + DECODING + ["precision"]),
                    help="model set; shipped-style entries are NAME@SIZE (--models shipped: all of them; "
                         "--models streaming: the streaming recurrent ones; --models decoding: the "
                         "decoding Loop; --models precision: the reduced-precision entries SOURCE@KIND of "
                         "bench/precision_bench.py)")
    ap.add_argument("--runtimes", default=",".join(RUNTIMES))
    add_timing_options(ap)
    ap.add_argument("--precision-batch-s", type=float, default=0.3,
                    help="target seconds per timed batch of the reduced-precision models (they have three "
                         "workers each and are many: shorter batches keep their part of the run to minutes)")
    ap.add_argument("--startup-runs", type=int, default=5)
    ap.add_argument("--kernel-min-time", type=float, default=0.3)
    ap.add_argument("--no-kernels", action="store_true")
    ap.add_argument("--no-contention", action="store_true", help="skip bench/contention.py")
    ap.add_argument("--contention-models", default=None,
                    help="models of the contention run (default: --models but the shipped ones)")
    ap.add_argument("--report-only", metavar="RESULTS_JSON",
                    help="only regenerate docs/benchmarks.md and the charts from a results file")
    import contention
    import precision_bench
    contention.add_options(ap, prefix="contention-")
    opts = ap.parse_args()

    import report
    if opts.report_only:
        report.write_all(json.load(open(opts.report_only)), ROOT)
        return

    apply_timing_options(opts)
    if opts.quick:
        opts.startup_runs, opts.kernel_min_time = 2, 0.05
    opts.runtimes = [r for r in opts.runtimes.split(",") if r]
    names = []
    for n in opts.models.split(","):
        names += SHIPPED if n == "shipped" else STREAMING if n == "streaming" else DECODING if n == "decoding" else \
            list(precision_bench.ENTRIES) if n == "precision" else [n] if n else []
    # The reduced-precision entries are made and timed by bench/precision_bench.py.
    precision_names = [n for n in names if n in precision_bench.ENTRIES]
    names = [n for n in names if n not in precision_bench.ENTRIES]
    build = os.path.abspath(opts.build)
    work = os.path.join(build, "bench")
    os.makedirs(work, exist_ok=True)
    bins = find_bins(build)

    started = time.time()
    results = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "machine": machine_info(),
               "settings": {"threads": opts.threads, "rounds": opts.rounds, "min_runs": opts.min_runs,
                            "batch_s": opts.batch_s, "startup_runs": opts.startup_runs, "quick": opts.quick,
                            "agree_tol": AGREE_TOL, "precision_batch_s": opts.precision_batch_s},
               "loadavg_start": loadavg(), "models": [], "tool_na": {k: v for k, v in bins.items() if k.endswith("_na")}}
    results.update(export_models(os.path.join(work, "models"), [n for n in names if n != DEMO and "@" not in n]))
    streaming = [n for n in names if n.split("@")[0] in STREAMING_IO]
    if any("@" in n and n not in streaming for n in names):
        export_shipped(os.path.join(work, "shipped"), [n for n in names if "@" in n and n not in streaming])
    if streaming:
        export_streaming(os.path.join(work, "recurrent"), streaming)
    loads = [loadavg()]
    for name in names:
        files = model_files(os.path.join(work, "models"), name)
        log(f"=== {name}")
        res = bench_model(name, files, bins, work, opts)
        res["encoder"] = name in ENCODERS
        results["models"].append(res)
        loads.append(loadavg())
    if precision_names:
        results["precision"] = precision_bench.run(bins, work, opts, precision_names)
        loads.append(loadavg())
    if not opts.no_contention:
        copts = argparse.Namespace(
            models=opts.contention_models or ",".join(n for n in names if "@" not in n), runs=opts.contention_runs,
            idle_runs=opts.contention_idle_runs, threads=opts.contention_threads, busy=opts.contention_busy,
            per_turn=opts.contention_per_turn, lead=opts.contention_lead, partita=opts.contention_partita,
            warmup=opts.warmup, settle=opts.settle,
            load_timeout=opts.load_timeout)
        if opts.quick:
            copts.runs, copts.idle_runs, copts.lead = 10, 5, 0.1
        results["contention"] = contention.run(bins, work, copts)
        loads.append(loadavg())
    if not opts.no_kernels:
        results["kernels"] = kernel_bench(bins, opts, work)
    loads.append(loadavg())
    results["loadavg_max"] = max(loads)
    results["duration_s"] = time.time() - started

    path = os.path.join(work, "results.json")
    with open(path, "w") as f:
        json.dump(results, f, indent=1)
    log(f"wrote {path}")
    report.write_all(results, ROOT)
    log(f"done in {results['duration_s'] / 60:.1f} min")


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    main()
