"""The claims run's stages: the shared start (a quickstart run), the three experiments, the report.

Each experiment keeps every unit of work (an RL arm, an evaluation, an SFT run) in its own folder with a
``DONE.json``, so an interrupted stage resumes at the unit it was in. The work itself goes through the
toolkit's own entry points as subprocesses (``scripts/e2c_rl.sh``, ``scripts/e2c_sft.sh``,
``scripts/ef-sft.sh``, ``python -m e2c.eval.run``, ``python -m e2c.tts``), as a user would run them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from e2c.claims.config import ClaimsConfig, quickstart_config
from e2c.core.errors import UserError
from e2c.core.files import atomic_write_json
from e2c.core.models import resolve_model
from e2c.core.paths import project_root
from e2c.data import efsft
from e2c.data.io import write_parquet
from e2c.data.synthetic.generate import eval_row, generate, sft_row
from e2c.generation import pick_backend
from e2c.launch.checkpoints import step_metrics
from e2c.quickstart.cli import run as run_quickstart
from e2c.quickstart.config import SPLIT_FRACTIONS, STAGES
from e2c.quickstart.config import Config as QuickstartConfig
from e2c.quickstart.context import Context, read_done, rel, shell_line
from e2c.quickstart.data import keep_sample
from e2c.quickstart.progress import Reporter, child_env, eval_parser, run_logged, step_parser, tts_parser
from e2c.quickstart.runner import add_attempt, attempt_seconds
from e2c.quickstart.stages import (
    eval_command,
    rl_command,
    rl_model,
    rl_pool_file,
    sft_model,
    sft_overrides,
    tts_run_command,
)
from e2c.rl.health import health_table, signal_verdict
from e2c.rl.launch import latest_hf_checkpoint

# The rollout seed verl uses when none is given (actor_rollout_ref.rollout.seed): seed s runs with
# 42 + 1000 s, so seed 0 is the quickstart's own RL run. The rollout reseeds each batch with seed + batch index:
# seeds 1000 apart never share a batch's stream (42 + s would: seed 1's step t = seed 0's step t + 1).
ROLLOUT_SEED = 42
SEED_STRIDE = 1000


@dataclass(frozen=True)
class ClaimsContext:
    """One claims run: its settings, its folder and the quickstart run inside it (the shared start)."""

    cfg: ClaimsConfig
    out: Path
    qcfg: QuickstartConfig

    def dir(self, stage: str) -> Path:
        return self.out / stage

    @property
    def quickstart(self) -> Context:
        return Context(self.qcfg, self.out / "quickstart")


def make_context(cfg: ClaimsConfig, out: Path) -> ClaimsContext:

    q = quickstart_config(cfg, str(out / "quickstart"))
    return ClaimsContext(cfg, out, replace(q, backend=pick_backend(q.backend)))


def unit(folder: Path, work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run ``work`` unless ``folder/DONE.json`` holds its result already; write it (with the seconds) after."""
    done = read_done(folder)
    if done is not None:
        return done
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    try:
        result = {**work(), "seconds": 0.0}
    except BaseException:
        add_attempt(folder, time.monotonic() - t0)  # a resumed unit reports its whole time
        raise
    result["seconds"] = round(attempt_seconds(folder) + time.monotonic() - t0, 1)
    atomic_write_json(folder / "DONE.json", result, default=str)
    return result


# ------------------------------------------------------------------------------------------------ start
def stage_start(cc: ClaimsContext, rep: Reporter) -> dict[str, Any]:
    """The quickstart run every experiment starts from (its finished stages are reused)."""
    q = cc.quickstart
    rep.say(
        f"quickstart run in {q.out} (RL {cc.qcfg.rl_steps} steps, coefficient {cc.qcfg.rl_explore_adv_coef:g})"
    )
    summary = run_quickstart(cc.qcfg, first_changed(q), False)
    model = rl_model(q)
    if model is None:
        raise UserError("the claims need an RL model; --rl-steps must be at least 1")
    stage_seconds = {
        s: (read_done(q.dir(s)) or {}).get("seconds")
        for s in ("data", "baseline", "sft", "eval_sft", "filter", "rl", "eval_rl", "report")
    }
    return {
        # the quickstart's stages may have run in earlier invocations: their own times, summed
        "seconds": round(sum(float(v or 0.0) for v in stage_seconds.values()), 1),
        "stage_seconds": stage_seconds,
        "outputs": {
            "quickstart": rel(q.out, cc.out),
            "report": rel(q.out / "report.md", cc.out),
            "sft_model": rel(sft_model(q), cc.out),
            "rl_model": rel(model, cc.out),
        },
        "headline": summary.get("accuracy", {}),
        "commands": [
            f"python -m e2c.quickstart --out {q.out} --rl-steps {cc.qcfg.rl_steps} --tts-problems 0 "
            f"--gsm8k-problems 0{' --fast' if cc.cfg.fast else ''}"
        ],
    }


