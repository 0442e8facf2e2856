#!/usr/bin/env python3
"""Grader throughput: verifications per second, serial and pooled.

    python bench/grader.py [--n 400] [--workers 2] [--data-dir ../shared/data/benchmarks]

Four numbers:
- ``grade`` on GSM8K-style integer answers (the in-process fast path);
- ``grade`` end to end on model-style responses (extraction + the in-process numeric fast path, with the
  pool only for what needs symbolic checking), serial;
- math-verify symbolic checks run serially in this process (what a naive reward function does);
- the same symbolic checks through the hard-timeout pool with ``--workers`` processes.

Pairs are LaTeX answers from Minerva Math and OlympiadBench (each against itself and against a
neighbour's answer), so both matches and mismatches are timed. Prints a table, then one JSON line.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

from e2c.commandline.argtypes import EXISTING_DIR, Number, whole
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.parsing import ArgumentParser
from e2c.core.errors import UserError
from e2c.core.paths import benchmarks_dir
from e2c.rewards import grade, last_boxed, reference_answer
from e2c.rewards.math_equiv import _inner, verify_symbolic
from e2c.rewards.pool import HardTimeoutPool

DEFAULT_DATA = benchmarks_dir()
# A bound per check: the pool waits on it with select() and math-verify turns it into an alarm, and both
# overflow long before a float does; an hour per check is already no bound at all.
TIMEOUT = Number(float, low=0.0, high=3600.0, low_open=True)
MAX_PAIRS = 100_000  # every pair is timed four times: hours of symbolic checks already


def read_column(path: Path, pick: Callable[[dict], str | None]) -> list[str]:
    """``pick(row)`` of every JSONL row of ``path`` that yields an answer; a missing file or a row that is
    not what the benchmark copies hold is refused in one line naming the file and line."""
    if not path.is_file():
        raise UserError(
            f"{path} not found; pass --data-dir with the benchmark copies (gsm8k, minerva_math, olympiadbench)"
        )
    out: list[str] = []
    try:
        with path.open(encoding="utf-8") as f:
            for i, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    a = pick(json.loads(line))
                except (ValueError, KeyError, TypeError, AttributeError) as e:
                    raise UserError(
                        f"{path} line {i}: not a benchmark row ({type(e).__name__}: {e})"
                    ) from None
                if a:
                    out.append(a)
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"cannot read {path}: {getattr(e, 'strerror', None) or e}") from None
    if not out:
        raise UserError(f"{path} holds no answers")
    return out


def load_answers(data_dir: Path) -> list[str]:
    """LaTeX answers of Minerva Math and OlympiadBench (the symbolic pairs)."""
    return [
        *read_column(data_dir / "minerva_math.jsonl", lambda r: last_boxed(r["solution"])),
        *read_column(data_dir / "olympiadbench.jsonl", lambda r: reference_answer(r["final_answer"])),
    ]


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog="bench/grader.py", description="Grader throughput, serial and pooled.")
    p.add_argument("--n", type=whole(1, MAX_PAIRS), default=400, help="number of answer pairs (default: 400)")
    p.add_argument(
        "--workers",
        type=whole(1, 1024),
        default=os.cpu_count() or 2,
        help="pool processes (default: CPU count)",
    )
    p.add_argument("--timeout", type=TIMEOUT, default=5.0, help="per-check bound in seconds (default: 5)")
    p.add_argument(
        "--data-dir",
        type=EXISTING_DIR,
        default=DEFAULT_DATA,
        help=f"benchmark copies (default: {DEFAULT_DATA})",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # The inputs are read before the clock starts: a missing or foreign file is one line, not a traceback.
    answers = load_answers(args.data_dir)
    gsm_all = read_column(args.data_dir / "gsm8k.jsonl", lambda r: reference_answer(r["answer"]))
    checks_done()

    pairs = []
    for i in range(args.n):
        a = answers[i % len(answers)]
        b = a if i % 2 == 0 else answers[(i + 1) % len(answers)]
        pairs.append((b, a))  # (prediction, gold)
    inner = _inner(args.timeout)

    t = time.perf_counter()
    end_to_end = [
        grade(f"x</EXPLORATION><EXECUTION>\\boxed{{{pr}}}</EXECUTION>", g, timeout=args.timeout)
        for pr, g in pairs
    ]
    t_grade = time.perf_counter() - t

    gsm = gsm_all[: args.n]
    t = time.perf_counter()
    numeric = [
        grade(f"x</EXPLORATION><EXECUTION>\\boxed{{{g}}}</EXECUTION>", gsm[(i + i % 2) % len(gsm)])
        for i, g in enumerate(gsm)
    ]
    t_numeric = time.perf_counter() - t

    t = time.perf_counter()
    serial = [verify_symbolic(pr, g, inner) for pr, g in pairs]
    t_serial = time.perf_counter() - t

    pool = HardTimeoutPool("e2c.rewards.math_equiv:verify_symbolic", workers=args.workers)
    pool.warm_up()
    t = time.perf_counter()
    pooled = pool.map([(pr, g, inner) for pr, g in pairs], args.timeout)
    t_pool = time.perf_counter() - t
    pool.close()

    agree = sum(a == b for a, b in zip(serial, pooled))
    n = len(pairs)
    rows = [
        ("grade() on GSM8K numbers, serial", len(gsm) / t_numeric, sum(r.correct for r in numeric)),
        ("grade() end to end, serial", n / t_grade, sum(r.correct for r in end_to_end)),
        ("math-verify, serial in-process", n / t_serial, sum(x is True for x in serial)),
        (f"math-verify, pool of {args.workers}", n / t_pool, sum(x is True for x in pooled)),
    ]
    print(f"{'mode':<34}{'verif/s':>10}{'matches':>10}")
    for name, rate, matches in rows:
        print(f"{name:<34}{rate:>10.1f}{matches:>10}")
    print(
        f"pairs {n}, serial/pool agreement {agree}/{n}, pool timeouts {pool.timeouts}, cpus {os.cpu_count()}"
    )
    print(
        json.dumps(
            {
                "n": n,
                "workers": args.workers,
                "grade_numeric_per_s": round(len(gsm) / t_numeric, 1),
                "grade_per_s": round(n / t_grade, 1),
                "serial_per_s": round(n / t_serial, 1),
                "pooled_per_s": round(n / t_pool, 1),
                "pool_speedup": round(t_serial / t_pool, 2),
                "agreement": agree / n,
                "pool_timeouts": pool.timeouts,
            }
        )
    )
    return 0


if __name__ == "__main__":
    run_main(main)
