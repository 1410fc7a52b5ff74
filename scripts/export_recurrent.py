#!/usr/bin/python3
"""Export small recurrent models from PyTorch to ONNX (LSTM, GRU, RNN nodes).

  vad_lstm   a streaming voice-activity-style detector: a Conv1d front end over raw
             samples (frame 64, hop 32, then a 3-tap Conv1d), a one-layer LSTM whose
             state (h, c) is an input and an output of every call, a per-frame
             Linear + Sigmoid. Inputs input [batch, 1, samples], h [1, batch, 64],
             c [1, batch, 64]; outputs output [batch, frames, 1], hn, cn; batch and
             samples symbolic.
  gru_stream the same front end with a batch-first one-layer GRU (PyTorch exports
             linear_before_reset=1 and a Transpose), state h in and out.
  bigru      two bidirectional GRU layers over [batch, sequence, 24] (symbolic),
             outputs the last layer's sequence and the final states.
  rnn_relu   a two-layer Elman RNN with ReLU over [sequence, batch, 16], initial
             state an input.

Seeded random weights, opset 14. For each model NAME it writes DIR/NAME.onnx and, per
size label S, DIR/NAME.S.<input>.npy for every input and DIR/NAME.S.<output>.npy with
PyTorch's outputs. The size `stream` of vad_lstm and gru_stream is one frame of 512
samples (15 LSTM steps) at batch 1 with zero state; `stream5` adds the outputs of
five such frames run one after the other with the state fed back
(DIR/NAME.stream5.frames.npy holds the five frames, DIR/NAME.stream5.<output>.npy the
fifth frame's outputs).

Usage: /usr/bin/python3 scripts/export_recurrent.py --out DIR [--models vad_lstm,...]
"""
import argparse
import os

import numpy as np
import torch
import torch.nn as nn

HIDDEN = 64
FRAME = 512


class FrontEnd(nn.Module):
    """Raw samples -> [batch, 48, frames]: a strided Conv1d (frame 64, hop 32), ReLU,
    a 3-tap Conv1d, ReLU."""

    def __init__(self, channels=48):
        super().__init__()
        self.frame = nn.Conv1d(1, 32, 64, stride=32)
        self.mix = nn.Conv1d(32, channels, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.mix(torch.relu(self.frame(x))))


class VadLstm(nn.Module):
    def __init__(self):
        super().__init__()
        self.front = FrontEnd()
        self.lstm = nn.LSTM(48, HIDDEN)
        self.head = nn.Linear(HIDDEN, 1)

    def forward(self, x, h, c):
        f = self.front(x).permute(2, 0, 1)  # [frames, batch, 48]
        y, (hn, cn) = self.lstm(f, (h, c))
        return torch.sigmoid(self.head(y)).transpose(0, 1), hn, cn


class GruStream(nn.Module):
    def __init__(self):
        super().__init__()
        self.front = FrontEnd()
        self.gru = nn.GRU(48, HIDDEN, batch_first=True)
        self.head = nn.Linear(HIDDEN, 1)

    def forward(self, x, h):
        f = self.front(x).transpose(1, 2)  # [batch, frames, 48]
        y, hn = self.gru(f, h)
        return torch.sigmoid(self.head(y)), hn


