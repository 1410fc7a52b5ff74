#!/usr/bin/env bash
# Installs the Debian packages listed in scripts/packages.txt that are missing, and
# onnxruntime-node (bench/node_modules) for the tests that compare with ONNX Runtime.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
missing=()
while read -r pkg; do
  [[ -z "$pkg" || "$pkg" == \#* ]] && continue
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done < "$here/packages.txt"
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
if ((${#missing[@]} > 0)); then
  echo "setup: installing ${missing[*]}"
  "${sudo_cmd[@]}" apt-get update
  "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi

# ONNX Runtime for node (CPU only), the reference of the tests that compare with it
# (opset, recurrent, control-flow and precision models) and of make bench. Optional:
# without it those tests report "skipped".
root="$(cd "$here/.." && pwd)"
if [[ ! -d "$root/bench/node_modules/onnxruntime-node" ]]; then
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "setup: installing nodejs and npm (for onnxruntime-node)"
    { "${sudo_cmd[@]}" apt-get update && "${sudo_cmd[@]}" apt-get install -y --no-install-recommends nodejs npm; } ||
      echo "setup: could not install nodejs/npm; tests against ONNX Runtime will be skipped"
  fi
  if command -v npm >/dev/null; then
    echo "setup: installing onnxruntime-node (bench/package-lock.json)"
    (cd "$root/bench" && ONNXRUNTIME_NODE_INSTALL_CUDA=skip npm ci --no-audit --no-fund) ||
      echo "setup: npm ci failed; tests against ONNX Runtime will be skipped"
  fi
fi
