"""The ten TTS methods on the scripted backend: the calls they make, the tokens counted, the vote or pick."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from e2c.core.errors import UserError
from e2c.data.registry import Record
from e2c.generation.scripted import ASSISTANT, ScriptedGenerator
from e2c.tts import METHODS, TTSSettings, run_method
from e2c.tts.base import Candidate, canonical_settings, weighted_vote
from e2c.tts.methods import best_leaves, dedupe_plans, kmeans, read_reply_int
from e2c.tts.run import settings_from, tts_run_folder

REC = Record(id="p1", problem="What is 7 + 5?", answer="12", kind="math")
SET = TTSSettings(
    explore_budget=30,
    execute_budget=30,
    cot_tokens=60,
    judge_tokens=16,
    refine_tokens=20,
    tree_step_tokens=4,
    tree_branching=2,
    tree_beam=1,
    seed=3,
)
EXEC = {"add": "7 + 5 = 12 so \\boxed{12}</EXECUTION>", "mul": "7 * 5 = 35 so \\boxed{35}</EXECUTION>"}


def _execution(plan: str) -> str:
    return next((v for k, v in EXEC.items() if k in plan), "I am not sure.</EXECUTION>")


def scripted(plans: list[str], judge: str = "1", refine: str = "", score=None) -> ScriptedGenerator:
    """Explorations ``plans[j % len]``; executions follow the plan's keyword; judge / refine / score replies."""

    def script(prompt: str, j: int) -> str:
        if "Reply with the plan number only" in prompt:
            return judge
        if "Reply with one number from 1 to 10" in prompt:
            return score(prompt) if score else "5"
        if "Write a revised, better plan" in prompt:
            return refine
        written = prompt.rsplit(ASSISTANT, 1)[-1]
        if "<EXECUTION>" in written:  # continue the plan's execution from what is written
            done = written.split("<EXECUTION>", 1)[1]
            full_exec = _execution(written.split("</EXPLORATION>")[0])
            return full_exec[len(done) :] if full_exec.startswith(done) else full_exec
        body = written.removeprefix("<EXPLORATION>")
        full = next((p for p in plans if p.startswith(body) and body), plans[j % len(plans)])
        plan = full[len(body) :] if full.startswith(body) else full
        return plan + "</EXPLORATION><EXECUTION>" + _execution(full)

    return ScriptedGenerator(script)


def _run(name: str, gen: ScriptedGenerator, budget: int, **kw):
    res = run_method(name, gen, REC, budget, SET, **kw)
    # The meter saw exactly what the backend generated (its own independent tally).
    assert res.generated_tokens == gen.usage.generated_tokens
    assert res.prompt_tokens == gen.usage.prompt_tokens
    assert res.calls == len(gen.calls) == gen.usage.calls
    assert sum(res.tokens_by_role.values()) == res.generated_tokens
    return res


def test_registry_has_the_ten_methods_cpu() -> None:
    assert sorted(METHODS) == sorted(
        [
            "greedy_cot",
            "self_consistency",
            "e2c_sc",
            "e2c_rp",
            "e2c_select_lm_judge",
            "e2c_select_semantic_cluster",
            "e2c_react_loop",
            "e2c_tot",
            "tree_of_thoughts",
            "forest_of_thought",
        ]
    )
    for fn in METHODS.values():
        assert fn.__doc__ and len(fn.__doc__) > 40
    with pytest.raises(KeyError, match="valid: e2c_react_loop"):
        run_method("beam", scripted(["add"]), REC, 1, SET)


def test_greedy_cot_one_greedy_call_cpu() -> None:
    gen = scripted(["add them "])
    res = _run("greedy_cot", gen, 8)
    (call,) = gen.calls
    assert (call["n"], call["temperature"], call["max_tokens"]) == (1, 0.0, 60)
    assert res.correct and res.answer == "12"
    tok = gen.tokenizer
    assert res.generated_tokens == len(tok.encode("add them </EXPLORATION><EXECUTION>" + EXEC["add"]))


