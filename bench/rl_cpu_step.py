"""One GRPO step on the embedded SmolLM2-135M on this CPU: step time and its generation share.

    python bench/rl_cpu_step.py [--model embedded] [--prompts 8] [--n 4] [--max-tokens 100] [--steps 3]

Runs the real launcher (``python -m e2c.rl.launch``: verl's trainer, the batched ``hf`` rollout, the e2c
agent loop and reward manager) on GSM8K prompts from ``../shared/data/benchmarks`` and reads verl's own
per-step timings from ``<run>/metrics.jsonl``. The first step also pays warm-up (first weight push,
allocator growth), so the summary is the median over the later steps. Target: at most 60 s per
step; a one-request-at-a-time rollout measured ~270 s, 75% of it generating.

``logp gap`` is verl's mean |p_trainer - p_rollout| per token: the bf16 trainer and the rollout compute
the same policy (under 0.01 here), so the trained log-probs are on-policy.

Prints a table of steps, then one JSON line.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from e2c.commandline.argtypes import EXISTING_DIR, MODEL, OUTPUT_DIR, whole
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.parsing import ArgumentParser
from e2c.core.errors import UserError
from e2c.core.paths import project_root
from e2c.data.io import write_parquet
from e2c.data.paper import rl_rows
from e2c.data.records import Record
from e2c.data.registry import load_benchmark

ROOT = project_root()
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "benchmarks"
TARGET_S = 60.0
# New tokens per response: no model this toolkit runs has a context past 128K tokens.
MAX_NEW_TOKENS = 131_072


def gsm8k_records(data_dir: Path, n: int) -> list[Record]:
    """The first ``n`` GSM8K problems of ``data_dir``; fewer is refused (one epoch must hold every step)."""
    records = load_benchmark("gsm8k", data_dir, n, use_hub=False)
    if len(records) < n:
        raise UserError(
            f"--prompts x --steps asks for {n} GSM8K problems; {data_dir} holds {len(records)} "
            "(one epoch must hold every step)"
        )
    return records


def gsm8k_rl_parquet(records: list[Record], path: Path) -> Path:
    """GSM8K problems as verl RL rows (the project's E2C prompt and grader fields)."""
    rows, _ = rl_rows(
        [{"question": r.problem, "answer": r.answer, "data_source": "gsm8k"} for r in records], source="gsm8k"
    )
    return write_parquet(rows, path)


def check_overrides(overrides: list[str]) -> None:
    """Hydra overrides have the form ``key=value`` (``+key=value``, ``~key``); anything else would only be
    refused by the launcher, with its words buried in the run's log."""
    for o in overrides:
        key = o.split("=", 1)[0].lstrip("+~")
        if not key.strip() or ("=" not in o and not o.startswith("~")):
            raise UserError(f"override {o!r} is not KEY=VALUE (give Hydra overrides after --)")


def read_steps(metrics: Path) -> list[dict]:
    """Per-step timing rows from verl's file logger."""
    out = []
    for line in metrics.read_text().splitlines():
        if not line.strip():
            continue
        rec = json.loads(line)
        d = rec["data"]
        out.append(
            {
                "step": rec["step"],
                "step_s": d["timing_s/step"],
                "gen_s": d.get("timing_s/gen", 0.0),
                "old_log_prob_s": d.get("timing_s/old_log_prob", 0.0),
                "update_s": d.get("timing_s/update_actor", 0.0),
                "response_tokens": d.get("response_length/mean", 0.0),
                # trainer vs rollout log-prob gap: a check that both compute the same model
                "probs_diff": d.get("training/rollout_probs_diff_mean", float("nan")),
            }
        )
    return out


def run(args: list[str], env: dict[str, str], log: Path) -> int:
    with log.open("w") as fh:
        return subprocess.call(args, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT, env=env)


def build_parser() -> ArgumentParser:
    ap = ArgumentParser(prog="bench/rl_cpu_step.py", description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--model", type=MODEL, default="embedded", help="model spec (default: embedded SmolLM2-135M)"
    )
    ap.add_argument(
        "--data-dir",
        type=EXISTING_DIR,
        default=DEFAULT_DATA,
        help="folder with gsm8k.jsonl (default: ../shared)",
    )
    ap.add_argument("--prompts", type=whole(1, 100_000), default=8, help="prompts per step (default: 8)")
    ap.add_argument("--n", type=whole(1, 1024), default=4, help="samples per prompt (default: 4)")
    ap.add_argument(
        "--max-tokens", type=whole(1, MAX_NEW_TOKENS), default=100, help="max response tokens (default: 100)"
    )
    ap.add_argument("--steps", type=whole(1, 100_000), default=3, help="training steps (default: 3)")
    ap.add_argument("--algo", choices=("grpo", "dapo"), default="grpo", help="algorithm (default: grpo)")
    ap.add_argument(
        "--stage", type=int, choices=(1, 2), default=2, help="config stage (default: 2, weighted)"
    )
    ap.add_argument(
        "--keep", type=OUTPUT_DIR, default=None, help="keep the run folder here (default: a temp folder)"
    )
    ap.add_argument("overrides", nargs="*", help="extra Hydra overrides for the run, after --")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    check_overrides(args.overrides)
    # One epoch must hold every step (stage 2 runs 2 epochs; verl stops when the data runs out).
    records = gsm8k_records(args.data_dir, args.prompts * args.steps)
    checks_done()

    tmp = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="e2c_rl_bench_"))
    tmp.mkdir(parents=True, exist_ok=True)
    data = gsm8k_rl_parquet(records, tmp / "gsm8k_rl.parquet")
    run_dir = tmp / "run"
    cmd = [sys.executable, "-m", "e2c.rl.launch", "--algo", args.algo, "--stage", str(args.stage)]
    cmd += ["--model", args.model, "--train-data", str(data), "--val-data", str(data)]
    cmd += ["--output-dir", str(run_dir), "--steps", str(args.steps), "--save-freq", "-1", "--"]
    cmd += [
        f"data.train_batch_size={args.prompts}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={args.prompts}",
        f"actor_rollout_ref.rollout.n={args.n}",
        f"data.max_response_length={args.max_tokens}",
        f"reward.reward_kwargs.overlong_buffer_cfg.len={max(1, args.max_tokens // 4)}",
        *args.overrides,
    ]
    print(
        f"[rl_cpu_step] {args.algo} stage {args.stage}, {args.model}: {args.prompts} prompts x {args.n} "
        f"samples x <= {args.max_tokens} tokens, {args.steps} steps; log {tmp / 'train.log'}",
        flush=True,
    )
    t0 = time.perf_counter()
    rc = run(cmd, dict(os.environ), tmp / "train.log")
    wall = time.perf_counter() - t0
    metrics = run_dir / "metrics.jsonl"
    if rc != 0 or not metrics.is_file():
        sys.exit(f"rl_cpu_step: training failed (exit {rc}); see {tmp / 'train.log'}")
    steps = read_steps(metrics)
    head = (
        f"{'step':>4} {'step s':>8} {'gen s':>8} {'gen %':>6} {'logp s':>7} {'update s':>9} {'resp tok':>9}"
    )
    print(head + f" {'logp gap':>9}")
    for s in steps:
        share = 100 * s["gen_s"] / s["step_s"] if s["step_s"] else 0.0
        print(
            f"{s['step']:>4} {s['step_s']:>8.1f} {s['gen_s']:>8.1f} {share:>6.1f} {s['old_log_prob_s']:>7.1f} "
            f"{s['update_s']:>9.1f} {s['response_tokens']:>9.1f} {s['probs_diff']:>9.4f}"
        )
    later = steps[1:] or steps
    step_s = statistics.median(s["step_s"] for s in later)
    gen_s = statistics.median(s["gen_s"] for s in later)
    tokens = statistics.median(s["response_tokens"] for s in later) * args.prompts * args.n
    result = {
        "bench": "rl_cpu_step",
        "model": args.model,
        "algo": args.algo,
        "prompts": args.prompts,
        "n": args.n,
        "max_tokens": args.max_tokens,
        "steps": len(steps),
        "median_step_s": round(step_s, 2),
        "median_gen_s": round(gen_s, 2),
        "gen_share": round(gen_s / step_s, 3) if step_s else None,
        "gen_tokens_per_s": round(tokens / gen_s, 1) if gen_s else None,
        "target_s": TARGET_S,
        "meets_target": step_s <= TARGET_S,
        "wall_s": round(wall, 1),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    run_main(main)
