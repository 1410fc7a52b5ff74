#!/usr/bin/env python3
"""Train a small CNN on Fashion-MNIST and export it to ONNX (opset 13).

Data: Debian package dataset-fashion-mnist (/usr/share/datasets/fashion-mnist).
Outputs (next to this script unless --out is given):
  fashion_cnn.onnx       input "input" float32 [100,1,28,28] in [0,1], output "logits" [100,10]
  test_images.npy        float32 [100,1,28,28], first 100 t10k images / 255
  test_labels.npy        int64 [100]
  expected_logits.npy    float32 [100,10], torch eval-mode output on test_images
  classes.txt            class names in label order
"""
import argparse
import gzip
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

DATA_DIR = "/usr/share/datasets/fashion-mnist"
CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
           "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"]
BATCH = 100  # fixed batch size of the exported model
MEAN, STD = 0.2860, 0.3530  # Fashion-MNIST training-set pixel statistics


def read_idx(path):
    """Parse a gzipped IDX file into a numpy array."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    if data[0] != 0 or data[1] != 0:
        raise ValueError(f"{path}: bad IDX magic")
    dtype = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4",
             0x0D: ">f4", 0x0E: ">f8"}[data[2]]
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    arr = np.frombuffer(data, dtype=dtype, offset=4 + 4 * ndim)
    return arr.reshape(dims)


def load_split(prefix):
    images = read_idx(os.path.join(DATA_DIR, f"{prefix}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(DATA_DIR, f"{prefix}-labels-idx1-ubyte.gz"))
    x = (images.astype(np.float32) / 255.0)[:, None, :, :]
    y = labels.astype(np.int64)
    return x, y


class FashionCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.tensor(MEAN))
        self.register_buffer("std", torch.tensor(STD))
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.bn2 = nn.BatchNorm2d(32)
        self.fc1 = nn.Linear(32 * 7 * 7, 128)
        self.drop = nn.Dropout(0.3)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = (x - self.mean) / self.std  # normalisation lives inside the model
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        x = torch.flatten(x, 1)
        x = self.drop(F.relu(self.fc1(x)))
        return self.fc2(x)


@torch.no_grad()
def accuracy(model, x, y, bs=1000):
    model.eval()
    correct = 0
    for i in range(0, len(x), bs):
        correct += (model(x[i:i + bs]).argmax(1) == y[i:i + bs]).sum().item()
    return correct / len(x)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--lr", type=float, default=2e-3)
    args = ap.parse_args()

    torch.manual_seed(0)
    np.random.seed(0)
    torch.set_num_threads(2)

    x_train, y_train = load_split("train")
    x_test, y_test = load_split("t10k")
    print(f"train {x_train.shape}, test {x_test.shape}")
    xt, yt = torch.from_numpy(x_train), torch.from_numpy(y_train)
    xv, yv = torch.from_numpy(x_test), torch.from_numpy(y_test)

    model = FashionCNN()
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    steps_per_epoch = (len(xt) + args.batch_size - 1) // args.batch_size
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=args.lr, total_steps=args.epochs * steps_per_epoch)
    rng = np.random.default_rng(0)

    t0 = time.time()
    for epoch in range(args.epochs):
        model.train()
        perm = torch.from_numpy(rng.permutation(len(xt)))
        total_loss = 0.0
        for i in range(0, len(xt), args.batch_size):
            idx = perm[i:i + args.batch_size]
            loss = F.cross_entropy(model(xt[idx]), yt[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total_loss += loss.item() * len(idx)
        print(f"epoch {epoch + 1}/{args.epochs}: loss {total_loss / len(xt):.4f}, "
              f"test acc {accuracy(model, xv, yv):.4f}, {time.time() - t0:.0f}s")

    model.eval()
    full_acc = accuracy(model, xv, yv)
    images = x_test[:BATCH].copy()
    labels = y_test[:BATCH].copy()
    with torch.no_grad():
        logits = model(torch.from_numpy(images)).numpy().astype(np.float32)
    acc100 = float((logits.argmax(1) == labels).mean())
    print(f"full test-set accuracy: {full_acc:.4f} ({len(xv)} images)")
    print(f"accuracy on first {BATCH}: {acc100:.4f}")

    os.makedirs(args.out, exist_ok=True)
    onnx_path = os.path.join(args.out, "fashion_cnn.onnx")
    torch.onnx.export(model, torch.from_numpy(images), onnx_path,
                      opset_version=13, input_names=["input"],
                      output_names=["logits"], do_constant_folding=True)
    np.save(os.path.join(args.out, "test_images.npy"), images.astype(np.float32))
    np.save(os.path.join(args.out, "test_labels.npy"), labels.astype(np.int64))
    np.save(os.path.join(args.out, "expected_logits.npy"), logits)
    with open(os.path.join(args.out, "classes.txt"), "w") as f:
        f.write("\n".join(CLASSES) + "\n")

    import onnx
    m = onnx.load(onnx_path)
    onnx.checker.check_model(m)
    ops = sorted({n.op_type for n in m.graph.node})
    print(f"wrote {onnx_path}: {os.path.getsize(onnx_path)} bytes, "
          f"{len(m.graph.node)} nodes, ops {ops}")


if __name__ == "__main__":
    main()
