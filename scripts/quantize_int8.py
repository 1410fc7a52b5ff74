#!/usr/bin/python3
"""Quantizes a float32 ONNX model to int8, the two ways ONNX Runtime's quantizer does.

static (QDQ): weights of Conv / Gemm / MatMul per output channel, symmetric int8
  (zero point 0, scale max|w| / 127); biases int32 with scale x_scale * w_scale;
  activations per tensor, asymmetric uint8, from the min and max each reaches on the
  calibration inputs (each range widened to include 0). Every quantized tensor T is
  replaced by DequantizeLinear(QuantizeLinear(T)) for its readers, so the model reads
  DQ -> Conv -> (Relu) -> Q chains: the inputs of Conv / Gemm / MatMul / Add, and their
  outputs (after a Relu that follows alone). Calibration runs the float model on
  partita's host, with every intermediate tensor made a graph output.

dynamic: each MatMul (and Gemm) whose second operand is a constant becomes
  DynamicQuantizeLinear(A) -> MatMulInteger(A_q, B_q, A_zero, B_zero) -> Cast(float)
  -> Mul(A_scale * B_scale) [-> Add(bias) for a Gemm], B_q int8 symmetric per tensor:
  the chain ONNX Runtime's dynamic quantizer writes. Conv becomes
  DynamicQuantizeLinear -> ConvInteger -> Cast -> Mul (-> Add bias) the same way.

  quantize_int8.py static IN.onnx OUT.onnx --calibration X.npy [--input-name NAME]
  quantize_int8.py dynamic IN.onnx OUT.onnx
"""
import argparse
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

QUANT_OPS = {"Conv", "Gemm", "MatMul"}


def initializers(model):
    return {t.name: t for t in model.graph.initializer}


def weight_axis(node, w):
    """The output-channel axis of a weight: Conv 0, Gemm 0 (transB) or 1, MatMul last."""
    if node.op_type == "Conv":
        return 0
    if node.op_type == "Gemm":
        trans_b = next((a.i for a in node.attribute if a.name == "transB"), 0)
        return 0 if trans_b else 1
    return w.ndim - 1


def quantize_weight_per_channel(w, axis):
    red = tuple(d for d in range(w.ndim) if d != axis)
    amax = np.max(np.abs(w), axis=red) if red else np.abs(w)
    scale = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
    shape = [1] * w.ndim
    shape[axis] = -1
    q = np.clip(np.rint(w / scale.reshape(shape)), -127, 127).astype(np.int8)
    return q, scale


def activation_params(lo, hi):
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = (hi - lo) / 255.0 if hi > lo else 1.0
    zero = int(np.clip(np.rint(-lo / scale), 0, 255))
    return np.float32(scale), np.uint8(zero)


def calibrate(model, feeds_list, tensors):
    """min/max of each named tensor over the calibration inputs, run on partita's host."""
    import partita

    m = onnx.ModelProto()
    m.CopyFrom(model)
    existing = {o.name for o in m.graph.output}
    for t in tensors:
        if t not in existing:
            m.graph.output.append(helper.make_tensor_value_info(t, TensorProto.FLOAT, None))
    sess = partita.InferenceSession(m.SerializeToString())
    names = [o.name for o in sess.get_outputs()]
    ranges = {}
    for feeds in feeds_list:
        for name, value in zip(names, sess.run(None, feeds)):
            if name not in tensors:
                continue
            lo, hi = float(np.min(value)), float(np.max(value))
            if name in ranges:
                lo, hi = min(lo, ranges[name][0]), max(hi, ranges[name][1])
            ranges[name] = (lo, hi)
    return ranges


