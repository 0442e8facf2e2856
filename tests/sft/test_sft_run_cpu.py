"""SFT and EF-SFT for real: verl's SFT trainer on the tiny model on CPU, through our entry points.

Each run is 3 optimizer steps on a small synthetic set (about 35 s each on 2 cores: ~10 s start-up, ~1.3 s
per step, ~9 s for verl's model merger).
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import descendants, ended, kill_tree
from reference_impls import tensorboard_scalars

from e2c.core.paths import configs_dir
from e2c.data import efsft
from e2c.data.io import write_parquet
from e2c.data.synthetic.generate import generate, rows_by_split
from e2c.launch import presets
from e2c.launch.devices import gpu_count
from e2c.sft import launch, tagging
from e2c.sft import run as sft_run

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable


@pytest.fixture(scope="module")
def data(tmp_path_factory, tiny_tok) -> dict[str, Path]:
    """The same synthetic chains as full SFT rows and as EF-SFT rows (mostly exploration-only)."""
    d = tmp_path_factory.mktemp("sftdata")
    samples, _ = generate(40, seed=0)
    sft = rows_by_split(samples)["sft"]
    ef, _ = efsft.build(sft, efsft.tokenizer_counter(tiny_tok), reg_frac=0.1, seed=0)
    return {"sft": write_parquet(sft, d / "sft.parquet"), "ef": write_parquet(ef, d / "ef.parquet")}


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env["E2C_FORCE_CPU"] = "1"
    return env


def _run(cmd: list[str], timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=timeout)


TRAIN_OVERRIDES = ["data.train_batch_size=4", "optim.lr=1e-3", "optim.lr_warmup_steps_ratio=0"]
SFT_ARGS = ["--mode", "sft", "--model", "tiny", "--steps", "3", "--gpus", "0", *TRAIN_OVERRIDES]


def _sft(train: Path, output_dir: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    """``python -m e2c.sft.run``: 3 SFT steps of the tiny model on CPU."""
    args = ["--train-data", str(train), "--output-dir", str(output_dir), *SFT_ARGS]
    return _run([PY, "-m", "e2c.sft.run", *args], timeout=timeout)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, data) -> dict[str, dict]:
    """One SFT run through ``python -m e2c.sft.run`` and one EF-SFT run through ``scripts/ef-sft.sh``."""
    out = tmp_path_factory.mktemp("runs")
    res = {}
    sft = _sft(data["sft"], out / "sft")
    env_run = subprocess.run(
        ["bash", "scripts/ef-sft.sh", *TRAIN_OVERRIDES],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={
            **_env(),
            "MODEL_PATH": "tiny",
            "TRAIN_DATA": str(data["ef"]),
            "OUTPUT_DIR": str(out / "ef"),
            "TOTAL_TRAINING_STEPS": "3",
        },
    )
    for name, proc in (("sft", sft), ("ef", env_run)):
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        res[name] = {
            "summary": json.loads(proc.stdout.strip().splitlines()[-1]),
            "dir": out / name,
            "stdout": proc.stdout,
        }
    return res


@pytest.mark.slow  # real SFT and EF-SFT runs (torchrun)
def test_both_runs_train_three_finite_steps(runs: dict) -> None:
    for r in runs.values():
        losses = r["summary"]["losses"]
        assert sorted(losses) == ["1", "2", "3"] and all(math.isfinite(v) and v > 0 for v in losses.values())
        assert r["summary"]["seconds_per_step"] > 0
        assert "e2c sft data:" in r["stdout"]  # the dataset statistics printed at start


@pytest.mark.slow  # real SFT and EF-SFT runs (torchrun)
def test_sft_losses_reach_tensorboard(runs: dict) -> None:
    # --logger defaults to console,tensorboard: the events under <output-dir>/tensorboard hold the same
    # per-step loss as the summary read from metrics.jsonl.
    for r in runs.values():
        scalars = tensorboard_scalars(r["dir"] / "tensorboard")
        loss = next(k for k in scalars if k.endswith("loss") and k.startswith("train"))
        for step, value in r["summary"]["losses"].items():
            assert scalars[loss][int(step)] == pytest.approx(value, rel=1e-4)


@pytest.mark.slow  # real SFT and EF-SFT runs (torchrun)
def test_final_folders_load_with_the_tags_and_trained_weights(runs: dict, tiny_path: str) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from e2c.chain import tag_token_ids
    from e2c.core.models import resolve_model

    base = AutoModelForCausalLM.from_pretrained(tiny_path, dtype=torch.float32)
    for r in runs.values():
        final = Path(r["summary"]["final"])
        assert final == r["dir"] / "final"
        assert (final / "config.json").is_file() and list(final.glob("*.safetensors"))
        assert final.stat().st_mode & 0o777 == 0o755
        assert resolve_model(str(final)).source == "local"
        tok = AutoTokenizer.from_pretrained(final)
        assert len(tag_token_ids(tok)) == 4
        model = AutoModelForCausalLM.from_pretrained(final, dtype=torch.float32)
        w, w0 = model.model.layers[0].self_attn.q_proj.weight, base.model.layers[0].self_attn.q_proj.weight
        assert (w - w0).abs().max().item() > 1e-3  # three Adam steps at lr 1e-3 moved the weights
        meta = json.loads((final / "e2c_sft.json").read_text())
        assert meta["base_model"] == tiny_path and meta["total_steps_requested"] == 3


@pytest.mark.slow  # real SFT and EF-SFT runs (torchrun)
def test_ef_sft_trains_fewer_tokens_than_full_sft(runs: dict) -> None:
    sft = json.loads((runs["sft"]["dir"] / "final" / "e2c_sft.json").read_text())
    ef = json.loads((runs["ef"]["dir"] / "final" / "e2c_sft.json").read_text())
    assert sft["trained_share"] == 1.0
    assert 0 < ef["trained_tokens"] < 0.6 * sft["trained_tokens"]
    assert ef["trained_share"] < 1.0  # exploration rows drop their end-of-turn token
    stats = json.loads((runs["ef"]["dir"] / "sft_data_stats.json").read_text())
    (only,) = stats.values()
    assert only["rows_by_scope"]["exploration"] > only["rows_by_scope"].get("full", 0) > 0


@pytest.mark.slow  # real SFT and EF-SFT runs (torchrun)
def test_a_finished_run_is_not_repeated(runs: dict, data) -> None:
    proc = _sft(data["sft"], runs["sft"]["dir"], timeout=120)
    assert proc.returncode == 0 and "already the result of this run" in proc.stdout


@pytest.mark.slow  # real SFT runs (torchrun)
def test_a_run_killed_after_its_last_checkpoint_exports_it_and_trains_no_more_cpu(
    runs: dict, data, tmp_path: Path
) -> None:
    """Killed between its last checkpoint and the export (no final/ yet): the rerun exports that checkpoint
    and trains nothing, where verl alone would train a fourth step of a three-step run."""
    import shutil

    run = tmp_path / "sft"
    shutil.copytree(runs["sft"]["dir"], run, symlinks=True)
    shutil.rmtree(run / "final")
    proc = _sft(data["sft"], run, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "holds step 3 of 3: nothing left to train" in proc.stdout
    assert (run / "final" / "config.json").is_file()
    assert json.loads(proc.stdout.strip().splitlines()[-1])["losses"] == runs["sft"]["summary"]["losses"]
    assert not list(run.rglob("global_step_4"))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--model", "no-such-model"], "unknown model 'no-such-model'"),
        (["--train-data", "/no/such.parquet"], "training data file not found: /no/such.parquet"),
        (["--bogus"], "unrecognized argument '--bogus'"),
        (["--steps", "0", "--dry-run"], "--steps must be >= 1, got 0"),
        (["--total-steps", "0", "--dry-run"], "--steps must be >= 1, got 0"),  # the old spelling, an alias
        (["--logger", "console,tensorbored", "--dry-run"], "--logger 'tensorbored': unknown tracker; valid:"),
    ],
)
def test_bad_input_is_one_line(args: list[str], message: str, data) -> None:
    base = ["--model", "tiny", "--gpus", "0", "--train-data", str(data["sft"])]
    proc = _run([PY, "-m", "e2c.sft.run", *base, *args], timeout=120)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], proc.stderr


def test_schema_errors_stop_before_training(tmp_path: Path) -> None:
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "x"}]
    bad = write_parquet(
        [{"messages": messages, "data_source": "s", "extra_info": {"i": 0}}], tmp_path / "bad.parquet"
    )
    proc = _run(
        [PY, "-m", "e2c.sft.run", "--model", "tiny", "--gpus", "0", "--train-data", str(bad)], timeout=120
    )
    assert proc.returncode == 2 and "bad.parquet row 0 field 'messages[1].content'" in proc.stderr


def test_dry_run_command_cpu_and_gpu(data, tmp_path: Path) -> None:
    argv = ["--model", "tiny", "--mode", "ef-sft", "--gpus", "8", "--output-dir", str(tmp_path)]
    args = sft_run.build_parser().parse_args([*argv, "--train-data", str(data["ef"])])
    plan = launch.make_plan(launch.SFTSettings.from_flags(args), ["optim.lr=1e-5"])
    cmd = launch.launch_command(plan, launch.hydra_overrides(plan, None), configs_dir())
    assert "--nproc_per_node=8" in cmd and "trainer.device=cpu" not in cmd
    assert "data.custom_cls.name=EFSFTDataset" in cmd and cmd[-1] == "optim.lr=1e-5"
    plan.gpus, plan.ranks = 0, 1
    cpu = launch.launch_command(plan, launch.hydra_overrides(plan, 3), configs_dir())
    assert (
        "--nproc_per_node=1" in cpu
        and "trainer.device=cpu" in cpu
        and "trainer.total_training_steps=3" in cpu
    )
    plan.ranks = 4  # the paper's N_GPUS=4 on a machine without GPUs: 4 CPU ranks
    cpu4 = launch.launch_command(plan, launch.hydra_overrides(plan, 3), configs_dir())
    assert (
        "--nproc_per_node=4" in cpu4 and "trainer.n_gpus_per_node=4" in cpu4 and "trainer.device=cpu" in cpu4
    )


@pytest.mark.slow  # a launcher or script as real processes, verl imported in each: ~10-50 s on 2 cores
def test_cpu_preset_comes_from_configs_and_reaches_the_command(data, tmp_path: Path) -> None:
    """configs/cpu/sft.yaml is the CPU preset: each entry is an override in the dry-run command, its step
    count is the default --steps, and the user's overrides come after it (they win)."""
    import yaml

    doc = yaml.safe_load((configs_dir() / "cpu" / "sft.yaml").read_text())
    preset = presets.cpu_preset("sft")
    assert list(preset) == [*doc["preset"], *doc["fixed"]]
    assert preset["trainer.device"] == "cpu" and preset["model.enable_gradient_checkpointing"] == "false"
    base = ["--model", "tiny", "--gpus", "0", "--train-data", str(data["sft"]), "--output-dir", str(tmp_path)]
    proc = _run([PY, "-m", "e2c.sft.run", *base, "--dry-run", "data.train_batch_size=4"], timeout=120)
    assert proc.returncode == 0, proc.stderr
    cmd = shlex.split(proc.stdout.strip().splitlines()[-1])
    for key, value in preset.items():
        assert f"{key}={value}" in cmd
    assert [a for a in cmd if a.startswith("trainer.total_training_steps=")] == [
        "trainer.total_training_steps=20"
    ]
    assert cmd.index("data.train_batch_size=8") < cmd.index("data.train_batch_size=4") == len(cmd) - 1
    proc = _run([PY, "-m", "e2c.sft.run", *base, "--dry-run", "--steps", "3"], timeout=120)
    cmd = shlex.split(proc.stdout.strip().splitlines()[-1])
    assert [a for a in cmd if a.startswith("trainer.total_training_steps=")] == [
        "trainer.total_training_steps=3"
    ]


