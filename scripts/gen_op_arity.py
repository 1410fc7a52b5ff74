#!/usr/bin/python3
"""Writes src/kernels/op_arity.inc, partita's table of the default domain's operator
versions: for every operator and every opset (up to 21) in which its definition
changed, its input and output counts (min, max) as the ONNX schema states them.
The importer and the loader resolve a node at opset N to the newest row <= N, and
kernels say which of those definitions they implement (docs/ops.md).

Versions up to the installed python3-onnx's newest opset come from its schemas; the
later ones (Debian's onnx 1.12 stops at 17) from LATER below, transcribed from ONNX's
docs/Changelog.md. `--changelog PATH` checks both against a Changelog.md (e.g. from a
checkout of github.com/onnx/onnx) and prints any disagreement:

    /usr/bin/python3 scripts/gen_op_arity.py > src/kernels/op_arity.inc
    /usr/bin/python3 scripts/gen_op_arity.py --changelog onnx/docs/Changelog.md
"""
import re
import sys

import onnx
import onnx.defs

MAX_OPSET = 21
INT_MAX = 2**31 - 1
V = INT_MAX  # variadic

# (op, since_version, min_in, max_in, min_out, max_out) for opsets 18..21, from ONNX's
# docs/Changelog.md. GroupNormalization-18 is deprecated there (its scale and bias were
# per group; 21 made them per channel) but models still use it.
LATER = [
    ("AffineGrid", 20, 2, 2, 1, 1), ("AveragePool", 19, 1, 1, 1, 1),
    ("BitwiseAnd", 18, 2, 2, 1, 1), ("BitwiseNot", 18, 1, 1, 1, 1), ("BitwiseOr", 18, 2, 2, 1, 1),
    ("BitwiseXor", 18, 2, 2, 1, 1), ("Cast", 19, 1, 1, 1, 1), ("Cast", 21, 1, 1, 1, 1),
    ("CastLike", 19, 2, 2, 1, 1), ("CastLike", 21, 2, 2, 1, 1), ("CenterCropPad", 18, 2, 2, 1, 1),
    ("Col2Im", 18, 3, 3, 1, 1), ("Constant", 19, 0, 0, 1, 1), ("Constant", 21, 0, 0, 1, 1),
    ("ConstantOfShape", 20, 1, 1, 1, 1), ("ConstantOfShape", 21, 1, 1, 1, 1), ("DFT", 20, 1, 3, 1, 1),
    ("DeformConv", 19, 3, 5, 1, 1), ("DequantizeLinear", 19, 2, 3, 1, 1), ("DequantizeLinear", 21, 2, 3, 1, 1),
    ("Equal", 19, 2, 2, 1, 1), ("Flatten", 21, 1, 1, 1, 1), ("Gelu", 20, 1, 1, 1, 1),
    ("GridSample", 20, 2, 2, 1, 1), ("GroupNormalization", 18, 3, 3, 1, 1),
    ("GroupNormalization", 21, 3, 3, 1, 1), ("Identity", 19, 1, 1, 1, 1), ("Identity", 21, 1, 1, 1, 1),
    ("If", 19, 1, 1, 1, V), ("If", 21, 1, 1, 1, V), ("ImageDecoder", 20, 1, 1, 1, 1), ("IsInf", 20, 1, 1, 1, 1),
    ("IsNaN", 20, 1, 1, 1, 1), ("Loop", 19, 2, V, 1, V), ("Loop", 21, 2, V, 1, V), ("LpPool", 18, 1, 1, 1, 1),
    ("Mish", 18, 1, 1, 1, 1), ("OptionalGetElement", 18, 1, 1, 1, 1), ("OptionalHasElement", 18, 0, 1, 1, 1),
    ("Pad", 18, 2, 4, 1, 1), ("Pad", 19, 2, 4, 1, 1), ("Pad", 21, 2, 4, 1, 1), ("QLinearMatMul", 21, 8, 8, 1, 1),
    ("QuantizeLinear", 19, 2, 3, 1, 1), ("QuantizeLinear", 21, 2, 3, 1, 1), ("ReduceL1", 18, 1, 2, 1, 1),
    ("ReduceL2", 18, 1, 2, 1, 1), ("ReduceLogSum", 18, 1, 2, 1, 1), ("ReduceLogSumExp", 18, 1, 2, 1, 1),
    ("ReduceMax", 18, 1, 2, 1, 1), ("ReduceMax", 20, 1, 2, 1, 1), ("ReduceMean", 18, 1, 2, 1, 1),
    ("ReduceMin", 18, 1, 2, 1, 1), ("ReduceMin", 20, 1, 2, 1, 1), ("ReduceProd", 18, 1, 2, 1, 1),
    ("ReduceSumSquare", 18, 1, 2, 1, 1), ("RegexFullMatch", 20, 1, 1, 1, 1), ("Reshape", 19, 2, 2, 1, 1),
    ("Reshape", 21, 2, 2, 1, 1), ("Resize", 18, 1, 4, 1, 1), ("Resize", 19, 1, 4, 1, 1), ("Scan", 19, 1, V, 1, V),
    ("Scan", 21, 1, V, 1, V), ("ScatterElements", 18, 3, 3, 1, 1), ("ScatterND", 18, 3, 3, 1, 1),
    ("Shape", 19, 1, 1, 1, 1), ("Shape", 21, 1, 1, 1, 1), ("Size", 19, 1, 1, 1, 1), ("Size", 21, 1, 1, 1, 1),
    ("Split", 18, 1, 2, 1, V), ("Squeeze", 21, 1, 2, 1, 1), ("StringConcat", 20, 2, 2, 1, 1),
    ("StringSplit", 20, 1, 1, 2, 2), ("Transpose", 21, 1, 1, 1, 1), ("Unsqueeze", 21, 2, 2, 1, 1),
]


