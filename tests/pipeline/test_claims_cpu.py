"""The claims run's pieces: its statistics against plain loops, nested TTS budgets against running every
budget, the report's tables, and its command line on bad input."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from e2c.claims import stats as st
from e2c.claims.report import needed_scale, tts_table
from e2c.data.registry import Record
from e2c.generation.scripted import ScriptedGenerator
from e2c.tts import TTSSettings
from e2c.tts.run import nested_records, read_done, run_tts

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------------------------------ stats
def test_seed_problem_difference_matches_a_plain_loop_cpu() -> None:
    rng = random.Random(1)
    a = {s: {f"p{i}": float(rng.random() < 0.4) for i in range(50)} for s in range(3)}
    b = {s: {f"p{i}": float(rng.random() < 0.3) for i in range(50)} for s in range(3)}
    res = st.seed_problem_difference(a, b, boot=500)
    total = 0.0
    for s in range(3):
        for i in range(50):
            total += a[s][f"p{i}"] - b[s][f"p{i}"]
    assert res["mean"] == pytest.approx(total / 150)
    for s in range(3):
        assert res["per_seed"][str(s)] == pytest.approx(sum(a[s][k] - b[s][k] for k in a[s]) / 50)
    lo, hi = res["ci"]
    assert lo <= res["mean"] <= hi
    # the verdict interval holds both the bootstrap and the seed t interval
    assert lo <= min(res["bootstrap_ci"][0], res["seed_t_ci"][0]) and hi >= max(
        res["bootstrap_ci"][1], res["seed_t_ci"][1]
    )
    assert res == st.seed_problem_difference(a, b, boot=500)  # seeded: reproducible


def test_seed_problem_difference_se_is_the_paired_se_of_seed_averaged_problems_cpu() -> None:
    from e2c.core.stats import paired_difference

    rng = random.Random(2)
    a = {s: {f"p{i}": rng.random() for i in range(40)} for s in range(2)}
    b = {s: {f"p{i}": rng.random() for i in range(40)} for s in range(2)}
    res = st.seed_problem_difference(a, b, boot=50)
    ids = [f"p{i}" for i in range(40)]
    after = [(a[0][i] + a[1][i]) / 2 for i in ids]
    before = [(b[0][i] + b[1][i]) / 2 for i in ids]
    ref = paired_difference(after, before)  # one seed's paired SE, the quickstart's
    assert res["se"] == pytest.approx(ref["se"])
    assert (res["rose"], res["fell"]) == (ref["improved"], ref["worsened"])
    one = st.seed_problem_difference({0: a[0]}, {0: b[0]}, boot=50)
    assert one["se"] == pytest.approx(paired_difference([a[0][i] for i in ids], [b[0][i] for i in ids])["se"])


def test_seed_problem_difference_uses_shared_seeds_and_problems_cpu() -> None:
    a = {0: {"x": 1.0, "y": 1.0}, 1: {"x": 1.0, "y": 0.0}, 5: {"x": 0.0}}
    b = {0: {"x": 0.0, "y": 0.0, "z": 1.0}, 1: {"x": 0.0, "y": 0.0}}
    res = st.seed_problem_difference(a, b, boot=50)
    assert res["seeds"] == [0, 1] and res["problems"] == 2
    assert res["mean"] == pytest.approx(0.75)
    with pytest.raises(ValueError, match="no seed"):
        st.seed_problem_difference({0: {"x": 1.0}}, {1: {"x": 1.0}})
    with pytest.raises(ValueError, match="no problem"):
        st.seed_problem_difference({0: {"x": 1.0}}, {0: {"y": 1.0}})


def test_identical_arms_get_the_rule_of_three_interval_cpu() -> None:
    """All pairs equal: the bootstrap says [0, 0]; the interval is widened to +-3/problems, so 30 problems
    cannot rule out a 2-point effect and 300 can."""
    few = {s: {f"p{i}": float(i % 3 == 0) for i in range(30)} for s in range(3)}
    res = st.seed_problem_difference(few, few, boot=200)
    assert res["mean"] == 0.0 and res["bootstrap_ci"] == [0.0, 0.0]
    assert res["ci"] == pytest.approx([-0.1, 0.1])
    assert st.verdict(res["ci"], 0.02) == st.UNRESOLVED
    many = {s: {f"p{i}": float(i % 3 == 0) for i in range(300)} for s in range(3)}
    res = st.seed_problem_difference(many, many, boot=50)
    assert res["ci"] == pytest.approx([-0.01, 0.01])
    assert st.verdict(res["ci"], 0.02) == st.NOT_SUPPORTED


def test_no_ratio_when_self_consistency_never_answers_cpu() -> None:
    zero = [[0.0] * 5, [0.0] * 5]
    toks = [[10.0] * 5, [20.0] * 5]
    res = st.reach_ratio(zero, toks, [[1.0] * 5, [1.0] * 5], toks, boot=50)
    assert res["ratio"] is None and res["ci"] is None and res["defined_share"] == 0.0


@pytest.mark.parametrize(
    ("ci", "want"),
    [
        ((0.01, 0.2), st.SUPPORTED),
        ((-0.05, 0.015), st.NOT_SUPPORTED),
        ((-0.3, -0.1), st.NOT_SUPPORTED),
        ((-0.05, 0.05), st.UNRESOLVED),
        ((0.0, 0.5), st.UNRESOLVED),
    ],
)
def test_verdict_cpu(ci, want) -> None:
    assert st.verdict(ci, 0.02) == want


@settings(max_examples=60, deadline=None)
@given(hs.lists(hs.tuples(hs.booleans(), hs.booleans()), min_size=1, max_size=40))
def test_problem_difference_interval_holds_the_mean_cpu(pairs) -> None:
    a = {str(i): float(x) for i, (x, _) in enumerate(pairs)}
    b = {str(i): float(y) for i, (_, y) in enumerate(pairs)}
    res = st.problem_difference(a, b, boot=100)
    assert res["mean"] == pytest.approx(sum(x - y for x, y in pairs) / len(pairs))
    assert -1.0 <= res["ci"][0] <= res["mean"] + 1e-12 <= res["ci"][1] + 2e-12 <= 1.0 + 1e-9


def test_reach_ratio_against_a_plain_reading_cpu() -> None:
    # SC: 40% at 100 tokens, 60% at 400; the method: 50% at 20, 60% at 50 -> reaches 60% with 50 tokens: 8x
    n = 10
    ref_c = [[1.0] * 4 + [0.0] * 6, [1.0] * 6 + [0.0] * 4]
    ref_t = [[100.0] * n, [400.0] * n]
    m_c = [[1.0] * 5 + [0.0] * 5, [1.0] * 6 + [0.0] * 4]
    m_t = [[20.0] * n, [50.0] * n]
    res = st.reach_ratio(ref_c, ref_t, m_c, m_t, boot=300)
    assert res["target"] == pytest.approx(0.6)
    assert res["ref_tokens"] == 400.0 and res["method_tokens"] == 50.0
    assert res["ratio"] == pytest.approx(8.0)
    assert res["ci"][0] <= res["ratio"] <= res["ci"][1]
    # a method that never reaches the target scores 0, and so does its whole interval
    never = st.reach_ratio(ref_c, ref_t, [[0.0] * n, [0.0] * n], m_t, boot=100)
    assert never["ratio"] == 0.0 and never["method_tokens"] is None and never["ci"] == [0.0, 0.0]
    assert never["reached_share"] == 0.0
    with pytest.raises(ValueError, match="every budget"):
        st.reach_ratio(ref_c, ref_t, [[1.0]], [[1.0]])


def test_tokens_to_reach_takes_the_cheapest_budget_at_the_target_cpu() -> None:
    pts = [(0.5, 100.0), (0.7, 300.0), (0.7, 200.0), (0.9, 900.0)]
    assert st.tokens_to_reach(pts, 0.7) == 200.0
    assert st.tokens_to_reach(pts, 0.95) is None
    assert st.ratio_at([(0.4, 100.0), (0.6, 400.0)], pts)["ratio"] == pytest.approx(400 / 200)


def test_t95_table_and_normal_tail_cpu() -> None:
    assert st.t95(1) == 12.706 and st.t95(2) == 4.303 and st.t95(11) == 2.201 and st.t95(30) == 2.042
    assert st.t95(200) == pytest.approx(1.96, abs=1e-3) and st.t95(0) == float("inf")


def test_ratio_verdict_needs_enough_reference_answers_cpu() -> None:
    base = {"ratio": 3.0, "ci": [2.0, 4.0], "target": 0.5, "problems": 100, "defined_share": 1.0}
    assert st.ratio_verdict(base, 0.5) == (st.SUPPORTED, None)
    assert st.ratio_verdict({**base, "ci": [0.2, 1.3]}, 0.5)[0] == st.NOT_SUPPORTED
    assert st.ratio_verdict({**base, "ci": [0.8, 2.0]}, 0.5)[0] == st.UNRESOLVED
    few = st.ratio_verdict({**base, "target": 0.05}, 0.5)
    assert few[0] == st.UNRESOLVED and "fewer than 10" in few[1]
    shaky = st.ratio_verdict({**base, "defined_share": 0.9}, 0.5)
    assert shaky[0] == st.UNRESOLVED and "undefined in 10%" in shaky[1]
    assert st.ratio_verdict(None, 0.5)[0] == st.UNRESOLVED
    assert st.ratio_verdict({**base, "ratio": None, "ci": None}, 0.5)[0] == st.UNRESOLVED


@pytest.mark.parametrize(
    ("gain", "versus_full", "want"),
    [
        ((0.05, 0.2), (-0.01, 0.05), st.SUPPORTED),
        ((0.05, 0.2), (-0.30, -0.10), st.NOT_SUPPORTED),  # adapts, but far less than full SFT
        ((-0.01, 0.01), (-0.30, 0.0), st.NOT_SUPPORTED),  # no gain
        ((0.05, 0.2), (-0.10, 0.02), st.UNRESOLVED),  # gains, but may be worse than full SFT by > delta
        ((-0.05, 0.10), (-0.05, 0.05), st.UNRESOLVED),
    ],
)
def test_noninferior_verdict_cpu(gain, versus_full, want) -> None:
    assert st.noninferior_verdict(gain, versus_full, 0.02) == want


def test_accuracy_ci_and_needed_scale_cpu() -> None:
    a = st.accuracy_ci([True, False, True, True])
    assert (
        a["accuracy"] == 0.75
        and a["correct"] == 3
        and a["n"] == 4
        and 0 < a["ci"][0] < 0.75 < a["ci"][1] <= 1
    )
    assert needed_scale([-0.04, 0.04], 0.02) == pytest.approx(16.0)
    assert needed_scale([-0.001, 0.001], 0.02) == 1.0


# ------------------------------------------------------------------------------------------------ nested TTS
def _answers_gen() -> ScriptedGenerator:
    """Whole chains and executions whose answers vary with the sample index (votes that change with k)."""

    def script(prompt: str, j: int) -> str:
        if "<EXECUTION>" in prompt.rsplit("assistant", 1)[-1]:
            return f"so \\boxed{{{12 if j % 3 else 7}}}</EXECUTION>"
        return f"plan {j}</EXPLORATION><EXECUTION>so \\boxed{{{12 if j % 3 != 1 else 5}}}</EXECUTION>"

    return ScriptedGenerator(script)


def test_nested_budgets_match_their_prefix_and_save_calls_cpu(tmp_path: Path) -> None:
    recs = [
        Record(id=f"q{i}", problem=f"What is {i} + 12 - {i}?", answer="12", kind="math") for i in range(3)
    ]
    sets = TTSSettings(explore_budget=20, execute_budget=20, cot_tokens=40, seed=1)
    gen = _answers_gen()
    rows = run_tts(
        gen,
        recs,
        ["self_consistency", "e2c_sc"],
        [1, 2, 4],
        sets,
        tmp_path / "n",
        {"n": 1},
        log=lambda _m: None,
        nested=True,
    )
    done = read_done(tmp_path / "n" / "records.jsonl")
    assert len(done) == 2 * 3 * 3  # every (method, budget, problem)
    assert {(r["method"], r["budget"]) for r in rows} == {
        (m, b) for m in ("self_consistency", "e2c_sc") for b in (1, 2, 4)
    }
    for r in done.values():
        if r["budget"] == 4:
            assert "nested_from" not in r["details"]
            continue
        big = done[f"{r['method']}\t4\t{r['problem_id']}"]
        p = big["details"]["prefix"][r["budget"] - 1]
        assert r["details"] == {"nested_from": 4}
        assert r["correct"] == p["correct"] and r["generated_tokens"] == sum(p["tokens_by_role"].values())
        assert r["generated_tokens"] <= big["generated_tokens"]
    # the prefix of all K draws is the budget-K result itself
    for r in done.values():
        if r["budget"] == 4:
            last = r["details"]["prefix"][-1]
            assert (
                last["correct"] == r["correct"]
                and sum(last["tokens_by_role"].values()) == r["generated_tokens"]
            )
    # a rerun finds everything done; a killed run's missing nested records are derived again
    calls = len(gen.calls)
    run_tts(
        gen,
        recs,
        ["self_consistency", "e2c_sc"],
        [1, 2, 4],
        sets,
        tmp_path / "n",
        {"n": 1},
        log=lambda _m: None,
        nested=True,
    )
    assert len(gen.calls) == calls
    lines = (tmp_path / "n" / "records.jsonl").read_text().splitlines()
    kept = [x for x in lines if json.loads(x)["budget"] == 4]
    (tmp_path / "n" / "records.jsonl").write_text("\n".join(kept) + "\n")
    run_tts(
        gen,
        recs,
        ["self_consistency", "e2c_sc"],
        [1, 2, 4],
        sets,
        tmp_path / "n",
        {"n": 1},
        log=lambda _m: None,
        nested=True,
    )
    assert len(gen.calls) == calls and len(read_done(tmp_path / "n" / "records.jsonl")) == 18


def test_nested_record_equals_a_fresh_run_of_the_same_draws_cpu(tmp_path: Path) -> None:
    """Budget k read off a budget-K run is what a budget-k run of those k draws gives: same vote, same tokens."""
    from e2c.tts import run_method
    from e2c.tts.base import Candidate, weighted_vote
    from e2c.tts.methods import prefix_votes

    rec = Record(id="q", problem="What is 3 + 9?", answer="12", kind="math")
    res = run_method("self_consistency", _answers_gen(), rec, 6, TTSSettings(cot_tokens=40, seed=2)).to_dict()
    subs = {s["budget"]: s for s in nested_records(res, [1, 2, 3, 6, 9])}
    assert sorted(subs) == [1, 2, 3]
    votes = res["details"]["votes"]
    for k, s in subs.items():
        # the plain reading: majority of the first k answers (ties to the first seen)
        first = votes[:k]
        counts = {v: first.count(v) for v in first if v is not None}
        best = max(counts.values())
        winner = next(v for v in first if v is not None and counts[v] == best)
        assert s["answer"] == winner and s["correct"] == (winner == "12")
    assert prefix_votes([]) == []
    assert weighted_vote([]) is None and Candidate("x", None, None).tokens == {}  # type: ignore[arg-type]


def test_tts_table_splits_tokens_by_role_cpu() -> None:
    recs = [
        {
            "method": "e2c_sc",
            "budget": 2,
            "problem_id": "a",
            "correct": True,
            "generated_tokens": 30,
            "tokens_by_role": {"explore": 10, "execute": 20},
        },
        {
            "method": "e2c_sc",
            "budget": 2,
            "problem_id": "b",
            "correct": False,
            "generated_tokens": 50,
            "tokens_by_role": {"explore": 20, "execute": 20, "judge": 10},
        },
        {
            "method": "self_consistency",
            "budget": 2,
            "problem_id": "a",
            "correct": True,
            "generated_tokens": 80,
            "tokens_by_role": {"full": 80},
        },
    ]
    rows, by = tts_table(recs)
    r = next(x for x in rows if x["method"] == "e2c_sc")
    assert (
        r["accuracy"] == 0.5 and r["tokens"] == 40 and r["explore_tokens"] == 15 and r["execute_tokens"] == 20
    )
    assert r["other_tokens"] == 5 and r["whole_chain_tokens"] == 0
    assert by["self_consistency"][2]["a"] == (1.0, 80.0)
    tot = [{"method": "e2c_tot", "budget": 1, "problem_id": "a", "correct": True, "generated_tokens": 30,
            "tokens_by_role": {"tree": 12, "score": 8, "execute": 10}}]  # fmt: skip
    (r,), _ = tts_table(tot)
    assert r["explore_tokens"] == 12 and r["other_tokens"] == 8 and r["execute_tokens"] == 10


# ------------------------------------------------------------------------------------------------ CLI
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--weight-coefs", "2"], "at least two different coefficients"),
        (["--weight-coefs", "2", "2"], "at least two different coefficients"),
        (["--weight-coefs", "2", "-1"], "--weight-coefs must be >= 0, got -1"),
        (["--weight-seeds", "0", "0"], "distinct"),
        (["--weight-seeds", "3"], "at least two"),
        (["--tts-methods", "self_consistency", "e2c_sc"], "must include e2c_react_loop"),
        (["--tts-methods", "self_consistency", "nope"], "--tts-methods names an unknown method 'nope'"),
        (["--tts-methods", "e2c_sc"], "must include self_consistency"),
        (["--adapt-family", "arithmetic"], "trained on in SFT and RL"),
        (["--adapt-family", "gcd"], "--adapt-family names an unknown family 'gcd'"),
        (["--rl-steps", "0"], "--rl-steps must be >= 1, got 0"),
        (["--adapt-reg-frac", "1"], "--adapt-reg-frac"),
        (["--from", "tss"], "did you mean tts"),
    ],
)
def test_claims_bad_flags_fail_in_one_line_cpu(tmp_path: Path, args: list[str], message: str) -> None:
    out = tmp_path / "c"
    proc = subprocess.run(
        [sys.executable, "-m", "e2c.claims", "--out", str(out), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    lines = [x for x in proc.stderr.strip().splitlines() if x.strip()]
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert not out.exists()  # nothing written


def test_claims_refuses_a_folder_it_did_not_make_cpu(tmp_path: Path) -> None:
    out = tmp_path / "c"
    (out / "weighting").mkdir(parents=True)
    (out / "weighting" / "notes.txt").write_text("mine")
    proc = subprocess.run(
        [sys.executable, "-m", "e2c.claims", "--out", str(out), "--fast"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 2 and "was not made by the claims" in proc.stderr
    assert (out / "weighting" / "notes.txt").read_text() == "mine"


def test_eta_scales_with_arms_and_problems_cpu() -> None:
    from dataclasses import replace

    from e2c.claims.config import ETA_SECONDS, ClaimsConfig, eta_seconds

    cfg = ClaimsConfig()
    base = ETA_SECONDS[False]
    eta = eta_seconds(cfg)
    assert eta["weighting"] == base["weighting"] * (len(cfg.weight_coefs) * len(cfg.weight_seeds) - 1)
    assert eta["tts"] == base["tts"] * cfg.tts_problems
    assert eta_seconds(replace(cfg, tts_problems=20))["tts"] == base["tts"] * 20
    assert eta["start"] == base["start"] and eta["adapt"] == base["adapt"]


def test_claims_pages_show_each_arm_against_its_reference_cpu(tmp_path: Path) -> None:
    """Claim 1: per seed the claimed coefficient against the base; claim 3: EF-SFT against no adaptation and
    against full SFT; claim 2: the TTS run. Each page is written, linked in the report's section."""
    from view.test_view_cpu import rows, write_run

    from e2c.claims.config import ClaimsConfig
    from e2c.claims.report import claims_pages
    from e2c.claims.stages import ClaimsContext, arm_name
    from e2c.view import page_lines, write_pages
    from e2c.view.page import extract_json

    out = tmp_path / "claims"
    cfg = ClaimsConfig()

    def evaluation(folder: Path, flip: bool) -> dict[str, str]:
        write_run(out / folder, rows(flip))
        return {"predictions": str(folder / "predictions" / "toy.jsonl")}

    arms = {
        arm_name(c, s): evaluation(Path("weighting") / arm_name(c, s) / "eval", c == cfg.weight_coefs[0])
        for c in cfg.weight_coefs
        for s in cfg.weight_seeds
    }
    (out / "weighting" / "DONE.json").write_text(json.dumps({"arms": arms}))
    evals = {
        arm: {dom: evaluation(Path("adapt") / f"eval_{arm}_{dom}", arm == "ef_sft") for dom in ("new", "old")}
        for arm in ("none", "ef_sft", "full_sft")
    }
    (out / "adapt" / "DONE.json").write_text(json.dumps({"evals": evals}))
    ctx = ClaimsContext(cfg, out, None)
    pages = claims_pages(ctx, {"weighting": {"verdict": "x"}, "adapt": {"verdict": "x"}, "tts": None})
    claim, base = (f"{c:g}" for c in cfg.weight_coefs[:2])
    assert [p.name for p in pages] == [
        *(f"view-weighting-s{s}-{claim}-vs-{base}.html" for s in cfg.weight_seeds),
        "view-adapt-new-ef_sft-vs-none.html",
        "view-adapt-new-ef_sft-vs-full_sft.html",
        "view-adapt-old-ef_sft-vs-none.html",
    ]
    written = write_pages(pages, out / "pages", out)
    first = extract_json((out / "pages" / pages[0].name).read_text(encoding="utf-8"))
    assert [r["label"] for r in first["runs"]] == [f"coef {base}", f"coef {claim}"]
    assert first["paired"]["gained"] == ["toy/p0"]  # the claimed arm's run is the flipped one
    lines = page_lines(written)
    assert all(f"]({p['path']})" in "\n".join(lines) for p in written.values())