def test_a_broken_cpu_preset_is_one_line(tmp_path: Path) -> None:
    from e2c.core.errors import UserError

    bad = tmp_path / "sft.yaml"
    for text, message in [
        ("preset: [1, 2]\n", "'preset' must map Hydra keys to values"),
        ("a: [\n", "not valid YAML"),
    ]:
        bad.write_text(text)
        with pytest.raises(UserError, match=re.escape(message)):
            presets.cpu_preset("sft", bad)
    with pytest.raises(UserError, match="cannot read the CPU preset"):
        presets.cpu_preset("sft", tmp_path / "missing.yaml")
    assert [presets.override_value(v) for v in (False, None, 8, "sdpa", [1, "a"])] == [
        "false",
        "null",
        "8",
        "sdpa",
        "[1,a]",
    ]


def test_count_gpus() -> None:
    assert gpu_count({"CUDA_VISIBLE_DEVICES": "0,1,3"}) == 3
    assert gpu_count({"CUDA_VISIBLE_DEVICES": ""}) == 0
    assert gpu_count({"CUDA_VISIBLE_DEVICES": "-1"}) == 0
    assert gpu_count({"CUDA_VISIBLE_DEVICES": "0,1", "E2C_FORCE_CPU": "1"}) == 0


def test_a_base_model_without_tags_gets_a_tagged_copy_once(tmp_path: Path, tiny_path: str) -> None:
    """A THINK-format tiny model (no E2C tags) with a padded vocabulary, like Qwen3's: the tags land on
    padding rows, which must still be initialised (from the tags' spelling)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from e2c.chain import THINK
    from e2c.core.models import build_tiny_tokenizer, missing_chain_tokens

    tok = build_tiny_tokenizer(THINK)
    model = AutoModelForCausalLM.from_pretrained(tiny_path)
    model.resize_token_embeddings(len(tok) + 16, mean_resizing=False)  # padded past the tokenizer
    with torch.no_grad():
        model.get_input_embeddings().weight[len(tok) :] = 7.0  # "untrained" padding rows
    base = tmp_path / "base"
    model.save_pretrained(base)
    tok.save_pretrained(base)
    n_base = len(tok)
    folder, note = tagging.tagged_model(str(base), str(tmp_path / "tagged"))
    assert folder == str(tmp_path / "tagged") and "made now" in note
    ttok = AutoTokenizer.from_pretrained(folder)
    assert not missing_chain_tokens(ttok) and len(ttok) == n_base + 4
    emb = AutoModelForCausalLM.from_pretrained(folder).get_input_embeddings().weight.detach()
    assert emb.shape[0] == n_base + 16  # no resize was needed
    from e2c.chain import E2C
    from e2c.core.models import tag_init_rows

    want = tag_init_rows(emb, [tok.encode(t, add_special_tokens=False) for t in E2C.tags], n_base)
    assert torch.allclose(emb[n_base : n_base + 4], want, atol=1e-5)
    assert not (emb[n_base : n_base + 4] == 7.0).any()  # the padding rows' untrained values are gone
    assert tagging.tagged_model(str(base), str(tmp_path / "tagged"))[1].endswith("(reused)")


@pytest.mark.slow  # real SFT and EF-SFT runs (torchrun)
def test_a_finished_run_with_another_model_is_refused_and_kept(runs: dict, data) -> None:
    """The finished run's folder with another model: one line, before anything starts; nothing changed."""
    out = runs["sft"]["dir"]
    before = {p: p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    proc = _sft(data["sft"], out, timeout=120)  # the same run: nothing to do
    assert proc.returncode == 0
    args = ["--train-data", str(data["sft"]), "--output-dir", str(out), *SFT_ARGS, "--model", "embedded"]
    proc = _run([PY, "-m", "e2c.sft.run", *args], timeout=120)
    assert proc.returncode == 2 and proc.stderr.count("error:") == 1, proc.stderr[-2000:]
    assert re.search(
        rf"--output-dir {re.escape(str(out))} holds another run \(base_model '[^']*tiny[^']*' -> '[^']*embedded[^']*'\); "
        "use another --output-dir, or --force to start over$",
        proc.stderr.strip(),
    ), proc.stderr
    assert {p: p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()} == before


@pytest.mark.slow  # a real SFT run (torchrun) holds the folder
def test_a_second_sft_run_into_a_running_ones_folder_is_refused_cpu(data, tmp_path: Path) -> None:
    """Two identical SFT runs into one folder: the second refuses in one line naming the first."""
    out = tmp_path / "sft"
    args = [PY, "-m", "e2c.sft.run", "--train-data", str(data["sft"]), "--output-dir", str(out), *SFT_ARGS]
    first = subprocess.Popen(
        args,
        cwd=ROOT,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        lock = out / ".e2c-run.lock"
        deadline = time.monotonic() + 120
        while (
            not (lock.is_file() and lock.read_text()) and first.poll() is None and time.monotonic() < deadline
        ):
            time.sleep(0.1)
        assert first.poll() is None, "the first run ended before the second started"
        second = _run(args, timeout=120)
        assert second.returncode == 2 and second.stderr.count("error:") == 1, second.stderr[-2000:]
        assert f"--output-dir {out} is in use by process {first.pid} (sft, since " in second.stderr
        assert "Traceback" not in second.stderr
    finally:
        kill_tree(first.pid)  # torchrun's worker has a session of its own: a group kill left it running
        first.wait()


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


@pytest.mark.slow  # a real SFT run (torchrun and its worker)
def test_sigterm_to_the_launcher_alone_stops_its_trainer_cpu(data, tmp_path: Path) -> None:
    """``kill <launcher>``: torchrun's worker sits in a session of its own, so only the launcher can stop it
    (through torchrun). It did not: the launcher died at once and left the training running, unwatched. Now
    torchrun and its worker end, and the launcher says what was saved and the command that resumes."""
    out = tmp_path / "sft"
    args = [PY, "-m", "e2c.sft.run", "--train-data", str(data["sft"]), "--output-dir", str(out), *SFT_ARGS]
    proc = subprocess.Popen(
        args, cwd=ROOT, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    below: list[int] = []
    try:
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            below = descendants(proc.pid)
            if any(
                "verl.trainer.sft_trainer" in c and "torch.distributed.run" not in c
                for c in map(_cmdline, below)
            ):
                break
            time.sleep(0.1)
        assert proc.poll() is None, "the run ended before its worker could be seen"
        assert len(below) >= 2, below  # torchrun and its worker
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 143, err[-2000:]
        last = err.strip().splitlines()[-1]
        assert last.startswith("interrupted (SIGTERM): ") and "resume with: " in last, last
        assert "-m e2c.sft.run --train-data" in last and str(out) in last, last
        deadline = time.monotonic() + 60
        while not all(map(ended, below)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert all(map(ended, below)), [(p, _cmdline(p)) for p in below if not ended(p)]
        assert (
            out / ".e2c-run.lock"
        ).read_text() == ""  # let go cleanly: the command that resumes takes no one's
    finally:
        for pid in below:  # what a failure left running; by its command line, not a number reused since
            if "verl.trainer.sft_trainer" in _cmdline(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if proc.poll() is None:
            proc.kill()
        proc.wait()
