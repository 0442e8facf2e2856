"""Several ranks and nodes on this CPU, measured: wall time and peak memory (the summed PSS of every process
the run starts: torchrun's ranks, or ray's head, workers and actors) of the tiny model's runs through the
scripts users type, and how the 4-rank numbers agree with one rank's.

    python bench/multirank.py [--out outputs/bench_multirank] [--runs sft1,sft4,grpo1,grpo4,nodes2]

Runs (each a real script run into OUT/<run>; OUT/results.json collects them):

- ``sft1`` / ``sft4``: ``scripts/e2c_sft.sh``, 3 steps, global batch 8, at 1 and 4 CPU ranks (``N_GPUS``);
- ``grpo1`` / ``grpo4``: ``scripts/e2c_rl.sh --stage 1``, one step, at 1 and 4 ranks, with one rollout
  replica that decodes the whole batch at once (the same samples at both rank counts);
- ``nodes2``: ``scripts/slurm_e2c.sbatch --nodes 2 grpo``: two ray nodes on this machine, 2 logical GPUs each.

Agreement: per SFT step the relative difference of the loss and gradient norm; for GRPO the relative
difference of the policy loss, gradient norm and mean advantage. Memory is sampled every 0.2 s (psutil's PSS).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from e2c.commandline.argtypes import OUTPUT_DIR, NameList
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.parsing import ArgumentParser
from e2c.core.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
RUNS = ("sft1", "sft4", "grpo1", "grpo4", "nodes2")


class PeakMemory:
    """The largest summed memory of a process and all its descendants, sampled in a thread: proportional set
    size (PSS: a page shared by k processes counts 1/k in each), so ray's shared object store and the
    libraries every rank maps are counted once, not once per process as summed RSS would."""

    def __init__(self, pid: int, every_s: float = 0.2) -> None:
        self.pid, self.every_s, self.peak = pid, every_s, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _sample(self) -> int:
        try:
            root = psutil.Process(self.pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            return 0
        total = 0
        for p in procs:
            try:
                total += p.memory_full_info().pss
            except psutil.Error:
                pass  # ended between the listing and the read
        return total

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._sample())
            self._stop.wait(self.every_s)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def sft_data(folder: Path) -> Path:
    from e2c.data.io import write_parquet
    from e2c.data.synthetic.generate import generate, rows_by_split

    samples, _ = generate(40, seed=0)
    return write_parquet(rows_by_split(samples)["sft"], folder / "sft.parquet")


def rl_data(folder: Path, n: int = 16) -> Path:
    """The arithmetic RL prompts of ``bench/rl_overhead.py`` (the tests' 16 by default)."""
    from rl_overhead import synthetic_rl_parquet  # bench/ is on the path when this file runs

    return synthetic_rl_parquet(folder / "rl.parquet", n)


def command(run: str, out: Path, data: dict[str, Path]) -> tuple[list[str], dict[str, str]]:
    """The script command and environment of one run."""
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", "N_GPUS", "RAY_ADDRESS")}
    env.update(E2C_FORCE_CPU="1", TOKENIZERS_PARALLELISM="false", MODEL_PATH="tiny")
    if run.startswith("sft"):
        ranks = run[3:]
        env.update(N_GPUS=ranks, TRAIN_DATA=str(data["sft"]), OUTPUT_DIR=str(out), TOTAL_TRAINING_STEPS="3")
        cmd = ["bash", "scripts/e2c_sft.sh", "--logger", "console,file", "data.train_batch_size=8"]
        return [*cmd, "optim.lr=1e-3", "optim.lr_warmup_steps_ratio=0"], env
    env.update(TRAIN_DATA=str(data["rl"]), VAL_DATA=str(data["rl"]), TOTAL_TRAINING_STEPS="1")
    if run.startswith("grpo"):
        ranks = run[4:]
        env.update(N_GPUS=ranks, OUTPUT_DIR=str(out), E2C_ROLLOUT_BATCH_WAIT_S="2")
        tp = f"actor_rollout_ref.rollout.tensor_model_parallel_size={ranks}"
        return ["bash", "scripts/e2c_rl.sh", "--stage", "1", "--logger", "console,file", "--", tp], env
    env.update(N_GPUS="2", GPUS_PER_NODE="0", RAY_PORT="6394")
    sbatch = ["bash", "scripts/slurm_e2c.sbatch", "--nodes", "2", "grpo", "--stage", "1"]
    return [*sbatch, "--output-dir", str(out / "stage1-warmup"), "--logger", "console,file"], env


def metrics(run_dir: Path) -> list[dict[str, Any]]:
    files = [run_dir / "metrics.jsonl", run_dir / "stage1-warmup" / "metrics.jsonl"]
    path = next((f for f in files if f.is_file()), None)
    if path is None:
        return []
    return [json.loads(x)["data"] for x in path.read_text().splitlines() if x.strip()]


def measure(run: str, out: Path, data: dict[str, Path]) -> dict[str, Any]:
    cmd, env = command(run, out, data)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    with open(out / "run.log", "w") as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        mem = PeakMemory(proc.pid)
        rc = proc.wait()
        peak = mem.stop()
    wall = time.monotonic() - t0
    if rc != 0:
        raise UserError(f"{run} failed with status {rc}; see {out / 'run.log'}")
    return {"wall_s": round(wall, 1), "peak_pss_gib": round(peak / 2**30, 2), "metrics": metrics(out)}


def rel(a: float, b: float) -> float:
    """|a - b| / |a| (0 when both are 0)."""
    return 0.0 if a == b else abs(a - b) / max(abs(a), 1e-30)


def agreement(results: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "sft1" in results and "sft4" in results:
        pairs = zip(results["sft1"]["metrics"], results["sft4"]["metrics"], strict=False)
        out["sft_4_vs_1"] = [
            {
                "loss_rel": rel(a["train/loss"], b["train/loss"]),
                "grad_norm_rel": rel(a["train/grad_norm"], b["train/grad_norm"]),
            }
            for a, b in pairs
        ]
    if "grpo1" in results and "grpo4" in results:
        a, b = results["grpo1"]["metrics"][0], results["grpo4"]["metrics"][0]
        out["grpo_4_vs_1"] = {
            key: rel(a[key], b[key])
            for key in ("actor/pg_loss", "actor/grad_norm", "critic/advantages/mean", "critic/score/mean")
        }
    return out


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog="python bench/multirank.py", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--out",
        type=OUTPUT_DIR,
        default="outputs/bench_multirank",
        help="results folder (default: outputs/bench_multirank)",
    )
    p.add_argument(
        "--runs",
        type=NameList(RUNS, "run"),
        default=",".join(RUNS),
        help=f"runs, comma-separated (default: {','.join(RUNS)})",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    runs = args.runs
    out = Path(args.out).resolve()
    checks_done()
    try:
        out.mkdir(parents=True, exist_ok=True)
        data = {"sft": sft_data(out), "rl": rl_data(out)}
        results: dict[str, Any] = {}
        for run in runs:
            print(f"[bench] {run} ...", flush=True)
            results[run] = measure(run, out / run, data)
            print(
                f"[bench] {run}: {results[run]['wall_s']} s, peak {results[run]['peak_pss_gib']} GiB",
                flush=True,
            )
        summary = {
            "date": time.strftime("%Y-%m-%d"),
            "cpus": os.cpu_count(),
            "runs": {k: {kk: v[kk] for kk in ("wall_s", "peak_pss_gib")} for k, v in results.items()},
            "agreement": agreement(results),
        }
        (out / "results.json").write_text(json.dumps(summary, indent=1))
    except OSError as e:  # a full disk or a folder taken away mid-run: one line naming the file
        raise UserError(str(e)) from None
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    run_main(main)