def first_changed(q: Context) -> str | None:
    """The first quickstart stage that finished with other settings than the claims ask for (e.g. another
    --rl-steps): the quickstart redoes it and what follows, instead of refusing."""
    for stage in STAGES:
        done = read_done(q.dir(stage))
        if done is not None and dict(done.get("settings") or {}) != q.cfg.stage_settings(stage):
            return stage
    return None


# ------------------------------------------------------------------------------------------------ evaluation
def evaluate(
    cc: ClaimsContext,
    rep: Reporter,
    model: str,
    save: Path,
    data_dir: Path,
    what: str,
    max_tokens: int | None = None,
) -> dict:
    """Greedy evaluation of ``model`` on ``data_dir/synthetic.parquet`` into ``save`` (the quickstart's eval
    settings; ``max_tokens`` replaces its new-token limit); resumes a half-done folder; returns where its
    results are."""

    def work() -> dict[str, Any]:
        cmd = eval_command(cc.quickstart, model, save, ["synthetic"])
        cmd[cmd.index("--data-dir") + 1] = str(data_dir)
        if max_tokens is not None:
            cmd[cmd.index("--max-tokens") + 1] = str(max_tokens)
        n = len(_read_ids(data_dir / "synthetic.parquet"))
        rep.say(f"evaluating {what} on {n} problems")
        run_logged(cmd, save / "log.txt", rep, eval_parser({"synthetic": n}), child_env())
        rep.say(f"{what}: {100 * eval_accuracy(save):.1f}%")
        return {"model": model, "commands": [shell_line(cmd)]}

    res = unit(save, work)  # the quickstart's own evaluation folders count as done units too
    return {
        "seconds": res.get("seconds"),
        "accuracy": eval_accuracy(save),
        "predictions": rel(save / "predictions" / "synthetic.jsonl", cc.out),
    }


def eval_accuracy(save: Path) -> float:
    """pass@1 on the synthetic set of an evaluation folder's ``results.json``."""
    return float(json.loads((save / "results.json").read_text())["datasets"]["synthetic"]["pass@1"])


def _read_ids(parquet: Path) -> list[str]:
    import pandas as pd

    return [str(x) for x in pd.read_parquet(parquet, columns=["id"])["id"]]


# ------------------------------------------------------------------------------------------------ weighting
def arm_name(coef: float, seed: int) -> str:
    """``c2_s0`` for coefficient 2.0, seed 0."""
    return f"c{coef:g}_s{seed}"


def rl_metrics(run_dir: Path) -> list[dict[str, Any]]:
    """Per step of an RL run's ``metrics.jsonl``: the reward, the E2C segment metrics and the health
    metrics (``critic/score/mean``, ``e2c/*``, ``health/*``, ``response_length/mean``), step order."""
    rows = []
    for step, data in step_metrics(run_dir).items():
        keep = {
            k: float(v)
            for k, v in data.items()
            if isinstance(v, (int, float))
            and (k.startswith(("e2c/", "health/")) or k in ("critic/score/mean", "response_length/mean"))
        }
        if keep:
            rows.append({"step": step, **keep})
    return rows


