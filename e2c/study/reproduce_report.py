"""The reproduction's ``report.md`` and ``report.json``, in the quickstart report's form, from the study's
numbers (``study.json``, :mod:`e2c.study.report`) and its units' files.

What it shows: SFT, RL and (with ``--with-control``) the equal-token SFT control on the held-out problems,
avg@k at T 1.0 and greedy with their intervals; RL - SFT (and RL - control) paired per problem with its SE,
interval, problems that rose and fell and a one-word verdict; pass@k; per task family; the RL run's health
per step; the time of every unit (interrupted attempts included); the viewer's pages of each compared pair.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from e2c.core.files import atomic_write_json, atomic_write_text
from e2c.eval.compare import pct
from e2c.quickstart.plots import plot_curve, plot_health, plot_pass_at_k
from e2c.quickstart.progress import fmt_seconds
from e2c.quickstart.report import health_lines, system_info, trend
from e2c.quickstart.stages import rl_curve, sft_losses
from e2c.rl.health import format_warning, health_table, signal_verdict
from e2c.study.report import ci_text
from e2c.study.units import CONFIRM, read_json, train_key
from e2c.view import page_lines

# The kind of work each unit does, as the time table groups it.
STAGE_OF_KIND = {
    "data": "data",
    "validation": "data",
    "sft": "SFT training",
    "sft_continue": "SFT training",
    "sft_matched": "control training",
    "filter": "pass-rate filter",
    "rl": "RL training",
    "eval": "evaluation",
}
PLOT_FOLDER = "report"


def project_path(path: str) -> str:
    """A path inside a checkout, from its ``configs/`` folder on (the checkout that ran it is not the
    reader's); any other path as it is.

    >>> project_path("/work/clone/configs/study/reproduce.toml"), project_path("/tmp/s.toml")
    ('configs/study/reproduce.toml', '/tmp/s.toml')
    """
    parts = Path(path).parts
    return "/".join(parts[parts.index("configs") :]) if "configs" in parts else path


def attempt_count(folder: Path) -> int:
    """How many runs a finished unit took: its interrupted attempts (``attempts.json``) and the last."""
    try:
        earlier = json.loads((folder / "attempts.json").read_text())
    except (OSError, ValueError):
        return 1
    return 1 + (len(earlier) if isinstance(earlier, list) else 0)


def unit_times(out: Path) -> list[dict[str, Any]]:
    """Every finished unit of the run folder, in the order they finished: its key, kind, seconds (its
    interrupted attempts included) and how many attempts it took."""
    rows = []
    for done_file in out.rglob("DONE.json"):
        done = read_json(done_file)
        folder = done_file.parent
        # a unit's DONE.json names its own folder; the stages' inner DONE files do not
        if not done or done.get("unit") != folder.relative_to(out).as_posix():
            continue
        rows.append(
            {
                "unit": done["unit"],
                "kind": done.get("kind"),
                "stage": STAGE_OF_KIND.get(str(done.get("kind")), str(done.get("kind"))),
                "seconds": float(done.get("seconds") or 0.0),
                "attempts": attempt_count(folder),
                "finished_at": done.get("finished_at"),
            }
        )
    return sorted(rows, key=lambda r: (str(r["finished_at"]), r["unit"]))


def stage_totals(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Seconds per stage (:data:`STAGE_OF_KIND`), in the order the stages first finished.

    >>> stage_totals([{"stage": "data", "seconds": 2.0}, {"stage": "evaluation", "seconds": 3.0},
    ...               {"stage": "data", "seconds": 1.0}])
    {'data': 3.0, 'evaluation': 3.0}
    """
    totals: dict[str, float] = {}
    for r in rows:
        totals[r["stage"]] = totals.get(r["stage"], 0.0) + float(r["seconds"])
    return totals


def roles(study_rep: Mapping[str, Any], rl_arm: str, control_arm: str) -> dict[str, str]:
    """``{arm: label}`` of the confirmed arms: the RL arm's start is "SFT", the RL arm "RL", the control
    "control"; in that order."""
    arms = study_rep["arms"]
    confirmed = study_rep["selection"]["confirmed"]
    order = [(arms[rl_arm]["start"], "SFT"), (rl_arm, "RL"), (control_arm, "control")]
    return {a: label for a, label in order if a in confirmed and arms.get(a, {}).get(CONFIRM)}


def rl_health(out: Path, rl_arm: str, seed: int) -> dict[str, Any] | None:
    """The RL run's per-step health and its verdict (:mod:`e2c.rl.health`), weight movement against its
    start; None when it did not run."""
    run = out / train_key(rl_arm, seed)
    done = read_json(run / "DONE.json")
    if done is None or not (run / "metrics.jsonl").is_file():
        return None
    start = Path(str(done.get("start_model") or ""))
    start = start if start.is_absolute() else out / start
    rows = health_table(run, start if start.is_dir() else None)
    return {"rows": rows, "verdict": signal_verdict(rows), "format_warning": format_warning(rows)}


def collect(out: Path, study_rep: Mapping[str, Any], rl_arm: str, control_arm: str) -> dict[str, Any]:
    """Every number of the reproduction's report."""
    labels = roles(study_rep, rl_arm, control_arm)
    arms = study_rep["arms"]
    ran = [int(k) for k, t in arms[rl_arm]["training"].items() if t]
    seed = ran[0] if ran else arms[rl_arm]["seeds"][0]  # the first seed that trained
    sft_arm = arms[rl_arm]["start"]
    times = unit_times(out)
    folder = read_json(out / "e2c-run.json") or {}
    curve = rl_curve(out / train_key(rl_arm, seed))
    return {
        "system": system_info(),
        # the units ran at the commits between the folder's making and this report's
        "run_folder": {"toolkit_commit": folder.get("toolkit_commit"), "created": folder.get("created")},
        "study": {k: study_rep[k] for k in ("study", "file", "fast", "base", "options", "protocol")},
        "labels": labels,
        "models": {a: {"label": lab, **arms[a][CONFIRM]} for a, lab in labels.items()},
        # a control kept from an earlier --with-control run is read from its files but not confirmed now
        "comparisons": [
            c for c in study_rep["comparisons"][CONFIRM] if c["arm"] in labels and c["against"] in labels
        ],
        "training": {a: arms[a]["training"] for a in labels},
        "rl": {
            "arm": rl_arm,
            "seed": seed,
            "curve": curve,
            "trend": trend([r["reward"] for r in curve]),
            "health": rl_health(out, rl_arm, seed),
        },
        "sft_losses": {str(k): v for k, v in sorted(sft_losses(out / train_key(sft_arm, seed)).items())},
        "times": times,
        "stage_seconds": stage_totals(times),
        "total_seconds": sum(r["seconds"] for r in times),
        "pages": study_rep.get("pages") or {},
    }


# ------------------------------------------------------------------------------------------------ markdown
def interval_cell(x: Mapping[str, Any] | None) -> str:
    """An accuracy ``{"mean", "ci"}`` with its interval: ``8.2% [5.7, 10.6]``, or "-"."""
    if not x:
        return "-"
    return f"{100 * x['mean']:.1f}% [{100 * x['ci'][0]:.1f}, {100 * x['ci'][1]:.1f}]"


def difference_line(c: Mapping[str, Any], labels: Mapping[str, str], measure: str) -> str:
    """One sentence per paired comparison: the difference, SE, interval, rose / fell and the verdict."""
    a, b = labels.get(c["arm"], c["arm"]), labels.get(c["against"], c["against"])
    m, se = 100 * c["mean"], 100 * c["se"]
    lo, hi = (100 * v for v in c["ci"])
    two_se = "more than" if abs(m) > 2 * se else "within"
    seeds = f"{len(c['seeds'])} training seed{'s' if len(c['seeds']) > 1 else ''}"
    return (
        f"{a} - {b}, {measure}: **{m:+.1f} points** (SE {se:.1f}, {two_se} two standard errors; 95% CI "
        f"[{lo:+.1f}, {hi:+.1f}]) on {c['problems']} held-out problems and {seeds}; {c['rose']} problems rose, "
        f'{c["fell"]} fell; verdict on "{a} is better": **{c["word"]}**.'
    )


def render(rep: Mapping[str, Any], plots: Mapping[str, str | None]) -> str:
    """``report.md`` from the report's numbers."""
    sysi, st, proto = rep["system"], rep["study"], rep["study"]["protocol"]
    k = proto["samples"]
    avg = f"avg@{k} at T {proto['temperature']:g}"
    labels = rep["labels"]
    folder = rep.get("run_folder") or {}
    made = (
        f", run folder made at {str(folder['toolkit_commit'])[:7]} on {str(folder.get('created'))[:16].replace('T', ' ')}"
        if folder.get("toolkit_commit")
        else ""
    )
    L = ["# E2C reproduction report", ""]
    L.append(
        f"Measured {sysi['date']} on {sysi['cpu']} ({sysi['cores']} cores, torch threads {sysi['torch_threads']}), "
        f"report at git {sysi['git_commit'][:7]}{made}; `{project_path(st['file'])}`"
        f"{' with --fast' if st['fast'] else ''}, base model "
        f"`{st['base']['model']}`; stages {fmt_seconds(rep['total_seconds'])} (every unit's time, interrupted "
        "attempts included). Every number below is read from this run's files; `study.md` has the study's own "
        "tables."
    )
    L += ["", "## Result", ""]
    L.append(f"| model | {avg} [95% CI] | sampled well-formed | greedy [95% CI] | greedy well-formed |")
    L.append("| --- | --- | --- | --- | --- |")
    for arm, m in rep["models"].items():
        sampled_fmt = m["format_rate"] if m.get("format_rate_of") == "sampled" else None
        L.append(
            f"| {m['label']} (`{arm}`) | {interval_cell(m.get('avg'))} | {pct(sampled_fmt, 0)} | {interval_cell(m.get('greedy'))} "
            f"| {pct(m.get('greedy_format_rate'), 0)} |"
        )
    L.append("")
    for c in rep["comparisons"]:
        L.append("- " + difference_line(c, labels, avg if c["metric"] == "avg" else "greedy"))
    L += [
        "",
        f"How it is measured: {avg} is the paper's Pass@1, the mean over {k} samples per problem at temperature "
        f"{proto['temperature']:g}, {proto['max_tokens']} new tokens, the same problems and sampling seeds for every "
        "model; greedy is one sample per problem. Differences are paired per problem; the SE is over problems, "
        "the interval a bootstrap over problems (and seeds, with several), never narrower than the rule of "
        "three. The verdict: **gain** (interval above 0), **no-gain** (interval below "
        f"{100 * rep['study']['options']['delta']:g} points: a gain that size is ruled out), "
        "**unresolved** (the interval holds both).",
        "",
    ]
    L += _pass_lines(rep, plots)
    L += _family_lines(rep)
    L += ["## Training", ""]
    for arm, seeds in rep["training"].items():
        for seed, t in seeds.items():
            if not t:
                continue
            first_last = "-" if not t.get("train") else f"{t['train'][0]:.3f} → {t['train'][1]:.3f}"
            L.append(
                f"- {labels[arm]} (`{arm}`, seed {seed}): {t['steps']} steps, {t['signal']} {first_last}; weights "
                f"moved {t['weight_rel_l2']:.2e} (relative L2) from its start."
                if isinstance(t.get("weight_rel_l2"), (int, float))
                else f"- {labels[arm]} (`{arm}`, seed {seed}): {t['steps']} steps, {t['signal']} {first_last}."
            )
    tr = rep["rl"].get("trend")
    if tr:
        ci = tr.get("slope_ci95")
        slope = f", least-squares slope {tr['slope_per_step']:+.4f} per step" + (
            f" (95% CI [{ci[0]:+.4f}, {ci[1]:+.4f}])" if ci else ""
        )
        L.append(
            f"- RL reward, mean per step: first half {tr['first_half_mean']:.3f}, second half "
            f"{tr['second_half_mean']:.3f}{slope}. The reward is the training prompts' (the filter keeps prompts "
            "the SFT model solves sometimes), not held-out accuracy."
        )
    L.append("")
    for name, title in (("sft_loss.png", "SFT loss"), ("rl_reward.png", "RL reward")):
        if plots.get(name):
            L.append(f"![{title}]({plots[name]})\n")
    L += health_lines(rep, plots)
    L += ["## Time per stage", ""]
    L.append("| stage | time |")
    L.append("| --- | --- |")
    L += [f"| {s} | {fmt_seconds(v)} |" for s, v in rep["stage_seconds"].items()]
    L.append(f"| **all** | **{fmt_seconds(rep['total_seconds'])}** |")
    L += ["", "| unit | kind | time | attempts | finished |", "| --- | --- | --- | --- | --- |"]
    L += [
        f"| `{r['unit']}` | {r['kind']} | {fmt_seconds(r['seconds'])} | {r['attempts']} | {r['finished_at']} |"
        for r in rep["times"]
    ]
    L.append("")
    if rep["pages"]:
        L += page_lines(rep["pages"])
    return "\n".join(L).rstrip() + "\n"


def _pass_lines(rep: Mapping[str, Any], plots: Mapping[str, str | None]) -> list[str]:
    curves = {m["label"]: m["pass_at_k"] for m in rep["models"].values() if m.get("pass_at_k")}
    if not curves:
        return []
    ks = sorted({int(k) for c in curves.values() for k in c})
    L = ["## pass@k", "", "| k | " + " | ".join(curves) + " |", "| --- |" + " --- |" * len(curves)]
    L += [f"| {k} | " + " | ".join(pct(c.get(str(k))) for c in curves.values()) + " |" for k in ks]
    L += [
        "",
        "Unbiased pass@k (Chen et al., 2021) from the sampled evaluation's samples of each problem. RL that "
        "sharpens the sampled distribution lifts k = 1 and leaves the largest k flat; RL that adds solutions lifts "
        "both (Yue et al., 2025).",
        "",
    ]
    if plots.get("pass_at_k.png"):
        L.append(f"![pass@k]({plots['pass_at_k.png']})\n")
    return L


def _family_lines(rep: Mapping[str, Any]) -> list[str]:
    models = rep["models"]
    fams = sorted({f for m in models.values() for f in m.get("by_family") or {}})
    if not fams:
        return []
    comps = [c for c in rep["comparisons"] if c["metric"] == "avg" and c.get("by_family")]
    heads = [m["label"] for m in models.values()]
    heads += [f"{rep['labels'][c['arm']]} - {rep['labels'][c['against']]}" for c in comps]
    measure = (
        f"avg@{rep['study']['protocol']['samples']}" if rep["study"]["protocol"]["samples"] else "greedy"
    )
    L = [
        "## By task family",
        "",
        f"Held-out {measure} per family and level; differences in points [95% CI].",
        "",
        "| family | problems | " + " | ".join(heads) + " |",
        "| --- | --- |" + " --- |" * len(heads),
    ]
    for f in fams:
        cells = [pct((m.get("by_family", {}).get(f) or {}).get("mean")) for m in models.values()]
        n = next(
            (m["by_family"][f]["problems"] for m in models.values() if f in (m.get("by_family") or {})), "-"
        )
        for c in comps:
            d = c["by_family"].get(f)
            cells.append("-" if d is None else ci_text(d))
        L.append(f"| {f} | {n} | " + " | ".join(cells) + " |")
    return [*L, ""]


def write_plots(rep: Mapping[str, Any], out: Path) -> dict[str, str | None]:
    """The report's plots under ``<out>/report/``; ``{name: path relative to out, or None}``."""
    folder = out / PLOT_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    made: dict[str, bool] = {}
    losses = rep["sft_losses"]
    plot_curve(
        [int(x) for x in losses], {"train loss": list(losses.values())}, folder / "sft_loss.png",
        "SFT training loss", "loss",
    )  # fmt: skip
    made["sft_loss.png"] = bool(losses)
    curve = rep["rl"]["curve"]
    plot_curve(
        [r["step"] for r in curve], {"reward (mean)": [r["reward"] for r in curve]}, folder / "rl_reward.png",
        "GRPO stage 2 reward", "reward",
    )  # fmt: skip
    made["rl_reward.png"] = bool(curve)
    health = rep["rl"]["health"]
    if health and health["rows"]:
        plot_health(health["rows"], folder / "rl_health.png")
        made["rl_health.png"] = True
    curves = {m["label"]: m["pass_at_k"] for m in rep["models"].values() if m.get("pass_at_k")}
    if curves:
        k = rep["study"]["protocol"]["samples"]
        plot_pass_at_k(curves, folder / "pass_at_k.png", f"Held-out pass@k ({k} samples at T 1)")
        made["pass_at_k.png"] = True
    return {name: f"{PLOT_FOLDER}/{name}" if ok else None for name, ok in made.items()}


def write_reproduce_report(out: Path, rl_arm: str, control_arm: str) -> dict[str, Any]:
    """Write ``<out>/report.json``, ``<out>/report.md`` and the plots from the finished study's
    ``study.json``; returns the report's numbers."""
    study_rep = json.loads((out / "study.json").read_text())
    rep = collect(out, study_rep, rl_arm, control_arm)
    plots = write_plots(rep, out)
    rep["plots"] = plots
    atomic_write_json(out / "report.json", rep, default=str)
    atomic_write_text(out / "report.md", render(rep, plots))
    return rep
