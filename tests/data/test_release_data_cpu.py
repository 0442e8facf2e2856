"""Exact compatibility with the paper's release, part 4: the release's raw data layout and
evaluation columns (``data/raw/{sft,rl}``, ``data/evaluation/<name>.parquet``) load, grade and prepare with
no flags. The other parts (suffix, prefill, medical prompts, SFT text) are in test_release_compat_cpu.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from release_text import CHAIN, OLD_SUFFIX, SUFFIX

from e2c.data import registry
from e2c.data.io import read_rows, write_parquet
from e2c.data.registry import REGISTRY, letter_options, load_benchmark, question_text
from e2c.rewards import grade

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------------ 4. the release's data layout
MATH_SETS = ["aime24", "aime25", "amc23", "gsm8k", "math-algebra", "math500", "minerva", "olympiad_bench"]
MED_SETS = [
    "anatomy",
    "clinical_knowledge",
    "college_biology",
    "college_medicine",
    "medical_genetics",
    "medmcqa",
    "medqa",
    "professional_medicine",
]
MED_Q = "A 45-year-old man has chest pain. Which vessel is most likely occluded?"
OPTIONS = {
    "A": "Left anterior descending artery",
    "B": "Right coronary artery",
    "C": "Circumflex artery",
    "D": "Aorta",
}
# The option layouts seen in medical question texts.
OPTION_TEXTS = [
    "\n".join([MED_Q, *(f"{k}. {v}" for k, v in OPTIONS.items())]),
    "\n".join([MED_Q, "Options:", *(f"({k}) {v}" for k, v in OPTIONS.items())]),
    "\n".join([MED_Q, *(f"{k}: {v}" for k, v in OPTIONS.items())]),
    MED_Q + " " + " ".join(f"{k}) {v}" for k, v in OPTIONS.items()),
]


def _keys(k: int) -> tuple[str, str]:
    """File ``k``'s column names: the release's spellings, question|Question|prompt, answer|Answer|response."""
    return ("question", "Question", "prompt")[k % 3], ("answer", "Answer", "response")[k % 3]


def _math_rows(name: str, k: int) -> list[dict]:
    qkey, akey = _keys(k)
    gold = ["\\frac{1}{2}" if name == "math500" else str(10 + i) for i in range(6)]
    return [{qkey: f"{name}: what is problem {i}?", akey: gold[i]} for i in range(6)]


def _med_rows(k: int) -> list[dict]:
    """Answers as a mapping with ``answer_idx`` (a JSON string of one in every other file)."""
    qkey, akey = _keys(k)
    rows = []
    for i in range(8):
        letter = "ABCD"[i % 4]
        gold: object = {"answer_idx": letter, "answer": OPTIONS[letter]}
        rows.append({qkey: OPTION_TEXTS[i % len(OPTION_TEXTS)], akey: json.dumps(gold) if k % 2 else gold})
    return rows


def _release_tree(root: Path) -> Path:
    """``data/raw/{sft,rl}`` and ``data/evaluation`` as the release's download scripts lay them out."""
    data = root / "data"
    write_parquet(
        [{"question": f"What is 2 + {i}?" + OLD_SUFFIX, "solution": CHAIN, "answer": "5"} for i in range(30)],
        data / "raw" / "sft" / "e2c-sft.parquet",
    )
    write_parquet(
        [
            {
                "prompt": [{"role": "user", "content": f"Q{i}" + SUFFIX}],
                "data_source": "math",
                "reward_model": {"ground_truth": str(i)},
            }
            for i in range(20)
        ],
        data / "raw" / "rl" / "e2c-rl.parquet",
    )
    write_parquet(
        [{"problem": "Q1", "answer": "1"}, {"problem": "V", "answer": "2"}],
        data / "raw" / "rl" / "e2c-rl-valid.parquet",
    )
    for k, name in enumerate(MATH_SETS):
        write_parquet(_math_rows(name, k), data / "evaluation" / f"{name}.parquet")
    for k, name in enumerate(MED_SETS):
        write_parquet(_med_rows(k), data / "evaluation" / f"{name}.parquet")
    return data


