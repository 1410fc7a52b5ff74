#!/usr/bin/python3
"""Export models shaped like the ones people ship, with symbolic dims, to ONNX.

Third-party OCR, audio and vision models declare their batch, image or clip sizes as
symbolic dims, because the size varies per request. These stand-ins (PyTorch 1.13,
opset 13, seeded random weights, BatchNorm statistics randomised) are exported the
same way, with `dynamic_axes`, and each comes with inputs at the sizes real
deployments use and PyTorch's outputs for them:

  ocr_det       MobileNetV3-small backbone + FPN neck (1x1 laterals, nearest 2x
                Resize + Add, 3x3 smoothing) + DB-style head (two ConvTranspose 2x2
                stride 2 upsamplers), input [batch, 3, height, width]: 640x640, 960x544
  ocr_rec       text recognizer: a conv stack that folds the 48-pixel height away,
                two attention blocks over the columns, a per-column classifier;
                input [batch, 3, 48, width]: widths 160, 320, 640
  audio_mel     1-D conv audio front end: STFT as a Conv1d of windowed cos/sin
                kernels (n_fft 400, hop 160), power, MatMul with an 80-band mel
                matrix, log; input [batch, samples]: 1 s and 2 s at 16 kHz
  kws_cnn       keyword-spotting embedding CNN: two conv branches with LeakyRelu
                joined by an elementwise Max, MaxPool, global pooling, a linear
                embedding; input [batch, 1, frames, 32]: 76 and 152 frames
  shufflenet_v2 torchvision ShuffleNetV2 x1.0 (channel shuffle: Reshape, Transpose,
                Reshape), input [batch, 3, height, width]: 224x224 and 320x320

For each model NAME it writes DIR/NAME.onnx and, per size S (a label such as
`640x640`, `b8`), DIR/NAME.S.input.npy and DIR/NAME.S.expected.npy. The input is
named "input" and the output "output". `--sizes` lists the labels.

Usage: /usr/bin/python3 scripts/export_shipped.py --out DIR [--models ocr_det,...]
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision


def conv_bn(cin, cout, k=3, stride=1, act=nn.ReLU):
    layers = [nn.Conv2d(cin, cout, k, stride, k // 2, bias=False), nn.BatchNorm2d(cout)]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


class OcrDetector(nn.Module):
    """DBNet-style text detector on a MobileNetV3-small backbone."""

    def __init__(self, neck=96):
        super().__init__()
        self.features = torchvision.models.mobilenet_v3_small(weights=None).features
        # Stages whose outputs are at strides 8, 16 and 32 (channels 24, 48, 96).
        self.taps = (3, 8, 11)
        chans = (24, 48, 96)
        self.lateral = nn.ModuleList(nn.Conv2d(c, neck, 1) for c in chans)
        inner = neck // 4
        self.smooth = nn.ModuleList(conv_bn(neck, inner, 3) for _ in chans)
        self.head = nn.Sequential(
            conv_bn(3 * inner, inner, 3),
            nn.ConvTranspose2d(inner, inner, 2, 2), nn.BatchNorm2d(inner), nn.ReLU(),
            nn.ConvTranspose2d(inner, 1, 2, 2), nn.Sigmoid())

    def forward(self, x):
        feats = []
        for i, f in enumerate(self.features):
            x = f(x)
            if i in self.taps:
                feats.append(x)
        lat = [l(f) for l, f in zip(self.lateral, feats)]
        p5 = lat[2]
        p4 = lat[1] + F.interpolate(p5, scale_factor=2.0, mode="nearest")
        p3 = lat[0] + F.interpolate(p4, scale_factor=2.0, mode="nearest")
        s3 = self.smooth[0](p3)
        s4 = F.interpolate(self.smooth[1](p4), scale_factor=2.0, mode="nearest")
        s5 = F.interpolate(self.smooth[2](p5), scale_factor=4.0, mode="nearest")
        return self.head(torch.cat([s3, s4, s5], 1))


class TextRecognizer(nn.Module):
    """CRNN-style recognizer with attention instead of the LSTM: [B, 3, 48, W] ->
    [B, W/4, classes]."""

    def __init__(self, hidden=128, classes=97):
        super().__init__()
        self.cnn = nn.Sequential(
            conv_bn(3, 32, 3, (2, 2)), conv_bn(32, 64, 3, (2, 2)),   # 12 x W/4
            conv_bn(64, 96, 3, (2, 1)), conv_bn(96, 96, 3, (2, 1)),  # 3 x W/4
            conv_bn(96, hidden, 3, (3, 1)))                           # 1 x W/4
        layer = nn.TransformerEncoderLayer(hidden, 4, dim_feedforward=2 * hidden, dropout=0.0,
                                           activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.fc = nn.Linear(hidden, classes)

    def forward(self, x):
        f = self.cnn(x)                      # [B, C, 1, T]
        f = f.squeeze(2).permute(0, 2, 1)    # [B, T, C]
        return self.fc(self.encoder(f)).softmax(-1)


class AudioMel(nn.Module):
    """Log-mel spectrogram with the STFT as a convolution: [B, samples] -> [B, frames, 80]."""

    def __init__(self, n_fft=400, hop=160, mels=80, rate=16000):
        super().__init__()
        bins = n_fft // 2 + 1
        n = torch.arange(n_fft, dtype=torch.float64)
        window = 0.5 - 0.5 * torch.cos(2 * math.pi * n / n_fft)
        k = torch.arange(bins, dtype=torch.float64)[:, None]
        angle = 2 * math.pi * k * n[None, :] / n_fft
        kernels = torch.cat([torch.cos(angle) * window, -torch.sin(angle) * window]).float()
        self.stft = nn.Conv1d(1, 2 * bins, n_fft, hop, bias=False)
        self.stft.weight.data.copy_(kernels[:, None, :])
        self.bins = bins
        self.register_buffer("mel", torch.from_numpy(mel_matrix(bins, mels, rate)))

    def forward(self, x):
        s = self.stft(x[:, None, :])              # [B, 2*bins, frames]
        re, im = s[:, :self.bins], s[:, self.bins:]
        power = (re * re + im * im).transpose(1, 2)  # [B, frames, bins]
        return torch.log(torch.matmul(power, self.mel) + 1e-6)


def mel_matrix(bins, mels, rate):
    """HTK-style triangular mel filters [bins, mels]."""
    def hz_to_mel(f):
        return 2595.0 * np.log10(1.0 + f / 700.0)
    edges = 700.0 * (10 ** (np.linspace(hz_to_mel(0), hz_to_mel(rate / 2), mels + 2) / 2595.0) - 1.0)
    freqs = np.linspace(0, rate / 2, bins)
    m = np.zeros((bins, mels), np.float32)
    for j in range(mels):
        lo, c, hi = edges[j], edges[j + 1], edges[j + 2]
        m[:, j] = np.clip(np.minimum((freqs - lo) / (c - lo), (hi - freqs) / (hi - c)), 0, None)
    return m


class KwsCnn(nn.Module):
    """Wake-word embedding CNN: [B, 1, frames, 32] -> [B, 96]."""

    def __init__(self):
        super().__init__()
        self.a = nn.Sequential(nn.Conv2d(1, 32, 3, 1, 1), nn.LeakyReLU(0.2))
        self.b = nn.Sequential(nn.Conv2d(1, 32, (5, 1), 1, (2, 0)), nn.LeakyReLU(0.2))
        self.body = nn.Sequential(
            nn.MaxPool2d(2), nn.Conv2d(32, 64, 3, 1, 1), nn.LeakyReLU(0.2),
            nn.MaxPool2d(2), nn.Conv2d(64, 96, 3, 1, 1), nn.LeakyReLU(0.2))
        self.fc = nn.Linear(96, 96)

    def forward(self, x):
        y = self.body(torch.maximum(self.a(x), self.b(x)))
        return self.fc(y.mean((2, 3)))


def shufflenet():
    return torchvision.models.shufflenet_v2_x1_0(weights=None)


# name -> (constructor, symbolic dims per input axis (None: fixed), {size label: input shape})
MODELS = {
    "ocr_det": (OcrDetector, ["batch", None, "height", "width"],
                {"640x640": (1, 3, 640, 640), "960x544": (1, 3, 544, 960)}),
    "ocr_rec": (TextRecognizer, ["batch", None, None, "width"],
                {"w160": (1, 3, 48, 160), "w320": (1, 3, 48, 320), "w640": (1, 3, 48, 640)}),
    "audio_mel": (AudioMel, ["batch", "samples"], {"1s": (1, 16000), "2s": (1, 32000)}),
    "kws_cnn": (KwsCnn, ["batch", None, "frames", None],
                {"76": (1, 1, 76, 32), "152": (1, 1, 152, 32), "76b8": (8, 1, 76, 32)}),
    "shufflenet_v2": (shufflenet, ["batch", None, "height", "width"],
                      {"224": (1, 3, 224, 224), "320": (1, 3, 320, 320), "224b8": (8, 3, 224, 224)}),
}


def randomise(model, gen):
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            n = m.num_features
            m.running_mean.copy_(0.1 * torch.randn(n, generator=gen))
            m.running_var.copy_(0.75 + 0.5 * torch.rand(n, generator=gen))
            m.weight.copy_(0.75 + 0.5 * torch.rand(n, generator=gen))
            m.bias.copy_(0.1 * torch.randn(n, generator=gen))


def export_one(name, out_dir):
    import onnx

    ctor, axes, sizes = MODELS[name]
    torch.manual_seed(0)
    model = ctor()
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        randomise(model, gen)
    model.eval()
    first = next(iter(sizes.values()))
    x0 = torch.randn(first, generator=gen)
    path = os.path.join(out_dir, f"{name}.onnx")
    t0 = time.time()
    dyn = {i: a for i, a in enumerate(axes) if a}
    torch.onnx.export(model, x0, path, opset_version=13, input_names=["input"], output_names=["output"],
                      dynamic_axes={"input": dyn}, do_constant_folding=True,
                      training=torch.onnx.TrainingMode.EVAL)
    m = onnx.load(path)
    onnx.checker.check_model(m)
    dims = [d.dim_param or d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
    print(f"{name}: {os.path.getsize(path) / 1e6:.2f} MB, {len(m.graph.node)} nodes, input {dims}, "
          f"export {time.time() - t0:.1f}s")
    print(f"  ops: {' '.join(sorted({n.op_type for n in m.graph.node}))}")
    for label, shape in sizes.items():
        x = torch.randn(shape, generator=gen)
        with torch.no_grad():
            y = model(x)
        np.save(os.path.join(out_dir, f"{name}.{label}.input.npy"), x.numpy().astype(np.float32))
        np.save(os.path.join(out_dir, f"{name}.{label}.expected.npy"), y.numpy().astype(np.float32))
        print(f"  {label}: input {tuple(shape)} -> output {tuple(y.shape)}")
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--sizes", action="store_true", help="print {model: [size labels]} as JSON and exit")
    args = ap.parse_args()
    if args.sizes:
        print(json.dumps({k: list(v[2]) for k, v in MODELS.items()}))
        return
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        ap.error("unknown model(s): " + ", ".join(unknown))
    torch.set_num_threads(2)
    os.makedirs(args.out, exist_ok=True)
    for n in names:
        export_one(n, args.out)


if __name__ == "__main__":
    main()
