"""Run a sample of the generated bad-input cases as real processes against a checkout, to compare two
versions of the code (issue #34's "before and after"): ``python tests/sweep_bad_input.py --tree DIR``.

The cases come from this checkout's registry and parsers (``fuzz_entries_*.py``): for each entry point, up
to ``--per-entry`` flags, one telling bad value each (the below-range number, ``nan``, a file where a folder
is wanted, a broken model folder). Each runs as a user runs it, in ``DIR``, without ``E2C_CHECK_ONLY`` (an
older checkout has none), with a time limit: a value the code accepts starts the work and is stopped there.
A case passes when the process keeps the contract (exit 2, one ``error:`` line, no traceback). Prints a
table per entry point and, last, one JSON line with the totals.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from entry_fuzz import bad_values, fill, load, make_context, valued_flags
from fuzz_entries import ENTRIES

PREFERRED = ("nan", "0", "-1")  # the most telling bad value of a family, in this order


def pick(values: list[str], ctx_paths: set[str]) -> str:
    for v in PREFERRED:
        if v in values:
            return v
    for v in values:
        if v in ctx_paths:
            return v
    return values[-1]


def classify(r: subprocess.CompletedProcess | None) -> str:
    if r is None:
        return "accepted (ran until the time limit)"
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
    if "Traceback" in r.stderr + r.stdout:
        return "traceback"
    if r.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "):
        return "pass"
    if r.returncode == 0:
        return "accepted (exit 0)"
    return f"exit {r.returncode}, {len(lines)} lines"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", required=True, help="the checkout to run the cases in")
    ap.add_argument("--per-entry", type=int, default=4, help="flags sampled per entry point (default: 4)")
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds a case may run (default: 20)")
    ap.add_argument(
        "--good-timeout", type=float, default=10.0, help="seconds the good command may run (default: 10)"
    )
    ap.add_argument("--only", nargs="*", default=None, help="entry points to run (default: all)")
    args = ap.parse_args(argv)
    tree = Path(args.tree).resolve()
    totals: dict[str, dict[str, int]] = {}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        ctx = make_context(tmp / "ctx")
        paths = {ctx.file, ctx.folder, ctx.broken_model}
        for name, entry in sorted(ENTRIES.items()):
            if args.only and name not in args.only:
                continue
            flags = [
                (f, a)
                for f, a in valued_flags(load(entry.target).build_parser())
                if f not in entry.skip and bad_values(a, ctx)
            ][: args.per_entry]
            cmd = (
                [sys.executable, entry.target]
                if entry.target.endswith(".py")
                else [sys.executable, "-m", entry.target]
            )
            counts: dict[str, int] = {}
            env = {**os.environ, **entry.env, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
            env.pop("E2C_CHECK_ONLY", None)
            env["PYTHONPATH"] = str(tree)  # a script in bench/ imports e2c from the tree, not the venv
            # The good command must be accepted by this tree (an older one may lack a flag it names, and
            # would then refuse every case for that reason): it runs until --good-timeout or ends with 0.
            try:
                r = subprocess.run(
                    [*cmd, *fill(entry.good, ctx, tmp / name)],
                    cwd=tree,
                    capture_output=True,
                    text=True,
                    errors="backslashreplace",
                    env=env,
                    timeout=args.good_timeout,
                )
                if r.returncode != 0:
                    line = (r.stderr.strip().splitlines() or [""])[-1][:160]
                    print(f"{name:<34} good command refused here, not compared: {line}", flush=True)
                    totals[name] = {"not compared": len(flags)}
                    continue
            except subprocess.TimeoutExpired:
                pass
            for flag, action in flags:
                bad = pick(bad_values(action, ctx), paths)
                argv_ = [*fill(entry.good, ctx, tmp / name), flag, bad]
                t0 = time.perf_counter()
                try:
                    r = subprocess.run(
                        [*cmd, *argv_],
                        cwd=tree,
                        capture_output=True,
                        text=True,
                        errors="backslashreplace",
                        env=env,
                        timeout=args.timeout,
                    )
                except subprocess.TimeoutExpired:
                    r = None
                verdict = classify(r)
                counts[verdict] = counts.get(verdict, 0) + 1
                print(
                    f"{name:<34} {flag:<26} {bad[:24]!r:<28} {verdict} ({time.perf_counter() - t0:.1f}s)",
                    flush=True,
                )
            totals[name] = counts
    cases = sum(sum(v for k, v in c.items() if k != "not compared") for c in totals.values())
    passed = sum(c.get("pass", 0) for c in totals.values())
    print(json.dumps({"tree": str(tree), "cases": cases, "pass": passed, "entries": totals}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
