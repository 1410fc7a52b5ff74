#!/usr/bin/python3
"""Hostile-input cases for If, Loop and Scan (docs/control_flow.md, "Errors").

Each case builds a crafted ONNX model (no checker) and names the partita command line
that must fail on it: exit code 1, no signal, and a message naming the node:
  - a body reading a name nothing defines (in the body or outside it), or one only a
    sibling branch defines (an If inside a Loop body);
  - a Loop condition that is not one element, at compile time and at run time, and
    one its body makes (run time); a trip count that is not one element;
  - If branches making different element types or different numbers of outputs; a
    Loop body with too few outputs;
  - Scan inputs of different sequence lengths (run time);
  - bodies nested deeper than the limit (64);
  - sequences and optionals: a sequence read by a tensor op, SequenceAt out of range,
    ConcatFromSequence of mismatched shapes, OptionalGetElement of an empty optional,
    and `partita run` of a model whose input is a sequence.

A runner (tests/hostile/) discovers CASES (CTest hostile_control_flow).
"""
import os
import sys

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hostile  # noqa: E402  (the suite's Case)

F = TensorProto.FLOAT
B = TensorProto.BOOL
I64 = TensorProto.INT64


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _save(tmpdir, name, nodes, inputs, outputs, opset=16):
    model = helper.make_model(helper.make_graph(nodes, name, inputs, outputs),
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    path = os.path.join(tmpdir, name + ".onnx")
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return path


def _npy(tmpdir, name, array):
    path = os.path.join(tmpdir, name + ".npy")
    np.save(path, array)
    return path


def _if(then_nodes, then_out, else_nodes, else_out, out_type=F):
    then_g = helper.make_graph(then_nodes, "then", [], [_vi(then_out, out_type, None)])
    else_g = helper.make_graph(else_nodes, "else", [], [_vi(else_out, out_type, None)])
    return helper.make_node("If", ["cond"], ["y"], name="if0", then_branch=then_g, else_branch=else_g)


def undefined_outer_value(tmpdir):
    node = _if([helper.make_node("Add", ["x", "nowhere"], ["t"])], "t", [helper.make_node("Neg", ["x"], ["e"])], "e")
    m = _save(tmpdir, "undefined_outer_value", [node], [_vi("cond", B, []), _vi("x", F, [3])], [_vi("y", F, [3])])
    return ["compile", m, "-o", os.path.join(tmpdir, "out.pta")]


def branch_types_differ(tmpdir):
    node = _if([helper.make_node("Neg", ["x"], ["t"])], "t",
               [helper.make_node("Shape", ["x"], ["e"])], "e", out_type=TensorProto.UNDEFINED)
    m = _save(tmpdir, "branch_types_differ", [node], [_vi("cond", B, []), _vi("x", F, [3])], [_vi("y", F, None)])
    return ["compile", m, "-o", os.path.join(tmpdir, "out.pta")]


def branch_counts_differ(tmpdir):
    then_g = helper.make_graph([helper.make_node("Neg", ["x"], ["t"]), helper.make_node("Abs", ["x"], ["t2"])],
                               "then", [], [_vi("t", F, None), _vi("t2", F, None)])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [_vi("e", F, None)])
    node = helper.make_node("If", ["cond"], ["y"], name="if0", then_branch=then_g, else_branch=else_g)
    m = _save(tmpdir, "branch_counts_differ", [node], [_vi("cond", B, []), _vi("x", F, [3])], [_vi("y", F, [3])])
    return ["compile", m, "-o", os.path.join(tmpdir, "out.pta")]


def sibling_branch_value(tmpdir):
    # In a Loop body, an If whose then_branch reads 'z', which only its else_branch
    # defines: a branch's values are not in scope of its sibling.
    inner = _if([helper.make_node("Add", ["y_in", "z"], ["t"])], "t",
                [helper.make_node("Neg", ["y_in"], ["z"]), helper.make_node("Identity", ["z"], ["e"])], "e")
    inner.input[0] = "c"
    inner.output[0] = "y_out"
    body = helper.make_graph([helper.make_node("Identity", ["c"], ["c_out"]), inner], "body",
                             [_vi("i", I64, []), _vi("c", B, []), _vi("y_in", F, [2])],
                             [_vi("c_out", B, []), _vi("y_out", F, None)])
    node = helper.make_node("Loop", ["M", "cond", "y0"], ["y"], name="loop0", body=body)
    m = _save(tmpdir, "sibling_branch_value", [node],
              [_vi("M", I64, []), _vi("cond", B, []), _vi("y0", F, [2])], [_vi("y", F, [2])])
    return ["run", m, "-i", "M=" + _npy(tmpdir, "M", np.array(2, np.int64)),
            "-i", "cond=" + _npy(tmpdir, "cond", np.array(True)),
            "-i", "y0=" + _npy(tmpdir, "y0", np.ones(2, np.float32))]


