"""The quickstart report's PNG plots (matplotlib, Agg backend): accuracy, format and token bars per stage,
the SFT loss and RL reward curves, and the TTS accuracy-against-tokens plot copied from its run."""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from e2c.eval.plots import plot_accuracy, plot_rates, plot_tokens, pyplot, save_figure
from e2c.quickstart.context import Context

EVAL_STAGES = ("baseline", "eval_sft", "eval_rl", "eval_control")
STAGE_LABEL = {"baseline": "baseline", "eval_sft": "SFT", "eval_rl": "RL", "eval_control": "control"}
PLOTS = (
    "accuracy.png",
    "format.png",
    "tokens.png",
    "sft_loss.png",
    "rl_reward.png",
    "tts_accuracy_vs_tokens.png",
)


def plot_curve(
    xs: Sequence[float], series: Mapping[str, Sequence[float]], path: Path, title: str, ylabel: str
) -> None:
    """A line plot of one or more per-step series (a note when there is nothing to plot)."""
    plt = pyplot()
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
    save_figure(fig, path)


def write_plots(rep: Mapping[str, Any], ctx: Context, folder: Path) -> dict[str, str | None]:
    """Every plot of the report into ``folder``; ``{name: path or None}`` (None: nothing to plot)."""
    out: dict[str, str | None] = {}
    evals = {STAGE_LABEL[k]: rep["eval"][k] for k in EVAL_STAGES if rep["eval"].get(k)}
    plot_accuracy(evals, folder / "accuracy.png", "Held-out accuracy per stage (greedy)")
    plot_rates(evals, folder / "format.png", "Format compliance per stage")
    plot_tokens(evals, folder / "tokens.png", "Exploration and execution tokens per stage")
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