def run_arm(cc: ClaimsContext, rep: Reporter, coef: float, seed: int) -> dict[str, Any]:
    """One weighting arm: GRPO stage 2 from the SFT model with exploration coefficient ``coef`` and ``seed``
    (data order and rollout sampling), then its evaluation. Arm (the quickstart's coefficient, seed 0) is
    the quickstart's own RL run, reused."""
    q = cc.quickstart
    name = arm_name(coef, seed)
    folder = cc.dir("weighting") / name
    reused = coef == cc.qcfg.rl_explore_adv_coef and seed == cc.qcfg.seed
    if reused:
        rl_dir, eval_dir = q.dir("rl"), q.dir("eval_rl")
        cmd: list[str] = []
    else:
        rl_dir, eval_dir = folder / "rl", folder / "eval"
        qcfg = replace(cc.qcfg, seed=seed, rl_explore_adv_coef=coef)
        cmd = rl_command(
            q, rl_dir, qcfg, [f"actor_rollout_ref.rollout.seed={ROLLOUT_SEED + SEED_STRIDE * seed}"]
        )

        def train() -> dict[str, Any]:
            rep.say(f"arm {name}: GRPO stage 2, {qcfg.rl_steps} steps, exploration coefficient {coef:g}")
            run_logged(cmd, rl_dir / "log.txt", rep, step_parser(qcfg.rl_steps), child_env())
            return {"commands": [shell_line(cmd)]}

        unit(rl_dir, train)
    model = latest_hf_checkpoint(rl_dir)
    if model is None:
        raise UserError(f"arm {name}: the RL run left no checkpoint; see {rl_dir / 'log.txt'}")
    ev = evaluate(cc, rep, str(model), eval_dir, q.eval_dir, f"arm {name}")
    rows = health_table(rl_dir)
    return {
        "coef": coef,
        "seed": seed,
        "reused_quickstart_rl": reused,
        "rl_dir": rel(rl_dir, cc.out),
        "model": rel(model, cc.out),
        "accuracy": ev["accuracy"],
        "predictions": ev["predictions"],
        "steps": rl_metrics(rl_dir),
        "health_verdict": signal_verdict(rows) if rows else None,
        "commands": [shell_line(cmd)] if cmd else [],
    }


def stage_weighting(cc: ClaimsContext, rep: Reporter) -> dict[str, Any]:
    """Claim 1: every (coefficient, seed) arm from the same SFT model on the same filtered prompts."""
    arms = [(c, s) for s in cc.cfg.weight_seeds for c in cc.cfg.weight_coefs]
    out = {}
    for i, (c, s) in enumerate(arms):
        name = arm_name(c, s)
        res = unit(cc.dir("weighting") / name, lambda c=c, s=s: run_arm(cc, rep, c, s))
        out[name] = res
        rep.say(f"arm {name}: {100 * res['accuracy']:.1f}% ({i + 1}/{len(arms)} arms)", (i + 1) / len(arms))
    return {"arms": out}


# ------------------------------------------------------------------------------------------------ TTS
def tts_command(cc: ClaimsContext, model: str) -> list[str]:

    c = cc.cfg
    sets = {
        "explore_budget": c.tts_explore_budget,
        "execute_budget": c.tts_execute_budget,
        "cot_tokens": c.tts_explore_budget + c.tts_execute_budget,
        "judge_tokens": c.tts_judge_tokens,
        "refine_tokens": c.tts_explore_budget,
        "tree_step_tokens": c.tts_tree_step_tokens,
        "tree_branching": c.tts_tree_branching,
        "top_p": f"{cc.qcfg.tts_top_p:g}",
        "seed": cc.qcfg.seed,
    }
    return tts_run_command(
        cc.quickstart,
        model,
        c.tts_problems,
        c.tts_methods,
        c.tts_budgets,
        cc.dir("tts") / "runs",
        sets,
        c.tts_nested,
    )


def stage_tts(cc: ClaimsContext, rep: Reporter) -> dict[str, Any]:
    """Claim 2: the TTS methods at every budget on held-out problems with the RL model (arm 2.0, seed 0)."""
    model = rl_model(cc.quickstart)
    if model is None:
        raise UserError("no RL model in the start stage's quickstart run")
    cmd = tts_command(cc, str(model))
    c = cc.cfg
    rep.say(
        f"{', '.join(c.tts_methods)} at K {', '.join(map(str, c.tts_budgets))} on {c.tts_problems} held-out "
        "problems (RL model)"
    )
    run_logged(cmd, cc.dir("tts") / "log.txt", rep, tts_parser(), child_env())
    found = sorted((cc.dir("tts") / "runs").glob("*/*/records.jsonl"))
    if not found:
        raise UserError(f"the TTS run wrote no records under {cc.dir('tts') / 'runs'}")
    return {"records": rel(found[0], cc.out), "model": rel(model, cc.out), "commands": [shell_line(cmd)]}


