"""Training at the machine's speed: SFT and RL steps of the quickstart's shape against this CPU's compute floor.

    python bench/train_speed.py [--model embedded] [--sft-steps 6] [--rl-steps 5] [--arms before,now,unheld]
        [--rl-prompts 2]

Each arm runs the quickstart's own commands (``scripts/e2c_sft.sh`` with its SFT settings, 8 chains a step;
``scripts/e2c_rl.sh --stage 2`` with its RL settings, 2 prompts x 8 samples, from the same SFT model for both
arms; the reward ``credit``, so that more groups differ and more steps run their update: a step whose groups
all scored alike skips it, and the update's median is over the steps that ran one) on the quickstart's
synthetic data, one after the other, nothing else running:

- ``before``: the CPU set-up of eea892c, restored by overrides: plain ``sdpa`` (a packed SFT row attends
  through a block-diagonal mask), the RL update padded (``use_remove_padding=false``), bf16 autocast
  (``E2C_TRAIN_DTYPE=bf16``), glibc's allocator with ``MALLOC_MMAP_THRESHOLD_`` (what a fresh install
  ran, where no system jemalloc was found) and the weight sync through ray's object store
  (``E2C_ROLLOUT_SYNC_VIA=ray``);
- ``now``: the defaults;
- ``unheld`` (RL only, not run by default): ``now`` with jemalloc's own decay in the actor workers
  (``e2c.hold_freed_pages=false``), the A/B of :func:`e2c.rl.memory.hold_freed_pages`;
- ``jemalloc`` (SFT only, not run by default): ``now`` with jemalloc preloaded in the SFT trainer (the RL
  workers have it already), the A/B that kept the SFT trainer on glibc.

The floor is the step's useful work over this CPU's matmul rate, both measured here: the forward and backward
FLOPs of the real tokens (6 x the model's matmul weights per token, the lm head included, plus causal
attention at the mean sequence length), over the rate of a GEMM chain of the model's own shapes (one layer
and the lm head, 2,048 rows), timed in this run in bf16 and fp32; the floor takes the faster (on a CPU
without native bf16 units, fp32). The RL update's work counts its forward and backward only (the old
log-prob pass is skipped on policy); generation has no floor (its cost is per decoding step, not per FLOP).

SFT step times are the gaps between the steps' records in the run's ``metrics.jsonl`` (the first step, with
its warm-up, dropped); RL timings are verl's own (``timing_s/*``, first step dropped). The RL actor worker's
user and system CPU seconds are read from ``/proc`` while it runs. Prints a table, then one JSON line.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from e2c.commandline.argtypes import MODEL, OUTPUT_DIR, NameList, whole
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.parsing import ArgumentParser
from e2c.core.errors import UserError
from e2c.core.paths import project_root
from e2c.rl.memory import ModelShape, model_shape

ROOT = project_root()
ARMS = ("before", "now", "unheld", "jemalloc")
SFT_ARMS = ("before", "now", "jemalloc")  # unheld's SFT is now's: it differs in the RL update only
RL_ARMS = ("before", "now", "unheld")  # jemalloc's RL is now's: the RL workers already preload it
# What the CPU set-up of eea892c ran, as overrides of today's (the module docstring).
BEFORE_SFT = ["model.override_config.attn_implementation=sdpa"]
BEFORE_RL = [
    "actor_rollout_ref.model.override_config.attn_implementation=sdpa",
    "actor_rollout_ref.model.use_remove_padding=false",
]
BEFORE_ENV = {"E2C_TRAIN_DTYPE": "bf16", "MALLOC_MMAP_THRESHOLD_": "1048576", "E2C_ROLLOUT_SYNC_VIA": "ray"}
# now's set-up with jemalloc's own decay in the actor workers (e2c.rl.memory.hold_freed_pages off)
UNHELD_RL = ["e2c.hold_freed_pages=false"]
GEMM_ROWS = 2048


def gemm_rate(shape: ModelShape, dtype: str, seconds: float = 3.0) -> float:
    """FLOP/s of one layer's matmuls and the lm head on ``GEMM_ROWS`` rows in ``dtype`` on this CPU."""
    import torch

    dt = {"bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
    h, i, d = shape.hidden, shape.intermediate, shape.head_dim
    g = torch.Generator().manual_seed(0)
    x = torch.randn(GEMM_ROWS, h, generator=g).to(dt)
    y = torch.randn(GEMM_ROWS, i, generator=g).to(dt)
    weights = [
        (x, torch.randn(h, n, generator=g).to(dt))
        for n in (shape.heads * d, shape.kv_heads * d, shape.kv_heads * d, h, i, i, shape.vocab)
    ] + [(y, torch.randn(i, h, generator=g).to(dt))]
    flops = sum(2 * a.shape[0] * a.shape[1] * w.shape[1] for a, w in weights)
    for a, w in weights:  # warm-up
        a @ w
    runs, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for a, w in weights:
            a @ w
        runs += 1
    return flops * runs / (time.perf_counter() - t0)


@dataclass
class ProcWatch:
    """User and system CPU seconds and peak RSS (``VmHWM``) of ray's worker processes, by process title,
    sampled from /proc."""

    last: dict[int, tuple[str, float, float]] = field(default_factory=dict)
    peak: dict[int, int] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)

    def sample(self) -> None:
        tick = os.sysconf("SC_CLK_TCK")
        for p in Path("/proc").iterdir():
            if not p.name.isdigit():
                continue
            try:
                title = (p / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
                if not title.startswith("ray::"):
                    continue
                fields = (p / "stat").read_text().rsplit(")", 1)[1].split()
                status = (p / "status").read_text()
            except OSError:
                continue
            self.last[int(p.name)] = (title, int(fields[11]) / tick, int(fields[12]) / tick)
            for line in status.splitlines():
                if line.startswith("VmHWM:"):
                    self.peak[int(p.name)] = int(line.split()[1]) * 1024

    def run(self) -> None:
        while not self.stop.wait(1.0):
            self.sample()

    def peak_rss(self, title: str) -> int:
        """The highest peak RSS, in bytes, of the processes titled ``title``."""
        return max((self.peak.get(pid, 0) for pid, v in self.last.items() if v[0] == title), default=0)

    def by_title(self) -> dict[str, tuple[float, float]]:
        out: dict[str, tuple[float, float]] = {}
        for title, user, system in self.last.values():
            u, s = out.get(title, (0.0, 0.0))
            out[title] = (u + user, s + system)
        return out


def watch_metrics(path: Path, stamps: dict[int, float], done: threading.Event) -> None:
    """Record when each step's record appears in ``metrics.jsonl``."""
    seen = 0
    while not done.wait(0.2):
        if not path.is_file():
            continue
        lines = path.read_text().splitlines()
        for line in lines[seen:]:
            try:
                stamps.setdefault(int(json.loads(line)["step"]), time.monotonic())
            except (ValueError, KeyError, TypeError):
                pass
        seen = len(lines)


def arm_env(arm: str) -> dict[str, str]:
    """This process's environment with the arm's settings: ``before``'s variables set, ``now`` without them
    (a variable of yours that ``before`` sets would otherwise change ``now``)."""
    env = {k: v for k, v in os.environ.items() if k not in BEFORE_ENV}
    if arm == "jemalloc":
        from e2c.rl.memory import find_jemalloc

        jemalloc = find_jemalloc()
        if jemalloc is None:
            raise UserError("the jemalloc arm needs jemalloc: none in the system's folders or ray's wheel")
        return {**env, "LD_PRELOAD": jemalloc}
    return {**env, **BEFORE_ENV} if arm == "before" else env


def run_logged(cmd: list[str], env: dict[str, str], log: Path) -> int:
    with log.open("w") as fh:
        return subprocess.call(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT, env=env)


def later(values: list[float]) -> float:
    """Median without the first step (its warm-up)."""
    return statistics.median(values[1:] or values)


def sft_arm(
    arm: str, qcfg: Any, data: Path, out: Path, steps: int, shape: ModelShape, env: dict[str, str]
) -> dict:
    from e2c.quickstart.stages import sft_overrides

    out.mkdir(parents=True, exist_ok=True)
    overrides = [o for o in sft_overrides(qcfg, steps=steps) if not o.startswith("trainer.save_freq=")]
    overrides += [f"trainer.save_freq={steps}", *(BEFORE_SFT if arm == "before" else [])]
    cmd = ["bash", str(ROOT / "scripts" / "e2c_sft.sh"), *overrides]
    run_env = {
        **env,
        "MODEL_PATH": qcfg.model,
        "TRAIN_DATA": str(data),
        "VAL_DATA": "none",
        "OUTPUT_DIR": str(out),
        "TOTAL_TRAINING_STEPS": str(steps),
    }
    stamps: dict[int, float] = {}
    done = threading.Event()
    watcher = threading.Thread(target=watch_metrics, args=(out / "metrics.jsonl", stamps, done), daemon=True)
    watcher.start()
    t0 = time.monotonic()
    rc = run_logged(cmd, run_env, out / "log.txt")
    wall = time.monotonic() - t0
    done.set()
    watcher.join()
    if rc != 0:
        raise UserError(f"SFT ({arm}) failed with exit {rc}: see {out / 'log.txt'}")
    records = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if x.strip()]
    by_step = {int(r["step"]): r["data"] for r in records}
    ordered = sorted(stamps)
    gaps = [stamps[b] - stamps[a] for a, b in pairwise(ordered)]
    if not gaps:
        raise UserError(
            f"SFT ({arm}) ran no new steps in {out} (kept from an earlier run?): pass a new --keep"
        )
    tokens = [float(by_step[s].get("train/global_tokens", 0)) for s in ordered[1:]]
    step_s, tok = statistics.median(gaps), statistics.median(tokens)
    mean_len = tok / qcfg.sft_batch
    work = 3 * shape.forward_flops(tok, mean_len)
    return {
        "step_s": round(step_s, 2),
        "steps_s": [round(g, 2) for g in gaps],
        "tokens": round(tok),
        "tflop": round(work / 1e12, 3),
        "gflops": round(work / step_s / 1e9, 1),
        "losses": [round(float(by_step[s]["train/loss"]), 4) for s in sorted(by_step)],
        "wall_s": round(wall, 1),
        "model": str(out / "final"),
    }