def test_self_consistency_majority_cpu() -> None:
    gen = scripted(["add ", "mul ", "mul x ", "none "])
    res = _run("self_consistency", gen, 4)
    (call,) = gen.calls
    assert (call["n"], call["temperature"], call["top_p"]) == (4, 0.9, 0.95)
    assert res.answer == "35" and not res.correct  # 2 votes for 35, 1 for 12: the majority is wrong
    assert res.details["votes"] == ["12", "35", "35", None]


def test_e2c_sc_explores_then_executes_each_cpu() -> None:
    gen = scripted(["add a ", "add b ", "mul "])
    res = _run("e2c_sc", gen, 3)
    explore_call, exec_call = gen.calls
    assert explore_call["n"] == 3 and explore_call["stop"] == ["</EXPLORATION>"]
    assert len(exec_call["prompts"]) == 3 and exec_call["temperature"] == 0.0 and exec_call["n"] == 1
    assert all(p.endswith("</EXPLORATION><EXECUTION>") for p in exec_call["prompts"])
    assert res.correct and res.details["votes"] == ["12", "12", "35"]
    tok = gen.tokenizer
    explore_tokens = sum(len(tok.encode(p + "</EXPLORATION>")) for p in ["add a ", "add b ", "mul "])
    assert res.tokens_by_role["explore"] == explore_tokens
    assert res.tokens_by_role["execute"] == sum(len(tok.encode(EXEC[k])) for k in ("add", "add", "mul"))


def test_e2c_rp_executes_one_random_plan_cpu() -> None:
    plans = ["add ", "mul ", "mul y ", "none "]
    gen = scripted(plans)
    res = _run("e2c_rp", gen, 4)
    from e2c.generation.base import derive_seed

    expect = random.Random(derive_seed(SET.seed, REC.id, "rp")).randrange(4)
    assert res.details["picked"] == expect
    assert len(gen.calls[1]["prompts"]) == 1 and plans[expect] in gen.calls[1]["prompts"][0]


def test_lm_judge_maps_reply_to_plan_cpu() -> None:
    gen = scripted(["mul ", "none ", "add "], judge="I choose Plan 3.")
    res = _run("e2c_select_lm_judge", gen, 3)
    assert res.details == {"picked": 2, "judge_parsed": True, "judge_ambiguous": False} and res.correct
    judge_call = gen.calls[1]
    assert "Plan 1:" in judge_call["prompts"][0] and "Plan 3:" in judge_call["prompts"][0]
    assert judge_call["temperature"] == 0.0
    assert res.tokens_by_role["judge"] == len(gen.tokenizer.encode("I choose Plan 3.")) + 1  # + EOS
    bad = _run("e2c_select_lm_judge", scripted(["mul ", "add "], judge="no idea"), 2)
    assert (
        bad.details == {"picked": 0, "judge_parsed": False, "judge_ambiguous": False} and bad.answer == "35"
    )


def test_semantic_cluster_votes_by_cluster_size_cpu() -> None:
    plans = ["add one ", "mul two ", "add three ", "add four ", "mul five "]
    gen = scripted(plans)
    emb = lambda texts: np.array([[1.0, 0.1] if "add" in t else [0.1, 1.0] for t in texts])  # noqa: E731
    s = TTSSettings(**{**SET.to_dict(), "clusters": 2})
    res = run_method("e2c_select_semantic_cluster", gen, REC, 5, s, embed=emb)
    assert sorted(res.details["cluster_sizes"]) == [2, 3]
    assert len(gen.calls[1]["prompts"]) == 2  # one execution per cluster
    assert res.correct  # the 3-plan cluster (12) outvotes the 2-plan one (35)
    with pytest.raises(ValueError, match="needs an embedding model"):
        run_method("e2c_select_semantic_cluster", scripted(plans), REC, 5, s)


def test_react_accepts_a_well_formed_answer_cpu() -> None:
    gen = scripted(["mul ", "add "], judge="1")
    res = _run("e2c_react_loop", gen, 4)
    assert res.details["executions"] == 1 and res.answer == "35"  # well-formed, accepted (though wrong)
    assert "refine" not in res.tokens_by_role


