#!/usr/bin/env node
// Runs one ONNX model with ONNX Runtime (onnxruntime-node, CPU) and writes every output
// as OUT_DIR/<output name>.npy: the reference of tests/control_flow/check_control_flow.py.
//
//   node ort_outputs.js NODE_MODULES MODEL.onnx OUT_DIR NAME=X.npy [NAME=X.npy ...]
'use strict';

const fs = require('fs');
const path = require('path');

const [modules, model, outDir, ...inputArgs] = process.argv.slice(2);
const ort = require(path.join(modules, 'onnxruntime-node'));
const { readNpy, writeNpy } = require(path.join(__dirname, '..', '..', 'bench', 'npy'));

(async () => {
  const session = await ort.InferenceSession.create(model, { intraOpNumThreads: 1, interOpNumThreads: 1 });
  const feeds = {};
  for (const arg of inputArgs) {
    const eq = arg.indexOf('=');
    const t = readNpy(arg.slice(eq + 1));
    feeds[arg.slice(0, eq)] = new ort.Tensor(t.type, t.data, t.shape);
  }
  const results = await session.run(feeds);
  fs.mkdirSync(outDir, { recursive: true });
  for (const name of session.outputNames) writeNpy(path.join(outDir, `${name}.npy`), results[name]);
})().catch((e) => {
  console.error(e.message || e);
  process.exit(1);
});
