#!/usr/bin/python3
"""Reduced-precision models: made from the bench's models and timed like them
(docs/precision.md; the report's "Reduced precision" section in docs/benchmarks.md).

`make bench` runs this after the other models: bench/bench.py calls run() with its
binaries and options. The entries are SOURCE@KIND (ENTRIES below; `--models precision`
selects all of them, or name them one by one, e.g. `--models resnet18@int8_static`),
each made from a model the bench already has and cached in BUILD/bench/precision/
(remade when its converter script or its source model changes):

  int8_static    scripts/quantize_int8.py static (QDQ), calibrated as
                 tests/precision/check_models.py does: ResNet-18 on its bench input and
                 three scaled copies, the demo CNN on 1000 Fashion-MNIST training images;
  int8_dynamic   scripts/quantize_int8.py dynamic: the encoder (fixed shape, and
                 bert_encoder_seq: exported with a symbolic sequence length, one artifact
                 run at 64 and 256 tokens), and tests/precision/make_unet.py's U-Net
                 (symbolic height and width), whose one artifact runs at two sizes
                 (unet@int8_dynamic_NxCxHxW);
  float16        scripts/make_float16.py: float16 weights and compute, float32 graph inputs
                 and outputs, as float16 converters write them.

At each thread count three workers of bench.py's kind (bench.Worker) are timed in its
interleaved round robin (bench.time_workers): partita on a .pta of the model compiled for
dnnl,ewise,host with the default precision policy, ONNX Runtime on the same .onnx, and
partita on a .pta (dnnl,ewise,host) of the float32 model it was made from. partita's
output is compared with ONNX Runtime's on the same file (max|a - e| / max|e|, within
2e-2 for int8 and 1e-2 for float16, the limits of tests/precision/check_models.py).
bench/report.py reads the medians against TARGETS.

Standalone, on any model files, it prints the same figures, and also times partita on
the .onnx compiled in memory at load and the float16 -> float32 conversion of the
model's float16 weights with partita's Cast kernel (what storing float16 and converting
at load would add to a load):

  precision_bench.py --build build [--threads 1,2] [--quick] MODEL.onnx=INPUT.npy[=FLOAT32.onnx] ...

Timings on a busy machine are not comparable with quiet ones: the load average is
printed before and after.
"""
import argparse
import hashlib
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import bench  # noqa: E402  (the worker protocol, the round robin, artifacts, model export)

PYTHON = bench.PYTHON
BACKENDS = bench.SHIPPED_BACKENDS  # dnnl,ewise,host: the backends int8 and float16 lowering needs

# entry -> (source model, kind, input shape or None for the model's own input).
# bert_encoder_seq: the encoder exported with a symbolic batch and sequence length
# (scripts/export_models.py --dynamic), as transformers ship; one artifact runs both sizes.
ENTRIES = {
    "resnet18@int8_static": ("resnet18", "int8_static", None),
    "fashion_cnn@int8_static": ("fashion_cnn", "int8_static", None),
    "bert_encoder@int8_dynamic": ("bert_encoder", "int8_dynamic", None),
    "bert_encoder_seq@int8_dynamic_64": ("bert_encoder_seq", "int8_dynamic", (1, 64, 256)),
    "bert_encoder_seq@int8_dynamic_256": ("bert_encoder_seq", "int8_dynamic", (1, 256, 256)),
    "unet@int8_dynamic_96x128": ("unet", "int8_dynamic", (1, 3, 96, 128)),
    "unet@int8_dynamic_192x256": ("unet", "int8_dynamic", (1, 3, 192, 256)),
    "resnet18@float16": ("resnet18", "float16", None),
    "mobilenet_v2@float16": ("mobilenet_v2", "float16", None),
    "squeezenet1_1@float16": ("squeezenet1_1", "float16", None),
    "efficientnet_b0@float16": ("efficientnet_b0", "float16", None),
    "bert_encoder@float16": ("bert_encoder", "float16", None),
}
# The targets: partita's median / ONNX Runtime's on the same file at most this,
# and for static int8 also partita float32 / partita int8 at least STATIC_SPEEDUP.
TARGETS = {"int8_static": 1.0, "int8_dynamic": 0.6, "float16": 0.9}
STATIC_SPEEDUP = 1.5
# partita's output against ONNX Runtime's on the same file.
TOLERANCE = {"int8_static": 2e-2, "int8_dynamic": 2e-2, "float16": 1e-2}
KINDS = {
    "int8_static": ("qdq", "scripts/quantize_int8.py"),
    "int8_dynamic": ("dynamic_int8", "scripts/quantize_int8.py"),
    "float16": ("float16", "scripts/make_float16.py"),
}
# Runtimes of an entry, in the order the report shows them.
RUNTIMES = ["partita", "ort", "partita_f32"]
UNET_SCRIPT = os.path.join(ROOT, "tests", "precision", "make_unet.py")
CHECK_MODELS = os.path.join(ROOT, "tests", "precision", "check_models.py")


