#!/usr/bin/python3
"""Hostile-input cases for counts, shapes and indices (issue 10, items 1, 3 and 5).

Each case builds a crafted ONNX model (and its input files) in a temporary folder and
names the partita command line that must fail on it: exit code 1, no signal, and a
message holding `expect_substring` (on stderr or stdout). The cases:
  - declared dims, --shape values, .npy headers and initializer dims too large for
    64-bit counts or for the tensor limits (2^40 bytes, rank 16);
  - ConstantOfShape, Tile, Range, Expand and Reshape producing such shapes, at compile
    time (constant folding) and at run time (shapes given as inputs);
  - runtime Expand to a negative dim, pads below zero;
  - value_info declaring an intermediate's type differently from what the node makes;
  - GatherElements (and other gather/scatter ops) with indices wider than the data;
  - an opset version of 2^62.

A runner (tests/hostile/) discovers CASES; alone:
  /usr/bin/python3 tests/hostile/cases_counts.py --partita build/bin/partita [-k NAME]
"""
import argparse
import os
import signal
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hostile  # noqa: E402  (the suite's Case)

BIG = 1 << 62  # 4611686018427387904: 2^62 elements of any dtype overflow a 64-bit byte count
F = TensorProto.FLOAT
I64 = TensorProto.INT64


def _save(tmpdir, name, nodes, inputs, outputs, initializers=(), value_info=(), opset=17):
    graph = helper.make_graph(nodes, name, inputs, outputs, list(initializers), value_info=list(value_info))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    path = os.path.join(tmpdir, name + ".onnx")
    with open(path, "wb") as f:
        f.write(model.SerializeToString())  # no checker: the models are hostile on purpose
    return path


def _ints(name, values):
    return numpy_helper.from_array(np.array(values, np.int64), name)


def _npy(tmpdir, name, array):
    path = os.path.join(tmpdir, name + ".npy")
    np.save(path, array)
    return path


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


# --- declared shapes and shape flags -------------------------------------------------

def declared_input_dim(tmpdir):
    m = _save(tmpdir, "declared_input_dim", [helper.make_node("Relu", ["x"], ["y"], name="relu")],
              [_vi("x", F, [BIG, 4])], [_vi("y", F, [BIG, 4])])
    return ["run", m]


def declared_input_rank(tmpdir):
    m = _save(tmpdir, "declared_input_rank", [helper.make_node("Relu", ["x"], ["y"], name="relu")],
              [_vi("x", F, [1] * 40)], [_vi("y", F, [1] * 40)])
    return ["compile", m, "-o", os.path.join(tmpdir, "out.pta")]


def shape_flag_huge(tmpdir):
    m = _save(tmpdir, "shape_flag_huge", [helper.make_node("Relu", ["x"], ["y"], name="relu")],
              [_vi("x", F, ["N", 4])], [_vi("y", F, ["N", 4])])
    return ["run", m, "--shape", "x=%dx4" % BIG]


def shape_flag_over_limit(tmpdir):
    # 2^40 elements of float32: counts fit in 64 bits, but the tensor is 4 TiB.
    m = _save(tmpdir, "shape_flag_over_limit", [helper.make_node("Relu", ["x"], ["y"], name="relu")],
              [_vi("x", F, ["N"])], [_vi("y", F, ["N"])])
    return ["compile", m, "--shape", "x=%d" % (1 << 40), "-o", os.path.join(tmpdir, "out.pta")]


def npy_header_huge(tmpdir):
    m = _save(tmpdir, "npy_header_huge", [helper.make_node("Relu", ["x"], ["y"], name="relu")],
              [_vi("x", F, ["N", 4])], [_vi("y", F, ["N", 4])])
    path = os.path.join(tmpdir, "x.npy")
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, 4), }" % BIG
    header += " " * (118 - len(header)) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() + b"\0" * 64)
    return ["run", m, "--input", "x=" + path]


def initializer_dims_overflow(tmpdir):
    # dims 2^62 x 4 of float32: the byte count wraps to 0, which the empty raw_data "matches".
    w = TensorProto()
    w.name = "w"
    w.data_type = F
    w.dims.extend([BIG, 4])
    w.raw_data = b""
    m = _save(tmpdir, "initializer_dims_overflow", [helper.make_node("Relu", ["w"], ["y"], name="relu")],
              [], [_vi("y", F, None)], [w])
    return ["compile", m, "-o", os.path.join(tmpdir, "out.pta")]


