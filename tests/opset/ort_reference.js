#!/usr/bin/env node
// Reference outputs from ONNX Runtime (onnxruntime-node, CPU) for tests/opset:
//
//   node ort_reference.js MODEL.onnx OUT_DIR NAME=IN.npy ...
//
// runs the model once on the given inputs and writes every output to OUT_DIR/<name>.npy.
'use strict';

const fs = require('fs');
const path = require('path');

const TYPES = {
  '<f4': ['float32', Float32Array], '<f8': ['float64', Float64Array], '<i8': ['int64', BigInt64Array],
  '<i4': ['int32', Int32Array], '|u1': ['uint8', Uint8Array], '|i1': ['int8', Int8Array],
  '<u2': ['uint16', Uint16Array], '<i2': ['int16', Int16Array], '|b1': ['bool', Uint8Array],
};

function readNpy(file) {
  const buf = fs.readFileSync(file);
  const major = buf.readUInt8(6);
  const start = major === 1 ? 10 : 12;
  const len = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const header = buf.toString('latin1', start, start + len);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map((s) => s.trim()).filter((s) => s).map(Number);
  const [type, Ctor] = TYPES[descr] || (() => { throw new Error(`${file}: dtype ${descr}`); })();
  const count = shape.reduce((a, b) => a * b, 1);
  const bytes = new Uint8Array(count * Ctor.BYTES_PER_ELEMENT);
  bytes.set(buf.subarray(start + len, start + len + bytes.length));
  return { type, data: new Ctor(bytes.buffer), shape };
}

function writeNpy(file, t) {
  const entry = Object.entries(TYPES).find(([, v]) => v[0] === t.type);
  if (!entry) throw new Error(`cannot write an output of type ${t.type}`);
  const dims = t.dims.length === 1 ? `${t.dims[0]},` : t.dims.join(', ');
  let header = `{'descr': '${entry[0]}', 'fortran_order': False, 'shape': (${dims}), }`;
  header += ' '.repeat((64 - ((10 + header.length + 1) % 64)) % 64) + '\n';
  const head = Buffer.alloc(10);
  head.writeUInt8(0x93, 0);
  head.write('NUMPY', 1, 'latin1');
  head.writeUInt8(1, 6);
  head.writeUInt8(0, 7);
  head.writeUInt16LE(header.length, 8);
  const data = t.data;
  fs.writeFileSync(file, Buffer.concat([head, Buffer.from(header, 'latin1'),
    Buffer.from(data.buffer, data.byteOffset, data.byteLength)]));
}

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