def test_react_refines_from_feedback_cpu() -> None:
    gen = scripted(["vague ", "other idea "], judge="1", refine="add the two numbers")
    res = _run("e2c_react_loop", gen, 4)
    assert res.details["executions"] == 2 and res.correct
    refine_prompt = next(c for c in gen.calls if "revised, better plan" in c["prompts"][0])["prompts"][0]
    assert "I am not sure." in refine_prompt  # the execution's tail is the feedback


def test_react_falls_back_when_the_plan_stalls_cpu() -> None:
    # The refinement repeats the plan: the loop moves on to the unused plan instead of re-executing it.
    gen = scripted(["vague ", "add plan "], judge="1", refine="vague")
    res = _run("e2c_react_loop", gen, 4)
    assert [t["plan"] for t in res.details["trace"]] == ["vague ", "add plan "]
    assert res.correct


def test_e2c_tot_scores_and_executes_the_best_plan_cpu() -> None:
    plans = ["first good plan add it ", "second plan mul it "]
    score = lambda prompt: "9" if "good" in prompt.split("Partial plan:")[-1] else "2"  # noqa: E731
    gen = scripted(plans, score=score)
    res = _run(
        "e2c_tot",
        gen,
        2,
    )
    assert res.correct and res.details["best_score"] == 9.0
    assert res.tokens_by_role["score"] > 0 and res.tokens_by_role["execute"] > 0
    first_level = next(c for c in gen.calls if c["max_tokens"] == SET.tree_step_tokens)
    assert first_level["n"] == SET.tree_branching and first_level["stop"] == ["</EXPLORATION>"]


def test_tree_of_thoughts_prunes_to_the_beam_cpu() -> None:
    plans = ["good add path of many words here ", "bad mul path of many words here "]
    score = lambda prompt: "8" if "good" in prompt.split("Partial solution:")[-1] else "1"  # noqa: E731
    gen = scripted(plans, score=score)
    res = _run("tree_of_thoughts", gen, 1)
    levels = [c for c in gen.calls if c["max_tokens"] == SET.tree_step_tokens]
    assert len(levels[0]["prompts"]) == 1
    assert all(len(c["prompts"]) <= SET.tree_beam for c in levels[1:])  # only the beam is expanded
    assert all("good" in c["prompts"][0].rsplit("<EXPLORATION>", 1)[-1] for c in levels[1:])
    assert res.correct


def test_forest_votes_over_its_trees_cpu() -> None:
    gen = scripted(["add it now ", "add again "], score=lambda p: "6")
    res = _run("forest_of_thought", gen, 4)
    assert res.details["trees"] == 2 and len(res.details["votes"]) == 2 and res.correct


def test_helpers_cpu() -> None:
    assert read_reply_int("Plan 7 or 2", 1, 3).value == 2 and read_reply_int("none", 1, 3).value is None
    assert dedupe_plans(["Add the numbers.", "add the numbers", "", "multiply"]) == [
        "Add the numbers.",
        "multiply",
    ]
    x = np.array([[0, 0], [0, 0.1], [5, 5], [5, 5.1]], dtype=float)
    labels, centers = kmeans(x, 2, seed=0)
    assert labels[0] == labels[1] != labels[2] == labels[3] and centers.shape == (2, 2)
    from e2c.rewards.grader import grade

    g = lambda a: grade(f"\\boxed{{{a}}}", "12", fmt=None)  # noqa: E731
    cands = [
        Candidate("", None, g("35"), 1.0),
        Candidate("", None, g("12"), 1.5),
        Candidate("", None, g("35"), 1.0),
    ]
    assert weighted_vote(cands).graded.extracted == "35"  # 2.0 against 1.5
    cands[1].weight = 2.5
    assert weighted_vote(cands).graded.extracted == "12"
    assert weighted_vote([Candidate("", None, g("x y"), 1.0)]) is not None


def test_opener_starts_every_plan_cpu() -> None:
    gen = scripted(["add ", "mul "])
    s = TTSSettings(**{**SET.to_dict(), "opener": "My plan: "})
    res = run_method("e2c_sc", gen, REC, 2, s)
    explore_call, exec_call = gen.calls
    assert explore_call["prompts"][0].endswith("<EXPLORATION>My plan: ")
    assert all("<EXPLORATION>My plan: " in p for p in exec_call["prompts"])
    # the opener is prompt text, not generated: only the model's own tokens are counted
    assert res.tokens_by_role["explore"] == gen.usage.generated_tokens - res.tokens_by_role["execute"]


