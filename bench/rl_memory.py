"""Peak memory of a quickstart-shaped RL step at several sizes, next to the estimate the launcher checks.

    python bench/rl_memory.py [--model embedded] [--samples 16 32 64] [--n 8] [--steps 1]
                              [--response-length 320] [--out bench_results/rl_memory] [-- OVERRIDES]

Each size is one run of the quickstart's RL stage as the quickstart starts it (``scripts/e2c_rl.sh --stage
2`` with :func:`e2c.quickstart.stages.rl_overrides` at ``samples / n`` prompts x ``n`` samples) from
``--model`` on synthetic RL prompts, with ``--no-memory-check``, so a size the estimate refuses is measured
too (ray's memory monitor may then kill it: its exit status is recorded with the peaks it reached). While a
run goes, its process tree (the launcher, verl's driver, ray's daemons and workers, the rollout server) is
read from ``/proc`` every 0.2 s: the peak of the tree's summed RSS, the peak of each role's summed RSS (the
actor workers ``ray::WorkerDict``, the rollout servers ``ray::HFRolloutServer``, everything else), and the
peak of the node's memory in use (MemTotal - MemAvailable, what ray's monitor reads) over its value before
the run. Summed RSS counts shared libraries once per process, so it overstates what the node uses; the node
figure also moves with anything else running on the machine.

Beside each run: the estimate of :mod:`e2c.rl.memory` for the same config (the launcher's composition at
these overrides, the model's shape) and what this machine could give the run before it started. These are
the numbers to refit the estimate's constants with.

Heavy at the default sizes (the embedded model, minutes per size, up to ~20 GiB); ``--model tiny
--samples 4 --n 2 --response-length 24`` runs in about two minutes. Prints a table, writes
``<out>/rl_memory.json``, then one JSON line.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil

from e2c.commandline.argtypes import MODEL, OUTPUT_DIR, whole
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.parsing import ArgumentParser
from e2c.core.errors import UserError
from e2c.core.paths import project_root

ROOT = project_root()
ROLES = {"actor": "ray::WorkerDict", "rollout": "ray::HFRolloutServer"}  # what is in no role is "rest"
TRACE_COLUMNS = ("s", "tree", *ROLES, "rest", "node")  # a trace row: seconds, then GiB
GIB = 2**30


def node_used(meminfo: Path = Path("/proc/meminfo")) -> int:
    """Bytes of memory in use on this node, as ray's monitor counts it: MemTotal - MemAvailable."""
    info = {}
    for line in meminfo.read_text().splitlines():
        key, _, rest = line.partition(":")
        fields = rest.split()
        if fields:
            info[key] = int(fields[0]) * 1024
    return info["MemTotal"] - info["MemAvailable"]


def role_of(cmdline: list[str]) -> str:
    """``actor``, ``rollout`` or ``rest`` from a process's command line (ray titles its workers)."""
    text = " ".join(cmdline)
    for role, marker in ROLES.items():
        if marker in text:
            return role
    return "rest"


class TreeMemory:
    """Peaks of a process tree's memory, read on a thread every ``every_s`` seconds: summed RSS of the tree
    and of each role, and the node's memory in use over ``baseline``. Keeps every pid it saw, so a run that
    must be stopped can be stopped whole."""

    def __init__(self, pid: int, baseline: int, every_s: float = 0.2, trace_s: float = 5.0) -> None:
        self.root = psutil.Process(pid)
        self.baseline, self.every_s, self.trace_s = baseline, every_s, trace_s
        self.t0 = time.monotonic()
        # a TRACE_COLUMNS row every trace_s: growth across steps shows here, not in the peaks
        self.trace: list[tuple[float, ...]] = []
        self.tree = 0
        self.roles = {role: 0 for role in (*ROLES, "rest")}
        self.node = 0
        self.seen: dict[int, psutil.Process] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def sample(self) -> None:
        try:
            procs = [self.root, *self.root.children(recursive=True)]
        except psutil.Error:
            return
        roles = dict.fromkeys(self.roles, 0)
        for p in procs:
            try:
                rss = p.memory_info().rss
                role = role_of(p.cmdline())
            except psutil.Error:
                continue  # ended between the listing and the read
            self.seen.setdefault(p.pid, p)
            roles[role] += rss
        self.tree = max(self.tree, sum(roles.values()))
        for role, rss in roles.items():
            self.roles[role] = max(self.roles[role], rss)
        node = node_used() - self.baseline
        self.node = max(self.node, node)
        now = time.monotonic() - self.t0
        if not self.trace or now - self.trace[-1][0] >= self.trace_s:
            row = (sum(roles.values()), *(roles[r] for r in (*ROLES, "rest")), node)
            self.trace.append((round(now, 1), *(round(b / GIB, 2) for b in row)))

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.every_s)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def kill(self) -> None:
        """Stop every process of the tree this sampler saw (children first), none other."""
        for p in [*reversed(list(self.seen.values())), self.root]:
            try:
                p.kill()
            except psutil.Error:
                pass


