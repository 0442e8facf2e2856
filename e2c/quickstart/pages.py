"""The quickstart's pages (``e2c.view``): one per evaluation stage and the comparisons a user wants after the
run (SFT against RL; RL against its equal-token control), written beside the report and linked from it.

Each page reads a stage's sampled run (the paper's measure, avg@k) where it was run, else its greedy run. A
page that cannot be built (a stage's folder cut short) is named in the report instead: the pages come after
every number, so they never cost the report."""

from __future__ import annotations

from pathlib import Path

from e2c.errors import UserError
from e2c.quickstart.context import Context, read_done, rel
from e2c.quickstart.plots import EVAL_STAGES, STAGE_LABEL
from e2c.quickstart.stages import sampled_dir
from e2c.view import left_out_line, view_payload, write_page

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


def write_pages(ctx: Context, folder: Path) -> dict[str, dict[str, str | None]]:
    """Every page into ``folder``: ``{name: {"path", "what", "note"}}`` (``path`` relative to the run's
    folder; None with a ``note`` saying why when a page could not be built)."""
    sources = {s: page_source(ctx, s) for s in EVAL_STAGES}
    jobs: list[tuple[str, list[Path], list[str], str]] = []
    for stage, src in sources.items():
        if src is not None:
            how = "sampled" if src.name == "sampled" else "greedy"
            jobs.append(
                (page_name(stage), [src], [STAGE_LABEL[stage]], f"{STAGE_LABEL[stage]}, every chain ({how})")
            )
    for second, first in COMPARISONS:
        a, b = sources[first], sources[second]
        if a is not None and b is not None and a.name == b.name:  # both sampled, or both greedy
            how = "sampled" if a.name == "sampled" else "greedy"
            what = (
                f"{STAGE_LABEL[second]} against {STAGE_LABEL[first]}, gained and lost problems first ({how})"
            )
            jobs.append((page_name(second, first), [a, b], [STAGE_LABEL[first], STAGE_LABEL[second]], what))
    out: dict[str, dict[str, str | None]] = {}
    for name, runs, labels, what in jobs:
        target = folder / name
        try:
            payload = view_payload(runs, labels)
        except UserError as e:
            out[name] = {"path": None, "what": what, "note": str(e)}
            continue
        write_page(payload, target)
        out[name] = {"path": rel(target, ctx.out), "what": what, "note": left_out_line(payload)}
    return out


def page_lines(pages: dict[str, dict[str, str | None]]) -> list[str]:
    """The report's "Pages" section: a link per page, comparisons first."""
    if not pages:
        return []
    L = [
        "## Pages\n",
        "Every chain of the run, readable in the browser (one self-contained file each, `python -m e2c.view`): "
        "phases split and coloured, verdicts and malformations marked, filters and search.\n",
    ]
    ordered = sorted(pages.items(), key=lambda kv: "-vs-" not in kv[0])
    for name, p in ordered:
        if p["path"]:
            L.append(f"- [{name}]({p['path']}): {p['what']}" + (f"; {p['note']}" if p["note"] else ""))
        else:
            L.append(f"- {name}: not written ({p['note']})")
    return [*L, ""]
