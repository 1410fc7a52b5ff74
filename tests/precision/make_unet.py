#!/usr/bin/python3
"""A small U-Net-style segmentation net (two levels, skip connections by Concat, a
ConvTranspose upsampler, a one-channel Sigmoid mask), exported from PyTorch with
symbolic height and width, as background-removal and medical segmentation models
ship. Seeded weights; writes OUT/unet.onnx and OUT/unet.input.npy (1x3x96x128).

  make_unet.py --out DIR
"""
import argparse
import os

import numpy as np
import torch
from torch import nn


def block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(cout, cout, 3, padding=1), nn.ReLU())


class UNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc1, self.enc2 = block(3, 16), block(16, 32)
        self.bottom = block(32, 64)
        self.up2, self.dec2 = nn.ConvTranspose2d(64, 32, 2, stride=2), block(64, 32)
        self.up1, self.dec1 = nn.ConvTranspose2d(32, 16, 2, stride=2), block(32, 16)
        self.head = nn.Conv2d(16, 1, 1)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(self.pool(e1))
        b = self.bottom(self.pool(e2))
        d2 = self.dec2(torch.cat([self.up2(b), e2], 1))
        d1 = self.dec1(torch.cat([self.up1(d2), e1], 1))
        return torch.sigmoid(self.head(d1))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(0)
    model = UNet().eval()
    x = torch.rand(1, 3, 96, 128)
    path = os.path.join(args.out, "unet.onnx")
    torch.onnx.export(model, x, path, input_names=["input"], output_names=["mask"], opset_version=13,
                      dynamic_axes={"input": {2: "height", 3: "width"}, "mask": {2: "height", 3: "width"}})
    np.save(os.path.join(args.out, "unet.input.npy"), x.numpy())
    print("wrote %s" % path)


if __name__ == "__main__":
    main()
