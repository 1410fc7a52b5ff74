#!/usr/bin/env python3
"""Latency while other processes keep every core busy (docs/threads.md).

`make bench` runs this after the model benchmarks (bench.py calls run() and the
report gets an "Under contention" section); alone it prints its table and writes
build/bench/contention.json:

    /usr/bin/python3 bench/contention.py [--build build] [--models resnet18,...] [--runs 40]
        [--update-report [RESULTS_JSON]]  also merge into the results (default: the committed
                             bench/results/results.json) and rewrite docs/benchmarks.md
        [--variant LABEL:ENV=VALUE,ENV=VALUE]   an extra partita worker run with that environment
        [--variant-runner LABEL:PATH]           ... and/or another partita_bench_model binary

For every model it starts the workers of bench.py (partita oneDNN + host at N threads
from the artifact compiled for N threads, ONNX Runtime at N threads), then
  * idle: after warm-up, times them round-robin, a few runs per worker per turn;
  * busy: starts one busy-looping process per core (`python3 -c 'while True: pass'`,
    pinned to nothing, at normal priority), waits for them to run, times the same
    workers the same way until each has --runs runs, and kills the loops. Each turn
    starts with --lead seconds of untimed runs: a worker that waited for its turn has
    earned credit with the scheduler (it slept while the loops ran) that would let its
    first runs beat the loops; a server under steady load has none.
Only one worker runs at a time; between turns the driver pauses --settle seconds so
that a runtime whose idle threads spin does not steal from the next one. Reported per
worker: mean, median, p90, max, and how many runs took more than 100 ms; the target
is partita's mean at most 1.5x ONNX Runtime's under contention (oneDNN + host;
--partita partita_host times the host-only artifact instead). The machine's load
average is recorded before the loops start (other work on the machine) and after.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402  (the worker protocol, artifacts and model files)

TARGET_RATIO = 1.5
SLOW_MS = 100.0
BUSY_LOOP = [bench.PYTHON, "-c", "while True: pass"]


def summary(ms):
    a = np.asarray(ms, dtype=np.float64)
    return {"n": int(a.size), "mean_ms": float(a.mean()), "median_ms": float(np.median(a)),
            "p90_ms": float(np.percentile(a, 90)), "max_ms": float(a.max()), "min_ms": float(a.min()),
            "over_100ms": int((a > SLOW_MS).sum())}


class BusyLoops:
    """N busy-looping processes for the duration of a with-block."""

    def __init__(self, n):
        self.n = n
        self.procs = []

    def __enter__(self):
        self.procs = [subprocess.Popen(BUSY_LOOP, stdin=subprocess.DEVNULL) for _ in range(self.n)]
        time.sleep(1.0)  # let them start and the scheduler see them
        for p in self.procs:
            if p.poll() is not None:
                raise RuntimeError(f"busy loop exited with {p.returncode}")
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait()
        self.procs = []
        return False


def time_round_robin(workers, runs, per_turn, settle, timeout_per_run, lead_s=0.0):
    """Asks each live worker in turn for `per_turn` runs, rotating the order each round,
    until each has `runs`; each turn starts with untimed runs for `lead_s` seconds.
    Returns {key: [ms...]}; a failing worker gets its error noted."""
    times = {w.key: [] for w in workers}
    r = 0
    while True:
        live = [w for w in workers if w.error is None and len(times[w.key]) < runs]
        if not live:
            return times
        order = live[r % len(live):] + live[:r % len(live)]
        for w in order:
            k = min(per_turn, runs - len(times[w.key]))
            try:
                lead_end = time.monotonic() + lead_s
                while time.monotonic() < lead_end:
                    w.run(1, 60 + timeout_per_run)
                times[w.key] += w.run(k, 60 + timeout_per_run * k)
            except Exception as e:  # noqa: BLE001 - reported as n/a
                w.error = f"timing failed: {e}"
            time.sleep(settle)
        r += 1


def parse_variants(opts):
    """[(label, env, runner or None)] for the extra partita workers."""
    out = {}
    for spec in opts.variant or []:
        label, _, envs = spec.partition(":")
        env = {}
        for kv in filter(None, envs.split(",")):
            k, _, v = kv.partition("=")
            env[k] = v
        out.setdefault(label, {"env": {}, "runner": None})["env"].update(env)
    for spec in opts.variant_runner or []:
        label, _, path = spec.partition(":")
        out.setdefault(label, {"env": {}, "runner": None})["runner"] = os.path.abspath(path)
    return [(k, v["env"], v["runner"]) for k, v in out.items()]


def contention_model(name, bins, work, opts, variants):
    files = bench.model_files(os.path.join(work, "models"), name)
    model_dir = os.path.join(work, name)
    os.makedirs(model_dir, exist_ok=True)
    t = opts.threads
    res = {"name": name, "idle": {}, "busy": {}}
    rt = opts.partita
    arts = bench.compile_artifacts(bins["partita"], files, model_dir, name, [t], only=[rt])
    art = arts[rt]
    specs = []  # (key, runtime, model path, env, runner, na)
    if "na" in art:
        specs.append((rt, rt, None, None, None, art["na"]))
    else:
        pta = bench.artifact_for(art, t)
        specs.append((rt, rt, pta, None, None, None))
        for label, env, runner in variants:
            specs.append((f"{rt}[{label}]", rt, pta, env, runner, None))
    specs.append(("ort", "ort", files["onnx"], None, None, bins.get("ort_na")))

    workers = []
    for key, runtime, path, env, runner, na in specs:
        if na:
            res["idle"][key] = res["busy"][key] = {"na": na}
            continue
        out_npy = os.path.join(model_dir, f"contention.{key}.out.npy")
        use_bins = dict(bins, model_runner=runner) if runner else bins
        cmd = bench.worker_command(runtime, use_bins, files, name, t, path, out_npy)
        w = bench.Worker(key, cmd, os.path.join(model_dir, f"contention.{key}.log"), cwd=HERE,
                         env=dict(os.environ, **env) if env else None)
        try:
            w.ready = w.receive(opts.load_timeout)
            agree = bench.compare(out_npy, files["expected"])
            if not agree.get("ok"):
                raise RuntimeError(f"output disagrees with the export: {agree}")
            w.run(1 + opts.warmup, 300)
            workers.append(w)
        except Exception as e:  # noqa: BLE001
            res["idle"][key] = res["busy"][key] = {"na": f"failed to load or run: {e}"}
            bench.log(f"contention {name}: {key}: {res['idle'][key]['na']}")
            w.close()
    try:
        res["loadavg_before"] = bench.loadavg()
        idle = time_round_robin(workers, opts.idle_runs, opts.per_turn, opts.settle, 10)
        busy = {}
        if opts.runs > 0:
            with BusyLoops(opts.busy):
                busy = time_round_robin(workers, opts.runs, opts.per_turn, opts.settle, 30, opts.lead)
                res["loadavg_busy"] = bench.loadavg()
    finally:
        for w in workers:
            w.close()
    for w in workers:
        for phase, got in (("idle", idle), ("busy", busy)):
            ms = got.get(w.key, [])
            if len(ms) < 2:
                res[phase][w.key] = {"na": w.error or "no timing"}
            else:
                res[phase][w.key] = summary(ms)
                res[phase][w.key]["ms"] = [round(x, 3) for x in ms]
                if w.error:
                    res[phase][w.key]["note"] = w.error
    for phase in ("idle", "busy"):
        p, o = res[phase].get(rt, {}), res[phase].get("ort", {})
        if "mean_ms" in p and "mean_ms" in o:
            res[phase]["ratio_mean"] = p["mean_ms"] / o["mean_ms"]
            res[phase]["ratio_median"] = p["median_ms"] / o["median_ms"]
    return res


def run(bins, work, opts, variants=()):
    """The contention section of the results (bench.py calls this with its bins)."""
    machine = bench.machine_info()
    out = {"date": time.strftime("%Y-%m-%dT%H:%M:%S"), "commit": machine.get("commit"),
           "cores": machine.get("cores"), "partita": opts.partita, "threads": opts.threads, "lead_s": opts.lead, "runs": opts.runs, "idle_runs": opts.idle_runs, "busy_loops": opts.busy,
           "per_turn": opts.per_turn, "settle_s": opts.settle, "target_ratio": TARGET_RATIO,
           "slow_ms": SLOW_MS, "models": []}
    if not bins.get("partita") or not bins.get("model_runner"):
        out["na"] = bins.get("partita_na") or bins.get("model_runner_na")
        return out
    names = [n for n in opts.models.split(",") if n]
    bench.export_models(os.path.join(work, "models"), [n for n in names if n != bench.DEMO])
    for name in names:
        bench.log(f"=== contention: {name}, {opts.threads} threads, {opts.busy} busy loops")
        res = contention_model(name, bins, work, opts, variants)
        out["models"].append(res)
        for phase in ("idle", "busy"):
            for key, s in res[phase].items():
                if isinstance(s, dict) and "mean_ms" in s:
                    bench.log(f"{name} {phase:4} {key:28} mean {s['mean_ms']:8.2f} median {s['median_ms']:8.2f} "
                              f"max {s['max_ms']:8.2f} >100ms {s['over_100ms']:2d} (n={s['n']})")
            if "ratio_mean" in res[phase]:
                bench.log(f"{name} {phase:4} partita/ORT mean {res[phase]['ratio_mean']:.2f}x "
                          f"median {res[phase]['ratio_median']:.2f}x")
        bench.log(f"{name}: load average {res.get('loadavg_before', 0):.2f} before the loops, "
                  f"{res.get('loadavg_busy', 0):.2f} with them")
    return out


def add_options(ap, prefix=""):
    """The options, shared with bench.py (there prefixed with --contention-)."""
    ap.add_argument(f"--{prefix}runs", type=int, default=40, help="timed runs per worker under contention")
    ap.add_argument(f"--{prefix}idle-runs", type=int, default=20, help="timed runs per worker idle")
    ap.add_argument(f"--{prefix}threads", type=int, default=2)
    ap.add_argument(f"--{prefix}busy", type=int, default=os.cpu_count() or 2, help="busy-looping processes")
    ap.add_argument(f"--{prefix}per-turn", type=int, default=10, help="runs per worker per turn")
    ap.add_argument(f"--{prefix}lead", type=float, default=0.5,
                    help="untimed runs (s) before each turn with the loops: the steady state, not credit "
                         "a worker earned from the scheduler while it waited for its turn")
    ap.add_argument(f"--{prefix}partita", default="partita_dnnl", choices=["partita_dnnl", "partita_host"],
                    help="which partita artifact (oneDNN + host, or host only)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(bench.ROOT, "build"))
    ap.add_argument("--models", default=",".join(bench.EXPORTED + [bench.DEMO]))
    add_options(ap)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--settle", type=float, default=0.05)
    ap.add_argument("--load-timeout", type=float, default=600)
    ap.add_argument("--variant", action="append", help="LABEL:ENV=VALUE,... an extra partita worker")
    ap.add_argument("--variant-runner", action="append", help="LABEL:PATH another partita_bench_model")
    ap.add_argument("--update-report", nargs="?", const=os.path.join(bench.HERE, "results", "results.json"),
                    metavar="RESULTS_JSON",
                    help="merge into RESULTS_JSON (default: the committed bench/results/results.json) and "
                         "rewrite docs/benchmarks.md from it")
    opts = ap.parse_args()
    build = os.path.abspath(opts.build)
    work = os.path.join(build, "bench")
    os.makedirs(work, exist_ok=True)
    bins = bench.find_bins(build)
    started = time.time()
    out = run(bins, work, opts, parse_variants(opts))
    out["duration_s"] = time.time() - started
    path = os.path.join(work, "contention.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    bench.log(f"wrote {path}")
    import report
    print("\n".join(report.contention_table(out, report.Notes())))
    if opts.update_report:
        results = json.load(open(opts.update_report))
        results["contention"] = out
        report.write_all(results, bench.ROOT)


if __name__ == "__main__":
    main()
