#!/usr/bin/python3
"""Reduced-precision models against ONNX Runtime (docs/precision.md):

  fp16 NAME        NAME.onnx (scripts/export_models.py) made float16 by
                   scripts/make_float16.py; partita from the .onnx (host) and from a .pta
                   compiled for dnnl,ewise,host, each within 1e-2 of ONNX Runtime on the
                   float16 model (max|a - e| / max|e|).
  int8-static NAME the model quantized by scripts/quantize_int8.py static (QDQ),
                   calibrated on Fashion-MNIST training images (fashion_cnn) or on seeded
                   random inputs; within 2e-2 of ONNX Runtime on the QDQ model; for
                   fashion_cnn also top-1 accuracy on the full test set within 1 point of
                   the float32 model's.
  int8-dynamic NAME  scripts/quantize_int8.py dynamic (DynamicQuantizeLinear ->
                   MatMulInteger/ConvInteger -> Cast -> Mul chains); within 2e-2 of ONNX
                   Runtime. NAME unet is tests/precision/make_unet.py's U-Net (symbolic
                   height and width); bert_encoder_seq the encoder exported with a
                   symbolic batch and sequence length (export_models.py --dynamic), its
                   one artifact checked at four input shapes.

  check_models.py KIND NAME --build BUILD [--work DIR]

ONNX Runtime is onnxruntime-node, found through NODE_PATH or in bench/node_modules
(bench/run.sh installs it); without it the check exits 77 (skipped).
"""
import argparse
import gzip
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PY = "/usr/bin/python3"
SKIP = 77


def rel_err(a, e):
    a = np.asarray(a, np.float64)
    e = np.asarray(e, np.float64)
    return float(np.max(np.abs(a - e)) / max(np.max(np.abs(e)), 1e-30))


def node_path():
    for p in [os.environ.get("NODE_PATH", ""), os.path.join(ROOT, "bench", "node_modules")]:
        if p and os.path.isdir(os.path.join(p, "onnxruntime-node")):
            return p
    return None


def ort_run(model, feeds, work, tag):
    args = ["node", os.path.join(HERE, "ort_infer.js"), model, os.path.join(work, tag)]
    for name, x in feeds.items():
        path = os.path.join(work, "%s.in.%s.npy" % (tag, name))
        np.save(path, x)
        args.append("%s=%s" % (name, path))
    env = dict(os.environ, NODE_PATH=node_path())
    subprocess.run(args, check=True, env=env)
    outs, k = [], 0
    while os.path.exists(os.path.join(work, "%s.%d.npy" % (tag, k))):
        outs.append(np.load(os.path.join(work, "%s.%d.npy" % (tag, k))))
        k += 1
    return outs


def partita_runs(partita, model_path, feeds, work, tag):
    """{"onnx host": outputs, "pta dnnl,ewise,host": outputs}"""
    out = {}
    sess = partita.InferenceSession(model_path, providers=["host"])
    out["onnx host"] = sess.run(None, feeds)
    pta = os.path.join(work, tag + ".pta")
    t0 = time.time()
    partita.compile(model_path, pta, backends=["dnnl", "ewise", "host"])
    print("  compiled %s in %.1f s: %s" % (tag, time.time() - t0, os.path.getsize(pta)))
    sess = partita.InferenceSession(pta)
    out["pta dnnl,ewise,host"] = sess.run(None, feeds)
    return out


def model_input(build, name):
    d = os.path.join(build, "models")
    path = os.path.join(d, name + ".onnx")
    if name == "unet" and not os.path.exists(path):  # symbolic height and width (make_unet.py)
        subprocess.run([PY, os.path.join(HERE, "make_unet.py"), "--out", d], check=True)
    if name == "bert_encoder_seq":  # the encoder with a symbolic batch and sequence length
        stem = os.path.join(d, "bert_encoder.dynamic")
        if not os.path.exists(stem + ".onnx"):
            subprocess.run([PY, os.path.join(ROOT, "scripts", "export_models.py"), "--out", d, "--models",
                            "bert_encoder", "--dynamic"], check=True)
        return stem + ".onnx", {"input": np.load(stem + ".input.npy")}
    if not os.path.exists(path):
        subprocess.run([PY, os.path.join(ROOT, "scripts", "export_models.py"), "--out", d, "--models", name,
                        "--skip-existing"], check=True)
    return path, {"input": np.load(os.path.join(d, name + ".input.npy"))}


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


FASHION = "/usr/share/datasets/fashion-mnist"


def check(results, reference, tol, what):
    ok = True
    for name, outs in results.items():
        e = rel_err(outs[0], reference)
        good = e <= tol
        ok &= good
        print("  %-22s %s: max|a-e|/max|e| = %.3g (limit %g) %s" % (name, what, e, tol, "ok" if good else "FAIL"))
    return ok


def run_fp16(partita, build, work, name):
    src, feeds = model_input(build, name)
    f16 = os.path.join(work, name + ".float16.onnx")
    subprocess.run([PY, os.path.join(ROOT, "scripts", "make_float16.py"), src, f16], check=True)
    print("  %s: %d bytes float32, %d bytes float16" % (name, os.path.getsize(src), os.path.getsize(f16)))
    ort = ort_run(f16, feeds, work, name + ".ort")
    torch_ref = np.load(os.path.join(build, "models", name + ".expected.npy"))
    print("  ONNX Runtime on the float16 model vs PyTorch float32: %.3g" % rel_err(ort[0], torch_ref))
    res = partita_runs(partita, f16, feeds, work, name + ".float16")
    check(res, torch_ref, 1e-2, "vs PyTorch float32")
    return check(res, ort[0], 1e-2, "vs ONNX Runtime")