# --- ops producing huge shapes ---------------------------------------------------------

def constant_of_shape_folded(tmpdir):
    m = _save(tmpdir, "constant_of_shape_folded",
              [helper.make_node("ConstantOfShape", ["s"], ["y"], name="cos")],
              [], [_vi("y", F, None)], [_ints("s", [BIG, 4])])
    return ["compile", m, "-o", os.path.join(tmpdir, "out.pta")]


def constant_of_shape_runtime(tmpdir):
    m = _save(tmpdir, "constant_of_shape_runtime",
              [helper.make_node("ConstantOfShape", ["s"], ["y"], name="cos")],
              [_vi("s", I64, [2])], [_vi("y", F, None)])
    return ["run", m, "--input", "s=" + _npy(tmpdir, "s", np.array([BIG, 4], np.int64))]


def constant_of_shape_over_limit(tmpdir):
    m = _save(tmpdir, "constant_of_shape_over_limit",
              [helper.make_node("ConstantOfShape", ["s"], ["y"], name="cos")],
              [_vi("s", I64, [2])], [_vi("y", F, None)])
    return ["run", m, "--input", "s=" + _npy(tmpdir, "s", np.array([1 << 20, 1 << 20], np.int64))]


def tile_folded(tmpdir):
    m = _save(tmpdir, "tile_folded",
              [helper.make_node("Tile", ["x", "r"], ["y"], name="tile")],
              [_vi("x", F, [4])], [_vi("y", F, None)], [_ints("r", [BIG])])
    return ["compile", m, "-o", os.path.join(tmpdir, "out.pta")]


def tile_runtime(tmpdir):
    m = _save(tmpdir, "tile_runtime",
              [helper.make_node("Tile", ["x", "r"], ["y"], name="tile")],
              [_vi("x", F, [4, 2]), _vi("r", I64, [2])], [_vi("y", F, None)])
    return ["run", m, "--input", "x=" + _npy(tmpdir, "x", np.ones([4, 2], np.float32)),
            "--input", "r=" + _npy(tmpdir, "r", np.array([BIG, 2], np.int64))]


def range_folded(tmpdir):
    s = numpy_helper.from_array(np.array(0, np.int64), "start")
    l = numpy_helper.from_array(np.array(BIG, np.int64), "limit")
    d = numpy_helper.from_array(np.array(1, np.int64), "delta")
    m = _save(tmpdir, "range_folded",
              [helper.make_node("Range", ["start", "limit", "delta"], ["y"], name="range")],
              [], [_vi("y", I64, None)], [s, l, d])
    return ["compile", m, "-o", os.path.join(tmpdir, "out.pta")]


def range_runtime_overflow(tmpdir):
    # limit - start overflows int64.
    m = _save(tmpdir, "range_runtime_overflow",
              [helper.make_node("Range", ["start", "limit", "delta"], ["y"], name="range")],
              [_vi("start", I64, []), _vi("limit", I64, []), _vi("delta", I64, [])], [_vi("y", I64, None)])
    return ["run", m, "--input", "start=" + _npy(tmpdir, "start", np.array(-(1 << 63), np.int64)),
            "--input", "limit=" + _npy(tmpdir, "limit", np.array((1 << 63) - 1, np.int64)),
            "--input", "delta=" + _npy(tmpdir, "delta", np.array(1, np.int64))]


def expand_folded(tmpdir):
    m = _save(tmpdir, "expand_folded",
              [helper.make_node("Expand", ["x", "s"], ["y"], name="expand")],
              [_vi("x", F, [1])], [_vi("y", F, None)], [_ints("s", [BIG, 4])])
    return ["compile", m, "-o", os.path.join(tmpdir, "out.pta")]


def expand_runtime_huge(tmpdir):
    m = _save(tmpdir, "expand_runtime_huge",
              [helper.make_node("Expand", ["x", "s"], ["y"], name="expand")],
              [_vi("x", F, [1]), _vi("s", I64, [2])], [_vi("y", F, None)])
    return ["run", m, "--input", "x=" + _npy(tmpdir, "x", np.ones([1], np.float32)),
            "--input", "s=" + _npy(tmpdir, "s", np.array([BIG, 4], np.int64))]


