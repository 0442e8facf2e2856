"""The claims report: ``report.json`` (every number, each claim's verdict) and ``report.md`` (tables, plots),
computed from what the stages wrote (evaluation predictions, RL metrics, TTS records, SFT data stats)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from e2c.claims import stats as st
from e2c.claims.config import CLAIM_METHOD, REFERENCE_METHOD
from e2c.claims.plots import write_plots
from e2c.claims.stages import ClaimsContext, arm_name, data_stats
from e2c.core.errors import UserError
from e2c.core.files import atomic_write_json, atomic_write_text, read_records
from e2c.eval.compare import per_problem_scores
from e2c.quickstart.context import read_done
from e2c.quickstart.report import system_info
from e2c.tts import METHODS, methods_with, traits
from e2c.view import Page, page_lines, write_pages

PAPER = {
    "weighting": "stage 2 weights the advantage of exploration tokens x2 (coefficient 2.0 vs 1.0)",
    "tts": 'AIME24, K=32: self-consistency 50.0% at 86.2k tokens, E2C-ReAct loop 53.3% at 12.4k ("7x fewer")',
    "adapt": "EF-SFT adapts to a new domain with ~3.5% of the tokens of full SFT",
}
PAPER_SHARE = 0.035
# Per-step RL metrics summarised per arm (mean over steps).
ARM_METRICS = (
    "critic/score/mean",
    "health/train_acc",
    "e2c/explore_tokens_mean",
    "e2c/execute_tokens_mean",
    "health/entropy_sampled_explore",
    "health/entropy_sampled_execute",
    "health/well_formed_share",
)


def _mean(xs: Sequence[float]) -> float | None:
    xs = [x for x in xs if x is not None and not math.isnan(x)]
    return sum(xs) / len(xs) if xs else None


def needed_scale(ci: Sequence[float], delta: float) -> float:
    """How many times more data (seeds x problems) would shrink the interval's half-width to ``delta / 2``,
    the width at which an effect of ``delta`` and no effect can no longer share it (variance ~ 1 / n)."""
    half = (float(ci[1]) - float(ci[0])) / 2
    return max(1.0, (half / (delta / 2)) ** 2) if delta > 0 else math.inf


# ------------------------------------------------------------------------------------------------ claim 1
def predictions(cc: ClaimsContext, path: str) -> dict[str, float]:
    """``{problem id: score}`` of an evaluation's predictions (a path relative to the claims folder)."""
    full = cc.out / path
    scores = per_problem_scores(full)
    if not scores:
        raise UserError(f"no predictions at {full}; rerun the stage that wrote it (--from)")
    return scores


def weighting_section(cc: ClaimsContext) -> dict[str, Any] | None:
    done = read_done(cc.dir("weighting"))
    if done is None:
        return None
    c = cc.cfg
    arms = done["arms"]
    scores: dict[float, dict[int, dict[str, float]]] = defaultdict(dict)
    rows = []
    for coef in c.weight_coefs:
        for seed in c.weight_seeds:
            arm = arms[arm_name(coef, seed)]
            sc = predictions(cc, arm["predictions"])
            scores[coef][seed] = sc
            steps = arm.get("steps") or []
            rows.append(
                {
                    "coef": coef,
                    "seed": seed,
                    **st.accuracy_ci(list(sc.values())),
                    "seconds": None if arm.get("reused_quickstart_rl") else arm.get("seconds"),
                    "reused_quickstart_rl": arm.get("reused_quickstart_rl", False),
                    "health_verdict": arm.get("health_verdict"),
                    "reward_curve": [s.get("critic/score/mean") for s in steps],
                    **{k: _mean([s.get(k) for s in steps]) for k in ARM_METRICS},
                }
            )
    sft = per_problem_scores(cc.quickstart.dir("eval_sft") / "predictions" / "synthetic.jsonl")
    per_coef = {}
    for coef in c.weight_coefs:
        vs_sft = st.seed_problem_difference(scores[coef], {s: sft for s in c.weight_seeds}) if sft else None
        per_coef[f"{coef:g}"] = {
            "accuracy_mean": _mean([r["accuracy"] for r in rows if r["coef"] == coef]),
            "minus_sft": vs_sft,
        }
    claim, base = c.weight_coefs[0], c.weight_coefs[1]
    diffs = {
        f"{claim:g}-{other:g}": st.seed_problem_difference(scores[claim], scores[other])
        for other in c.weight_coefs[1:]
    }
    main = diffs[f"{claim:g}-{base:g}"]
    v = st.verdict(main["ci"], c.delta)
    return {
        "paper": PAPER["weighting"],
        "arms": rows,
        "per_coef": per_coef,
        "sft_accuracy": st.accuracy_ci(list(sft.values())) if sft else None,
        "differences": diffs,
        "verdict": v,
        "needed_scale": needed_scale(main["ci"], c.delta) if v == st.UNRESOLVED else None,
        "seconds": round(sum(float(a.get("seconds") or 0) for a in arms.values()), 1),
    }