def installed():
    rows = {}
    for s in onnx.defs.get_all_schemas_with_history():
        if s.domain not in ("", "ai.onnx") or s.since_version > MAX_OPSET:
            continue
        rows[(s.name, s.since_version)] = (s.min_input, min(s.max_input, INT_MAX), s.min_output,
                                           min(s.max_output, INT_MAX))
    return rows


def parse_changelog(path):
    """{(op, since): (min_in, max_in, min_out, max_out)} for the default domain; a
    deprecated version (no inputs listed) maps to None."""
    text = open(path, encoding="utf-8").read()
    start = text.index("# ai.onnx (default)")
    end = text.find("\n# ai.onnx.", start + 1)
    body = text[start:end if end > 0 else len(text)]
    parts = re.split(r'^### <a name="([A-Za-z0-9_]+)-(\d+)"></a>', body, flags=re.M)
    rows = {}
    for i in range(1, len(parts), 3):
        op, since, sec = parts[i], int(parts[i + 1]), parts[i + 2]
        if since > MAX_OPSET:
            continue
        if "(deprecated)" in sec.split("\n", 1)[0]:
            rows[(op, since)] = None
            continue

        def count(header):
            m = re.search(r"^#### %s(?: \((\d+) - (\d+|&#8734;)\))?\n\n<dl>\n(.*?)</dl>" % header, sec,
                          re.M | re.S)
            if not m:
                return 0, 0
            if m.group(1) is not None:
                return int(m.group(1)), INT_MAX if m.group(2) == "&#8734;" else int(m.group(2))
            n = len(re.findall(r"^<dt>", m.group(3), re.M))
            return n, n

        rows[(op, since)] = count("Inputs") + count("Outputs")
    return rows


def table():
    rows = installed()
    newest = max(since for _, since in rows)
    for op, since, *arity in LATER:
        if since > newest:
            rows[(op, since)] = tuple(arity)
    return rows


def check(path):
    ours, theirs = table(), parse_changelog(path)
    bad = 0
    for key in sorted(set(ours) | set(theirs)):
        a, b = ours.get(key), theirs.get(key, "missing")
        if b is None and a is not None:
            continue  # deprecated in the changelog; the installed schema or LATER has its counts
        if a != b:
            print(f"{key[0]}-{key[1]}: partita {a}, changelog {b}")
            bad += 1
    print(f"{len(ours)} schema versions checked, {bad} disagreements")
    return 1 if bad else 0


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--changelog":
        sys.exit(check(sys.argv[2]))
    rows = table()
    print(f"// Generated by scripts/gen_op_arity.py from ONNX {onnx.__version__} schemas and, for")
    print(f"// later opsets up to {MAX_OPSET}, ONNX's changelog: do not edit.")
    print("// {op_type, since_version, min_inputs, max_inputs, min_outputs, max_outputs}")
    for (op, since), arity in sorted(rows.items()):
        print('{"%s", %d, %d, %d, %d, %d},' % ((op, since) + tuple(arity)))


if __name__ == "__main__":
    main()