def rl_arm(
    arm: str, qcfg: Any, model: str, data: Path, out: Path, steps: int, shape: ModelShape, env: dict[str, str]
) -> dict:
    from e2c.quickstart.stages import rl_overrides

    cmd = [
        sys.executable,
        "-m",
        "e2c.rl.launch",
        "--stage",
        "2",
        "--model",
        model,
        "--train-data",
        str(data),
        "--val-data",
        str(data),
        "--output-dir",
        str(out),
        "--steps",
        str(steps),
        "--save-freq",
        "-1",
        "--explore-adv-coef",
        f"{qcfg.rl_explore_adv_coef:g}",
        "--",
        *rl_overrides(qcfg),
        *{"before": BEFORE_RL, "unheld": UNHELD_RL}.get(arm, []),
    ]
    out.mkdir(parents=True, exist_ok=True)
    watch = ProcWatch()
    thread = threading.Thread(target=watch.run, daemon=True)
    thread.start()
    t0 = time.monotonic()
    rc = run_logged(cmd, env, out.parent / f"{out.name}.log")
    wall = time.monotonic() - t0
    watch.stop.set()
    thread.join()
    if rc != 0:
        raise UserError(f"RL ({arm}) failed with exit {rc}: see {out.parent / f'{out.name}.log'}")
    rows = [json.loads(x)["data"] for x in (out / "metrics.jsonl").read_text().splitlines() if x.strip()]
    samples = qcfg.rl_batch * qcfg.rl_n
    get = lambda key: [float(r.get(key, 0.0)) for r in rows]  # noqa: E731
    step_s, gen_s = later(get("timing_s/step")), later(get("timing_s/gen"))
    # A step where every group scored alike skips its update (e2c.rl.trainer): the update's median is over
    # the steps that ran one.
    skipped = get("health/update_skipped")
    updated = lambda key: [v for v, s in zip(get(key), skipped) if not s]  # noqa: E731
    updates = updated("timing_s/update_actor")
    upd_s = later(updates) if updates else 0.0
    syncs = updated("timing_s/update_weights")
    ran = updated("timing_s/step")
    prompt, response = later(get("prompt_length/mean")), later(get("response_length/mean"))
    seq = prompt + response
    update_work = 3 * shape.forward_flops(samples * seq, seq)
    gen_work = shape.forward_flops(samples * seq, seq)  # prefill and every decoded token once
    titles = watch.by_title()
    actor = max(
        ((t, us) for t, us in titles.items() if "actor" in t.lower() or "WorkerDict" in t),
        key=lambda kv: kv[1][0] + kv[1][1],
        default=("", (0.0, 0.0)),
    )
    user, system = actor[1]
    return {
        "step_s": round(step_s, 2),
        "steps_s": [round(x, 1) for x in get("timing_s/step")],
        # the step's median over the steps that ran their update (the quickstart's RL steps mostly do)
        "step_with_update_s": round(later(ran), 2) if ran else None,
        "skipped_updates": int(sum(skipped)),
        "gen_s": round(gen_s, 2),
        "update_s": round(upd_s, 2),
        "updates_s": [round(x, 1) for x in updates],
        "old_log_prob_s": round(later(get("timing_s/old_log_prob")), 2),
        # the weight sync after the steps that ran their update (a skipped one sends nothing)
        "sync_s": round(later(syncs), 2) if syncs else None,
        "samples": samples,
        "update_tokens": round(samples * seq),
        "response_mean": round(response, 1),
        "update_tflop": round(update_work / 1e12, 3),
        "update_gflops": round(update_work / upd_s / 1e9, 1) if upd_s else None,
        "gen_gflops": round(gen_work / gen_s / 1e9, 1) if gen_s else None,
        "rewards": [round(x, 4) for x in get("critic/score/mean")],
        "actor_process": actor[0][:60],
        "actor_user_s": round(user, 1),
        "actor_sys_s": round(system, 1),
        "actor_sys_share": round(system / (user + system), 3) if user + system else None,
        "actor_peak_rss_gib": round(watch.peak_rss(actor[0]) / 2**30, 2),
        "wall_s": round(wall, 1),
    }