# ------------------------------------------------------------------------------------------------ adapt
def adapt_data(cc: ClaimsContext, rep: Reporter) -> dict[str, Any]:
    """New-domain problems of one family and level, none in the quickstart's data: ``adapt_train`` full E2C
    chains (``sft.parquet``), the same problems as EF-SFT rows (``ef_sft.parquet``) and ``adapt_eval``
    held-out problems (``eval/synthetic.parquet``)."""
    from transformers import AutoTokenizer

    c, d = cc.cfg, cc.dir("adapt") / "data"
    tok = AutoTokenizer.from_pretrained(resolve_model(cc.qcfg.model).path)

    def count(text: str) -> int:
        return len(tok.encode(text, add_special_tokens=False))

    # Held-out and training problems are taken in the generator's (seeded) order from one pool of distinct
    # problems, not by the hash split: a family at one level has a few thousand problems at most, and asking
    # the generator for several times what is needed (the hash split keeps 20% for eval) would exhaust it.
    n = int((c.adapt_train + c.adapt_eval) * 1.3) + 20
    samples, report = generate(
        n, seed=cc.qcfg.seed + 1, trace_frac=0.0, fractions=SPLIT_FRACTIONS, workers=1,
        families=(c.adapt_family,), levels=(c.adapt_level,),
    )  # fmt: skip
    kept = [
        s
        for s in samples
        if keep_sample(s, (c.adapt_family,), c.adapt_level, c.adapt_max_chain_tokens, count)
    ]
    held, train = kept[: c.adapt_eval], kept[c.adapt_eval : c.adapt_eval + c.adapt_train]
    if len(held) < c.adapt_eval or len(train) < c.adapt_train:
        raise UserError(
            f"family {c.adapt_family} level {c.adapt_level}: only {len(kept)} of {n} problems fit in "
            f"{c.adapt_max_chain_tokens} tokens, fewer than --adapt-train {c.adapt_train} + --adapt-eval "
            f"{c.adapt_eval}; lower them or pick another level"
        )
    rows = [sft_row(s) for s in train]
    held_rows = [eval_row(s) for s in held]
    new_ids = [r["extra_info"]["id"] for r in rows] + [r["id"] for r in held_rows]
    leaked = len(set(new_ids) & old_ids(cc.quickstart))
    if leaked:
        raise RuntimeError(f"{leaked} new-domain problems are in the quickstart's data")
    if {r["extra_info"]["id"] for r in rows} & {r["id"] for r in held_rows}:
        raise RuntimeError("new-domain held-out problems leaked into its training set")
    write_parquet(rows, d / "sft.parquet")
    ef_rows, stats = efsft.build(rows, count, reg_frac=c.adapt_reg_frac, seed=cc.qcfg.seed)
    write_parquet(ef_rows, d / "ef_sft.parquet")
    write_parquet(held_rows, d / "eval" / "synthetic.parquet")
    rep.say(
        f"{c.adapt_family}/L{c.adapt_level}: {len(train)} training, {len(held)} held-out problems; {stats.line()}"
    )
    return {
        "train": len(train),
        "eval": len(held),
        "ef_sft": {
            "exploration_rows": stats.exploration_rows,
            "full_rows": stats.full_rows,
            "trained_tokens": stats.trained_tokens,
            "full_sft_tokens": stats.full_sft_tokens,
            "share": stats.share,
        },
        "generator": report.line(),
    }


def old_ids(q: Context) -> set[str]:
    """The problem ids of the quickstart's SFT, RL and held-out sets and of its RL prompt pool (ids are hashes
    of the problem text)."""
    import pandas as pd

    ids = {str(x) for x in pd.read_parquet(q.eval_dir / "synthetic.parquet", columns=["id"])["id"]}
    pool = rl_pool_file(q)  # written by the filter stage, so absent before it ran
    for path in (q.data_dir / "sft.parquet", q.data_dir / "rl.parquet", *([pool] if pool.is_file() else [])):
        info = pd.read_parquet(path, columns=["extra_info"])["extra_info"]
        ids |= {str(x.get("id")) for x in info if isinstance(x, dict)}
    return ids