# ------------------------------------------------------------------------------------------------ claim 2
def tts_table(records: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], dict]:
    """Per (method, budget): accuracy with its interval and the mean generated tokens per problem, split by
    role; and ``{method: {budget: {problem: (correct, tokens)}}}`` for the ratios."""
    by: dict[str, dict[int, dict[str, tuple[float, float]]]] = defaultdict(lambda: defaultdict(dict))
    roles: dict[tuple[str, int], dict[str, Mapping[str, int]]] = defaultdict(dict)
    for r in records:  # one record per (method, budget, problem): a repeated one replaces the earlier
        m, b, pid = r["method"], int(r["budget"]), str(r["problem_id"])
        by[m][b][pid] = (float(bool(r["correct"])), float(r["generated_tokens"]))
        roles[(m, b)][pid] = r.get("tokens_by_role") or {}
    rows = []
    for m in by:
        for b in sorted(by[m]):
            vals = list(by[m][b].values())
            rr = list(roles[(m, b)].values())
            n = len(vals)

            def role_mean(*names: str, rr=rr, n=n) -> float:
                return sum(sum(x.get(k, 0) for k in names) for x in rr) / n

            explore_roles = traits(m).explore_roles if m in METHODS else ("explore",)
            known = {*explore_roles, "execute", "full"}
            rows.append(
                {
                    "method": m,
                    "budget": b,
                    **st.accuracy_ci([v[0] for v in vals]),
                    "tokens": sum(v[1] for v in vals) / n,
                    "explore_tokens": role_mean(*explore_roles),
                    "execute_tokens": role_mean("execute"),
                    "whole_chain_tokens": role_mean("full"),
                    "other_tokens": sum(sum(v for k, v in x.items() if k not in known) for x in rr) / n,
                }
            )
    return rows, by