@pytest.fixture
def release_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    data = _release_tree(tmp_path)
    monkeypatch.delenv(registry.DATA_DIR_ENV, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("E2C_HOME", str(data.parent))  # the project folder holding data/
    return data


@pytest.mark.parametrize("name", MATH_SETS)
def test_release_math_files_load_and_grade(release_data: Path, name: str) -> None:
    recs = load_benchmark(name, use_hub=False)  # found in data/evaluation with no --data-dir
    assert len(recs) == 6 and all(r.kind == "math" for r in recs)
    for i, r in enumerate(recs):
        assert r.problem == f"{name}: what is problem {i}?"
        assert grade(f"so \\boxed{{{r.answer}}}", r.answer).correct
        assert not grade("so \\boxed{999}", r.answer).correct


@pytest.mark.parametrize("name", MED_SETS)
def test_release_medical_files_load_and_grade(release_data: Path, name: str) -> None:
    recs = load_benchmark(name, use_hub=False)
    assert len(recs) == 8
    for i, r in enumerate(recs):
        letter = "ABCD"[i % 4]
        assert (r.kind, r.answer, r.choices) == ("mcq", letter, list(OPTIONS.values()))
        # The model sees the question as the release sends it: options already in the text, not twice.
        assert question_text(r) == OPTION_TEXTS[i % len(OPTION_TEXTS)]
        opts = letter_options(r.choices)
        assert grade(f"The correct answer is \\boxed{{{letter}}}", r.answer, kind="mcq", options=opts).correct
        wrong = "ABCD"[(i + 1) % 4]
        assert not grade(
            f"The correct answer is \\boxed{{{wrong}}}", r.answer, kind="mcq", options=opts
        ).correct
        assert grade(f"\\boxed{{{OPTIONS[letter]}}}", r.answer, kind="mcq", options=opts).correct


def test_options_in_text_and_json_options() -> None:
    from e2c.data.registry import options_in_text, row_choices, to_record

    assert options_in_text("What is 2+3?") == {}
    assert options_in_text("Vitamin A. deficiency causes what?") == {}
    assert options_in_text("Pick one.\nA. x\nB. y\nNote: C. is not an option") == {"A": "x", "B": "y"}
    assert row_choices({"options": json.dumps({"B": "y", "A": "x"})}) == ["x", "y"]
    rec = to_record(
        {"question": "Q?", "options": '["x", "y", "z"]', "answer": json.dumps({"answer_idx": "C"})},
        REGISTRY["medqa"],
        0,
    )
    assert (rec.answer, rec.choices, question_text(rec)) == ("C", ["x", "y", "z"], "Q?\nA. x\nB. y\nC. z")


def test_release_hub_names_of_the_rl_files_are_found(tmp_path: Path) -> None:
    from e2c.data.prepare import raw_files

    raw = tmp_path / "raw"
    for name in ("rl/ef-rl.parquet", "rl/ef-rl-valid.parquet", "sft/e2c-sft.parquet"):
        write_parquet([{"problem": "Q", "answer": "1"}], raw / name)
    assert [p.name for p in raw_files(raw, "rl")] == ["ef-rl-valid.parquet", "ef-rl.parquet"]
    assert [p.name for p in raw_files(raw, "sft")] == ["e2c-sft.parquet"]


def test_prepare_finds_the_release_layout_without_flags(tmp_path: Path, tiny_path: str) -> None:
    data = _release_tree(tmp_path)
    out = tmp_path / "processed"
    env = {k: v for k, v in os.environ.items() if k != registry.DATA_DIR_ENV}
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "e2c.data.prepare",
            "--skip-download",
            "--synthetic",
            "0",
            "--tokenizer",
            "tiny",
            "--raw",
            str(data / "raw"),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        check=False,
        env={**env, "HF_HUB_OFFLINE": "1"},
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "no local copy" not in r.stdout
    written = {p.stem for p in (out / "eval").glob("*.parquet")}
    assert written == {REGISTRY[registry.resolve_names(n)[0]].name for n in MATH_SETS + MED_SETS}
    sft = [row for f in (out / "sft").glob("e2c_sft_*.parquet") for row in read_rows(f)]
    assert len(sft) == 30 and all(
        row["messages"][0]["content"].count("reasoning step-by-step") == 1 for row in sft
    )
    rl_train = list(read_rows(out / "rl" / "e2c_rl_train.parquet"))
    rl_val = list(read_rows(out / "rl" / "e2c_rl_val.parquet"))
    assert len(rl_val) == 2 and len(rl_train) == 19  # Q1 is in the validation file, so not in training
    assert all(row["prompt"][-1]["content"].endswith(SUFFIX) for row in rl_train + rl_val)
    med = list(read_rows(out / "eval" / "medqa.parquet"))
    assert [m["answer"] for m in med] == list("ABCDABCD") and all(len(m["choices"]) == 4 for m in med)