def _loop(cond_shape, body_outputs=("c_out", "y_out"), m_shape=(), body_cond=None):
    nodes = [helper.make_node("Identity", ["c"], ["c_out"]) if body_cond is None else body_cond,
             helper.make_node("Neg", ["y_in"], ["y_out"])]
    body = helper.make_graph(
        nodes, "body", [_vi("i", I64, []), _vi("c", B, []), _vi("y_in", F, [2])],
        [_vi(name, B if name == "c_out" else F, None) for name in body_outputs])
    node = helper.make_node("Loop", ["M", "cond", "y0"], ["y"], name="loop0", body=body)
    return node, [_vi("M", I64, list(m_shape)), _vi("cond", B, cond_shape), _vi("y0", F, [2])], [_vi("y", F, [2])]


def body_condition_not_scalar(tmpdir):
    # The body makes its condition from y_in: bool[2] (shape known only from the carried value).
    node, ins, outs = _loop([], body_cond=helper.make_node("Greater", ["y_in", "y_in"], ["c_out"]))
    ins[2] = _vi("y0", F, ["N"])
    outs[0] = _vi("y", F, ["N"])
    m = _save(tmpdir, "body_condition_not_scalar", [node], ins, outs)
    return ["run", m, "-i", "M=" + _npy(tmpdir, "M", np.array(3, np.int64)),
            "-i", "cond=" + _npy(tmpdir, "cond", np.array(True)),
            "-i", "y0=" + _npy(tmpdir, "y0", np.ones(2, np.float32))]


def trip_count_not_scalar(tmpdir):
    node, ins, outs = _loop([], m_shape=["K"])
    m = _save(tmpdir, "trip_count_not_scalar", [node], ins, outs)
    return ["run", m, "-i", "M=" + _npy(tmpdir, "M", np.array([3, 4], np.int64)),
            "-i", "cond=" + _npy(tmpdir, "cond", np.array(True)),
            "-i", "y0=" + _npy(tmpdir, "y0", np.ones(2, np.float32))]


def loop_condition_not_scalar(tmpdir):
    node, ins, outs = _loop([2])
    m = _save(tmpdir, "loop_condition_not_scalar", [node], ins, outs)
    return ["compile", m, "-o", os.path.join(tmpdir, "out.pta")]


def loop_condition_not_scalar_at_run_time(tmpdir):
    node, ins, outs = _loop(["N"])
    m = _save(tmpdir, "loop_condition_not_scalar_rt", [node], ins, outs)
    return ["run", m, "-i", "M=" + _npy(tmpdir, "M", np.array(3, np.int64)),
            "-i", "cond=" + _npy(tmpdir, "cond", np.array([True, False])),
            "-i", "y0=" + _npy(tmpdir, "y0", np.ones(2, np.float32))]


def loop_body_too_few_outputs(tmpdir):
    node, ins, outs = _loop([], body_outputs=("c_out",))
    m = _save(tmpdir, "loop_body_too_few_outputs", [node], ins, outs)
    return ["compile", m, "-o", os.path.join(tmpdir, "out.pta")]


def scan_lengths_differ(tmpdir):
    body = helper.make_graph([helper.make_node("Add", ["a", "b"], ["s"])], "body",
                             [_vi("a", F, [2]), _vi("b", F, [2])], [_vi("s", F, [2])])
    node = helper.make_node("Scan", ["x", "z"], ["y"], name="scan0", body=body, num_scan_inputs=2)
    m = _save(tmpdir, "scan_lengths_differ", [node], [_vi("x", F, ["T", 2]), _vi("z", F, ["U", 2])],
              [_vi("y", F, None)])
    return ["run", m, "-i", "x=" + _npy(tmpdir, "x", np.ones((3, 2), np.float32)),
            "-i", "z=" + _npy(tmpdir, "z", np.ones((4, 2), np.float32))]


def nested_too_deep(tmpdir):
    # Nested in then_branch only (else_branch is one Neg), so the model stays small.
    def leaf(name):
        return helper.make_graph([helper.make_node("Neg", ["x"], [name])], name, [], [_vi(name, F, None)])
    inner = leaf("t0")
    for level in range(1, 80):
        node = helper.make_node("If", ["cond"], [f"t{level}"], name=f"if{level}", then_branch=inner,
                                else_branch=leaf(f"e{level}"))
        inner = helper.make_graph([node], f"g{level}", [], [_vi(f"t{level}", F, None)])
    node = helper.make_node("If", ["cond"], ["y"], name="if_top", then_branch=inner, else_branch=leaf("e_top"))
    m = _save(tmpdir, "nested_too_deep", [node], [_vi("cond", B, []), _vi("x", F, [3])], [_vi("y", F, [3])])
    return ["compile", m, "-o", os.path.join(tmpdir, "out.pta")]


