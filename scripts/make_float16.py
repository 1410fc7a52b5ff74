#!/usr/bin/python3
"""Writes the float16 version of a float32 ONNX model, as float16 converters write them.

Weights (initializers, Constant values) and every float32 tensor inside the graph
become float16; the graph's float32 inputs and outputs stay float32, with a Cast to
float16 right after each input and a Cast back to float32 right before each output
(the `keep_io_types` style of onnxconverter-common's float16 converter). Casts inside
the model that targeted float32 now target float16. Nothing is computed: the model
computes in float16 between the Casts.

  make_float16.py IN.onnx OUT.onnx [--bfloat16]

--bfloat16 writes bfloat16 instead (rounded to nearest even).
"""
import argparse
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def narrow_array(a, target):
    a = np.asarray(a, np.float32)
    if target == TensorProto.FLOAT16:
        return numpy_helper.from_array(a.astype(np.float16))
    bits = a.view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    rounded = np.where(np.isnan(a), np.uint16(0x7FC0), rounded)
    t = TensorProto()
    t.data_type = TensorProto.BFLOAT16
    t.dims.extend(a.shape)
    t.raw_data = rounded.tobytes()
    return t


def narrow_tensor(t, target):
    if t.data_type != TensorProto.FLOAT:
        return None
    n = narrow_array(numpy_helper.to_array(t), target)
    n.name = t.name
    return n


def narrow_graph(g, target):
    for i, t in enumerate(g.initializer):
        n = narrow_tensor(t, target)
        if n is not None:
            g.initializer[i].CopyFrom(n)
    for vi in g.value_info:
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT:
            vi.type.tensor_type.elem_type = target
    for node in g.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.TENSOR:
                n = narrow_tensor(a.t, target)
                if n is not None:
                    a.t.CopyFrom(n)
            elif a.type == onnx.AttributeProto.GRAPH:
                narrow_graph(a.g, target)
            elif node.op_type == "Cast" and a.name == "to" and a.i == TensorProto.FLOAT:
                a.i = target


def to_narrow(model, target=TensorProto.FLOAT16):
    g = model.graph
    narrow_graph(g, target)
    init_names = {t.name for t in g.initializer}
    front, back = [], []
    for vi in g.input:
        if vi.name in init_names or vi.type.tensor_type.elem_type != TensorProto.FLOAT:
            continue
        inner = vi.name + "_" + TensorProto.DataType.Name(target).lower()
        for node in g.node:
            node.input[:] = [inner if x == vi.name else x for x in node.input]
        front.append(helper.make_node("Cast", [vi.name], [inner], to=target, name="graph_input_cast_" + vi.name))
    for vi in g.output:
        if vi.type.tensor_type.elem_type != TensorProto.FLOAT:
            continue
        inner = vi.name + "_" + TensorProto.DataType.Name(target).lower()
        for node in g.node:
            node.output[:] = [inner if x == vi.name else x for x in node.output]
            node.input[:] = [inner if x == vi.name else x for x in node.input]
        back.append(helper.make_node("Cast", [inner], [vi.name], to=TensorProto.FLOAT,
                                     name="graph_output_cast_" + vi.name))
    nodes = front + list(g.node) + back
    del g.node[:]
    g.node.extend(nodes)
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--bfloat16", action="store_true")
    args = ap.parse_args()
    model = onnx.load(args.input)
    to_narrow(model, TensorProto.BFLOAT16 if args.bfloat16 else TensorProto.FLOAT16)
    onnx.checker.check_model(model)
    onnx.save(model, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
