"""The study's report: ``study.json`` (every number) and ``study.md`` (its tables), computed only from the
files the units wrote: DONE.json, verl's ``metrics.jsonl``, the evaluations' predictions and the data's
family maps.

Per arm: its training curve first -> last (SFT loss; RL reward, rollout well-formedness and sampled entropy),
how far its weights moved from its start, and its avg@k and greedy accuracy on the screening split and,
for the confirmed arms, on the held-out set. Per comparison (an arm against its start, an RL arm against
its equal-token SFT continuation): the paired difference per problem with a 95% interval over problems and
seeds (:func:`e2c.claims.stats.seed_problem_difference`), per task family too, and a verdict
(:func:`e2c.claims.stats.verdict`) in one word.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from e2c.claims import stats as st
from e2c.core.files import atomic_write_json, atomic_write_text
from e2c.core.stats import mean_interval
from e2c.eval.compare import pct, per_problem_scores
from e2c.eval.metrics import pass_at_k_curve
from e2c.quickstart.stages import rl_curve, sft_losses
from e2c.rl.health import ENTROPY, WELL_FORMED, health_table, signal_verdict
from e2c.study.spec import BASE, EQUAL_TOKEN_KINDS, Study, settings_of
from e2c.study.units import (
    CONFIRM,
    PHASES,
    SCREEN,
    eval_key,
    read_json,
    sampling_seed,
    train_key,
    validation_settings,
)
from e2c.view import Page, page_lines, write_pages

# The verdict on "the arm is better than what it is compared with", in one word.
WORD = {st.SUPPORTED: "gain", st.NOT_SUPPORTED: "no-gain", st.UNRESOLVED: "unresolved"}
FAMILY_BOOT = 1000  # bootstrap resamples of a per-family difference (the whole one takes the claims' 2000)
PHASE_TITLE = {SCREEN: "validation split", CONFIRM: "held-out set"}


# ------------------------------------------------------------------------------------------------ reading
def first_last(values: Sequence[float | None]) -> list[float] | None:
    """``[first, last]`` of the values that are numbers, or None when there are none.

    >>> first_last([None, 0.5, 0.25]), first_last([None])
    ([0.5, 0.25], None)
    """
    xs = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return [xs[0], xs[-1]] if xs else None


def training_summary(out: Path, kind: str, seed_dir: Path) -> dict[str, Any] | None:
    """What an arm's training run of one seed wrote: its curve first -> last and weight movement; None
    when the run is not complete."""
    done = read_json(seed_dir / "DONE.json")
    if done is None:
        return None
    mv = done.get("movement") or {}
    row: dict[str, Any] = {
        "seconds": done.get("seconds"),
        "model": done.get("model"),
        "weight_rel_l2": mv.get("weight_rel_l2"),
        "weight_bf16_changed_share": mv.get("weight_bf16_changed_share"),
        "movement_error": mv.get("error"),
    }
    if kind == "rl":
        curve = rl_curve(seed_dir)
        rows = health_table(seed_dir)
        well = [r.get(WELL_FORMED, r.get("e2c/well_formed_share")) for r in rows]
        row.update(
            steps=len(curve),
            signal="reward",
            train=first_last([r["reward"] for r in curve]),
            well_formed=first_last(well),
            entropy=first_last([r.get(ENTROPY) for r in rows]),
            health=signal_verdict(rows).split(":")[0] if rows else None,
        )
    else:
        losses = sft_losses(seed_dir)
        row.update(
            steps=done.get("steps", len(losses)),
            signal="loss",
            train=first_last([losses[k] for k in sorted(losses)]),
            well_formed=None,
            entropy=None,
            health=None,
        )
        if kind in EQUAL_TOKEN_KINDS:
            row.update(
                rl_trained_tokens=done.get("rl_trained_tokens"),
                sft_trained_tokens=done.get("sft_trained_tokens"),
            )
    return row


def phase_scores(
    out: Path, arm: str, seeds: Sequence[int], phase: str, sampled: bool
) -> dict[int, dict[str, float]]:
    """``{seed: {problem id: score}}`` of an arm's complete evaluations in a phase (avg@k: the share of right
    samples; greedy: 0 or 1)."""
    res = {}
    for seed in seeds:
        d = out / eval_key(arm, seed, phase, sampled)
        if read_json(d / "DONE.json") is None:
            continue
        scores = per_problem_scores(d / "predictions" / "synthetic.jsonl")
        if scores:
            res[seed] = scores
    return res


def families(out: Path, phase: str) -> dict[str, str]:
    """``{problem id: "family/Lk"}`` of a phase's problems (the validation unit's and the data stage's maps)."""
    path = out / "validation" / "families.json" if phase == SCREEN else out / "data" / "eval_families.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


