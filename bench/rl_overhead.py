"""Cost of the E2C trainer: GRPO with exploration-token weighting against plain verl GRPO, same tiny setup.

    python bench/rl_overhead.py [--model tiny] [--steps 6] [--explore-adv-coef 2.0]

Two real runs through ``python -m e2c.rl.launch`` on the same synthetic prompts, model, seed and CPU
preset; they differ only in the trainer: ``e2c_sync`` (weighting x coef, segment metrics) against verl's
stock ``sync`` trainer (no weighting). verl's per-step timings come from each run's ``metrics.jsonl``;
the first step (warm-up) is dropped and medians are compared:

- ``timing_s/adv``: the advantage stage, which is where the weighting runs (read back from the transfer
  queue, scale, write back, metrics);
- ``timing_s/step``: the whole step. With a sampling policy, generation lengths differ between the arms,
  so this ratio carries noise from generation; the advantage stage is the like-for-like number.

Prints a table, then one JSON line.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from e2c.commandline.argtypes import MODEL, at_least, whole
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.parsing import ArgumentParser
from e2c.core.paths import project_root
from e2c.data.io import write_parquet

ROOT = project_root()


def synthetic_rl_parquet(path: Path, n: int = 32) -> Path:
    """Arithmetic prompts in verl's RL row layout (the grader checks the boxed sum)."""
    rows = [
        {
            "prompt": [
                {"role": "user", "content": f"What is {3 + i} + {4 + 2 * i}? Put the answer in \\boxed{{}}."}
            ],
            "data_source": "synthetic/arithmetic",
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": str(7 + 3 * i)},
            "extra_info": {"index": i, "kind": "math"},
        }
        for i in range(n)
    ]
    return write_parquet(rows, path)


def arm(name: str, trainer_mode: str, args, data: Path, tmp: Path) -> list[dict]:
    """One training run; returns its per-step metrics."""
    run_dir = tmp / name
    cmd = [sys.executable, "-m", "e2c.rl.launch", "--stage", "2", "--model", args.model]
    cmd += ["--train-data", str(data), "--val-data", str(data), "--output-dir", str(run_dir)]
    cmd += [
        "--steps",
        str(args.steps),
        "--save-freq",
        "-1",
        "--explore-adv-coef",
        str(args.explore_adv_coef),
        "--",
    ]
    cmd += [f"trainer.v1.trainer_mode={trainer_mode}", f"actor_rollout_ref.rollout.seed={args.seed}"]
    cmd += [f"data.seed={args.seed}"]
    print(f"[rl_overhead] {name}: trainer {trainer_mode}, {args.steps} steps", flush=True)
    with (tmp / f"{name}.log").open("w") as fh:
        rc = subprocess.call(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT, env=dict(os.environ))
    metrics = run_dir / "metrics.jsonl"
    if rc != 0 or not metrics.is_file():
        sys.exit(f"rl_overhead: the {name} run failed (exit {rc}); see {tmp / f'{name}.log'}")
    return [json.loads(line)["data"] for line in metrics.read_text().splitlines() if line.strip()]


def median_of(steps: list[dict], key: str) -> float:
    later = steps[1:] or steps
    return statistics.median(float(s.get(key, 0.0)) for s in later)


def build_parser() -> ArgumentParser:
    ap = ArgumentParser(prog="bench/rl_overhead.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=MODEL, default="tiny", help="model spec (default: tiny)")
    ap.add_argument(
        "--steps",
        type=whole(2, 100_000),
        default=6,
        help="steps per arm, at least 2: the first is warm-up and is dropped (default: 6)",
    )
    ap.add_argument(
        "--explore-adv-coef",
        type=at_least(0.0),
        default=2.0,
        help="exploration advantage weight (default: 2.0)",
    )
    ap.add_argument("--seed", type=whole(0), default=0, help="data and rollout seed (default: 0)")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    checks_done()

    tmp = Path(tempfile.mkdtemp(prefix="e2c_rl_overhead_"))
    data = synthetic_rl_parquet(tmp / "rl.parquet")
    plain = arm("plain", "sync", args, data, tmp)
    weighted = arm("weighted", "e2c_sync", args, data, tmp)
    if "e2c/explore_adv_coef" not in weighted[-1] or "e2c/explore_adv_coef" in plain[-1]:
        sys.exit("rl_overhead: the arms did not run the intended trainers (e2c/* metrics misplaced)")

    keys = ("timing_s/step", "timing_s/gen", "timing_s/adv", "timing_s/update_actor")
    print(f"{'median over steps 2..':<24} {'plain':>10} {'weighted':>10} {'ratio':>7}")
    res = {}
    for key in keys:
        p, w = median_of(plain, key), median_of(weighted, key)
        res[key] = (p, w)
        print(f"{key:<24} {p:>10.3f} {w:>10.3f} {w / p if p else float('nan'):>7.3f}")
    p_step, w_step = res["timing_s/step"]
    p_adv, w_adv = res["timing_s/adv"]
    result = {
        "bench": "rl_overhead",
        "model": args.model,
        "steps": args.steps,
        "explore_adv_coef": args.explore_adv_coef,
        "step_s_plain": round(p_step, 3),
        "step_s_weighted": round(w_step, 3),
        "step_ratio": round(w_step / p_step, 3),
        "adv_s_plain": round(p_adv, 4),
        "adv_s_weighted": round(w_adv, 4),
        "adv_overhead_s": round(w_adv - p_adv, 4),
        "adv_overhead_share_of_step": round((w_adv - p_adv) / w_step, 4),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    run_main(main)
