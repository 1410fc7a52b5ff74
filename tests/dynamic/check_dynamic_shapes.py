#!/usr/bin/python3
"""Models exported with dynamic axes run shape-polymorphic on oneDNN (CTest
`dynamic_shapes_pytorch`; docs/dynamic_shapes.md).

For each small PyTorch model it exports ONNX with symbolic batch and image sides
(or sequence length), compiles it once without --shape (`--backends
dnnl,ewise,host`), checks that `partita inspect` shows shape-polymorphic regions on
dnnl, then runs the one artifact at several input sizes and compares each output
with (a) the same model compiled with --shape fixed to that size (max|a-e|/max|e|
<= 1e-5) and (b) PyTorch (<= 1e-4).

Usage: check_dynamic_shapes.py PARTITA_BINARY WORK_DIR
"""
import os
import re
import subprocess
import sys

import numpy as np
import torch
import torch.nn as nn

FIXED_TOL = 1e-5
TORCH_TOL = 1e-4


class Cnn(nn.Module):
    """Conv/BN/Relu, a residual Add, MaxPool, Concat, AvgPool, global pool, Gemm."""

    def __init__(self):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16)
        self.c2, self.b2 = nn.Conv2d(16, 16, 3, padding=1), nn.BatchNorm2d(16)
        self.c3 = nn.Conv2d(16, 8, 1)
        self.fc = nn.Linear(24, 10)

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        y = torch.relu(self.b2(self.c2(y)) + y)
        y = nn.functional.max_pool2d(y, 2)
        z = self.c3(y)
        y = torch.cat([z, torch.sigmoid(z) * 2.0 + 0.5, nn.functional.avg_pool2d(z, 3, 1, 1)], 1)
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1))


class Downsample(nn.Module):
    """A ResNet basic block that halves the sides (strided Conv, strided 1x1
    shortcut: a residual Add of two Conv outputs whose sizes are unknown until run
    time), a ConvTranspose back up, Softmax over channels."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(4, 12, 3, stride=2, padding=1)
        self.bn = nn.BatchNorm2d(12)
        self.b = nn.Conv2d(12, 12, 3, padding=1)
        self.short = nn.Conv2d(4, 12, 1, stride=2)
        self.up = nn.ConvTranspose2d(12, 6, 2, stride=2)

    def forward(self, x):
        y = torch.relu(self.bn(self.a(x)))
        y = torch.relu(self.b(y) + self.short(x))
        return torch.softmax(self.up(y), 1)


class Sequence(nn.Module):
    """Linear, GELU, LayerNorm over [batch, sequence, 32]; then heads split with a
    view computed from x.shape (Shape, Gather, Concat, Reshape: the Reshape stays on
    the host, what follows it goes to oneDNN), Softmax per head, merged back, Linear."""

    def __init__(self):
        super().__init__()
        self.l1, self.norm, self.l2 = nn.Linear(32, 64), nn.LayerNorm(64), nn.Linear(64, 16)

    def forward(self, x):
        y = self.norm(nn.functional.gelu(self.l1(x)))
        b, t = x.shape[0], x.shape[1]
        heads = torch.softmax(y.view(b, t, 4, 16).transpose(1, 2), -1)
        return self.l2(heads.transpose(1, 2).reshape(b, t, 64))


# name -> (model, export input shape, symbolic input axes, output axes, opset, run shapes)
MODELS = {
    "cnn": (Cnn, (2, 3, 32, 40), {0: "batch", 2: "height", 3: "width"}, {0: "batch"}, 13,
            [(1, 3, 32, 40), (3, 3, 17, 23), (2, 3, 64, 48)]),
    "downsample": (Downsample, (1, 4, 16, 16), {0: "batch", 2: "height", 3: "width"},
                   {0: "batch", 2: "h", 3: "w"}, 13, [(1, 4, 16, 16), (2, 4, 30, 22), (1, 4, 64, 80)]),
    "sequence": (Sequence, (2, 7, 32), {0: "batch", 1: "sequence"}, {0: "batch", 1: "sequence"}, 17,
                 [(1, 5, 32), (4, 33, 32), (2, 128, 32)]),
}


def randomise(model, gen):
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.copy_(0.2 * torch.randn(m.num_features, generator=gen))
                m.running_var.copy_(0.5 + torch.rand(m.num_features, generator=gen))
                m.weight.copy_(0.5 + torch.rand(m.num_features, generator=gen))
                m.bias.copy_(0.2 * torch.randn(m.num_features, generator=gen))


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"FAILED: {' '.join(cmd)}\n{r.stdout}{r.stderr}")
    return r.stdout


def relative(a, e):
    if a.shape != e.shape:
        return float("inf")
    return float(np.abs(a - e).max() / max(np.abs(e).max(), 1e-30))


def main():
    partita, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    torch.manual_seed(0)
    torch.set_num_threads(2)
    failures = []
    for name, (ctor, export_shape, in_axes, out_axes, opset, shapes) in MODELS.items():
        model = ctor().eval()
        randomise(model, torch.Generator().manual_seed(1))
        onnx_path = os.path.join(work, f"{name}.onnx")
        torch.onnx.export(model, torch.randn(export_shape), onnx_path, opset_version=opset,
                          input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": in_axes, "y": out_axes})
        pta = os.path.join(work, f"{name}.pta")
        run([partita, "compile", onnx_path, "-o", pta, "--backends", "dnnl,ewise,host"])
        inspect = run([partita, "inspect", pta])
        partition = re.search(r"^partition: .*$", inspect, re.M).group(0)
        print(f"{name}: {partition}")
        if not re.search(r"on dnnl \([0-9]+ nodes, [0-9]+ shape-polymorphic\)", partition):
            failures.append(f"{name}: no shape-polymorphic dnnl region: {partition}")
        if "shape-polymorphic: x float32[" not in inspect:
            failures.append(f"{name}: inspect does not show the symbolic input")
        for i, shape in enumerate(shapes):
            x = np.random.RandomState(i).randn(*shape).astype(np.float32)
            x_path = os.path.join(work, f"{name}.x{i}.npy")
            np.save(x_path, x)
            out_dir = os.path.join(work, f"{name}.poly{i}")
            run([partita, "run", pta, "-i", f"x={x_path}", "-o", out_dir, "-q"])
            got = np.load(os.path.join(out_dir, "y.npy"))
            fixed_pta = os.path.join(work, f"{name}.fixed{i}.pta")
            run([partita, "compile", onnx_path, "-o", fixed_pta, "--backends", "dnnl,ewise,host",
                 "--shape", "x=" + "x".join(map(str, shape))])
            fixed_dir = os.path.join(work, f"{name}.fixed{i}")
            run([partita, "run", fixed_pta, "-i", f"x={x_path}", "-o", fixed_dir, "-q"])
            fixed = np.load(os.path.join(fixed_dir, "y.npy"))
            with torch.no_grad():
                want = model(torch.from_numpy(x)).numpy()
            e_fixed, e_torch = relative(got, fixed), relative(got, want)
            ok = e_fixed <= FIXED_TOL and e_torch <= TORCH_TOL
            print(f"  {shape}: output {got.shape}, vs --shape artifact {e_fixed:.2e}, vs PyTorch {e_torch:.2e}"
                  f"{'' if ok else '  FAIL'}")
            if not ok:
                failures.append(f"{name} at {shape}: {e_fixed:.2e} / {e_torch:.2e}")
    if failures:
        print("\n".join(failures))
        sys.exit(1)
    print("all outputs agree")


if __name__ == "__main__":
    main()
