"""Items 3-5: feeds read in place, outputs owning their memory, every dtype, and every bad
feed raising partita.InvalidArgument (never a crash), through InferenceSession.run and
Session.run."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import partita
from conftest import make_model

# numpy dtype -> ONNX element type, and ORT's type string
DTYPES = [
    (np.float32, TensorProto.FLOAT, "tensor(float)"),
    (np.float16, TensorProto.FLOAT16, "tensor(float16)"),
    (np.float64, TensorProto.DOUBLE, "tensor(double)"),
    (np.int8, TensorProto.INT8, "tensor(int8)"),
    (np.int16, TensorProto.INT16, "tensor(int16)"),
    (np.int32, TensorProto.INT32, "tensor(int32)"),
    (np.int64, TensorProto.INT64, "tensor(int64)"),
    (np.uint8, TensorProto.UINT8, "tensor(uint8)"),
    (np.bool_, TensorProto.BOOL, "tensor(bool)"),
]


def transpose_model(elem):
    return make_model(
        [helper.make_node("Transpose", ["x"], ["y"], perm=[1, 0], name="t")],
        [helper.make_tensor_value_info("x", elem, [2, 3])],
        [helper.make_tensor_value_info("y", elem, [3, 2])])


@pytest.mark.parametrize("np_dtype,elem,ort_type", DTYPES, ids=[d[0].__name__ for d in DTYPES])
def test_every_dtype_round_trips(tmp_path, np_dtype, elem, ort_type):
    sess = partita.InferenceSession(transpose_model(elem).SerializeToString())
    assert sess.get_inputs()[0].type == ort_type and sess.get_outputs()[0].type == ort_type
    assert sess.get_inputs()[0].dtype == np.dtype(np_dtype)
    values = np.arange(6).reshape(2, 3)
    x = (values % 2 == 1) if np_dtype is np.bool_ else (values * 3 - 5).astype(np_dtype)
    (y,) = sess.run(None, {"x": x})
    assert y.dtype == np.dtype(np_dtype) and y.shape == (3, 2)
    np.testing.assert_array_equal(y, x.T)
    partita.compile(transpose_model(elem), tmp_path / "t.pta")
    session = partita.load(tmp_path / "t.pta").session()
    np.testing.assert_array_equal(session.run({"x": x})["y"], x.T)


@pytest.fixture(scope="module")
def sess(add_model):
    return partita.InferenceSession(add_model.SerializeToString())


@pytest.fixture(scope="module")
def session(add_model, tmp_path_factory):
    path = tmp_path_factory.mktemp("add") / "add.pta"
    partita.compile(add_model, path)
    return partita.load(path).session()


X = np.arange(6, dtype=np.float32).reshape(2, 3)
EXPECTED = X + np.array([1, 2, 3], np.float32)

# (feed, exception type, message pattern): every way a feed can be wrong.
BAD_FEEDS = [
    ({"nope": X}, partita.InvalidArgument, r"the model has no input named 'nope' \(inputs: x\)"),
    ({}, partita.InvalidArgument, r"input 'x' was not set"),
    ({"x": X.astype(np.float64)}, partita.InvalidArgument, r"input 'x' must be float32\[2,3\] but got float64\[2,3\]"),
    ({"x": X.astype(np.int32)}, partita.InvalidArgument, r"input 'x' must be float32\[2,3\] but got int32\[2,3\]"),
    ({"x": np.zeros((3, 2), np.float32)}, partita.InvalidArgument, r"input 'x' must have shape float32\[2,3\] but got float32\[3,2\]"),
    ({"x": np.zeros((2, 3, 1), np.float32)}, partita.InvalidArgument, r"input 'x' must have shape"),
    ({"x": np.float32(1.0)}, partita.InvalidArgument, r"input 'x' must be a numpy.ndarray, not float32"),
    ({"x": np.zeros((), np.float32)}, partita.InvalidArgument, r"input 'x' must have shape float32\[2,3\] but got float32\[\]"),
    ({"x": X.tolist()}, partita.InvalidArgument, r"input 'x' must be a numpy.ndarray, not list"),
    ({"x": None}, partita.InvalidArgument, r"input 'x' must be a numpy.ndarray, not NoneType"),
    ({"x": "x"}, partita.InvalidArgument, r"input 'x' must be a numpy.ndarray, not str"),
    ({"x": X.astype(np.complex64)}, partita.InvalidArgument, r"input 'x': numpy dtype complex64 has no partita dtype"),
    ({"x": X.astype(object)}, partita.InvalidArgument, r"input 'x': numpy dtype object has no partita dtype"),
    ({"x": X.astype("U3")}, partita.InvalidArgument, r"numpy dtype <U3 has no partita dtype"),
    ({"x": np.zeros(6, dtype=[("a", np.float32)]).reshape(2, 3)}, partita.InvalidArgument, r"has no partita dtype"),
    ({0: X}, partita.InvalidArgument, r"feed keys must be input names \(str\), not int"),
    ([X], partita.InvalidArgument, r"the feed must be a dict of input name -> numpy.ndarray, not list"),
    (None, partita.InvalidArgument, r"the feed must be a dict"),
    ({"x": X, "extra": X}, partita.InvalidArgument, r"the model has no input named 'extra'"),
]


@pytest.mark.parametrize("feed,error,pattern", BAD_FEEDS, ids=[str(i) for i in range(len(BAD_FEEDS))])
def test_bad_feed_raises_and_the_session_still_works(sess, session, feed, error, pattern):
    with pytest.raises(error, match=pattern):
        sess.run(None, feed)
    with pytest.raises(error, match=pattern):
        session.run(feed)
    np.testing.assert_array_equal(sess.run(None, {"x": X})[0], EXPECTED)
    np.testing.assert_array_equal(session.run({"x": X})["y"], EXPECTED)


def test_bad_output_names_raise(sess):
    with pytest.raises(partita.InvalidArgument, match=r"the model has no output named 'z' \(outputs: y\)"):
        sess.run(["z"], {"x": X})
    with pytest.raises(partita.InvalidArgument, match="output_names must be None or a list"):
        sess.run("y", {"x": X})
    with pytest.raises(partita.InvalidArgument, match="output_names must hold str"):
        sess.run([0], {"x": X})


def test_a_missing_input_is_not_read_from_an_earlier_run(two_io_model):
    sess = partita.InferenceSession(two_io_model.SerializeToString())
    a = np.ones((1, 4), np.float32)
    sess.run(None, {"a": a, "c": a})
    with pytest.raises(partita.InvalidArgument, match="input 'c' was not set"):
        sess.run(None, {"a": a})  # the pooled session bound 'c' last time: it must not be reused


def test_layouts_that_are_copied_give_the_same_result(sess):
    before = partita._partita._copy_stats()
    wide = np.arange(12, dtype=np.float32).reshape(2, 6)
    cases = [
        wide[:, ::2],          # strided
        np.asfortranarray(X),  # column-major
        X.astype(">f4"),       # big-endian
    ]
    for arr in cases:
        (y,) = sess.run(None, {"x": arr})
        np.testing.assert_array_equal(y, np.ascontiguousarray(arr, dtype=np.float32) + np.array([1, 2, 3], np.float32))
    arrays, nbytes = partita._partita._copy_stats()
    assert arrays - before[0] == len(cases)
    assert nbytes - before[1] == len(cases) * X.nbytes


def test_misaligned_input_is_copied(sess):
    buf = np.zeros(X.nbytes + 1, np.uint8)
    arr = buf[1:].view(np.float32).reshape(2, 3)
    arr[...] = X
    if arr.flags.aligned:
        pytest.skip("numpy considers the offset view aligned")
    before = partita._partita._copy_stats()[0]
    np.testing.assert_array_equal(sess.run(None, {"x": arr})[0], EXPECTED)
    assert partita._partita._copy_stats()[0] == before + 1


def test_contiguous_input_is_read_in_place(sess, session):
    before = partita._partita._copy_stats()
    readonly = X.copy()
    readonly.flags.writeable = False
    for arr in (X, readonly, np.ascontiguousarray(np.arange(12, dtype=np.float32).reshape(4, 3)[1:3])):
        sess.run(None, {"x": arr})
        session.run({"x": arr})
    assert partita._partita._copy_stats() == before


def test_outputs_own_their_memory(sess, session):
    for y in (sess.run(None, {"x": X})[0], session.run({"x": X})["y"]):
        # The array's memory is partita's output tensor, owned through a capsule: no copy.
        assert type(y.base).__name__ == "PyCapsule"
        assert not y.flags.owndata and y.flags.writeable and y.flags.c_contiguous
        assert y.ctypes.data % 64 == 0  # partita's 64-byte aligned tensor storage
        y[0, 0] = 42  # writable, and independent of the next run
    np.testing.assert_array_equal(sess.run(None, {"x": X})[0], EXPECTED)
