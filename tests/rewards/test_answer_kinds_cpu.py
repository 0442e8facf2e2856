"""The table of answer kinds (:mod:`e2c.rewards.kinds`) is the one place a kind is defined.

The places that depend on the kind follow it: a throwaway kind added to the table (``monkeypatch``
restores it) is graded by :func:`grade`, accepted by the data schema, loaded by the record mapping, offered
by ``e2c.eval.score`` and grouped by the vote; every kind of the table is accepted everywhere; the reward's
data-source fallback agrees with every registry set's kind. The table-driven grader gives what the
if/elif it replaced gave (a verbatim copy of that code is the reference here), and the rewards never
import the data layer.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from e2c.chain import E2C
from e2c.data import registry
from e2c.data.records import question_text, to_record
from e2c.data.registry import SPECS, DatasetSpec
from e2c.data.schema import check_row
from e2c.eval import score
from e2c.rewards import countdown, grade, grade_many
from e2c.rewards.extract import extract_answer, reference_answer
from e2c.rewards.grader import MAX_ANSWER_CHARS, GradeResult, as_options, format_score
from e2c.rewards.kinds import ANSWER_KINDS, DEFAULT_KIND, AnswerKind, get_kind, option_letters
from e2c.rewards.math_equiv import math_equal
from e2c.rewards.mcq import extract_choice, reference_choice
from e2c.rewards.source_kinds import SOURCE_KINDS
from e2c.rewards.verl_score import compute_score, kind_for_source
from e2c.rewards.vote import answer_classes

ROOT = Path(__file__).resolve().parents[2]


def chain(execution: str) -> str:
    return f"1. Decide.</EXPLORATION><EXECUTION>{execution}</EXECUTION>"


# ------------------------------------------------------------------------------------ a throwaway kind
def _yes_no(text: str) -> str | None:
    words = [w.strip(".,!").lower() for w in text.split()]
    return next((w for w in reversed(words) if w in ("yes", "no")), None)


YESNO = AnswerKind(
    name="yesno",
    summary="yes or no",
    reference=lambda gold, options: (
        gold.lower() if isinstance(gold, str) and gold.lower() in ("yes", "no") else None
    ),
    extract=lambda region, options, fallback: (a := _yes_no(region), "word" if a else "none"),
    check=lambda pred, ref, timeout: (pred == ref, "word"),
    canon=lambda a: a.strip().lower(),
    answer_keys=("verdict",),
    object_gold=True,
)
# An option kind: answers are letters of the row's options, as for mcq.
PICK = AnswerKind(
    name="pick",
    summary="an option letter",
    reference=lambda gold, options: (
        str(gold).strip().upper() if str(gold).strip().upper() in (options or {}) else None
    ),
    extract=lambda region, options, fallback: (region.strip()[-1:].upper() or None, "last_char"),
    check=lambda pred, ref, timeout: (pred == ref, "letter"),
    canon=lambda a: a.strip().upper(),
    answer_keys=("choice",),
    options=True,
)


@pytest.fixture
def throwaway(monkeypatch: pytest.MonkeyPatch) -> None:
    """The table with two extra kinds, for one test (restored afterwards)."""
    monkeypatch.setitem(ANSWER_KINDS, "yesno", YESNO)
    monkeypatch.setitem(ANSWER_KINDS, "pick", PICK)


def test_grade_dispatches_through_the_table(throwaway: None) -> None:
    r = grade(chain("So the answer is yes."), "Yes", "yesno")
    assert (r.correct, r.reason, r.kind, r.extracted, r.gold, r.method, r.check) == (
        True,
        "correct",
        "yesno",
        "yes",
        "yes",
        "word",
        "word",
    )
    assert r.chain_status == "ok" and r.format_score == 1.0 and r.score == 1.0
    assert grade(chain("no"), "yes", "yesno").reason == "wrong"
    assert grade(chain("maybe"), "yes", "yesno").reason == "no_answer"
    assert grade(chain("yes"), "perhaps", "yesno").reason == "unparseable_gold"
    assert [x.correct for x in grade_many([chain("yes"), chain("no")], ["yes", "yes"], "yesno")] == [
        True,
        False,
    ]
    # The reward reads the kind from extra_info like any other.
    assert compute_score("anything", chain("yes"), "yes", {"kind": "yesno"})["acc"] == 1.0
    assert kind_for_source("x", {"kind": "yesno"}) == "yesno"


def test_unknown_kind_after_the_table_is_restored() -> None:
    assert "yesno" not in ANSWER_KINDS
    with pytest.raises(ValueError, match="unknown answer kind 'yesno'; valid: math, mcq, countdown"):
        grade("yes", "yes", "yesno")


def test_a_check_cannot_call_a_missing_answer_correct(monkeypatch: pytest.MonkeyPatch) -> None:
    sloppy = AnswerKind(
        "sloppy", "", lambda g, o: None, lambda r, o, f: (None, "none"), lambda p, r, t: (True, "ok"), str
    )
    monkeypatch.setitem(ANSWER_KINDS, "sloppy", sloppy)
    r = grade("x", "y", "sloppy")
    assert (r.correct, r.score, r.reason) == (False, 0.0, "unparseable_gold")


def test_schema_follows_the_table(throwaway: None) -> None:
    row = {
        "id": "s-1",
        "problem": "Is 2 even?",
        "answer": "yes",
        "kind": "yesno",
        "choices": [],
        "data_source": "s",
    }
    assert check_row(row, "eval") is None
    assert check_row({**row, "kind": "essay"}, "eval") == (
        "kind",
        "expected math or mcq or countdown or code or yesno or pick, got 'essay'",
    )
    # An option kind gets the option rule of mcq.
    pick = {**row, "kind": "pick", "answer": "B", "choices": ["x", "y"]}
    assert check_row(pick, "eval") is None
    assert check_row({**pick, "choices": ["x"]}, "eval")[0] == "choices"
    assert check_row({**pick, "answer": "C"}, "eval")[0] == "answer"
    rl = {
        "prompt": [{"role": "user", "content": "Is 2 even?"}],
        "data_source": "s",
        "ability": "logic",
        "reward_model": {"style": "rule", "ground_truth": "yes"},
        "extra_info": {"index": 0, "kind": "yesno"},
    }
    assert check_row(rl, "rl") is None
    assert check_row({**rl, "extra_info": {"index": 0, "kind": ["yesno"]}}, "rl")[0] == "extra_info.kind"


def test_records_follow_the_table(throwaway: None) -> None:
    synthetic = DatasetSpec("toy", "synthetic", "math", None)
    rec = to_record({"problem": "Is 2 even?", "verdict": "YES", "kind": "yesno"}, synthetic, 0)
    assert (rec.kind, rec.answer, rec.choices) == ("yesno", "yes", [])
    with pytest.raises(ValueError, match=r"no reference answer \(looked for answer, verdict\)"):
        to_record({"problem": "Is 2 even?", "verdict": "perhaps", "kind": "yesno"}, synthetic, 0)
    # A set of an option kind: options from the row, the reference one of their letters, shown in the question.
    spec = DatasetSpec("quiz", "med", "pick", None)
    rec = to_record({"problem": "Pick one.", "choice": "b", "options": ["red", "blue"]}, spec, 3)
    assert (rec.id, rec.kind, rec.answer, rec.choices) == ("quiz-3", "pick", "B", ["red", "blue"])
    assert question_text(rec) == "Pick one.\nA. red\nB. blue"
    with pytest.raises(ValueError, match="is not one of the options A, B"):
        to_record({"problem": "Pick one.", "choice": "c", "options": ["red", "blue"]}, spec, 3)


def test_score_cli_follows_the_table(
    throwaway: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "r.jsonl"
    rows = [{"response": chain("yes"), "answer": "yes"}, {"response": chain("no"), "answer": {"a": 1}}]
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert score.main([str(f), "--kind", "yesno", "--workers", "1"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    # an object reference is allowed for a kind whose `object_gold` is set (unreadable here: unparseable_gold)
    assert (out["kind"], out["n"], out["correct"], out["unparseable_gold"]) == ("yesno", 2, 1, 1)
    assert "yesno" in score.build_parser().format_help()


def test_vote_follows_the_table(throwaway: None) -> None:
    assert answer_classes(["Yes", "yes ", "no"], [False, False, False], "yesno") == [1, 1, 2]
    assert answer_classes(["b", "B"], [False, False], "pick") == [1, 1]


# --------------------------------------------------------------------------- every kind is accepted
GOOD = {
    "math": ("\\boxed{4}", "4"),
    "mcq": ("\\boxed{B}", "B"),
    "countdown": ("\\boxed{2+2}", json.dumps({"target": 4, "numbers": [2, 2]})),
    "code": (
        "```python\ndef f(x):\n    return x + 1\n```",
        json.dumps({"mode": "call", "fn_name": "f", "tests": [{"args": [3], "output": 4}]}),
    ),
}


def test_every_kind_has_an_example() -> None:
    assert set(GOOD) == set(ANSWER_KINDS)


@pytest.mark.parametrize("name", list(ANSWER_KINDS))
def test_every_kind_is_accepted_everywhere(name: str) -> None:
    kind = get_kind(name)
    response, gold = GOOD[name]
    choices = ["3", "4"] if kind.options else []
    r = grade(chain(response), gold, name, options=choices or None)
    assert r.correct and r.kind == name
    eval_row = {
        "id": "x-1",
        "problem": "p",
        "answer": gold,
        "kind": name,
        "choices": choices,
        "data_source": "x",
    }
    assert check_row(eval_row, "eval") is None
    rl = {
        "prompt": [{"role": "user", "content": "p"}],
        "data_source": "x",
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": gold},
        "extra_info": {"index": 0, "kind": name},
    }
    assert check_row(rl, "rl") is None
    assert kind_for_source("x", {"kind": name}) == name
    assert compute_score("x", chain(response), gold, {"kind": name, "options": choices or None})["acc"] == 1.0
    assert score.build_parser().parse_args(["f", "--kind", name]).kind == name
    if kind.options:
        assert option_letters(len(choices)) == "AB"


# --------------------------------------------------------------------- registry <-> reward fallback
def test_every_registry_kind_is_in_the_table() -> None:
    assert {s.kind for s in SPECS} <= set(ANSWER_KINDS)


def test_source_kinds_copy_matches_the_registry() -> None:
    derived = registry.source_kinds()
    assert derived == SOURCE_KINDS, (
        "e2c/rewards/source_kinds.py is out of date with the registry; set SOURCE_KINDS to:\n"
        + json.dumps(derived, indent=4)
    )


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_reward_fallback_agrees_with_every_spec(spec: DatasetSpec) -> None:
    names = [
        spec.name,
        *spec.local_names,
        *([spec.hf_id, spec.hf_id.rsplit("/", 1)[-1]] if spec.hf_id else []),
    ]
    for n in names:
        assert kind_for_source(n) == spec.kind, n
        assert kind_for_source(n.upper()) == spec.kind, n
    assert DEFAULT_KIND == "math" and kind_for_source(None) == DEFAULT_KIND


def test_source_kinds_reduces_to_fragments() -> None:
    toy = [
        DatasetSpec("quiz", "med", "mcq", "org/Quiz-Big", local_names=("quiz_v2",)),
        DatasetSpec("sums", "math", "math", "org/sums"),
    ]
    assert registry.source_kinds(toy) == {"quiz": "mcq"}


# ------------------------------------------------------------------------------------- the layering
def _imports(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.append(node.module + ("" if node.level == 0 else " (relative)"))
    return out


def test_rewards_never_import_the_data_layer() -> None:
    for path in sorted((ROOT / "e2c" / "rewards").glob("*.py")):
        bad = [m for m in _imports(path) if m == "e2c.data" or m.startswith("e2c.data.")]
        assert not bad, f"{path.name} imports {bad} (e2c.data imports e2c.rewards: that is a cycle)"
    # The grader imports the functions it needs, never its own package (whose __init__ imports it).
    assert "e2c.rewards" not in _imports(ROOT / "e2c" / "rewards" / "grader.py")


DERIVED = [
    "rewards/grader.py",
    "rewards/verl_score.py",
    "rewards/vote.py",
    "data/records.py",
    "data/schema.py",
    "eval/score.py",
]


@pytest.mark.parametrize("rel", DERIVED)
def test_no_branch_on_a_kind_name(rel: str) -> None:
    """The derived places compare no value with a kind's name: they ask the kind's entry."""
    names = set(ANSWER_KINDS)
    hits = []
    for node in ast.walk(ast.parse((ROOT / "e2c" / rel).read_text())):
        if isinstance(node, ast.Compare):
            for side in (node.left, *node.comparators):
                consts = side.elts if isinstance(side, (ast.Tuple, ast.List, ast.Set)) else [side]
                hits += [c.lineno for c in consts if isinstance(c, ast.Constant) and c.value in names]
    assert not hits, f"{rel} compares with a kind name at lines {hits}"


# ------------------------------------------------------- parity with the if/elif the table replaced
def _old_grade(
    response: Any, gold: Any, kind: str, options: Any, fallback_number: bool, fmt: Any
) -> GradeResult:
    """The grader's body before the table (verbatim but for the names of its imports)."""
    if not isinstance(response, str):
        response = "" if response is None else str(response)
    options = as_options(options)
    parsed = fmt.parse(response, None) if fmt is not None else None
    region = parsed.answer_region if parsed is not None else response
    status = parsed.status if parsed is not None else "unparsed"
    if kind == "mcq":
        gold_s = reference_choice(gold, options)
        pred, method = extract_choice(region, options)
        check = "letter"
        if gold_s is None:
            correct, reason = False, "unparseable_gold"
        elif pred is None:
            correct, reason = False, "no_answer"
        else:
            correct = pred == gold_s
            reason = "correct" if correct else "wrong"
    elif kind == "countdown":
        ref = countdown.parse_reference(gold)
        gold_s = None if ref is None else str(gold if isinstance(gold, str) else json.dumps(gold))
        pred, method = extract_answer(region)
        correct, check = countdown.check(pred, gold)
        if gold_s is None:
            reason = "unparseable_gold"
        elif pred is None:
            reason = "no_answer"
        else:
            reason = "correct" if correct else "wrong"
    else:
        gold_s = reference_answer(gold)
        pred, method = extract_answer(region, fallback_number)
        if gold_s is None:
            correct, check, reason = False, "", "unparseable_gold"
        elif pred is None:
            correct, check, reason = False, "", "no_answer"
        elif len(pred) > MAX_ANSWER_CHARS:
            correct, check, reason = False, "too_long", "wrong"
        else:
            correct, check = math_equal(pred, gold_s, timeout=5.0)
            reason = (
                "correct"
                if correct
                else (check if check in ("timeout", "error", "unparseable_gold") else "wrong")
            )
    fscore = format_score(parsed, pred is not None) if parsed is not None else 0.0
    return GradeResult(
        1.0 if correct else 0.0, correct, pred, gold_s, reason, kind, method, check, status, fscore
    )


