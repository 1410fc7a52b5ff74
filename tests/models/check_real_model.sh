#!/usr/bin/env bash
# Exports one torchvision model (random weights, fixed seed, opset 13), runs it with
# partita (straight from .onnx and through a .pta artifact) and compares with
# PyTorch's output: largest relative error max|a-e|/max|e| must be <= 1e-4.
#   check_real_model.sh PARTITA_BIN SOURCE_DIR WORK_DIR MODEL [partita compile flags...]
set -euo pipefail
bin="$1"; src="$2"; work="$3"; model="$4"; shift 4
mkdir -p "$work"
if [[ ! -f "$work/$model.onnx" || ! -f "$work/$model.expected.npy" ]]; then
  /usr/bin/python3 "$src/scripts/export_models.py" --out "$work" --models "$model" >/dev/null
fi
"$bin" run "$work/$model.onnx" --input "input=$work/$model.input.npy" --output-dir "$work/$model.onnx.out" "$@" --quiet
/usr/bin/python3 "$src/scripts/compare_npy.py" "$work/$model.onnx.out/output.npy" "$work/$model.expected.npy" --largest-rel 1e-4
if "$bin" compile --help >/dev/null 2>&1; then
  "$bin" compile "$work/$model.onnx" -o "$work/$model.pta" "$@"
  "$bin" run "$work/$model.pta" --input "input=$work/$model.input.npy" --output-dir "$work/$model.pta.out" --quiet
  /usr/bin/python3 "$src/scripts/compare_npy.py" "$work/$model.pta.out/output.npy" "$work/$model.expected.npy" --largest-rel 1e-4
fi