def test_weighting_report_pairs_every_seed_and_renders_the_seed_interval_cpu(tmp_path: Path) -> None:
    """Claim 1 from fabricated arms at the default 2 coefficients x 3 seeds, with known per-seed gains: each
    seed's difference is the paired per-problem one, the t interval over seeds is the textbook one, the
    verdict's interval holds both, and the report's table lists every arm and both intervals."""
    from view.test_view_cpu import line

    from e2c.claims.config import ClaimsConfig, quickstart_config
    from e2c.claims.report import render, weighting_section
    from e2c.claims.stages import ClaimsContext, arm_name

    out = tmp_path / "claims"
    cfg = ClaimsConfig()
    claim, base = cfg.weight_coefs[:2]
    assert len(cfg.weight_seeds) == 3
    problems = 10
    # Seed s: the claimed coefficient solves problems 0..4+s, the base 0..3; so it gains 1 + s of 10.
    solved = {(c, s): (5 + s if c == claim else 4) for c in cfg.weight_coefs for s in cfg.weight_seeds}
    arms = {}
    for (coef, seed), n in solved.items():
        folder = Path("weighting") / arm_name(coef, seed) / "eval"
        lines = [line(i, f"p{i}", 0, i < n, "x") for i in range(problems)]
        (out / folder / "predictions").mkdir(parents=True)
        (out / folder / "predictions" / "toy.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
        arms[arm_name(coef, seed)] = {
            "predictions": str(folder / "predictions" / "toy.jsonl"),
            "steps": [{"critic/score/mean": 0.25}],
            "seconds": 60.0,
            "reused_quickstart_rl": (coef, seed) == (claim, cfg.weight_seeds[0]),
        }
    (out / "weighting").mkdir(parents=True, exist_ok=True)
    (out / "weighting" / "DONE.json").write_text(json.dumps({"arms": arms}))
    cc = ClaimsContext(cfg, out, quickstart_config(cfg, str(out / "quickstart")))
    w = weighting_section(cc)
    assert w is not None and len(w["arms"]) == 6
    d = w["differences"][f"{claim:g}-{base:g}"]
    want = [(1 + s) / problems for s in cfg.weight_seeds]
    assert d["seeds"] == list(cfg.weight_seeds) and d["problems"] == problems
    assert list(d["per_seed"].values()) == pytest.approx(want)
    assert d["mean"] == pytest.approx(sum(want) / 3)
    lo, hi = d["seed_t_ci"]  # mean +- t(2) * sd / sqrt(3), sd of 0.1, 0.2, 0.3 is 0.1
    assert (hi - lo) / 2 == pytest.approx(st.t95(2) * 0.1 / math.sqrt(3))
    assert d["ci"][0] <= min(lo, d["bootstrap_ci"][0]) and d["ci"][1] >= max(hi, d["bootstrap_ci"][1])
    rep = {
        "settings": cfg.to_dict(),
        "quickstart_settings": cc.qcfg.to_dict(),
        "system": {},
        "start": {"seconds": None},
        "weighting": w,
        "tts": None,
        "adapt": None,
        "total_seconds": 360.0,
    }
    md = render(rep, {})
    row = next(x for x in md.splitlines() if x.startswith(f"| {claim:g}-{base:g} |"))
    assert "+10.0, +20.0, +30.0" in row and row.count("[") == 2  # per seed; bootstrap and t intervals
    assert "(3 seeds x 10 problems)" in md and "(quickstart RL)" in md
