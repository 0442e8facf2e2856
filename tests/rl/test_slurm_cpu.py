"""scripts/slurm_e2c.sbatch: the commands it runs on 1, 2 and 4 nodes (dry run), its bad input, the cluster
wait of e2c.launch.cluster, and real one-node runs on this machine (a ray head started by the script, the tiny
model's GRPO joining it; torchrun SFT)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from bad_input import assert_one_line_error, run

from e2c.launch.cluster import wait_for_nodes

SBATCH = "scripts/slurm_e2c.sbatch"


def _commands(out: str) -> list[list[str]]:
    """The printed commands (``+ cmd ...``), split as the shell would."""
    return [shlex.split(line[2:].removesuffix(" &")) for line in out.splitlines() if line.startswith("+ ")]


def _node(cmd: list[str]) -> str | None:
    return cmd[cmd.index("-w") + 1] if cmd[:1] == ["srun"] and "-w" in cmd else None


@pytest.mark.parametrize("nodes", [1, 2, 4])
def test_ray_stage_dry_run_starts_a_head_and_a_worker_per_other_node_cpu(nodes: int) -> None:
    r = run(
        SBATCH,
        "--dry-run",
        "--nodes",
        str(nodes),
        "grpo",
        "--stage",
        "2",
        "--",
        "trainer.save_freq=5",
        env={"GPUS_PER_NODE": "8", "RAY_PORT": "6400"},
    )
    assert r.returncode == 0, r.stderr
    cmds = _commands(r.stdout)
    heads = [c for c in cmds if "start" in c and "--head" in c]
    workers = [c for c in cmds if "start" in c and "--address=node0-ip:6400" in c]
    assert len(heads) == 1 and _node(heads[0]) == "node0"
    assert "--num-gpus=8" in heads[0] and "--port=6400" in heads[0]
    assert sorted(_node(c) for c in workers) == [f"node{i}" for i in range(1, nodes)]
    waits = [c for c in cmds if "e2c.launch.cluster" in c]
    assert waits[-1][waits[-1].index("--nodes") + 1] == str(nodes)
    stage = cmds[-1]
    assert _node(stage) == "node0"
    assert f"NNODES={nodes}" in stage and "RAY_ADDRESS=node0-ip:6400" in stage
    assert stage[-5:] == ["scripts/e2c_rl.sh", "--stage", "2", "--", "trainer.save_freq=5"]
    # the order a cluster needs: head, wait for it, workers, wait for all, then the driver
    assert cmds.index(heads[0]) < cmds.index(waits[0]) < cmds.index(stage)
    assert all(cmds.index(w) < cmds.index(waits[-1]) for w in workers)


def test_sandbox_fusion_servers_start_and_answer_on_every_node_before_ray_cpu() -> None:
    env = {"GPUS_PER_NODE": "8", "E2C_SANDBOX_FUSION": "1", "SANDBOX_PORT": "8181"}
    r = run(SBATCH, "--dry-run", "--nodes", "3", "grpo", "--stage", "1", env=env)
    assert r.returncode == 0, r.stderr
    cmds = _commands(r.stdout)
    starts = [c for c in cmds if "docker" in c and "run" in c]
    checks = [c for c in cmds if "e2c.sandbox" in c]
    head = next(c for c in cmds if "--head" in c)
    assert sorted(_node(c) for c in starts) == ["node0", "node1", "node2"]
    assert all("8181:8080" in c for c in starts)
    assert sorted(_node(c) for c in checks) == ["node0", "node1", "node2"]
    assert all("fusion:http://127.0.0.1:8181" in c for c in checks)
    assert max(cmds.index(c) for c in starts) < min(cmds.index(c) for c in checks) < cmds.index(head)
    stops = [c for c in cmds if "docker" in c and "rm" in c]
    assert sorted(_node(c) for c in stops) == ["node0", "node1", "node2"]


@pytest.mark.parametrize("nodes", [1, 2, 4])
def test_torchrun_stage_dry_run_cpu(nodes: int) -> None:
    r = run(
        SBATCH, "--dry-run", "--nodes", str(nodes), "ef-sft", "--model", "tiny", env={"MASTER_PORT": "29600"}
    )
    assert r.returncode == 0, r.stderr
    stage = _commands(r.stdout)[-1]
    if nodes == 1:
        assert stage[-5:] == ["env", "NNODES=1", "bash", "scripts/ef-sft.sh", "--model", "tiny"][-5:]
        assert _node(stage) == "node0"
    else:
        assert stage[:3] == ["srun", f"--nodes={nodes}", "--ntasks-per-node=1"]
        assert {f"NNODES={nodes}", "MASTER_ADDR=node0-ip", "MASTER_PORT=29600"} <= set(stage)
        assert any("NODE_RANK=$SLURM_NODEID" in part for part in stage)
        assert stage[-3:] == ["scripts/ef-sft.sh", "--model", "tiny"]
    assert not any("ray" in " ".join(c) for c in _commands(r.stdout))


def test_cpu_dry_run_offers_the_cpu_presets_resources_cpu() -> None:
    r = run(SBATCH, "--dry-run", "dapo", env={"GPUS_PER_NODE": "0"})
    head = next(c for c in _commands(r.stdout) if "--head" in c)
    assert "--num-cpus=8" in head and "--num-gpus=1" in head  # configs/cpu/rl.yaml's ray_init
    assert _commands(r.stdout)[-1][-1] == "scripts/e2c_dapo.sh"


@pytest.mark.parametrize(
    "args, env, needle",
    [
        ([], {}, "no stage given; valid: sft, ef-sft, grpo, dapo, curriculum"),
        (["rlhf"], {}, "unknown stage 'rlhf'; valid: sft, ef-sft, grpo, dapo, curriculum"),
        (["--nodes", "0", "grpo"], {}, "--nodes must be a whole number of nodes, at least 1"),
        (["--nodes", "two", "--dry-run", "grpo"], {}, "got 'two'"),
        (
            ["--nodes", "17", "grpo"],
            {},
            "--nodes 17 outside Slurm starts 17 nodes on this machine; at most 16",
        ),
        (["--verbose", "grpo"], {}, "unknown flag '--verbose'"),
        (["--dry-run", "grpo"], {"RAY_PORT": "http"}, "RAY_PORT must be a whole number"),
        (
            ["--dry-run", "grpo"],
            {"E2C_SANDBOX_FUSION": "yes"},
            "E2C_SANDBOX_FUSION must be 0 or 1, got 'yes'",
        ),
        (["--dry-run", "grpo"], {"SANDBOX_PORT": "99999"}, "SANDBOX_PORT must be a port"),
        (["--dry-run", "grpo"], {"E2C_ROOT": "/nonexistent"}, "no E2C checkout at /nonexistent"),
    ],
)
def test_bad_input_is_one_line_cpu(args: list[str], env: dict[str, str], needle: str) -> None:
    assert_one_line_error(run(SBATCH, *args, env=env), needle)


def test_wait_for_nodes_cpu() -> None:
    counts = iter([0, 0, 1, 3, 4, 4])
    said: list[str] = []
    assert wait_for_nodes(lambda: next(counts), 4, 60, every_s=0, say=said.append) == 4
    assert said == [f"[e2c-cluster] {n} of 4 node(s) up" for n in (0, 1, 3, 4)]
    assert wait_for_nodes(lambda: 1, 2, 0, every_s=0, say=said.append) == 1  # timed out: the caller fails
    r = run("-m", "e2c.launch.cluster", "--address", "127.0.0.1:1", "--nodes", "1", "--timeout", "1")
    assert_one_line_error(r, "has 0 of 1 node(s) after 1s", code=1)


# ---------------------------------------------------------------------------------------------- real runs
def _env() -> dict[str, str]:
    return {"E2C_FORCE_CPU": "1", "GPUS_PER_NODE": "0", "RAY_PORT": "6391", "RAY_WAIT_S": "90"}


# The script's own ray cluster for a GRPO stage (a head on this machine, the driver joining it through
# RAY_ADDRESS, the head stopped afterwards) runs in tests/rl/test_multirank_cpu.py with two nodes, which
# holds every check a one-node run would make.


@pytest.mark.slow  # a real SFT run through torchrun
def test_one_node_sft_through_the_script_cpu(tmp_path: Path) -> None:
    from e2c.data.io import write_parquet
    from e2c.data.synthetic.generate import generate, rows_by_split

    samples, _ = generate(20, seed=0)
    data = write_parquet(rows_by_split(samples)["sft"], tmp_path / "sft.parquet")
    out = tmp_path / "sft"
    r = run(
        SBATCH,
        "sft",
        "--model",
        "tiny",
        "--steps",
        "1",
        "--gpus",
        "0",
        "--train-data",
        str(data),
        "--output-dir",
        str(out),
        "--logger",
        "console",
        "data.train_batch_size=4",
        env=_env(),
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert json.loads(r.stdout.strip().splitlines()[-1])["losses"].keys() == {"1"}
    assert (out / "final" / "config.json").is_file()
