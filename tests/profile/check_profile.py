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

Control flow: a model with an If (on an input) and a Loop whose body holds another If
(on the iteration number), built with onnx.helper. The steps inside the bodies must be
events of their own: every run of a subgraph an event (cat "subgraph", named
NODE/BRANCH or NODE/body, args "branch" or "iteration") one level below its node's,
the body's steps one level below that and within it, with the iteration (and, in the
inner If, the branch taken) in their args; the summary counts the body's ops.

usage: check_profile.py BIN_DIR SOURCE_DIR WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys

import onnx
from onnx import TensorProto, helper, numpy_helper
import numpy as np

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


def control_flow_model(path):
    """y = Loop(n, If(flag, Relu(x), Neg(x))); the body: v = Tanh(If(i < 2, v * 0.5, v + w))."""
    f = TensorProto.FLOAT
    then_top = helper.make_graph([helper.make_node("Relu", ["x"], ["t_out"], name="top_relu")], "then_top", [],
                                 [helper.make_tensor_value_info("t_out", f, [4, 8])])
    else_top = helper.make_graph([helper.make_node("Neg", ["x"], ["e_out"], name="top_neg")], "else_top", [],
                                 [helper.make_tensor_value_info("e_out", f, [4, 8])])
    half = numpy_helper.from_array(np.array(0.5, np.float32), "half")
    then_in = helper.make_graph([helper.make_node("Mul", ["v_in", "half"], ["ti_out"], name="inner_mul")],
                                "then_inner", [], [helper.make_tensor_value_info("ti_out", f, [4, 8])], [half])
    else_in = helper.make_graph([helper.make_node("Add", ["v_in", "w"], ["ei_out"], name="inner_add")],
                                "else_inner", [], [helper.make_tensor_value_info("ei_out", f, [4, 8])])
    two = numpy_helper.from_array(np.array(2, np.int64), "two")
    body = helper.make_graph(
        [helper.make_node("Less", ["i", "two"], ["early"], name="body_less"),
         helper.make_node("If", ["early"], ["mixed"], name="inner_if", then_branch=then_in, else_branch=else_in),
         helper.make_node("Tanh", ["mixed"], ["v_out"], name="body_tanh"),
         helper.make_node("Identity", ["c_in"], ["c_out"], name="body_cond")],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", f, [4, 8])],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", f, [4, 8])], [two])
    graph = helper.make_graph(
        [helper.make_node("If", ["flag"], ["start"], name="top_if", then_branch=then_top, else_branch=else_top),
         helper.make_node("Loop", ["n", "", "start"], ["y"], name="loop", body=body)],
        "control_flow_profile",
        [helper.make_tensor_value_info("x", f, [4, 8]), helper.make_tensor_value_info("flag", TensorProto.BOOL, []),
         helper.make_tensor_value_info("n", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("y", f, [4, 8])],
        [numpy_helper.from_array(np.full((4, 8), 0.25, np.float32), "w")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)]), path)


