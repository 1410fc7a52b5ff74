#!/usr/bin/env node
// One ONNX Runtime inference for the reduced-precision tests (tests/precision/):
//   node ort_infer.js MODEL.onnx OUT_PREFIX NAME=X.npy [NAME=Y.npy ...] [--threads N]
// Writes each output K as OUT_PREFIX.K.npy (float32, int32, uint8, int8 or int64).
// onnxruntime-node is found through NODE_PATH (bench/run.sh installs it in bench/).
'use strict';
const fs = require('fs');

const TYPES = {
  '<f4': ['float32', Float32Array], '<i8': ['int64', BigInt64Array], '<i4': ['int32', Int32Array],
  '|u1': ['uint8', Uint8Array], '|i1': ['int8', Int8Array],
};
const DESCR = { float32: '<f4', int64: '<i8', int32: '<i4', uint8: '|u1', int8: '|i1' };

function readNpy(path) {
  const buf = fs.readFileSync(path);
  const headerLen = buf.readUInt16LE(8);
  const header = buf.toString('latin1', 10, 10 + headerLen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map((s) => s.trim()).filter((s) => s).map(Number);
  const [name, Ctor] = TYPES[descr] || (() => { throw new Error(`${path}: dtype ${descr}`); })();
  const count = shape.reduce((a, b) => a * b, 1);
  const bytes = new Uint8Array(count * Ctor.BYTES_PER_ELEMENT);
  bytes.set(buf.subarray(10 + headerLen, 10 + headerLen + bytes.length));
  return { type: name, data: new Ctor(bytes.buffer), shape };
}

function writeNpy(path, t) {
  const descr = DESCR[t.type];
  if (!descr) throw new Error(`cannot write output of type ${t.type}`);
  const dims = t.dims.length === 1 ? `${t.dims[0]},` : t.dims.join(', ');
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${dims}), }`;
  header += ' '.repeat((64 - ((10 + header.length + 1) % 64)) % 64) + '\n';
  const head = Buffer.alloc(10);
  head.writeUInt8(0x93, 0);
  head.write('NUMPY', 1, 'latin1');
  head.writeUInt8(1, 6);
  head.writeUInt16LE(header.length, 8);
  const d = t.data;
  fs.writeFileSync(path, Buffer.concat([head, Buffer.from(header, 'latin1'), Buffer.from(d.buffer, d.byteOffset, d.byteLength)]));
}

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
