#!/usr/bin/env python3
"""The PyTorch worker of bench/bench.py.

    torch_runner.py NAME --input NAME=X.npy --threads N [--output OUT.npy]

NAME is a model of scripts/export_models.py (rebuilt with the same seeds as the
export, so the weights equal the ONNX file's) or "fashion_cnn" (the demo model's
architecture loaded with the weights of models/fashion/fashion_cnn.onnx, whose
BatchNorms the exporter folded into the convolutions).

Same protocol as partita_bench_model (bench/model_runner.cpp): build, run once,
write output 0, print {"event":"ready",...} with memory read from /proc/self after
that first run, then answer "run K" with {"event":"times","ms":[...]} until "quit".
torch.set_num_threads(N), one inter-op thread, torch.inference_mode().
"""
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def proc_kb(path, keys):
    out = {}
    with open(path) as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in keys:
                out[key] = int(rest.split()[0])
    return out


def memory():
    s = proc_kb("/proc/self/status", {"VmHWM", "VmRSS", "RssAnon", "RssFile"})
    r = proc_kb("/proc/self/smaps_rollup", {"Private_Clean", "Private_Dirty", "Shared_Clean"})
    return {"peak_rss_kb": s.get("VmHWM"), "rss_kb": s.get("VmRSS"),
            "rss_anon_kb": s.get("RssAnon"), "rss_file_kb": s.get("RssFile"),
            "private_clean_kb": r.get("Private_Clean"), "private_dirty_kb": r.get("Private_Dirty"),
            "shared_clean_kb": r.get("Shared_Clean")}


def build_exported(name):
    """The model exactly as scripts/export_models.py built it before exporting."""
    import torch
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import export_models

    ctor, _ = export_models.MODELS[name]
    torch.manual_seed(0)
    model = ctor()
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        export_models.randomise_params(model, gen)
    return model.eval()


def build_fashion(onnx_path):
    """FashionCNN with the exported (BatchNorm-folded) weights of the demo model."""
    import numpy as np
    import onnx
    import onnx.numpy_helper
    import torch
    import torch.nn as nn
    sys.path.insert(0, os.path.join(ROOT, "models", "fashion"))
    import train_fashion

    m = onnx.load(onnx_path)
    init = {t.name: onnx.numpy_helper.to_array(t) for t in m.graph.initializer}
    convs = [n for n in m.graph.node if n.op_type == "Conv"]
    model = train_fashion.FashionCNN()
    model.bn1 = nn.Identity()
    model.bn2 = nn.Identity()
    state = {"mean": init["mean"], "std": init["std"],
             "conv1.weight": init[convs[0].input[1]], "conv1.bias": init[convs[0].input[2]],
             "conv2.weight": init[convs[1].input[1]], "conv2.bias": init[convs[1].input[2]],
             "fc1.weight": init["fc1.weight"], "fc1.bias": init["fc1.bias"],
             "fc2.weight": init["fc2.weight"], "fc2.bias": init["fc2.bias"]}
    model.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in state.items()})
    return model.eval()


def main():
    argv = sys.argv[1:]
    name, inputs, threads, output = None, [], 1, None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--input":
            key, _, path = argv[i + 1].partition("=")
            inputs.append((key, path))
            i += 2
        elif a == "--threads":
            threads = int(argv[i + 1])
            i += 2
        elif a == "--output":
            output = argv[i + 1]
            i += 2
        elif not a.startswith("-") and name is None:
            name = a
            i += 1
        else:
            raise SystemExit(f"unknown argument {a}")

    t0 = time.perf_counter()
    import numpy as np
    import torch
    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)
    if name == "fashion_cnn":
        model = build_fashion(os.path.join(ROOT, "models", "fashion", "fashion_cnn.onnx"))
    else:
        model = build_exported(name)
    load_ms = (time.perf_counter() - t0) * 1e3
    xs = [torch.from_numpy(np.load(path)) for _, path in inputs]

    with torch.inference_mode():
        t0 = time.perf_counter()
        y = model(*xs)
        first_ms = (time.perf_counter() - t0) * 1e3
        mem = memory()
        if output:
            np.save(output, y.numpy())
        emit({"event": "ready", "load_ms": load_ms, "first_run_ms": first_ms, "memory": mem,
              "torch_version": torch.__version__})
        for line in sys.stdin:
            parts = line.split()
            if not parts or parts[0] == "quit":
                break
            if parts[0] != "run":
                raise SystemExit(f"unknown command: {line}")
            ms = []
            for _ in range(int(parts[1])):
                s = time.perf_counter()
                model(*xs)
                ms.append((time.perf_counter() - s) * 1e3)
            emit({"event": "times", "ms": ms})


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # reported to the driver, which shows the column as n/a
        emit({"event": "error", "message": f"{type(e).__name__}: {e}"})
        sys.exit(1)