def synthetic_rl_parquet(path: Path, prompts: int) -> Path:
    """At least ``prompts`` synthetic RL prompts (the toolkit's generator, fixed seed) in verl's RL layout."""
    import pandas as pd

    from e2c.data.synthetic.generate import generate, rows_by_split

    rows: list[dict] = []
    n = 200
    while len(rows) < prompts:
        samples, _ = generate(n, seed=0)
        rows = rows_by_split(samples)["rl"]
        n *= 2
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_parquet(path)
    return path


def quickstart_overrides(batch: int, n: int, steps: int, response_length: int) -> list[str]:
    """The quickstart's RL overrides at this size (its defaults otherwise)."""
    from e2c.quickstart.config import Config
    from e2c.quickstart.stages import rl_overrides

    cfg = replace(Config(), rl_batch=batch, rl_n=n, rl_steps=steps, rl_response_length=response_length)
    return rl_overrides(cfg)


def estimate_for(model_path: str, overrides: list[str]) -> dict[str, Any]:
    """The launcher's estimate (:mod:`e2c.rl.memory`) of a CPU run with these overrides, and what this
    machine can give a run now, in GiB."""
    from e2c.rl import memory
    from e2c.rl.launch import planned_cpu_config

    model = memory.model_shape(model_path)
    if model is None:
        return {}
    engine, weight_bytes = memory.cpu_rollout()
    plan = memory.plan_from_config(planned_cpu_config(overrides), engine, weight_bytes)
    est = memory.estimate(model, plan)
    limit = memory.machine_limit()
    return {
        "estimate_gib": round(est.total / GIB, 2),
        "estimate_actor_gib": round(est.actor / GIB, 2),
        "estimate_rollout_gib": round(est.rollout / GIB, 2),
        "estimate_rest_gib": round(est.rest / GIB, 2),
        "micro_batch_tokens": round(est.train_tokens),
        "limit_gib": round(limit.bytes / GIB, 2),
        "fits": est.total <= limit.bytes,
    }


