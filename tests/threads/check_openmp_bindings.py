#!/usr/bin/env python3
"""Checks that one OpenMP runtime serves a binary and the oneDNN it loads.

    check_openmp_bindings.py BINARY RUNTIME   (RUNTIME: libomp or libgomp)

Runs `BINARY --help` with LD_BIND_NOW=1 LD_DEBUG=bindings and reads where the dynamic
linker bound every GOMP_* and omp_* symbol that the binary and libdnnl use: all must go
to RUNTIME (docs/threads.md: Debian's libdnnl needs libgomp, and partita links LLVM's
libomp ahead of it so that oneDNN's regions and partita's own share one pool of threads
whose wait partita sets). Exits 1 naming each binding that goes elsewhere.
"""
import os
import re
import subprocess
import sys

LINE = re.compile(r"binding file (\S+) \[\d+\] to (\S+) \[\d+\]: normal symbol `([^']+)'")


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    binary, runtime = sys.argv[1], sys.argv[2]
    env = dict(os.environ, LD_BIND_NOW="1", LD_DEBUG="bindings")
    out = subprocess.run([binary, "--help"], env=env, capture_output=True, text=True)
    seen, wrong = {}, []
    name = os.path.basename(binary)
    for m in LINE.finditer(out.stderr):
        user, target, symbol = os.path.basename(m.group(1)), os.path.basename(m.group(2)), m.group(3)
        if not (symbol.startswith("GOMP_") or symbol.startswith("omp_")):
            continue
        if user != name and not user.startswith("libdnnl"):
            continue
        seen.setdefault(user, set()).add(symbol)
        if not target.startswith(runtime):
            wrong.append(f"{user}: {symbol} -> {target}")
    for user in (name, "libdnnl"):
        if not any(u.startswith(user) for u in seen):
            wrong.append(f"{user}: no OpenMP symbol bound (LD_DEBUG output not understood?)")
    if wrong:
        print(f"{binary}: OpenMP calls not bound to {runtime}:\n  " + "\n  ".join(wrong))
        return 1
    for user, symbols in sorted(seen.items()):
        print(f"{user}: {len(symbols)} OpenMP symbols bound to {runtime} ({', '.join(sorted(symbols))})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