def tts_section(cc: ClaimsContext) -> dict[str, Any] | None:
    done = read_done(cc.dir("tts"))
    if done is None:
        return None
    records = [r for _, r in read_records(cc.out / done["records"], strict=False)]
    rows, by = tts_table(records)
    ratios = {}
    ref = by.get(REFERENCE_METHOD, {})
    for m in by:
        budgets = sorted(set(ref) & set(by[m]))
        if m == REFERENCE_METHOD or not budgets:
            continue
        ids = sorted(set.intersection(*(set(ref[b]) & set(by[m][b]) for b in budgets)))
        if not ids:
            continue
        ratios[m] = st.reach_ratio(
            [[ref[b][i][0] for i in ids] for b in budgets],
            [[ref[b][i][1] for i in ids] for b in budgets],
            [[by[m][b][i][0] for i in ids] for b in budgets],
            [[by[m][b][i][1] for i in ids] for b in budgets],
        )
    v, why = st.ratio_verdict(ratios.get(CLAIM_METHOD), cc.cfg.ratio_delta)
    sc_rows = [r for r in rows if r["method"] == REFERENCE_METHOD]
    best = max(sc_rows, key=lambda r: (r["accuracy"], -r["budget"])) if sc_rows else None
    claim = ratios.get(CLAIM_METHOD)
    paper_7x = None
    if claim is not None and claim.get("ci"):
        lo, hi = claim["ci"]
        paper_7x = "ruled out" if hi < 7 else ("exceeded" if lo > 7 else "inside the interval")
    return {
        "paper": PAPER["tts"],
        "claim_method": CLAIM_METHOD,
        "reference": REFERENCE_METHOD,
        "rows": rows,
        "ratios": ratios,
        "verdict": v,
        "unresolved_because": why,
        "sc_best_budget": None if best is None else best["budget"],
        "sc_best_at_smallest_budget": best is not None and best["budget"] == min(cc.cfg.tts_budgets),
        "paper_7x": paper_7x,
        "nested": cc.cfg.tts_nested,
        "problems": len({str(r["problem_id"]) for r in records}),
        "seconds": done.get("seconds"),
    }


# ------------------------------------------------------------------------------------------------ claim 3
def adapt_section(cc: ClaimsContext) -> dict[str, Any] | None:
    done = read_done(cc.dir("adapt"))
    if done is None:
        return None
    c = cc.cfg
    scores = {
        arm: {dom: predictions(cc, e[dom]["predictions"]) for dom in ("new", "old")}
        for arm, e in done["evals"].items()
    }
    acc = {arm: {dom: st.accuracy_ci(list(s.values())) for dom, s in d.items()} for arm, d in scores.items()}
    diffs = {}
    for dom in ("new", "old"):
        for a, b in (("ef_sft", "none"), ("full_sft", "none"), ("ef_sft", "full_sft")):
            diffs[f"{a}-{b}/{dom}"] = st.problem_difference(scores[a][dom], scores[b][dom])
    runs = done["runs"]
    ef, full = (data_stats(cc.dir("adapt") / m / "sft_data_stats.json") for m in ("ef_sft", "full_sft"))
    share = ef["trained_tokens"] / full["trained_tokens"] if full.get("trained_tokens") else None
    main = diffs["ef_sft-none/new"]
    v = st.noninferior_verdict(main["ci"], diffs["ef_sft-full_sft/new"]["ci"], c.delta)
    units = [runs["ef_sft"], runs["full_sft"], done["data"]]
    units += [e[dom] for e in done["evals"].values() for dom in ("new", "old")]
    return {
        "paper": PAPER["adapt"],
        "family": f"{c.adapt_family}/L{c.adapt_level}",
        "train_problems": done["data"]["train"],
        "eval_problems": done["data"]["eval"],
        "accuracy": acc,
        "differences": diffs,
        "trained_tokens": {"ef_sft": ef["trained_tokens"], "full_sft": full["trained_tokens"]},
        "trained_share": share,
        "build_share": done["data"]["ef_sft"]["share"],
        "paper_share": PAPER_SHARE,
        "ef_rows": {
            "exploration": done["data"]["ef_sft"]["exploration_rows"],
            "full": done["data"]["ef_sft"]["full_rows"],
        },
        "verdict": v,
        "needed_scale": needed_scale(main["ci"], c.delta) if v == st.UNRESOLVED else None,
        "seconds": round(sum(float(u.get("seconds") or 0) for u in units), 1),
    }


