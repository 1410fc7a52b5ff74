#!/usr/bin/env node
// One ONNX Runtime inference for the reduced-precision tests (tests/precision/):
//   node ort_infer.js MODEL.onnx OUT_PREFIX NAME=X.npy [NAME=Y.npy ...] [--threads N]
// Writes each output K as OUT_PREFIX.K.npy (bench/npy.js).
// onnxruntime-node is found through NODE_PATH (bench/run.sh installs it in bench/).
'use strict';
const path = require('path');
const { readNpy, writeNpy } = require(path.join(__dirname, '..', '..', 'bench', 'npy'));

async function main() {
  const argv = process.argv.slice(2);
  let threads = 2;
  const ti = argv.indexOf('--threads');
  if (ti >= 0) { threads = Number(argv[ti + 1]); argv.splice(ti, 2); }
  const [model, prefix, ...specs] = argv;
  const ort = require('onnxruntime-node');
  const session = await ort.InferenceSession.create(model, {
    executionProviders: ['cpu'], intraOpNumThreads: threads, interOpNumThreads: 1, graphOptimizationLevel: 'all',
  });
  const feeds = {};
  for (const spec of specs) {
    const eq = spec.indexOf('=');
    const x = readNpy(spec.slice(eq + 1));
    feeds[spec.slice(0, eq)] = new ort.Tensor(x.type, x.data, x.shape);
  }
  const result = await session.run(feeds);
  session.outputNames.forEach((name, k) => writeNpy(`${prefix}.${k}.npy`, result[name]));
}

main().catch((e) => { console.error(String(e && e.message ? e.message : e)); process.exit(1); });