# ----------------------------------------------------------------------- tree searches keep the best leaves

ROOT_STEP = "Let us think step by step about it now and then some more and more and more"


def late_best_leaf_tree(full: bool) -> ScriptedGenerator:
    """A tree whose root opens one node and whose next level completes two leaves; the later one, which
    adds (answer 12), scores 9, the earlier one, which multiplies (35), scores 3."""
    leaves = [" then mul: \\boxed{35}", " then add better: \\boxed{12}"]

    def script(prompt: str, j: int) -> str:
        if "Reply with one number from 1 to 10" in prompt:
            return "9" if "better" in prompt.split("Partial")[-1] else "3"
        written = prompt.rsplit(ASSISTANT, 1)[-1]
        if "<EXECUTION>" in written:  # e2c_tot's execution of its chosen plan
            return _execution(written.split("</EXPLORATION>")[0])
        if not written.removeprefix("<EXPLORATION>"):
            return ROOT_STEP  # longer than a step: the root's child stays open
        if full:
            return "</EXPLORATION><EXECUTION>" + leaves[j % 2] + "</EXECUTION>"
        return leaves[j % 2].split(":")[0] + ".</EXPLORATION>"

    return ScriptedGenerator(script)


@pytest.mark.parametrize("method", ["e2c_tot", "tree_of_thoughts"])
def test_tree_search_keeps_the_best_scored_leaves_cpu(method: str) -> None:
    s = TTSSettings(**{**SET.to_dict(), "tree_step_tokens": 20})
    gen = late_best_leaf_tree(full=method == "tree_of_thoughts")
    res = run_method(method, gen, REC, 1, s)
    levels = [c for c in gen.calls if c["max_tokens"] == s.tree_step_tokens]
    assert [c["n"] for c in levels] == [1, s.tree_branching]  # two leaves paid for, one wanted
    assert res.details["leaves"] == 1
    assert res.correct and res.answer == "12"  # the later, better-scored leaf survived and was chosen
    assert res.details.get("best_score", 9.0) == 9.0 and res.details.get("scores", [9.0]) == [9.0]


def test_best_leaves_ranks_complete_then_score_stably_cpu() -> None:
    leaves = [("a", 5.0, True), ("b", 7.0, True), ("c", 7.0, True), ("d", 9.0, False)]
    assert best_leaves(leaves, 1) == [leaves[1]]  # a tie goes to the earlier leaf
    assert best_leaves(leaves, 2) == [leaves[1], leaves[2]]
    assert best_leaves(leaves, 3) == leaves[:3]  # an open node never displaces a complete leaf
    assert best_leaves(leaves, 9) == leaves and best_leaves([], 2) == []
    assert best_leaves([("x", 5.0, True), ("y", 5.0, True)], 1) == [("x", 5.0, True)]


# ------------------------------------------------------------------ judge / scorer replies (review fix B)

# (reply, lo, hi, value, ambiguous): the judge's (1..3) and the scorer's (1..10) readings of real-looking
# replies. None = unparsed (the judge falls back to plan 1, the scorer to 5).
LONG_MIXED = (
    "Plan 1 adds the numbers directly, Plan 2 multiplies them first and then adds, and Plan 3 checks the "
    "sum twice; weighing all of them I would go for the last one, 3"
)
REPLIES = [
    ("On a scale of 1 to 10, I'd rate this plan an 8.", 1, 10, 8, False),
    ("I'd rate this 8 on a scale of 1 to 10.", 1, 10, 8, False),
    ("I'd rate this plan an 8 out of 10.", 1, 10, 8, False),
    ("Rating: 7/10", 1, 10, 7, False),
    ("Comparing Plan 1 and Plan 2, Plan 2 is better.", 1, 3, 2, False),
    ("Plan 2 is better than Plan 1.", 1, 3, 2, False),
    ("<think>\nThe problem asks for 2 numbers... Plan 3 is best.</think>\n3", 1, 3, 3, False),
    ("<think>\nPlan 1 looks fine, Plan 2 too.", 1, 3, None, False),  # still thinking: no reply yet
    (
        "<EXPLORATION>I need to make a step-by-step plan.\n1. Compare the plans.\n2. Pick one.",
        1,
        3,
        None,
        False,
    ),
    (
        "<EXPLORATION>Compare plans 1 and 2.</EXPLORATION><EXECUTION>Plan 2 wins: \\boxed{2}</EXECUTION>",
        1,
        3,
        2,
        False,
    ),
    ("\\boxed{3}. Plan 3 beats plan 1.", 1, 3, 3, False),
    ("I choose Plan 3.", 1, 3, 3, False),
    ("Plan 7 or 2", 1, 3, 2, False),
    ("**2**", 1, 3, 2, False),
    ("7.5", 1, 10, 8, False),
    ("Qwen3-8B cannot tell.", 1, 10, None, False),
    ("none of them", 1, 3, None, False),
    ("", 1, 3, None, False),
    (LONG_MIXED, 1, 3, 3, True),
]


