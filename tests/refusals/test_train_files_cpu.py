"""Bad input to the training entry points that once got past their checks, each run as a user
runs it (the scripts, ``python -m``): one ``error:`` line, exit 2, before verl, ray or torchrun start, and
nothing written.

1. broken model folders (weights that are not safetensors, no tokenizer, a tokenizer that does not load, no
   chat template), for SFT, RL and RL stage 2's start checkpoint;
2. numbers that parse but make no sense: nan/inf for the exploration-advantage coefficients given as Hydra
   overrides, zero workers or batch sizes, the curriculum's validation factor nan, a huge node count, and
   ``python -m e2c.launch.cluster --timeout nan`` (which waited forever);
3. names that are not choices (a rollout format, an advantage estimator, an algorithm or stage that
   contradicts the script) and an empty ``CUDA_VISIBLE_DEVICES=``;
4. paths with a space and a non-ASCII letter, quoted into the Hydra overrides (they used to fail inside
   verl, or be refused);
5. ``TRAIN_DATA=,``, which started SFT with no data file.
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest
from bad_input import ROOT, assert_one_line_error, run, snapshot
from conftest import arithmetic_rl_rows

from e2c.core.models import build_tiny_model
from e2c.data.io import write_parquet
from e2c.data.synthetic.generate import generate, rows_by_split
from e2c.launch.checkpoints import TRACKER

# The launchers pick GPUs from the environment: every case runs the CPU set-up, on one node.
CPU = {"E2C_FORCE_CPU": "1", "CUDA_VISIBLE_DEVICES": "", "N_GPUS": "", "NNODES": "", "NODE_RANK": ""}
# A folder name from a researcher's home: a space and a letter outside ASCII.
ODD = "Zoë data"


@pytest.fixture(scope="module")
def d(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Data files (also under a folder with a space and a non-ASCII letter) and broken model folders."""
    root = tmp_path_factory.mktemp("guard")
    odd = root / ODD
    odd.mkdir()
    sft = rows_by_split(generate(12, seed=0)[0])["sft"]
    out = {
        "root": root,
        "sft": write_parquet(sft, root / "sft.parquet"),
        "rl": write_parquet(arithmetic_rl_rows(8), root / "rl.parquet"),
        "odd": odd,
        "odd_sft": write_parquet(sft, odd / "sft é.parquet"),
        "odd_rl": write_parquet(arithmetic_rl_rows(8), odd / "rl é.parquet"),
    }
    tiny = Path(build_tiny_model())

    def model(name: str, change) -> Path:
        folder = root / name
        shutil.copytree(tiny, folder)
        change(folder)
        return folder

    out["weights"] = model("weights", lambda f: (f / "model.safetensors").write_bytes(b"not safetensors"))
    out["no_tokenizer"] = model("no_tokenizer", lambda f: [p.unlink() for p in f.glob("tokenizer*")])
    out["tokenizer"] = model("tokenizer", lambda f: (f / "tokenizer.json").write_text("{}"))

    def no_template(f: Path) -> None:
        import json

        (f / "chat_template.jinja").unlink(missing_ok=True)
        cfg = json.loads((f / "tokenizer_config.json").read_text())
        cfg.pop("chat_template", None)
        (f / "tokenizer_config.json").write_text(json.dumps(cfg))

    out["template"] = model("template", no_template)
    # A stage-1 run whose last checkpoint was cut short: its weights file is not safetensors.
    stage1 = root / "stage1"
    hf = stage1 / "global_step_1" / "actor" / "huggingface"
    shutil.copytree(out["weights"], hf)
    (stage1 / TRACKER).write_text("1\n")
    out["stage1"] = stage1
    return out


def _env(**extra: str) -> dict[str, str]:
    return {**CPU, **{k: str(v) for k, v in extra.items()}}


def _refused(proc, *needles: str) -> str:
    """One ``error:`` line, exit 2, and nothing of verl, ray or torchrun on the terminal."""
    line = assert_one_line_error(proc, *needles)
    started = ("Ray", "ray.init", "torch.distributed", "verl.trainer", "Error executing job")
    assert not any(w in proc.stdout + proc.stderr for w in started), proc.stdout[-2000:]
    return line