def expand_runtime_negative(tmpdir):
    m = _save(tmpdir, "expand_runtime_negative",
              [helper.make_node("Expand", ["x", "s"], ["y"], name="expand")],
              [_vi("x", F, [3]), _vi("s", I64, [2])], [_vi("y", F, None)])
    return ["run", m, "--input", "x=" + _npy(tmpdir, "x", np.ones([3], np.float32)),
            "--input", "s=" + _npy(tmpdir, "s", np.array([-4, 3], np.int64))]


def reshape_overflow(tmpdir):
    # An empty input "matches" [2^62, 4] when the element count wraps to 0.
    m = _save(tmpdir, "reshape_overflow",
              [helper.make_node("Reshape", ["x", "s"], ["t"], name="reshape"),
               helper.make_node("Relu", ["t"], ["y"], name="relu")],
              [_vi("x", F, [0])], [_vi("y", F, None)], [_ints("s", [BIG, 4])])
    return ["run", m]


def reshape_runtime_overflow(tmpdir):
    m = _save(tmpdir, "reshape_runtime_overflow",
              [helper.make_node("Reshape", ["x", "s"], ["t"], name="reshape"),
               helper.make_node("Relu", ["t"], ["y"], name="relu")],
              [_vi("x", F, [0]), _vi("s", I64, [2])], [_vi("y", F, None)])
    return ["run", m, "--input", "x=" + _npy(tmpdir, "x", np.ones([0], np.float32)),
            "--input", "s=" + _npy(tmpdir, "s", np.array([BIG, 4], np.int64))]


def pad_negative(tmpdir):
    m = _save(tmpdir, "pad_negative",
              [helper.make_node("Pad", ["x", "p"], ["y"], name="pad")],
              [_vi("x", F, [2])], [_vi("y", F, None)], [_ints("p", [-2, -1])])
    return ["run", m]


def pad_runtime_negative(tmpdir):
    m = _save(tmpdir, "pad_runtime_negative",
              [helper.make_node("Pad", ["x", "p"], ["y"], name="pad")],
              [_vi("x", F, [2]), _vi("p", I64, [2])], [_vi("y", F, None)])
    return ["run", m, "--input", "x=" + _npy(tmpdir, "x", np.ones([2], np.float32)),
            "--input", "p=" + _npy(tmpdir, "p", np.array([-2, -1], np.int64))]


def pad_huge(tmpdir):
    m = _save(tmpdir, "pad_huge",
              [helper.make_node("Pad", ["x", "p"], ["y"], name="pad")],
              [_vi("x", F, [2])], [_vi("y", F, None)], [_ints("p", [(1 << 63) - 2, 1])])
    return ["run", m]


def concat_over_limit(tmpdir):
    # Each input keeps the limit (2^40 bytes); their concatenation does not.
    m = _save(tmpdir, "concat_over_limit",
              [helper.make_node("Concat", ["a", "b"], ["y"], name="concat", axis=0)],
              [_vi("a", TensorProto.UINT8, [1 << 40]), _vi("b", TensorProto.UINT8, [1])],
              [_vi("y", TensorProto.UINT8, None)])
    return ["compile", m, "-o", os.path.join(tmpdir, "out.pta")]


# --- declared types that lie -----------------------------------------------------------

def _lying_reshape(tmpdir, name, declared, x_len, shape):
    # t = Reshape(x, s) gets its real shape from the data (x is [N], s an input), but
    # value_info declares it `declared`; the static Relu after it was planned for that.
    m = _save(tmpdir, name,
              [helper.make_node("Reshape", ["x", "s"], ["t"], name="reshape"),
               helper.make_node("Relu", ["t"], ["y"], name="relu")],
              [_vi("x", F, ["N"]), _vi("s", I64, [2])], [_vi("y", F, declared)],
              value_info=[_vi("t", F, declared)])
    return ["run", m, "--input", "x=" + _npy(tmpdir, "x", np.ones([x_len], np.float32)),
            "--input", "s=" + _npy(tmpdir, "s", np.array(shape, np.int64))]


def value_info_larger(tmpdir):
    # Trusted, the Relu would read 16 floats from a 6-float tensor.
    return _lying_reshape(tmpdir, "value_info_larger", [4, 4], 6, [2, 3])


def value_info_smaller(tmpdir):
    # Trusted, the Relu would cut 64 floats to 2.
    return _lying_reshape(tmpdir, "value_info_smaller", [1, 2], 64, [8, 8])