def calibration_file(name, x, work):
    """Writes the static quantizer's calibration inputs for model NAME and returns the
    path: 1000 Fashion-MNIST training images for the demo CNN (fashion_cnn), else the
    model's input x and three copies scaled by seeded random factors. make bench's QDQ
    models (bench/precision_bench.py) are calibrated with this too."""
    calib = os.path.join(work, name + "_calibration.npy")
    if name == "fashion_cnn":
        images = read_idx(os.path.join(FASHION, "train-images-idx3-ubyte.gz"))[:1000].astype(np.float32) / 255
        np.save(calib, images.reshape(-1, 1, 28, 28))
    else:
        rng = np.random.default_rng(0)
        np.save(calib, np.concatenate([x] + [(x * rng.uniform(0.5, 1.5)).astype(np.float32) for _ in range(3)]))
    return calib


def run_static(partita, build, work, name):
    if name == "fashion_cnn":
        src = os.path.join(ROOT, "models", "fashion", "fashion_cnn.onnx")
        feeds = {"input": np.load(os.path.join(ROOT, "models", "fashion", "test_images.npy"))}
    else:
        src, feeds = model_input(build, name)
    calib = calibration_file(name, feeds["input"], work)
    q = os.path.join(work, name + ".qdq.onnx")
    subprocess.run([PY, os.path.join(ROOT, "scripts", "quantize_int8.py"), "static", src, q, "--calibration", calib,
                    "--build", build], check=True)
    print("  %s: %d bytes float32, %d bytes QDQ int8" % (name, os.path.getsize(src), os.path.getsize(q)))
    ort = ort_run(q, feeds, work, name + ".ort")
    res = partita_runs(partita, q, feeds, work, name + ".qdq")
    ok = check(res, ort[0], 2e-2, "vs ONNX Runtime")
    if name == "fashion_cnn":
        ok &= fashion_accuracy(partita, src, os.path.join(work, name + ".qdq.pta"))
    return ok


def fashion_accuracy(partita, float_model, quant_pta):
    images = read_idx(os.path.join(FASHION, "t10k-images-idx3-ubyte.gz")).astype(np.float32) / 255
    labels = read_idx(os.path.join(FASHION, "t10k-labels-idx1-ubyte.gz")).astype(np.int64)
    images = images.reshape(-1, 100, 1, 28, 28)
    acc = {}
    for tag, sess in [("float32", partita.InferenceSession(float_model, providers=["dnnl", "host"])),
                      ("int8 QDQ", partita.InferenceSession(quant_pta))]:
        pred = np.concatenate([sess.run(None, {"input": b})[0].argmax(axis=1) for b in images])
        acc[tag] = 100.0 * float(np.mean(pred == labels))
        print("  fashion_cnn %-8s top-1 on the %d test images: %.2f%%" % (tag, len(labels), acc[tag]))
    drop = acc["float32"] - acc["int8 QDQ"]
    print("  accuracy drop %.2f points (limit 1) %s" % (drop, "ok" if drop <= 1 else "FAIL"))
    return drop <= 1


def run_dynamic(partita, build, work, name):
    src, feeds = model_input(build, name)
    q = os.path.join(work, name + ".dynamic_int8.onnx")
    subprocess.run([PY, os.path.join(ROOT, "scripts", "quantize_int8.py"), "dynamic", src, q, "--build", build],
                   check=True)
    print("  %s: %d bytes float32, %d bytes dynamic int8" % (name, os.path.getsize(src), os.path.getsize(q)))
    ort = ort_run(q, feeds, work, name + ".ort")
    res = partita_runs(partita, q, feeds, work, name + ".dynamic")
    ok = check(res, ort[0], 2e-2, "vs ONNX Runtime")
    if name == "bert_encoder_seq":
        # The one artifact (its shape-polymorphic region) at other lengths and a batch of 2.
        pta = partita.InferenceSession(os.path.join(work, name + ".dynamic.pta"))
        host = partita.InferenceSession(q, providers=["host"])
        rng = np.random.default_rng(1)
        for shape in [(1, 37, 256), (2, 200, 256), (1, 1, 256)]:
            x = {"input": rng.standard_normal(shape).astype(np.float32)}
            tag = "x".join(str(d) for d in shape)
            ref = ort_run(q, x, work, name + ".ort." + tag)[0]
            got = {"onnx host": host.run(None, x), "pta dnnl,ewise,host": pta.run(None, x)}
            ok &= check(got, ref, 2e-2, "vs ONNX Runtime at " + tag)
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=["fp16", "int8-static", "int8-dynamic"])
    ap.add_argument("name")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--work", default=None)
    args = ap.parse_args()
    if not node_path() or not shutil.which("node"):
        print("onnxruntime-node not found (NODE_PATH or bench/node_modules): skipped")
        return SKIP
    sys.path.insert(0, os.path.join(args.build, "python"))
    import partita

    work = args.work or os.path.join(args.build, "precision-test", args.kind + "-" + args.name)
    os.makedirs(work, exist_ok=True)
    run = {"fp16": run_fp16, "int8-static": run_static, "int8-dynamic": run_dynamic}[args.kind]
    ok = run(partita, args.build, work, args.name)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