OPTS = {"A": "Aspirin", "B": "Heparin", "C": "Warfarin"}
CD = {"target": 24, "numbers": [4, 6, 1]}
PARITY: list[tuple[Any, Any, str, Any, bool]] = [
    # math
    (chain("\\boxed{5}"), "5", "math", None, False),
    (chain("\\boxed{0.5}"), "\\frac{1}{2}", "math", None, False),
    (chain("\\boxed{6}"), "5", "math", None, False),
    (chain("no answer here"), "5", "math", None, False),
    (chain("so it is 7"), "7", "math", None, True),
    (chain("\\boxed{" + "1" * (MAX_ANSWER_CHARS + 5) + "}"), "1", "math", None, False),
    (chain("\\boxed{5}"), None, "math", None, False),
    (chain("\\boxed{5}"), 5, "math", None, False),
    (chain("\\boxed{1, 2}"), ["1", "2"], "math", None, False),
    ("#### 42", "The sum is 42.\n#### 42", "math", None, False),
    ("The final answer is $x=3$.", "3", "math", None, False),
    (None, "3", "math", None, False),
    (12, "12", "math", None, False),
    # mcq
    (chain("The answer is (B)."), "B", "mcq", None, False),
    (chain("\\boxed{Heparin}"), "B", "mcq", OPTS, False),
    (chain("\\boxed{C}"), 1, "mcq", OPTS, False),
    (chain("I am not sure."), "B", "mcq", OPTS, False),
    (chain("\\boxed{B}"), "Heparin", "mcq", OPTS, False),
    (chain("\\boxed{B}"), "Z", "mcq", None, False),
    (chain("\\boxed{B}"), None, "mcq", ["x", "y"], False),
    # countdown
    (chain("\\boxed{4*6*1}"), CD, "countdown", None, False),
    (chain("\\boxed{4*6*1}"), json.dumps(CD), "countdown", None, False),
    (chain("\\boxed{4*6}"), CD, "countdown", None, False),
    (chain("\\boxed{4*6+1}"), CD, "countdown", None, False),
    (chain("\\boxed{four}"), CD, "countdown", None, False),
    (chain("no box"), CD, "countdown", None, False),
    (chain("\\boxed{4*6*1}"), "not json", "countdown", None, False),
    (chain("\\boxed{4*6*1}"), {"target": "24", "numbers": [4, 6, 1]}, "countdown", None, False),
]