# ------------------------------------------------------------------------------ 1. broken model folders
MODEL_CASES = {
    "weights": "weights file model.safetensors is not a safetensors file",
    "no_tokenizer": "has no tokenizer",
    "tokenizer": "tokenizer",
    "template": "has no chat template",
}


@pytest.mark.parametrize("script", ["e2c_sft.sh", "e2c_rl.sh"])
@pytest.mark.parametrize("kind", list(MODEL_CASES))
def test_a_broken_model_folder_is_one_line_before_the_trainer_cpu(
    script: str, kind: str, d: dict[str, Path]
) -> None:
    """Not "trainer exited with status 1, see train.log" (SFT) or pages of ray output (RL): the model folder
    is checked (config, weight headers, a tokenizer that loads, the chat template) before anything starts."""
    out = d["root"] / f"run-{script}-{kind}"
    data = d["sft"] if script == "e2c_sft.sh" else d["rl"]
    env = _env(
        MODEL_PATH=d[kind], TRAIN_DATA=data, VAL_DATA="none" if "sft" in script else data, OUTPUT_DIR=out
    )
    args = ["--stage", "1"] if script == "e2c_rl.sh" else []
    before = snapshot(d[kind])
    line = _refused(run(f"scripts/{script}", *args, env=env), MODEL_CASES[kind], str(d[kind]))
    if kind == "tokenizer":
        assert "load" in line, line
    assert not out.exists(), "a refused run made its output folder"
    assert snapshot(d[kind]) == before


def test_rl_stage2_refuses_a_broken_stage1_checkpoint_cpu(d: dict[str, Path]) -> None:
    env = _env(TRAIN_DATA=d["rl"], VAL_DATA=d["rl"], OUTPUT_DIR=d["root"] / "stage2-run")
    r = run("scripts/e2c_rl.sh", "--stage", "2", "--stage1-dir", str(d["stage1"]), env=env)
    _refused(r, "weights file model.safetensors is not a safetensors file", str(d["stage1"]))


# ------------------------------------------------------------------------------ 2. numbers without sense
RL_NUMBERS = {
    "coef-nan": (["--", "e2c.explore_adv_coef=nan"], "e2c.explore_adv_coef must be a finite number, got nan"),
    "execute-coef-inf": (
        ["--", "e2c.execute_adv_coef=inf"],
        "e2c.execute_adv_coef must be a finite number, got inf",
    ),
    "budget-negative": (
        ["--", "e2c.rollout.explore_budget=-4"],
        "e2c.rollout.explore_budget must be 0 (off) or a positive number of tokens, got -4",
    ),
    "gen-batches-negative": (["--", "e2c.max_num_gen_batches=-1"], "e2c.max_num_gen_batches must be >= 0"),
    "reward-workers-zero": (["--", "reward.num_workers=0"], "reward.num_workers must be >= 1, got 0"),
    "agent-workers-zero": (
        ["--", "actor_rollout_ref.rollout.agent.num_workers=0"],
        "actor_rollout_ref.rollout.agent.num_workers must be >= 1, got 0",
    ),
    "mini-batch-zero": (
        ["--", "actor_rollout_ref.actor.ppo_mini_batch_size=0"],
        "actor_rollout_ref.actor.ppo_mini_batch_size must be >= 1, got 0",
    ),
    "coef-flag-nan": (["--explore-adv-coef", "nan"], "--explore-adv-coef must be a finite number, got nan"),
    "nnodes-huge": (["--nnodes", "9" * 20], "--nnodes must be in [1, 4096]"),
}


@pytest.mark.parametrize("case", list(RL_NUMBERS))
def test_rl_numbers_that_make_no_sense_are_refused_cpu(case: str, d: dict[str, Path]) -> None:
    """Hydra overrides of ``e2c.*`` keys go through the same types as the flags (``setting(value=)``)."""
    args, needle = RL_NUMBERS[case]
    env = _env(MODEL_PATH="tiny", TRAIN_DATA=d["rl"], VAL_DATA=d["rl"], OUTPUT_DIR=d["root"] / f"rl-{case}")
    _refused(run("scripts/e2c_rl.sh", "--stage", "1", "--dry-run", *args, env=env), needle)


