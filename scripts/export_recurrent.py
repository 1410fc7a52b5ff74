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
  vad_if     a streaming voice-activity detector as shipped ones are exported
             (torch.jit.script, opset 16): ONE If on an int64 scalar sample rate `sr`
             picks a Conv1d STFT front end (16000: n_fft 256, hop 128; else 8000:
             n_fft 128, hop 64; reflect-padded, magnitude, log, a 1x1 Conv1d to 64
             channels), then a Conv1d encoder, an LSTM whose state [2, batch, 64]
             (h and c stacked) is an input and an output, and a per-frame Conv1d +
             Sigmoid. Inputs input [batch, 1, samples], state, sr; outputs output
             [batch, frames], stateN; batch and samples symbolic.
  gru_decode greedy decoding (torch.jit.script, opset 16): a Loop of at most
             `max_len` (int64 scalar) iterations over a one-layer GRU decoder
             (embedding 16 -> 32, hidden 64, Linear to 16 tokens) from the state `h`
             [1, 1, 64]; each iteration feeds back its argmax token and the loop stops
             early when it makes the end token 1. Outputs tokens [n], scores [n, 16]
             (log-softmax), h_last; n grows by one per iteration. Checked by CTest
             control_flow_models (tests/control_flow/check_control_flow.py).

