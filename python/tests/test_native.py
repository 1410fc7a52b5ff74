"""Item 2: partita's own API: compile, load, Model, Session, inspect."""
import os
import pathlib
import re

import numpy as np
import pytest

import partita
from conftest import cli


def test_compile_load_session(tmp_path, fashion_onnx, fashion_images):
    out = tmp_path / "m.pta"
    report = partita.compile(fashion_onnx, out, backends=["dnnl", "host"], threads=2)
    assert report["path"] == str(out)
    assert report["bytes"]["file"] == os.path.getsize(out)
    assert [m["kind"] for m in report["modules"]] == ["dnnl"]
    model = partita.load(str(out), threads=1)
    assert model.threads == 1 and model.backends == ["dnnl"] and model.from_artifact
    assert [i.name for i in model.inputs] == ["input"] and model.inputs[0].shape == [100, 1, 28, 28]
    assert [o.name for o in model.outputs] == ["logits"] and model.outputs[0].type == "tensor(float)"
    assert model.planned_activation_bytes > 0
    outputs = model.session().run({"input": fashion_images})
    assert list(outputs) == ["logits"] and outputs["logits"].shape == (100, 10)
    # the same logits as the CLI computes
    cli("run", str(out), "--input", "input=" + os.path.join(os.path.dirname(fashion_onnx), "test_images.npy"),
        "--output-dir", str(tmp_path / "cli"), "--quiet")
    np.testing.assert_allclose(outputs["logits"], np.load(tmp_path / "cli" / "logits.npy"), rtol=0, atol=1e-5)


def test_compile_from_bytes_and_modelproto(tmp_path, add_model):
    x = np.ones((2, 3), np.float32)
    for i, source in enumerate([add_model, add_model.SerializeToString(), bytearray(add_model.SerializeToString()),
                                memoryview(add_model.SerializeToString())]):
        out = tmp_path / f"add{i}.pta"
        partita.compile(source, out)
        y = partita.load(out).session().run({"x": x})["y"]
        np.testing.assert_array_equal(y, x + np.array([1, 2, 3], np.float32))
    with pytest.raises(partita.InvalidArgument, match="must be a path, bytes or an onnx.ModelProto"):
        partita.compile(42, tmp_path / "no.pta")


def test_compile_options(tmp_path, fashion_onnx, two_io_model):
    denied = partita.compile(fashion_onnx, tmp_path / "d.pta", backends=["dnnl", "host"], deny={"dnnl": ["Conv"]})
    regions = partita.inspect(tmp_path / "d.pta")["partition"]
    assert all("Conv" not in r["ops"] for r in regions if r["backend"] == "dnnl")
    assert any("Conv" in r["ops"] for r in regions if r["backend"] == "host")
    assert denied["modules"][0]["kind"] == "dnnl"
    partita.compile(fashion_onnx, tmp_path / "a.pta", backends=["dnnl", "host"], allow={"dnnl": "Conv,Relu"})
    for r in partita.inspect(tmp_path / "a.pta")["partition"]:
        if r["backend"] == "dnnl":
            assert set(r["ops"]) <= {"Conv", "Relu"}
    partita.compile(fashion_onnx, tmp_path / "big.pta", backends=["dnnl", "host"], min_region_size=1000)
    assert [r["backend"] for r in partita.inspect(tmp_path / "big.pta")["partition"]] == ["host"]
    partita.compile(two_io_model, tmp_path / "s.pta", shapes={"a": [2, 4], "c": [2, 4]})
    m = partita.load(tmp_path / "s.pta")
    assert [i.shape for i in m.inputs] == [[2, 4], [2, 4]]
    with pytest.raises(partita.InvalidArgument, match="unknown backend 'nope'"):
        partita.compile(fashion_onnx, tmp_path / "x.pta", backends=["nope"])
    assert not (tmp_path / "x.pta").exists()
    with pytest.raises(partita.InvalidArgument):
        partita.compile(fashion_onnx, tmp_path / "t.pta", threads=0)


def test_load_bytes_copies_once(fashion_pta, fashion_images):
    data = bytearray(pathlib.Path(fashion_pta).read_bytes())
    model = partita.load(data)
    ref = model.session().run({"input": fashion_images})["logits"]
    data[:] = b"\0" * len(data)  # the model keeps its own copy
    np.testing.assert_array_equal(model.session().run({"input": fashion_images})["logits"], ref)


