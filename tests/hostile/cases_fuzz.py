"""Findings of the libFuzzer targets (fuzz/, docs/security.md), minimised and rebuilt
here as readable inputs, run through the real CLI: each must stay a clear error (or a
correct result), with no signal and no sanitizer report under `make asan`."""

from hostile import Case


def onnx_model(ws, name, nodes, inputs, outputs, inits=(), opset=13, ir_version=8):
    """Writes a model made of onnx.helper pieces: `inputs`/`outputs` are (name, dims)
    float32 value infos (dims None: unranked)."""
    from onnx import TensorProto, helper
    g = helper.make_graph(nodes, "g",
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, d) for n, d in inputs],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, d) for n, d in outputs],
                          list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir_version
    return ws.write(name, m.SerializeToString())


def zeros(name, dims):
    import numpy as np
    from onnx import numpy_helper
    return numpy_helper.from_array(np.zeros(dims, np.float32), name)


def legacy_broadcast_axis(axis):
    """An opset-6 Add with legacy broadcasting: x float32[2] + b float32[1,1,1] at `axis`.
    The importer used to compute ra - axis - rb, which overflows for axis near 2^63."""
    def build(ws):
        from onnx import helper
        node = helper.make_node("Add", ["x", "b"], ["y"], broadcast=1, axis=axis)
        model = onnx_model(ws, "legacy.onnx", [node], [("x", [2])], [("y", None)], [zeros("b", [1, 1, 1])],
                           opset=6, ir_version=3)
        return ["compile", model, "-o", ws.p("legacy.pta")]
    return build


CASES = [
    Case("legacy_broadcast_axis_max", legacy_broadcast_axis(2**63 - 1),
         ["Add node 'Add_0': broadcast axis 9223372036854775807 does not fit ranks 1 and 3"]),
    Case("legacy_broadcast_axis_min", legacy_broadcast_axis(-2**63),
         ["Add node 'Add_0': broadcast axis -9223372036854775808 does not fit ranks 1 and 3"]),
]