@pytest.mark.parametrize("fmt", [E2C, None], ids=["e2c", "raw"])
@pytest.mark.parametrize("case", PARITY, ids=[f"{c[2]}-{i}" for i, c in enumerate(PARITY)])
def test_table_grader_matches_the_old_dispatch(case: tuple[Any, Any, str, Any, bool], fmt: Any) -> None:
    response, gold, kind, options, fallback = case
    new = grade(response, gold, kind, options=options, fallback_number=fallback, fmt=fmt, timeout=5.0)
    old = _old_grade(response, gold, kind, options, fallback, fmt)
    keys = (
        "score",
        "correct",
        "extracted",
        "gold",
        "reason",
        "kind",
        "method",
        "check",
        "chain_status",
        "format_score",
    )
    assert {k: getattr(new, k) for k in keys} == {k: getattr(old, k) for k in keys}


def test_mapping_of_options_reaches_every_kind() -> None:
    # as_options runs before the kind's functions: numpy-like lists and parquet structs both arrive as {letter: text}
    class Arr(list):
        def tolist(self) -> list:
            return list(self)

    opts: Mapping[str, Any] = {"A": "x", "B": "y", "C": None}
    assert grade(chain("\\boxed{y}"), "B", "mcq", options=opts).correct
    assert grade(chain("\\boxed{y}"), "B", "mcq", options=Arr(["x", "y"])).correct