# ------------------------------------------------------------------------------------------------ report
def collect(cc: ClaimsContext) -> dict[str, Any]:
    start = read_done(cc.dir("start")) or {}
    rep = {
        "settings": cc.cfg.to_dict(),
        "quickstart_settings": cc.qcfg.to_dict(),
        "system": system_info(),
        "start": {
            "seconds": start.get("seconds"),
            "stage_seconds": start.get("stage_seconds"),
            "headline": start.get("headline"),
        },
        "weighting": weighting_section(cc),
        "tts": tts_section(cc),
        "adapt": adapt_section(cc),
    }
    rep["verdicts"] = {k: (rep[k] or {}).get("verdict") for k in ("weighting", "tts", "adapt")}
    secs = [rep["start"]["seconds"]] + [(rep[k] or {}).get("seconds") for k in ("weighting", "tts", "adapt")]
    rep["total_seconds"] = round(sum(float(s or 0) for s in secs), 1)
    return rep


def pct(x: float | None, d: int = 1) -> str:
    return "-" if x is None else f"{100 * x:.{d}f}"


def ci_pct(ci: Sequence[float] | None, d: int = 1) -> str:
    return "-" if not ci else f"[{100 * ci[0]:+.{d}f}, {100 * ci[1]:+.{d}f}]"


def acc_cell(a: Mapping[str, Any] | None) -> str:
    if not a or a.get("accuracy") is None:
        return "-"
    return f"{pct(a['accuracy'])}% [{pct(a['ci'][0])}, {pct(a['ci'][1])}] ({a['correct']}/{a['n']})"


def minutes(s: float | None) -> str:
    return "-" if s is None else f"{float(s) / 60:.1f} min"