def _seq_model(tmpdir, name, tail_nodes, inputs, outputs):
    nodes = [helper.make_node("SequenceConstruct", ["x", "y"], ["seq"], name="seq")] + tail_nodes
    return _save(tmpdir, name, nodes, inputs, outputs)


def sequence_read_as_tensor(tmpdir):
    m = _seq_model(tmpdir, "sequence_read_as_tensor", [helper.make_node("Relu", ["seq"], ["z"], name="relu")],
                   [_vi("x", F, [3]), _vi("y", F, [3])], [_vi("z", F, [3])])
    return ["compile", m, "-o", os.path.join(tmpdir, "out.pta")]


def sequence_at_out_of_range(tmpdir):
    m = _seq_model(tmpdir, "sequence_at_out_of_range", [helper.make_node("SequenceAt", ["seq", "pos"], ["z"], name="at")],
                   [_vi("x", F, [3]), _vi("y", F, [3]), _vi("pos", I64, [])], [_vi("z", F, None)])
    x = _npy(tmpdir, "x", np.ones(3, np.float32))
    pos = _npy(tmpdir, "pos", np.array(5, np.int64))
    return ["run", m, "--input", "x=" + x, "--input", "y=" + x, "--input", "pos=" + pos]


def concat_from_sequence_mismatch(tmpdir):
    node = helper.make_node("ConcatFromSequence", ["seq"], ["z"], name="cat", axis=0)
    m = _seq_model(tmpdir, "concat_from_sequence_mismatch", [node], [_vi("x", F, [2, 3]), _vi("y", F, [2, 4])],
                   [_vi("z", F, None)])
    return ["run", m]


def optional_get_element_empty(tmpdir):
    nodes = [helper.make_node("Optional", [], ["o"], name="none", type=helper.make_tensor_type_proto(F, None)),
             helper.make_node("OptionalGetElement", ["o"], ["z"], name="get")]
    m = _save(tmpdir, "optional_get_element_empty", nodes, [], [_vi("z", F, None)])
    return ["run", m]


def sequence_input_to_cli(tmpdir):
    seq_in = helper.make_tensor_sequence_value_info("s", F, None)
    m = _save(tmpdir, "sequence_input_to_cli", [helper.make_node("SequenceLength", ["s"], ["n"], name="len")],
              [seq_in], [_vi("n", I64, [])])
    return ["run", m]


_EXPECT = [
    (undefined_outer_value, ["reads 'nowhere', which nothing defines", "node 'if0'"]),
    (branch_types_differ, ["If node 'if0'", "in then_branch but int64"]),
    (branch_counts_differ, ["If node 'if0'", "has 1 outputs but its branches make 2 (then_branch) and 1"]),
    (sibling_branch_value, ["reads 'z', which nothing defines", "node 'if0'"]),
    (body_condition_not_scalar, ["Loop node 'loop0'", "body output 0 (the condition) must be one bool but is bool[2]"]),
    (trip_count_not_scalar, ["Loop node 'loop0'", "the trip count M must be one int64 but is int64[2]"]),
    (loop_condition_not_scalar, ["Loop node 'loop0'", "the condition must be a scalar (one element) but is bool[2]"]),
    (loop_condition_not_scalar_at_run_time, ["Loop node 'loop0'", "the condition must be one bool"]),
    (loop_body_too_few_outputs, ["Loop node 'loop0'", "its body 1"]),
    (scan_lengths_differ, ["Scan node 'scan0'", "different sequence lengths (3 and 4)"]),
    (nested_too_deep, ["nests subgraphs deeper than 64 levels"]),
    (sequence_read_as_tensor, ["Relu node 'relu'", "input 0 ('seq') is a sequence of float32 tensors, but Relu takes "
                                                   "tensors only"]),
    (sequence_at_out_of_range, ["SequenceAt node 'at'", "position 5 is out of range for a sequence of 2 tensors"]),
    (concat_from_sequence_mismatch, ["ConcatFromSequence node 'cat'", "element 1 is float32[2,4] but element 0 is "
                                                                     "float32[2,3]"]),
    (optional_get_element_empty, ["OptionalGetElement node 'get'", "the optional is empty"]),
    (sequence_input_to_cli, ["input 's' is a sequence of float32 tensors; the CLI takes and gives tensors only"]),
]

CASES = [
    hostile.Case("control_flow_" + build.__name__, (lambda build: lambda ws: build(str(ws.dir)))(build), expect,
                 timeout=120)
    for build, expect in _EXPECT
]
