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

const TYPES = {
  '<f4': ['float32', Float32Array], '<i8': ['int64', BigInt64Array], '<i4': ['int32', Int32Array],
  '|b1': ['bool', Uint8Array], '|u1': ['uint8', Uint8Array],
};

function readNpy(file) {
  const buf = fs.readFileSync(file);
  const major = buf.readUInt8(6);
  const start = major === 1 ? 10 : 12;
  const len = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const header = buf.toString('latin1', start, start + len);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map((s) => s.trim()).filter((s) => s).map(Number);
  const [type, Ctor] = TYPES[descr];
  const count = shape.reduce((a, b) => a * b, 1);
  const bytes = new Uint8Array(count * Ctor.BYTES_PER_ELEMENT);
  bytes.set(buf.subarray(start + len, start + len + bytes.length));
  let data = new Ctor(bytes.buffer);
  if (type === 'bool') data = Uint8Array.from(data);
  return new ort.Tensor(type, data, shape);
}

function writeNpy(file, t) {
  const descr = { float32: '<f4', int64: '<i8', int32: '<i4', bool: '|b1', uint8: '|u1' }[t.type];
  const dims = t.dims.length === 1 ? `${t.dims[0]},` : t.dims.join(', ');
  let header = `{'descr': '${descr}', 'fortran_order': False, 'shape': (${dims}), }`;
  header += ' '.repeat((64 - ((10 + header.length + 1) % 64)) % 64) + '\n';
  const head = Buffer.alloc(10);
  head.writeUInt8(0x93, 0);
  head.write('NUMPY', 1, 'latin1');
  head.writeUInt8(1, 6);
  head.writeUInt8(0, 7);
  head.writeUInt16LE(header.length, 8);
  const data = t.type === 'bool' ? Buffer.from(Uint8Array.from(t.data, (v) => (v ? 1 : 0))) : Buffer.from(t.data.buffer, t.data.byteOffset, t.data.byteLength);
  fs.writeFileSync(file, Buffer.concat([head, Buffer.from(header, 'latin1'), data]));
}

(async () => {
  const session = await ort.InferenceSession.create(model, { intraOpNumThreads: 1, interOpNumThreads: 1 });
  const feeds = {};
  for (const arg of inputArgs) {
    const eq = arg.indexOf('=');
    feeds[arg.slice(0, eq)] = readNpy(arg.slice(eq + 1));
  }
  const results = await session.run(feeds);
  fs.mkdirSync(outDir, { recursive: true });
  for (const name of session.outputNames) writeNpy(path.join(outDir, `${name}.npy`), results[name]);
})().catch((e) => {
  console.error(e.message || e);
  process.exit(1);
});
