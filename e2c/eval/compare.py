"""Evaluation runs side by side: ``python -m e2c.eval.compare RUN_DIR [RUN_DIR ...]``.

Each run folder is what ``e2c.eval.run`` wrote (``results.json`` and ``predictions/``). Per dataset and run:
accuracy (pass@1) with a 95% Wilson interval over problems, format compliance, and mean exploration and
execution tokens; for every run after the first, the paired difference to the first on the problems both
hold (mean of per-problem differences and its standard error). ``--plot-dir`` writes ``accuracy.png`` and
``tokens.png``. The last line printed is one JSON object. The quickstart report reads its evaluations with
:func:`run_summary` too.

    python -m e2c.eval.compare outputs/quickstart/baseline outputs/quickstart/eval_sft --labels base SFT
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2c.commandline.argtypes import OUTPUT_DIR, TEXT
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.flags import add_setting_flags, from_flags, setting
from e2c.commandline.parsing import ArgumentParser
from e2c.core.errors import UserError
from e2c.core.files import read_records
from e2c.core.results import read_results
from e2c.core.stats import align_scores, paired_difference, wilson_interval
from e2c.eval.plots import plot_accuracy, plot_tokens


def per_problem_counts(predictions: Path) -> dict[str, tuple[int, int]]:
    """``{problem id: (samples, correct)}`` from an eval predictions file (empty when it does not exist).
    A line that is not a prediction (no ``id`` or ``correct``) is a UserError naming the file and line."""
    by_id: dict[str, list[int]] = {}
    if not predictions.is_file():
        return {}
    for n, row in read_records(predictions, what="prediction line", hint="rerun the evaluation"):
        missing = [k for k in ("id", "correct") if k not in row]
        if missing:
            raise UserError(
                f"{predictions} line {n}: not a prediction line (no {' or '.join(missing)} field); "
                "rerun the evaluation"
            )
        cell = by_id.setdefault(str(row["id"]), [0, 0])
        cell[0] += 1
        cell[1] += int(bool(row["correct"]))
    return {k: (n, c) for k, (n, c) in by_id.items()}


def per_problem_scores(predictions: Path) -> dict[str, float]:
    """``{problem id: score}`` from an eval predictions file: the mean correctness of its samples (with
    several samples per problem, the paper's Pass@1 averaged over samples)."""
    return {k: c / n for k, (n, c) in per_problem_counts(predictions).items()}


def run_summary(run_dir: Path) -> dict[str, Any] | None:
    """Per dataset of one evaluation run: accuracy (the results file's pass@1), correct / problems with a
    95% Wilson interval, format compliance, truncation, no-answer rate, exploration / execution tokens.
    None when the run has no ``results.json`` (not run, or not finished); a UserError naming the file when
    it or a predictions file cannot be read as a run's."""
    path = run_dir / "results.json"
    if not path.is_file():
        return None
    results = read_results(path)
    config = results.get("config", {})
    out: dict[str, Any] = {}
    for name, m in results["datasets"].items():
        scores = per_problem_scores(run_dir / "predictions" / f"{name}.jsonl")
        n = int(m["problems"])
        correct = round(sum(scores.values())) if scores else round(m["pass@1"] * n)
        if correct > n:
            raise UserError(
                f"{run_dir}: predictions/{name}.jsonl has {correct} problems right, results.json counts "
                f"{n} problems; the two files are of different runs"
            )
        lo, hi = wilson_interval(correct, n)
        out[name] = {
            "accuracy": m["pass@1"],
            "correct": correct,
            "problems": n,
            "ci95": [lo, hi],
            "format_rate": m["format_rate"],
            "truncation_rate": m["truncation_rate"],
            "no_answer_rate": m["no_answer_rate"],
            "explore_tokens": m["explore_tokens"],
            "execute_tokens": m["execute_tokens"],
            "seconds": results.get("seconds"),
            "model": config.get("model"),
            "model_description": (config.get("extra") or {}).get("model_description"),
        }
    return out


def compare_runs(run_dirs: Sequence[Path], labels: Sequence[str]) -> dict[str, Any]:
    """Summaries of every run (by label) and, per dataset, each later run's paired difference to the first.

    Raises :class:`UserError` for a folder without a finished evaluation, naming it."""
    runs: dict[str, Any] = {}
    for d, label in zip(run_dirs, labels, strict=True):
        if not d.is_dir():
            raise UserError(f"{d}: no such run folder")
        summary = run_summary(d)
        if summary is None:
            raise UserError(f"{d}: no results.json (not an evaluation run, or not finished)")
        runs[label] = summary
    first = labels[0]
    before = {name: per_problem_scores(run_dirs[0] / "predictions" / f"{name}.jsonl") for name in runs[first]}
    paired: dict[str, dict[str, Any]] = {}
    for label, d in zip(labels[1:], run_dirs[1:], strict=True):
        for name in runs[label]:
            if name not in before:
                continue
            after = per_problem_scores(d / "predictions" / f"{name}.jsonl")
            a, b, _ = align_scores(after, before[name])
            paired.setdefault(name, {})[label] = paired_difference(a, b)
    return {"runs": runs, "paired_vs_first": paired, "first": first}


def pct(x: float | None, digits: int = 1) -> str:
    """A share as a percentage for plots and tables; "-" when there is none."""
    return "-" if x is None else f"{100 * x:.{digits}f}%"


def format_comparison(cmp: Mapping[str, Any]) -> str:
    """The side-by-side table: one block per dataset, one row per run."""
    runs = cmp["runs"]
    datasets = sorted({d for r in runs.values() for d in r}, key=lambda d: (d != "synthetic", d))
    width = max(12, *(len(k) + 2 for k in runs))
    head = f"{'run':<{width}}{'accuracy':>10}{'95% interval':>17}{'n':>6}{'format':>8}{'explore':>9}{'execute':>9}"
    lines = []
    for name in datasets:
        lines += [f"== {name}", head + f"{'vs ' + cmp['first']:>22}"]
        for label, r in runs.items():
            e = r.get(name)
            if e is None:
                lines.append(f"{label:<{width}}  (not evaluated)")
                continue
            ci = f"{pct(e['ci95'][0])}-{pct(e['ci95'][1])}"
            diff = cmp["paired_vs_first"].get(name, {}).get(label)
            vs = (
                ""
                if diff is None or diff["mean"] is None
                else f"{100 * diff['mean']:+.1f} (SE {100 * diff['se']:.1f})"
            )
            lines.append(
                f"{label:<{width}}{pct(e['accuracy']):>10}{ci:>17}{e['problems']:>6}{pct(e['format_rate'], 0):>8}"
                f"{e['explore_tokens']:>9.1f}{e['execute_tokens']:>9.1f}{vs:>22}"
            )
    return "\n".join(lines)


@dataclass(frozen=True)
class CompareSettings:
    """The command line: each field is one flag (``python -m e2c.eval.compare --help``)."""

    runs: tuple[str, ...] = field(
        default=(), metadata=setting("evaluation run folders (e2c.eval.run --output-dir)", flag="runs")
    )
    labels: tuple[str, ...] | None = field(
        default=None,
        metadata=setting("a name per run (default: the folder names)", flag="--labels", value=TEXT),
    )
    plot_dir: str | None = field(
        default=None,
        metadata=setting(
            "write accuracy.png and tokens.png here (default: none)", flag="--plot-dir", value=OUTPUT_DIR
        ),
    )


def build_parser() -> ArgumentParser:
    """The command line: run folders, their names, where plots go (checked before any file is read)."""
    ap = ArgumentParser(prog="python -m e2c.eval.compare", description=__doc__.split("\n\n")[0])
    add_setting_flags(ap, CompareSettings)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = from_flags(build_parser().parse_args(argv), CompareSettings)
    runs = [Path(r) for r in args.runs]
    labels = list(args.labels or [p.name or str(p) for p in runs])
    if len(labels) != len(runs):
        raise UserError(f"--labels gives {len(labels)} names for {len(runs)} runs; give one per run")
    if len(set(labels)) != len(labels):
        raise UserError(f"run names must differ, got {' '.join(labels)}; name them with --labels")
    cmp = compare_runs(runs, labels)
    checks_done()
    print(format_comparison(cmp))
    if args.plot_dir is not None:
        plots = Path(args.plot_dir)
        plot_accuracy(cmp["runs"], plots / "accuracy.png", "Accuracy per run")
        plot_tokens(cmp["runs"], plots / "tokens.png", "Exploration and execution tokens per run")
        print(f"plots: {plots / 'accuracy.png'}, {plots / 'tokens.png'}")
    print(json.dumps(cmp))
    return 0


if __name__ == "__main__":
    run_main(main)
