#!/usr/bin/env python3
"""Compare two .npy arrays: compare_npy.py ACTUAL.npy EXPECTED.npy [--rtol R] [--atol A]

Prints max abs error, max elementwise relative error |a-e| / max(|e|, tiny) and
the "largest relative error" max|a-e| / max|e|. Exits 1 unless
np.allclose(actual, expected, rtol, atol) holds (and shapes match).
"""
import argparse
import sys

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("actual")
    ap.add_argument("expected")
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--atol", type=float, default=1e-5)
    ap.add_argument("--largest-rel", type=float, default=None,
                    help="instead of allclose, require max|a-e| / max|e| <= this")
    args = ap.parse_args()

    a = np.load(args.actual)
    e = np.load(args.expected)
    if a.shape != e.shape:
        print(f"shape mismatch: actual {a.shape} vs expected {e.shape}")
        return 1
    a64, e64 = a.astype(np.float64), e.astype(np.float64)
    diff = np.abs(a64 - e64)
    tiny = np.finfo(np.float32).tiny
    max_abs = diff.max() if diff.size else 0.0
    max_rel = (diff / np.maximum(np.abs(e64), tiny)).max() if diff.size else 0.0
    max_e = np.abs(e64).max() if diff.size else 0.0
    largest_rel = max_abs / max(max_e, tiny)
    if args.largest_rel is not None:
        ok = bool(largest_rel <= args.largest_rel)
        print(f"shape {a.shape} actual {a.dtype} expected {e.dtype}")
        print(f"max abs error:          {max_abs:.6g}")
        print(f"largest relative error: {largest_rel:.6g}  (max|a-e| / max|e|; limit {args.largest_rel})")
        print("OK" if ok else "FAIL")
        return 0 if ok else 1
    ok = np.allclose(a64, e64, rtol=args.rtol, atol=args.atol)
    print(f"shape {a.shape} actual {a.dtype} expected {e.dtype}")
    print(f"max abs error:          {max_abs:.6g}")
    print(f"max relative error:     {max_rel:.6g}")
    print(f"largest relative error: {largest_rel:.6g}  (max|a-e| / max|e|)")
    if not ok:
        bad = ~np.isclose(a64, e64, rtol=args.rtol, atol=args.atol)
        idx = np.unravel_index(np.argmax(np.where(bad, diff, -1)), a.shape)
        print(f"FAIL: {bad.sum()}/{a.size} elements outside rtol={args.rtol} "
              f"atol={args.atol}; worst at {idx}: actual {a[idx]!r} expected {e[idx]!r}")
    else:
        print(f"OK (rtol={args.rtol}, atol={args.atol})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