def value_info_wrong_dtype(tmpdir):
    m = _save(tmpdir, "value_info_wrong_dtype",
              [helper.make_node("Relu", ["x"], ["t"], name="relu"),
               helper.make_node("Relu", ["t"], ["y"], name="relu2")],
              [_vi("x", F, [4])], [_vi("y", F, [4])], value_info=[_vi("t", TensorProto.DOUBLE, [4])])
    return ["compile", m, "-o", os.path.join(tmpdir, "out.pta")]


# --- index tensors ---------------------------------------------------------------------

def gather_elements_wide(tmpdir):
    # indices [2, 1000000] against data [2, 2] along axis 0: dim 1 is wider than the data's.
    m = _save(tmpdir, "gather_elements_wide",
              [helper.make_node("GatherElements", ["data", "idx"], ["y"], name="ge", axis=0)],
              [_vi("data", F, [2, 2]), _vi("idx", I64, [2, 1000000])], [_vi("y", F, [2, 1000000])])
    return ["run", m, "--input", "data=" + _npy(tmpdir, "data", np.ones([2, 2], np.float32)),
            "--input", "idx=" + _npy(tmpdir, "idx", np.zeros([2, 1000000], np.int64))]


def gather_elements_out_of_range(tmpdir):
    m = _save(tmpdir, "gather_elements_out_of_range",
              [helper.make_node("GatherElements", ["data", "idx"], ["y"], name="ge", axis=1)],
              [_vi("data", F, [2, 2]), _vi("idx", I64, [2, 2])], [_vi("y", F, [2, 2])])
    return ["run", m, "--input", "data=" + _npy(tmpdir, "data", np.ones([2, 2], np.float32)),
            "--input", "idx=" + _npy(tmpdir, "idx", np.array([[0, 1], [5, 0]], np.int64))]


def scatter_elements_wide(tmpdir):
    m = _save(tmpdir, "scatter_elements_wide",
              [helper.make_node("ScatterElements", ["data", "idx", "upd"], ["y"], name="se", axis=0)],
              [_vi("data", F, [2, 2]), _vi("idx", I64, [2, 8]), _vi("upd", F, [2, 8])], [_vi("y", F, [2, 2])])
    return ["run", m, "--input", "data=" + _npy(tmpdir, "data", np.ones([2, 2], np.float32)),
            "--input", "idx=" + _npy(tmpdir, "idx", np.zeros([2, 8], np.int64)),
            "--input", "upd=" + _npy(tmpdir, "upd", np.ones([2, 8], np.float32))]


def scatter_nd_bad_updates(tmpdir):
    m = _save(tmpdir, "scatter_nd_bad_updates",
              [helper.make_node("ScatterND", ["data", "idx", "upd"], ["y"], name="snd")],
              [_vi("data", F, [4, 4]), _vi("idx", I64, [2, 1]), _vi("upd", F, [8, 2])], [_vi("y", F, [4, 4])])
    return ["run", m, "--input", "data=" + _npy(tmpdir, "data", np.ones([4, 4], np.float32)),
            "--input", "idx=" + _npy(tmpdir, "idx", np.array([[0], [1]], np.int64)),
            "--input", "upd=" + _npy(tmpdir, "upd", np.ones([8, 2], np.float32))]


def gather_nd_out_of_range(tmpdir):
    m = _save(tmpdir, "gather_nd_out_of_range",
              [helper.make_node("GatherND", ["data", "idx"], ["y"], name="gnd")],
              [_vi("data", F, [2, 2]), _vi("idx", I64, [1, 2])], [_vi("y", F, [1])])
    return ["run", m, "--input", "data=" + _npy(tmpdir, "data", np.ones([2, 2], np.float32)),
            "--input", "idx=" + _npy(tmpdir, "idx", np.array([[0, 1 << 40]], np.int64))]


def onehot_depth_huge(tmpdir):
    m = _save(tmpdir, "onehot_depth_huge",
              [helper.make_node("OneHot", ["idx", "depth", "values"], ["y"], name="onehot")],
              [_vi("idx", I64, [4])], [_vi("y", F, None)],
              [numpy_helper.from_array(np.array(BIG, np.int64), "depth"),
               numpy_helper.from_array(np.array([0, 1], np.float32), "values")])
    return ["run", m, "--input", "idx=" + _npy(tmpdir, "idx", np.zeros([4], np.int64))]