# ------------------------------------------------------------------------------------------------ numbers
def arm_accuracy(scores: Mapping[int, Mapping[str, float]], sampled: bool) -> dict[str, Any] | None:
    """An arm's accuracy over its seeds: the mean, each seed's, and a 95% interval over problems (Wilson for
    one greedy seed; else normal, over each problem's mean across seeds)."""
    if not scores:
        return None
    per_seed = {str(s): statistics.fmean(v.values()) for s, v in sorted(scores.items())}
    ids = sorted(set.intersection(*(set(v) for v in scores.values())))
    per_problem = [statistics.fmean(scores[s][i] for s in scores) for i in ids]
    if not sampled and len(scores) == 1:
        ci = st.accuracy_ci(per_problem)["ci"]
    else:
        # A normal interval of scores that never vary is [mean, mean]: no narrower than the rule of three.
        m, floor = statistics.fmean(per_problem), st.resolution(len(per_problem))
        lo, hi = mean_interval(per_problem)["ci95"]
        ci = [max(0.0, min(lo, m - floor)), min(1.0, max(hi, m + floor))]
    return {
        "mean": statistics.fmean(per_seed.values()),
        "per_seed": per_seed,
        "problems": len(ids),
        "ci": list(ci),
    }


def by_family(
    scores: Mapping[int, Mapping[str, float]], fams: Mapping[str, str]
) -> dict[str, dict[str, Any]]:
    """``{family: {"mean", "problems"}}``: the arm's mean score per family, over seeds and problems."""
    cells: dict[str, list[float]] = {}
    for s in scores.values():
        for pid, v in s.items():
            cells.setdefault(fams.get(pid, "unknown"), []).append(v)
    n_seeds = max(len(scores), 1)
    return {f: {"mean": statistics.fmean(v), "problems": len(v) // n_seeds} for f, v in sorted(cells.items())}


def compare(
    a: Mapping[int, Mapping[str, float]],
    b: Mapping[int, Mapping[str, float]],
    delta: float,
    fams: Mapping[str, str],
) -> dict[str, Any] | None:
    """The paired difference ``a - b`` over the seeds and problems both have, with its interval, verdict and
    per-family differences; None when they share no seed or problem."""
    try:
        d = st.seed_problem_difference(a, b)
    except ValueError:
        return None
    v = st.verdict(d["ci"], delta)
    fam_ids: dict[str, set[str]] = {}
    for pid, f in fams.items():
        fam_ids.setdefault(f, set()).add(pid)
    per_family = {}
    for f, ids in sorted(fam_ids.items()):
        sub_a = {s: {i: x for i, x in v_.items() if i in ids} for s, v_ in a.items()}
        sub_b = {s: {i: x for i, x in v_.items() if i in ids} for s, v_ in b.items()}
        try:
            r = st.seed_problem_difference(sub_a, sub_b, boot=FAMILY_BOOT)
        except ValueError:
            continue
        per_family[f] = {"mean": r["mean"], "ci": r["ci"], "problems": r["problems"]}
    return {**d, "verdict": v, "word": WORD[v], "by_family": per_family}


def paired_start(
    study: Study, arm: str, start: Mapping[int, Mapping[str, float]], seeds: Sequence[int]
) -> dict[int, Mapping[str, float]]:
    """The start's scores under each of ``arm``'s seeds: the start model each seed trained from."""
    out = {}
    for s in seeds:
        ss = study.start_seed(arm, s)
        if ss is not None and ss in start:
            out[s] = start[ss]
    return out


def comparisons(study: Study, out: Path, phase: str, arms: Sequence[str]) -> list[dict[str, Any]]:
    """Each of ``arms`` against its start (not the base model, which is not evaluated) and, for an RL arm,
    against each equal-token SFT continuation; on avg@k and greedy."""
    fams = families(out, phase)
    res = []
    metrics = [("avg", True), ("greedy", False)] if study.base.eval_samples > 0 else [("greedy", False)]
    for arm in arms:
        a = study.arms[arm]
        against: list[tuple[str, str]] = []
        if a.start != BASE:
            against.append(("start", a.start))
        if a.kind == "rl":
            against += [(study.arms[c].kind, c) for c in study.continuations(arm)]
        for what, other in against:
            for metric, sampled in metrics:
                mine = phase_scores(out, arm, a.seeds, phase, sampled)
                theirs = phase_scores(out, other, study.arms[other].seeds, phase, sampled)
                if what == "start":
                    theirs = paired_start(study, arm, theirs, a.seeds)
                c = compare(mine, theirs, study.options.delta, fams)
                if c is not None:
                    res.append({"arm": arm, "against": other, "relation": what, "metric": metric, **c})
    return res


def pass_curve(sampled: Mapping[int, Mapping[str, float]], samples: int) -> dict[str, float] | None:
    """Unbiased pass@k for k = 1..``samples`` over every seed's problems (Chen et al., 2021), from avg@k's
    per-problem shares of right samples; None without sampled evaluations.

    >>> pass_curve({0: {"a": 0.25, "b": 0.0}}, 4)
    {'1': 0.125, '2': 0.25, '3': 0.375, '4': 0.5}
    """
    counts = [(samples, round(share * samples)) for scores in sampled.values() for share in scores.values()]
    if not counts or samples < 1:
        return None
    return {str(k): v for k, v in pass_at_k_curve(counts).items()}


def arm_phase(study: Study, out: Path, arm: str, phase: str) -> dict[str, Any] | None:
    """An arm's evaluation in a phase: avg@k, greedy, the sampled runs' well-formed share, per family."""
    a = study.arms[arm]
    greedy = phase_scores(out, arm, a.seeds, phase, False)
    sampled = phase_scores(out, arm, a.seeds, phase, True) if study.base.eval_samples > 0 else {}
    if not greedy and not sampled:
        return None

    def format_rate(of_sampled: bool) -> float | None:
        rates = []
        for seed in a.seeds:
            done = read_json(out / eval_key(arm, seed, phase, of_sampled) / "DONE.json")
            if done is not None and isinstance(done.get("format_rate"), (int, float)):
                rates.append(float(done["format_rate"]))
        return statistics.fmean(rates) if rates else None

    return {
        "avg": arm_accuracy(sampled, True),
        "greedy": arm_accuracy(greedy, False),
        "pass_at_k": pass_curve(sampled, study.base.eval_samples),
        "format_rate": format_rate(bool(sampled)),
        "format_rate_of": "sampled" if sampled else "greedy",
        "greedy_format_rate": format_rate(False) if greedy else None,
        "by_family": by_family(sampled or greedy, families(out, phase)),
    }


def build_report(
    study: Study, out: Path, chosen: Sequence[str], how: str, confirmed: Sequence[str]
) -> dict[str, Any]:
    """Every number of the report, from the units' files."""
    arms = {}
    for arm, a in study.arms.items():
        seeds = {str(s): training_summary(out, a.kind, out / train_key(arm, s)) for s in a.seeds}
        arms[arm] = {
            "kind": a.kind,
            "start": a.start,
            "of": a.of,
            "seeds": list(a.seeds),
            "note": a.note,
            "given": settings_of_mapping(a.given),
            "training": seeds,
            SCREEN: arm_phase(study, out, arm, SCREEN),
            CONFIRM: arm_phase(study, out, arm, CONFIRM) if arm in confirmed else None,
        }
    return {
        "study": study.name,
        "file": study.source,
        "fast": study.fast,
        "options": settings_of(study.options),
        "base": {k: v for k, v in study.base.to_dict().items() if k not in ("extra",)},
        "protocol": {
            "samples": study.base.eval_samples,
            "temperature": study.base.eval_temperature,
            "max_tokens": study.base.eval_max_tokens,
            "screen_problems": (read_json(out / "validation" / "DONE.json") or {}).get("problems"),
            "confirm_problems": ((read_json(out / "data" / "counts.json") or {}).get("splits") or {}).get(
                "eval"
            ),
            "validation_seed": validation_settings(study)["seed"],
            "sampling_seeds": {
                p: [
                    sampling_seed(study, p, s)
                    for s in sorted({s for a in study.arms.values() for s in a.seeds})
                ]
                for p in PHASES
            },
        },
        "arms": arms,
        "selection": {"chosen": list(chosen), "how": how, "confirmed": list(confirmed)},
        "comparisons": {
            SCREEN: comparisons(study, out, SCREEN, list(study.arms)),
            CONFIRM: comparisons(study, out, CONFIRM, [a for a in chosen if a in confirmed]),
        },
    }


def settings_of_mapping(m: Mapping[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(dict(m), default=str))


# ------------------------------------------------------------------------------------------------ rendering
def pts(x: float) -> str:
    """A difference in points: ``0.0123`` -> ``+1.2``."""
    return f"{100 * x:+.1f}"


def ci_text(c: Mapping[str, Any]) -> str:
    """``+1.2 [-0.8, +3.1]`` (points)."""
    return f"{pts(c['mean'])} [{pts(c['ci'][0])}, {pts(c['ci'][1])}]"


def fl(v: Sequence[float] | None, spec: str) -> str:
    return "-" if not v else f"{format(v[0], spec)} → {format(v[1], spec)}"


def render(rep: Mapping[str, Any]) -> str:
    """``study.md`` from the report's numbers."""
    opts, proto = rep["options"], rep["protocol"]
    k = proto["samples"]
    avg = f"avg@{k}"
    L = [f"# Study: {rep['study']}", ""]
    L.append(
        f"From `{rep['file']}`{' with --fast' if rep['fast'] else ''}: base model {rep['base']['model']}, data seed "
        f"{rep['base']['seed']}, families {', '.join(rep['base']['families'])} at levels <= {rep['base']['max_level']}. "
        f"Evaluation as the paper measures: {avg} (the mean over {k} samples at T {proto['temperature']:g}) and greedy, "
        f"{proto['max_tokens']} new tokens. Screening: {proto['screen_problems']} new synthetic problems (seed "
        f"{proto['validation_seed']}: texts no SFT set or RL pool of the data seed can draw, none held out), sampling seeds "
        f"{', '.join(map(str, proto['sampling_seeds'][SCREEN]))}. Confirmation: the {proto['confirm_problems']} held-out "
        f"problems, fresh sampling seeds {', '.join(map(str, proto['sampling_seeds'][CONFIRM]))}."
    )
    L.append("")
    L.append(
        f"Differences are paired per problem, in points, with a 95% interval over problems and seeds. Verdict on "
        f'"better than": **gain** (interval above 0), **no-gain** (interval below {100 * opts["delta"]:g} points: a '
        f"gain that size is ruled out), **unresolved** (the interval holds both)."
    )
    L += ["", "## Arms", ""]
    L.append(
        "| arm | kind | from | seed | steps | train first → last | well-formed (rollouts) | entropy (rollouts) | "
        "weights moved: rel L2, bf16 changed | RL health | minutes |"
    )
    L.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, a in rep["arms"].items():
        src = {
            "sft_continue": f"{a['of']} (equal tokens)",
            "sft_matched": f"{a['start']} ({a['of']}'s SFT + RL tokens)",
        }.get(a["kind"], a["start"])
        for seed, t in a["training"].items():
            if t is None:
                L.append(f"| {name} | {a['kind']} | {src} | {seed} | not run | | | | | | |")
                continue
            moved = (
                f"{t['weight_rel_l2']:.2e}, {pct(t['weight_bf16_changed_share'])}"
                if t.get("weight_rel_l2") is not None
                else "-"
            )
            train = f"{t['signal']} {fl(t['train'], '.3f')}" if t["train"] else "-"
            minutes = f"{t['seconds'] / 60:.1f}" if isinstance(t.get("seconds"), (int, float)) else "-"
            L.append(
                f"| {name} | {a['kind']} | {src} | {seed} | {t['steps']} | {train} | {fl(t['well_formed'], '.2f')} | "
                f"{fl(t['entropy'], '.3f')} | {moved} | {t['health'] or '-'} | {minutes} |"
            )
    notes = [(n, a["note"]) for n, a in rep["arms"].items() if a["note"]]
    if notes:
        L.append("")
        L += [f"- {n}: {note}" for n, note in notes]
    for phase in PHASES:
        L += _phase_section(rep, phase, avg)
    sel = rep["selection"]
    L += ["", "## Files", ""]
    L.append(
        "Each arm's seed is a folder `arms/<arm>/seed<k>/` (its training run, DONE.json with the settings it ran "
        "with) with its evaluations in `screen/` and `confirm/` (`greedy/`, `sampled/`: the eval runner's "
        "predictions and results). Every number here is in `study.json`."
    )
    if not sel["confirmed"]:
        L.append("")
        L.append("No confirmation was run (--screen-only, or screening is not complete).")
    if rep.get("pages"):
        L += ["", *page_lines(rep["pages"])]
    return "\n".join(L) + "\n"


def _phase_section(rep: Mapping[str, Any], phase: str, avg: str) -> list[str]:
    sel = rep["selection"]
    title = "Screening" if phase == SCREEN else "Confirmation"
    arms = [n for n, a in rep["arms"].items() if a.get(phase)]
    L = ["", f"## {title} ({PHASE_TITLE[phase]})", ""]
    if phase == CONFIRM:
        chosen = ", ".join(sel["chosen"]) or "none"
        why = (
            "the screening split picked the arm, so its own numbers there are biased upwards"
            if sel["how"] != "--confirm"
            else "fresh problems and samples, whoever chose the arm"
        )
        L.append(
            f"Chosen: {chosen} ({sel['how']}); evaluated with its start and continuation: "
            f"{', '.join(sel['confirmed']) or 'none'}. These are the numbers to report: {why}."
        )
        L.append("")
    else:
        L.append(
            "Every arm on problems that are neither trained on nor the held-out set; the best "
            f"{avg} here is what confirmation tests, unless --confirm names arms."
        )
        L.append("")
    if not arms:
        return [*L, "Not run."]
    L.append(f"| arm | {avg} [95% CI] | greedy [95% CI] | well-formed (sampled) |")
    L.append("|---|---|---|---|")
    for n in arms:
        p = rep["arms"][n][phase]

        def acc(x: Mapping[str, Any] | None) -> str:
            return "-" if not x else f"{pct(x['mean'])} [{pct(x['ci'][0])}, {pct(x['ci'][1])}]"

        L.append(f"| {n} | {acc(p['avg'])} | {acc(p['greedy'])} | {pct(p['format_rate'], 0)} |")
    curves = {n: rep["arms"][n][phase].get("pass_at_k") for n in arms}
    curves = {n: c for n, c in curves.items() if c}
    if phase == CONFIRM and curves:
        ks = sorted({int(k) for c in curves.values() for k in c})
        L += [
            "",
            "pass@k (unbiased, from the sampled evaluations; RL that only sharpens lifts k = 1, not the largest k):",
            "",
        ]
        L.append("| k | " + " | ".join(curves) + " |")
        L.append("|---|" + "---|" * len(curves))
        L += [f"| {k} | " + " | ".join(pct(c.get(str(k))) for c in curves.values()) + " |" for k in ks]
    comps = rep["comparisons"][phase]
    if comps:
        L += [
            "",
            "| arm | against | metric | difference, points [95% CI] | SE | rose / fell | seeds × problems | verdict |",
        ]
        L.append("|---|---|---|---|---|---|---|---|")
        for c in comps:
            rel = "its start" if c["relation"] == "start" else "equal-token SFT"
            metric = avg if c["metric"] == "avg" else "greedy"
            L.append(
                f"| {c['arm']} | {c['against']} ({rel}) | {metric} | {ci_text(c)} | {100 * c['se']:.1f} | "
                f"{c['rose']} / {c['fell']} | {len(c['seeds'])} × {c['problems']} | **{c['word']}** |"
            )
    fam_comps = [c for c in comps if c["metric"] == comps[0]["metric"] and c["by_family"]] if comps else []
    families = sorted({f for n in arms for f in rep["arms"][n][phase]["by_family"]})
    if families:
        metric = avg if rep["protocol"]["samples"] > 0 else "greedy"
        L += ["", f"By task family ({metric}; differences in points [95% CI]):", ""]
        heads = [*arms, *(f"{c['arm']} − {c['against']}" for c in fam_comps)]
        L.append("| family | " + " | ".join(heads) + " |")
        L.append("|---|" + "---|" * len(heads))
        for f in families:
            cells = [pct((rep["arms"][n][phase]["by_family"].get(f) or {}).get("mean")) for n in arms]
            for c in fam_comps:
                d = c["by_family"].get(f)
                cells.append("-" if d is None else ci_text(d))
            L.append(f"| {f} | " + " | ".join(cells) + " |")
    return L


def study_pages(study: Study, out: Path, comps: Sequence[Mapping[str, Any]]) -> list[Any]:
    """The chain viewer's pages of the confirmation: each compared pair (an arm against its start or an
    equal-token SFT arm) on the first seed both ran, sampled where sampled, gained and lost problems first."""
    sampled = study.base.eval_samples > 0
    how = "sampled" if sampled else "greedy"
    pages: dict[str, Any] = {}
    for c in comps:
        arm, other = c["arm"], c["against"]
        mine, theirs = study.arms[arm].seeds, study.arms[other].seeds
        seed = next((s for s in mine if s in theirs), mine[0])
        # the other arm's run of that seed, else its only one (a start shared by every seed)
        runs = (out / eval_key(other, seed if seed in theirs else theirs[0], CONFIRM, sampled),)
        runs += (out / eval_key(arm, seed, CONFIRM, sampled),)
        what = f"{arm} against {other} on the held-out set, gained and lost problems first ({how})"
        name = f"view-{other}-vs-{arm}.html"
        pages.setdefault(name, Page(name, runs, (other, arm), what))  # avg@k and greedy compare one pair
    return list(pages.values())


def write_report(
    study: Study, out: Path, chosen: Sequence[str], how: str, confirmed: Sequence[str]
) -> dict[str, Any]:
    """Write ``study.json`` and ``study.md`` (and the confirmation's pages under ``pages/``); returns the
    report's numbers."""
    rep = build_report(study, out, chosen, how, confirmed)
    rep["pages"] = write_pages(study_pages(study, out, rep["comparisons"][CONFIRM]), out / "pages", out)
    atomic_write_json(out / "study.json", rep, default=str)
    atomic_write_text(out / "study.md", render(rep))
    return rep