def file_digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def run_checked(cmd, what):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{what} failed: {bench.last_line(r.stderr + r.stdout)}")


# ---- making the models -------------------------------------------------------------

def source_model(work, pdir, source):
    """(float32 .onnx, its bench input .npy) of a source model, exported when missing."""
    if source == bench.DEMO:
        files = bench.model_files(os.path.join(work, "models"), source)
        return files["onnx"], files["input"]
    if source == "unet":
        onnx_path = os.path.join(pdir, "unet.onnx")
        stamp = os.path.join(pdir, "unet.stamp")
        digest = bench.script_digest(UNET_SCRIPT)
        if not (os.path.exists(onnx_path) and os.path.exists(stamp) and open(stamp).read().strip() == digest):
            bench.log("exporting unet (tests/precision/make_unet.py, symbolic height and width)")
            run_checked([PYTHON, UNET_SCRIPT, "--out", pdir], "tests/precision/make_unet.py")
            with open(stamp, "w") as f:
                f.write(digest + "\n")
        return onnx_path, os.path.join(pdir, "unet.input.npy")
    if source == "bert_encoder_seq":
        script = os.path.join(ROOT, "scripts", "export_models.py")
        onnx_path = os.path.join(pdir, "bert_encoder.dynamic.onnx")
        stamp = os.path.join(pdir, "bert_encoder.dynamic.stamp")
        digest = bench.script_digest(script)
        if not (os.path.exists(onnx_path) and os.path.exists(stamp) and open(stamp).read().strip() == digest):
            bench.log("exporting bert_encoder with a symbolic batch and sequence length (export_models.py --dynamic)")
            run_checked([PYTHON, script, "--out", pdir, "--models", "bert_encoder", "--dynamic"],
                        "scripts/export_models.py --dynamic")
            with open(stamp, "w") as f:
                f.write(digest + "\n")
        return onnx_path, os.path.join(pdir, "bert_encoder.dynamic.input.npy")
    files = bench.model_files(os.path.join(work, "models"), source)
    return files["onnx"], files["input"]


def size_text(size):
    return "x".join(str(d) for d in size)


def sized_input(pdir, source, input_path, size):
    """The input of shape `size`: the source's own when it has that shape, else seeded
    uniform [0, 1) values (written once)."""
    x = np.load(input_path)
    if size is None or tuple(x.shape) == tuple(size):
        return input_path
    path = os.path.join(pdir, f"{source}.{size_text(size)}.input.npy")
    if not os.path.exists(path):
        np.save(path, np.random.default_rng(0).random(size, dtype=np.float32))
    return path


def make_reduced(build, pdir, source, kind, src_onnx, src_input):
    """Writes (or reuses) SOURCE.<kind>.onnx; returns (path, seconds spent making it or None)."""
    suffix, script = KINDS[kind]
    out = os.path.join(pdir, f"{source}.{suffix}.onnx")
    stamp = out + ".stamp"
    digest = f"{bench.script_digest(os.path.join(ROOT, script))} {file_digest(src_onnx)}"
    if kind == "int8_static":  # and the calibration inputs check_models.py makes
        digest += " " + bench.script_digest(CHECK_MODELS)
    if os.path.exists(out) and os.path.exists(stamp) and open(stamp).read().strip() == digest:
        return out, None
    bench.log(f"making {os.path.basename(out)} from {os.path.basename(src_onnx)} with {script}")
    t0 = time.perf_counter()
    if kind == "float16":
        run_checked([PYTHON, os.path.join(ROOT, script), src_onnx, out], script)
    elif kind == "int8_dynamic":
        run_checked([PYTHON, os.path.join(ROOT, script), "dynamic", src_onnx, out, "--build", build], script)
    else:
        sys.path.insert(0, os.path.dirname(CHECK_MODELS))
        import check_models  # the calibration inputs the precision tests quantize with
        if source == "fashion_cnn" and not os.path.isdir(check_models.FASHION):
            raise RuntimeError(f"no Fashion-MNIST in {check_models.FASHION} (package dataset-fashion-mnist) "
                               "to calibrate the demo CNN on")
        calib = check_models.calibration_file(source, np.load(src_input), pdir)
        run_checked([PYTHON, os.path.join(ROOT, script), "static", src_onnx, out, "--calibration", calib,
                     "--build", build], script)
    with open(stamp, "w") as f:
        f.write(digest + "\n")
    return out, time.perf_counter() - t0


