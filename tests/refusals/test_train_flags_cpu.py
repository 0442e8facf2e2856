"""Bad input to the training entry points: scripts/e2c_sft.sh, ef-sft.sh, e2c_rl.sh, e2c_dapo.sh and
e2c_curriculum.sh refuse it in one ``error:`` line, exit 2, before anything is launched, and leave every file
that was there (data, an earlier run's output, the repository's outputs/) as it was.

Each case runs the script as a user would; none gets as far as starting verl (a refusal takes seconds).
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import bad_input
import pytest
from conftest import arithmetic_rl_rows, run_at_most

from e2c.data.io import write_parquet
from e2c.data.synthetic.generate import generate, rows_by_split

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Good and broken data files, a model folder without weights, and an earlier run's output."""
    d = tmp_path_factory.mktemp("badinput")
    rl = arithmetic_rl_rows(8)
    sft = rows_by_split(generate(12, seed=0)[0])["sft"]
    f = {
        "rl": write_parquet(rl, d / "rl.parquet"),
        "noprompt": write_parquet(
            [{k: v for k, v in r.items() if k != "prompt"} for r in rl], d / "noprompt.parquet"
        ),
        "sft": write_parquet(sft, d / "sft.parquet"),
        "nomessages": write_parquet(
            [{k: v for k, v in r.items() if k != "messages"} for r in sft], d / "nomsg.parquet"
        ),
        "corrupt": d / "corrupt.parquet",
        "csv": d / "rl.csv",
        "jsonl": d / "sft.jsonl",
        "noweights": d / "noweights",
        "run": d / "run",
        "file": d / "a_file",
    }
    f["corrupt"].write_bytes(b"not a parquet file")
    f["csv"].write_text("prompt,answer\nq,1\n")
    f["jsonl"].write_text('{"messages": []}\n')
    f["noweights"].mkdir()
    (f["noweights"] / "config.json").write_text('{"model_type": "qwen3"}')
    f["run"].mkdir()
    (f["run"] / "metrics.jsonl").write_text('{"step": 1, "data": {"x": 1}}\n')
    f["file"].write_text("keep me\n")
    return f