@pytest.mark.parametrize(("reply", "lo", "hi", "value", "ambiguous"), REPLIES)
def test_read_reply_int_table_cpu(reply: str, lo: int, hi: int, value, ambiguous: bool) -> None:
    got = read_reply_int(reply, lo, hi)
    assert (got.value, got.ambiguous) == (value, ambiguous)


def _ctx(gen: ScriptedGenerator):
    from e2c.tts.base import Context, Meter

    return Context(Meter(gen), REC, TTSSettings(**{**SET.to_dict(), "judge_tokens": 200}))


@pytest.mark.parametrize(
    ("reply", "picked", "parsed"),
    [
        ("Comparing Plan 1 and Plan 2, Plan 2 is better.", 1, True),
        ("<think>\nThe problem asks for 2 numbers... Plan 3 is best.</think>\n3", 2, True),
        ("<EXPLORATION>I need to make a step-by-step plan.\n1. Compare the plans.", 0, False),
        ("I cannot decide.", 0, False),
    ],
)
def test_judge_reads_the_final_number_and_flags_unparsed_cpu(reply: str, picked: int, parsed: bool) -> None:
    from e2c.tts.methods import judge_pick

    got = judge_pick(_ctx(scripted(["add "], judge=reply)), ["p1", "p2", "p3"])
    assert tuple(got[:2]) == (picked, parsed)


def test_scorer_reads_the_rating_not_the_scale_cpu() -> None:
    from e2c.tts.methods import score_texts

    replies = {
        "a": "On a scale of 1 to 10, I'd rate this plan an 8.",
        "b": "no idea",
        "c": "<think>1</think>9",
    }
    gen = scripted(
        ["add "], score=lambda p: next(v for k, v in replies.items() if f"Partial plan:\n{k}" in p)
    )
    assert score_texts(_ctx(gen), ["a", "b", "c"], "plan", "t") == [8.0, 5.0, 9.0]


def test_old_budget_setting_names_are_aliases_cpu(tmp_path: Path) -> None:

    old = settings_from({"explore_tokens": 7, "execute_tokens": 9})
    assert (old.explore_budget, old.execute_budget) == (7, 9) and old == settings_from(
        {"explore_budget": 7, "execute_budget": 9}
    )
    with pytest.raises(UserError, match="explore_budget is given twice"):
        settings_from({"explore_budget": 7, "explore_tokens": 8})
    assert canonical_settings({"seed": 1, "execute_tokens": 2}) == {"seed": 1, "execute_budget": 2}
    # A run folder recorded under the old names resumes under the new ones.
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model": "m", "settings": {"explore_tokens": 7, "seed": 0}}))
    (tmp_path / "records.jsonl").write_text('{"method": "e2c_sc", "budget": 1, "problem_id": "a"}\n')
    assert (
        tts_run_folder(tmp_path, {"model": "m", "settings": {"explore_budget": 7, "seed": 0}}).check() == []
    )
    with pytest.raises(UserError, match=r"holds another run \(settings.explore_budget 7 -> 8\)"):
        tts_run_folder(tmp_path, {"model": "m", "settings": {"explore_budget": 8, "seed": 0}}).check()
