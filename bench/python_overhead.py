#!/usr/bin/python3
"""Measurements of the Python package (docs/python.md), not tests:

1. overhead per call: a small model (an MLP layer, float32[1,64] x [64,64] + bias, Relu)
   run by the C++ `partita-run` (its median time per Session::run) and from Python
   through InferenceSession.run and Session.run (median per call), at 1 kernel thread;
2. throughput with 1 and 2 Python threads on one InferenceSession (runs per second at
   1 kernel thread per run), for the demo model and, when exported, ResNet-18;
3. heap bytes allocated per run for a float32[1,3,224,224] input, counted by an
   LD_PRELOAD allocation counter (bench/malloc_count.c; tracemalloc cannot see C++
   allocations): a C-contiguous input (read in place), a strided and a big-endian one
   (copied), next to the output's own bytes.

    cmake --build build --target partita_malloc_count partita_bench_model partita-run partita_python
    PYTHONPATH=build/python /usr/bin/python3 bench/python_overhead.py --build build
"""
import argparse
import ctypes
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def mlp_model():
    rng = np.random.default_rng(0)
    w = helper.make_tensor("w", TensorProto.FLOAT, [64, 64], rng.standard_normal((64, 64)).astype(np.float32).ravel())
    b = helper.make_tensor("b", TensorProto.FLOAT, [64], rng.standard_normal(64).astype(np.float32))
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["a"]),
         helper.make_node("Relu", ["a"], ["y"])], "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])], initializer=[w, b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def add_model(shape):
    one = helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "one"], ["y"])], "add",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], initializer=[one])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def per_call_us(fn, calls, batches):
    """(median, min) over `batches` of the mean time per call of `calls` calls, in µs."""
    for _ in range(calls // 10 + 1):
        fn()
    samples = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(samples), min(samples)


def overhead(build, tmp, repeat):
    import partita
    pta = os.path.join(tmp, "mlp.pta")
    partita.compile(mlp_model(), pta, threads=1)
    x = np.random.default_rng(1).standard_normal((1, 64)).astype(np.float32)
    np.save(os.path.join(tmp, "x.npy"), x)
    medians, mins = [], []
    for _ in range(3):
        out = subprocess.run([os.path.join(build, "bin", "partita-run"), pta, "--input", "x=" + os.path.join(tmp, "x.npy"),
                              "--threads", "1", "--repeat", str(repeat), "--warmup", "1000", "--quiet"],
                             capture_output=True, text=True, check=True).stdout
        m = re.search(r"median ([0-9.]+) ms, min ([0-9.]+) ms, mean ([0-9.]+) ms", out)
        medians.append(float(m.group(1)) * 1e3)
        mins.append(float(m.group(2)) * 1e3)
    result = {"model": "MLP float32[1,64] x [64,64] + bias, Relu (host, 1 thread)",
              "cpp_partita_run_us": (statistics.median(medians), min(mins))}
    # partita-run prints milliseconds to 3 places (1 us steps); bench's worker
    # (model_runner.cpp, the same Session::run loop) reports each run unrounded.
    worker = os.path.join(build, "bin", "partita_bench_model")
    if os.path.exists(worker):
        p = subprocess.Popen([worker, pta, "--input", "x=" + os.path.join(tmp, "x.npy"), "--threads", "1"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        json.loads(p.stdout.readline())  # ready
        batches = []
        for _ in range(15):
            p.stdin.write("run 2000\n")
            p.stdin.flush()
            batches.append(statistics.mean(json.loads(p.stdout.readline())["ms"]) * 1e3)
        p.stdin.write("quit\n")
        p.stdin.flush()
        p.wait()
        result["cpp_worker_us"] = (statistics.median(batches), min(batches))
    opts = partita.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = partita.InferenceSession(pta, opts)
    feed = {"x": x}
    session = partita.load(pta, threads=1).session()
    result["inference_session_run_us"] = per_call_us(lambda: sess.run(None, feed), 2000, 15)
    result["inference_session_run_named_us"] = per_call_us(lambda: sess.run(["y"], feed), 2000, 15)
    result["session_run_us"] = per_call_us(lambda: session.run(feed), 2000, 15)
    return result


def overlap(intervals, t0, t1):
    """The fraction of [t0, t1] during which every thread was inside a run: runs that
    hold the GIL could never overlap."""
    events = sorted([(a, 1) for iv in intervals for a, _ in iv] + [(b, -1) for iv in intervals for _, b in iv])
    inside, last, both = 0, t0, 0.0
    for t, step in events:
        if inside == len(intervals):
            both += t - last
        inside += step
        last = t
    return both / (t1 - t0)


def throughput(tmp, seconds):
    import partita
    models = [("fashion_cnn (100 images)", os.path.join(ROOT, "models", "fashion", "fashion_cnn.onnx"),
               np.load(os.path.join(ROOT, "models", "fashion", "test_images.npy")))]
    resnet = os.path.join(ROOT, "build", "models", "resnet18.onnx")
    if os.path.exists(resnet):
        models.append(("resnet18", resnet, np.load(os.path.join(ROOT, "build", "models", "resnet18.input.npy"))))
    rows = []
    for label, onnx_path, x in models:
        for backends in (["host"], ["dnnl", "host"]):
            pta = os.path.join(tmp, f"{os.path.basename(onnx_path)}.{'_'.join(backends)}.pta")
            partita.compile(onnx_path, pta, backends=backends, threads=1)
            opts = partita.SessionOptions()
            opts.intra_op_num_threads = 1
            sess = partita.InferenceSession(pta, opts)
            name = sess.get_inputs()[0].name
            row = {"model": label, "backends": ",".join(backends)}
            for n_threads in (1, 2):
                intervals = [[] for _ in range(n_threads)]  # (start, end) of each run, per thread
                stop = threading.Event()

                def work(i):
                    feed = {name: x.copy()}
                    while not stop.is_set():
                        t = time.perf_counter()
                        sess.run(None, feed)
                        intervals[i].append((t, time.perf_counter()))

                for _ in range(2):  # warm the pool
                    sess.run(None, {name: x})
                threads = [threading.Thread(target=work, args=(i,)) for i in range(n_threads)]
                t0, c0 = time.perf_counter(), time.process_time()
                for t in threads:
                    t.start()
                time.sleep(seconds)
                stop.set()
                for t in threads:
                    t.join()
                wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                runs = sum(len(iv) for iv in intervals)
                row[f"runs_per_s_{n_threads}"] = runs / wall
                row[f"cpu_per_wall_{n_threads}"] = cpu / wall
                if n_threads == 2:
                    row["both_running"] = overlap(intervals, t0, t0 + wall)
            row["speedup"] = row["runs_per_s_2"] / row["runs_per_s_1"]
            rows.append(row)
    return rows


def allocations_child():
    """Runs in a process with the counter preloaded; prints JSON."""
    import partita
    lib = ctypes.CDLL(None)
    counter = lib.partita_malloc_count
    counter.argtypes = [ctypes.POINTER(ctypes.c_ulonglong), ctypes.POINTER(ctypes.c_ulonglong)]

    def snapshot():
        calls, nbytes = ctypes.c_ulonglong(), ctypes.c_ulonglong()
        counter(ctypes.byref(calls), ctypes.byref(nbytes))
        return calls.value, nbytes.value

    shape = [1, 3, 224, 224]
    sess = partita.InferenceSession(add_model(shape).SerializeToString())
    session = sess.model.session()
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    wide = np.zeros((1, 3, 224, 448), np.float32)
    wide[..., ::2] = x
    cases = {"contiguous float32": x, "strided (every other column)": wide[..., ::2],
             "big-endian float32": x.astype(">f4")}
    runs = 200
    out = {"input_bytes": int(x.nbytes), "output_bytes": int(x.nbytes), "runs": runs, "cases": []}
    for label, arr in cases.items():
        for api, call in (("InferenceSession.run", lambda: sess.run(None, {"x": arr})),
                          ("Session.run", lambda: session.run({"x": arr}))):
            for _ in range(10):
                call()
            c0, b0 = snapshot()
            for _ in range(runs):
                call()
            c1, b1 = snapshot()
            out["cases"].append({"input": label, "api": api, "allocations_per_run": (c1 - c0) / runs,
                                 "bytes_per_run": (b1 - b0) / runs})
    print(json.dumps(out))


def allocations(build):
    lib = os.path.join(build, "lib", "libpartita_malloc_count.so")
    if not os.path.exists(lib):
        raise SystemExit(f"{lib} is missing: cmake --build {build} --target partita_malloc_count")
    env = dict(os.environ, LD_PRELOAD=lib)
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--allocations-child"], env=env,
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--seconds", type=float, default=3.0, help="per throughput measurement")
    ap.add_argument("--repeat", type=int, default=20000, help="partita-run runs")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--allocations-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.allocations_child:
        allocations_child()
        return
    results = {}
    with tempfile.TemporaryDirectory(prefix="partita_py_bench_") as tmp:
        results["overhead"] = o = overhead(args.build, tmp, args.repeat)
        print(f"overhead per call, {o['model']} (median / min over batches, us):")
        cpp = o["cpp_partita_run_us"]
        print(f"  partita-run (C++) Session::run      {cpp[0]:7.2f} / {cpp[1]:5.2f}   (printed in 1 us steps)")
        if "cpp_worker_us" in o:
            cpp = o["cpp_worker_us"]
            print(f"  partita_bench_model (C++), unrounded {cpp[0]:7.2f} / {cpp[1]:5.2f}")
        for key, label in [("inference_session_run_us", "InferenceSession.run(None, feed)"),
                           ("inference_session_run_named_us", "InferenceSession.run(['y'], feed)"),
                           ("session_run_us", "Session.run(feed)")]:
            t = o[key]
            print(f"  {label:<35} {t[0]:7.2f} / {t[1]:5.2f}   Python layer +{t[0] - cpp[0]:.2f} / +{t[1] - cpp[1]:.2f}")
        results["throughput"] = rows = throughput(tmp, args.seconds)
        print("throughput, one InferenceSession, 1 kernel thread per run:")
        for r in rows:
            print(f"  {r['model']:<26} {r['backends']:<10} 1 thread {r['runs_per_s_1']:7.1f}/s "
                  f"(cpu/wall {r['cpu_per_wall_1']:.2f})  2 threads {r['runs_per_s_2']:7.1f}/s "
                  f"(cpu/wall {r['cpu_per_wall_2']:.2f}; both inside a run {100 * r['both_running']:.0f}% "
                  f"of the time)  {r['speedup']:.2f}x")
    results["allocations"] = a = allocations(args.build)
    print(f"heap allocated per run, float32[1,3,224,224] input ({a['input_bytes']} bytes) "
          f"and output ({a['output_bytes']} bytes), mean of {a['runs']} runs:")
    for c in a["cases"]:
        print(f"  {c['input']:<30} {c['api']:<22} {c['bytes_per_run']:12.0f} bytes in "
              f"{c['allocations_per_run']:.1f} allocations")
    results["loadavg"] = os.getloadavg()[0]
    print(f"load average at the end: {results['loadavg']:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