RL = {"MODEL_PATH": "tiny", "TRAIN_DATA": "{rl}", "VAL_DATA": "{rl}", "OUTPUT_DIR": "{run}"}
SFT = {"MODEL_PATH": "tiny", "TRAIN_DATA": "{sft}", "VAL_DATA": "none", "OUTPUT_DIR": "{run}"}
CUR = {"TRAIN_DATA": "{rl}", "VAL_DATA": "{rl}", "OUTPUT_DIR": "{run}"}
# (script, environment on top of the base one (None drops a variable), arguments, text the error line holds)
CASES = {
    # --- the list
    "rl-stage2-missing-stage1-with-model": (
        "e2c_rl.sh",
        RL,
        ["--stage", "2", "--stage1-dir", "{run}/MISSING"],
        "both pick stage 2's start model",
    ),
    "rl-stage2-missing-stage1": (
        "e2c_rl.sh",
        {**RL, "MODEL_PATH": None},
        ["--stage", "2", "--stage1-dir", "{run}/MISSING"],
        "no finished checkpoint in {run}/MISSING: the folder does not exist",
    ),
    "rl-steps-negative": (
        "e2c_rl.sh",
        {**RL, "TOTAL_TRAINING_STEPS": "-1"},
        [],
        "TOTAL_TRAINING_STEPS must be a whole number >= 1, got '-1'",
    ),
    "rl-steps-zero": (
        "e2c_rl.sh",
        {**RL, "TOTAL_TRAINING_STEPS": "0"},
        [],
        "TOTAL_TRAINING_STEPS must be a whole number >= 1, got '0'",
    ),
    "rl-unknown-key": ("e2c_rl.sh", RL, ["--", "nonexistent.key=1"], "unknown config key 'nonexistent.key'"),
    "rl-bad-float": (
        "e2c_rl.sh",
        RL,
        ["--", "actor_rollout_ref.actor.optim.lr=abc"],
        "actor_rollout_ref.actor.optim.lr: 'abc' is not a float",
    ),
    "rl-missing-prompt-column": (
        "e2c_rl.sh",
        {**RL, "TRAIN_DATA": "{noprompt}"},
        [],
        "{noprompt} has no column 'prompt'",
    ),
    "rl-unknown-flag": ("e2c_rl.sh", RL, ["--bogus"], "unrecognized arguments: --bogus"),
    "rl-unknown-tracker": (
        "e2c_rl.sh",
        RL,
        ["--logger", "console,wandbb"],
        "--logger 'wandbb': unknown tracker",
    ),
    "sft-bad-float": ("e2c_sft.sh", SFT, ["optim.lr=abc"], "optim.lr: 'abc' is not a float"),
    "sft-unknown-key": (
        "e2c_sft.sh",
        SFT,
        ["nonexistent.key=1"],
        "to add a new key write +nonexistent.key=1",
    ),
    "sft-steps-negative": (
        "e2c_sft.sh",
        {**SFT, "TOTAL_TRAINING_STEPS": "-1"},
        [],
        "TOTAL_TRAINING_STEPS must be a whole number >= 1, got '-1'",
    ),
    # --- beyond it
    "rl-corrupt-parquet": ("e2c_rl.sh", {**RL, "TRAIN_DATA": "{corrupt}"}, [], "not a readable parquet file"),
    "rl-missing-data": (
        "e2c_rl.sh",
        {**RL, "TRAIN_DATA": "{run}/none.parquet"},
        [],
        "{run}/none.parquet does not exist",
    ),
    "rl-steps-not-a-number": (
        "e2c_rl.sh",
        {**RL, "TOTAL_TRAINING_STEPS": "ten"},
        [],
        "TOTAL_TRAINING_STEPS must be a whole number",
    ),
    "rl-nnodes-not-a-number": ("e2c_rl.sh", {**RL, "NNODES": "two"}, [], "NNODES must be a whole number"),
    "rl-model-no-weights": ("e2c_rl.sh", {**RL, "MODEL_PATH": "{noweights}"}, [], "but no weights"),
    "rl-output-is-a-file": ("e2c_rl.sh", {**RL, "OUTPUT_DIR": "{file}"}, [], "exists and is not a folder"),
    "rl-output-existing-unwritable": (
        "e2c_rl.sh",
        {**RL, "OUTPUT_DIR": "/sys/kernel"},  # the parent of the stage folders
        [],
        "--root-dir folder /sys/kernel: cannot write in /sys/kernel",
    ),
    "rl-data-is-a-folder": (
        "e2c_rl.sh",
        {**RL, "TRAIN_DATA": "{noweights}"},
        [],
        "is a folder; pass the data file",
    ),
    "rl-stage1-dir-on-stage1": (
        "e2c_rl.sh",
        RL,
        ["--stage1-dir", "{run}"],
        "--stage1-dir is the start of --stage 2",
    ),
    "rl-negative-budget": ("e2c_rl.sh", RL, ["--explore-budget", "-5"], "--explore-budget must be 0"),
    "rl-unknown-e2c-key": (
        "e2c_rl.sh",
        RL,
        ["--", "+e2c.explore_coef=2"],
        "unknown key e2c.explore_coef in the e2c config group; valid keys: e2c.algo",
    ),
    "rl-unknown-adv-rule": (
        "e2c_rl.sh",
        RL,
        ["--", "e2c.explore_adv_rule=papers"],
        "unknown e2c.explore_adv_rule 'papers' (did you mean 'paper'?); registered rules: paper",
    ),
    "rl-coef-not-finite": ("e2c_rl.sh", RL, ["--explore-coef", "inf"], "--explore-adv-coef must be a finite"),
    "rl-bad-bool": ("e2c_rl.sh", RL, ["--", "trainer.val_before_train=maybe"], "is not a boolean"),
    "dapo-unknown-key": (
        "e2c_dapo.sh",
        RL,
        ["--", "nonexistent.key=1"],
        "unknown config key 'nonexistent.key'",
    ),
    "dapo-algo-env": ("e2c_rl.sh", {**RL, "E2C_ALGO": "ppo"}, [], "invalid choice: 'ppo'"),
    "sft-missing-messages-column": (
        "e2c_sft.sh",
        {**SFT, "TRAIN_DATA": "{nomessages}"},
        [],
        "{nomessages} has no column 'messages'",
    ),
    "sft-jsonl-data": (
        "e2c_sft.sh",
        {**SFT, "TRAIN_DATA": "{jsonl}"},
        [],
        "the trainer reads .parquet files",
    ),
    "sft-node-rank": ("e2c_sft.sh", {**SFT, "NODE_RANK": "x"}, [], "NODE_RANK must be a whole number"),
    "sft-output-is-a-file": ("e2c_sft.sh", {**SFT, "OUTPUT_DIR": "{file}"}, [], "exists and is not a folder"),
    "sft-unknown-flag": ("e2c_sft.sh", SFT, ["--bogus"], "unrecognized argument '--bogus'"),
    "ef-sft-rows-without-scope": ("ef-sft.sh", SFT, [], "{sft} has no column 'loss_scope'"),
    "sft-bad-int": ("e2c_sft.sh", SFT, ["data.max_length=long"], "data.max_length: 'long' is not an integer"),
    "curriculum-steps-negative": (
        "e2c_curriculum.sh",
        CUR,
        ["--model", "tiny", "--steps", "-1"],
        "--steps must be >= 0, got -1",
    ),
    "rl-overlong-buffer-longer-than-responses": (
        "e2c_rl.sh",
        RL,
        ["--", "data.max_response_length=24"],  # the CPU preset's buffer is 32 tokens
        "overlong penalty needs 0 < reward.reward_kwargs.overlong_buffer_cfg.len <= "
        "reward.reward_kwargs.max_resp_len; got len=32, max_resp_len=24: lower",
    ),
    "curriculum-unknown-key": (
        "e2c_curriculum.sh",
        CUR,
        ["--model", "tiny", "--", "nonexistent.key=1"],
        "stage 'easy': unknown config key",
    ),
    "curriculum-missing-prompt-column": (
        "e2c_curriculum.sh",
        {**CUR, "TRAIN_DATA": "{noprompt}"},
        ["--model", "tiny"],
        "has no column 'prompt'",
    ),
}