def run_size(args: Any, model_path: str, samples: int, data: Path, out: Path) -> dict[str, Any]:
    """One RL run at ``samples`` per step; its peaks beside its estimate."""
    batch = samples // args.n
    overrides = [*quickstart_overrides(batch, args.n, args.steps, args.response_length), *args.overrides]
    run_dir = out / f"samples{samples}"
    if run_dir.exists():  # a fresh run, not a resume
        import shutil

        shutil.rmtree(run_dir)
    cmd = ["bash", str(ROOT / "scripts" / "e2c_rl.sh"), "--stage", "2", "--model", model_path]
    cmd += ["--train-data", str(data), "--val-data", str(data), "--output-dir", str(run_dir)]
    cmd += ["--steps", str(args.steps), "--save-freq", "-1", "--no-memory-check", "--logger", "console"]
    cmd += ["--", *overrides, "trainer.val_before_train=false"]
    res: dict[str, Any] = {"samples": samples, "prompts": batch, "n": args.n}
    res.update(estimate_for(model_path, overrides))
    env = {**os.environ, "E2C_FORCE_CPU": "1"}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    log = out / f"samples{samples}.log"
    print(f"[rl_memory] {samples} samples ({batch} x {args.n}), {args.steps} step(s); log {log}", flush=True)
    baseline = node_used()
    t0 = time.monotonic()
    with log.open("w") as fh:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT)
        peaks = TreeMemory(proc.pid, baseline)
        try:
            rc = proc.wait(timeout=args.timeout_min * 60)
        except subprocess.TimeoutExpired:
            peaks.kill()
            rc = proc.wait()
            res["timed_out"] = True
        peaks.stop()
    res["exit"] = rc
    res["wall_s"] = round(time.monotonic() - t0, 1)
    res["peak_tree_rss_gib"] = round(peaks.tree / GIB, 2)
    for role, rss in peaks.roles.items():
        res[f"peak_{role}_rss_gib"] = round(rss / GIB, 2)
    res["peak_node_used_gib"] = round(peaks.node / GIB, 2)
    res["trace_columns"] = list(TRACE_COLUMNS)
    res["trace"] = peaks.trace
    text = log.read_text(errors="replace")
    res["ray_oom"] = "memory monitor" in text.lower() or "OutOfMemoryError" in text
    return res


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog="python bench/rl_memory.py", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--model", type=MODEL, default="embedded", help="model: tiny|embedded|folder (default: embedded)"
    )
    p.add_argument(
        "--samples",
        type=whole(1, 4096),
        nargs="+",
        default=[16, 32, 64],
        help="samples per step of each run, each a multiple of --n (default: 16 32 64)",
    )
    p.add_argument(
        "--n", type=whole(1, 1024), default=8, help="samples per prompt (default: 8, the quickstart's)"
    )
    p.add_argument("--steps", type=whole(1, 1000), default=1, help="steps per run (default: 1)")
    p.add_argument(
        "--response-length",
        type=whole(1, 131_072),
        default=320,
        help="longest sampled response in tokens (default: 320, the quickstart's)",
    )
    p.add_argument(
        "--timeout-min",
        type=whole(1, 24 * 60),
        default=30,
        help="stop a run (its whole process tree) after this many minutes (default: 30)",
    )
    p.add_argument(
        "--out",
        type=OUTPUT_DIR,
        default="bench_results/rl_memory",
        help="results folder: logs, run folders, rl_memory.json (default: bench_results/rl_memory)",
    )
    p.add_argument("overrides", nargs="*", help="extra Hydra overrides for every run, after --")
    return p


def check_args(args: Any) -> None:
    """What one flag cannot say alone: every size splits into prompts of ``--n`` samples; overrides are
    ``KEY=VALUE``."""
    for s in args.samples:
        if s % args.n:
            raise UserError(f"--samples {s} is not a multiple of --n {args.n}; give whole prompts per step")
    for o in args.overrides:
        key = o.split("=", 1)[0].lstrip("+~")
        if not key.strip() or ("=" not in o and not o.startswith("~")):
            raise UserError(f"override {o!r} is not KEY=VALUE (give Hydra overrides after --)")


def print_table(runs: list[dict[str, Any]]) -> None:
    head = (
        f"{'samples':>7} {'exit':>4} {'wall s':>7} {'tree GiB':>9} {'actor':>6} {'rollout':>8} {'rest':>6} "
        f"{'node GiB':>9} {'estimate':>9} {'est actor':>10} {'limit':>6} {'fits':>5}"
    )
    print(head)
    for r in runs:
        print(
            f"{r['samples']:>7} {r['exit']:>4} {r['wall_s']:>7} {r['peak_tree_rss_gib']:>9} "
            f"{r['peak_actor_rss_gib']:>6} {r['peak_rollout_rss_gib']:>8} {r['peak_rest_rss_gib']:>6} "
            f"{r['peak_node_used_gib']:>9} {r.get('estimate_gib', '-'):>9} {r.get('estimate_actor_gib', '-'):>10} "
            f"{r.get('limit_gib', '-'):>6} {r.get('fits', '-')!s:>5}"
        )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    check_args(args)
    from e2c.core.models import resolve_model

    model_path = resolve_model(args.model).path
    checks_done()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    prompts = max(args.samples) // args.n * args.steps
    data = synthetic_rl_parquet(out / "data" / "rl.parquet", prompts)
    total = psutil.virtual_memory().total
    runs = [run_size(args, model_path, s, data, out) for s in args.samples]
    result = {
        "bench": "rl_memory",
        "model": args.model,
        "n": args.n,
        "steps": args.steps,
        "response_length": args.response_length,
        "overrides": args.overrides,
        "machine_total_gib": round(total / GIB, 2),
        "runs": runs,
    }
    (out / "rl_memory.json").write_text(json.dumps(result, indent=1) + "\n")
    print_table(runs)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    run_main(main)
