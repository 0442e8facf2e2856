"""``python -m e2c.eval.run ... --then ...``: several evaluations of one loaded model in one command. Each
later evaluation starts from the flags before it; its predictions equal those of its own command; what the
evaluations share cannot change between them; every evaluation is checked before anything runs."""

from __future__ import annotations

import json
from pathlib import Path
from subprocess import PIPE, STDOUT

import pytest
from eval.test_eval_cpu import cli, tiny_args

from e2c.core.progress import EVALUATION_RE, evaluation_line
from e2c.eval.run import SHARED_FLAGS, THEN, build_parser, parse_evaluations, split_then


def _lines(folder: Path) -> list[dict]:
    """The prediction lines without their chunk's timing (``call``: wall seconds differ between runs)."""
    rows = [json.loads(x) for x in (folder / "predictions" / "gsm8k.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k != "call"} for r in rows]


def test_split_then_against_a_plain_loop_cpu() -> None:
    for argv in ([], ["a"], [THEN], ["a", THEN, "b", "c", THEN, THEN, "d"], [THEN, "x", THEN]):
        groups, cur = [], []
        for w in argv:
            if w == THEN:
                groups.append(cur)
                cur = []
            else:
                cur.append(w)
        groups.append(cur)
        assert split_then(argv) == groups


def test_later_evaluations_inherit_and_change_only_what_they_name_cpu() -> None:
    first = [
        "--model",
        "tiny",
        "--sample",
        "1",
        "--temperature",
        "0",
        "--output-dir",
        "g",
        "--max-tokens",
        "9",
    ]
    second = ["--sample", "4", "--temperature", "1", "--output-dir", "s"]
    runs = parse_evaluations([*first, THEN, *second, THEN, "--output-dir", "t", "--top-p", "0.5"])
    assert [(r.sample, r.temperature, str(r.output_dir), r.max_tokens) for r in runs] == [
        (1, 0.0, "g", 9),
        (4, 1.0, "s", 9),
        (4, 1.0, "t", 9),
    ]
    assert runs[2].top_p == 0.5 and runs[1].top_p == runs[0].top_p
    # A switch stays on; --force is only the evaluation's that names it.
    forced = parse_evaluations([*first, "--no-prefill", "--force", THEN, *second, THEN, "--force"])
    assert [(r.no_prefill, r.force) for r in forced] == [(True, True), (True, False), (True, True)]
    # Every shared flag names a flag of the parser (a renamed flag would silently stop being kept).
    options = build_parser()._option_string_actions
    assert all(flag in options for flag in SHARED_FLAGS)


@pytest.mark.parametrize(
    ("later", "message"),
    [
        ([], "--then must be followed by the flags evaluation 2 changes"),
        (["--model", "embedded"], "evaluation 2 changes --model"),
        (["--seed", "3"], "evaluation 2 changes --seed"),
        (["--backend", "vllm"], "evaluation 2 changes --backend"),
        (["--sample", "0"], "--sample must be >= 1, got 0"),
    ],
)
def test_a_later_evaluation_that_cannot_share_the_model_is_one_line_cpu(
    later: list[str], message: str, capsys: pytest.CaptureFixture
) -> None:
    with pytest.raises(SystemExit) as e:
        parse_evaluations(["--model", "tiny", "--backend", "hf", "--output-dir", "a", THEN, *later])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


@pytest.mark.integration  # three tiny-model evaluation processes
def test_chained_evaluations_equal_their_own_commands_cpu(bench_dir: Path, tmp_path: Path) -> None:
    greedy = ["--sample", "1", "--temperature", "0"]
    sampled = ["--sample", "2", "--temperature", "1", "--top-p", "1.0"]
    # Not quiet: each evaluation's start line is a progress line. One stream, to see the order of the lines.
    first = [*(a for a in tiny_args(bench_dir, tmp_path / "g", limit=3) if a != "--quiet"), *greedy]
    chained = cli(*first, THEN, *sampled, "--output-dir", str(tmp_path / "s"), stdout=PIPE, stderr=STDOUT)
    assert chained.returncode == 0, chained.stdout[-2000:]
    lines = chained.stdout.splitlines()
    starts = [i for i, x in enumerate(lines) if EVALUATION_RE.match(x)]
    assert [lines[i] for i in starts] == [
        evaluation_line(1, 2, tmp_path / "g"),
        evaluation_line(2, 2, tmp_path / "s"),
    ]
    heads = [(i, json.loads(x)) for i, x in enumerate(lines) if x.startswith("{")]
    assert [h["results"] for _, h in heads] == [
        str(tmp_path / "g" / "results.json"),
        str(tmp_path / "s" / "results.json"),
    ]
    # Each evaluation's table and JSON line as soon as it has them, before the next one starts.
    assert starts[0] < heads[0][0] < starts[1] < heads[1][0]
    for name, flags in (("g", greedy), ("s", sampled)):
        alone = cli(*tiny_args(bench_dir, tmp_path / f"{name}-alone", limit=3), *flags)
        assert alone.returncode == 0, alone.stderr[-2000:]
        assert _lines(tmp_path / name) == _lines(tmp_path / f"{name}-alone")
        got = json.loads((tmp_path / name / "results.json").read_text())
        ref = json.loads((tmp_path / f"{name}-alone" / "results.json").read_text())
        assert got["config"] == ref["config"] and got["datasets"] == ref["datasets"]
    assert json.loads((tmp_path / "s" / "results.json").read_text())["config"]["samples"] == 2


def test_two_evaluations_into_one_folder_are_refused_before_any_write_cpu(
    bench_dir: Path, tmp_path: Path
) -> None:
    res = cli(*tiny_args(bench_dir, tmp_path / "a", limit=3), THEN, "--sample", "3")
    assert res.returncode == 2
    assert res.stderr.strip().splitlines()[-1] == (
        f"error: evaluations 1 and 2 write the same run folder {tmp_path / 'a'}: give each its own --output-dir"
    )
    assert not (tmp_path / "a").exists()
    # A later evaluation's bad input stops the command before the first one writes anything.
    bad = cli(
        *tiny_args(bench_dir, tmp_path / "b", limit=3),
        THEN,
        "--dataset",
        "nope",
        "--output-dir",
        str(tmp_path / "c"),
    )
    assert bad.returncode == 2 and "nope" in bad.stderr and not (tmp_path / "b").exists()