def test_session_keeps_its_model_alive(fashion_pta, fashion_images):
    session = partita.load(fashion_pta).session()
    assert session.model.inputs[0].name == "input"
    assert session.run({"input": fashion_images})["logits"].shape == (100, 10)


def _cli_sections(text):
    lines = text.splitlines()
    start = lines.index("sections") + 2
    rows = []
    for line in lines[start:]:
        if not line.startswith("  "):
            break
        rows.append(line.split())
    return rows


def test_inspect_gives_the_cli_facts(tmp_path, fashion_pta):
    info = partita.inspect(fashion_pta)
    text = cli("inspect", fashion_pta).stdout
    assert info["path"] == fashion_pta
    assert info["header"]["format_version"] == int(re.search(r"format version (\d+)", text).group(1))
    assert info["header"]["file_bytes"] == os.path.getsize(fashion_pta)
    assert info["header"]["executor"] == "graph"
    # sections: kind, offset, size, alignment as the CLI prints them
    rows = _cli_sections(text)
    assert [(s["kind"], s["offset"], s["size"], s["alignment"]) for s in info["sections"]] == \
        [(r[1], int(r[2]), int(r[3]), int(r[4])) for r in rows]
    # modules and their uses
    assert [m["kind"] for m in info["modules"]] == ["dnnl", "host.graph"]
    for m in info["modules"]:
        counts = " ".join(f"{k}:{n}" for k, n in sorted(m["use_counts"].items()))
        assert re.search(rf"{re.escape(m['kind'])}\s+\S+\s+{m['functions']}\s+{len(m['uses'])}"
                         rf"{' ' + counts if counts else ''}\n", text), (m, text)
        for u in m["uses"]:
            assert u["kind"] in ("borrow", "derive", "embed")
            assert (u["source"] is not None) == (u["kind"] == "derive")
    # constants with their ids, layouts and the modules using them
    table = text[text.index(f"constants ({len(info['constants'])})"):]
    for c in info["constants"]:
        row = re.search(rf"\n  {c['id']}\s+.*", table).group(0).split()
        assert row[0] == str(c["id"]) and row[2] == c["dtype"]
        assert row[4] == (c["layout"] or "-")
        assert int(row[5]) == c["bytes"]
        assert row[9] == ",".join(str(m) for m in c["modules"])
    # partition regions: the same lines
    assert "partition: 1 region on dnnl (12 nodes), 0 host nodes" in text
    assert [(r["backend"], len(r["nodes"])) for r in info["partition"]] == [("dnnl", 12)]
    assert info["partition"][0]["name"] in text
    # byte accounting
    b = info["bytes"]
    assert b["file"] == b["metadata"] + b["modules"] + b["distinct_weights"] + b["padding"]
    for label, key in [("file", "file"), ("distinct weights", "distinct_weights"), ("module sections", "modules")]:
        assert int(re.search(rf"\n  {label}\s+(\d+)", text).group(1)) == b[key]
    assert int(re.search(r"manifest: (\d+)\)", text).group(1)) == b["manifest"]
    # memory
    assert info["memory"]["planned"]
    assert int(re.search(r"planned activations\s+(\d+)", text).group(1)) == info["memory"]["activations"]
    assert partita.inspect(fashion_pta, verify=True)["bytes"] == b


def test_inspect_dot_is_the_cli_graphviz(tmp_path, fashion_pta):
    dot = partita.inspect(fashion_pta, dot=True)
    assert isinstance(dot, str) and dot.startswith("digraph partition {\n")
    cli("inspect", fashion_pta, "--dot", str(tmp_path / "p.dot"))
    assert (tmp_path / "p.dot").read_text() == dot


def test_inspect_host_only_tied_constants(tmp_path, add_model):
    partita.compile(add_model, tmp_path / "h.pta")
    info = partita.inspect(tmp_path / "h.pta")
    assert [m["kind"] for m in info["modules"]] == ["host.graph"]
    assert info["partition"] == [{"name": "host", "backend": "host", "ops": ["Add"], "nodes": ["add"],
                                  "recorded": True}]
    (b,) = info["constants"]
    assert b["shape"] == [3] and b["dtype"] == "float32" and b["storage"] == "weights"
    assert b["same_bytes_as"] is None and b["modules"] == [0]
