"""Fail cleanly everywhere: the data scripts, the quickstart and the GPU recipe, run as a user runs
them. Each bad input is one ``error:`` line on stderr, exit 2, no traceback and nothing written; a secret is
never printed; a check-only run (``E2C_CHECK_ONLY=1``) takes paths with spaces and non-ASCII letters.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from bad_input import ROOT, assert_one_line_error, run, snapshot, touch

RECIPE = "scripts/gpu_recipe.sh"


# ---------------------------------------------------------------------------------- quickstart --out
def test_quickstart_out_onto_a_file_is_one_line(tmp_path: Path) -> None:
    """Was a FileExistsError traceback from mkdir."""
    target = touch(tmp_path / "report.txt")
    r = run("scripts/quickstart.sh", "--fast", "--out", str(target))
    assert_one_line_error(r, "--out", str(target), "exists and is not a folder")
    assert target.read_text() == "keep me\n"


@pytest.mark.parametrize("out", ["/proc/e2c-no-such/quickstart", "/proc/self/e2c-quickstart"])
def test_quickstart_out_into_proc_is_one_line(out: str) -> None:
    """Was a FileNotFoundError traceback from mkdir."""
    r = run("scripts/quickstart.sh", "--fast", "--out", out)
    assert_one_line_error(r, "--out", "cannot write in /proc")


@pytest.mark.parametrize(
    ("flag", "value"), [("--sft-lr", "nan"), ("--rl-lr", "inf"), ("--sft-lr", "0"), ("--tts-top-p", "nan")]
)
def test_quickstart_refuses_a_learning_rate_that_is_not_a_positive_number(
    tmp_path: Path, flag: str, value: str
) -> None:
    """``--sft-lr nan`` was accepted: the data and baseline stages ran, then SFT failed an hour in."""
    out = tmp_path / "qs"
    r = run("scripts/quickstart.sh", "--fast", "--out", str(out), flag, value)
    assert_one_line_error(r, f"error: {flag} must be", f"got {value}")
    assert not out.exists()


# ---------------------------------------------------------------------------------- the GPU recipe
def recipe(timeout: int = 180, **env: str) -> subprocess.CompletedProcess:
    """scripts/gpu_recipe.sh with ``env`` (``E2C_CHECK_ONLY`` off unless given), from another folder."""
    inherited = {k: v for k, v in os.environ.items() if k not in ("DRY_RUN", "E2C_CHECK_ONLY", "FROM")}
    return subprocess.run(
        ["bash", str(ROOT / RECIPE)],
        env={**inherited, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd="/",
    )


BAD_KNOBS = [
    ("RL_ALGO", "ppo"),
    ("RL_ALGO", "GRPO"),
    ("NNODES", "0"),
    ("NNODES", "2 "),
    ("NNODES", "1.5"),
    ("EVAL_SAMPLES", "0"),
    ("EVAL_SAMPLES", "eight"),
    ("TTS_BUDGETS", "0 4"),
    ("TTS_BUDGETS", "4,8"),
    ("TTS_BUDGETS", "x"),
    ("TTS_BUDGETS", " "),
    ("PASS_RATE_K", "1"),
    ("EVAL_TEMPERATURE", "nan"),
]


@pytest.mark.parametrize(("name", "value"), BAD_KNOBS, ids=lambda v: repr(v))
def test_recipe_refuses_a_bad_knob_in_a_dry_run_as_in_a_real_one(name: str, value: str) -> None:
    """The dry run printed the steps' commands for values the real run refuses (or only the real run
    checked them, hours in): both now refuse them before anything, with the same line."""
    dry = recipe(DRY_RUN="1", **{name: value})
    line = assert_one_line_error(dry, f"error: {name} must be", repr(value) if " " in value else value)
    assert "+ " not in dry.stdout  # no command printed
    # The real run, stopped at its checks (E2C_CHECK_ONLY=1) in case a value slipped through them.
    real = recipe(DRY_RUN="0", E2C_CHECK_ONLY="1", **{name: value})
    assert assert_one_line_error(real) == line


@pytest.mark.parametrize("value", ["maybe", "2", "y", "ja"])
def test_recipe_refuses_a_dry_run_switch_it_cannot_read(value: str) -> None:
    r = recipe(DRY_RUN=value)
    assert_one_line_error(r, "error: DRY_RUN must be 1/true/yes or 0/false/no", value)
    assert "+ " not in r.stdout


@pytest.mark.parametrize("value", ["1", "true", "yes", "TRUE", "Yes"])
def test_recipe_dry_run_spellings_are_a_dry_run(value: str) -> None:
    """``DRY_RUN=true`` was neither a dry run nor refused: it ran the real steps. FROM=tts: were it the
    real thing here, it would stop at the missing checkpoint instead of printing the command."""
    r = recipe(DRY_RUN=value, FROM="tts")
    assert r.returncode == 0, r.stderr[-2000:]
    commands = [ln for ln in r.stdout.splitlines() if ln.startswith("+ ")]
    assert len(commands) == 1 and " -m e2c.tts " in commands[0]
    assert "global_step_LATEST" in commands[0]  # the dry run's stand-in for the checkpoint


@pytest.mark.parametrize("value", ["0", "false", "no", "No"])
def test_recipe_real_run_spellings_are_a_real_run(value: str) -> None:
    """A real run, checked only (E2C_CHECK_ONLY=1): its checks pass and it prints no dry-run command."""
    r = recipe(DRY_RUN=value, FROM="tts", E2C_CHECK_ONLY="1")
    assert r.returncode == 0 and r.stderr.strip().splitlines()[-1] == "checks passed", r.stderr[-2000:]
    assert "+ " not in r.stdout


# ---------------------------------------------------------------------------------- secrets
FAKE_TOKEN = "hf_e2cFakeSecret0123456789\nhf_e2cSecondLine9876"
TOKEN_PARTS = ("hf_e2cFakeSecret0123456789", "hf_e2cSecondLine9876", "FakeSecret", "SecondLine")


@pytest.mark.parametrize(
    "command",
    [
        ["scripts/download_datasets.sh", "--dataset", "eval"],
        ["scripts/prepare_all_data.sh", "--synthetic", "0", "--skip-rl", "--skip-sft"],
    ],
    ids=["download", "prepare"],
)
def test_a_token_with_a_line_break_is_refused_and_never_shown(tmp_path: Path, command: list[str]) -> None:
    """Was "cannot reach ..." with the token in the line (the HTTP layer quoted the header)."""
    out = tmp_path / "raw"
    args = [*command, "--endpoint", "http://127.0.0.1:9"]
    args += (
        ["--out", str(out)] if "download" in command[0] else ["--raw", str(out), "--out", str(tmp_path / "p")]
    )
    r = run(*args, env={"HF_TOKEN": FAKE_TOKEN})
    line = assert_one_line_error(r, "HF_TOKEN", "whitespace or a line break", "not shown")
    for part in TOKEN_PARTS:
        assert part not in r.stdout + r.stderr, part
    assert "cannot reach" not in line and list(tmp_path.iterdir()) == []


def test_no_error_line_quotes_the_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever a library puts into its exception, the line built from it shows no token."""
    from e2c.data import download as dl

    token = "hf_e2cFakeSecret0123456789"
    monkeypatch.setenv("HF_TOKEN", token)
    e = ValueError(f"Invalid header value b'Bearer {token}'")
    message = str(dl._unreachable("http://127.0.0.1:9", e))
    assert token not in message and "***" in message and message.startswith("cannot reach")
    monkeypatch.setenv("HF_TOKEN", token + "\n")
    with pytest.raises(dl.DownloadError) as err:
        dl.hf_token()
    assert token not in str(err.value)


