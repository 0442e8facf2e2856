"""Regressions for reviewed defects: multiple-choice RL rows (gold letter and options survive the parquet
round trip and score like eval) and the TTS judge/scorer reading of a model's number."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from e2c.data import paper
from e2c.data.io import write_parquet
from e2c.data.schema import validate_rows
from e2c.rewards import compute_score

# ------------------------------------------------------------------------------ A: MCQ rows for RL

INLINE_Q = "Which drug is a vitamin K antagonist? A. Heparin B. Aspirin C. Warfarin D. Insulin"
LINES_Q = "A 60-year-old with atrial fibrillation needs anticoagulation. Which drug?\nA. Heparin\nB. Aspirin\nC. Warfarin\nD. Insulin"

MCQ_IN = [
    # The release's medical layout: answer mapping, options only in the question text.
    {"question": INLINE_Q, "answer": {"answer_idx": "C"}, "data_source": "medqa"},
    # The same mapping as a JSON string, options one per line.
    {"question": LINES_Q, "answer": '{"answer_idx": "C", "answer": "Warfarin"}', "data_source": "medqa"},
    # verl-style row with the mapping in reward_model and options in a column (not in the text).
    {
        "prompt": [{"role": "user", "content": "Which drug is a vitamin K antagonist?"}],
        "data_source": "medmcqa",
        "reward_model": {"ground_truth": {"answer_idx": "C"}},
        "options": {"A": "Heparin", "B": "Aspirin", "C": "Warfarin", "D": "Insulin", "E": "Dabigatran"},
    },
    # MedMCQA columns with a 0-based index.
    {
        "question": "Which drug is a vitamin K antagonist?",
        "opa": "Heparin",
        "opb": "Aspirin",
        "opc": "Warfarin",
        "opd": "Insulin",
        "cop": 2,
        "data_source": "medmcqa",
    },
    # The gold as the option's text.
    {"question": INLINE_Q, "answer": "Warfarin", "data_source": "medqa"},
]
MATH_IN = {"problem": "What is 2+2?", "answer": "4", "data_source": "math_dapo"}


def _chain(execution: str) -> str:
    return f"<EXPLORATION>Recall the drug classes.</EXPLORATION><EXECUTION>{execution}</EXECUTION>"


def _read_back(path: Path) -> list[list[dict]]:
    """The rows as verl's loaders see them: pandas, pyarrow and HF datasets (struct columns -> dicts)."""
    import datasets

    ds = datasets.load_dataset("parquet", data_files=str(path), split="train")
    return [
        pd.read_parquet(path).to_dict("records"),
        pq.read_table(path).to_pylist(),
        [ds[i] for i in range(len(ds))],
    ]


def test_mcq_rl_rows_keep_a_letter_gold_and_the_options_through_parquet(tmp_path: Path) -> None:
    rows, dropped = paper.rl_rows([*MCQ_IN, MATH_IN])
    assert not dropped and len(rows) == len(MCQ_IN) + 1
    assert validate_rows(rows, "rl", "x") == len(rows)
    for r in rows[: len(MCQ_IN)]:
        assert r["reward_model"]["ground_truth"] == "C"
        assert r["extra_info"]["kind"] == "mcq"
        assert r["extra_info"]["options"]["C"] == "Warfarin"
        # The model must see the options: a column-only option list is written into the question.
        assert "Warfarin" in r["prompt"][-1]["content"]
    assert rows[2]["extra_info"]["options"]["E"] == "Dabigatran"
    assert rows[0]["prompt"][-1]["content"].count("Warfarin") == 1  # options already in the text: kept once
    assert "options" not in rows[-1]["extra_info"] and rows[-1]["extra_info"]["kind"] == "math"

    path = write_parquet(rows, tmp_path / "rl.parquet")
    for loaded in _read_back(path):
        for r in loaded[: len(MCQ_IN)]:
            gt, info = r["reward_model"]["ground_truth"], r["extra_info"]
            for response in (_chain("\\boxed{C}"), _chain("The correct answer is Warfarin.")):
                got = compute_score(r["data_source"], response, gt, info)
                assert got["score"] == 1.0, (r["data_source"], response, gt, info, got)
            assert compute_score(r["data_source"], _chain("\\boxed{A}"), gt, info)["score"] == 0.0
        math = loaded[-1]
        got = compute_score(
            math["data_source"],
            _chain("\\boxed{4}"),
            math["reward_model"]["ground_truth"],
            math["extra_info"],
        )
        assert got["score"] == 1.0


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        ({"question": INLINE_Q, "answer": {"answer_idx": "F"}, "data_source": "medqa"}, "bad_mcq_answer"),
        ({"question": INLINE_Q, "answer": "Dabigatran", "data_source": "medqa"}, "bad_mcq_answer"),
        ({"question": INLINE_Q, "answer": {"note": "none"}, "data_source": "medqa"}, "no_answer"),
    ],
)
def test_mcq_rl_rows_with_an_unreadable_gold_are_dropped_and_counted(row: dict, reason: str) -> None:
    rows, dropped = paper.rl_rows([row])
    assert rows == [] and dropped == {reason: 1}


# ------------------------------------------------------------------------- C: one set of EOS ids


def test_every_id_stopping_path_uses_the_shared_eos_ids() -> None:
    """The hf generator, the RL agent loop, the hf rollout and the reward manager's decode all take their
    EOS ids from one function (tokenizer + generation config), so a sample ends on the same ids in each."""
    from types import SimpleNamespace

    from e2c.generation import base, hf
    from e2c.rl import agent_loop, reward
    from e2c.verl_cpu import hf_rollout

    assert hf.eos_ids is agent_loop.eos_ids is hf_rollout.eos_ids is reward.eos_ids is base.eos_ids
    qwen_tok, qwen_cfg = SimpleNamespace(eos_token_id=151645), SimpleNamespace(eos_token_id=[151645, 151643])
    assert base.eos_ids(qwen_tok, qwen_cfg) == {151645, 151643}
    assert base.eos_ids(qwen_tok, None) == base.eos_ids(qwen_tok, SimpleNamespace()) == {151645}