def build_parser() -> ArgumentParser:
    ap = ArgumentParser(prog="bench/train_speed.py", description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--model", type=MODEL, default="embedded", help="model spec (default: embedded SmolLM2-135M)"
    )
    ap.add_argument("--sft-steps", type=whole(2, 1000), default=6, help="SFT steps per arm (default: 6)")
    ap.add_argument("--rl-steps", type=whole(1, 1000), default=5, help="RL steps per arm (default: 5)")
    ap.add_argument(
        "--arms",
        type=NameList(ARMS, "arm"),
        default=list(SFT_ARMS),
        help="comma-separated arms of: before, now, unheld (now's RL with e2c.hold_freed_pages=false), "
        "jemalloc (now's SFT with jemalloc preloaded) (default: before,now)",
    )
    ap.add_argument(
        "--rl-prompts",
        type=whole(1, 64),
        default=2,
        help="RL prompts per step, 8 samples each (default: 2, the quickstart's 16 samples; 4: the study's 32)",
    )
    ap.add_argument(
        "--rl-start",
        type=MODEL,
        default=None,
        help="the RL arms' start model (default: the last arm's SFT model; a start that never scores skips "
        "every update: use one with signal, e.g. a quickstart's sft/final)",
    )
    ap.add_argument(
        "--keep", type=OUTPUT_DIR, default=None, help="keep the runs here (default: a temp folder)"
    )
    return ap