# ---- sizes ---------------------------------------------------------------------------

_partita_module = {}


def stored_weight_bytes(build, pta):
    """{dtype: bytes} of the weights the artifact stores (each distinct content once),
    read with the Python module's partita.inspect; {"na": why} without it."""
    if "module" not in _partita_module:
        sys.path.insert(0, os.path.join(build, "python"))
        try:
            import partita
            _partita_module["module"] = partita
        except ImportError as e:
            _partita_module["module"] = None
            _partita_module["na"] = f"the partita Python module is not built ({e})"
    partita = _partita_module["module"]
    if partita is None:
        return {"na": _partita_module["na"]}
    out = {}
    for c in partita.inspect(pta)["constants"]:
        if c["storage"] == "weights" and c["same_bytes_as"] is None:
            out[c["dtype"]] = out.get(c["dtype"], 0) + c["bytes"]
    return out


def compile_for(bins, pdir, onnx_path, threads):
    """partita_dnnl artifacts (BACKENDS, one per thread count) of a model, compiled once
    per .onnx (bench.compile_artifacts' cache: the U-Net's sizes and the float32 model of
    two entries share theirs) into pdir/<stem>/; with its stored weight bytes."""
    files = {"onnx": onnx_path, "shipped": True}  # shipped: BACKENDS, no --shape, cached
    art = bench.compile_artifacts(bins["partita"], files, os.path.join(pdir, "_"), None, threads,
                                  only=["partita_dnnl"])["partita_dnnl"]
    if "pta" in art and "weights_by_dtype" not in art:
        art["weights_by_dtype"] = stored_weight_bytes(os.path.dirname(os.path.dirname(bins["partita"])), art["pta"])
    return art


# ---- timing --------------------------------------------------------------------------

def time_entry(name, specs, out_dir, opts, tolerance, reference="ort"):
    """Times the workers `specs` at each thread count in bench.py's round robin:
    {runtime: {"na": why}} or {runtime: {"model": threads -> model path, "cmd":
    (model path, threads, out_npy) -> argv}}. Returns ({runtime: {threads: entry}}, the
    runtimes' versions); the entries of the reduced-precision model's partita workers get
    the agreement of their output with the reference runtime's (ONNX Runtime on the same
    file), within `tolerance`."""
    runs, versions = {}, {}
    for threads in opts.threads:
        workers, entries, outs = [], {}, {}
        for rt, spec in specs.items():
            key = f"{rt}/t{threads}"
            entry = entries[key] = runs.setdefault(rt, {}).setdefault(str(threads), {})
            if "na" in spec:
                entry["na"] = spec["na"]
                continue
            outs[rt] = os.path.join(out_dir, f"{rt}.t{threads}.out.npy")
            w = bench.start_worker(name, key, spec["cmd"](spec["model"](threads), threads, outs[rt]),
                                   os.path.join(out_dir, f"{rt}.t{threads}.log"), outs[rt], entry, opts)
            if w:
                workers.append(w)
                versions.update({k: v for k, v in w.ready.items() if k.endswith("_version")})
        started = {w.key.split("/")[0] for w in workers}
        if reference in started:
            for rt in started - {reference, "partita_f32"}:
                agree = bench.compare(outs[rt], outs[reference])
                if "largest_rel_err" in agree:
                    agree["ok"] = bool(agree["largest_rel_err"] <= tolerance)
                entries[f"{rt}/t{threads}"]["agreement"] = agree
        bench.time_and_record(name, workers, entries, threads, opts)
    return runs, versions


