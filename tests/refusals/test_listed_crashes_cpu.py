"""Bad input that once crashed an entry point or passed unnoticed, each run as a user runs it: one ``error:``
line on stderr, exit 2 (or, in the interactive demo's loop, one line and the session goes on), no traceback.

1. the curriculum file (``scripts/e2c_curriculum.sh``, ``python -m e2c.rl.curriculum``): a file that is not
   UTF-8 and a difficulty bound that is text crashed (UnicodeDecodeError, ValueError); every field the file
   accepts is covered by a generated table of bad values (:data:`FIELDS`, :data:`FILES`), each refused in
   one line naming the file, the field and what it must be, under ``E2C_CHECK_ONLY=1`` (a value that slips
   through ends the run at its checks instead of starting a training);
2. ``example_interactive.py`` with stdin bytes that are not UTF-8 (a TypeError in the tokenizer);
3. ``python -m e2c.rl.health`` on a folder without the run's metrics (it reported "no signal", exit 0).
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from bad_input import ROOT, assert_one_line_error, run
from conftest import arithmetic_rl_rows

from e2c.data.io import write_parquet
from e2c.rl.curriculum import BAND_KEYS, MAX_STAGES, STAGE_KEYS, TOP_KEYS

CPU = {"E2C_FORCE_CPU": "1", "CUDA_VISIBLE_DEVICES": "", "N_GPUS": "", "NNODES": "", "NODE_RANK": ""}
CHECK_ONLY = {**CPU, "E2C_CHECK_ONLY": "1"}


@pytest.fixture(scope="module")
def rl_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """RL rows of difficulty 1, 2 and 3."""
    return write_parquet(arithmetic_rl_rows(8), tmp_path_factory.mktemp("curriculum") / "rl.parquet")


# ------------------------------------------------------------------------------ 1. the curriculum file
# A good curriculum (every key set): each case changes one field of it.
BASE: dict[str, Any] = {
    "algo": "grpo",
    "stage": 2,
    "test_freq": 20,
    "difficulty_field": "difficulty",
    "val_budget_factor": 2,
    "overrides": ["actor_rollout_ref.rollout.temperature=0.6"],
    "stages": [
        {
            "name": "easy",
            "difficulty": {"min": 0, "max": 1},
            "max_response_length": 64,
            "overrides": ["actor_rollout_ref.rollout.n=2"],
        },
        {"name": "hard", "difficulty": [2, "Level 3"], "max_response_length": 128},
    ],
}
LEFT_OUT = object()  # the key is not in the file
S1 = "stage 1 ('easy'): "
ONE = {"name": "a", "max_response_length": 8}
# field (a path into BASE: keys and list indexes, dot-separated) -> [(case, bad value, what the line says)]
FIELDS: dict[str, list[tuple[str, Any, str]]] = {
    "algo": [
        ("unknown", "ppo", "algo must be one of grpo, dapo, got 'ppo'"),
        ("number", 1, "algo must be one of grpo, dapo, got 1"),
        ("bool", True, "algo must be one of grpo, dapo, got True"),
        ("empty-text", "", "algo must be one of grpo, dapo, got ''"),
        ("null", None, "algo is empty (null)"),
        ("list", ["grpo"], "algo must be one of grpo, dapo, got a list ['grpo']"),
        ("mapping", {"name": "grpo"}, "algo must be one of grpo, dapo, got a mapping"),
        ("upper-case", "GRPO", "algo must be one of grpo, dapo"),
    ],
    "stage": [
        ("three", 3, "stage must be 1 or 2 (the e2c_stage settings), got 3"),
        ("zero", 0, "stage must be 1 or 2"),
        ("bool", True, "stage must be 1 or 2 (the e2c_stage settings), got True"),
        ("text", "2", "stage must be 1 or 2 (the e2c_stage settings), got '2'"),
        ("float", 2.0, "stage must be 1 or 2 (the e2c_stage settings), got 2.0"),
        ("null", None, "stage is empty (null)"),
        ("list", [2], "stage must be 1 or 2 (the e2c_stage settings), got a list [2]"),
    ],
    "test_freq": [
        ("zero", 0, "test_freq must be >= 1, got 0"),
        ("negative", -5, "test_freq must be >= 1, got -5"),
        ("fraction", 1.5, "test_freq must be a whole number >= 1, got 1.5"),
        ("text", "20", "test_freq must be a whole number >= 1, got '20'"),
        ("bool", True, "test_freq must be a whole number >= 1, got True"),
        ("null", None, "test_freq is empty (null)"),
        ("list", [20], "test_freq must be a whole number >= 1, got a list [20]"),
        ("huge", 2**40, "test_freq must be in [1, 2147483647]"),
    ],
    "difficulty_field": [
        ("empty", "", "difficulty_field must be a field name (text), got ''"),
        ("blank", "  ", "difficulty_field must be a field name (text)"),
        ("number", 5, "difficulty_field must be a field name (text), got 5"),
        ("null", None, "difficulty_field is empty (null)"),
        ("list", ["difficulty"], "difficulty_field must be a field name (text), got a list"),
        ("mapping", {"a": 1}, "difficulty_field must be a field name (text), got a mapping"),
    ],
    "val_budget_factor": [
        ("below-one", 0.5, "val_budget_factor must be >= 1, got 0.5"),
        ("negative", -2, "val_budget_factor must be >= 1, got -2"),
        ("nan", float("nan"), "val_budget_factor must be a finite number >= 1, got nan"),
        ("inf", float("inf"), "val_budget_factor must be a finite number >= 1, got inf"),
        ("text", "2", "val_budget_factor must be a finite number >= 1, got '2'"),
        ("bool", True, "val_budget_factor must be a finite number >= 1, got True"),
        ("null", None, "val_budget_factor is empty (null)"),
        ("list", [2], "val_budget_factor must be a finite number >= 1, got a list [2]"),
        ("overflows-the-budget", 1e300, "its validation budget, max_response_length 64 x val_budget_factor"),
    ],
    "overrides": [
        ("text", "a=1", "overrides must be a list of Hydra overrides (key=value), got 'a=1'"),
        ("mapping", {"a": 1}, "overrides must be a list of Hydra overrides (key=value), got a mapping"),
        ("number-item", [1], "overrides[0] must be a Hydra override (key=value) as text, got 1"),
        ("null-item", [None], "overrides[0] must be a Hydra override (key=value) as text, got null"),
        ("empty-item", ["a=1", ""], "overrides[1] must be a Hydra override (key=value) as text, got ''"),
        ("nested-list", [["a=1"]], "overrides[0] must be a Hydra override (key=value) as text, got a list"),
        (
            "mapping-item",
            [{"a": 1}],
            "overrides[0] must be a Hydra override (key=value) as text, got a mapping",
        ),
        ("unknown-key", ["no_such.key=1"], "stage 'easy': unknown config key 'no_such.key'"),
        ("bad-value", ["actor_rollout_ref.rollout.n=0"], "actor_rollout_ref.rollout.n must be >= 1, got 0"),
    ],
    "stages": [
        ("left-out", LEFT_OUT, "needs a non-empty 'stages' list, got null"),
        ("null", None, "needs a non-empty 'stages' list, got null"),
        ("empty", [], "needs a non-empty 'stages' list, got a list []"),
        ("text", "easy", "needs a non-empty 'stages' list, got 'easy'"),
        ("mapping", ONE, "needs a non-empty 'stages' list, got a mapping"),
        ("number-item", [1], "stage 1 must be a mapping (name, max_response_length, difficulty, overrides)"),
        ("null-item", [None], "stage 1 must be a mapping"),
        ("list-item", [["name", "a"]], "stage 1 must be a mapping"),
        ("same-name", [ONE, ONE], "stage name 'a' is used twice"),
        ("too-many", [{**ONE, "name": f"s{i}"} for i in range(MAX_STAGES + 1)], f"at most {MAX_STAGES}"),
    ],
    "stages.0.name": [
        ("left-out", LEFT_OUT, "stage 1 needs a name"),
        ("null", None, "stage 1: name must be a folder name of letters, digits"),
        ("empty", "", "stage 1: name must be a folder name"),
        ("number", 5, "stage 1: name must be a folder name of letters, digits, '_', '.' and '-'"),
        ("slash", "a/b", "stage 1: name must be a folder name"),
        ("parent", "..", "stage 1: name must be a folder name"),
        ("space", "a b", "stage 1: name must be a folder name"),
        ("hydra-chars", "a=b,c", "stage 1: name must be a folder name"),
        ("too-long", "x" * 101, "stage 1: name must be a folder name"),
        ("list", ["easy"], "stage 1: name must be a folder name"),
    ],
    "stages.0.max_response_length": [
        ("left-out", LEFT_OUT, "stage 1 ('easy') needs max_response_length"),
        ("zero", 0, S1 + "max_response_length must be >= 1, got 0"),
        ("negative", -8, S1 + "max_response_length must be >= 1, got -8"),
        ("fraction", 8.5, S1 + "max_response_length must be a whole number >= 1, got 8.5"),
        ("text", "8k", S1 + "max_response_length must be a whole number >= 1, got '8k'"),
        ("null", None, S1 + "max_response_length must be a whole number >= 1, got null"),
        ("bool", True, S1 + "max_response_length must be a whole number >= 1, got True"),
        ("list", [8], S1 + "max_response_length must be a whole number >= 1, got a list"),
        ("huge", 2**31, S1 + "max_response_length must be in [1, 2147483647]"),
    ],
    "stages.0.difficulty": [
        ("text", "easy", S1 + "difficulty must be a list of values or a mapping {min, max}"),
        (
            "number",
            5,
            S1 + "difficulty must be a list of values or a mapping {min, max} (or null: every row)",
        ),
        ("bool", True, S1 + "difficulty must be a list of values or a mapping"),
        ("unknown-key", {"low": "abc"}, S1 + "difficulty: unknown key 'low'; valid keys: min, max"),
        ("min-above-max", {"min": 3, "max": 1}, S1 + "difficulty: min 3 is above max 1"),
        ("null-item", [None], S1 + "difficulty[0] must be a difficulty value (a number or text), got null"),
        ("list-item", [[1]], S1 + "difficulty[0] must be a difficulty value"),
        ("mapping-item", [1, {"a": 1}], S1 + "difficulty[1] must be a difficulty value"),
        ("bool-item", [True], S1 + "difficulty[0] must be a difficulty value"),
        ("nan-item", [float("nan")], S1 + "difficulty[0] must be a difficulty value"),
        ("no-rows", {"min": 9}, "stage 'easy': no training row has extra_info.difficulty in {min: 9}"),
    ],
    "stages.0.difficulty.min": [
        ("text", "abc", S1 + "difficulty.min must be a finite number (or null: open), got 'abc'"),
        ("number-text", "1", S1 + "difficulty.min must be a finite number (or null: open), got '1'"),
        ("bool", True, S1 + "difficulty.min must be a finite number"),
        ("nan", float("nan"), S1 + "difficulty.min must be a finite number (or null: open), got nan"),
        ("inf", float("-inf"), S1 + "difficulty.min must be a finite number"),
        ("list", [0], S1 + "difficulty.min must be a finite number (or null: open), got a list"),
    ],
    "stages.0.difficulty.max": [
        ("text", "abc", S1 + "difficulty.max must be a finite number (or null: open), got 'abc'"),
        ("mapping", {"v": 1}, S1 + "difficulty.max must be a finite number (or null: open), got a mapping"),
        ("inf", float("inf"), S1 + "difficulty.max must be a finite number"),
    ],
    "stages.0.overrides": [
        ("text", "a=1", S1 + "overrides must be a list of Hydra overrides (key=value), got 'a=1'"),
        ("number-item", [8], S1 + "overrides[0] must be a Hydra override (key=value) as text, got 8"),
        ("null-item", [None], S1 + "overrides[0] must be a Hydra override (key=value) as text, got null"),
        ("mapping", {"n": 2}, S1 + "overrides must be a list of Hydra overrides"),
    ],
    # keys the loader does not know (a typo would otherwise be ignored)
    "stagse": [("top-level", [ONE], "unknown key 'stagse'; valid keys: " + ", ".join(TOP_KEYS))],
    "stages.0.budget": [("in-a-stage", 8, S1 + "unknown key 'budget'; valid keys: " + ", ".join(STAGE_KEYS))],
    "stages.0.difficulty.above": [
        ("in-a-band", 2, "unknown key 'above'; valid keys: " + ", ".join(BAND_KEYS))
    ],
}
# Not a curriculum as a whole: file name -> (its bytes, what the line says).
FILES: dict[str, tuple[bytes, str]] = {
    "not-utf8": (b"algo: grpo\nstages:\n  - name: \xff\xfe\n", "not UTF-8 text (byte 29 is 0xff)"),
    "latin-1": ("stages:\n  - name: Zoë\n".encode("latin-1"), "not UTF-8 text"),
    "utf-16": ("stages: []\n".encode("utf-16"), "not UTF-8 text"),
    "empty": (b"", "is empty; a curriculum needs a 'stages' list"),
    "only-comments": (b"# algo: grpo\n", "is empty"),
    "yaml-syntax": (b"stages: [\n  - name: a\n", "not valid YAML at line 2, column 3"),
    "yaml-tab": (b"stages:\n\t- name: a\n", "not valid YAML at line 2, column 1"),
    "yaml-unclosed-quote": (b"algo: 'grpo\n", "not valid YAML"),
    "nul-byte": (b"algo: grpo\x00\n", "not valid YAML"),
    "python-tag": (b"!!python/object/apply:os.system ['true']\n", "not valid YAML at line 1"),
    "top-level-list": (b"- name: a\n  max_response_length: 8\n", "expected a mapping at the top level"),
    "top-level-text": (
        b"keep me\n",
        "expected a mapping at the top level (algo, stages, ...), got 'keep me'",
    ),
    "top-level-number": (b"3\n", "expected a mapping at the top level"),
    "deeply-nested": (b"stages: " + b"[" * 100_000, "nested too deeply"),
    "a-megabyte": (b"# padding\n" * 110_000, "1,100,000 bytes is not a curriculum config"),
}


def _with(cfg: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """``cfg`` with the field at ``path`` (``stages.0.name``) set to ``value`` (:data:`LEFT_OUT`: removed)."""
    out = copy.deepcopy(cfg)
    *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
    node: Any = out
    for p in parents:
        node = node[p]
    if value is LEFT_OUT:
        node.pop(last, None)
    else:
        node[last] = value
    return out


def _curriculum(path: Path, data: Path, out: Path) -> subprocess.CompletedProcess:
    args = ["--config", str(path), "--model", "tiny", "--train-data", str(data), "--val-data", str(data)]
    return run("-m", "e2c.rl.curriculum", *args, "--output-dir", str(out), env=CHECK_ONLY)


FIELD_CASES = [(field, case, value, needle) for field, rows in FIELDS.items() for case, value, needle in rows]
FILE_CASES = list(FILES)


def test_the_base_curriculum_passes_its_checks_cpu(tmp_path: Path, rl_data: Path) -> None:
    """Each case below is bad for its own field alone: the file it starts from passes every check."""
    path = tmp_path / "curriculum.yaml"
    path.write_text(yaml.safe_dump(BASE))
    r = _curriculum(path, rl_data, tmp_path / "out")
    assert r.returncode == 0 and r.stderr.strip() == "checks passed", r.stderr[-2000:]


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [pytest.param(f, v, n, id=f"{f}={c}") for f, c, v, n in FIELD_CASES],
)
def test_a_bad_curriculum_field_is_one_line_cpu(
    field: str, value: Any, needle: str, tmp_path: Path, rl_data: Path
) -> None:
    path = tmp_path / "curriculum.yaml"
    path.write_text(yaml.safe_dump(_with(BASE, field, value)))
    r = _curriculum(path, rl_data, tmp_path / "out")
    assert_one_line_error(r, str(path), needle)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("case", FILE_CASES)
def test_a_file_that_is_no_curriculum_is_one_line_cpu(case: str, tmp_path: Path, rl_data: Path) -> None:
    content, needle = FILES[case]
    path = tmp_path / f"{case}.yaml"
    path.write_bytes(content)
    r = _curriculum(path, rl_data, tmp_path / "out")
    assert_one_line_error(r, str(path), needle)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda p: p.mkdir(), "is a folder; give a file"),
        (lambda p: None, "does not exist"),
    ],
    ids=["a-folder", "missing"],
)
def test_a_config_path_that_is_no_file_is_one_line_cpu(
    make, needle: str, tmp_path: Path, rl_data: Path
) -> None:
    path = tmp_path / "curriculum.yaml"
    make(path)
    assert_one_line_error(_curriculum(path, rl_data, tmp_path / "out"), str(path), needle)


def test_the_generated_cases_cover_every_key_cpu() -> None:
    """A key the loader accepts has bad values in the table (a new key gets them, or this fails)."""
    fields = {f.split(".")[-1] for f in FIELDS}
    assert set(TOP_KEYS) | set(STAGE_KEYS) | set(BAND_KEYS) <= fields


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (
            b"stages:\n  - name: easy\n    max_response_length: 64\n    difficulty: {low: abc}\n",
            "unknown key 'low'",
        ),
        (
            b"stages:\n  - name: easy\n    max_response_length: 64\n    difficulty: {min: abc}\n",
            "difficulty.min",
        ),
        (b"stages:\n  - name: \xff\n    max_response_length: 64\n", "not UTF-8 text"),
    ],
    ids=["text-bound-key", "text-bound", "not-utf8"],
)
def test_the_script_refuses_the_reported_files_in_one_line_cpu(
    content: bytes, needle: str, tmp_path: Path, rl_data: Path
) -> None:
    """The reported command, as a real process: ``CURRICULUM=<file> bash scripts/e2c_curriculum.sh``."""
    path = tmp_path / "curriculum.yaml"
    path.write_bytes(content)
    env = {**CHECK_ONLY, "CURRICULUM": str(path), "TRAIN_DATA": str(rl_data), "VAL_DATA": str(rl_data)}
    env["OUTPUT_DIR"] = str(tmp_path / "out")
    r = run("scripts/e2c_curriculum.sh", "--model", "tiny", env=env, real=True)
    line = assert_one_line_error(r, str(path), needle)
    assert "unexpected" not in line


# ------------------------------------------------------------------------------ 2. the interactive demo
@pytest.mark.parametrize("encoding", [None, "utf-8:strict"], ids=["default", "strict-stdin"])
def test_interactive_skips_a_line_that_is_not_utf8_cpu(encoding: str | None) -> None:
    """``printf '\\xff\\xfe\\n' | python example_interactive.py``: the line is refused in one line and the
    session goes on (here to ``q``), exit 0; whatever the stdin's error handler (PYTHONIOENCODING)."""
    env = {**os.environ, **CPU, "HF_HUB_OFFLINE": "1"}
    env.pop("PYTHONIOENCODING", None)
    if encoding:
        env["PYTHONIOENCODING"] = encoding
    r = subprocess.run(
        [sys.executable, "example_interactive.py", "--model", "tiny", "--backend", "hf"],
        input=b"\xff\xfe\nq\n",
        capture_output=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    out, err = r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")
    assert r.returncode == 0, err[-2000:]
    assert "Traceback" not in out + err and "unexpected" not in err, err[-2000:]
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: that input line is not UTF-8 text"), err[-2000:]
    assert r"b'\xff\xfe'" in lines[0]
    assert out.rstrip().endswith("bye")


# ------------------------------------------------------------------------------ 3. the RL health report
@pytest.mark.parametrize("sync", [False, True], ids=["empty", "sync-only"])
def test_health_refuses_a_folder_without_the_runs_metrics_cpu(sync: bool, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    if sync:
        (run_dir / "rollout_sync.jsonl").write_text('{"global_steps": 1, "weight_rel_l2": 0.1}\n')
    r = run("-m", "e2c.rl.health", str(run_dir))
    assert_one_line_error(r, f"run folder {run_dir} has no metrics.jsonl", "rollout_sync.jsonl")
    assert r.stdout == ""


def test_health_reads_a_resumed_runs_history_alone_cpu(tmp_path: Path) -> None:
    """metrics_history.jsonl (a resumed run's earlier launches) is a run's metrics too."""
    (tmp_path / "metrics_history.jsonl").write_text('{"step": 1, "data": {"health/train_acc": 0.5}}\n')
    r = run("-m", "e2c.rl.health", str(tmp_path))
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert r.stdout.splitlines()[1].startswith("1\t")


# ------------------------------------------------------------------------------ 4. a script's fixed flag
@pytest.fixture(scope="module")
def sft_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from e2c.data.synthetic.generate import generate, rows_by_split

    sft = rows_by_split(generate(12, seed=0)[0])["sft"]
    return write_parquet(sft, tmp_path_factory.mktemp("sft") / "sft.parquet")


@pytest.mark.parametrize(
    "args",
    [["--algo", "grpo"], ["--algo=grpo"], ["--alg", "grpo"], ["--stage", "1", "--algo", "ppo"]],
    ids=["algo-grpo", "algo=grpo", "abbreviated", "not-an-algo"],
)
def test_the_dapo_script_refuses_another_algo_cpu(args: list[str], tmp_path: Path, rl_data: Path) -> None:
    """``bash scripts/e2c_dapo.sh --dry-run --algo grpo`` printed GRPO's commands, exit 0."""
    env = {**CPU, "MODEL_PATH": "tiny", "TRAIN_DATA": str(rl_data), "VAL_DATA": str(rl_data)}
    env["OUTPUT_DIR"] = str(tmp_path / "out")
    r = run("scripts/e2c_dapo.sh", "--dry-run", *args, env=env)
    assert_one_line_error(r, "scripts/e2c_dapo.sh runs --algo dapo, so --algo", "run scripts/e2c_rl.sh")
    assert r.stdout == "" and not (tmp_path / "out").exists()


@pytest.mark.slow  # a launcher or script as real processes, verl imported in each: ~10-50 s on 2 cores
def test_the_dapo_script_takes_algo_dapo_cpu(tmp_path: Path, rl_data: Path) -> None:
    env = {**CPU, "MODEL_PATH": "tiny", "TRAIN_DATA": str(rl_data), "VAL_DATA": str(rl_data)}
    env["OUTPUT_DIR"] = str(tmp_path / "out")
    r = run("scripts/e2c_dapo.sh", "--dry-run", "--stage", "1", "--algo=dapo", env=env, real=True)
    assert r.returncode == 0 and r.stderr == "", r.stderr[-2000:]
    assert "--config-name=e2c_dapo" in r.stdout


@pytest.mark.parametrize("args", [["--mode", "sft"], ["--mode=sft"]], ids=["mode-sft", "mode=sft"])
def test_the_ef_sft_script_refuses_another_mode_cpu(args: list[str], tmp_path: Path, sft_data: Path) -> None:
    env = {**CPU, "MODEL_PATH": "tiny", "TRAIN_DATA": str(sft_data), "VAL_DATA": "none"}
    env["OUTPUT_DIR"] = str(tmp_path / "out")
    r = run("scripts/ef-sft.sh", "--dry-run", *args, env=env)
    assert_one_line_error(r, "scripts/ef-sft.sh runs --mode ef-sft, so --mode 'sft'", "scripts/e2c_sft.sh")


def test_the_fixed_flag_mirror_matches_the_scripts_cpu() -> None:
    """bad_input.FIXED_FLAGS (what the in-process mirror refuses) is each script's e2c_fixed_flag call."""
    import shlex

    import bad_input

    for name, (flag, shortest, value) in bad_input.FIXED_FLAGS.items():
        text = (ROOT / "scripts" / name).read_text().replace("\\\n", " ")
        [call] = [ln for ln in text.splitlines() if ln.startswith("e2c_fixed_flag ")]
        assert shlex.split(call)[1:5] == [f"scripts/{name}", flag, shortest, value], call


# ------------------------------------------------------------------------------ 5. the Slurm script
SBATCH = "scripts/slurm_e2c.sbatch"
SBATCH_CASES: dict[str, tuple[list[str], dict[str, str], str]] = {
    "grpo-stage-3": (
        ["grpo", "--stage", "3"],
        {},
        "--stage: invalid choice: '3' (choose from '1', '2', 'both')",
    ),
    "dapo-stage-0": (["dapo", "--stage", "0"], {}, "invalid choice: '0' (choose from '1', '2', 'both')"),
    "dapo-algo-grpo": (["dapo", "--algo", "grpo"], {}, "scripts/e2c_dapo.sh runs --algo dapo"),
    "ef-sft-mode-sft": (["ef-sft", "--mode=sft"], {}, "scripts/ef-sft.sh runs --mode ef-sft"),
    "sft-steps-0": (["sft", "--steps", "0"], {}, "--steps must be >= 1, got 0"),
    "grpo-unknown-flag": (["grpo", "--stages", "1"], {}, "unrecognized arguments: --stages"),
    "grpo-unknown-tracker": (["grpo", "--logger", "tensorbord"], {}, "unknown tracker"),
    "grpo-output-dir-both-stages": (["grpo", "--output-dir", "/tmp/x"], {}, "names one stage's folder"),
    "curriculum-steps-text": (
        ["curriculum", "--steps", "x"],
        {},
        "--steps must be a whole number >= 0, got x",
    ),
    "curriculum-file": (["curriculum", "--config", "{bad_yaml}"], {}, "difficulty: unknown key 'low'"),
    "ray-auth-mode": (["grpo"], {"RAY_AUTH_MODE": "tokn"}, "RAY_AUTH_MODE must be token or disabled"),
    "n-gpus-text": (["grpo"], {"N_GPUS": "two"}, "N_GPUS must be a whole number"),
    "steps-env-zero": (
        ["sft"],
        {"TOTAL_TRAINING_STEPS": "0"},
        "TOTAL_TRAINING_STEPS must be a whole number >= 1",
    ),
    "slurm-gpus-text": (["grpo"], {"SLURM_GPUS_ON_NODE": "gpu:8"}, "GPUS_PER_NODE must be a whole number"),
}


@pytest.mark.parametrize("case", list(SBATCH_CASES))
def test_the_sbatch_dry_run_refuses_bad_stage_arguments_cpu(case: str, tmp_path: Path) -> None:
    """``bash scripts/slurm_e2c.sbatch --dry-run grpo --stage 3`` printed the commands, exit 0 (and a real
    job failed once its nodes were up): the stage's arguments are read by its parser before anything."""
    args, env, needle = SBATCH_CASES[case]
    bad_yaml = tmp_path / "curriculum.yaml"
    bad_yaml.write_text("stages:\n  - name: easy\n    max_response_length: 64\n    difficulty: {low: abc}\n")
    argv = [a.format(bad_yaml=bad_yaml) for a in args]
    skip = ("GPUS_PER_NODE", "N_GPUS", "RAY_AUTH_MODE", "TOTAL_TRAINING_STEPS")
    full_env = {k: v for k, v in os.environ.items() if k not in skip}
    r = run(SBATCH, "--dry-run", *argv, env={**full_env, **env}, replace_env=True)
    assert_one_line_error(r, needle)
    assert r.stdout == ""  # refused before the first command is printed


def test_the_sbatch_dry_run_takes_good_stage_arguments_cpu() -> None:
    r = run(SBATCH, "--dry-run", "dapo", "--stage", "2", "--algo", "dapo", "--", "trainer.save_freq=5")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert r.stdout.splitlines()[-1].endswith(
        "scripts/e2c_dapo.sh --stage 2 --algo dapo -- trainer.save_freq=5"
    )


@pytest.mark.slow  # a real ray head starts (~10-20 s on 2 cores)
def test_a_stage_refused_after_the_ray_head_started_is_one_line_cpu(tmp_path: Path) -> None:
    """A refusal only the stage itself finds (its training data is missing) comes after ray started: ray's
    shutdown lines go to stdout, stderr has the stage's one line. ``CUDA_VISIBLE_DEVICES=`` (no GPU) used to
    stop ``ray start`` with a traceback, and the job then waited RAY_WAIT_S for a head that had died."""
    env = {**CPU, "GPUS_PER_NODE": "0", "RAY_PORT": "6397", "RAY_WAIT_S": "60", "RAY_AUTH_MODE": "disabled"}
    env["TRAIN_DATA"] = str(tmp_path / "missing.parquet")
    args = ["grpo", "--stage", "1", "--model", "tiny", "--steps", "1", "--output-dir", str(tmp_path / "out")]
    r = run(SBATCH, *args, env=env, timeout=180)
    assert_one_line_error(r, "training data", "missing.parquet does not exist")
    assert "[e2c-cluster] 1 of 1 node(s) up" in r.stdout
    assert "Traceback" not in r.stdout
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------ 6. the GPU recipe's check
def test_the_recipe_checks_progress_is_not_beside_its_error_cpu() -> None:
    """``DRY_RUN=1 N_GPUS=7 bash scripts/gpu_recipe.sh``: the check printed its first steps' lines on stderr,
    then the error line; the progress is stdout's now."""
    env = {**os.environ, "DRY_RUN": "1", "N_GPUS": "7", "NNODES": "1"}
    r = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu_recipe.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert_one_line_error(r, "SFT at 1x7 GPUs: data.train_batch_size=160 does not split over 7")
    assert "[recipe-check] data:" in r.stdout and "+ " not in r.stdout
