#!/usr/bin/env python3
"""Export reference models to ONNX (opset 13) with seeded random weights.

For each model NAME writes DIR/NAME.onnx, DIR/NAME.input.npy (seeded random
float32 input) and DIR/NAME.expected.npy (torch eval-mode output, float32).
Graph input is named "input", output "output"; batch 1, fixed shapes.

With --dynamic the graph input's batch and image sides (bert_encoder: batch and
sequence length) are symbolic dims (torch.onnx.export's dynamic_axes) and the files
are DIR/NAME.dynamic.onnx etc.: what a model shipped for inputs of any size looks
like (docs/dynamic_shapes.md).

Usage: export_models.py --out DIR [--models resnet18,mobilenet_v2,...] [--dynamic] [--skip-existing]
"""
import argparse
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
import torchvision


class BertEncoder(nn.Module):
    """BERT-shaped encoder without embeddings: float input [1,128,256]."""

    def __init__(self, d_model=256, nhead=4, dim_ff=1024, num_layers=4):
        super().__init__()
        layer = nn.TransformerEncoderLayer(
            d_model, nhead, dim_feedforward=dim_ff, dropout=0.0,
            activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(
            layer, num_layers, enable_nested_tensor=False)
        # TransformerEncoder deep-copies `layer`, so all layers start out
        # identical; give every weight matrix and bias its own random values.
        with torch.no_grad():
            for p in self.parameters():
                if p.dim() >= 2:
                    p.normal_(0.0, p.shape[1] ** -0.5)
                else:
                    p.normal_(0.0, 0.05)

    def forward(self, x):
        return self.encoder(x)


def _vision(name):
    return lambda: getattr(torchvision.models, name)(weights=None)


# name -> (constructor, input shape)
MODELS = {
    "resnet18": (_vision("resnet18"), (1, 3, 224, 224)),
    "mobilenet_v2": (_vision("mobilenet_v2"), (1, 3, 224, 224)),
    "squeezenet1_1": (_vision("squeezenet1_1"), (1, 3, 224, 224)),
    "efficientnet_b0": (_vision("efficientnet_b0"), (1, 3, 224, 224)),
    "bert_encoder": (BertEncoder, (1, 128, 256)),
}


def randomise_params(model, gen):
    """Make BatchNorm/LayerNorm non-identity (running var stays > 0) and give
    all-zero biases small random values, so the test exercises every parameter
    (the exporter also dedups identical initializers into Identity nodes)."""
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            n = m.num_features
            m.running_mean.copy_(0.1 * torch.randn(n, generator=gen))
            m.running_var.copy_(0.75 + 0.5 * torch.rand(n, generator=gen))
        if isinstance(m, (nn.modules.batchnorm._BatchNorm, nn.LayerNorm)):
            if m.weight is not None:
                shape = m.weight.shape
                m.weight.copy_(0.75 + 0.5 * torch.rand(shape, generator=gen))
                m.bias.copy_(0.1 * torch.randn(shape, generator=gen))
            continue
        for name, p in m.named_parameters(recurse=False):
            if "bias" in name and not p.any():
                p.copy_(0.05 * torch.randn(p.shape, generator=gen))


# The symbolic dims of --dynamic exports: input axis -> name.
DYNAMIC_AXES = {
    "bert_encoder": {0: "batch", 1: "sequence"},
}
VISION_AXES = {0: "batch", 2: "height", 3: "width"}


def export_one(name, out_dir, dynamic=False):
    import onnx

    ctor, shape = MODELS[name]
    torch.manual_seed(0)
    model = ctor()
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        randomise_params(model, gen)
    model.eval()
    x = torch.randn(shape, generator=gen, dtype=torch.float32)
    with torch.no_grad():
        expected = model(x)

    stem = f"{name}.dynamic" if dynamic else name
    # Written into a private folder first and moved into place (.onnx last): a test or
    # script that finds NAME.onnx never reads a half-written file while another process
    # exports the same model into the same folder.
    work = tempfile.mkdtemp(prefix=f".{stem}.", dir=out_dir)
    try:
        onnx_path = os.path.join(work, f"{stem}.onnx")
        axes = {}
        if dynamic:
            in_axes = DYNAMIC_AXES.get(name, VISION_AXES)
            out_axes = {0: "batch", 1: "sequence"} if name in DYNAMIC_AXES else {0: "batch"}
            axes = {"input": in_axes, "output": out_axes}
        t0 = time.time()
        torch.onnx.export(model, x, onnx_path, opset_version=13,
                          input_names=["input"], output_names=["output"],
                          do_constant_folding=True,
                          dynamic_axes=axes or None,
                          training=torch.onnx.TrainingMode.EVAL)
        dt = time.time() - t0
        np.save(os.path.join(work, f"{stem}.input.npy"), x.numpy().astype(np.float32))
        np.save(os.path.join(work, f"{stem}.expected.npy"),
                expected.numpy().astype(np.float32))

        m = onnx.load(onnx_path)
        onnx.checker.check_model(m)
        ops = sorted({n.op_type for n in m.graph.node})
        size = os.path.getsize(onnx_path)
        for suffix in (".input.npy", ".expected.npy", ".onnx"):
            os.replace(os.path.join(work, stem + suffix), os.path.join(out_dir, stem + suffix))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    e = expected.numpy()
    print(f"{name}: {size / 1e6:.2f} MB, {len(m.graph.node)} nodes, "
          f"export {dt:.1f}s, output {tuple(e.shape)} "
          f"(range {e.min():.3g}..{e.max():.3g}, std {e.std():.3g})")
    print(f"  ops: {' '.join(ops)}")
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--models", default=",".join(MODELS),
                    help=f"comma-separated subset of: {','.join(MODELS)}")
    ap.add_argument("--skip-existing", action="store_true",
                    help="leave out a model whose three files are there already")
    ap.add_argument("--dynamic", action="store_true",
                    help="symbolic batch and image sides (sequence length): NAME.dynamic.onnx")
    args = ap.parse_args()
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        ap.error(f"unknown model(s): {', '.join(unknown)}")
    if args.skip_existing:
        names = [n for n in names if not all(
            os.path.isfile(os.path.join(args.out, n + (".dynamic" if args.dynamic else "") + suffix))
            for suffix in (".onnx", ".input.npy", ".expected.npy"))]
    torch.set_num_threads(2)
    os.makedirs(args.out, exist_ok=True)
    for name in names:
        export_one(name, args.out, args.dynamic)


if __name__ == "__main__":
    main()