class BiGru(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(24, 32, num_layers=2, bidirectional=True, batch_first=True)

    def forward(self, x):
        y, hn = self.gru(x)
        return y, hn


class RnnRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.RNN(16, 20, num_layers=2, nonlinearity="relu")

    def forward(self, x, h):
        y, hn = self.rnn(x, h)
        return y, hn


def stream_inputs(gen, batch, samples, states):
    x = (0.5 * torch.randn(batch, 1, samples, generator=gen)).numpy()
    out = {"input": x}
    for s in states:
        out[s] = np.zeros((1, batch, HIDDEN), np.float32)
    return out


# name -> (ctor, input names, output names, dynamic axes, sizes: label -> input maker)
MODELS = {
    "vad_lstm": (VadLstm, ["input", "h", "c"], ["output", "hn", "cn"],
                 {"input": {0: "batch", 2: "samples"}, "h": {1: "batch"}, "c": {1: "batch"},
                  "output": {0: "batch", 1: "frames"}, "hn": {1: "batch"}, "cn": {1: "batch"}},
                 {"stream": lambda g: stream_inputs(g, 1, FRAME, ["h", "c"]),
                  "b3": lambda g: stream_inputs(g, 3, 4000, ["h", "c"])}),
    "gru_stream": (GruStream, ["input", "h"], ["output", "hn"],
                   {"input": {0: "batch", 2: "samples"}, "h": {1: "batch"}, "output": {0: "batch", 1: "frames"},
                    "hn": {1: "batch"}},
                   {"stream": lambda g: stream_inputs(g, 1, FRAME, ["h"]),
                    "b2": lambda g: stream_inputs(g, 2, 3000, ["h"])}),
    "bigru": (BiGru, ["input"], ["output", "hn"],
              {"input": {0: "batch", 1: "sequence"}, "output": {0: "batch", 1: "sequence"}, "hn": {1: "batch"}},
              {"b1": lambda g: {"input": torch.randn(1, 9, 24, generator=g).numpy()},
               "b4": lambda g: {"input": torch.randn(4, 31, 24, generator=g).numpy()}}),
    "rnn_relu": (RnnRelu, ["input", "h"], ["output", "hn"],
                 {"input": {0: "sequence", 1: "batch"}, "h": {1: "batch"}, "output": {0: "sequence", 1: "batch"},
                  "hn": {1: "batch"}},
                 {"s7": lambda g: {"input": torch.randn(7, 2, 16, generator=g).numpy(),
                                   "h": torch.randn(2, 2, 20, generator=g).numpy()}}),
}
STREAMING = {"vad_lstm": ("hn", "h", "cn", "c"), "gru_stream": ("hn", "h")}  # output -> input pairs


def run_torch(model, inputs, names):
    with torch.no_grad():
        outs = model(*[torch.from_numpy(inputs[n]) for n in names])
    return [o.numpy() for o in outs]


def export_one(name, out_dir):
    ctor, in_names, out_names, axes, sizes = MODELS[name]
    torch.manual_seed(0)
    model = ctor().eval()
    gen = torch.Generator().manual_seed(1)
    first = next(iter(sizes.values()))(gen)
    path = os.path.join(out_dir, f"{name}.onnx")
    torch.onnx.export(model, tuple(torch.from_numpy(first[n]) for n in in_names), path, opset_version=14,
                      input_names=in_names, output_names=out_names, dynamic_axes=axes)
    written = [path]
    for label, make in sizes.items():
        inputs = make(torch.Generator().manual_seed(sum(map(ord, label))))
        for n in in_names:
            np.save(os.path.join(out_dir, f"{name}.{label}.{n}.npy"), inputs[n])
        for n, v in zip(out_names, run_torch(model, inputs, in_names)):
            np.save(os.path.join(out_dir, f"{name}.{label}.{n}.npy"), v)
    if name in STREAMING:
        pairs = STREAMING[name]
        gen = torch.Generator().manual_seed(5)
        frames = (0.5 * torch.randn(5, 1, 1, FRAME, generator=gen)).numpy()
        np.save(os.path.join(out_dir, f"{name}.stream5.frames.npy"), frames)
        state = {pairs[i + 1]: np.zeros((1, 1, HIDDEN), np.float32) for i in range(0, len(pairs), 2)}
        for f in frames:
            outs = dict(zip(out_names, run_torch(model, dict(state, input=f), in_names)))
            for i in range(0, len(pairs), 2):
                state[pairs[i + 1]] = outs[pairs[i]]
        for n, v in outs.items():
            np.save(os.path.join(out_dir, f"{name}.stream5.{n}.npy"), v)
    return written


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default=",".join(MODELS))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.set_num_threads(1)
    for name in args.models.split(","):
        for p in export_one(name, args.out):
            print(p)


if __name__ == "__main__":
    main()
