#!/usr/bin/python3
"""`partita-run --profile` and `partita run --profile` against the Trace Event Format.

Compiles a small CNN with --backends dnnl,host (Sub and Gemm kept on the host, so a
run has host nodes and oneDNN regions), runs it with --profile, and checks the
JSON file: an array of events, each with name/cat/ph/ts/dur/pid/tid/args of the right
types; complete events ("X") with dur >= 0; every primitive within its region's interval
and every step within its run's; one run event per timed run; the ONNX model's nodes all
covered by each run (a host node event by name, or a region's "nodes"); the printed
summary. Also: a target that may not be replaced (a directory, the model) is refused
before running.

usage: check_profile.py BIN_DIR SOURCE_DIR WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys

import onnx

BIN, SRC, WORK = sys.argv[1:4]
MODEL = os.path.join(SRC, "models", "fashion", "fashion_cnn.onnx")
PARTITA = os.path.join(BIN, "partita")
PARTITA_RUN = os.path.join(BIN, "partita-run")
FIELDS = {"name": str, "cat": str, "ph": str, "ts": (int, float), "dur": (int, float), "pid": int, "tid": int,
          "args": dict}
failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL:", msg)


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        print(p.stdout, p.stderr)
        raise SystemExit("command failed (%d): %s" % (p.returncode, " ".join(cmd)))
    return p.stdout


def ns(x):  # the file's microseconds have three decimals: compare in whole nanoseconds
    return round(x * 1000)


def check_trace(path, runs, onnx_nodes, label):
    with open(path, encoding="utf-8") as f:
        events = json.load(f)
    if not isinstance(events, list) or not events:
        fail("%s: not a non-empty JSON array" % label)
        return
    pids = set()
    for i, e in enumerate(events):
        for key, typ in FIELDS.items():
            if key not in e:
                fail("%s: event %d lacks '%s': %s" % (label, i, key, e))
            elif not isinstance(e[key], typ) or isinstance(e[key], bool):
                fail("%s: event %d: '%s' is %r" % (label, i, key, e[key]))
        if e.get("ph") not in ("X", "M"):
            fail("%s: event %d has ph %r" % (label, i, e.get("ph")))
        if any(isinstance(e.get(k), (int, float)) and e[k] < 0 for k in ("ts", "dur")):
            fail("%s: event %d has a negative time: %s" % (label, i, e))
        for k, v in e.get("args", {}).items():
            if not isinstance(v, str):
                fail("%s: event %d: arg %s is %r, not a string" % (label, i, k, v))
        pids.add(e.get("pid"))
    if len(pids) != 1:
        fail("%s: events from %d processes" % (label, len(pids)))
    if failures:
        return  # the checks below read the fields
    meta = [e for e in events if e["ph"] == "M"]
    if not any(e["name"] == "process_name" for e in meta) or not any(e["name"] == "thread_name" for e in meta):
        fail("%s: no process_name / thread_name metadata" % label)
    xs = [e for e in events if e["ph"] == "X"]
    run_events = [e for e in xs if e["cat"] == "run"]
    if len(run_events) != runs:
        fail("%s: %d run events for %d timed runs" % (label, len(run_events), runs))
    steps = [e for e in xs if e["cat"] in ("node", "region")]
    prims = [e for e in xs if e["cat"] == "primitive"]
    regions = [e for e in xs if e["cat"] == "region"]
    host = [e for e in xs if e["cat"] == "node"]
    if not regions or not prims or not host:
        fail("%s: %d host nodes, %d regions and %d primitives with --backends dnnl,host" %
             (label, len(host), len(regions), len(prims)))

    def within(inner, outer):
        return (inner["tid"] == outer["tid"] and ns(inner["ts"]) >= ns(outer["ts"]) and
                ns(inner["ts"]) + ns(inner["dur"]) <= ns(outer["ts"]) + ns(outer["dur"]))

    for s in steps:
        for k in ("op", "backend", "inputs", "outputs"):
            if not s["args"].get(k) and not (k == "inputs" and s["args"].get("op") == "Constant"):
                fail("%s: step %s has no '%s'" % (label, s["name"], k))
        if sum(within(s, r) for r in run_events) != 1:
            fail("%s: step %s is not within exactly one run" % (label, s["name"]))
    for r in regions:
        if r["args"].get("backend") != "dnnl" or not r["args"].get("ops") or not r["args"].get("nodes"):
            fail("%s: region %s lacks backend dnnl, ops or nodes: %s" % (label, r["name"], r["args"]))
    for p in prims:
        a = p["args"]
        if not a.get("kind") or not a.get("impl") or not a.get("dst") or a.get("backend") != "dnnl":
            fail("%s: primitive %s lacks kind, impl, dst or backend: %s" % (label, p["name"], a))
        if sum(within(p, r) for r in regions) != 1:
            fail("%s: primitive %s (%s) is not within exactly one region" % (label, p["name"], a.get("kind")))
    # Every ONNX node, in every run: a host node event of its name, or named by a region.
    for r in run_events:
        covered = set()
        for s in steps:
            if not within(s, r):
                continue
            if s["cat"] == "node":
                covered.add(s["name"])
            else:
                covered.update(s["args"]["nodes"].split(","))
        missing = [n for n in onnx_nodes if n not in covered]
        if missing:
            fail("%s: nodes with no event in a run: %s" % (label, missing))
    print("%s: %d events (%d runs, %d steps, %d regions, %d primitives) checked" %
          (label, len(events), len(run_events), len(steps), len(regions), len(prims)))


def check_summary(out, label):
    for text in ("time by op type", "top ", "convolution", "Gemm", "(executor)", "dnnl", "host", "written to"):
        if text not in out:
            fail("%s: the summary lacks %r:\n%s" % (label, text, out))


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    onnx_nodes = [n.name for n in onnx.load(MODEL).graph.node]
    pta = os.path.join(WORK, "fashion.pta")
    flags = ["--backends", "dnnl,host", "--deny", "dnnl=Sub,Gemm"]
    run([PARTITA, "compile", MODEL, "-o", pta, "-q"] + flags)

    trace = os.path.join(WORK, "trace_rt.json")
    out = run([PARTITA_RUN, pta, "--profile", trace, "-n", "3", "--warmup", "1", "-q"])
    check_trace(trace, 3, onnx_nodes, "partita-run")
    check_summary(out, "partita-run")

    trace = os.path.join(WORK, "trace_cli.json")
    out = run([PARTITA, "run", MODEL, "--profile", trace, "-q"] + flags)
    check_trace(trace, 1, onnx_nodes, "partita run")
    check_summary(out, "partita run")

    # A directory as the target: refused by name before the model runs; nothing written.
    target = os.path.join(WORK, "a_directory")
    os.makedirs(target)
    p = subprocess.run([PARTITA_RUN, pta, "--profile", target, "-q"], capture_output=True, text=True)
    if p.returncode != 1 or target not in p.stderr or "run(s)" in p.stdout:
        fail("--profile DIR: exit %d, stdout %r, stderr %r" % (p.returncode, p.stdout, p.stderr))

    # The model itself as the target: refused, the artifact left as it was.
    before = open(pta, "rb").read()
    p = subprocess.run([PARTITA_RUN, pta, "--profile", pta, "-q"], capture_output=True, text=True)
    if p.returncode != 1 or "the model" not in p.stderr or open(pta, "rb").read() != before:
        fail("--profile MODEL: exit %d, stderr %r, model changed: %s" %
             (p.returncode, p.stderr, open(pta, "rb").read() != before))

    if failures:
        raise SystemExit("%d failure(s)" % len(failures))
    shutil.rmtree(WORK, ignore_errors=True)
    print("ok")


main()