# --- versions --------------------------------------------------------------------------

def opset_huge(tmpdir):
    m = _save(tmpdir, "opset_huge", [helper.make_node("Relu", ["x"], ["y"], name="relu")],
              [_vi("x", F, [4])], [_vi("y", F, [4])], opset=BIG)
    return ["compile", m, "-o", os.path.join(tmpdir, "out.pta")]


# (builder, what the message must hold); each case is named counts_<builder>.
_EXPECT = [
    (declared_input_dim, "'x'"),
    (declared_input_rank, "rank 40"),
    (shape_flag_huge, "--shape x"),
    (shape_flag_over_limit, "limit"),
    (npy_header_huge, "x.npy"),
    (initializer_dims_overflow, "'w'"),
    (constant_of_shape_folded, "'cos'"),
    (constant_of_shape_runtime, "'cos'"),
    (constant_of_shape_over_limit, "limit"),
    (tile_folded, "'tile'"),
    (tile_runtime, "'tile'"),
    (range_folded, "'range'"),
    (range_runtime_overflow, "'range'"),
    (expand_folded, "'expand'"),
    (expand_runtime_huge, "'expand'"),
    (expand_runtime_negative, "-4"),
    (reshape_overflow, "'reshape'"),
    (reshape_runtime_overflow, "'reshape'"),
    (pad_negative, "'pad'"),
    (pad_runtime_negative, "'pad'"),
    (pad_huge, "'pad'"),
    (concat_over_limit, "'concat'"),
    (value_info_larger, "'t'"),
    (value_info_smaller, "'t'"),
    (value_info_wrong_dtype, "'t'"),
    (gather_elements_wide, "'ge'"),
    (gather_elements_out_of_range, "index 5"),
    (scatter_elements_wide, "'se'"),
    (scatter_nd_bad_updates, "'snd'"),
    (gather_nd_out_of_range, "'gnd'"),
    (onehot_depth_huge, "'onehot'"),
    (opset_huge, str(BIG)),
]
_CASES = [{"name": "counts_" + build.__name__, "build": build, "expect_substring": expect}
         for build, expect in _EXPECT]

# For tests/hostile/run_hostile.py (CTest hostile_counts): the same cases as hostile.Case,
# each building its files in the runner's workspace folder.
CASES = [
    hostile.Case(c["name"], (lambda build: lambda ws: build(str(ws.dir)))(c["build"]), [c["expect_substring"]],
                 timeout=120)
    for c in _CASES
]


def run_case(partita, case, timeout=120):
    """Runs one case; returns None when it passes, else what went wrong."""
    with tempfile.TemporaryDirectory() as tmpdir:
        argv = [partita] + case["build"](tmpdir)
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return "timed out after %d s" % timeout
    out = p.stderr + p.stdout
    if p.returncode < 0:
        return "killed by signal %s\n%s" % (signal.Signals(-p.returncode).name, out[-2000:])
    if p.returncode != 1:
        return "exit code %d (want 1)\n%s" % (p.returncode, out[-2000:])
    if case["expect_substring"] not in out:
        return "the message lacks %r:\n%s" % (case["expect_substring"], out[-2000:])
    if "std::" in out or "bad_alloc" in out:
        return "the message leaks a std:: exception:\n%s" % out[-2000:]
    if "Sanitizer" in out or "runtime error:" in out:
        return "a sanitizer reported:\n%s" % out[-2000:]
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partita", default=os.environ.get("PARTITA_CLI", "build/bin/partita"))
    ap.add_argument("-k", help="only cases whose name contains this")
    ap.add_argument("-v", action="store_true", help="print each message")
    args = ap.parse_args()
    failed = 0
    for case in _CASES:
        if args.k and args.k not in case["name"]:
            continue
        problem = run_case(args.partita, case)
        print("%-44s %s" % (case["name"], "ok" if problem is None else "FAIL"))
        if problem:
            failed += 1
            print("  " + problem.replace("\n", "\n  "))
        elif args.v:
            with tempfile.TemporaryDirectory() as tmpdir:
                p = subprocess.run([args.partita] + case["build"](tmpdir), capture_output=True, text=True)
                print("  " + (p.stderr + p.stdout).strip().replace("\n", "\n  "))
    print("%d failed" % failed if failed else "all passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