def worker_commands(bins, input_name, input_path):
    """(partita, ort): builders (model path, threads, out_npy) -> argv, through
    bench.worker_command (partita compiles an .onnx in memory for BACKENDS)."""
    files = {"input": input_path, "input_name": input_name, "shipped": True}

    def partita(path, threads, out_npy):
        return bench.worker_command("partita_dnnl", bins, dict(files, onnx=path), None, threads, path, out_npy)

    def ort(path, threads, out_npy):
        return bench.worker_command("ort", bins, dict(files, onnx=path), None, threads, path, out_npy)

    return partita, ort


def graph_input_name(onnx_path):
    import onnx
    m = onnx.load(onnx_path)
    inits = {t.name for t in m.graph.initializer}
    return next(i.name for i in m.graph.input if i.name not in inits)


def artifact_spec(bins, art, cmd):
    """A partita worker's spec on the artifacts of compile_for."""
    if not bins.get("model_runner"):
        return {"na": bins["model_runner_na"]}
    if "pta" not in art:
        return {"na": art["na"]}
    return {"model": lambda threads: bench.artifact_for(art, threads), "cmd": cmd}


def bench_entry(name, bins, work, pdir, opts):
    source, kind, size = ENTRIES[name]
    res = {"name": name, "source": source, "kind": kind, "target_vs_ort": TARGETS[kind],
           "tolerance": TOLERANCE[kind]}
    if size:
        res["size"] = size_text(size)
    build = os.path.dirname(os.path.dirname(bins["partita"]))
    try:
        src_onnx, src_input = source_model(work, pdir, source)
        onnx_path, made_s = make_reduced(build, pdir, source, kind, src_onnx, src_input)
        input_path = sized_input(pdir, source, src_input, size)
    except Exception as e:  # noqa: BLE001 - reported as n/a
        res["na"] = f"could not make the model: {e}"
        bench.log(f"{name}: {res['na']}")
        return res
    if made_s is not None:
        res["made_s"] = made_s
    res["onnx_bytes"] = os.path.getsize(onnx_path)
    res["float32_onnx_bytes"] = os.path.getsize(src_onnx)
    res["onnx_weights_by_dtype"] = bench.weight_bytes(onnx_path)["weights_distinct_by_dtype"]
    arts = {"partita": compile_for(bins, pdir, onnx_path, opts.threads),
            "partita_f32": compile_for(bins, pdir, src_onnx, opts.threads)}
    res["artifacts"] = arts
    for rt, a in arts.items():
        bench.log(f"{name}: {rt}: " + (a["na"] if "na" in a else
                                       f"compiled in {a['compile_s']:.2f} s, {a['artifact_bytes'] / 1e6:.2f} MB"))
    partita, ort = worker_commands(bins, graph_input_name(onnx_path), input_path)
    specs = {"partita": artifact_spec(bins, arts["partita"], partita),
             "ort": {"model": lambda threads: onnx_path, "cmd": ort} if bins.get("ort") else {"na": bins.get("ort_na")},
             "partita_f32": artifact_spec(bins, arts["partita_f32"], partita)}
    out_dir = os.path.join(pdir, name.replace("@", "."))
    os.makedirs(out_dir, exist_ok=True)
    res["runs"], res["versions"] = time_entry(name, specs, out_dir, opts, TOLERANCE[kind])
    return res


def run(bins, work, opts, names):
    """The "precision" part of bench.py's results: one entry per name of ENTRIES."""
    out = {"targets": dict(TARGETS), "static_speedup": STATIC_SPEEDUP, "backends": BACKENDS, "models": []}
    if not bins.get("partita"):
        out["na"] = bins.get("partita_na")
        return out
    popts = argparse.Namespace(**vars(opts))
    popts.batch_s = min(opts.batch_s, getattr(opts, "precision_batch_s", opts.batch_s))
    out["batch_s"] = popts.batch_s
    pdir = os.path.join(work, "precision")
    os.makedirs(pdir, exist_ok=True)
    exported = sorted({ENTRIES[n][0] for n in names} & set(bench.EXPORTED))
    bench.export_models(os.path.join(work, "models"), exported)
    t0 = time.time()
    for name in names:
        bench.log(f"=== {name}")
        out["models"].append(bench_entry(name, bins, work, pdir, popts))
    out["duration_s"] = time.time() - t0
    return out


# ---- standalone ------------------------------------------------------------------------

def conversion_ms(partita, model):
    """Median time of partita's Cast kernel converting all float16 initializers at once."""
    from onnx import TensorProto, helper
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


