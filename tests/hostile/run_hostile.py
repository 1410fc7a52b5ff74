#!/usr/bin/python3
"""Runs the hostile-input suite against the real command-line tools.

    run_hostile.py --bin build/bin [--module cases_files] [--filter REGEX] [-j 2] [--keep]

Cases live in cases_*.py modules beside this script; each module defines
CASES = [hostile.Case(...), ...]. The runner finds every such module by itself, so a new
class of hostile input is a new cases_<topic>.py (or new entries in an existing one);
CTest runs each module as its own test (hostile_<topic>). See hostile.py for what each
case asserts. Every case gets a fresh folder under one temporary directory, removed at
the end (--keep leaves it).
"""

import argparse
import concurrent.futures
import importlib.util
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.dont_write_bytecode = True  # nothing written into the source tree
import hostile  # noqa: E402


def load_modules(names):
    found = sorted(HERE.glob("cases_*.py"))
    if names:
        wanted = {n.removesuffix(".py") for n in names}
        missing = wanted - {p.stem for p in found}
        if missing:
            sys.exit(f"run_hostile: no case module {', '.join(sorted(missing))} in {HERE}")
        found = [p for p in found if p.stem in wanted]
    modules = []
    for path in found:
        spec = importlib.util.spec_from_file_location(path.stem, path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        cases = getattr(mod, "CASES", None)
        if not isinstance(cases, list) or not all(isinstance(c, hostile.Case) for c in cases):
            sys.exit(f"run_hostile: {path.name} must define CASES, a list of hostile.Case")
        modules.append((path.stem.removeprefix("cases_"), cases))
    return modules


def run_case(topic, case, bin_dir, tmp_root, default_timeout):
    """Returns (ok, summary line, failure details)."""
    label = f"{topic}/{case.name}"
    ws = hostile.Workspace(tmp_root / topic / case.name, bin_dir)
    try:
        args = case.build(ws)
    except Exception as e:  # a broken case, not a partita failure; still a failure
        return False, label, [f"building the case failed: {type(e).__name__}: {e}"]
    before = hostile.snapshot(ws.dir)
    argv = [str(bin_dir / case.tool)] + [str(a) for a in args]
    timeout = case.timeout or default_timeout
    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=ws.dir, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        hung = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        hung = True
    seconds = time.monotonic() - start
    text = out.decode("utf-8", "replace")
    problems = []
    if hung:
        problems.append(f"hung: no exit within {timeout:g} s (killed)")
    elif proc.returncode < 0:
        problems.append(f"killed by signal {signal.Signals(-proc.returncode).name}")
    elif case.succeed and proc.returncode != 0:
        problems.append(f"exit status {proc.returncode}, expected success")
    elif not case.succeed and proc.returncode == 0:
        problems.append("exit status 0, expected an error")
    for s in case.expect:
        if s not in text:
            problems.append(f"output lacks {s!r}")
    for s in hostile.FORBIDDEN:
        if s in text:
            problems.append(f"output leaks {s!r}")
    after = hostile.snapshot(ws.dir)
    for name in sorted(set(before) | set(after)):
        if any(name == m or name.startswith(m + "/") for m in case.may_change):
            continue
        if name not in after:
            problems.append(f"removed {name}")
        elif name not in before:
            problems.append(f"created {name}")
        elif before[name] != after[name]:
            problems.append(f"changed {name}: {before[name]} -> {after[name]}")
    lines = text.splitlines()
    first = next((l for l in lines if l.startswith("error:")), lines[-1] if lines else "")
    line = f"{label} ({seconds:.2f} s): {first}"
    if problems:
        return False, line, problems + ["command: " + " ".join(argv), "in: " + str(ws.dir), "output:"] + \
            ["  " + l for l in text.splitlines()]
    return True, line, []


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True, help="the folder holding partita and partita-run")
    ap.add_argument("--module", action="append", default=[], help="only this cases_*.py module (repeatable)")
    ap.add_argument("--filter", default="", help="only cases whose topic/name matches this regular expression")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=float(os.environ.get("HOSTILE_TIMEOUT", "20")),
                    help="seconds before a case counts as hung (default 20, or $HOSTILE_TIMEOUT)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = ap.parse_args()
    bin_dir = Path(args.bin).resolve()
    for tool in ("partita", "partita-run"):
        if not (bin_dir / tool).exists():
            sys.exit(f"run_hostile: {bin_dir / tool} does not exist")

    work = []
    names = set()
    for topic, cases in load_modules(args.module):
        for c in cases:
            label = f"{topic}/{c.name}"
            if label in names:
                sys.exit(f"run_hostile: two cases named {label}")
            names.add(label)
            if re.search(args.filter, label):
                work.append((topic, c))
    if not work:
        sys.exit("run_hostile: no case selected")

    tmp = Path(tempfile.mkdtemp(prefix="partita_hostile_"))
    failed = 0
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futures = [pool.submit(run_case, t, c, bin_dir, tmp, args.timeout) for t, c in work]
            for f in futures:
                ok, line, details = f.result()
                print(("ok   " if ok else "FAIL ") + line)
                for d in details:
                    print("     " + d)
                failed += not ok
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            subprocess.run(["chmod", "-R", "u+rwx", str(tmp)], check=False)
            subprocess.run(["rm", "-rf", str(tmp)], check=False)
    print(f"hostile: {len(work)} cases, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
