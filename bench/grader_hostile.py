#!/usr/bin/env python3
"""Worst case of the grader: seconds per hostile response, and the share graded to a defined reason.

    python bench/grader_hostile.py [--timeout 5] [--repeat 1]

Grades every case of :func:`e2c.rewards.hostile.hostile_corpus` (huge literals, towers, deep nesting,
thousands of boxes, megabyte texts, null bytes, lone surrogates, matrices, MCQ and countdown floods) with
:func:`e2c.rewards.grade`, after warming the verification pool so a worker's start is not counted. Prints
a table of the slowest cases and the reasons, then one JSON line with the worst and median seconds per
response and the share scored (a defined reason other than ``error``, no exception).
"""

from __future__ import annotations

import json
import statistics
import time
from collections import Counter

from e2c.commandline.argtypes import Number, whole
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.parsing import ArgumentParser
from e2c.rewards import grade
from e2c.rewards.hostile import hostile_corpus
from e2c.rewards.math_equiv import default_pool

REASONS = {"correct", "wrong", "no_answer", "timeout", "unparseable_gold"}
# The grader's bound per symbolic check: the pool waits on it with select() and math-verify turns it into
# an alarm, and a negative one waited forever; an hour per check is already no bound at all.
TIMEOUT = Number(float, low=0.0, high=3600.0, low_open=True)


def build_parser() -> ArgumentParser:
    p = ArgumentParser(
        prog="bench/grader_hostile.py", description="Worst-case grading time on a hostile corpus."
    )
    p.add_argument(
        "--timeout", type=TIMEOUT, default=5.0, help="grader timeout per symbolic check, s (default: 5)"
    )
    p.add_argument(
        "--repeat", type=whole(1, 1000), default=1, help="grade the corpus this many times (default: 1)"
    )
    p.add_argument("--top", type=whole(0), default=12, help="slowest cases to list (default: 12)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    checks_done()

    t = time.perf_counter()
    corpus = hostile_corpus()
    build = time.perf_counter() - t
    default_pool().warm_up()

    times: dict[str, float] = {}
    reasons: dict[str, str] = {}
    raised = 0
    for _ in range(args.repeat):
        for c in corpus:
            t = time.perf_counter()
            try:
                r = grade(c.response, c.gold, c.kind, options=c.options, timeout=args.timeout)  # type: ignore[arg-type]
                reason = r.reason
            except Exception as e:  # counted, never hidden: this is what the benchmark looks for
                reason = f"raised {type(e).__name__}"
                raised += 1
            dt = time.perf_counter() - t
            times[c.name] = max(times.get(c.name, 0.0), dt)
            reasons[c.name] = reason

    n = len(corpus)
    scored = sum(reasons[c.name] in REASONS for c in corpus)
    chars = {c.name: len(c.response) for c in corpus}
    print(f"{'case':<32}{'chars':>10}{'seconds':>10}  reason")
    for name, secs in sorted(times.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"{name:<32}{chars[name]:>10}{secs:>10.3f}  {reasons[name]}")
    print(f"cases {n}, built in {build:.2f} s; reasons: {dict(Counter(reasons.values()))}")
    worst = max(times.values())
    print(
        json.dumps(
            {
                "cases": n,
                "timeout_s": args.timeout,
                "worst_s": round(worst, 3),
                "worst_case": max(times, key=times.__getitem__),
                "median_s": round(statistics.median(times.values()), 4),
                "share_scored": round(scored / n, 4),
                "raised": raised,
                "max_chars": max(chars.values()),
            }
        )
    )
    return 0


if __name__ == "__main__":
    run_main(main)
