#!/usr/bin/env node
// The ONNX Runtime worker of bench/bench.py (onnxruntime-node, CPU execution provider).
//
//   node ort_runner.js MODEL.onnx --input NAME=X.npy [--input ...] --threads N [--output OUT.npy]
//                      [--output-dir DIR] [--feedback OUT=IN ...]
//
// Same protocol as partita_bench_model (bench/model_runner.cpp): loads the model with
// intraOpNumThreads = N and interOpNumThreads = 1, runs once, writes output 0 as .npy,
// prints {"event":"ready",...} with memory read from /proc/self after that first run,
// then answers "run K" with {"event":"times","ms":[...]} until "quit".
// --output-dir writes every output of the first run as DIR/NAME.npy. --feedback OUT=IN
// (streaming models): after every run, output OUT becomes input IN of the next one (a
// recurrent state fed back frame by frame; the timed runs include it).
'use strict';

const fs = require('fs');
const readline = require('readline');
const { readNpy, writeNpy } = require('./npy');

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

function procKb(path, keys) {
  const out = {};
  for (const line of fs.readFileSync(path, 'latin1').split('\n')) {
    const m = /^([A-Za-z_]+):\s+(\d+)/.exec(line);
    if (m && keys.includes(m[1])) out[m[1]] = Number(m[2]);
  }
  return out;
}

function memory() {
  const s = procKb('/proc/self/status', ['VmHWM', 'VmRSS', 'RssAnon', 'RssFile']);
  const r = procKb('/proc/self/smaps_rollup', ['Private_Clean', 'Private_Dirty', 'Shared_Clean']);
  return {
    peak_rss_kb: s.VmHWM, rss_kb: s.VmRSS, rss_anon_kb: s.RssAnon, rss_file_kb: s.RssFile,
    private_clean_kb: r.Private_Clean, private_dirty_kb: r.Private_Dirty, shared_clean_kb: r.Shared_Clean,
  };
}

function parseArgs(argv) {
  const args = { model: null, inputs: [], threads: 1, output: null, outputDir: null, feedback: [] };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    if (a === '--input') {
      const spec = argv[++i];
      const eq = spec.indexOf('=');
      if (eq <= 0) throw new Error(`--input expects NAME=PATH, got ${spec}`);
      args.inputs.push([spec.slice(0, eq), spec.slice(eq + 1)]);
    } else if (a === '--threads') {
      args.threads = Number(argv[++i]);
    } else if (a === '--output') {
      args.output = argv[++i];
    } else if (a === '--output-dir') {
      args.outputDir = argv[++i];
    } else if (a === '--feedback') {
      const spec = argv[++i];
      const eq = spec.indexOf('=');
      if (eq <= 0) throw new Error(`--feedback expects OUT=IN, got ${spec}`);
      args.feedback.push([spec.slice(0, eq), spec.slice(eq + 1)]);
    } else if (!a.startsWith('-') && args.model === null) {
      args.model = a;
    } else {
      throw new Error(`unknown argument ${a}`);
    }
  }
  if (!args.model) throw new Error('usage: ort_runner.js MODEL.onnx --input NAME=X.npy --threads N');
  return args;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const ort = require('onnxruntime-node');
  let t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(args.model, {
    executionProviders: ['cpu'],
    intraOpNumThreads: args.threads,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    graphOptimizationLevel: 'all',
    // Errors only: ONNX Runtime warns on every Loop iteration whose value has another
    // shape than the exporter annotated (gru_decode), and writing that to stderr would
    // be timed with the run.
    logSeverityLevel: 3,
  });
  const loadMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const feeds = {};
  for (const [name, path] of args.inputs) {
    const x = readNpy(path);
    feeds[name] = new ort.Tensor(x.type, x.data, x.shape);
  }
  t0 = process.hrtime.bigint();
  let result = await session.run(feeds);
  const firstMs = Number(process.hrtime.bigint() - t0) / 1e6;
  const mem = memory();
  if (args.output) writeNpy(args.output, result[session.outputNames[0]]);
  if (args.outputDir) for (const name of session.outputNames) writeNpy(`${args.outputDir}/${name}.npy`, result[name]);
  const feedBack = (r) => {
    for (const [out, inp] of args.feedback) {
      if (!(out in r)) throw new Error(`--feedback: the model has no output ${out}`);
      feeds[inp] = r[out];
    }
  };
  feedBack(result);
  result = null;
  emit({ event: 'ready', load_ms: loadMs, first_run_ms: firstMs, memory: mem, ort_version: ort.env.versions?.common });

  const rl = readline.createInterface({ input: process.stdin, terminal: false });
  for await (const line of rl) {
    const [verb, count] = line.trim().split(/\s+/);
    if (verb === 'quit') break;
    if (verb !== 'run') throw new Error(`unknown command: ${line}`);
    const ms = [];
    for (let i = 0; i < Number(count); ++i) {
      const s = process.hrtime.bigint();
      feedBack(await session.run(feeds));
      ms.push(Number(process.hrtime.bigint() - s) / 1e6);
    }
    emit({ event: 'times', ms });
  }
  process.exit(0);
}

main().catch((e) => {
  emit({ event: 'error', message: String(e && e.message ? e.message : e) });
  process.exit(1);
});
