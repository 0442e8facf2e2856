"""The quickstart's pages (``e2c.view``): the comparisons a user wants after the run (SFT against RL; RL
against its equal-token control; SFT against the baseline), then one per evaluation stage, written beside
the report by :func:`e2c.view.write_pages` and linked from it.

Each page reads a stage's sampled run (the paper's measure, avg@k) where it was run, else its greedy run."""

from __future__ import annotations

from pathlib import Path

from e2c.quickstart.context import Context, read_done
from e2c.quickstart.plots import EVAL_STAGES, STAGE_LABEL
from e2c.quickstart.stages import sampled_dir
from e2c.view import Page

# (second, first): each page shows the second stage against the first, gained and lost problems first.
COMPARISONS = (("eval_rl", "eval_sft"), ("eval_rl", "eval_control"), ("eval_sft", "baseline"))


def page_source(ctx: Context, stage: str) -> Path | None:
    """The run a stage's page reads: its sampled run when there is one, else its greedy run; None when the
    stage did not finish."""
    folder = ctx.dir(stage)
    if read_done(folder) is None:
        return None
    found = [f for f in (sampled_dir(folder), folder) if (f / "results.json").is_file()]
    return found[0] if found else None


def page_name(second: str, first: str | None = None) -> str:
    """``view-<stage>.html``, or ``view-<first>-vs-<second>.html`` for a comparison."""
    label = STAGE_LABEL
    if first is None:
        return f"view-{label[second].lower()}.html"
    return f"view-{label[first].lower()}-vs-{label[second].lower()}.html"


def quickstart_pages(ctx: Context) -> list[Page]:
    """The pages of a quickstart run: the comparisons whose two stages were measured the same way (both
    sampled, or both greedy), then one per finished evaluation stage."""
    sources = {s: page_source(ctx, s) for s in EVAL_STAGES}
    pages = []
    for second, first in COMPARISONS:
        a, b = sources[first], sources[second]
        if a is not None and b is not None and a.name == b.name:
            how = "sampled" if a.name == "sampled" else "greedy"
            labels = (STAGE_LABEL[first], STAGE_LABEL[second])
            what = f"{labels[1]} against {labels[0]}, gained and lost problems first ({how})"
            pages.append(Page(page_name(second, first), (a, b), labels, what))
    for stage, src in sources.items():
        if src is not None:
            how = "sampled" if src.name == "sampled" else "greedy"
            label = STAGE_LABEL[stage]
            pages.append(Page(page_name(stage), (src,), (label,), f"{label}, every chain ({how})"))
    return pages