def _snapshot(files_root: Path, repo_outputs: Path) -> dict[str, object]:
    """Every file under ``files_root`` with its bytes (folders as None), and every path under the
    repository's ``outputs/`` with its size and modification time (a checkout may keep gigabytes of
    quickstart checkpoints there: reading them twice per case took minutes)."""
    snap: dict[str, object] = {}
    for p in sorted(files_root.rglob("*")):
        snap[str(p)] = p.read_bytes() if p.is_file() else None
    for p in sorted(repo_outputs.rglob("*")) if repo_outputs.is_dir() else []:
        st = p.stat()
        snap[str(p)] = (st.st_size, st.st_mtime_ns) if p.is_file() else None
    return snap


@pytest.mark.parametrize("case", list(CASES))
def test_bad_input_is_refused_in_one_line(case: str, files: dict[str, Path]) -> None:
    script, env_extra, args, expected = CASES[case]
    fill = {k: str(v) for k, v in files.items()}
    env = {
        k: v for k, v in os.environ.items() if k not in ("MODEL_PATH", "TRAIN_DATA", "VAL_DATA", "OUTPUT_DIR")
    }
    env.update(CUDA_VISIBLE_DEVICES="", E2C_FORCE_CPU="1")
    for k, v in env_extra.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v.format(**fill)
    argv = [a.replace("{run}", fill["run"]) for a in args]
    before = _snapshot(files["run"].parent, ROOT / "outputs")
    proc = bad_input.run(f"scripts/{script}", *argv, env=env, replace_env=True)
    what = f"{script} {shlex.join(argv)}"
    assert proc.returncode == 2, (
        f"{what}: exit {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    )
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), f"{what}:\n{proc.stderr[-3000:]}"
    assert expected.format(**fill) in lines[0], lines[0]
    assert "Traceback" not in proc.stdout + proc.stderr
    assert _snapshot(files["run"].parent, ROOT / "outputs") == before, f"{what} changed files"


SCRIPTS = [
    "e2c_rl.sh",
    "e2c_dapo.sh",
    "e2c_sft.sh",
    "ef-sft.sh",
    "e2c_curriculum.sh",
    *bad_input.PASS_THROUGH,
]


def _mirror_case(script: str, files: dict[str, Path]) -> tuple[dict[str, str], list[str]]:
    """An environment with every variable the mirror maps set, and the arguments (a dry run; the curriculum
    has none: a curriculum file that is not one names what it read)."""
    fill = {k: str(v) for k, v in files.items()}
    base = CUR if script == "e2c_curriculum.sh" else SFT if "sft" in script else RL
    env = {**os.environ, **{k: v.format(**fill) for k, v in base.items()}, "TOTAL_TRAINING_STEPS": "3"}
    env.update(CUDA_VISIBLE_DEVICES="", E2C_FORCE_CPU="1", NNODES="1", N_GPUS="1")
    if script in bad_input.PASS_THROUGH:  # its own arguments, as given: a bad one names the same flag
        return env, ["--limit", "-3"] if script == "eval.sh" else ["--fast", "--out", fill["file"]]
    if script == "e2c_curriculum.sh":
        env["CURRICULUM"] = fill["file"]
        return env, []
    env["OUTPUT_DIR"] = str(files["run"].parent / f"mirror-{script}")
    return env, ["--dry-run"]


@pytest.fixture(scope="module")
def real_scripts(files: dict[str, Path]) -> dict[str, tuple[int, str, str]]:
    """Each training script run for real with its mirror case, two at a time (exit, stdout, stderr)."""
    commands = {}
    for script in SCRIPTS:
        env, args = _mirror_case(script, files)
        commands[script] = {"args": ["bash", f"scripts/{script}", *args], "cwd": ROOT, "env": env}
    return run_at_most(commands)


