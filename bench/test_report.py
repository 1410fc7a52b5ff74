"""bench/report.py's "Reduced precision" section, on hand-made results: the target
cells (issue 13's limits), n/a cells with their reasons, and results files from before
the section existed (`bench.py --report-only` on an old results.json)."""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import report  # noqa: E402


def timed(ms):
    return {"median_ms": ms, "p90_ms": ms * 1.1, "n": 20}


def entry(name, kind, partita, ort, f32, rel_err=1e-3):
    runs = {"partita": {"1": dict(timed(partita), agreement={"ok": rel_err <= 2e-2, "largest_rel_err": rel_err})},
            "ort": {"1": timed(ort)}, "partita_f32": {"1": timed(f32)}}
    return {"name": name, "kind": kind, "source": name.split("@")[0], "onnx_bytes": 1_000_000,
            "float32_onnx_bytes": 4_000_000, "runs": runs,
            "artifacts": {"partita": {"artifact_bytes": 1_100_000, "weights_by_dtype": {"int8": 900_000,
                                                                                      "float32": 100_000}},
                          "partita_f32": {"artifact_bytes": 4_100_000}}}


def results(models):
    return {"settings": {"threads": [1]},
            "precision": {"targets": {"int8_static": 1.0, "int8_dynamic": 0.6, "float16": 0.9},
                          "static_speedup": 1.5, "batch_s": 0.3, "models": models}}


def rows(res):
    notes = report.Notes()
    lines = report.precision_section(res, notes)
    return {ln.split(" | ")[0][2:]: ln for ln in lines if ln.startswith("| ") and "@" in ln}, notes


def test_targets_read_against_the_issue_limits():
    got, _ = rows(results([
        entry("a@int8_static", "int8_static", 5.0, 10.0, 20.0),     # 0.5x ORT, 4x faster than float32
        entry("b@int8_static", "int8_static", 5.0, 10.0, 6.0),      # 0.5x ORT, only 1.2x faster
        entry("c@int8_dynamic", "int8_dynamic", 7.0, 10.0, 5.0),    # 0.7x ORT: above 0.6x
        entry("d@float16", "float16", 8.5, 10.0, 8.0),              # 0.85x ORT
        entry("e@float16", "float16", 9.5, 10.0, 8.0, rel_err=0.5),  # 0.95x ORT, output off
    ]))
    assert "≤1.0x ORT ✓, ≥1.5x float32 ✓" in got["a@int8_static"]
    assert "4.00x" in got["a@int8_static"] and "0.50x" in got["a@int8_static"]
    assert "≤1.0x ORT ✓, ≥1.5x float32 ✗" in got["b@int8_static"]
    assert "≤0.6x ORT ✗" in got["c@int8_dynamic"]
    assert "≤0.9x ORT ✓" in got["d@float16"]
    assert "≤0.9x ORT ✗" in got["e@float16"] and "5.0e-01 ✗" in got["e@float16"]
    assert "int8 0.90, float32 0.10" in got["a@int8_static"]


def test_missing_runs_and_models_are_na_with_reasons():
    broken = entry("a@int8_static", "int8_static", 5.0, 10.0, 20.0)
    broken["runs"]["ort"]["1"] = {"na": "onnxruntime-node is not installed"}
    got, notes = rows(results([broken, {"name": "b@float16", "kind": "float16", "na": "could not make it"}]))
    assert "n/a [" in got["a@int8_static"] and "✓" not in got["a@int8_static"].split(" | ")[8]
    assert "n/a [" in got["b@float16"]
    assert any("onnxruntime-node is not installed" in n for n in notes.items)
    assert any("could not make it" in n for n in notes.items)


def test_results_without_the_section_still_render(tmp_path):
    old = json.load(open(os.path.join(HERE, "results", "results.json")))
    old.pop("precision", None)
    out = tmp_path / "benchmarks.md"
    report.write_markdown(old, str(out))
    text = out.read_text()
    assert "## Reduced precision" in text and "Not in these results" in text
