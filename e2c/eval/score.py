"""Re-score any JSONL (or parquet) of responses with the project's grader.

    python -m e2c.eval.score FILE --response-key K --answer-key K [--kind KIND]

Keys may be dotted paths with list indices (``reward_model.ground_truth``, ``solution.0``). Every response must
be a string (anything else stops the run with one line naming the row and key); a reference may be a string,
a number, a list or null (counted as ``unparseable_gold``), an object only for a kind whose reference is one.
``--kind`` is an answer kind of :mod:`e2c.rewards.kinds`; with ``code`` the answers run on the reference's
tests in the sandbox, checked to run ``print(1)`` first. Prints a table and, last, one JSON object (``n``,
``correct``, ``accuracy``, failure counts). ``--out`` must not be the input and is checked before grading.
More: docs/chain-format-and-grader.md, "Re-scoring a predictions file".
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2c.chain import FORMATS, get_format
from e2c.commandline.argtypes import OUTPUT_FILE, TEXT, positive, whole
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.flags import add_setting_flags, from_flags, setting
from e2c.commandline.parsing import ArgumentParser
from e2c.core.errors import UserError
from e2c.core.files import check_output_file
from e2c.data.io import json_type, read_rows, write_jsonl
from e2c.rewards.grader import GradeResult, as_options, grade_many
from e2c.rewards.kinds import ANSWER_KINDS, DEFAULT_KIND, Kind, find_kind, kind_names, runs_programs
from e2c.sandbox import SANDBOX_HELP, Sandbox, use
from e2c.sandbox import setting as sandbox_setting

_MISSING = object()
_INDEX = re.compile(r"-?[0-9]+")


def get_path(row: dict[str, Any], key: str) -> Any:
    """``row[key]`` with dotted paths into nested dicts and lists (``a.b.0``); a sentinel when absent."""
    if key in row:
        return row[key]
    cur: Any = row
    for part in key.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and _INDEX.fullmatch(part) and -len(cur) <= int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return _MISSING
    return cur


def _check_response(v: Any, where: str, key: str) -> str:
    if isinstance(v, str):
        return v
    hint = f"; for one item of a list use {key}.0" if isinstance(v, (list, tuple)) and v else ""
    raise UserError(f"{where}: --response-key {key!r} is {json_type(v)}, not a string{hint}")


def _check_gold(v: Any, where: str, key: str, kind: str) -> Any:
    # A countdown reference is an object ({"target", "numbers"}: its kind's `object_gold`); elsewhere an
    # object or a boolean would be graded as its Python spelling, which no response should match.
    spec = find_kind(kind)
    bad = isinstance(v, bool) or (isinstance(v, dict) and not (spec is not None and spec.object_gold))
    if isinstance(v, float) and math.isnan(v):  # JSON's NaN literal: no answer equals it
        raise UserError(f"{where}: --answer-key {key!r} is NaN, not an answer")
    if isinstance(v, (list, tuple)):
        bad = any(isinstance(x, (dict, list, tuple, bool)) for x in v)
    if bad:
        what = json_type(v)
        if isinstance(v, (list, tuple)):
            what += " with a nested value"
        objects = " or ".join(f"--kind {k}" for k in kind_names(lambda k: k.object_gold))
        raise UserError(
            f"{where}: --answer-key {key!r} is {what}; a reference is a string, a number or a list of "
            f"them" + (f" (an object only for {objects})" if objects else "")
        )
    return v


def score_file(
    path: Path,
    response_key: str,
    answer_key: str,
    kind: Kind = DEFAULT_KIND,
    options_key: str = "options",
    chain_format: str = "e2c",
    fallback_number: bool = False,
    timeout: float = 5.0,
    workers: int = 4,
    limit: int | None = None,
    sandbox: Sandbox | None = None,
) -> tuple[list[dict[str, Any]], list[GradeResult]]:
    """Grade every row of a file; returns the rows and their results. Raises UserError on bad input.
    ``sandbox``: where programs run (a kind that runs them; None: the one ``$E2C_SANDBOX`` names)."""
    rows = []
    for i, row in enumerate(read_rows(path)):
        if limit is not None and i >= limit:
            break
        rows.append(row)
    if not rows:
        raise UserError(f"{path}: no rows")
    keys = sorted(rows[0])
    for key, what in ((response_key, "--response-key"), (answer_key, "--answer-key")):
        if get_path(rows[0], key) is _MISSING:
            raise UserError(f"{what} {key!r} not in {path.name}; fields: {', '.join(keys)}")
    responses, golds, opts = [], [], []
    for n, row in enumerate(rows, 1):
        r, g = get_path(row, response_key), get_path(row, answer_key)
        if r is _MISSING or g is _MISSING:
            missing = response_key if r is _MISSING else answer_key
            raise UserError(f"{path.name} row {n}: field {missing!r} missing")
        responses.append(_check_response(r, f"{path.name} row {n}", response_key))
        golds.append(_check_gold(g, f"{path.name} row {n}", answer_key, kind))
        o = get_path(row, options_key)
        opts.append(as_options(None if o is _MISSING else o))
    fmt = None if chain_format == "none" else get_format(chain_format)
    results = grade_many(
        responses,
        golds,
        kind,
        options=opts,
        fmt=fmt,
        fallback_number=fallback_number,
        timeout=timeout,
        workers=workers,
        sandbox=sandbox,
    )
    return rows, results


def summarize(results: list[GradeResult]) -> dict[str, Any]:
    """Counts and accuracy over graded results."""
    n = len(results)
    reasons = Counter(r.reason for r in results)
    correct = sum(r.correct for r in results)
    return {
        "n": n,
        "correct": correct,
        "accuracy": correct / n if n else 0.0,
        "no_answer": reasons.get("no_answer", 0),
        "timeout": reasons.get("timeout", 0),
        "unparseable_gold": reasons.get("unparseable_gold", 0),
        "error": reasons.get("error", 0),
        "well_formed": sum(r.chain_status == "ok" for r in results),
        "methods": dict(Counter(r.method for r in results)),
    }


def _kinds_help() -> str:
    # Read when the parser is built: every kind of the table is a choice, with its own summary.
    kinds = "; ".join(f"{k.name}: {k.summary}" for k in ANSWER_KINDS.values())
    return f"answer kind ({kinds}) (default: {DEFAULT_KIND})"


@dataclass(frozen=True)
class ScoreSettings:
    """The command line: each field is one flag (``python -m e2c.eval.score --help``)."""

    file: str = field(
        default="", metadata=setting("JSONL, JSON list or parquet file of responses", flag="file")
    )
    response_key: str = field(
        default="response",
        metadata=setting(
            "field with the response text; every value must be a string, a dotted path picks a list item "
            "(response.0) (default: response)",
            flag="--response-key",
            value=TEXT,
        ),
    )
    answer_key: str = field(
        default="answer",
        metadata=setting(
            "field with the reference answer (default: answer)", flag="--answer-key", value=TEXT
        ),
    )
    kind: str = field(default=DEFAULT_KIND, metadata=setting(_kinds_help, flag="--kind", choices=kind_names))
    options_key: str = field(
        default="options",
        metadata=setting(
            "field with MCQ options {letter: text} (default: options)", flag="--options-key", value=TEXT
        ),
    )
    format: str = field(
        default="e2c",
        metadata=setting(
            "chain format to parse before extracting the answer; 'none' grades the raw text (default: e2c)",
            flag="--format",
            choices=[*FORMATS, "none"],
        ),
    )
    fallback_number: bool = field(
        default=False,
        metadata=setting(
            "accept the last number when no explicit answer is found (for reference solutions)",
            flag="--fallback-number",
        ),
    )
    timeout: float = field(
        default=5.0,
        metadata=setting(
            "hard bound per symbolic check, seconds (default: 5)", flag="--timeout", value=positive()
        ),
    )
    workers: int = field(
        default=4,
        metadata=setting("concurrent grading threads (default: 4)", flag="--workers", value=whole(1, 1024)),
    )
    limit: int | None = field(
        default=None,
        metadata=setting("grade only the first N rows (default: all)", flag="--limit", value=whole(1)),
    )
    out: str | None = field(
        default=None,
        metadata=setting(
            "write per-row results as JSONL here (default: none)", flag="--out", value=OUTPUT_FILE
        ),
    )
    show_wrong: int = field(
        default=0,
        metadata=setting("print up to N wrong rows (default: 0)", flag="--show-wrong", value=whole(0)),
    )
    sandbox: str | None = field(
        default=None,
        metadata=setting(f"{SANDBOX_HELP} (--kind code)", flag="--sandbox", value=TEXT, metavar="SPEC"),
    )


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="python -m e2c.eval.score", description=__doc__.split("\n\n")[0])
    add_setting_flags(p, ScoreSettings)
    return p


def check_args(args: ScoreSettings) -> None:
    """An --out that would overwrite the input (the flags' values are checked by their types)."""
    if args.out is not None:  # before grading, so that a bad path costs no work and never a file
        check_output_file(Path(args.out), "--out", [Path(args.file)])


def main(argv: list[str] | None = None) -> int:
    args = from_flags(build_parser().parse_args(argv), ScoreSettings)
    check_args(args)
    spec = sandbox_setting(
        args.sandbox
    )  # with $E2C_SANDBOX_WORKERS: one line for a bad value, whatever the kind
    sandbox = None
    if runs_programs([args.kind]):  # programs as answers: a sandbox that does not run one stops here
        sandbox = use(spec, print, "score")
    checks_done()
    t0 = time.perf_counter()
    _, results = score_file(
        Path(args.file),
        args.response_key,
        args.answer_key,
        kind=args.kind,
        options_key=args.options_key,
        chain_format=args.format,
        fallback_number=args.fallback_number,
        timeout=args.timeout,
        workers=args.workers,
        limit=args.limit,
        sandbox=sandbox,
    )
    secs = time.perf_counter() - t0
    if args.out:
        write_jsonl(({"row": i, **r.to_dict()} for i, r in enumerate(results)), args.out)
    s = summarize(results)
    print(f"{'file':<14}{Path(args.file).name}")
    for k in ("n", "correct", "no_answer", "timeout", "unparseable_gold", "error", "well_formed"):
        print(f"{k:<14}{s[k]}")
    print(f"{'accuracy':<14}{s['accuracy']:.4f}")
    print(f"{'answers by':<14}{', '.join(f'{k}={v}' for k, v in sorted(s['methods'].items()))}")
    print(f"{'seconds':<14}{secs:.2f}")
    shown = 0
    for i, r in enumerate(results):
        if shown >= args.show_wrong:
            break
        if not r.correct:
            shown += 1
            print(
                f"  wrong row {i}: extracted={r.extracted!r} gold={r.gold!r} reason={r.reason}",
                file=sys.stderr,
            )
    summary = {
        k: s[k] for k in ("n", "correct", "accuracy", "no_answer", "timeout", "unparseable_gold", "error")
    }
    print(json.dumps({"file": str(Path(args.file)), "kind": args.kind, **summary, "seconds": round(secs, 3)}))
    return 0


if __name__ == "__main__":
    run_main(main)
