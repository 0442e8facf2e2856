"""Schemas, the paper-data conversion and the EF-SFT builder."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from e2c.chain import E2C
from e2c.core.errors import UserError
from e2c.data import efsft, paper
from e2c.data.io import write_parquet
from e2c.data.schema import SchemaError, check_row, validate_file, validate_rows

CHAIN = "<EXPLORATION>1. add: add them</EXPLORATION><EXECUTION>Step 1: add. 2+2=\\boxed{4}</EXECUTION>"


def _sft(content: str = CHAIN) -> dict:
    return {
        "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": content}],
        "data_source": "x",
        "extra_info": {},
    }


def _rl(**over) -> dict:
    row = {
        "prompt": [{"role": "user", "content": "q"}],
        "data_source": "x",
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": "4"},
        "extra_info": {"index": 0, "kind": "math"},
    }
    row.update(over)
    return row


@pytest.mark.parametrize(
    ("row", "schema", "field", "words"),
    [
        (_sft("no tags at all"), "sft", "messages[1].content", "no_tags"),
        (_sft(CHAIN.replace("</EXECUTION>", "")), "sft", "messages[1].content", "truncated_execution"),
        ({**_sft(), "messages": [{"role": "user", "content": "q"}]}, "sft", "messages[0].role", "assistant"),
        ({**_sft(), "loss_scope": "half"}, "ef_sft", "loss_scope", "exploration or full"),
        (
            _rl(reward_model={"style": "rule", "ground_truth": None}),
            "rl",
            "reward_model.ground_truth",
            "string",
        ),
        (_rl(extra_info={"index": "0", "kind": "math"}), "rl", "extra_info.index", "integer"),
        (_rl(prompt=[{"role": "user", "content": ""}]), "rl", "prompt[0].content", "empty"),
        (
            {
                "id": "a",
                "problem": "p",
                "answer": "E",
                "kind": "mcq",
                "choices": ["x", "y"],
                "data_source": "m",
            },
            "eval",
            "answer",
            "option letters A, B",
        ),
        (
            {"id": "a", "problem": "p", "answer": "1", "kind": "essay", "choices": [], "data_source": "m"},
            "eval",
            "kind",
            "math or mcq",
        ),
    ],
)
def test_schema_failures_name_the_field(row: dict, schema: str, field: str, words: str) -> None:
    bad = check_row(row, schema)
    assert bad is not None and bad[0] == field and words in bad[1]


def test_valid_rows_pass_and_errors_name_file_row_field(tmp_path: Path) -> None:
    assert check_row(_sft(), "sft") is None and check_row(_rl(), "rl") is None
    assert (
        check_row({**_sft("<EXPLORATION>plan</EXPLORATION>"), "loss_scope": "exploration"}, "ef_sft") is None
    )
    p = write_parquet([_rl(), _rl(), _rl(data_source="")], tmp_path / "rl.parquet")
    with pytest.raises(
        SchemaError, match=r"rl.parquet row 2 field 'data_source': expected a non-empty string"
    ):
        validate_file(p, "rl")
    (tmp_path / "junk.parquet").write_bytes(b"not parquet")
    with pytest.raises(UserError, match=r"junk\.parquet: not a readable parquet file"):
        validate_file(tmp_path / "junk.parquet", "rl")
    with pytest.raises(UserError, match="unknown schema 'sfts'; valid: eval, sft, ef_sft, rl"):
        validate_rows([_sft()], "sfts", "x")


def test_paper_sft_and_rl_conversion() -> None:
    suffix = E2C.prompt_suffix
    rows = [
        {"question": "What is 2+2?" + suffix, "solution": CHAIN, "answer": "4", "type1": "math"},
        {"question": "Broken", "solution": "<EXPLORATION>plan only"},
        {"question": "From parts", "solution": "", "exploration": "plan", "execution": "\\boxed{1}"},
    ]
    out, dropped = paper.sft_rows(rows)
    assert len(out) == 2 and dropped == {"truncated_exploration": 1}
    assert out[0]["messages"][0]["content"] == "What is 2+2?" + suffix  # the suffix is not doubled
    assert out[1]["messages"][1]["content"] == E2C.format_response("plan", "\\boxed{1}")
    assert validate_rows(out, "sft", "x") == 2
    rl_in = [
        {
            "prompt": [{"role": "user", "content": "Q1" + suffix}],
            "data_source": "math_dapo",
            "reward_model": {"ground_truth": "\\boxed{3}"},
            "extra_info": {"difficulty": 0.4},
        },
        {"problem": "Q2", "answer": 7.0},
        {"problem": "Q3"},
    ]
    rl, dropped = paper.rl_rows(rl_in)
    assert dropped == {"no_answer": 1} and validate_rows(rl, "rl", "x") == 2
    assert rl[0]["reward_model"]["ground_truth"] == "3" and rl[0]["extra_info"]["difficulty"] == 0.4
    assert rl[1]["reward_model"]["ground_truth"] == "7" and rl[1]["extra_info"]["index"] == 1
    assert rl[0]["prompt"][-1]["content"] == "Q1" + suffix


def test_split_is_by_question_and_order_free() -> None:
    rows = [{"prompt": [{"role": "user", "content": f"Problem {i % 300}"}]} for i in range(900)]
    train, val = paper.split_train_val(rows, paper.first_user, 0.1, seed=0)
    tq = {paper.first_user(r) for r in train}
    vq = {paper.first_user(r) for r in val}
    assert not tq & vq and 0.04 < len(vq) / 300 < 0.2
    _, val2 = paper.split_train_val(rows[::-1], paper.first_user, 0.1, seed=0)
    assert {paper.first_user(r) for r in val2} == vq


def _words(text: str) -> int:
    return len(text.split())


def test_efsft_share_matches_a_plain_loop() -> None:
    rows = [
        _sft(E2C.format_response(f"plan {i} " * (i % 5 + 1), f"long execution {i} " * 20)) for i in range(200)
    ]
    for i, r in enumerate(rows):
        r["messages"][0]["content"] = f"question {i}"
    out, stats = efsft.build(rows, _words, reg_frac=0.1, seed=0)
    assert validate_rows(out, "ef_sft", "x") == 200
    # Reference: count per row by its scope.
    trained = full = 0
    for r in out:
        content = r["messages"][-1]["content"]
        if r["loss_scope"] == "full":
            trained += _words(content)
            full += _words(content)
        else:
            i = int(re.match(r"question (\d+)", r["messages"][0]["content"]).group(1))
            trained += _words(content)
            full += _words(E2C.format_response(f"plan {i} " * (i % 5 + 1), f"long execution {i} " * 20))
    assert (stats.trained_tokens, stats.full_sft_tokens) == (trained, full)
    assert stats.full_rows == sum(r["loss_scope"] == "full" for r in out) and 5 < stats.full_rows < 40
    assert 0.05 < stats.share < 0.3
    assert all(
        r["messages"][-1]["content"].endswith("</EXPLORATION>")
        for r in out
        if r["loss_scope"] == "exploration"
    )


def test_efsft_with_domain_plans_and_separate_full_chains() -> None:
    domain = [{"question": f"med q{i}", "exploration": f"1. recall fact {i}"} for i in range(95)]
    full = [_sft() for _ in range(3)] + [{"question": f"math {i}", "solution": CHAIN} for i in range(20)]
    out, stats = efsft.build(domain, _words, reg_frac=0.05, reg_rows=full)
    assert (stats.exploration_rows, stats.full_rows) == (95, 5)
    assert validate_rows(out, "ef_sft", "x") == 100
    _, stats0 = efsft.build(domain, _words, reg_frac=0.0)
    assert stats0.full_rows == 0 and stats0.share == 1.0  # plans only: nothing longer to compare with
    with pytest.raises(ValueError, match="reg_frac"):
        efsft.build(domain, _words, reg_frac=1.0)


def test_rows_round_trip_through_parquet(tmp_path: Path) -> None:
    p = write_parquet(
        [_rl(extra_info={"index": 0, "kind": "countdown", "difficulty": 2})], tmp_path / "r.parquet"
    )
    assert validate_file(p, "rl") == 1