def test_sft_zero_batch_is_refused_cpu(d: dict[str, Path]) -> None:
    env = _env(MODEL_PATH="tiny", TRAIN_DATA=d["sft"], VAL_DATA="none", OUTPUT_DIR=d["root"] / "sft-zero")
    r = run("scripts/e2c_sft.sh", "--dry-run", "data.train_batch_size=0", env=env)
    _refused(r, "data.train_batch_size must be >= 1, got 0")


@pytest.mark.parametrize(
    ("field", "value", "needle"),
    [
        ("val_budget_factor", ".nan", "val_budget_factor must be a finite number >= 1, got nan"),
        ("val_budget_factor", "true", "val_budget_factor must be a finite number >= 1, got True"),
        ("test_freq", "0", "test_freq must be >= 1, got 0"),
    ],
)
def test_curriculum_config_numbers_are_checked_cpu(field: str, value: str, needle: str, d: dict) -> None:
    import yaml

    cfg = yaml.safe_load((ROOT / "configs" / "e2c_curriculum.yaml").read_text())
    cfg[field] = yaml.safe_load(value)
    path = d["root"] / f"curriculum-{field}-{value}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    r = run(
        "-m",
        "e2c.rl.curriculum",
        "--config",
        str(path),
        "--model",
        "tiny",
        "--train-data",
        str(d["rl"]),
        "--val-data",
        str(d["rl"]),
        "--output-dir",
        str(d["root"] / "curriculum-out"),
        env=_env(),
    )
    _refused(r, needle)
    assert not (d["root"] / "curriculum-out").exists()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--timeout", "nan"], "--timeout must be a finite number in [0, 604800], got nan"),  # waited forever
        (["--timeout", "inf"], "--timeout must be a finite number in [0, 604800], got inf"),
        (["--timeout", "-1"], "--timeout must be in [0, 604800], got -1"),
        (["--nodes", "0"], "--nodes must be in [1, 4096], got 0"),
        (["--address", "head"], "--address must be the ray head as HOST:PORT"),
    ],
)
def test_cluster_wait_refuses_bad_numbers_at_once_cpu(args: list[str], needle: str) -> None:
    base = {"--address": "127.0.0.1:1", "--timeout": "1"}
    base.update(dict(zip(args[::2], args[1::2], strict=True)))
    argv = [x for kv in base.items() for x in kv]
    assert_one_line_error(run("-m", "e2c.launch.cluster", *argv, timeout=30), needle)


@pytest.mark.parametrize(
    ("script", "args", "env", "needle"),
    [
        (
            "scripts/slurm_e2c.sbatch",
            ["--dry-run", "--nodes", "9" * 20, "grpo"],
            {},
            "--nodes must be a whole number of nodes, at least 1 and at most 4096",
        ),
        (
            "scripts/slurm_e2c.sbatch",
            ["--dry-run", "grpo"],
            {"RAY_NUM_GPUS": "9" * 20},
            "RAY_NUM_GPUS must be a whole number of at most 9 digits",
        ),
        (
            "scripts/e2c_rl.sh",
            ["--dry-run"],
            {"NNODES": "9" * 20},
            "NNODES must be a whole number from 1 to 4096",
        ),
        (
            "scripts/e2c_sft.sh",
            ["--dry-run"],
            {"NNODES": "-" + "9" * 20},
            "NNODES must be a whole number from 1",
        ),
    ],
)
def test_a_huge_node_count_is_one_clean_line_cpu(
    script: str, args: list[str], env: dict, needle: str
) -> None:
    """Not the shell's own ``integer expression expected`` first (bash arithmetic overflows)."""
    r = run(script, *args, env={**CPU, **env})
    line = assert_one_line_error(r, needle)
    assert "integer expression" not in r.stderr and "value too great" not in r.stderr, line


