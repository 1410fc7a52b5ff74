"""Text and numbers from files and flags that a sloppy parser would misread: external-data
offset/length/keys, .npy headers, TensorProto .pb inputs, --shape and --input."""

import struct

from hostile import Case

NOT_DECIMAL = "is not a non-negative decimal integer"


def ext_model(ws, entries, data_bytes=16):
    """m/model.onnx with w (float32[4]) as external data in m/w.bin (`data_bytes` long)
    described by `entries` (key, value)."""
    ws.weights("m/w.bin", data_bytes // 4)
    return ws.model("m/model.onnx", external=entries)


def ext(entries, data_bytes=16):
    return lambda ws: ["run", ext_model(ws, entries, data_bytes)]


CASES = [
    # --- external-data keys -----------------------------------------------------------
    Case("external_offset_suffix", ext([("location", "w.bin"), ("offset", "16xyz")]),
         ["initializer 'w': external data offset '16xyz' " + NOT_DECIMAL]),
    Case("external_length_negative", ext([("location", "w.bin"), ("length", "-5")]),
         ["external data length '-5' " + NOT_DECIMAL]),
    Case("external_length_plus", ext([("location", "w.bin"), ("length", "+16")]), ["length '+16' " + NOT_DECIMAL]),
    Case("external_offset_space", ext([("location", "w.bin"), ("offset", " 0")]), ["offset ' 0' " + NOT_DECIMAL]),
    Case("external_offset_hex", ext([("location", "w.bin"), ("offset", "0x0")]), ["offset '0x0' " + NOT_DECIMAL]),
    Case("external_offset_saturating", ext([("location", "w.bin"), ("offset", "99999999999999999999")]),
         ["offset '99999999999999999999' " + NOT_DECIMAL]),
    Case("external_offset_max", ext([("location", "w.bin"), ("offset", "9223372036854775807"), ("length", "16")]),
         ["offset 9223372036854775807 is past the end of 'w.bin' (16 bytes)"]),
    Case("external_offset_plus_length_wraps", ext([("location", "w.bin"), ("offset", "8"),
                                                   ("length", "9223372036854775807")]),
         ["external data range [8, 8+9223372036854775807) is outside 'w.bin' (16 bytes)"]),
    Case("external_length_short", ext([("location", "w.bin"), ("length", "8")]),
         ["initializer 'w' needs 16 bytes but its external data in 'w.bin' has 8"]),
    Case("external_rest_of_file_too_long", ext([("location", "w.bin")], data_bytes=20),
         ["needs 16 bytes but its external data in 'w.bin' has 20"]),
    Case("external_unknown_key", ext([("location", "w.bin"), ("basepath", "/etc")]),
         ["external data has an unknown key 'basepath' (ONNX defines location, offset, length and checksum)"]),
    Case("external_repeated_key", ext([("location", "w.bin"), ("location", "other.bin")]),
         ["external data key 'location' is given twice"]),
    Case("external_no_location", ext([("offset", "0")]), ["initializer 'w' has external data without a location"]),
]

# --- .npy headers ---------------------------------------------------------------------
def model_x4(ws):
    return ws.model("model.onnx")


def npy_header(shape_text, descr="<f4", order="False"):
    return "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, order, shape_text)


def npy_case(name, make, expect, tool="partita"):
    """`make(ws)` writes x.npy; the case runs the model (x: float32[4]) on it."""
    def build(ws):
        path = make(ws)
        if tool == "partita-run":
            return [ws.compile(model_x4(ws), "model.pta"), "--input", "x=" + path]
        return ["run", model_x4(ws), "--input", "x=" + path]
    return Case(name, build, expect, tool=tool)


def raw(header, data=b"\0" * 16, **kw):
    return lambda ws: ws.npy_raw("x.npy", header, data, **kw)


CASES += [
    npy_case("npy_shape_suffix", raw(npy_header("(4abc,)")), ["x.npy: not a readable .npy file: shape entry '4abc' " + NOT_DECIMAL]),
    npy_case("npy_shape_fraction", raw(npy_header("(4.9,)")), ["shape entry '4.9' " + NOT_DECIMAL]),
    npy_case("npy_shape_negative", raw(npy_header("(-4,)")), ["shape entry '-4' " + NOT_DECIMAL]),
    npy_case("npy_shape_saturating", raw(npy_header("(99999999999999999999,)")),
             ["shape entry '99999999999999999999' " + NOT_DECIMAL]),
    npy_case("npy_shape_not_a_tuple", raw(npy_header("(4)")), ["shape '(4)' is not a tuple"]),
    npy_case("npy_shape_wraps_64_bits", raw(npy_header("(4611686018427387904, 4)")),
             ["x.npy: not a readable .npy file: shape [4611686018427387904,4] has more than 2^40 elements"]),
    npy_case("npy_bytes_over_limit", raw(npy_header("(274877906944,)", descr="<f8")),
             ["needs more than 2^40 bytes"]),
    npy_case("npy_data_short", raw(npy_header("(4,)"), b"\0" * 15),
             ["data is shorter than its shape needs: float32[4] needs 16 bytes, the file has 15 after the header"]),
    npy_case("npy_data_long", raw(npy_header("(4,)"), b"\0" * 17),
             ["the file has 1 bytes after the data its header describes"]),
    npy_case("npy_bad_magic", raw(npy_header("(4,)"), magic=b"\x93NUMPZ"), ["wrong magic"]),
    npy_case("npy_header_length_huge", lambda ws: ws.write("x.npy", b"\x93NUMPY\x02\x00" + struct.pack("<I", 0xFFFFFFFF)),
             ["header of 4294967295 bytes is too large"]),
    npy_case("npy_header_truncated", lambda ws: ws.write("x.npy", b"\x93NUMPY\x01\x00\x40\x00{'descr'"),
             ["truncated header"]),
    npy_case("npy_unknown_key", raw("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'evil': 1}"),
             ["unknown key 'evil'"]),
    npy_case("npy_missing_shape", raw("{'descr': '<f4', 'fortran_order': False}"), ["header has no 'shape'"]),
    npy_case("npy_fortran_order", raw(npy_header("(4,)", order="True")), ["Fortran-ordered arrays are not supported"]),
    npy_case("npy_big_endian", raw(npy_header("(4,)", descr=">f4")), ["unsupported dtype '>f4'"]),
    npy_case("npy_empty_file", lambda ws: ws.write("x.npy", b""), ["wrong magic"]),
    npy_case("npy_shape_suffix_partita_run", raw(npy_header("(4abc,)")), ["shape entry '4abc' " + NOT_DECIMAL],
             tool="partita-run"),
    npy_case("npy_shape_wraps_partita_run", raw(npy_header("(4611686018427387904, 4)")), ["more than 2^40 elements"],
             tool="partita-run"),
]

# --- TensorProto .pb inputs -------------------------------------------------------------
def pb_case(name, make_tensor, expect):
    def build(ws):
        return ["run", model_x4(ws), "--input", "x=" + ws.pb("x.pb", make_tensor(ws))]
    return Case(name, build, expect)


def tensor_with(dims=(4,), raw=None, float_data=None, dtype=None):
    def make(ws):
        t = ws.tensor(list(dims), raw=raw if raw is not None else b"\0" * 16, name="x")
        if float_data is not None:
            t.ClearField("raw_data")
            t.float_data.extend(float_data)
        if dtype is not None:
            t.data_type = dtype
        return t
    return make


CASES += [
    Case("pb_garbage", lambda ws: ["run", model_x4(ws), "--input", "x=" + ws.write("x.pb", b"\xff\xff\xff\xff garbage")],
         ["x.pb: not a valid TensorProto file"]),
    pb_case("pb_negative_dim", tensor_with(dims=(-4,)), ["x.pb: tensor 'x' has a negative dimension -4"]),
    pb_case("pb_dims_overflow", tensor_with(dims=(2**31, 2**31, 4)), ["x.pb: tensor 'x' is impossibly large"]),
    pb_case("pb_raw_size_mismatch", tensor_with(raw=b"\0" * 8), ["needs 16 bytes of raw_data but has 8"]),
    pb_case("pb_typed_count_mismatch", tensor_with(float_data=[1.0, 2.0, 3.0]),
            ["has 3 values in float_data but its shape holds 4"]),
    pb_case("pb_no_type", tensor_with(dtype=0), ["tensor 'x' has no element type"]),
    Case("pb_external_length_negative", lambda ws: (ws.weights("w.bin"), [
        "run", model_x4(ws), "--input",
        "x=" + ws.pb("x.pb", ws.tensor([4], external=[("location", "w.bin"), ("length", "-5")], name="x"))])[-1],
        ["x.pb: tensor 'x': external data length '-5' " + NOT_DECIMAL]),
]

# --- flags ------------------------------------------------------------------------------
def sym_model(ws):
    return ws.model("model.onnx", x_dims=("N", 4))


def shape_case(name, specs, expect, succeed=False):
    def build(ws):
        args = ["run", sym_model(ws)]
        for s in specs:
            args += ["--shape", s]
        return args
    return Case(name, build, expect, succeed=succeed)


BAD_DIM = "is not a positive decimal integer"
CASES += [
    shape_case("shape_valid", ["x=2x4"], ["output y", "float32[2,4]"], succeed=True),
    shape_case("shape_trailing_x", ["x=4x"], ["--shape x: dimension '' in 'x=4x' " + BAD_DIM]),
    shape_case("shape_double_x", ["x=4xx4"], ["dimension '' in 'x=4xx4' " + BAD_DIM]),
    shape_case("shape_saturating", ["x=99999999999999999999x4"], ["dimension '99999999999999999999' in 'x=99999999999999999999x4' " + BAD_DIM]),
    shape_case("shape_2_62", ["x=4611686018427387904x4"], ["--shape x: '4611686018427387904x4' has more than 2^40 elements"]),
    shape_case("shape_product_wraps", ["x=4294967296x4294967296"], ["has more than 2^40 elements"]),
    shape_case("shape_zero", ["x=0x4"], ["dimension '0' in 'x=0x4' " + BAD_DIM]),
    shape_case("shape_negative", ["x=-1x4"], ["dimension '-1' in 'x=-1x4' " + BAD_DIM]),
    shape_case("shape_suffix", ["x=4abcx4"], ["dimension '4abc' in 'x=4abcx4' " + BAD_DIM]),
    shape_case("shape_no_dims", ["x="], ["--shape expects NAME=DxDxD, got 'x='"]),
    shape_case("shape_twice", ["x=2x4", "x=3x4"], ["--shape gives input 'x' twice"]),
    Case("input_twice", lambda ws: ["run", model_x4(ws), "--input", "x=" + ws.npy("a.npy", (4,)),
                                    "--input", "x=" + ws.npy("b.npy", (4,))],
         ["--input gives input 'x' twice"]),
    Case("input_no_file", lambda ws: ["run", model_x4(ws), "--input", "x="], ["--input x= names no file"]),
    Case("input_missing_file", lambda ws: ["run", model_x4(ws), "--input", "x=" + ws.p("nope.npy")],
         ["nope.npy': No such file or directory"]),
    Case("input_wrong_shape", lambda ws: ["run", model_x4(ws), "--input", "x=" + ws.npy("x.npy", (5,))], ["'x'"]),
    Case("input_twice_partita_run", lambda ws: [
        ws.compile(model_x4(ws), "model.pta"), "--input", "x=" + ws.npy("a.npy", (4,)),
        "--input", "x=" + ws.npy("b.npy", (4,))], ["--input gives input 'x' twice"], tool="partita-run"),
]
