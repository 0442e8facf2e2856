"""What LoRA saves: memory and time per step of SFT and GRPO with full weights and with a LoRA adapter.

    python bench/lora_cost.py [--model embedded] [--steps 4] [--rank 16] [--arms sft,sft-lora,grpo,grpo-lora]
                              [--out bench_results/lora_cost]

Every arm is the real launcher (``python -m e2c.sft.run``, ``python -m e2c.rl.launch``) on the same model and
data, in its own process tree, for ``--steps`` optimizer steps: SFT on synthetic E2C chains (the CPU preset's
batch of 8), GRPO stage 1 on synthetic RL problems (the CPU preset: 4 prompts x 4 samples, 128 new tokens).
While an arm runs, its process tree is sampled every 0.2 s: the peak resident memory of its largest process
(the trainer, which holds weights, gradients and optimizer state) and of the whole tree (with ray's daemons
and the rollout server for GRPO). Time per step is the mean over steps after the first (SFT: verl's step
times; GRPO: ``timing_s/step`` and its ``update_actor`` part from ``metrics.jsonl``). Arms already measured in
``--out`` are reused; prints a table, then one JSON line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from e2c.commandline.argtypes import MODEL, OUTPUT_DIR, NameList, whole
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.parsing import ArgumentParser
from e2c.core.paths import project_root

ARMS = ("sft", "sft-lora", "grpo", "grpo-lora")


class TreePeak:
    """Peak RSS (MiB) of a process tree, sampled on a thread: the largest single process and the sum."""

    def __init__(self, pid: int, every_s: float = 0.2) -> None:
        self.root = psutil.Process(pid)
        self.every_s = every_s
        self.largest = 0.0
        self.total = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except psutil.NoSuchProcess:
                return
            rss = []
            for p in procs:
                try:
                    rss.append(p.memory_info().rss / 2**20)
                except psutil.Error:
                    pass
            if rss:
                self.largest = max(self.largest, max(rss))
                self.total = max(self.total, sum(rss))
            self._stop.wait(self.every_s)

    def stop(self) -> tuple[float, float]:
        self._stop.set()
        self._thread.join()
        return round(self.largest, 1), round(self.total, 1)


def write_data(folder: Path) -> tuple[Path, Path]:
    """Synthetic SFT chains and RL problems (the toolkit's generator, fixed seed)."""
    import pandas as pd

    from e2c.data.io import write_parquet
    from e2c.data.synthetic.generate import generate, rows_by_split

    folder.mkdir(parents=True, exist_ok=True)
    samples, _ = generate(200, seed=0)
    split = rows_by_split(samples)
    sft = write_parquet(split["sft"], folder / "sft.parquet")
    rl = folder / "rl.parquet"
    pd.DataFrame(split["rl"]).to_parquet(rl)
    return sft, rl


def run_arm(
    arm: str, model: str, steps: int, rank: int, data: tuple[Path, Path], out: Path
) -> dict[str, Any]:
    sft_data, rl_data = data
    run_dir = out / arm
    lora = ["--lora-rank", str(rank)] if arm.endswith("-lora") else []
    if arm.startswith("sft"):
        cmd = [sys.executable, "-m", "e2c.sft.run", "--model", model, "--gpus", "0", "--steps", str(steps)]
        cmd += ["--train-data", str(sft_data), "--val-data", "none", "--output-dir", str(run_dir), "--force"]
        cmd += [*lora, "--logger", "console"]
    else:
        cmd = [sys.executable, "-m", "e2c.rl.launch", "--stage", "1", "--model", model, "--steps", str(steps)]
        cmd += ["--train-data", str(rl_data), "--val-data", str(rl_data), "--output-dir", str(run_dir)]
        cmd += [*lora, "--logger", "console", "--", "trainer.val_before_train=false", "trainer.save_freq=-1"]
        if run_dir.exists():  # a fresh run, not a resume
            import shutil

            shutil.rmtree(run_dir)
    env = {**os.environ, "E2C_FORCE_CPU": "1"}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    log = out / f"{arm}.log"
    t0 = time.monotonic()
    with open(log, "w") as f:
        proc = subprocess.Popen(cmd, cwd=project_root(), env=env, stdout=f, stderr=subprocess.STDOUT)
        peak = TreePeak(proc.pid)
        rc = proc.wait()
        largest, total = peak.stop()
    if rc != 0:
        raise SystemExit(f"error: arm {arm} failed (exit {rc}); its output is in {log}")
    metrics = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    res: dict[str, Any] = {"arm": arm, "wall_s": round(time.monotonic() - t0, 1), "peak_largest_mib": largest}
    res["peak_tree_mib"] = total
    later = [m["data"] for m in metrics if m.get("step", 0) > 1]
    if arm.startswith("sft"):
        summary = json.loads(log.read_text().strip().splitlines()[-1])
        res["s_per_step"] = round(summary["seconds_per_step"], 2)
    else:
        res["s_per_step"] = round(sum(m["timing_s/step"] for m in later) / len(later), 2)
        res["update_s_per_step"] = round(sum(m["timing_s/update_actor"] for m in later) / len(later), 2)
    res["trainable_params"] = trainable_params(model, rank if lora else 0)
    return res


def trainable_params(model: str, rank: int) -> int:
    """Parameters an optimizer updates: every weight, or with ``rank`` > 0 those of PEFT's adapter on every
    linear layer (built on the meta device, as verl builds it)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from e2c.core.models import resolve_model

    with torch.device("meta"):
        m = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(resolve_model(model).path))
    if rank:
        from peft import LoraConfig, get_peft_model

        m = get_peft_model(m, LoraConfig(r=rank, lora_alpha=2 * rank, target_modules="all-linear"))
    return sum(p.numel() for p in m.parameters() if p.requires_grad)


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog="python bench/lora_cost.py", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--model", type=MODEL, default="embedded", help="model: tiny|embedded|folder (default: embedded)"
    )
    p.add_argument(
        "--steps",
        type=whole(2, 100_000),
        default=4,
        help="optimizer steps per arm, at least 2: the first is not timed (default: 4)",
    )
    p.add_argument(
        "--rank",
        type=whole(1, 4096),
        default=16,
        help="LoRA rank of the -lora arms; alpha is 2 x rank (default: 16)",
    )
    p.add_argument(
        "--arms",
        type=NameList(ARMS, "arm"),
        default=",".join(ARMS),
        help=f"comma-separated, from {', '.join(ARMS)} (default: all)",
    )
    p.add_argument(
        "--out",
        type=OUTPUT_DIR,
        default="bench_results/lora_cost",
        help="results folder (default: bench_results/lora_cost)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    arms = args.arms
    checks_done()
    out = Path(args.out).resolve()
    data = write_data(out / "data")
    results = []
    for arm in arms:
        done = out / f"{arm}.json"
        if done.is_file() and json.loads(done.read_text()).get("config") == [
            args.model,
            args.steps,
            args.rank,
        ]:
            results.append(json.loads(done.read_text()))
            print(f"[lora-cost] {arm}: measured before, reused", flush=True)
            continue
        print(f"[lora-cost] {arm}: running {args.steps} steps on {args.model}", flush=True)
        res = {
            **run_arm(arm, args.model, args.steps, args.rank, data, out),
            "config": [args.model, args.steps, args.rank],
        }
        done.write_text(json.dumps(res))
        results.append(res)
    print(
        f"\n{'arm':<10} {'s/step':>7} {'update s':>9} {'peak trainer MiB':>17} {'peak tree MiB':>14} {'trainable':>12}"
    )
    for r in results:
        upd = r.get("update_s_per_step")
        print(
            f"{r['arm']:<10} {r['s_per_step']:>7} {upd if upd is not None else '-':>9} {r['peak_largest_mib']:>17} "
            f"{r['peak_tree_mib']:>14} {r['trainable_params'] or '-':>12}"
        )
    print(json.dumps({"model": args.model, "steps": args.steps, "rank": args.rank, "arms": results}))
    return 0


if __name__ == "__main__":
    run_main(main)
