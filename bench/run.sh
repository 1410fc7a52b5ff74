#!/usr/bin/env bash
# make bench: builds the benchmark binaries, installs onnxruntime-node when missing,
# then runs bench/bench.py (models, runtimes, kernels) which rewrites
# docs/benchmarks.md and bench/results/. Extra arguments go to bench.py
# (e.g. ./bench/run.sh build --quick, --models resnet18, --no-kernels).
set -uo pipefail
build="${1:-build}"
shift || true
root="$(cd "$(dirname "$0")/.." && pwd)"
case "$build" in /*) ;; *) build="$root/$build" ;; esac
mkdir -p "$build/bench"

# ONNX Runtime for node (CPU only). Debian's nodejs/npm when node is missing.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "bench: installing nodejs and npm"
  sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y --no-install-recommends nodejs npm ||
    echo "bench: could not install node; the ONNX Runtime column will be n/a"
fi
if command -v npm >/dev/null && [[ ! -d "$root/bench/node_modules/onnxruntime-node" ]]; then
  echo "bench: installing onnxruntime-node (bench/package-lock.json)"
  (cd "$root/bench" && ONNXRUNTIME_NODE_INSTALL_CUDA=skip npm ci --no-audit --no-fund) ||
    echo "bench: npm ci failed; the ONNX Runtime column will be n/a"
fi

# Each benchmark binary on its own: one that fails to build leaves its columns n/a
# (never a stale binary's numbers).
for target in partita_bench_model partita_bench_file partita_bench_kernels; do
  log="$build/bench/build-$target.log"
  if ! cmake --build "$build" --target "$target" >"$log" 2>&1; then
    echo "bench: $target failed to build (see $log); its columns will be n/a"
    rm -f "$build/bin/$target"
  fi
done

exec /usr/bin/python3 "$root/bench/bench.py" --build "$build" "$@"
