"""The quickstart report: every number read from the files the stages wrote, ``report.json``, ``report.md``
and PNG plots (matplotlib, Agg backend).

Nothing here is pasted: accuracies come from each evaluation's ``results.json`` (per-problem scores from its
predictions file, for the intervals and paired differences), the SFT loss from its ``metrics.jsonl``, the RL
reward from its ``metrics.jsonl``, the TTS table from its ``results.json``.
"""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from e2c.core.files import atomic_write_json, atomic_write_text, read_records
from e2c.core.runinfo import git_commit, versions
from e2c.core.stats import Z95, align_scores, mean_interval, paired_difference
from e2c.eval.compare import pct, per_problem_counts, per_problem_scores, run_summary
from e2c.eval.metrics import pass_at_k_curve
from e2c.launch.devices import cpu_has_bf16
from e2c.quickstart.config import STAGES
from e2c.quickstart.context import Context, read_done, rel
from e2c.quickstart.pages import quickstart_pages
from e2c.quickstart.plots import EVAL_STAGES, STAGE_LABEL, write_plots
from e2c.quickstart.progress import fmt_seconds
from e2c.quickstart.stages import rl_curve, sampled_dir, sft_losses, sft_model, tts_results
from e2c.rl.health import format_warning, health_table, signal_verdict
from e2c.view import page_lines, write_pages


# ------------------------------------------------------------------------------------------------ reading
def by_family(ctx: Context) -> dict[str, dict[str, dict[str, int]]]:
    """Held-out synthetic accuracy per task family and level: ``{stage: {"family/Lk": {"correct", "problems"}}}``
    (empty without the data stage's ``eval_families.json``)."""
    path = ctx.data_dir / "eval_families.json"
    if not path.is_file():
        return {}
    families = json.loads(path.read_text())
    out: dict[str, dict[str, dict[str, int]]] = {}
    for stage in EVAL_STAGES:
        scores = per_problem_scores(ctx.dir(stage) / "predictions" / "synthetic.jsonl")
        if not scores:
            continue
        table: dict[str, dict[str, int]] = {}
        for pid, score in scores.items():
            cell = table.setdefault(families.get(pid, "unknown"), {"correct": 0, "problems": 0})
            cell["correct"] += round(score)
            cell["problems"] += 1
        out[stage] = dict(sorted(table.items()))
    return out


KIND_LABEL = {"math": "math-style families", "code": "code (all tests pass)", "countdown": "countdown"}


def kind_scores(predictions: Path) -> dict[str, dict[str, list[int]]]:
    """``{kind: {problem id: [correct of each sample]}}`` from an eval predictions file (each record carries
    its problem's answer kind; empty when the file does not exist). A code sample is correct when its
    program passes every test, public and hidden."""
    out: dict[str, dict[str, list[int]]] = {}
    if not predictions.is_file():
        return out
    for _, row in read_records(predictions, what="prediction line", hint="rerun the evaluation"):
        if "id" not in row or "correct" not in row:
            continue  # per_problem_counts, which every report reads first, names such a line
        kind = str(row.get("kind") or "math")
        out.setdefault(kind, {}).setdefault(str(row["id"]), []).append(int(bool(row["correct"])))
    return out


