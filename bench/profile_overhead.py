#!/usr/bin/python3
"""The cost of --profile: one artifact run with and without profiling, alternately.

Each round runs `partita-run ARTIFACT -n RUNS --warmup 2 -q` once without and once with
`--profile` (in alternating order, so a change in machine load hits both alike) and
reads the median run time each prints. Prints the median over rounds of both and
their ratio.

usage: profile_overhead.py BUILD_DIR ARTIFACT [--rounds 7] [--runs 20] [--threads 1]
"""
import argparse
import os
import re
import statistics
import subprocess
import tempfile

p = argparse.ArgumentParser()
p.add_argument("build")
p.add_argument("artifact")
p.add_argument("--rounds", type=int, default=7)
p.add_argument("--runs", type=int, default=20)
p.add_argument("--threads", type=int, default=1)
a = p.parse_args()

runner = os.path.join(a.build, "bin", "partita-run")
trace = os.path.join(tempfile.mkdtemp(prefix="partita_profile_"), "trace.json")


def median_ms(profile):
    cmd = [runner, a.artifact, "-n", str(a.runs), "--warmup", "2", "-q", "-t", str(a.threads)]
    if profile:
        cmd += ["--profile", trace]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return float(re.search(r"median ([0-9.]+) ms", out).group(1))


off, on = [], []
for r in range(a.rounds):
    for profile in ((False, True) if r % 2 == 0 else (True, False)):
        (on if profile else off).append(median_ms(profile))
events = 0
if os.path.exists(trace):
    with open(trace) as f:
        events = sum(1 for line in f if '"ph":"X"' in line) // a.runs
m_off, m_on = statistics.median(off), statistics.median(on)
print("%s, %d thread(s), %d rounds of %d runs: off %.3f ms, on %.3f ms (%+.2f%%), %d events per run" %
      (os.path.basename(a.artifact), a.threads, a.rounds, a.runs, m_off, m_on, 100 * (m_on / m_off - 1), events))
print("  off per round:", " ".join("%.3f" % x for x in off))
print("  on  per round:", " ".join("%.3f" % x for x in on))
