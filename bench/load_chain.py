#!/usr/bin/python3
"""Load-time benchmark: a long chain of tiny nodes.

Builds an ONNX model that is one chain of N nodes (Relu and Add alternating, float32[4]
tensors), compiles it with `partita compile` (host backend), and times Model::load of
the artifact with partita_bench_load (best and median of --repeat loads in one process).
Load time is what a chain this long stresses: manifest decode, graph verify, executor
construction and the memory planner each see N nodes; any pass quadratic in the node
count shows here (issue 10: 18 s for 200,000 nodes before the planner was fixed).

  cmake --build build --target partita partita_bench_load
  /usr/bin/python3 bench/load_chain.py --build build            # 200,000 nodes
  /usr/bin/python3 bench/load_chain.py --build build --nodes 100000 --repeat 5
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def chain_model(nodes):
    """x -> Relu -> Add(bias) -> Relu -> Add(bias) ... (nodes in all) -> y."""
    bias = numpy_helper.from_array(np.full([4], 0.5, np.float32), "bias")
    graph_nodes = []
    prev = "x"
    for i in range(nodes):
        out = "y" if i == nodes - 1 else "t%d" % i
        if i % 2 == 0:
            graph_nodes.append(helper.make_node("Relu", [prev], [out], name="n%d" % i))
        else:
            graph_nodes.append(helper.make_node("Add", [prev, "bias"], [out], name="n%d" % i))
        prev = out
    graph = helper.make_graph(graph_nodes, "chain",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])], [bias])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build", help="the build folder (bin/partita, bin/partita_bench_load)")
    ap.add_argument("--nodes", type=int, default=200000)
    ap.add_argument("--repeat", type=int, default=3, help="loads to time (best and median printed)")
    ap.add_argument("--keep", help="folder to keep the model and artifact in (default: a temporary one)")
    args = ap.parse_args()
    cli = os.path.join(args.build, "bin", "partita")
    bench = os.path.join(args.build, "bin", "partita_bench_load")
    for path in (cli, bench):
        if not os.path.exists(path):
            sys.exit("load_chain: %s not built (cmake --build %s --target partita partita_bench_load)"
                     % (path, args.build))
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or tmp
        os.makedirs(folder, exist_ok=True)
        onnx_path = os.path.join(folder, "chain%d.onnx" % args.nodes)
        pta_path = os.path.join(folder, "chain%d.pta" % args.nodes)
        onnx.save(chain_model(args.nodes), onnx_path)
        t0 = time.perf_counter()
        subprocess.run([cli, "compile", onnx_path, "-o", pta_path, "--quiet"], check=True)
        print("compile: %.2f s (%d nodes, %d bytes)" % (time.perf_counter() - t0, args.nodes,
                                                        os.path.getsize(pta_path)))
        subprocess.run([bench, pta_path, "--repeat", str(args.repeat)], check=True)


if __name__ == "__main__":
    main()