def static_quantize(model, feeds_list):
    g = model.graph
    inits = initializers(model)
    consumers = {}
    for n in g.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    producer = {o: n for n in g.node for o in n.output}

    # Activations to quantize: float inputs of the quantized ops and of Add, and the
    # outputs of the quantized ops (after a Relu that alone reads them).
    acts = []

    def want(t):
        if t and t not in inits and t not in acts:
            acts.append(t)

    for n in g.node:
        if n.op_type in QUANT_OPS:
            want(n.input[0])
            if n.op_type == "MatMul" and n.input[1] not in inits:
                want(n.input[1])
            out = n.output[0]
            readers = consumers.get(out, [])
            if len(readers) == 1 and readers[0].op_type == "Relu":
                out = readers[0].output[0]
            want(out)
        elif n.op_type == "Add" and all(i not in inits for i in n.input):
            for i in n.input:
                want(i)
            want(n.output[0])
    graph_outputs = {o.name for o in g.output}
    ranges = calibrate(model, feeds_list, acts)

    new_inits, scale_of = [], {}
    rename = {}
    qdq_nodes = []
    for t in acts:
        scale, zero = activation_params(*ranges[t])
        scale_of[t] = scale
        s, z = t + "_scale", t + "_zero_point"
        new_inits += [numpy_helper.from_array(np.array(scale, np.float32), s),
                      numpy_helper.from_array(np.array(zero, np.uint8), z)]
        q, dq = t + "_quantized", t + "_dequantized"
        qdq_nodes.append((t, [helper.make_node("QuantizeLinear", [t, s, z], [q], name=t + "_QuantizeLinear"),
                              helper.make_node("DequantizeLinear", [q, s, z], [dq], name=t + "_DequantizeLinear")]))
        rename[t] = dq

    # Weights and biases.
    removed = set()
    weight_nodes = []
    for n in g.node:
        if n.op_type not in QUANT_OPS or len(n.input) < 2 or n.input[1] not in inits:
            continue
        w_name = n.input[1]
        w = numpy_helper.to_array(inits[w_name]).astype(np.float32)
        axis = weight_axis(n, w)
        q, scale = quantize_weight_per_channel(w, axis)
        qn, sn, zn, dn = w_name + "_quantized", w_name + "_scale", w_name + "_zero_point", w_name + "_dequantized"
        new_inits += [numpy_helper.from_array(q, qn), numpy_helper.from_array(scale, sn),
                      numpy_helper.from_array(np.zeros(scale.shape, np.int8), zn)]
        weight_nodes.append(helper.make_node("DequantizeLinear", [qn, sn, zn], [dn], axis=axis,
                                             name=w_name + "_DequantizeLinear"))
        n.input[1] = dn
        removed.add(w_name)
        if len(n.input) > 2 and n.input[2] in inits and n.input[0] in scale_of:
            b_name = n.input[2]
            b = numpy_helper.to_array(inits[b_name]).astype(np.float32)
            if b.ndim == 1 and b.shape[0] == scale.shape[0]:
                bs = (scale_of[n.input[0]] * scale).astype(np.float32)
                bq = np.rint(b / bs).astype(np.int32)
                bqn, bsn, bzn, bdn = b_name + "_quantized", b_name + "_scale", b_name + "_zero_point", b_name + "_dequantized"
                new_inits += [numpy_helper.from_array(bq, bqn), numpy_helper.from_array(bs, bsn),
                              numpy_helper.from_array(np.zeros(bs.shape, np.int32), bzn)]
                weight_nodes.append(helper.make_node("DequantizeLinear", [bqn, bsn, bzn], [bdn], axis=0,
                                                     name=b_name + "_DequantizeLinear"))
                n.input[2] = bdn
                removed.add(b_name)

    # Readers of a quantized activation read its DequantizeLinear (a graph output keeps
    # the float value).
    for n in g.node:
        n.input[:] = [rename.get(i, i) for i in n.input]
    nodes = list(weight_nodes)
    placed = set()
    for inp in g.input:
        for t, pair in qdq_nodes:
            if t == inp.name:
                nodes += pair
                placed.add(t)
    for n in g.node:
        nodes.append(n)
        for o in n.output:
            for t, pair in qdq_nodes:
                if t == o and t not in placed:
                    nodes += pair
                    placed.add(t)
    del g.node[:]
    g.node.extend(nodes)
    kept = [t for t in g.initializer if t.name not in removed]
    del g.initializer[:]
    g.initializer.extend(kept + new_inits)
    del g.value_info[:]
    return model