def by_kind(ctx: Context) -> dict[str, dict[str, dict[str, Any]]]:
    """Held-out synthetic accuracy per answer kind (the math-style families against the code family):
    ``{stage: {kind: {"correct", "problems", "accuracy", "sampled"}}}``: greedy correct of problems, and
    ``sampled`` the sampled run's avg@k (mean over problems of the share of correct samples; None when that
    run does not exist)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for stage in EVAL_STAGES:
        greedy = kind_scores(ctx.dir(stage) / "predictions" / "synthetic.jsonl")
        if not greedy:
            continue
        sampled = kind_scores(eval_folder(ctx, stage, True) / "predictions" / "synthetic.jsonl")
        table: dict[str, dict[str, Any]] = {}
        for kind, problems in sorted(greedy.items()):
            correct = sum(max(v) for v in problems.values())  # one greedy sample per problem
            means = [sum(v) / len(v) for v in sampled.get(kind, {}).values()]
            table[kind] = {
                "correct": correct,
                "problems": len(problems),
                "accuracy": correct / len(problems),
                "sampled": sum(means) / len(means) if means else None,
            }
        out[stage] = table
    return out


def kind_lines(rep: Mapping[str, Any]) -> list[str]:
    """The by-kind table (greedy and avg@k of each kind per stage) and a one-line code summary; nothing when
    the held-out set has one kind only."""
    kinds = rep.get("by_kind") or {}
    names = sorted({k for t in kinds.values() for k in t}, key=lambda k: (k == "code", k))
    if len(names) < 2:
        return []
    measure = rep.get("measure", "avg@k")
    L = [
        "Held-out synthetic accuracy by answer kind (greedy correct / problems; the sampled run's "
        f"{measure}). A code problem counts as solved when the last `python` block of its execution "
        "passes every test, public and hidden, in the sandbox:\n",
        "| stage | "
        + " | ".join(f"{KIND_LABEL.get(k, k)}: greedy | {KIND_LABEL.get(k, k)}: {measure}" for k in names)
        + " |",
        "| --- |" + " --- | --- |" * len(names),
    ]
    for stage, table in kinds.items():
        cells = []
        for k in names:
            c = table.get(k)
            cells += (
                [f"{c['correct']}/{c['problems']} ({100 * c['accuracy']:.1f}%)", pct(c["sampled"])]
                if c
                else ["-", "-"]
            )
        L.append(f"| {STAGE_LABEL[stage]} | " + " | ".join(cells) + " |")
    L.append("")
    code = {s: t["code"] for s, t in kinds.items() if "code" in t}
    if code:
        said = ", ".join(
            f"{STAGE_LABEL[s]} {c['correct']}/{c['problems']} ({100 * c['accuracy']:.1f}%)"
            for s, c in code.items()
        )
        L.append(f"- Code, greedy (a function that passes all its tests): {said}.\n")
    return L


def eval_folder(ctx: Context, stage: str, sampled: bool) -> Path:
    """The run folder of a stage's greedy evaluation, or of its sampled one."""
    return sampled_dir(ctx.dir(stage)) if sampled else ctx.dir(stage)


def sampled_eval(ctx: Context, stage: str) -> dict[str, Any] | None:
    """A stage's sampled evaluation (the paper's protocol) per dataset: the eval summary with avg@k as its
    accuracy, a 95% interval over problems (:func:`mean_interval`), samples per problem and the pass@k
    curve (k = 1..samples); None when it was not run."""
    folder = eval_folder(ctx, stage, True)
    summary = run_summary(folder)
    if summary is None:
        return None
    for name, e in summary.items():
        counts = list(per_problem_counts(folder / "predictions" / f"{name}.jsonl").values())
        if not counts:
            continue
        mi = mean_interval([c / n for n, c in counts])
        e["ci95"], e["se"] = mi["ci95"], mi["se"]
        e["samples_per_problem"] = min(n for n, _ in counts)
        e["pass_at_k"] = {str(k): v for k, v in pass_at_k_curve(counts).items()}
    return summary


def paired(
    ctx: Context, after: str, before: str, dataset: str, sampled: bool = False
) -> dict[str, Any] | None:
    """Paired difference ``after - before`` of two evaluation stages on one dataset (same problems), of
    their greedy runs or (``sampled``) of their per-problem avg@k."""
    a = per_problem_scores(eval_folder(ctx, after, sampled) / "predictions" / f"{dataset}.jsonl")
    b = per_problem_scores(eval_folder(ctx, before, sampled) / "predictions" / f"{dataset}.jsonl")
    if not a or not b:
        return None
    xa, xb, _ids = align_scores(a, b)
    res = paired_difference(xa, xb)
    res["after"], res["before"], res["dataset"], res["sampled"] = after, before, dataset, sampled
    res["after_accuracy"] = sum(xa) / len(xa) if xa else None
    res["before_accuracy"] = sum(xb) / len(xb) if xb else None
    return res


