#!/usr/bin/python3
"""Steady-state latency side by side: two or more partita_bench_model binaries (e.g. a
build before a change and one after) on the same artifacts, timed in make bench's
interleaved round robin (bench.time_workers: batches taking turns, at one thread every
worker of a round on the same core). Prints each runner's median and p90 and the ratio
of each to the first.

    bench/steady_ab.py --runners OLD/bin/partita_bench_model,NEW/bin/partita_bench_model \\
        [--threads 1,2] [--quick] [round-robin options] A.pta=INPUT.npy [B.pta=INPUT.npy ...]

A runner `ort:MODEL.onnx` is ONNX Runtime (bench/ort_runner.js) on that model instead, and
`RUNNER=OTHER.pta` runs on that artifact instead (a compiler change: the old build's
artifact against the new one's; `{t}` works there too).

An artifact named with a `{t}` (e.g. `enc.t{t}.pta`) is taken per thread count. The
input is fed to the model's first input; each runner's output 0 is compared with the
first runner's (max|a - e| / max|e|). startup_ab.py compares whole processes instead.
"""
import argparse
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402  (the worker protocol and the round robin)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runners", required=True, help="comma-separated partita_bench_model binaries")
    ap.add_argument("--input-name", default="input", help="the model input the .npy feeds")
    bench.add_timing_options(ap)
    ap.add_argument("pairs", nargs="+", help="ARTIFACT.pta=INPUT.npy")
    opts = ap.parse_args()
    bench.apply_timing_options(opts)
    runners = []  # (runner, its own artifact or "")
    for spec in opts.runners.split(","):
        r, _, own = spec.partition("=")
        runners.append(("ort:" + os.path.abspath(r[4:]) if r.startswith("ort:") else os.path.abspath(r), own))
    tmp = tempfile.mkdtemp(prefix="steady_ab.")
    for pair in opts.pairs:
        art, _, inp = pair.partition("=")
        if not inp:
            sys.exit(f"{pair}: expected ARTIFACT.pta=INPUT.npy")
        inp = os.path.abspath(inp)
        for t in opts.threads:
            workers, outs = [], []
            for i, (r, own) in enumerate(runners):
                path = os.path.abspath((own or art).replace("{t}", str(t)))
                out = os.path.join(tmp, f"{i}.t{t}.npy")
                if r.startswith("ort:"):  # ONNX Runtime on a model file, as make bench runs it
                    cmd = ["node", os.path.join(HERE, "ort_runner.js"), r[4:], "--input",
                           f"{opts.input_name}={inp}", "--threads", str(t), "--output", out]
                else:
                    cmd = [r, path, "--input", f"{opts.input_name}={inp}", "--threads", str(t), "--output", out,
                           "--backends", bench.SHIPPED_BACKENDS]
                entry = {}
                w = bench.start_worker(os.path.basename(path), f"{i}:{r}", cmd, os.path.join(tmp, f"{i}.t{t}.log"),
                                       out, entry, opts)
                if not w:
                    sys.exit(f"{r} {path}: {entry.get('na')}")
                workers.append(w)
                outs.append(out)
            bench.time_workers(workers, opts, t)
            base = None
            for i, w in enumerate(workers):
                s = bench.stats(w.times)
                w.close()
                err = ""
                if i == 0:
                    base = s["median_ms"]
                    ref = np.load(outs[0])
                else:
                    got = np.load(outs[i])
                    scale = float(np.max(np.abs(ref))) or 1.0
                    err = f"  vs first {float(np.max(np.abs(got - ref))) / scale:.2e}"
                r, own = runners[i]
                print(f"{os.path.basename(art)} t{t} {r}{'=' + own if own else ''}: median {s['median_ms']:.3f} ms p90 {s['p90_ms']:.3f} ms "
                      f"(n={s['n']}) ratio {s['median_ms'] / base:.3f}{err}", flush=True)


if __name__ == "__main__":
    main()