Seeded random weights, opset 14 (vad_if: 16). For each model NAME it writes DIR/NAME.onnx and, per
size label S, DIR/NAME.S.<input>.npy for every input and DIR/NAME.S.<output>.npy with
PyTorch's outputs. The size `stream` of vad_lstm and gru_stream is one frame of 512
samples (15 LSTM steps) at batch 1 with zero state (vad_if: 512 samples at 16 kHz, 4
LSTM steps). Each stream S of STREAMS (`stream5` for all three; vad_if also at 1024
samples and at 8 kHz with 256 and 512) runs five frames one after the other with the
state fed back, from the zero state of size `stream`: DIR/NAME.S.frames.npy holds the
five frames, DIR/NAME.S.<input>.npy the other inputs (vad_if's sr) and
DIR/NAME.S.<output>.npy the fifth frame's outputs.

Usage: /usr/bin/python3 scripts/export_recurrent.py --out DIR [--models vad_lstm,...]
"""
import argparse
import math
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


class Stft(nn.Module):
    """A Conv1d STFT magnitude as streaming VADs compute it: reflect padding, one
    strided Conv1d whose filters are the Hann-windowed cosines and sines."""

    def __init__(self, n_fft, hop):
        super().__init__()
        self.pad = n_fft // 4
        self.bins = n_fft // 2 + 1
        n = torch.arange(n_fft, dtype=torch.float32)
        k = torch.arange(self.bins, dtype=torch.float32)
        window = 0.5 - 0.5 * torch.cos(2 * math.pi * n / n_fft)
        angle = 2 * math.pi * k[:, None] * n[None, :] / n_fft
        self.conv = nn.Conv1d(1, 2 * self.bins, n_fft, stride=hop, bias=False)
        with torch.no_grad():
            self.conv.weight.copy_((torch.cat([torch.cos(angle), -torch.sin(angle)], 0) * window)[:, None, :])

    def forward(self, x):
        s = self.conv(nn.functional.pad(x, [self.pad, self.pad], mode="reflect"))
        re, im = s[:, :self.bins], s[:, self.bins:]
        return torch.sqrt(re * re + im * im)


class SrBranch(nn.Module):
    """One sample rate's front end: STFT magnitude, log, a 1x1 Conv1d to 64 channels."""

    def __init__(self, n_fft, hop):
        super().__init__()
        self.stft = Stft(n_fft, hop)
        self.adapt = nn.Conv1d(n_fft // 2 + 1, 64, 1)

    def forward(self, x):
        return torch.relu(self.adapt(torch.log(self.stft(x) + 1e-3)))


class VadIf(nn.Module):
    def __init__(self):
        super().__init__()
        self.sr16k = SrBranch(256, 128)
        self.sr8k = SrBranch(128, 64)
        self.enc1 = nn.Conv1d(64, 64, 3, padding=1)
        self.enc2 = nn.Conv1d(64, 64, 3, padding=1)
        self.lstm = nn.LSTM(64, HIDDEN)
        self.head = nn.Conv1d(HIDDEN, 1, 1)

    def forward(self, x, state, sr):
        if bool(sr == 16000):
            f = self.sr16k(x)
        else:
            f = self.sr8k(x)
        f = torch.relu(self.enc2(torch.relu(self.enc1(f))))
        y, (h, c) = self.lstm(f.permute(2, 0, 1), (state[0:1], state[1:2]))
        out = torch.sigmoid(self.head(torch.relu(y.permute(1, 2, 0))))
        return out.flatten(1), torch.cat([h, c], 0)


class GruDecoder(nn.Module):
    """Greedy decoding over a GRU: token 0 starts, token 1 ends (scripted: the loop
    exports as Loop with its condition computed by the body)."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(16, 32)
        self.gru = nn.GRU(32, HIDDEN)
        self.out = nn.Linear(HIDDEN, 16)

    def forward(self, h, max_len):
        tok = torch.zeros(1, dtype=torch.long)
        toks = torch.zeros(0, dtype=torch.long)
        scores = torch.zeros(0, 16)
        for _ in range(int(max_len)):
            y, h = self.gru(self.emb(tok).unsqueeze(0), h)
            logits = self.out(y[0])
            tok = torch.argmax(logits, dim=1)
            toks = torch.cat([toks, tok])
            scores = torch.cat([scores, torch.log_softmax(logits, 1)], 0)
            if bool(tok[0] == 1):
                break
        return toks, scores, h


def decode_inputs(gen, max_len):
    return {"h": torch.randn(1, 1, HIDDEN, generator=gen).numpy(), "max_len": np.array(max_len, np.int64)}


def vad_if_inputs(gen, batch, samples, sr, random_state=False):
    x = (0.5 * torch.randn(batch, 1, samples, generator=gen)).numpy()
    state = (0.3 * torch.randn(2, batch, HIDDEN, generator=gen)).numpy() if random_state else \
        np.zeros((2, batch, HIDDEN), np.float32)
    return {"input": x, "state": state, "sr": np.array(sr, np.int64)}


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
    "vad_if": (VadIf, ["input", "state", "sr"], ["output", "stateN"],
               {"input": {0: "batch", 2: "samples"}, "state": {1: "batch"}, "output": {0: "batch", 1: "frames"},
                "stateN": {1: "batch"}},
               {"stream": lambda g: vad_if_inputs(g, 1, 512, 16000),
                "sr16k_b2": lambda g: vad_if_inputs(g, 2, 1024, 16000, True),
                "sr8k": lambda g: vad_if_inputs(g, 1, 256, 8000, True),
                "sr8k_b2": lambda g: vad_if_inputs(g, 2, 512, 8000, True)}),
    # greedy: stops at the end token after 13 iterations; max4: stops at max_len.
    "gru_decode": (GruDecoder, ["h", "max_len"], ["tokens", "scores", "h_last"], {},
                   {"greedy": lambda g: decode_inputs(torch.Generator().manual_seed(6), 32),
                    "max4": lambda g: decode_inputs(torch.Generator().manual_seed(11), 4)}),
}
STREAMING = {"vad_lstm": ("hn", "h", "cn", "c"), "gru_stream": ("hn", "h"),
             "vad_if": ("stateN", "state")}  # output -> input pairs
# Streams of five frames, state fed back: label -> (samples per frame, other inputs).
STREAMS = {"vad_lstm": {"stream5": (FRAME, {})}, "gru_stream": {"stream5": (FRAME, {})},
           "vad_if": {"stream5": (512, {"sr": 16000}), "sr16k_long5": (1024, {"sr": 16000}),
                      "sr8k5": (256, {"sr": 8000}), "sr8k_long5": (512, {"sr": 8000})}}
SCRIPTED = {"vad_if": 16, "gru_decode": 16}  # exported from torch.jit.script (control flow as If), at this opset


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
    torch.onnx.export(torch.jit.script(model) if name in SCRIPTED else model,
                      tuple(torch.from_numpy(first[n]) for n in in_names), path,
                      opset_version=SCRIPTED.get(name, 14), input_names=in_names, output_names=out_names,
                      dynamic_axes=axes)
    written = [path]
    for label, make in sizes.items():
        inputs = make(torch.Generator().manual_seed(sum(map(ord, label))))
        for n in in_names:
            np.save(os.path.join(out_dir, f"{name}.{label}.{n}.npy"), inputs[n])
        for n, v in zip(out_names, run_torch(model, inputs, in_names)):
            np.save(os.path.join(out_dir, f"{name}.{label}.{n}.npy"), v)
    for label, (samples, others) in STREAMS.get(name, {}).items():
        pairs = STREAMING[name]
        gen = torch.Generator().manual_seed(5 + sum(map(ord, label)))
        frames = (0.5 * torch.randn(5, 1, 1, samples, generator=gen)).numpy()
        np.save(os.path.join(out_dir, f"{name}.{label}.frames.npy"), frames)
        fixed = {k: np.array(v, np.int64) for k, v in others.items()}
        for k, v in fixed.items():
            np.save(os.path.join(out_dir, f"{name}.{label}.{k}.npy"), v)
        state = {pairs[i + 1]: np.load(os.path.join(out_dir, f"{name}.stream.{pairs[i + 1]}.npy"))
                 for i in range(0, len(pairs), 2)}
        for f in frames:
            outs = dict(zip(out_names, run_torch(model, dict(state, input=f, **fixed), in_names)))
            for i in range(0, len(pairs), 2):
                state[pairs[i + 1]] = outs[pairs[i]]
        for n, v in outs.items():
            np.save(os.path.join(out_dir, f"{name}.{label}.{n}.npy"), v)
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
