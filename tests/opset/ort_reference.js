#!/usr/bin/env node
// Reference outputs from ONNX Runtime (onnxruntime-node, CPU) for tests/opset:
//
//   node ort_reference.js MODEL.onnx OUT_DIR NAME=IN.npy ...
//
// runs the model once on the given inputs and writes every output to OUT_DIR/<name>.npy.
'use strict';

const fs = require('fs');
const path = require('path');
const { readNpy, writeNpy } = require(path.join(__dirname, '..', '..', 'bench', 'npy'));

async function main() {
  const [model, outDir, ...inputs] = process.argv.slice(2);
  const ort = require(path.join(__dirname, '..', '..', 'bench', 'node_modules', 'onnxruntime-node'));
  const session = await ort.InferenceSession.create(model, { intraOpNumThreads: 1, interOpNumThreads: 1 });
  const feeds = {};
  for (const arg of inputs) {
    const eq = arg.indexOf('=');
    const t = readNpy(arg.slice(eq + 1));
    feeds[arg.slice(0, eq)] = new ort.Tensor(t.type, t.data, t.shape);
  }
  const results = await session.run(feeds);
  fs.mkdirSync(outDir, { recursive: true });
  for (const [name, t] of Object.entries(results)) writeNpy(path.join(outDir, `${name}.npy`), t);
}

main().catch((e) => {
  process.stderr.write(`${e.stack || e}\n`);
  process.exit(1);
});