def main(argv: list[str] | None = None) -> int:
    from e2c.quickstart.config import Config
    from e2c.quickstart.context import Context
    from e2c.quickstart.data import stage_data
    from e2c.quickstart.progress import Reporter

    args = build_parser().parse_args(argv)
    arms = args.arms
    checks_done()
    from e2c.core.models import resolve_model

    folder = resolve_model(args.model).path
    shape = model_shape(folder)
    if shape is None:
        raise UserError(f"{folder}/config.json does not give the model's shape")
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="e2c_train_speed_"))
    # The reward "credit" (0.1 for a well-formed chain with a wrong answer) gives a start that rarely answers
    # right groups with unequal rewards, so the steps run their update (one with equal rewards skips it);
    # the update's cost does not depend on the rewards' values.
    qcfg = Config(model=folder, rl_reward_shape="credit", rl_batch=args.rl_prompts)
    ctx = Context(qcfg, base.resolve())
    if not (ctx.data_dir / "sft.parquet").is_file():
        stage_data(ctx, Reporter("data", 1, 1, 30.0))
    rates = {dt: gemm_rate(shape, dt) for dt in ("bf16", "fp32")}
    floor_rate = max(rates.values())
    print(
        f"[train_speed] GEMM of the model's shapes: bf16 {rates['bf16'] / 1e9:.0f}, fp32 {rates['fp32'] / 1e9:.0f} "
        f"GFLOP/s; floor at {floor_rate / 1e9:.0f}; runs in {base}",
        flush=True,
    )
    results: dict[str, dict] = {}
    for arm in [a for a in arms if a in SFT_ARMS]:
        env = arm_env(arm)
        print(f"[train_speed] {arm}: SFT {args.sft_steps} steps", flush=True)
        sft = sft_arm(arm, qcfg, ctx.data_dir / "sft.parquet", base / arm / "sft", args.sft_steps, shape, env)
        sft["floor_s"] = round(sft["tflop"] * 1e12 / floor_rate, 2)
        sft["ratio"] = round(sft["step_s"] / sft["floor_s"], 2)
        results[arm] = {"sft": sft}
        print(f"[train_speed] {arm}: SFT {sft['step_s']} s a step ({sft['ratio']}x the floor)", flush=True)
    if args.rl_start is None and not results:
        raise UserError("the unheld arm trains no SFT model: pass --rl-start or add an SFT arm (before, now)")
    start = args.rl_start or list(results.values())[-1]["sft"]["model"]  # one start model for every RL arm
    for arm in [a for a in arms if a in RL_ARMS]:
        env = arm_env(arm)
        print(f"[train_speed] {arm}: RL {args.rl_steps} steps from {start}", flush=True)
        rl = rl_arm(
            arm, qcfg, start, ctx.data_dir / "rl.parquet", base / arm / "rl", args.rl_steps, shape, env
        )
        rl["update_floor_s"] = round(rl["update_tflop"] * 1e12 / floor_rate, 2)
        rl["update_ratio"] = round(rl["update_s"] / rl["update_floor_s"], 2) if rl["update_s"] else None
        results.setdefault(arm, {})["rl"] = rl
    print(
        f"{'arm':<7} {'phase':<10} {'median s':>9} {'work TFLOP':>11} {'GFLOP/s':>8} {'floor s':>8} {'ratio':>6}"
    )
    for arm, r in results.items():
        if "sft" in r:
            s = r["sft"]
            print(
                f"{arm:<7} {'SFT step':<10} {s['step_s']:>9} {s['tflop']:>11} {s['gflops']:>8} {s['floor_s']:>8} "
                f"{s['ratio']:>6}"
            )
        if "rl" in r:
            x = r["rl"]
            print(
                f"{arm:<7} {'RL update':<10} {x['update_s']:>9} {x['update_tflop']:>11} {x['update_gflops']:>8} "
                f"{x['update_floor_s']:>8} {x['update_ratio']:>6}"
            )
            print(f"{arm:<7} {'RL gen':<10} {x['gen_s']:>9} {'':>11} {x['gen_gflops']:>8} {'-':>8} {'-':>6}")
            print(f"{arm:<7} {'RL sync':<10} {x['sync_s']!s:>9}")
            print(
                f"{arm:<7} {'RL step':<10} {x['step_s']:>9}   with an update {x['step_with_update_s']} s "
                f"({x['skipped_updates']} skipped); actor worker's system share {x['actor_sys_share']}, "
                f"peak RSS {x['actor_peak_rss_gib']} GiB"
            )
    print(
        json.dumps(
            {
                "bench": "train_speed",
                "model": args.model,
                "gemm_gflops": {k: round(v / 1e9, 1) for k, v in rates.items()},
                "floor_gflops": round(floor_rate / 1e9, 1),
                "arms": results,
                "runs": str(base),
            }
        )
    )
    return 0


if __name__ == "__main__":
    run_main(main)
