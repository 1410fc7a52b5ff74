#!/usr/bin/env bash
# make demo: compile the bundled Fashion-MNIST model into an artifact, inspect it,
# and classify the bundled test images with it.
set -euo pipefail
build="${1:-build}"
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$build/bin"
m="$root/models/fashion"
out="$build/demo"
mkdir -p "$out"
echo "== partita compile $m/fashion_cnn.onnx -o $out/fashion_cnn.pta"
"$bin/partita" compile "$m/fashion_cnn.onnx" -o "$out/fashion_cnn.pta"
echo
echo "== partita inspect $out/fashion_cnn.pta"
"$bin/partita" inspect "$out/fashion_cnn.pta"
echo
echo "== partita run (100 test images, timing over 20 runs)"
"$bin/partita" run "$out/fashion_cnn.pta" --input "input=$m/test_images.npy" --repeat 20 --warmup 2 --output-dir "$out"
echo
echo "== classify (C++ API, examples/classify.cpp)"
"$bin/classify" "$out/fashion_cnn.pta" "$m/test_images.npy" "$m/test_labels.npy" "$m/classes.txt"