def adapt_sft(cc: ClaimsContext, rep: Reporter, method: str, model: Path) -> dict[str, Any]:
    """One adaptation run from the RL model: ``ef_sft`` (scripts/ef-sft.sh on the EF-SFT rows) or ``full_sft``
    (scripts/e2c_sft.sh on the full chains of the same problems), same steps, batch and learning rate."""
    c = cc.cfg
    d = cc.dir("adapt") / method
    data = cc.dir("adapt") / "data" / ("ef_sft.parquet" if method == "ef_sft" else "sft.parquet")
    script = "ef-sft.sh" if method == "ef_sft" else "e2c_sft.sh"
    env = {
        "MODEL_PATH": str(model),
        "TRAIN_DATA": str(data),
        "VAL_DATA": "none",
        "OUTPUT_DIR": str(d),
        "TOTAL_TRAINING_STEPS": str(c.adapt_steps),
    }
    scfg = replace(cc.qcfg, sft_lr=c.adapt_lr, sft_batch=c.adapt_batch)
    cmd = ["bash", str(project_root() / "scripts" / script), *sft_overrides(scfg, steps=c.adapt_steps)]

    def work() -> dict[str, Any]:
        rep.say(
            f"{method}: {c.adapt_steps} steps x {c.adapt_batch} rows from the RL model, lr {c.adapt_lr:g}"
        )
        run_logged(cmd, d / "log.txt", rep, step_parser(c.adapt_steps), child_env(env))
        if not (d / "final" / "config.json").is_file():
            raise UserError(f"{method} finished but {d / 'final'} holds no model; see {d / 'log.txt'}")
        stats = data_stats(d / "sft_data_stats.json")
        return {
            "model": str(d / "final"),
            "data_stats": stats,
            "commands": [shell_line(cmd, env)],
        }

    return unit(d, work)


def data_stats(path: Path) -> dict[str, Any]:
    """An SFT run's token accounting (``sft_data_stats.json``: one entry per training file list) as one
    entry: rows, assistant tokens and trained tokens summed."""
    raw = json.loads(path.read_text())
    entries = [raw] if "trained_tokens" in raw else list(raw.values())
    out = {k: sum(int(e[k]) for e in entries) for k in ("rows", "assistant_tokens", "trained_tokens")}
    return {**out, "trained_share": out["trained_tokens"] / max(out["assistant_tokens"], 1)}


def stage_adapt(cc: ClaimsContext, rep: Reporter) -> dict[str, Any]:
    """Claim 3: EF-SFT, full E2C SFT and nothing, from the RL model, on a family held out of SFT and RL;
    accuracy on the new family and on the old held-out problems (forgetting); trained-token share."""
    q = cc.quickstart
    rl = rl_model(q)
    if rl is None:
        raise UserError("no RL model in the start stage's quickstart run")
    data = unit(cc.dir("adapt") / "data", lambda: adapt_data(cc, rep))
    new = cc.dir("adapt") / "data" / "eval"
    new_tokens = cc.cfg.adapt_eval_max_tokens
    runs = {m: adapt_sft(cc, rep, m, rl) for m in ("ef_sft", "full_sft")}
    evals = {
        "none": {
            "new": evaluate(
                cc, rep, str(rl), cc.dir("adapt") / "eval_none_new", new, "RL model, new domain", new_tokens
            ),
            # the RL model on the old problems is the quickstart's own evaluation
            "old": {"predictions": rel(q.dir("eval_rl") / "predictions" / "synthetic.jsonl", cc.out)},
        }
    }
    for m, run in runs.items():
        evals[m] = {
            "new": evaluate(
                cc, rep, run["model"], cc.dir("adapt") / f"eval_{m}_new", new, f"{m}, new domain", new_tokens
            ),
            "old": evaluate(
                cc, rep, run["model"], cc.dir("adapt") / f"eval_{m}_old", q.eval_dir, f"{m}, old domain"
            ),
        }
    return {"data": data, "runs": runs, "evals": evals}
