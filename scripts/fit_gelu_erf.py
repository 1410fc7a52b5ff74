#!/usr/bin/python3
"""Coefficients of the piecewise erf of the dnnl backend's bias_gelu kernel
(src/backend/dnnl/dnnl_kernels.cpp, kGeluErf*).

erf(u) for u >= 0 is read off 16 pieces in s = u * R: piece k (k = round(s)) is a
polynomial of degree 4 in t = s - k, t in [-1/2, 1/2] (piece 0: t in [0, 1/2] and no
constant term, so that erf(0) = 0), fitted to erf by least squares reweighted towards the
minimax (Lawson). Piece 15 is the constant 1: from u = 14.5 / R = 3.93 on, 1 - erf(u) <
2.6e-8, under half a unit in the last place of 1 (float32's erf is 1 there). The
kernel clamps s below 15.5 so that round(s) stays a piece.

Prints the C++ arrays and the largest |error| of their float32 Horner evaluation on a
fine grid (2.4e-7 for R = 3.69; GELU's error is half of it times |v|, within the
kernel's tested bound 2^-21 |v|). Usage: scripts/fit_gelu_erf.py [R]
"""
import math
import sys

import numpy as np

R = float(sys.argv[1]) if len(sys.argv) > 1 else 3.69
DEGREE = 4
PIECES = 16


def fit(k):
    lo, hi = (0.0, 0.5) if k == 0 else (-0.5, 0.5)
    t = lo + (hi - lo) * (np.cos(np.linspace(0, np.pi, 3000)) + 1) / 2  # Chebyshev-spaced
    y = np.array([math.erf((k + x) / R) for x in t])
    first = 1 if k == 0 else 0  # piece 0: no constant term
    v = np.vander(t, DEGREE + 1, increasing=True)[:, first:]
    c = np.linalg.lstsq(v, y, rcond=None)[0]
    w = np.ones_like(t)
    for _ in range(60):  # Lawson: weight by the error so far, towards equal ripples
        w = w * np.abs(v @ c - y) + 1e-300
        w /= w.sum()
        c = np.linalg.lstsq(v * np.sqrt(w)[:, None], y * np.sqrt(w), rcond=None)[0]
    if first:
        c = np.concatenate([[0.0], c])
    return c.astype(np.float32), lo, hi


def horner32(c, t):
    p = np.full_like(t, c[-1])
    for j in range(len(c) - 2, -1, -1):
        p = (p * t + c[j]).astype(np.float32)
    return p


def main():
    pieces, worst = [], 1 - math.erf(14.5 / R)
    for k in range(PIECES - 1):
        c, lo, hi = fit(k)
        t = np.linspace(lo, hi, 20001).astype(np.float32)
        exact = np.array([math.erf((k + float(x)) / R) for x in t])
        worst = max(worst, float(np.max(np.abs(horner32(c, t).astype(np.float64) - exact))))
        pieces.append(c)
    pieces.append(np.array([1.0] + [0.0] * DEGREE, dtype=np.float32))
    print("// R = %r, degree %d: largest |erf error| %.3g (float32 Horner on a grid)" % (R, DEGREE, worst))
    for j in range(DEGREE + 1):
        print("constexpr float kGeluErfC%d[%d] = {%s};" % (j, PIECES, ", ".join("%.9ef" % p[j] for p in pieces)))


if __name__ == "__main__":
    main()
