"""Item 1: ONNX Runtime's surface (InferenceSession, NodeArg, SessionOptions, providers)."""
import pathlib

import numpy as np
import pytest

import partita


def test_run_add_model_from_bytes_and_path(tmp_path, add_model):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    expected = x + np.array([1, 2, 3], dtype=np.float32)
    path = tmp_path / "add.onnx"
    path.write_bytes(add_model.SerializeToString())
    for source in (add_model.SerializeToString(), str(path), path):  # bytes, str, os.PathLike
        sess = partita.InferenceSession(source)
        (y,) = sess.run(None, {"x": x})
        assert y.dtype == np.float32 and y.shape == (2, 3)
        np.testing.assert_array_equal(y, expected)
        assert sess.model.from_artifact is False


def test_get_inputs_outputs_like_ort(two_io_model):
    sess = partita.InferenceSession(two_io_model.SerializeToString())
    ins, outs = sess.get_inputs(), sess.get_outputs()
    assert [i.name for i in ins] == ["a", "c"]
    assert ins[0].shape == ["batch", 4]
    assert ins[1].shape == [None, 4]  # a dimension with neither a value nor a name
    assert ins[0].type == "tensor(float)"
    assert ins[0].dtype == np.float32
    assert [o.name for o in outs] == ["s", "d"]
    assert outs[0].shape == ["batch", 4] and outs[1].type == "tensor(float)"
    assert repr(ins[0]) == "NodeArg(name='a', type='tensor(float)', shape=['batch', 4])"


def test_run_returns_outputs_in_the_order_asked(two_io_model):
    sess = partita.InferenceSession(two_io_model.SerializeToString())
    a = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    c = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    feed = {"a": a, "c": c}
    s, d = sess.run(None, feed)
    np.testing.assert_array_equal(s, a + c)
    np.testing.assert_array_equal(d, a - c)
    d2, s2 = sess.run(["d", "s"], feed)
    np.testing.assert_array_equal(d2, d)
    np.testing.assert_array_equal(s2, s)
    (only,) = sess.run(["d"], feed)
    np.testing.assert_array_equal(only, d)
    assert len(sess.run([], feed)) == 2  # as ONNX Runtime: an empty list means all
    twice = sess.run(["s", "s"], feed)
    assert twice[0] is twice[1]
    # a different batch through the symbolic dimension
    s5, _ = sess.run(None, {"a": np.ones((5, 4), np.float32), "c": np.ones((5, 4), np.float32)})
    assert s5.shape == (5, 4) and (s5 == 2).all()
    # run_options is accepted (ONNX Runtime's signature)
    assert len(sess.run(None, feed, None)) == 2


def test_providers_map_to_backends(fashion_onnx, fashion_images):
    ref = partita.InferenceSession(fashion_onnx).run(None, {"input": fashion_images})[0]
    for providers, expected in [
        (None, ["CPUExecutionProvider"]),
        (["host"], ["CPUExecutionProvider"]),
        (["dnnl", "host"], ["DnnlExecutionProvider", "CPUExecutionProvider"]),
        (["DnnlExecutionProvider", "CPUExecutionProvider"], ["DnnlExecutionProvider", "CPUExecutionProvider"]),
        ([("DnnlExecutionProvider", {}), "CPUExecutionProvider"], ["DnnlExecutionProvider", "CPUExecutionProvider"]),
        (["dnnl"], ["DnnlExecutionProvider", "CPUExecutionProvider"]),  # the host is implicit
    ]:
        sess = partita.InferenceSession(fashion_onnx, providers=providers)
        assert sess.get_providers() == expected, providers
        assert sess.model.backends == (["dnnl"] if "Dnnl" in expected[0] else [])
        out = sess.run(None, {"input": fashion_images})[0]
        assert np.max(np.abs(out - ref)) / np.max(np.abs(ref)) < 1e-4
    assert "CPUExecutionProvider" in partita.get_available_providers()
    assert "DnnlExecutionProvider" in partita.get_available_providers()
    assert partita.get_device() == "CPU"


def test_unknown_provider_is_refused(add_model):
    with pytest.raises(partita.InvalidArgument, match="unknown provider 'CUDAExecutionProvider'"):
        partita.InferenceSession(add_model.SerializeToString(), providers=["CUDAExecutionProvider"])


def test_artifact_by_path_and_by_bytes(fashion_pta, fashion_images):
    ref = partita.load(fashion_pta).session().run({"input": fashion_images})["logits"]
    by_path = partita.InferenceSession(fashion_pta)
    assert by_path.model.from_artifact
    assert by_path.get_providers() == ["DnnlExecutionProvider", "CPUExecutionProvider"]
    np.testing.assert_array_equal(by_path.run(None, {"input": fashion_images})[0], ref)
    data = pathlib.Path(fashion_pta).read_bytes()
    by_bytes = partita.InferenceSession(data, providers=["dnnl", "host"])
    assert by_bytes.model.from_artifact
    np.testing.assert_array_equal(by_bytes.run(["logits"], {"input": fashion_images})[0], ref)
    # The artifact is recognised by its bytes, not its name.
    renamed = pathlib.Path(fashion_pta).with_suffix(".bin")
    renamed.write_bytes(data)
    assert partita.InferenceSession(str(renamed)).model.from_artifact


def test_artifact_providers_must_cover_its_backends(fashion_pta):
    with pytest.raises(partita.InvalidArgument,
                       match=r"was compiled for dnnl, host, but the providers given are host"):
        partita.InferenceSession(fashion_pta, providers=["CPUExecutionProvider"])
    with pytest.raises(partita.InvalidArgument, match="compiled for dnnl"):
        partita.InferenceSession(pathlib.Path(fashion_pta).read_bytes(), providers=["ewise", "host"])
    # More than it needs is fine: dnnl was allowed and took what it supports.
    sess = partita.InferenceSession(fashion_pta, providers=["dnnl", "ewise", "host"])
    assert sess.get_providers() == ["DnnlExecutionProvider", "ewise", "CPUExecutionProvider"]


def test_session_options_threads(add_model):
    opts = partita.SessionOptions()
    assert opts.intra_op_num_threads == 0
    assert partita.InferenceSession(add_model.SerializeToString(), opts).model.threads == 2  # 0: the default
    opts.intra_op_num_threads = 1
    opts.graph_optimization_level = 99  # ONNX Runtime's other settings are accepted, without effect
    sess = partita.InferenceSession(add_model.SerializeToString(), sess_options=opts)
    assert sess.model.threads == 1
    assert sess.get_session_options() is opts
    opts.intra_op_num_threads = -1
    with pytest.raises(partita.InvalidArgument, match="intra_op_num_threads"):
        partita.InferenceSession(add_model.SerializeToString(), opts)
    opts.intra_op_num_threads = 5000
    with pytest.raises(partita.InvalidArgument):
        partita.InferenceSession(add_model.SerializeToString(), opts)