def check_control_flow_trace(path, runs, iterations, out, label):
    """The events of control_flow_model's runs with flag true and n = iterations."""
    with open(path, encoding="utf-8") as f:
        xs = [e for e in json.load(f) if e.get("ph") == "X"]

    def within(inner, outer):
        return (inner["tid"] == outer["tid"] and ns(inner["ts"]) >= ns(outer["ts"]) and
                ns(inner["ts"]) + ns(inner["dur"]) <= ns(outer["ts"]) + ns(outer["dur"]))

    def named(name, cat=None):
        return [e for e in xs if e["name"] == name and (cat is None or e["cat"] == cat)]

    def parent_of(e, candidates):
        ps = [p for p in candidates if p is not e and within(e, p) and p["depth_"] == e["depth_"] - 1]
        return ps[0] if len(ps) == 1 else None

    # The file has no depth: rebuild it from nesting (the innermost enclosing event + 1).
    for e in xs:
        e["depth_"] = sum(1 for p in xs if p is not e and within(e, p) and
                          (ns(p["dur"]) > ns(e["dur"]) or (ns(p["dur"]) == ns(e["dur"]) and p["ts"] < e["ts"])))
    checks = [
        ("top_if", "node", runs), ("loop", "node", runs), ("top_if/then_branch", "subgraph", runs),
        ("top_relu", "node", runs), ("loop/body", "subgraph", runs * iterations),
        ("inner_if", "node", runs * iterations), ("body_tanh", "node", runs * iterations),
        ("inner_if/then_branch", "subgraph", runs * 2), ("inner_if/else_branch", "subgraph", runs * (iterations - 2)),
        ("inner_mul", "node", runs * 2), ("inner_add", "node", runs * (iterations - 2)),
        ("top_if/else_branch", "subgraph", 0), ("top_neg", "node", 0)]
    for name, cat, want in checks:
        got = len(named(name, cat))
        if got != want:
            fail("%s: %d %s events named %s, not %d" % (label, got, cat, name, want))
    # Nesting: a subgraph's event directly inside its node's, its steps directly inside it.
    for sub in [e for e in xs if e["cat"] == "subgraph"]:
        node = sub["name"].rsplit("/", 1)[0]
        p = parent_of(sub, named(node, "node"))
        if p is None:
            fail("%s: subgraph event %s is not directly inside an event of node %s" % (label, sub["name"], node))
        if sub["args"].get("subgraph_of") != node:
            fail("%s: subgraph event %s has args %s" % (label, sub["name"], sub["args"]))
    for name, sub in (("top_relu", "top_if/then_branch"), ("inner_if", "loop/body"), ("body_tanh", "loop/body"),
                      ("inner_mul", "inner_if/then_branch"), ("inner_add", "inner_if/else_branch")):
        for e in named(name, "node"):
            p = parent_of(e, named(sub, "subgraph"))
            if p is None:
                fail("%s: step %s is not directly inside a %s event" % (label, name, sub))
            elif any(e["args"].get(k) != v for k, v in p["args"].items()):
                fail("%s: step %s has args %s, its subgraph %s" % (label, name, e["args"], p["args"]))
    # Each run's loop iterations, numbered 0..n-1 in order, in the steps' args too.
    bodies = sorted(named("loop/body", "subgraph"), key=lambda e: e["ts"])
    got = [e["args"].get("iteration") for e in bodies]
    if got != [str(i) for _ in range(runs) for i in range(iterations)]:
        fail("%s: loop/body iterations %s" % (label, got))
    inner = sorted(named("inner_if/then_branch", "subgraph") + named("inner_if/else_branch", "subgraph"),
                   key=lambda e: e["ts"])
    for e in inner:
        it = int(e["args"].get("iteration", "-1"))
        want = "then_branch" if it < 2 else "else_branch"
        if e["args"].get("branch") != want or e["args"].get("subgraph_of") != "inner_if":
            fail("%s: inner If in iteration %d: args %s (want branch %s)" % (label, it, e["args"], want))
    tanh = named("body_tanh", "node")
    if any(e["args"].get("iteration") is None or e["args"].get("op") != "Tanh" for e in tanh):
        fail("%s: body steps lack iteration or op: %s" % (label, [e["args"] for e in tanh[:2]]))
    # The summary counts the body's steps by op type.
    for op, calls in (("Tanh", runs * iterations), ("Mul", runs * 2), ("Loop", runs), ("(subgraph)", None)):
        line = [ln for ln in out.splitlines() if ln.split()[:1] == [op]]
        if not line or (calls is not None and line[0].split()[2] != str(calls)):
            fail("%s: the summary's %s row should count %s calls: %s\n%s" % (label, op, calls, line, out))
    print("%s: control flow: %d events (%d runs, %d iterations each) checked" % (label, len(xs), runs, iterations))


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

    # Control flow: the steps inside the If's branch and the Loop's body (and the If in it).
    cf = os.path.join(WORK, "control_flow.onnx")
    control_flow_model(cf)
    inputs = []
    for name, value in (("x", np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8)), ("flag", np.array(True)),
                        ("n", np.array(5, np.int64))):
        np.save(os.path.join(WORK, name + ".npy"), value)
        inputs += ["-i", "%s=%s" % (name, os.path.join(WORK, name + ".npy"))]
    trace = os.path.join(WORK, "trace_cf.json")
    out = run([PARTITA, "run", cf, "--profile", trace, "-q", "--backends", "host"] + inputs)
    check_control_flow_trace(trace, 1, 5, out, "partita run (control flow)")
    cf_pta = os.path.join(WORK, "control_flow.pta")
    run([PARTITA, "compile", cf, "-o", cf_pta, "-q", "--backends", "host"])
    trace = os.path.join(WORK, "trace_cf_rt.json")
    out = run([PARTITA_RUN, cf_pta, "--profile", trace, "-n", "2", "--warmup", "1", "-q"] + inputs)
    check_control_flow_trace(trace, 2, 5, out, "partita-run (control flow)")

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
