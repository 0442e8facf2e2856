"""An evaluation run's ``results.json`` (written by ``e2c.eval.run``): the fields a summary reads, and its one
checked reader, used by the comparison, the reports and the chain viewer alike. It sits below both the
evaluation and the viewer, so the viewer reads a run without importing the evaluation."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from e2c.core.errors import UserError
from e2c.core.files import json_kind, read_file_bytes

# The metrics of one dataset in results.json that a summary reads (e2c.eval.metrics.summarize writes them).
SUMMARY_METRICS = (
    "problems",
    "pass@1",
    "format_rate",
    "truncation_rate",
    "no_answer_rate",
    "explore_tokens",
    "execute_tokens",
)


# Shares in [0, 1] among them.
SUMMARY_RATES = ("pass@1", "format_rate", "truncation_rate", "no_answer_rate")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def read_results(path: Path) -> dict[str, Any]:
    """A finished run's ``results.json``, checked for what :func:`run_summary` reads: one UserError line
    naming the file and what is wrong (not UTF-8 JSON, not an object, a dataset or field missing)."""
    try:
        results = json.loads(read_file_bytes(path, missing_ok=False).decode("utf-8"))
    except ValueError as e:  # UnicodeDecodeError included
        raise UserError(f"{path}: not an evaluation results file ({type(e).__name__}: {e})") from None
    if not isinstance(results, dict):
        raise UserError(
            f"{path}: not an evaluation results file (a JSON {json_kind(results)}, not an object)"
        )
    datasets = results.get("datasets")
    if not isinstance(datasets, dict):
        raise UserError(f"{path}: not an evaluation results file (no 'datasets' object)")
    for name, m in datasets.items():
        if not isinstance(m, dict):
            raise UserError(f"{path}: not an evaluation results file (dataset {name!r} is not an object)")
        bad = [k for k in SUMMARY_METRICS if not _number(m.get(k))]
        bad += [k for k in SUMMARY_RATES if k not in bad and not 0 <= m[k] <= 1]
        if "problems" not in bad and (m["problems"] < 0 or m["problems"] != int(m["problems"])):
            bad.append("problems")
        if bad:
            raise UserError(
                f"{path}: not an evaluation results file (dataset {name!r}: no valid {', '.join(bad)})"
            )
    for key in ("config",):
        if not isinstance(results.get(key, {}), dict):
            raise UserError(
                f"{path}: not an evaluation results file ('{key}' is a JSON {json_kind(results[key])}, "
                "not an object)"
            )
    extra = results.get("config", {}).get("extra")
    if extra is not None and not isinstance(extra, dict):
        raise UserError(f"{path}: not an evaluation results file ('config.extra' is not an object)")
    return results