# ------------------------------------------------------------------------------ 3. names that are not choices
DAPO_NAMES = {
    "format": (["e2c.rollout.format=e2cc"], "unknown e2c.rollout.format 'e2cc' (did you mean 'e2c'?)"),
    "estimator": (["algorithm.adv_estimator=grpoo"], "unknown algorithm.adv_estimator 'grpoo'"),
    "algo": (["e2c.algo=grpo"], "e2c.algo=grpo contradicts --algo dapo (scripts/e2c_dapo.sh runs dapo)"),
    "stage": (["e2c.stage=2"], "e2c.stage=2 contradicts --stage 1"),
    "algo-unknown": (["e2c.algo=ppo"], "unknown e2c.algo 'ppo'"),
}


@pytest.mark.parametrize("case", list(DAPO_NAMES))
def test_dapo_refuses_names_that_are_not_choices_cpu(case: str, d: dict[str, Path]) -> None:
    overrides, needle = DAPO_NAMES[case]
    out = d["root"] / f"dapo-{case}"
    env = _env(MODEL_PATH="tiny", TRAIN_DATA=d["rl"], VAL_DATA=d["rl"], OUTPUT_DIR=out)
    _refused(run("scripts/e2c_dapo.sh", "--stage", "1", "--", *overrides, env=env), needle)
    assert not out.exists()


@pytest.mark.slow  # a launcher or script as real processes, verl imported in each: ~10-50 s on 2 cores
def test_an_empty_cuda_visible_devices_runs_the_cpu_setup_cpu(d: dict[str, Path]) -> None:
    """``CUDA_VISIBLE_DEVICES=`` with no E2C_FORCE_CPU: the checks pass, and the environment the launcher
    gives verl lets ray start with the CPU set-up's logical GPU (ray refused it with "Attempting to start
    raylet with 1 GPU, but CUDA_VISIBLE_DEVICES contains []", a page of traceback from e2c_rl.sh)."""
    # E2C_FORCE_CPU empty reads as unset (only "1" forces the CPU)
    env = _env(
        MODEL_PATH="tiny",
        TRAIN_DATA=d["rl"],
        VAL_DATA=d["rl"],
        E2C_FORCE_CPU="",
        OUTPUT_DIR=d["root"] / "cvd",
    )
    r = run("scripts/e2c_rl.sh", "--stage", "1", "--dry-run", env=env)
    assert r.returncode == 0 and "trainer.device=cpu" in r.stdout, r.stderr[-2000:]
    probe = (
        "import os, ray; from e2c.rl.launch import stage_env; child = stage_env(0); "
        "os.environ.clear(); os.environ.update(child); "
        "ray.init(num_cpus=1, num_gpus=1, include_dashboard=False, log_to_driver=False); "
        "print('gpus', ray.cluster_resources().get('GPU')); ray.shutdown()"
    )
    p = run("-c", probe, env={**env, "RAY_ADDRESS": ""}, timeout=180)
    assert p.returncode == 0 and "gpus 1.0" in p.stdout, p.stderr[-3000:]


# ------------------------------------------------------------------------------ 4. paths of researchers
def _overrides(stdout: str) -> dict[str, str]:
    """The Hydra overrides of the last command a dry run printed, key -> value text."""
    cmd = shlex.split(stdout.strip().splitlines()[-1])
    return dict(a.split("=", 1) for a in cmd if "=" in a and not a.startswith("-"))


def _read_back(overrides: dict[str, str]) -> dict[str, object]:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides([f"{k}={v}" for k, v in overrides.items()])
    return {o.key_or_group: o.value() for o in parsed}


