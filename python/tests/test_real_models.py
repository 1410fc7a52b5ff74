"""ResNet-18 and the BERT-shaped encoder of bench/ (scripts/export_models.py: seeded
random weights, PyTorch's output stored at export time) with oneDNN + host, through
InferenceSession and through compile/load/session, within 1e-4 of PyTorch
(max|a - e| / max|e|)."""
import pytest

import partita
from conftest import exported, largest_rel

MODELS = ["resnet18", "bert_encoder"]
TOLERANCE = 1e-4


@pytest.mark.parametrize("name", MODELS)
def test_inference_session_matches_pytorch(name):
    onnx_path, x, expected = exported(name)
    sess = partita.InferenceSession(onnx_path, providers=["dnnl", "host"])
    assert sess.get_providers() == ["DnnlExecutionProvider", "CPUExecutionProvider"]
    assert sess.model.backends == ["dnnl"]
    (y,) = sess.run(None, {sess.get_inputs()[0].name: x})
    assert largest_rel(y, expected) <= TOLERANCE


@pytest.mark.parametrize("name", MODELS)
def test_artifact_matches_pytorch(name, tmp_path):
    onnx_path, x, expected = exported(name)
    pta = tmp_path / (name + ".pta")
    partita.compile(onnx_path, pta, backends=["dnnl", "host"])
    model = partita.load(pta)
    assert model.backends == ["dnnl"]
    y = model.session().run({"input": x})["output"]
    assert largest_rel(y, expected) <= TOLERANCE
    # and the artifact through InferenceSession, by path and by bytes
    for source in (str(pta), pta.read_bytes()):
        (z,) = partita.InferenceSession(source, providers=["dnnl", "host"]).run(["output"], {"input": x})
        assert largest_rel(z, expected) <= TOLERANCE
