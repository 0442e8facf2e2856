"""The benchmark registry: loaders on the shared benchmark copies, hub field layouts, names and errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2c.core.errors import UserError
from e2c.data import registry
from e2c.data.registry import REGISTRY, get_spec, load_benchmark, question_text, resolve_names, to_record

# name -> (rows, first answer) in ../shared/data/benchmarks
LOCAL = {
    "aime24": (30, "204"),
    "amc23": (40, "27"),
    "gsm8k": (1319, "18"),
    "minerva": (272, None),
    "olympiadbench": (675, None),
    "medqa": (1273, "B"),
    "medmcqa": (2816, None),
    "anatomy": (135, "A"),
    "clinical_knowledge": (265, None),
    "college_biology": (144, None),
    "college_medicine": (173, None),
    "medical_genetics": (100, None),
    "professional_medicine": (272, None),
}


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv(registry.DATA_DIR_ENV, raising=False)
    monkeypatch.setenv("E2C_HOME", str(tmp_path / "none"))  # no project eval files


@pytest.mark.parametrize("name", list(LOCAL))
def test_local_copies_load(real_bench_dir: Path, name: str) -> None:
    recs = load_benchmark(name, real_bench_dir)
    rows, first = LOCAL[name]
    assert len(recs) == rows
    assert len({r.id for r in recs}) == rows
    spec = REGISTRY[name]
    for r in recs:
        assert r.problem and r.answer and r.kind == spec.kind and r.data_source == name
        if r.kind == "mcq":
            assert len(r.choices) >= 4 and r.answer in "ABCDEFGHIJ"[: len(r.choices)]
        else:
            assert r.choices == []
    if first is not None:
        assert recs[0].answer == first


def test_env_var_and_limit(real_bench_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(registry.DATA_DIR_ENV, str(real_bench_dir))
    assert len(load_benchmark("gsm8k", limit=5)) == 5
    assert load_benchmark("minerva", limit=1)[0].answer == "1.6"


def test_olympiad_answers_have_no_dollars(bench_dir: Path) -> None:
    recs = load_benchmark("olympiadbench", bench_dir)
    assert not any(r.answer.startswith("$") for r in recs)


def test_groups_aliases_and_order() -> None:
    assert resolve_names("all") == [
        "aime24",
        "aime25",
        "amc23",
        "gsm8k",
        "math500",
        "minerva",
        "olympiadbench",
        "math_algebra",
    ]
    assert len(resolve_names("med")) == 8 and "medqa" in resolve_names("med")
    assert resolve_names("gsm8k,math,olympiad_bench,gsm8k") == ["gsm8k", "math500", "olympiadbench"]
    assert resolve_names(["mmlu_medical"]) == [
        n for n in resolve_names("med") if n not in ("medqa", "medmcqa")
    ]
    # the paper's 16 and the synthetic set, and the 8 code sets (tests/data/test_code_sets_cpu.py)
    assert len([s for s in REGISTRY.values() if s.group != "code"]) == 17
    assert len([s for s in REGISTRY.values() if s.group == "code"]) == 8


def test_unknown_name_suggests() -> None:
    with pytest.raises(
        UserError, match=r"unknown dataset 'gsm8'; did you mean 'gsm8k'\?.*valid: groups all, med"
    ):
        resolve_names("gsm8")
    with pytest.raises(UserError, match="unknown dataset 'zzz' valid"):
        resolve_names("zzz")
    with pytest.raises(UserError, match="is a group of 8 sets"):
        get_spec("med")


def test_offline_without_file_says_what_to_do(bench_dir: Path) -> None:
    with pytest.raises(UserError) as e:
        load_benchmark("aime25", bench_dir)
    msg = str(e.value)
    assert "aime25" in msg and "math-ai/aime25" in msg and "download_datasets.sh --dataset eval" in msg
    assert "\n" not in msg
    with pytest.raises(UserError, match="no such folder"):
        load_benchmark("gsm8k", bench_dir / "nope")


@pytest.mark.parametrize(
    ("name", "row", "answer", "choices"),
    [
        ("gsm8k", {"question": "q", "answer": "work\n#### 1,234"}, "1,234", []),
        ("math500", {"problem": "p", "answer": "\\frac{1}{2}", "unique_id": "x/1.json"}, "\\frac{1}{2}", []),
        ("math_algebra", {"problem": "p", "solution": "so $\\boxed{7}$."}, "7", []),
        ("olympiadbench", {"question": "q", "final_answer": ["$3$"]}, "3", []),
        ("amc23", {"question": "q", "answer": 27.0}, "27", []),
        (
            "anatomy",
            {"question": "q", "choices": ["w", "x", "y", "z"], "answer": 2},
            "C",
            ["w", "x", "y", "z"],
        ),
        (
            "medmcqa",
            {"question": "q", "opa": "a", "opb": "b", "opc": "c", "opd": "d", "cop": 3},
            "D",
            ["a", "b", "c", "d"],
        ),
        ("medqa", {"question": "q", "options": {"B": "y", "A": "x"}, "answer_idx": "B"}, "B", ["x", "y"]),
    ],
)
def test_hub_layouts_map(name: str, row: dict, answer: str, choices: list[str]) -> None:
    rec = to_record(row, REGISTRY[name], 3)
    assert (rec.answer, rec.choices, rec.id) == (answer, choices, rec.id)
    assert rec.id.startswith(f"{name}-")


def test_bad_rows_name_the_row(tmp_path: Path) -> None:
    p = tmp_path / "medqa.jsonl"
    p.write_text(
        '{"question": "q", "options": {"A": "x", "B": "y"}, "answer_idx": "A"}\n'
        '{"question": "q2", "options": {"A": "x", "B": "y"}, "answer_idx": "E"}\n'
    )
    with pytest.raises(UserError, match=r"medqa.jsonl row 1: answer 'E' \(field answer_idx\) is not one of"):
        load_benchmark("medqa", tmp_path)
    (tmp_path / "gsm8k.jsonl").write_text('{"question": "q"}\n')
    with pytest.raises(UserError, match=r"gsm8k\.jsonl row 0: no reference answer"):
        load_benchmark("gsm8k", tmp_path)
    (tmp_path / "aime24.jsonl").write_text("{not json\n")
    with pytest.raises(UserError, match=r"aime24\.jsonl:1: malformed JSON"):
        load_benchmark("aime24", tmp_path)


def test_question_text_lists_options() -> None:
    rec = to_record({"question": "Which?", "choices": ["x", "y"], "answer": 1}, REGISTRY["anatomy"], 0)
    assert question_text(rec) == "Which?\nA. x\nB. y"
    assert question_text(to_record({"question": "1+1?", "answer": "2"}, REGISTRY["gsm8k"], 0)) == "1+1?"


def test_synthetic_eval_loads_through_the_registry(tmp_path: Path) -> None:
    from e2c.data.io import write_parquet
    from e2c.data.synthetic.generate import generate, rows_by_split

    samples, _ = generate(400, seed=5)
    write_parquet(rows_by_split(samples)["eval"], tmp_path / "synthetic.parquet")
    recs = load_benchmark("synthetic", tmp_path)
    kinds = {r.kind for r in recs}
    assert kinds == {"math", "countdown"} and all(r.data_source == "synthetic" for r in recs)
    with pytest.raises(UserError, match=r"build it with `bash scripts/prepare_all_data\.sh --skip-download`"):
        load_benchmark("synthetic", tmp_path / "..")
