#!/usr/bin/python3
"""Reduced-precision models: sizes, load, memory and latency (docs/precision.md).

For each model file given (float16 made by scripts/make_float16.py, QDQ or dynamic int8
made by scripts/quantize_int8.py, or any .onnx), with its input .npy:
  * compiles a .pta for dnnl,ewise,host (the default precision policy) and reports both
    file sizes and the artifact's weight bytes by stored dtype;
  * starts three workers (bench/model_runner.cpp, bench/ort_runner.js): partita on the
    .pta, partita on the .onnx compiled in memory at load, ONNX Runtime on the .onnx;
    each reports its load time and memory after the first run;
  * interleaves timed batches of the workers (round robin, like bench/bench.py) and
    prints the median latencies.
Also times the float16 -> float32 conversion of the model's float16 weights with
partita's Cast kernel (what storing float16 and converting at load would add to a load).

  precision_bench.py --build build [--threads 2] [--runs 20] MODEL.onnx=INPUT.npy[=FLOAT32.onnx] ...

With a third part, the float32 model the reduced-precision one was made from is timed
in the same round robin (partita, a .pta for dnnl,ewise,host), and the medians are
printed as ratios: reduced-precision partita / ONNX Runtime and / partita float32.

Prints the load average before and after: timings on a busy machine are not
comparable with quiet ones.
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


class Worker:
    def __init__(self, args, env=None):
        self.p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        self.ready = self.read()
        if self.ready.get("event") != "ready":
            raise RuntimeError("%s: %s" % (args[0], self.ready))

    def read(self):
        return json.loads(self.p.stdout.readline())

    def run(self, k):
        self.p.stdin.write("run %d\n" % k)
        self.p.stdin.flush()
        return self.read()["ms"]

    def quit(self):
        self.p.stdin.write("quit\n")
        self.p.stdin.flush()
        self.p.wait()


def weight_bytes_by_dtype(info):
    out = {}
    for c in info["constants"]:
        if c["storage"] == "weights" and c["same_bytes_as"] is None:
            out[c["dtype"]] = out.get(c["dtype"], 0) + c["bytes"]
    return out


def conversion_ms(partita, model, threads):
    """Median time of partita's Cast kernel converting all float16 initializers at once."""
    n = sum(int(np.prod(t.dims)) for t in model.graph.initializer if t.data_type == TensorProto.FLOAT16)
    if n == 0:
        return None, 0
    g = helper.make_graph([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)], "cast",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [n])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    sess = partita.InferenceSession(m.SerializeToString(), providers=["host"])
    x = np.random.default_rng(0).standard_normal(n).astype(np.float16)
    times = []
    for _ in range(7):
        t0 = time.perf_counter()
        sess.run(None, {"x": x})
        times.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(times)), n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+", help="MODEL.onnx=INPUT.npy[=FLOAT32.onnx]")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(args.build, "python"))
    import partita

    runner = os.path.join(args.build, "bin", "partita_bench_model")
    node_env = dict(os.environ, NODE_PATH=os.environ.get("NODE_PATH", os.path.join(HERE, "node_modules")))
    print("load average before: %s" % " ".join("%.2f" % v for v in os.getloadavg()))
    for spec in args.models:
        parts = spec.split("=")
        model_path, input_path = parts[0], parts[1]
        float_path = parts[2] if len(parts) > 2 else None
        name = os.path.basename(model_path)
        model = onnx.load(model_path)
        input_name = model.graph.input[0].name
        pta = os.path.splitext(model_path)[0] + ".bench.pta"
        t0 = time.time()
        partita.compile(model_path, pta, backends=["dnnl", "ewise", "host"], threads=args.threads)
        compile_s = time.time() - t0
        info = partita.inspect(pta)
        print("\n%s: .onnx %d bytes, .pta %d bytes (compiled in %.1f s); stored weights by dtype %s" %
              (name, os.path.getsize(model_path), os.path.getsize(pta), compile_s, weight_bytes_by_dtype(info)))
        ms, n = conversion_ms(partita, model, args.threads)
        if ms is not None:
            print("  converting its %d float16 weights to float32 (partita's Cast kernel): %.2f ms, "
                  "%d private bytes" % (n, ms, 4 * n))
        feed = ["--input", "%s=%s" % (input_name, input_path), "--threads", str(args.threads)]
        workers = {
            "partita .pta (dnnl,ewise,host)": Worker([runner, pta] + feed),
            "partita .onnx in memory (dnnl,ewise,host)": Worker([runner, model_path] + feed +
                                                               ["--backends", "dnnl,ewise,host"]),
            "onnxruntime": Worker(["node", os.path.join(HERE, "ort_runner.js"), model_path] + feed, env=node_env),
        }
        if float_path:
            float_pta = os.path.splitext(float_path)[0] + ".bench.pta"
            partita.compile(float_path, float_pta, backends=["dnnl", "ewise", "host"], threads=args.threads)
            workers["partita float32 .pta (dnnl,ewise,host)"] = Worker([runner, float_pta] + feed)
        times = {k: [] for k in workers}
        for w in workers.values():
            w.run(2)  # warm up
        for _ in range(max(1, args.runs // 5)):
            for k, w in workers.items():
                times[k] += w.run(5)
        for k, w in workers.items():
            mem = w.ready["memory"]
            print("  %-42s load %8.1f ms  private %6.1f MiB  file-backed %6.1f MiB  median %8.2f ms (min %.2f)" %
                  (k, w.ready["load_ms"], (mem.get("private_dirty_kb", 0) + mem.get("private_clean_kb", 0)) / 1024,
                   mem.get("rss_file_kb", 0) / 1024, float(np.median(times[k])), float(np.min(times[k]))))
            w.quit()
        medians = {k: float(np.median(v)) for k, v in times.items()}
        mine = medians["partita .pta (dnnl,ewise,host)"]
        print("  ratio partita .pta / onnxruntime: %.2f" % (mine / medians["onnxruntime"]))
        if float_path:
            print("  ratio partita .pta / partita float32: %.2f (float32 is %.2fx slower)" %
                  (mine / medians["partita float32 .pta (dnnl,ewise,host)"],
                   medians["partita float32 .pta (dnnl,ewise,host)"] / mine))
    print("\nload average after: %s" % " ".join("%.2f" % v for v in os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
