"""Plots of evaluation runs (matplotlib, Agg backend): accuracy with intervals, format compliance and tokens
per phase, one bar per run and dataset. Used by ``e2c.eval.run`` (several datasets), ``e2c.eval.compare``
(several runs) and the quickstart report (its stages)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def datasets_of(evals: Mapping[str, Any]) -> list[str]:
    """The datasets of any run, synthetic first, then by name."""
    return sorted({d for e in evals.values() if e for d in e}, key=lambda d: (d != "synthetic", d))


def plot_accuracy(evals: Mapping[str, Any], path: Path, title: str = "Accuracy per run") -> None:
    """Accuracy per run (``evals``: label -> dataset -> :func:`e2c.eval.compare.run_summary` entry) and
    dataset, with 95% Wilson intervals."""
    plt = pyplot()
    datasets, stages = datasets_of(evals), list(evals)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    width = 0.8 / max(len(stages), 1)
    for j, s in enumerate(stages):
        xs, ys, lo, hi = [], [], [], []
        for i, d in enumerate(datasets):
            e = evals[s].get(d)
            if not e:
                continue
            xs.append(_bar_x(i, j, len(stages), width))
            ys.append(100 * e["accuracy"])
            lo.append(max(0.0, 100 * (e["accuracy"] - e["ci95"][0])))
            hi.append(max(0.0, 100 * (e["ci95"][1] - e["accuracy"])))
        ax.bar(xs, ys, width, yerr=[lo, hi], capsize=4, label=s)
        for x, y in zip(xs, ys, strict=True):
            ax.annotate(
                f"{y:.1f}",
                (x, y),
                ha="center",
                va="bottom",
                fontsize=8,
                xytext=(0, 2),
                textcoords="offset points",
            )
    ax.set_xticks(range(len(datasets)), [f"{d} (n={_n(evals, d)})" for d in datasets])
    _finish_percent_bars(fig, ax, "accuracy (%), 95% Wilson interval", title, path)


def _bar_x(dataset: int, run: int, runs: int, width: float) -> float:
    """Where run ``run``'s bar of dataset ``dataset`` stands: the runs side by side, centred on the tick."""
    return dataset + (run - (runs - 1) / 2) * width


def _finish_percent_bars(fig: Any, ax: Any, ylabel: str, title: str, path: Path) -> None:
    """Axis labels and limits of a per-run percentage bar chart, then the file."""
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 105)
    ax.set_title(title)
    ax.legend()
    ax.grid(True, axis="y", alpha=0.3)
    save_figure(fig, path)


def _n(evals: Mapping[str, Any], dataset: str) -> int:
    return next((e[dataset]["problems"] for e in evals.values() if e and dataset in e), 0)


def plot_rates(evals: Mapping[str, Any], path: Path, title: str = "Format compliance per run") -> None:
    """Format compliance (well-formed chains) per run and dataset."""
    plt = pyplot()
    datasets, stages = datasets_of(evals), list(evals)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    width = 0.8 / max(len(stages), 1)
    for j, s in enumerate(stages):
        xs = [_bar_x(i, j, len(stages), width) for i, d in enumerate(datasets) if d in evals[s]]
        ys = [100 * evals[s][d]["format_rate"] for d in datasets if d in evals[s]]
        ax.bar(xs, ys, width, label=s)
    ax.set_xticks(range(len(datasets)), datasets)
    _finish_percent_bars(fig, ax, "well-formed chains (%)", title, path)


def plot_tokens(
    evals: Mapping[str, Any], path: Path, title: str = "Exploration and execution tokens per run"
) -> None:
    """Mean exploration and execution tokens per run (stacked), one panel per dataset."""
    plt = pyplot()
    datasets, stages = datasets_of(evals), list(evals)
    fig, axes = plt.subplots(1, max(len(datasets), 1), figsize=(4 * max(len(datasets), 1), 4), squeeze=False)
    for ax, d in zip(axes[0], datasets, strict=False):
        ss = [s for s in stages if d in evals[s]]
        ex = [evals[s][d]["explore_tokens"] for s in ss]
        xe = [evals[s][d]["execute_tokens"] for s in ss]
        labels = list(ss)
        ax.bar(labels, ex, label="exploration")
        ax.bar(labels, xe, bottom=ex, label="execution")
        ax.set_title(d)
        ax.set_ylabel("mean tokens per chain")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    save_figure(fig, path)


def save_figure(fig: Any, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