def trend(values: Sequence[float]) -> dict[str, Any] | None:
    """Least-squares slope per step with its standard error and 95% interval (normal approximation; the
    per-step values are treated as independent), and the means of the first and second halves of a curve."""
    n = len(values)
    if n == 0:
        return None
    xs = list(range(n))
    mx, my = sum(xs) / n, sum(values) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, values, strict=True)) / sxx if sxx else 0.0
    se = None
    if n > 2 and sxx:
        resid = sum((y - (my + slope * (x - mx))) ** 2 for x, y in zip(xs, values, strict=True))
        se = (resid / (n - 2) / sxx) ** 0.5
    half = max(1, n // 2)
    return {
        "first": values[0],
        "last": values[-1],
        "slope_per_step": slope,
        "slope_se": se,
        "slope_ci95": None if se is None else [slope - Z95 * se, slope + Z95 * se],
        "first_half_mean": sum(values[:half]) / half,
        "second_half_mean": sum(values[half:]) / max(1, n - half) if n > 1 else values[0],
    }


def system_info() -> dict[str, Any]:
    """The machine: CPU model, cores, torch threads, native bf16, OS, Python, package versions."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        import torch

        threads = torch.get_num_threads()
    except Exception:  # pragma: no cover - torch is a core dependency
        threads = None
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "torch_threads": threads,
        "bf16_native": cpu_has_bf16(),
        "platform": platform.platform(),
        "git_commit": git_commit(),
        "versions": versions(),
    }


def rl_verdict(
    diff: Mapping[str, Any] | None,
    skipped: bool,
    before: str = "SFT",
    after: str = "RL",
    measure: str = "greedy accuracy",
) -> str:
    """One plain sentence on whether ``after`` (RL) improved held-out accuracy over ``before`` (SFT, or the
    equal-compute control), on ``measure`` (greedy accuracy, or avg@k: problems gain or lose in part)."""
    if skipped:
        return f"{after} was skipped."
    if diff is None or diff.get("n", 0) == 0:
        return f"{after} was not compared with {before} on {measure}: no held-out results for both."
    a, b, d, se = diff["after_accuracy"], diff["before_accuracy"], diff["mean"], diff["se"]
    head = (
        f"{measure}: {before} {100 * b:.1f}% -> {after} {100 * a:.1f}% on {diff['n']} held-out problems; "
        f"{diff['improved']} {'rose' if diff.get('sampled') else 'gained'}, "
        f"{diff['worsened']} {'fell' if diff.get('sampled') else 'lost'}"
    )
    if d <= 0:
        return f"{after} did not beat {before} ({head}; paired difference {100 * d:+.1f} points, SE {100 * se:.1f})."
    if not diff["exceeds_2se"]:
        return (
            f"{after} did not clearly beat {before} ({head}; +{100 * d:.1f} points is within two standard "
            f"errors, SE {100 * se:.1f})."
        )
    return f"{after} beat {before} ({head}; +{100 * d:.1f} points, more than two standard errors, SE {100 * se:.1f})."


def sft_verdict(diff: Mapping[str, Any] | None) -> str:
    if diff is None or diff.get("n", 0) == 0:
        return "SFT was not compared with the baseline: results missing."
    d, se = diff["mean"], diff["se"]
    yes = "exceeds" if diff["exceeds_2se"] else "does not exceed"
    return (
        f"SFT - baseline on {diff['n']} held-out synthetic problems (paired): {100 * d:+.1f} points, SE "
        f"{100 * se:.1f}; the difference {yes} two standard errors ({diff['improved']} problems gained, "
        f"{diff['worsened']} lost)."
    )


def collect(ctx: Context) -> dict[str, Any]:
    """Everything the report shows, from the run's files."""
    done = {s: read_done(ctx.dir(s)) for s in STAGES if s != "report"}
    evals = {s: run_summary(ctx.dir(s)) for s in EVAL_STAGES}
    sampled = {s: sampled_eval(ctx, s) for s in EVAL_STAGES}
    measure = f"avg@{ctx.cfg.eval_samples} at T {ctx.cfg.eval_temperature:g}"
    counts_path = ctx.data_dir / "counts.json"
    counts = json.loads(counts_path.read_text()) if counts_path.is_file() else None
    losses = sft_losses(ctx.dir("sft"))
    curve = rl_curve(ctx.dir("rl"))
    health = rl_health(ctx)
    rl_skipped = bool((done.get("rl") or {}).get("skipped"))
    control = done.get("control") or {}
    control_skipped = not control or bool(control.get("skipped"))
    tts_path = tts_results(ctx.dir("tts"))
    tts = json.loads(tts_path.read_text()) if tts_path else None
    differences = {
        "sft_minus_baseline": {d: paired(ctx, "eval_sft", "baseline", d) for d in ("synthetic", "gsm8k")},
        "rl_minus_sft": {d: paired(ctx, "eval_rl", "eval_sft", d) for d in ("synthetic", "gsm8k")},
        "rl_minus_baseline": {d: paired(ctx, "eval_rl", "baseline", d) for d in ("synthetic", "gsm8k")},
        "rl_minus_control": {d: paired(ctx, "eval_rl", "eval_control", d) for d in ("synthetic", "gsm8k")},
        "control_minus_sft": {d: paired(ctx, "eval_control", "eval_sft", d) for d in ("synthetic", "gsm8k")},
    }
    # The paper's measure: per-problem avg@k of the sampled runs, paired.
    sampled_differences = {
        name: {d: paired(ctx, after, before, d, sampled=True) for d in ("synthetic", "gsm8k")}
        for name, after, before in (
            ("rl_minus_sft", "eval_rl", "eval_sft"),
            ("rl_minus_control", "eval_rl", "eval_control"),
            ("control_minus_sft", "eval_control", "eval_sft"),
        )
    }
    sft_diff = differences["sft_minus_baseline"]["synthetic"]
    rl_diff = differences["rl_minus_sft"]["synthetic"]
    rl_sampled = sampled_differences["rl_minus_sft"]["synthetic"]
    control_sampled = sampled_differences["rl_minus_control"]["synthetic"]
    stage_rows = []
    for s in STAGES[:-1]:
        d = done.get(s)
        stage_rows.append(
            {
                "stage": s,
                "status": "missing" if d is None else ("skipped" if d.get("skipped") else "done"),
                "seconds": None if d is None else d.get("seconds"),
                "commands": [] if d is None else d.get("commands", []),
            }
        )
    return {
        "config": ctx.cfg.to_dict(),
        "out": str(ctx.out),
        "system": system_info(),
        "stages": stage_rows,
        "total_seconds": sum(r["seconds"] or 0 for r in stage_rows),
        "data": counts,
        "eval": evals,
        "eval_sampled": sampled,
        "measure": measure,
        "by_family": by_family(ctx),
        "by_kind": by_kind(ctx),
        "differences": differences,
        "sampled_differences": sampled_differences,
        "verdicts": {
            "sft": sft_verdict(sft_diff),
            # The primary verdict is the paper's measure when the sampled runs exist, greedy otherwise.
            "rl": rl_verdict(rl_sampled, rl_skipped, measure=measure)
            if rl_sampled
            else rl_verdict(rl_diff, rl_skipped),
            "rl_greedy": rl_verdict(rl_diff, rl_skipped) if rl_sampled else None,
            "control": None
            if control_skipped
            else rl_verdict(control_sampled, rl_skipped, "the control", measure=measure)
            if control_sampled
            else rl_verdict(differences["rl_minus_control"]["synthetic"], rl_skipped, "the control"),
        },
        "filter": filter_summary(done.get("filter")),
        "control": None
        if control_skipped
        else {k: control.get(k) for k in ("steps", "rl_trained_tokens", "control_trained_tokens", "seconds")}
        | {"rl_seconds": (done.get("rl") or {}).get("seconds")},
        "sft": {
            "losses": {str(k): v for k, v in sorted(losses.items())},
            "trend": trend([losses[k] for k in sorted(losses)]),
        },
        "rl": {
            "skipped": rl_skipped,
            "curve": curve,
            "reward_trend": trend([r["reward"] for r in curve]),
            "accuracy_trend": trend([r["accuracy"] for r in curve if "accuracy" in r]),
            "health": health,
            "model": (done.get("rl") or {}).get("outputs", {}).get("model"),
        },
        "tts": None
        if tts is None
        else {
            "summary": tts["summary"],
            "config": tts["config"],
            "results": str(tts_path),
            "model_stage": (done.get("tts") or {}).get("model_stage"),
        },
    }


def rl_health(ctx: Context) -> dict[str, Any] | None:
    """The RL run's per-step health table and its one-line verdict (:mod:`e2c.rl.health`); weight movement
    from the rollout's syncs, and for the last step from its checkpoint against the SFT model."""
    run = ctx.dir("rl")
    if not (run / "metrics.jsonl").is_file():
        return None

    start = sft_model(ctx)
    rows = health_table(run, start if start.is_dir() else None)
    return {"rows": rows, "verdict": signal_verdict(rows), "format_warning": format_warning(rows)}


def filter_summary(done: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The pass-rate filter's counts (kept of sampled prompts), or None when it did not run."""
    if not done or done.get("skipped"):
        return None
    outputs = done.get("outputs", {})
    return {k: done.get(k) for k in ("kept", "prompts")} | {
        "report": outputs.get("report"),
        "histogram": outputs.get("histogram"),
    }


# ------------------------------------------------------------------------------------------------ markdown
def _acc_cell(e: Mapping[str, Any] | None) -> str:
    if not e:
        return "-"
    lo, hi = e["ci95"]
    return f"{100 * e['accuracy']:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}] ({e['correct']}/{e['problems']})"


def interval_cell(e: Mapping[str, Any] | None) -> str:
    """An accuracy with its 95% interval: ``8.2% [5.7, 10.6]``; "-" when there is none."""
    if not e:
        return "-"
    lo, hi = e["ci95"]
    return f"{100 * e['accuracy']:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]"


def headline_table(rep: Mapping[str, Any]) -> list[str]:
    """The per-stage table: the paper's avg@k with its 95% interval and the sampled chains' format first,
    then greedy accuracy with its Wilson interval, greedy format, phase tokens, GSM8K."""
    measure = rep.get("measure", "avg@k")
    lines = [
        f"| stage | synthetic {measure} [95% CI] | sampled well-formed | synthetic greedy [95% CI] | greedy "
        "format | explore / execute tokens (greedy) | GSM8K greedy | GSM8K avg@k |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for s in EVAL_STAGES:
        e = rep["eval"].get(s)
        if not e:
            lines.append(f"| {STAGE_LABEL[s]} | not run | | | | | | |")
            continue
        sam = (rep.get("eval_sampled") or {}).get(s) or {}
        syn, gsm = e.get("synthetic"), e.get("gsm8k")
        ssyn, sgsm = sam.get("synthetic"), sam.get("gsm8k")
        tok = f"{syn['explore_tokens']:.0f} / {syn['execute_tokens']:.0f}" if syn else "-"
        gsm_cell = f"{gsm['correct']}/{gsm['problems']}" if gsm else "-"
        lines.append(
            f"| {STAGE_LABEL[s]} | {interval_cell(ssyn) if ssyn else 'not run'} | "
            f"{pct(ssyn and ssyn['format_rate'], 0)} | {_acc_cell(syn)} | {pct(syn and syn['format_rate'], 0)} | "
            f"{tok} | {gsm_cell} | {pct(sgsm and sgsm['accuracy'])} |"
        )
    return lines


def pass_at_k_lines(rep: Mapping[str, Any], plots: Mapping[str, str | None]) -> list[str]:
    """pass@k for k = 1..samples of each sampled evaluation (synthetic): does RL sharpen or add?"""
    curves = {
        s: (e.get("synthetic") or {}).get("pass_at_k")
        for s, e in (rep.get("eval_sampled") or {}).items()
        if e and (e.get("synthetic") or {}).get("pass_at_k")
    }
    if not curves:
        return []
    ks = sorted({int(k) for c in curves.values() for k in c})
    L = [
        "### pass@k before and after RL\n",
        "| k | " + " | ".join(STAGE_LABEL[s] for s in curves) + " |",
        "| --- |" + " --- |" * len(curves),
    ]
    for k in ks:
        L.append(f"| {k} | " + " | ".join(pct(c.get(str(k))) for c in curves.values()) + " |")
    L.append(
        "\nUnbiased pass@k (Chen et al., 2021) from the sampled evaluation's samples of each problem. RL that "
        "sharpens the sampled distribution lifts k = 1 and leaves the largest k flat; RL that adds "
        "solutions lifts both (Yue et al., 2025).\n"
    )
    if plots.get("pass_at_k.png"):
        L.append(f"![pass@k]({plots['pass_at_k.png']})\n")
    return L


HEALTH_COLUMNS = (
    ("step", "step", "d"),
    ("critic/score/mean", "reward", ".3f"),
    ("health/train_acc", "train acc", ".3f"),
    ("health/reward_correct", "correct", ".3f"),
    ("health/reward_plan", "plan", ".3f"),
    ("health/reward_overlong", "overlong", ".3f"),
    ("health/zero_var_group_share", "zero-var groups", ".2f"),
    ("e2c/adv_abs_before", "|adv| before", ".3f"),
    ("e2c/adv_abs_after", "|adv| after", ".3f"),
    ("e2c/explore_token_share", "explore share", ".2f"),
    ("response_length/mean", "length", ".0f"),
    ("health/truncated_share", "truncated", ".2f"),
    ("health/well_formed_share", "well-formed", ".2f"),
    ("health/correct_malformed_share", "right but malformed", ".2f"),
    ("actor/pg_clipfrac", "clip frac", ".3f"),
    ("health/entropy_sampled", "entropy", ".3f"),
    ("weight_rel_l2_after_step", "rel L2", ".1e"),
    ("weight_bf16_changed_share_after_step", "bf16 changed", ".3f"),
)


def health_lines(rep: Mapping[str, Any], plots: Mapping[str, str | None]) -> list[str]:
    """The RL health section: the verdict line, the per-step table and its plot."""
    health = rep["rl"].get("health")
    if not health or not health["rows"]:
        return []
    L = ["### RL health\n", f"**{health['verdict']}**\n"]
    if health.get("format_warning"):
        L.append(f"**Warning: {health['format_warning']}.**\n")
    L.append("| " + " | ".join(label for _, label, _ in HEALTH_COLUMNS) + " |")
    L.append("|" + " --- |" * len(HEALTH_COLUMNS))
    for row in health["rows"]:
        cells = []
        for key, _, spec in HEALTH_COLUMNS:
            v = row.get(key)
            cells.append(
                "-" if not isinstance(v, int | float) else format(int(v) if spec == "d" else v, spec)
            )
        L.append("| " + " | ".join(cells) + " |")
    L.append(
        "\nPer training step: the reward and its components (correctness + plan bonus + overlong penalty), the "
        "share of groups whose samples all scored the same (zero GRPO advantage), mean |advantage| before and "
        "after exploration weighting, the exploration share of response tokens, response length and the share "
        "cut at the limit, the share of well-formed chains and of right answers in malformed chains, PPO clip fraction, entropy estimated from the rollout's log-probs, and how far the "
        "weights moved from the SFT model after the step (relative L2, share of bf16 values changed).\n"
    )
    if plots.get("rl_health.png"):
        L.append(f"![RL health]({plots['rl_health.png']})\n")
    return L


def render_markdown(rep: Mapping[str, Any], plots: Mapping[str, str | None]) -> str:
    """report.md from the collected numbers."""
    cfg, sysi, data = rep["config"], rep["system"], rep["data"] or {}
    base = (rep["eval"].get("baseline") or {}).get("synthetic") or {}
    model = f"`{cfg['model']}`" + (f" ({base['model_description']})" if base.get("model_description") else "")
    L: list[str] = []
    L.append("# E2C quickstart report\n")
    L.append(
        f"Measured {sysi['date']} on {sysi['cpu']} ({sysi['cores']} cores, torch threads {sysi['torch_threads']}, "
        f"native bf16 {'yes' if sysi['bf16_native'] else 'no'}), git {sysi['git_commit']}; model {model}"
        f"{' (--fast preset)' if cfg['fast'] else ''}; total {fmt_seconds(rep['total_seconds'])}. "
        "Every number below is read from this run's files.\n"
    )
    L.append("## Results\n")
    L.extend(headline_table(rep))
    L.append("")
    L.append(f"- {rep['verdicts']['sft']}")
    L.append(f"- {rep['verdicts']['rl']}")
    if rep["verdicts"].get("rl_greedy"):
        L.append(f"- Beside it, {rep['verdicts']['rl_greedy']}")
    if not rep["rl"].get("skipped"):
        L.append(
            f"- What RL from {cfg['sft_steps']} SFT steps can show: that it runs and does no harm to what SFT "
            "taught (RL - SFT above -2 SE, well-formed chains kept), not that it adds: with few SFT steps most "
            "sampled chains are malformed and most RL prompts never solved. What RL adds is measured from 120 "
            "SFT steps by `bash scripts/reproduce.sh` (docs/quickstart.md, the reproduction)."
        )
    if rep["verdicts"].get("control"):
        c = rep["control"]
        L.append(
            f"- Equal-compute control ({c['steps']} more SFT steps from the SFT model, ~{c['control_trained_tokens']} "
            f"trained tokens against RL's {c['rl_trained_tokens']}; {fmt_seconds(c['seconds'])} against RL's "
            f"{fmt_seconds(c['rl_seconds'])}): {rep['verdicts']['control']}"
        )
    rt = rep["rl"]["reward_trend"]
    if rt:
        ci = rt.get("slope_ci95")
        L.append(
            f"- RL reward (mean per step): {rt['first']:.3f} at the first step, {rt['last']:.3f} at the last; "
            f"first-half mean {rt['first_half_mean']:.3f}, second-half mean {rt['second_half_mean']:.3f}, "
            f"least-squares slope {rt['slope_per_step']:+.4f} per step"
            + (f" (95% CI [{ci[0]:+.4f}, {ci[1]:+.4f}])." if ci else ".")
        )
    at = rep["rl"].get("accuracy_trend")
    if at and at.get("slope_ci95"):
        lo, hi = at["slope_ci95"]
        L.append(
            f"- RL training accuracy (the step's samples): {at['first']:.3f} -> {at['last']:.3f}, slope "
            f"{at['slope_per_step']:+.4f} per step (95% CI [{lo:+.4f}, {hi:+.4f}])."
        )
    st = rep["sft"]["trend"]
    if st:
        L.append(f"- SFT loss: {st['first']:.3f} at step 1, {st['last']:.3f} at the last step.")
    L.append(
        f"- How it is measured: {rep.get('measure', 'avg@k')} is the paper's Pass@1 (its eval.sh), the mean "
        f"over {cfg.get('eval_samples', 0)} samples per problem at temperature {cfg.get('eval_temperature', 1.0):g}"
        " (top-p 1.0), drawn with the same seeds for every model; its interval is mean +- 1.96 SE over "
        "problems and its differences are paired per problem. Greedy: one sample per problem, 95% Wilson "
        f"interval. The same problems and token limit ({cfg['eval_max_tokens']} new tokens) for every stage; the "
        "baseline is evaluated greedily only. Format: share of well-formed chains (one exploration, one "
        "execution, closed tags).\n"
    )
    L.extend(pass_at_k_lines(rep, plots))
    L.extend(kind_lines(rep))
    fam = rep.get("by_family") or {}
    if fam:
        stages = list(fam)
        L.append("Held-out synthetic accuracy by task family and level (correct / problems):\n")
        L.append("| family | " + " | ".join(stages) + " |")
        L.append("| --- |" + " --- |" * len(stages))
        for key in sorted({k for t in fam.values() for k in t}):
            cells = [fam[s].get(key) for s in stages]
            L.append(
                f"| {key} | "
                + " | ".join(f"{c['correct']}/{c['problems']}" if c else "-" for c in cells)
                + " |"
            )
        L.append("")
    for name, title in (
        ("accuracy.png", "Accuracy"),
        ("format.png", "Format compliance"),
        ("tokens.png", "Exploration and execution tokens"),
    ):
        if plots.get(name):
            L.append(f"![{title}]({plots[name]})\n")
    L.extend(page_lines(rep.get("pages") or {}))
    L.append("## Training\n")
    for name, title in (("sft_loss.png", "SFT loss"), ("rl_reward.png", "RL reward")):
        if plots.get(name):
            L.append(f"![{title}]({plots[name]})\n")
    flt = rep.get("filter")
    if flt:
        L.append(
            f"RL prompts: the pass-rate filter kept {flt['kept']} of {flt['prompts']} RL prompts (band "
            f"`{cfg['filter_band']}`, {cfg['filter_k']} samples each from the SFT model at T {cfg['rl_temperature']:g}).\n"
        )
        if flt.get("histogram"):
            L.append(f"![Pass rates of the RL prompts]({flt['histogram']})\n")
    L.extend(health_lines(rep, plots))
    L.append("## Test-time scaling\n")
    tts = rep["tts"]
    if tts:
        L.append(
            f"On the first {cfg['tts_problems']} held-out synthetic problems with the {tts['model_stage'] or 'trained'} "
            "model; tokens are generated tokens per problem (all calls).\n"
        )
        L.append("| method | K/N | problems | accuracy | tokens per problem | calls | seconds per problem |")
        L.append("| --- | --- | --- | --- | --- | --- | --- |")
        for r in tts["summary"]:
            L.append(
                f"| {r['method']} | {r['budget']} | {r['problems']} | {pct(r['accuracy'])} | "
                f"{1000 * r['tokens_k']:.0f} | {r['calls']:.1f} | {r['seconds']:.2f} |"
            )
        L.append("")
        if plots.get("tts_accuracy_vs_tokens.png"):
            L.append(f"![TTS accuracy vs tokens]({plots['tts_accuracy_vs_tokens.png']})\n")
    else:
        L.append("Not run.\n")
    L.append("## Data\n")
    if data:
        sp = data["splits"]
        L.append(
            f"Synthetic tasks, families {', '.join(cfg['families'])} at levels <= {cfg['max_level']}, chains of at "
            f"most {cfg['max_chain_tokens']} tokens (median {data['chain_tokens']['median']:.0f}, exploration median "
            f"{data['chain_tokens']['explore_median']:.0f}; {data['chain_tokens']['tokenizer']} tokenizer). Splits by a "
            f"hash of the problem text: SFT {sp['sft']}, RL {sp['rl']}, held-out eval {sp['eval']} (overlap with eval: "
            f"SFT {data['overlap']['sft_eval']}, RL {data['overlap']['rl_eval']}). GSM8K: {data['gsm8k']['note']}.\n"
        )
        L.append("| split | " + " | ".join(sorted({k for m in data["mix"].values() for k in m})) + " |")
        keys = sorted({k for m in data["mix"].values() for k in m})
        L.append("| --- |" + " --- |" * len(keys))
        for split, mix in data["mix"].items():
            L.append(f"| {split} | " + " | ".join(str(mix.get(k, 0)) for k in keys) + " |")
        L.append("")
    L.append("## Time per stage\n")
    L.append("| stage | status | time |")
    L.append("| --- | --- | --- |")
    for r in rep["stages"]:
        L.append(
            f"| {r['stage']} | {r['status']} | {fmt_seconds(r['seconds']) if r['seconds'] is not None else '-'} |"
        )
    L.append(f"| total | | {fmt_seconds(rep['total_seconds'])} |\n")
    L.append("## What was run\n")
    L.append("```")
    for r in rep["stages"]:
        for c in r["commands"]:
            L.append(f"# {r['stage']}")
            L.append(c)
    L.append("```\n")
    L.append("Settings (`report.json` has every number):\n")
    L.append("```json")
    L.append(json.dumps({k: v for k, v in cfg.items() if k != "extra"}, indent=1))
    L.append("```")
    return "\n".join(L) + "\n"


def write_report(ctx: Context) -> dict[str, Any]:
    """Collect, plot and write ``report.json`` and ``report.md``; returns the report's outputs."""
    rep = collect(ctx)
    folder = ctx.dir("report")
    plots = write_plots(rep, ctx, folder)
    rep["plots"] = plots
    rep["pages"] = write_pages(quickstart_pages(ctx), folder, ctx.out)
    atomic_write_json(ctx.out / "report.json", rep, default=str)
    atomic_write_text(ctx.out / "report.md", render_markdown(rep, plots))
    return {
        "outputs": {
            "report_md": rel(ctx.out / "report.md", ctx.out),
            "report_json": rel(ctx.out / "report.json", ctx.out),
            **{k: v for k, v in plots.items() if v},
            **{name: p["path"] for name, p in rep["pages"].items() if p["path"]},
        },
        "commands": [],
        "headline": {s: {d: e[d]["accuracy"] for d in e} for s, e in rep["eval"].items() if e},
    }
