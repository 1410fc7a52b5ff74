// .npy files for the node scripts that run ONNX Runtime (bench/ort_runner.js and the
// tests' reference runners): readNpy -> { type, data, shape } with `type` an
// onnxruntime-node tensor type; writeNpy from an ort.Tensor (or anything with type,
// data and dims).
'use strict';

const fs = require('fs');

// descr -> [ONNX Runtime tensor type, typed array].
const NPY_TYPES = {
  '<f4': ['float32', Float32Array], '<f8': ['float64', Float64Array], '<i8': ['int64', BigInt64Array],
  '<i4': ['int32', Int32Array], '<i2': ['int16', Int16Array], '<u2': ['uint16', Uint16Array],
  '|i1': ['int8', Int8Array], '|u1': ['uint8', Uint8Array], '|b1': ['bool', Uint8Array],
};

function readNpy(path) {
  const buf = fs.readFileSync(path);
  if (buf.readUInt8(0) !== 0x93 || buf.toString('latin1', 1, 6) !== 'NUMPY') throw new Error(`${path}: not a .npy file`);
  const major = buf.readUInt8(6);
  const headerLen = major === 1 ? buf.readUInt16LE(8) : buf.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = buf.toString('latin1', start, start + headerLen);
  const descr = /'descr':\s*'([^']+)'/.exec(header)[1];
  if (/'fortran_order':\s*True/.test(header)) throw new Error(`${path}: Fortran order is not supported`);
  const shape = /'shape':\s*\(([^)]*)\)/.exec(header)[1].split(',').map((s) => s.trim()).filter((s) => s).map(Number);
  const type = NPY_TYPES[descr];
  if (!type) throw new Error(`${path}: unsupported dtype ${descr}`);
  const [name, Ctor] = type;
  const offset = start + headerLen;
  const count = shape.reduce((a, b) => a * b, 1);
  // Copy into an aligned buffer: typed arrays need element alignment.
  const bytes = new Uint8Array(count * Ctor.BYTES_PER_ELEMENT);
  bytes.set(buf.subarray(offset, offset + bytes.length));
  return { type: name, data: new Ctor(bytes.buffer), shape };
}

function writeNpy(path, tensor) {
  const entry = Object.entries(NPY_TYPES).find(([, v]) => v[0] === tensor.type);
  if (!entry) throw new Error(`cannot write an output of type ${tensor.type}`);
  const dims = tensor.dims.length === 1 ? `${tensor.dims[0]},` : tensor.dims.join(', ');
  let header = `{'descr': '${entry[0]}', 'fortran_order': False, 'shape': (${dims}), }`;
  // Magic (6) + version (2) + length (2) + header + '\n' padded to a multiple of 64.
  header += ' '.repeat((64 - ((10 + header.length + 1) % 64)) % 64) + '\n';
  const head = Buffer.alloc(10);
  head.writeUInt8(0x93, 0);
  head.write('NUMPY', 1, 'latin1');
  head.writeUInt8(1, 6);
  head.writeUInt8(0, 7);
  head.writeUInt16LE(header.length, 8);
  const data = tensor.type === 'bool' ? Uint8Array.from(tensor.data, (v) => (v ? 1 : 0)) : tensor.data;
  const body = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  fs.writeFileSync(path, Buffer.concat([head, Buffer.from(header, 'latin1'), body]));
}

module.exports = { readNpy, writeNpy };
