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
    "rl_health.png",
    "pass_at_k.png",
    "tts_accuracy_vs_tokens.png",
)

# The RL health plot's panels: (title, [(metrics key, label)]).
HEALTH_PANELS = (
    (
        "reward and its parts",
        [
            ("critic/score/mean", "reward"),
            ("health/train_acc", "train accuracy"),
            ("health/reward_plan", "plan bonus"),
            ("health/reward_overlong", "overlong penalty"),
        ],
    ),
    (
        "signal",
        [
            ("health/zero_var_group_share", "zero-variance groups"),
            ("health/truncated_share", "truncated"),
            ("health/well_formed_share", "well-formed"),
            ("health/correct_malformed_share", "right but malformed"),
            ("e2c/explore_token_share", "exploration share"),
        ],
    ),
    (
        "update",
        [
            ("e2c/adv_abs_before", "|adv| before weighting"),
            ("e2c/adv_abs_after", "|adv| after weighting"),
            ("health/entropy_sampled", "entropy (rollout)"),
            ("actor/pg_clipfrac", "clip fraction"),
        ],
    ),
    (
        "weights moved from the SFT model",
        [
            ("weight_bf16_changed_share_after_step", "bf16 values changed"),
            ("weight_rel_l2_after_step", "relative L2 x 100"),
        ],
    ),
)


def plot_health(rows: Sequence[Mapping[str, Any]], path: Path) -> None:
    """Four panels of the RL run's per-step health (:data:`HEALTH_PANELS`)."""
    plt = pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    for ax, (title, series) in zip(axes.flat, HEALTH_PANELS, strict=True):
        for key, label in series:
            pts = [(r["step"], r[key]) for r in rows if isinstance(r.get(key), int | float)]
            if key == "weight_rel_l2_after_step":
                pts = [(x, 100 * y) for x, y in pts]
            if pts:
                ax.plot(*zip(*pts, strict=True), marker="o", markersize=3, label=label)
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.grid(True, alpha=0.3)
        if ax.lines:
            ax.legend(fontsize=8)
    save_figure(fig, path)


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


def plot_pass_at_k(curves: Mapping[str, Mapping[str, float]], path: Path, title: str) -> None:
    """pass@k against k, one line per model."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for name, curve in curves.items():
        ks = sorted(int(k) for k in curve)
        ax.plot(ks, [100 * curve[str(k)] for k in ks], marker="o", markersize=4, label=name)
    ax.set_xlabel("k (samples)")
    ax.set_ylabel("pass@k (%)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
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
    health = rep["rl"].get("health")
    if health and health["rows"]:
        plot_health(health["rows"], folder / "rl_health.png")
    curves = {
        STAGE_LABEL[k]: e["synthetic"]["pass_at_k"]
        for k, e in (rep.get("eval_sampled") or {}).items()
        if e and (e.get("synthetic") or {}).get("pass_at_k")
    }
    if curves:
        plot_pass_at_k(
            curves, folder / "pass_at_k.png", f"Held-out pass@k ({rep.get('measure', '')} samples)"
        )
    tts_png = None
    if rep["tts"]:
        src = Path(rep["tts"]["results"]).parent / "accuracy_vs_tokens.png"
        if src.is_file():
            shutil.copyfile(src, folder / "tts_accuracy_vs_tokens.png")
            tts_png = folder / "tts_accuracy_vs_tokens.png"
    for name in PLOTS:
        p = folder / name
        made = {
            "tts_accuracy_vs_tokens.png": tts_png,
            "rl_health.png": health and health["rows"],
            "pass_at_k.png": curves,
        }.get(name, True)
        out[name] = str(p.relative_to(ctx.out)) if (p.is_file() and made) else None
    return out
