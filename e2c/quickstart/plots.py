"""The quickstart report's PNG plots (matplotlib, Agg backend): accuracy, format and token bars per stage,
the SFT loss and RL reward curves, and the TTS accuracy-against-tokens plot copied from its run."""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from e2c.quickstart.context import Context

EVAL_STAGES = ("baseline", "eval_sft", "eval_rl")
STAGE_LABEL = {"baseline": "baseline", "eval_sft": "SFT", "eval_rl": "RL"}
PLOTS = (
    "accuracy.png",
    "format.png",
    "tokens.png",
    "sft_loss.png",
    "rl_reward.png",
    "tts_accuracy_vs_tokens.png",
)


def pct(x: float | None, digits: int = 1) -> str:
    """A share as a percentage for plots and tables; "-" when there is none."""
    return "-" if x is None else f"{100 * x:.{digits}f}%"


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _datasets_and_stages(evals: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """The datasets of any evaluation stage (synthetic first, then by name) and the stages that ran."""
    datasets = sorted({d for e in evals.values() if e for d in e}, key=lambda d: (d != "synthetic", d))
    return datasets, [s for s in EVAL_STAGES if evals.get(s)]


def plot_accuracy(evals: Mapping[str, Any], path: Path) -> None:
    """Accuracy per stage and dataset with 95% Wilson intervals."""
    plt = _plt()
    datasets, stages = _datasets_and_stages(evals)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    width = 0.8 / max(len(stages), 1)
    for j, s in enumerate(stages):
        xs, ys, lo, hi = [], [], [], []
        for i, d in enumerate(datasets):
            e = evals[s].get(d)
            if not e:
                continue
            xs.append(i + (j - (len(stages) - 1) / 2) * width)
            ys.append(100 * e["accuracy"])
            lo.append(max(0.0, 100 * (e["accuracy"] - e["ci95"][0])))
            hi.append(max(0.0, 100 * (e["ci95"][1] - e["accuracy"])))
        ax.bar(xs, ys, width, yerr=[lo, hi], capsize=4, label=STAGE_LABEL[s])
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
    ax.set_ylabel("accuracy (%), 95% Wilson interval")
    ax.set_ylim(0, 105)
    ax.set_title("Held-out accuracy per stage (greedy)")
    ax.legend()
    ax.grid(True, axis="y", alpha=0.3)
    _save(fig, path)


def _n(evals: Mapping[str, Any], dataset: str) -> int:
    return next((e[dataset]["problems"] for e in evals.values() if e and dataset in e), 0)


def plot_rates(evals: Mapping[str, Any], path: Path) -> None:
    """Format compliance (well-formed chains) per stage and dataset."""
    plt = _plt()
    datasets, stages = _datasets_and_stages(evals)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    width = 0.8 / max(len(stages), 1)
    for j, s in enumerate(stages):
        xs = [i + (j - (len(stages) - 1) / 2) * width for i, d in enumerate(datasets) if d in evals[s]]
        ys = [100 * evals[s][d]["format_rate"] for d in datasets if d in evals[s]]
        ax.bar(xs, ys, width, label=STAGE_LABEL[s])
    ax.set_xticks(range(len(datasets)), datasets)
    ax.set_ylabel("well-formed chains (%)")
    ax.set_ylim(0, 105)
    ax.set_title("Format compliance per stage")
    ax.legend()
    ax.grid(True, axis="y", alpha=0.3)
    _save(fig, path)


def plot_tokens(evals: Mapping[str, Any], path: Path) -> None:
    """Mean exploration and execution tokens per stage (stacked), one panel per dataset."""
    plt = _plt()
    datasets, stages = _datasets_and_stages(evals)
    fig, axes = plt.subplots(1, max(len(datasets), 1), figsize=(4 * max(len(datasets), 1), 4), squeeze=False)
    for ax, d in zip(axes[0], datasets, strict=False):
        ss = [s for s in stages if d in evals[s]]
        ex = [evals[s][d]["explore_tokens"] for s in ss]
        xe = [evals[s][d]["execute_tokens"] for s in ss]
        labels = [STAGE_LABEL[s] for s in ss]
        ax.bar(labels, ex, label="exploration")
        ax.bar(labels, xe, bottom=ex, label="execution")
        ax.set_title(d)
        ax.set_ylabel("mean tokens per chain")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Exploration and execution tokens per stage")
    _save(fig, path)


def plot_curve(
    xs: Sequence[float], series: Mapping[str, Sequence[float]], path: Path, title: str, ylabel: str
) -> None:
    """A line plot of one or more per-step series (a note when there is nothing to plot)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    if not xs:
        ax.text(
            0.5, 0.5, "no data (stage missing or skipped)", ha="center", va="center", transform=ax.transAxes
        )
    for name, ys in series.items():
        ax.plot(xs, ys, marker="o", markersize=3, label=name)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    if len(series) > 1:
        ax.legend()
    _save(fig, path)


def _save(fig: Any, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_plots(rep: Mapping[str, Any], ctx: Context, folder: Path) -> dict[str, str | None]:
    """Every plot of the report into ``folder``; ``{name: path or None}`` (None: nothing to plot)."""
    out: dict[str, str | None] = {}
    evals = {k: v for k, v in rep["eval"].items() if v}
    plot_accuracy(evals, folder / "accuracy.png")
    plot_rates(evals, folder / "format.png")
    plot_tokens(evals, folder / "tokens.png")
    losses = rep["sft"]["losses"]
    plot_curve(
        [int(k) for k in losses],
        {"train loss": list(losses.values())},
        folder / "sft_loss.png",
        "SFT training loss",
        "loss",
    )
    curve = rep["rl"]["curve"]
    series = {"reward (mean)": [r["reward"] for r in curve]}
    if curve and all("accuracy" in r for r in curve):
        series["accuracy (mean)"] = [r["accuracy"] for r in curve]
    plot_curve([r["step"] for r in curve], series, folder / "rl_reward.png", "GRPO stage 2 reward", "reward")
    tts_png = None
    if rep["tts"]:
        src = Path(rep["tts"]["results"]).parent / "accuracy_vs_tokens.png"
        if src.is_file():
            shutil.copyfile(src, folder / "tts_accuracy_vs_tokens.png")
            tts_png = folder / "tts_accuracy_vs_tokens.png"
    for name in PLOTS:
        p = folder / name
        out[name] = str(p.relative_to(ctx.out)) if (p.is_file() and (name != PLOTS[-1] or tts_png)) else None
    return out
