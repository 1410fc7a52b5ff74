#!/usr/bin/python3
"""The cost of --profile: one artifact run with and without profiling, alternately.

Each round runs `partita-run ARTIFACT -n RUNS --warmup 2 -q` once without and once with
`--profile` (in alternating order, so a change in machine load hits both alike) and
reads the median and the fastest run time each prints. Prints the median over rounds
of the medians and the fastest run of all (the least disturbed by other load), and
their ratios. With --baseline OTHER_BUILD_DIR, each round also runs that build's
partita-run (e.g. one from before the profiler existed) without profiling.

usage: profile_overhead.py BUILD_DIR ARTIFACT [--rounds 7] [--runs 20] [--threads 1]
                           [--baseline OTHER_BUILD_DIR]
       profile_overhead.py BUILD_DIR --chain N ...
--chain N times a chain of N host Relu nodes on 16 floats instead (written and compiled
here): nearly all of its time is per-step cost, so on minus off over N is the cost of
one profiled step.
"""
import argparse
import os
import re
import statistics
import subprocess
import tempfile

p = argparse.ArgumentParser()
p.add_argument("build")
p.add_argument("artifact", nargs="?")
p.add_argument("--chain", type=int)
p.add_argument("--rounds", type=int, default=7)
p.add_argument("--runs", type=int, default=20)
p.add_argument("--threads", type=int, default=1)
p.add_argument("--baseline")
a = p.parse_args()

runner = os.path.join(a.build, "bin", "partita-run")
work = tempfile.mkdtemp(prefix="partita_profile_")
trace = os.path.join(work, "trace.json")
if a.chain:
    import onnx
    from onnx import TensorProto, helper
    nodes = [helper.make_node("Relu", ["v%d" % i], ["v%d" % (i + 1)], name="relu%d" % i) for i in range(a.chain)]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("v0", TensorProto.FLOAT, [16])],
                              [helper.make_tensor_value_info("v%d" % a.chain, TensorProto.FLOAT, [16])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, os.path.join(work, "chain.onnx"))
    a.artifact = os.path.join(work, "chain_%d.pta" % a.chain)
    subprocess.run([os.path.join(a.build, "bin", "partita"), "compile", os.path.join(work, "chain.onnx"), "-o",
                    a.artifact, "-q"], check=True)
elif not a.artifact:
    p.error("give an ARTIFACT or --chain N")


def median_ms(profile, exe=runner):
    cmd = [exe, a.artifact, "-n", str(a.runs), "--warmup", "2", "-q", "-t", str(a.threads)]
    if profile:
        cmd += ["--profile", trace]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    m = re.search(r"median ([0-9.]+) ms, min ([0-9.]+) ms", out)
    return float(m.group(1)), float(m.group(2))


off, on, base = [], [], []
for r in range(a.rounds):
    if a.baseline:
        base.append(median_ms(False, os.path.join(a.baseline, "bin", "partita-run")))
    for profile in ((False, True) if r % 2 == 0 else (True, False)):
        (on if profile else off).append(median_ms(profile))
events = 0
if os.path.exists(trace):
    with open(trace) as f:
        events = sum(1 for line in f if '"ph":"X"' in line) // a.runs
m_off, m_on = statistics.median(x for x, _ in off), statistics.median(x for x, _ in on)
f_off, f_on = min(y for _, y in off), min(y for _, y in on)
print("%s, %d thread(s), %d rounds of %d runs, %d events per profiled run:" %
      (os.path.basename(a.artifact), a.threads, a.rounds, a.runs, events))
print("  median: off %.3f ms, on %.3f ms (%+.2f%%)" % (m_off, m_on, 100 * (m_on / m_off - 1)))
print("  fastest: off %.3f ms, on %.3f ms (%+.2f%%)" % (f_off, f_on, 100 * (f_on / f_off - 1)))
if base:
    m_base, f_base = statistics.median(x for x, _ in base), min(y for _, y in base)
    print("  baseline %s (off): median %.3f ms (off is %+.2f%%), fastest %.3f ms (off is %+.2f%%)" %
          (a.baseline, m_base, 100 * (m_off / m_base - 1), f_base, 100 * (f_off / f_base - 1)))
    print("  baseline medians per round:", " ".join("%.3f" % x for x, _ in base))
print("  off medians per round:", " ".join("%.3f" % x for x, _ in off))
print("  on  medians per round:", " ".join("%.3f" % x for x, _ in on))
if a.chain:
    print("  per step (medians): %.3f us not profiled, %.3f us profiled" % (1000 * m_off / a.chain,
                                                                           1000 * m_on / a.chain))
