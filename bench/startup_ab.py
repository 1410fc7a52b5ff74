#!/usr/bin/python3
"""Start-up side by side: whole `partita-run X.pta` processes of two or more runner
binaries (e.g. a build before a change and one after), alternating process by process,
so that the machine's drift (large on a VM: the same process took 70 ms in the morning
and 85 ms two hours later) falls on every runner alike. Prints the median wall time of
each, from spawn to exit, warm page cache.

    bench/startup_ab.py --runners OLD/bin/partita-run,NEW/bin/partita-run \\
        [--threads 1,2] [--runs 9] A.pta [B.pta ...]

An artifact named with a `{t}` (e.g. `resnet18.dnnl.t{t}.pta`) is taken per thread
count. Inputs are partita-run's random ones (its --seed 0): start-up does not depend
on the values. `make bench` measures start-up against its reference (docs/benchmarks.md);
this compares builds.
"""
import argparse
import statistics
import subprocess
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runners", required=True, help="comma-separated partita-run binaries")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--runs", type=int, default=9, help="processes per runner, artifact and thread count")
    ap.add_argument("artifacts", nargs="+")
    a = ap.parse_args()
    runners = a.runners.split(",")
    print("artifact threads " + " ".join(runners))
    for art in a.artifacts:
        for t in [int(x) for x in a.threads.split(",")]:
            path = art.replace("{t}", str(t))
            times = {r: [] for r in runners}

            def one(r):
                t0 = time.perf_counter()
                p = subprocess.run([r, path, "--threads", str(t), "-q"], capture_output=True, text=True)
                dt = (time.perf_counter() - t0) * 1e3
                if p.returncode != 0:
                    last = (p.stderr.strip().splitlines() or ["(no message)"])[-1]
                    sys.exit(f"{r} {path}: exit {p.returncode}: {last}")
                return dt

            for r in runners:  # one untimed process each: the binary and its libraries cached
                one(r)
            for _ in range(a.runs):
                for r in runners:
                    times[r].append(one(r))
            print(f"{path} {t} " + " ".join(f"{statistics.median(times[r]):.1f}" for r in runners), flush=True)


if __name__ == "__main__":
    main()