# ---------------------------------------------------------------------------------- prepare: tokenizer
def _model_without_vocabulary(tmp_path: Path, tiny_path: str, tokenizer_files: dict[str, str]) -> Path:
    """The tiny model's config and weights, with tokenizer files that hold no vocabulary."""
    folder = tmp_path / "tok"
    folder.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(Path(tiny_path) / name, folder / name)
    for name, text in tokenizer_files.items():
        (folder / name).write_text(text)
    return folder


@pytest.mark.parametrize(
    "files",
    [{"tokenizer_config.json": "{}"}, {"vocab.json": "{}"}],
    ids=["config-only", "vocab-without-merges"],
)
def test_prepare_refuses_a_tokenizer_with_no_vocabulary_before_any_work(
    tmp_path: Path, tiny_path: str, files: dict[str, str]
) -> None:
    """Was exit 0 with EF-SFT data built and "trained tokens 0 of 0" (or a traceback after every other
    step had written its files)."""
    tok = _model_without_vocabulary(tmp_path, tiny_path, files)
    before = snapshot(tmp_path)
    out = tmp_path / "processed"
    r = run(
        "scripts/prepare_all_data.sh",
        *("--skip-download", "--synthetic", "40", "--tokenizer", str(tok)),
        *("--raw", str(tmp_path / "raw"), "--out", str(out)),
        timeout=300,
    )
    assert_one_line_error(r, "error: --tokenizer", str(tok))
    assert not out.exists() and not (tmp_path / "raw").exists()
    assert snapshot(tmp_path) == before


# ---------------------------------------------------------------------------------- odd but valid paths
ODD = "a folder/ñandú é"


@pytest.mark.parametrize("locale", ["C.UTF-8", "C"])
def test_prepare_checks_pass_for_an_output_folder_with_spaces_and_accents(
    tmp_path: Path, locale: str
) -> None:
    out = tmp_path / ODD / "processed"
    r = run(
        "scripts/prepare_all_data.sh",
        *("--skip-download", "--synthetic", "0", "--raw", str(tmp_path / ODD / "raw"), "--out", str(out)),
        env={"E2C_CHECK_ONLY": "1", "LC_ALL": locale},
    )
    assert r.returncode == 0 and "checks passed" in r.stderr, r.stderr[-2000:]
    assert list(tmp_path.iterdir()) == []  # a check creates nothing


@pytest.mark.parametrize("locale", ["C.UTF-8", "C"])
def test_quickstart_checks_pass_for_an_out_with_spaces_and_accents(tmp_path: Path, locale: str) -> None:
    r = run(
        "scripts/quickstart.sh",
        *("--fast", "--out", str(tmp_path / ODD / "quick start")),
        env={"E2C_CHECK_ONLY": "1", "LC_ALL": locale},
    )
    assert r.returncode == 0 and "checks passed" in r.stderr, r.stderr[-2000:]
    assert list(tmp_path.iterdir()) == []