def test_sft_takes_paths_with_a_space_and_an_accent_cpu(d: dict[str, Path]) -> None:
    from e2c.launch.checks import compose_checked

    out = d["odd"] / "sft ö run"
    env = _env(MODEL_PATH="tiny", TRAIN_DATA=d["odd_sft"], VAL_DATA="none", OUTPUT_DIR=out)
    check = run("scripts/e2c_sft.sh", env={**env, "E2C_CHECK_ONLY": "1"})
    assert check.returncode == 0 and check.stderr.strip() == "checks passed", check.stderr[-2000:]
    assert not out.exists()  # checks write nothing
    r = run("scripts/e2c_sft.sh", "--dry-run", env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    values = _read_back(ov := _overrides(r.stdout))
    assert values["data.train_files"] == str(d["odd_sft"])
    assert values["trainer.default_local_dir"] == str(out / "verl")
    assert str(values["hydra.run.dir"]).startswith(str(out / "hydra") + "/${now:")
    # verl's Hydra composes the command's overrides as the trainer will.
    job = [f"{k}={v}" for k, v in ov.items() if not k.startswith(("hydra.", "--"))]
    cfg = compose_checked(ROOT / "configs", "e2c_sft", job, [])
    assert cfg.data.train_files == str(d["odd_sft"]) and cfg.data.stats_path == str(
        out / "sft_data_stats.json"
    )


def test_rl_takes_paths_with_a_space_and_an_accent_cpu(d: dict[str, Path]) -> None:
    """Hydra can quote values: they are no longer refused ("Hydra cannot take ...")."""
    from e2c.launch.checks import compose_checked

    out = d["odd"] / "rl ö run"
    files = f"{d['odd_rl']},{d['rl']}"  # several files: a Hydra list, not a sweep
    env = _env(MODEL_PATH="tiny", TRAIN_DATA=files, VAL_DATA=d["odd_rl"], OUTPUT_DIR=out)
    check = run("scripts/e2c_rl.sh", "--stage", "1", env={**env, "E2C_CHECK_ONLY": "1"})
    assert check.returncode == 0 and check.stderr.strip() == "checks passed", check.stderr[-2000:]
    r = run("scripts/e2c_rl.sh", "--stage", "1", "--dry-run", env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    ov = _overrides(r.stdout)
    values = _read_back(ov)
    assert values["data.train_files"] == [str(d["odd_rl"]), str(d["rl"])]
    assert values["trainer.default_local_dir"] == str(out / "stage1-warmup")
    job = [f"{k}={v}" for k, v in ov.items() if not k.startswith(("hydra.", "--"))]
    cfg = compose_checked(ROOT / "configs", "e2c_grpo", job, [])
    assert list(cfg.data.train_files) == [str(d["odd_rl"]), str(d["rl"])]
    assert cfg.trainer.default_local_dir == str(out / "stage1-warmup")


@pytest.mark.slow  # one real tiny SFT step: ~40 s of trainer on 2 cores, ~80 s in all under load
def test_one_real_sft_step_in_a_folder_with_a_space_and_an_accent_cpu(d: dict[str, Path]) -> None:
    out = d["odd"] / "sft real"
    env = _env(MODEL_PATH="tiny", TRAIN_DATA=d["odd_sft"], VAL_DATA="none", OUTPUT_DIR=out)
    r = run(
        "scripts/e2c_sft.sh", "data.train_batch_size=4", env={**env, "TOTAL_TRAINING_STEPS": "1"}, timeout=600
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert (out / "final" / "config.json").is_file()


# ------------------------------------------------------------------------------ 5. lists that name no file
@pytest.mark.parametrize(
    ("script", "var", "value"),
    [
        ("e2c_sft.sh", "TRAIN_DATA", ","),
        ("e2c_sft.sh", "TRAIN_DATA", " , "),
        ("e2c_sft.sh", "VAL_DATA", ","),
        ("e2c_rl.sh", "TRAIN_DATA", ","),
        ("e2c_rl.sh", "VAL_DATA", ",,"),
    ],
)
def test_a_data_list_that_names_no_file_is_refused_cpu(script: str, var: str, value: str, d: dict) -> None:
    data = d["sft"] if script == "e2c_sft.sh" else d["rl"]
    out = d["root"] / f"nofile-{script}-{var}"
    env = _env(
        MODEL_PATH="tiny", TRAIN_DATA=data, VAL_DATA="none" if "sft" in script else data, OUTPUT_DIR=out
    )
    env[var] = value
    flag = "--train-data" if var == "TRAIN_DATA" else "--val-data"
    _refused(
        run(f"scripts/{script}", *(["--stage", "1"] if "rl" in script else []), env=env),
        flag,
        "names no file",
    )
    assert not out.exists()
