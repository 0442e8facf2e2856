"""The claims report's PNG plots: per-arm reward curves and accuracies (claim 1), accuracy against tokens
with intervals (claim 2), new- and old-domain accuracy per adaptation method (claim 3)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from e2c.eval.plots import pyplot, save_figure


def plot_weighting(w: Mapping[str, Any], path: Path) -> None:
    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    colors = {}
    for r in w["arms"]:
        color = colors.setdefault(r["coef"], f"C{len(colors)}")
        curve = [x for x in r["reward_curve"] if x is not None]
        ax1.plot(
            range(1, len(curve) + 1),
            curve,
            color=color,
            marker="o",
            alpha=0.7,
            label=f"coef {r['coef']:g}" if r["seed"] == w["arms"][0]["seed"] else None,
        )
    ax1.set_xlabel("RL step")
    ax1.set_ylabel("mean reward (critic/score/mean)")
    ax1.set_title("reward per step, one line per seed")
    ax1.legend(fontsize=8)
    coefs = list(colors)
    for j, coef in enumerate(coefs):
        rs = [r for r in w["arms"] if r["coef"] == coef]
        for k, r in enumerate(rs):
            x = j + (k - (len(rs) - 1) / 2) * 0.12
            lo, hi = r["ci"]
            acc = r["accuracy"]
            ax2.errorbar(
                [x],
                [100 * acc],
                yerr=[[100 * (acc - lo)], [100 * (hi - acc)]],
                fmt="o",
                color=colors[coef],
                capsize=3,
            )
    if w.get("sft_accuracy"):
        ax2.axhline(100 * w["sft_accuracy"]["accuracy"], color="gray", ls="--", label="SFT model")
        ax2.legend(fontsize=8)
    ax2.set_xticks(range(len(coefs)), [f"coef {c:g}" for c in coefs])
    ax2.set_ylabel("held-out accuracy (%), 95% CI")
    ax2.set_title("accuracy per arm (seeds side by side)")
    save_figure(fig, path)


def plot_tts(t: Mapping[str, Any], path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    by: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in t["rows"]:
        by[r["method"]].append(r)
    for i, (m, rs) in enumerate(sorted(by.items())):
        rs = sorted(rs, key=lambda r: r["budget"])
        xs = [max(r["tokens"], 1.0) for r in rs]
        ys = [100 * r["accuracy"] for r in rs]
        err = [
            [100 * (r["accuracy"] - r["ci"][0]) for r in rs],
            [100 * (r["ci"][1] - r["accuracy"]) for r in rs],
        ]
        ax.errorbar(xs, ys, yerr=err, marker="o", capsize=2, label=m, color=f"C{i}", alpha=0.85)
        for x, y, r in zip(xs, ys, rs, strict=True):
            ax.annotate(f"K={r['budget']}", (x, y), fontsize=6, xytext=(3, 3), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_xlabel("generated tokens per problem (log scale)")
    ax.set_ylabel("accuracy (%), 95% CI")
    ax.set_title(f"test-time scaling, {t['problems']} held-out problems")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    save_figure(fig, path)


def plot_adapt(a: Mapping[str, Any], path: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    arms = ("none", "ef_sft", "full_sft")
    for j, dom in enumerate(("new", "old")):
        for i, arm in enumerate(arms):
            cell = a["accuracy"][arm][dom]
            if cell.get("accuracy") is None:
                continue
            acc, (lo, hi) = cell["accuracy"], cell["ci"]
            x = i + (j - 0.5) * 0.35
            ax.bar([x], [100 * acc], width=0.33, color=f"C{j}", label=f"{dom} domain" if i == 0 else None)
            ax.errorbar([x], [100 * acc], yerr=[[100 * (acc - lo)], [100 * (hi - acc)]], color="k", capsize=3)
    ax.set_xticks(range(len(arms)), ["nothing (RL model)", "EF-SFT", "full SFT"])
    ax.set_ylabel("accuracy (%), 95% CI")
    ax.set_title(f"adaptation to {a['family']}")
    ax.legend(fontsize=8)
    save_figure(fig, path)


def write_plots(rep: Mapping[str, Any], folder: Path) -> dict[str, str | None]:
    """Every plot whose experiment has results; ``{name: path or None}``."""
    out: dict[str, str | None] = {}
    for name, fn in (("weighting", plot_weighting), ("tts", plot_tts), ("adapt", plot_adapt)):
        section = rep.get(name)
        if not section:
            out[name] = None
            continue
        path = folder / f"{name}.png"
        fn(section, path)
        out[name] = str(path)
    return out
