#!/usr/bin/env python3
"""Fails when a file under src/ includes a folder its layer may not include.

The allowed dependencies are the table under "## Layers" in docs/architecture.md
(columns: layer folder, may include); that table is the authority, this script only
reads it. Tests (*_test.cpp) and test helpers (*_testing.h) may include any layer:
they exercise a layer together with what sits above it. Public headers
(include/partita/) may be included from anywhere. The table itself must be acyclic.

Usage: check_layers.py SOURCE_DIR
"""
import os
import re
import sys


def read_table(doc):
    rows, in_section = {}, False
    for line in open(doc, encoding="utf-8"):
        if line.startswith("## "):
            in_section = line.strip() == "## Layers"
            continue
        if not in_section or not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0].startswith("`src/"):
            continue
        folder = cells[0].strip("`")[len("src/"):].rstrip("/")
        allowed = re.findall(r"`src/([^`]+?)/?`", cells[1])
        rows[folder] = set(allowed)
    return rows


def layer_of(rel, layers):
    # The longest table folder that contains the path (backend/dnnl before backend).
    best = None
    for folder in layers:
        if rel == folder or rel.startswith(folder + "/"):
            if best is None or len(folder) > len(best):
                best = folder
    return best


def find_cycle(layers):
    state = {}

    def visit(n, path):
        state[n] = 1
        for m in sorted(layers.get(n, ())):
            if state.get(m) == 1:
                return path + [n, m]
            if m not in state:
                c = visit(m, path + [n])
                if c:
                    return c
        state[n] = 2
        return None

    for n in sorted(layers):
        if n not in state:
            c = visit(n, [])
            if c:
                return c
    return None


def main():
    root = sys.argv[1]
    layers = read_table(os.path.join(root, "docs", "architecture.md"))
    if not layers:
        print("check_layers: no layer table found under '## Layers' in docs/architecture.md")
        return 1
    for folder, allowed in layers.items():
        for a in allowed:
            if a not in layers:
                print(f"check_layers: the table lets src/{folder} include src/{a}, which is not a layer")
                return 1
    cycle = find_cycle(layers)
    if cycle:
        print("check_layers: the layer table has a cycle: " + " -> ".join(cycle))
        return 1
    src = os.path.join(root, "src")
    bad, checked = [], 0
    for dirpath, _, files in os.walk(src):
        for f in sorted(files):
            if not f.endswith((".h", ".cpp")) or f.endswith(("_test.cpp", "_testing.h")):
                continue
            path = os.path.join(dirpath, f)
            rel_dir = os.path.relpath(dirpath, src)
            layer = layer_of(rel_dir, layers)
            if layer is None:
                bad.append(f"src/{rel_dir}/{f}: its folder is not in the layer table")
                continue
            for n, line in enumerate(open(path, encoding="utf-8"), 1):
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if not m:
                    continue
                checked += 1
                inc = m.group(1)
                if inc.startswith("partita/"):
                    continue
                target = layer_of(os.path.dirname(inc), layers)
                if target is None:
                    bad.append(f"src/{rel_dir}/{f}:{n}: includes \"{inc}\", which is in no layer")
                elif target != layer and target not in layers[layer]:
                    bad.append(f"src/{rel_dir}/{f}:{n}: layer src/{layer} may not include \"{inc}\" (layer src/{target})")
    for b in bad:
        print(b)
    print(f"check_layers: {checked} includes in {len(layers)} layers, {len(bad)} violations")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