STANDALONE_LABELS = {"partita": "partita .pta (dnnl,ewise,host)",
                     "partita_onnx": "partita .onnx in memory (dnnl,ewise,host)",
                     "ort": "onnxruntime", "partita_f32": "partita float32 .pta (dnnl,ewise,host)"}


def standalone(spec, bins, pdir, opts):
    parts = spec.split("=")
    if len(parts) not in (2, 3):
        raise SystemExit(f"{spec}: expected MODEL.onnx=INPUT.npy[=FLOAT32.onnx]")
    model_path, input_path = os.path.abspath(parts[0]), os.path.abspath(parts[1])
    float_path = os.path.abspath(parts[2]) if len(parts) > 2 else None
    name = os.path.basename(model_path)
    art = compile_for(bins, pdir, model_path, opts.threads)
    if "na" in art:
        raise SystemExit(f"{name}: {art['na']}")
    print(f"\n{name}: .onnx {os.path.getsize(model_path)} bytes, .pta {art['artifact_bytes']} bytes (compiled in "
          f"{art['compile_s']:.1f} s); stored weights by dtype {art['weights_by_dtype']}")
    import onnx
    partita_py = _partita_module.get("module")
    if partita_py is not None:
        ms, n = conversion_ms(partita_py, onnx.load(model_path))
        if ms is not None:
            print(f"  converting its {n} float16 weights to float32 (partita's Cast kernel): {ms:.2f} ms, "
                  f"{4 * n} private bytes")
    partita, ort = worker_commands(bins, graph_input_name(model_path), input_path)
    specs = {"partita": artifact_spec(bins, art, partita),
             "partita_onnx": {"model": lambda threads: model_path, "cmd": partita},
             "ort": {"model": lambda threads: model_path, "cmd": ort} if bins.get("ort") else {"na": bins.get("ort_na")}}
    if float_path:
        specs["partita_f32"] = artifact_spec(bins, compile_for(bins, pdir, float_path, opts.threads), partita)
    out_dir = os.path.join(pdir, name[:-len(".onnx")] if name.endswith(".onnx") else name)
    os.makedirs(out_dir, exist_ok=True)
    runs, _ = time_entry(name, specs, out_dir, opts, tolerance=max(TOLERANCE.values()))
    for threads in opts.threads:
        print(f"  {threads} thread(s):")
        got = {rt: runs[rt][str(threads)] for rt in specs}
        for rt, e in got.items():
            if "median_ms" not in e:
                print(f"    {STANDALONE_LABELS[rt]:42} n/a: {e.get('na', 'no timing')}")
                continue
            mem = e.get("memory", {})
            agree = e.get("agreement", {}).get("largest_rel_err")
            print(f"    {STANDALONE_LABELS[rt]:42} load {e['load_ms']:8.1f} ms  private "
                  f"{(mem.get('private_dirty_kb', 0) + mem.get('private_clean_kb', 0)) / 1024:6.1f} MiB  file-backed "
                  f"{mem.get('rss_file_kb', 0) / 1024:6.1f} MiB  median {e['median_ms']:8.2f} ms (min {e['min_ms']:.2f})"
                  + (f"  vs ORT {agree:.2e}" if agree is not None else ""))
        mine, other = got["partita"].get("median_ms"), got["ort"].get("median_ms")
        if mine and other:
            print(f"    ratio partita .pta / onnxruntime: {mine / other:.2f}")
        f32 = got.get("partita_f32", {}).get("median_ms")
        if mine and f32:
            print(f"    ratio partita .pta / partita float32: {mine / f32:.2f} (float32 is {f32 / mine:.2f}x slower)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+", help="MODEL.onnx=INPUT.npy[=FLOAT32.onnx]")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    bench.add_timing_options(ap)
    opts = ap.parse_args()
    bench.apply_timing_options(opts)
    build = os.path.abspath(opts.build)
    bins = bench.find_bins(build)
    if not bins.get("partita"):
        raise SystemExit(bins["partita_na"])
    pdir = os.path.join(build, "bench", "precision-standalone")
    os.makedirs(pdir, exist_ok=True)
    print("load average before: %s" % " ".join("%.2f" % v for v in os.getloadavg()))
    for spec in opts.models:
        standalone(spec, bins, pdir, opts)
    print("\nload average after: %s" % " ".join("%.2f" % v for v in os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