def render(rep: Mapping[str, Any], plots: Mapping[str, str | None]) -> str:
    cfg = rep["settings"]
    L = ["# The paper's claims at laptop scale", ""]
    sysi = rep["system"]
    L += [
        f"Machine: {sysi.get('cpu', '?')}, {sysi.get('cores', '?')} cores; model "
        f"{rep['quickstart_settings']['model']}; commit {sysi.get('git_commit', '?')}; written {sysi.get('date', '?')}.",
        f"Total time {minutes(rep['total_seconds'])} (start {minutes(rep['start']['seconds'])}, weighting "
        f"{minutes((rep['weighting'] or {}).get('seconds'))}, TTS {minutes((rep['tts'] or {}).get('seconds'))}, "
        f"adaptation {minutes((rep['adapt'] or {}).get('seconds'))}).",
        "",
        "| claim | the paper | measured here | 95% interval | verdict |",
        "|---|---|---|---|---|",
    ]
    w, t, a = rep["weighting"], rep["tts"], rep["adapt"]
    if w:
        k = next(iter(w["differences"]))
        d = w["differences"][k]
        L.append(
            f"| 1. exploration weighting | {w['paper']} | accuracy {k}: {100 * d['mean']:+.1f} pts "
            f"({len(d['seeds'])} seeds x {d['problems']} problems) | {ci_pct(d['ci'])} pts | **{w['verdict']}** |"
        )
    if t:
        r = t["ratios"].get(t["claim_method"])
        meas = ratio_text(t["claim_method"], r)
        ci = "-" if r is None or r["ci"] is None else f"[{r['ci'][0]:.2f}, {r['ci'][1]:.2f}]x"
        L.append(f"| 2. cheap test-time scaling | {t['paper']} | {meas} | {ci} | **{t['verdict']}** |")
    if a:
        d = a["differences"]["ef_sft-none/new"]
        L.append(
            f"| 3. exploration-only adaptation | {a['paper']} | EF-SFT - nothing on {a['family']}: "
            f"{100 * d['mean']:+.1f} pts; trained tokens {pct(a['trained_share'])}% of full SFT | "
            f"{ci_pct(d['ci'])} pts | **{a['verdict']}** |"
        )
    L += [
        "",
        f"Verdicts: *supported* when the interval is above 0; *not supported* when it lies below the smallest "
        f"effect that matters ({100 * cfg['delta']:.0f} points of accuracy; for the token ratio "
        f"{1 + cfg['ratio_delta']:.1f}x); otherwise *not resolvable at this scale*.",
        "",
    ]
    if w:
        L += [
            "## 1. Exploration weighting",
            "",
            f"GRPO stage 2 from the same SFT model on the same filtered prompts, {rep['quickstart_settings']['rl_steps']} "
            "steps per run; seed s sets the data order and the rollout sampling (rollout seed 42 + s), the same "
            "for every coefficient, so arms are paired by seed. Held-out accuracy is greedy on the same "
            f"{w['arms'][0]['n']} problems. SFT model (no RL): {acc_cell(w['sft_accuracy'])}.",
            "",
            "| coef | seed | accuracy [95% CI] | mean reward | train acc | explore tok | execute tok | "
            "entropy explore / execute | health | time |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in w["arms"]:
            ent = (
                "-"
                if r.get("health/entropy_sampled_explore") is None
                else (
                    f"{r['health/entropy_sampled_explore']:.2f} / {_f(r.get('health/entropy_sampled_execute'), 2)}"
                )
            )
            L.append(
                f"| {r['coef']:g} | {r['seed']}{' (quickstart RL)' if r['reused_quickstart_rl'] else ''} | {acc_cell(r)} | "
                f"{_f(r.get('critic/score/mean'))} | {_f(r.get('health/train_acc'))} | {_f(r.get('e2c/explore_tokens_mean'), 0)} | "
                f"{_f(r.get('e2c/execute_tokens_mean'), 0)} | {ent} | {(r.get('health_verdict') or '-').split(':')[0]} | {minutes(r.get('seconds'))} |"
            )
        L += [
            "",
            "| comparison | mean (pts) | per seed (pts) | crossed bootstrap 95% | t over seeds 95% |",
            "|---|---|---|---|---|",
        ]
        for k, d in w["differences"].items():
            per = ", ".join(f"{100 * v:+.1f}" for v in d["per_seed"].values())
            L.append(
                f"| {k} | {100 * d['mean']:+.1f} | {per} | {ci_pct(d['bootstrap_ci'])} | {ci_pct(d['seed_t_ci'])} |"
            )
        for coef, p in w["per_coef"].items():
            if p["minus_sft"]:
                L.append(
                    f"| {coef} - SFT | {100 * p['minus_sft']['mean']:+.1f} | "
                    f"{', '.join(f'{100 * v:+.1f}' for v in p['minus_sft']['per_seed'].values())} | "
                    f"{ci_pct(p['minus_sft']['bootstrap_ci'])} | {ci_pct(p['minus_sft']['seed_t_ci'])} |"
                )
        L += [
            "",
            f"Verdict: **{w['verdict']}** (the interval is the union of the two).",
            *_needed(w.get("needed_scale"), "seeds x problems"),
            "",
        ]
        if plots.get("weighting"):
            L += [f"![reward curves and accuracy per arm]({plots['weighting']})", ""]
    if t:
        L += [
            "## 2. Test-time scaling",
            "",
            f"The RL model (the quickstart's: coefficient {rep['quickstart_settings']['rl_explore_adv_coef']:g}, seed "
            f"{rep['quickstart_settings']['seed']}) on {t['problems']} held-out problems. Tokens are generated "
            "tokens per problem (every call: explorations, executions, judge, refinements, tree steps), as the "
            "paper counts them. Self-consistency samples whole chains in one call (its tokens are "
            "whole-chain tokens)."
            + (
                f" Budgets below the largest of {' and '.join(methods_with('nestable'))} are read off the largest "
                "run's first k draws (python -m e2c.tts --nested-budgets)."
                if t["nested"]
                else ""
            ),
            "",
            "| method | K | accuracy [95% CI] | tokens | explore (e2c_tot: its tree steps) | execute | whole chain | other (judge, scorer, refine) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in t["rows"]:
            L.append(
                f"| {r['method']} | {r['budget']} | {acc_cell(r)} | {r['tokens']:.0f} | {r['explore_tokens']:.0f} | "
                f"{r['execute_tokens']:.0f} | {r['whole_chain_tokens']:.0f} | {r['other_tokens']:.0f} |"
            )
        L += [
            "",
            "Tokens to reach self-consistency's best accuracy (over its budgets), as the ratio self-consistency's "
            "tokens / the method's (>1: cheaper; 0: never reaches it); 95% interval from 2000 bootstrap resamples "
            "of the problems (the target recomputed in each).",
            "",
            "| method | target | SC tokens | method tokens | ratio | 95% CI | resamples reaching | resamples defined |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for m, r in t["ratios"].items():
            if r["ratio"] is None:
                L.append(f"| {m} | {pct(r['target'])}% | - | - | - | - | - | 0% |")
                continue
            mt = "never" if r["method_tokens"] is None else f"{r['method_tokens']:.0f}"
            L.append(
                f"| {m} | {pct(r['target'])}% | {r['ref_tokens']:.0f} | {mt} | {r['ratio']:.2f}x | "
                f"[{r['ci'][0]:.2f}, {r['ci'][1]:.2f}]x | {pct(r['reached_share'], 0)}% | "
                f"{pct(r['defined_share'], 0)}% |"
            )
        why = f" ({t['unresolved_because']})" if t.get("unresolved_because") else ""
        L += [
            "",
            f"Verdict (on {t['claim_method']}, the paper's method, fixed before the run): **{t['verdict']}**{why}. "
            f"The paper's 7x: {t.get('paper_7x') or 'no interval'}.",
        ]
        if t.get("sc_best_at_smallest_budget"):
            L.append(
                f"Self-consistency is best at its smallest budget (K={t['sc_best_budget']}): more samples did not "
                "help it here, so the ratio compares single chains, not test-time scaling."
            )
        L.append("")
        if plots.get("tts"):
            L += [f"![accuracy against tokens]({plots['tts']})", ""]
    if a:
        L += [
            "## 3. Exploration-only adaptation",
            "",
            f"New domain: {a['family']}, a family held out of SFT and RL ({a['train_problems']} training problems, "
            f"{a['eval_problems']} held out). From the RL model, the same problems, steps, batch and learning rate: "
            f"EF-SFT ({a['ef_rows']['exploration']} exploration-only rows + {a['ef_rows']['full']} full chains), full "
            "E2C SFT, and nothing. Old domain: the quickstart's held-out problems (forgetting).",
            "",
            "| method | new domain [95% CI] | old domain [95% CI] | trained tokens |",
            "|---|---|---|---|",
        ]
        for arm in ("none", "ef_sft", "full_sft"):
            tok = a["trained_tokens"].get(arm, 0)
            L.append(
                f"| {arm} | {acc_cell(a['accuracy'][arm]['new'])} | {acc_cell(a['accuracy'][arm]['old'])} | {tok} |"
            )
        L += ["", "| comparison | mean (pts) | bootstrap 95% (problems) |", "|---|---|---|"]
        for k, d in a["differences"].items():
            L.append(f"| {k} | {100 * d['mean']:+.1f} | {ci_pct(d['ci'])} |")
        L += [
            "",
            f"EF-SFT trained {pct(a['trained_share'])}% of the tokens full SFT trained on the same problems "
            f"(the paper: {pct(a['paper_share'])}%).",
            "",
            f"Verdict: **{a['verdict']}**. Supported needs EF-SFT above nothing on the new domain (interval above 0) "
            f"and not worse than full SFT by {100 * rep['settings']['delta']:.0f} points or more (the EF-SFT - full "
            "SFT interval above -delta); not supported when its gain is ruled out or it is clearly worse than full "
            "SFT. One training seed per method: training variance is not in these intervals.",
            *_needed(a.get("needed_scale"), "problems"),
            "",
        ]
        if plots.get("adapt"):
            L += [f"![adaptation accuracy]({plots['adapt']})", ""]
    L += page_lines(rep.get("pages") or {})
    return "\n".join(L) + "\n"


def claims_pages(cc: ClaimsContext, rep: Mapping[str, Any]) -> list[Page]:
    """Each arm's page against its reference: claim 1, the claimed coefficient against the base one, per
    seed; claim 3, EF-SFT against no adaptation and against full SFT on the new domain, and against no
    adaptation on the old one; claim 2, the TTS run (every method's chains per problem)."""

    def run_of(predictions: str) -> Path:  # <run>/predictions/synthetic.jsonl
        return (cc.out / predictions).parents[1]

    pages: list[Page] = []
    weighting = read_done(cc.dir("weighting"))
    if rep.get("weighting") and weighting:
        claim, base = cc.cfg.weight_coefs[0], cc.cfg.weight_coefs[1]
        for seed in cc.cfg.weight_seeds:
            runs = tuple(run_of(weighting["arms"][arm_name(c, seed)]["predictions"]) for c in (base, claim))
            what = f"claim 1: exploration weight {claim:g} against {base:g}, seed {seed}"
            labels = (f"coef {base:g}", f"coef {claim:g}")
            pages.append(Page(f"view-weighting-s{seed}-{claim:g}-vs-{base:g}.html", runs, labels, what))
    adapt = read_done(cc.dir("adapt"))
    if rep.get("adapt") and adapt:
        ev = adapt["evals"]
        for arm, ref, dom in (
            ("ef_sft", "none", "new"),
            ("ef_sft", "full_sft", "new"),
            ("ef_sft", "none", "old"),
        ):
            runs = (run_of(ev[ref][dom]["predictions"]), run_of(ev[arm][dom]["predictions"]))
            what = f"claim 3: {arm} against {ref}, {dom} domain"
            pages.append(Page(f"view-adapt-{dom}-{arm}-vs-{ref}.html", runs, (ref, arm), what))
    tts = read_done(cc.dir("tts"))
    if rep.get("tts") and tts:
        what = "claim 2: the TTS run, every method's chains per problem"
        pages.append(Page("view-tts.html", ((cc.out / tts["records"]).parent,), ("TTS",), what))
    return pages


def ratio_text(method: str, r: Mapping[str, Any] | None) -> str:
    """One line on a method's token ratio against self-consistency."""
    if r is None:
        return "-"
    if r["ratio"] is None:
        return "self-consistency answers no problem: there is no accuracy to reach"
    if r["method_tokens"] is None:
        return f"{method} never reaches self-consistency's best ({pct(r['target'])}%): ratio 0"
    return (
        f"{method} reaches self-consistency's best ({pct(r['target'])}%) with {r['method_tokens']:.0f} tokens "
        f"against {r['ref_tokens']:.0f}: ratio {r['ratio']:.2f}x"
    )


def _f(x: float | None, d: int = 3) -> str:
    return "-" if x is None else f"{x:.{d}f}"


def _needed(scale: float | None, what: str) -> list[str]:
    if not scale:
        return []
    return [
        f"To resolve it, the interval must be about {math.sqrt(scale):.1f}x narrower: about "
        f"{scale:.0f}x as many {what} (the variance shrinking as 1/n)."
    ]


def write_report(cc: ClaimsContext) -> dict[str, Any]:

    rep = collect(cc)
    plots = write_plots(rep, cc.out / "plots")
    rel_plots = {k: (str(Path(v).relative_to(cc.out)) if v else None) for k, v in plots.items()}
    rep["plots"] = rel_plots
    rep["pages"] = write_pages(claims_pages(cc, rep), cc.out / "pages", cc.out)
    atomic_write_json(cc.out / "report.json", rep, indent=1, default=str)
    atomic_write_text(cc.out / "report.md", render(rep, rel_plots))
    return {
        "verdicts": rep["verdicts"],
        "total_seconds": rep["total_seconds"],
        "outputs": {
            "report": "report.md",
            "json": "report.json",
            **{name: p["path"] for name, p in rep["pages"].items() if p["path"]},
        },
    }
