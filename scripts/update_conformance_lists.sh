#!/bin/bash
# Regenerates tests/conformance/<folder>.passing from a real run of the ONNX backend
# test data, after kernels were added or fixed. Review the diff before committing:
# a case that disappears from a list is a regression, not an update.
#
# usage: scripts/update_conformance_lists.sh [BUILD_DIR]   (default: build)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
data=${PARTITA_ONNX_TESTDATA:-/usr/share/libonnx-testdata/data}

cmake --build "$build" --target partita
for folder in node simple pytorch-converted pytorch-operator; do
  list=$root/tests/conformance/$folder.passing
  log=$build/conformance_$folder.log
  "$build/bin/partita" conformance "$data/$folder" --write-passing "$list" >"$log" || true
  grep '^total' "$log"
  echo "  -> $list ($(grep -vc '^#' "$list") cases), full log: $log"
done