def dynamic_quantize(model):
    g = model.graph
    inits = initializers(model)
    nodes, new_inits, removed = [], [], set()
    for n in g.node:
        is_gemm = n.op_type == "Gemm"
        if n.op_type not in ("MatMul", "Gemm", "Conv") or len(n.input) < 2 or n.input[1] not in inits:
            nodes.append(n)
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        if is_gemm and (attrs.get("transA", 0) or attrs.get("alpha", 1.0) != 1.0 or attrs.get("beta", 1.0) != 1.0):
            nodes.append(n)
            continue
        w = numpy_helper.to_array(inits[n.input[1]]).astype(np.float32)
        if is_gemm and attrs.get("transB", 0):
            w = w.T
        amax = float(np.max(np.abs(w)))
        w_scale = np.float32(amax / 127.0 if amax > 0 else 1.0)
        wq = np.clip(np.rint(w / w_scale), -127, 127).astype(np.int8)
        base = n.name or n.output[0]
        x = n.input[0]
        qn, sn, zn = base + "_input_quantized", base + "_input_scale", base + "_input_zero_point"
        wqn, wsn, wzn = n.input[1] + "_quantized", n.input[1] + "_scale", n.input[1] + "_zero_point"
        new_inits += [numpy_helper.from_array(wq, wqn), numpy_helper.from_array(np.array(w_scale), wsn),
                      numpy_helper.from_array(np.array(0, np.int8), wzn)]
        removed.add(n.input[1])
        nodes.append(helper.make_node("DynamicQuantizeLinear", [x], [qn, sn, zn], name=base + "_DynamicQuantizeLinear"))
        acc = base + "_output_int32"
        if n.op_type == "Conv":
            conv_attrs = {k: v for k, v in attrs.items()}
            nodes.append(helper.make_node("ConvInteger", [qn, wqn, zn, wzn], [acc], name=base + "_ConvInteger",
                                          **conv_attrs))
        else:
            nodes.append(helper.make_node("MatMulInteger", [qn, wqn, zn, wzn], [acc], name=base + "_MatMulInteger"))
        cast = base + "_output_float"
        nodes.append(helper.make_node("Cast", [acc], [cast], to=TensorProto.FLOAT, name=base + "_Cast"))
        scale = base + "_scale_product"
        nodes.append(helper.make_node("Mul", [sn, wsn], [scale], name=base + "_scales_Mul"))
        has_bias = len(n.input) > 2 and n.input[2]
        out = n.output[0]
        scaled = base + "_output_scaled" if has_bias else out
        nodes.append(helper.make_node("Mul", [cast, scale], [scaled], name=base + "_output_Mul"))
        if has_bias:
            bias = n.input[2]
            if n.op_type == "Conv":
                b = numpy_helper.to_array(inits[bias]).astype(np.float32).reshape(1, -1, *([1] * (w.ndim - 2)))
                bn = bias + "_reshaped"
                new_inits.append(numpy_helper.from_array(b, bn))
                removed.add(bias)
                bias = bn
            nodes.append(helper.make_node("Add", [scaled, bias], [out], name=base + "_bias_Add"))
    del g.node[:]
    g.node.extend(nodes)
    used = {i for n in g.node for i in n.input}
    kept = [t for t in g.initializer if t.name not in removed or t.name in used]
    del g.initializer[:]
    g.initializer.extend(kept + new_inits)
    del g.value_info[:]
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["static", "dynamic"])
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--calibration", help="static: .npy of inputs, batches along a new first axis or the model's batch")
    ap.add_argument("--input-name", default=None, help="static: the graph input the calibration data feeds")
    ap.add_argument("--build", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build"))
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(args.build, "python"))
    model = onnx.load(args.input)
    # The quantized model needs opset 13 for per-axis QuantizeLinear/DequantizeLinear.
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx") and o.version < 13:
            o.version = 13
    if args.mode == "static":
        if not args.calibration:
            ap.error("static needs --calibration")
        data = np.load(args.calibration)
        name = args.input_name or model.graph.input[0].name
        in_shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
        batches = data.reshape(-1, *in_shape) if data.ndim == len(in_shape) else data
        feeds = [{name: b.astype(np.float32)} for b in batches]
        static_quantize(model, feeds)
    else:
        dynamic_quantize(model)
    onnx.checker.check_model(model)
    onnx.save(model, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