@pytest.mark.slow  # a launcher or script as real processes, verl imported in each: ~10-50 s on 2 cores
@pytest.mark.parametrize("script", SCRIPTS)
def test_the_script_mirror_matches_the_scripts(
    script: str, files: dict[str, Path], real_scripts: dict
) -> None:
    """The refusal cases run a training script as the Python launcher it runs (bad_input.script_command);
    the real script, with every variable the mirror maps set, prints the same (dry-run command, or refusal)."""
    env, args = _mirror_case(script, files)
    code, out, err = real_scripts[script]
    mirrored = bad_input.run(f"scripts/{script}", *args, env=env, replace_env=True)
    assert code == mirrored.returncode, (err[-2000:], mirrored.stderr[-2000:])
    assert mirrored.stderr.strip() == err.strip()
    if script not in bad_input.PASS_THROUGH:  # those print the environment set-up's line on stdout first
        assert mirrored.stdout == out
    # the curriculum file, EF-SFT's data (no loss_scope column) and the pass-through cases are refused
    refused = ("e2c_curriculum.sh", "ef-sft.sh", *bad_input.PASS_THROUGH)
    assert code == (2 if script in refused else 0), err[-2000:]


@pytest.mark.slow  # a launcher or script as real processes, verl imported in each: ~10-50 s on 2 cores
@pytest.mark.parametrize("script", ["e2c_rl.sh", "e2c_sft.sh"])
def test_hydra_files_go_to_the_run_folder(script: str, files: dict[str, Path], tmp_path: Path) -> None:
    """verl's Hydra writes its config and log under hydra.run.dir: the launcher points it into the run
    folder, so nothing lands in the repository's outputs/ (a real run with the tiny model confirmed it)."""
    env = {
        **os.environ,
        **{
            k: v.format(**{k2: str(v2) for k2, v2 in files.items()})
            for k, v in (RL if script == "e2c_rl.sh" else SFT).items()
        },
    }
    env.update(CUDA_VISIBLE_DEVICES="", E2C_FORCE_CPU="1", OUTPUT_DIR=str(tmp_path / "out"))
    proc = subprocess.run(
        ["bash", str(ROOT / "scripts" / script), "--dry-run"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    cmd = shlex.split(proc.stdout.strip().splitlines()[-1])
    run_dirs = [a.split("=", 1)[1] for a in cmd if a.startswith("hydra.run.dir=")]
    # RL: OUTPUT_DIR is the parent of the stage folders; the last command printed is stage 2's.
    run_dir = tmp_path / "out" / ("stage2-main" if script == "e2c_rl.sh" else "")
    assert len(run_dirs) == 1 and run_dirs[0].startswith(str(run_dir / "hydra") + "/"), cmd


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("actor_rollout_ref.actor.optim.lrr=1e-5", "did you mean actor_rollout_ref.actor.optim.lr?"),
        ("optim.lr=1e-5", "did you mean critic.optim.lr or actor_rollout_ref.actor.optim.lr?"),
        ("data.max_response_length=${nope}", "'data.max_response_length=${nope}' does not resolve"),
        ("e2c_stage=stage9", "Could not find 'e2c_stage/stage9'"),
        ("trainer", "malformed Hydra override"),
        ("trainer.val_before_train=maybe", "'maybe' is not a boolean"),
    ],
)
def test_overrides_composed_in_process(override: str, message: str) -> None:
    """The checks behind the launchers' one-line refusals (in-process: the scripts' cases above cover the
    path from the command line)."""
    from e2c.core.errors import UserError
    from e2c.launch.checks import compose_checked

    with pytest.raises(UserError) as err:
        compose_checked(ROOT / "configs", "e2c_grpo", ["e2c_stage=stage1"], [override])
    assert message in str(err.value) and "\n" not in str(err.value)


def test_valid_overrides_pass_and_launcher_paths_hydra_cannot_take_are_named() -> None:
    from e2c.core.errors import UserError
    from e2c.launch.checks import compose_checked

    cfg = compose_checked(
        ROOT / "configs",
        "e2c_grpo",
        ["e2c_stage=stage2"],
        [
            "actor_rollout_ref.actor.optim.lr=5e-06",
            "data.train_batch_size=2",
            "trainer.val_before_train=False",
            "+e2c.extra=1",
        ],
    )
    assert cfg.actor_rollout_ref.actor.optim.lr == 5e-06 and cfg.e2c.stage == 2
    with pytest.raises(UserError, match="reads the commas"):
        compose_checked(ROOT / "configs", "e2c_grpo", ["trainer.default_local_dir=/tmp/a,b"], [])
