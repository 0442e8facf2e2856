"""What each unit of a study runs: the toolkit's own entry points as subprocesses, built by the quickstart's
command builders (``scripts/e2c_sft.sh``, ``python -m e2c.rl.passrate``, ``scripts/e2c_rl.sh --stage 2``,
``python -m e2c.eval.run``), with the study's models, data and seeds put in; and the unit bookkeeping
(``STARTED.json``, ``DONE.json``, the time of interrupted attempts).

The study's folder is laid out like a quickstart run's where they share a part (``data/`` is the quickstart's
data stage, written by its own code), so the quickstart's command builders are used as they are and only the
model, data and output paths they cannot know are replaced (:func:`set_flag`).
"""

from __future__ import annotations

import json
import shutil
import statistics
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from e2c.claims.stages import ROLLOUT_SEED, SEED_STRIDE
from e2c.core.errors import UserError
from e2c.core.files import atomic_write_json
from e2c.core.models import resolve_model
from e2c.core.paths import project_root
from e2c.data.io import write_parquet
from e2c.data.synthetic.generate import eval_row, generate, split_of
from e2c.launch.weights import checkpoint_movement
from e2c.quickstart.config import ETA_SECONDS, FAST, SFT_SAVE_EVERY, SPLIT_FRACTIONS, Config
from e2c.quickstart.context import Context, rel, shell_line
from e2c.quickstart.data import keep_sample, levels_upto, mix_counts, stage_data, token_counter, write_rl_pool
from e2c.quickstart.progress import Reporter, child_env, eval_parser, fmt_seconds, run_logged, step_parser
from e2c.quickstart.runner import add_attempt, attempt_seconds
from e2c.quickstart.stages import (
    control_steps,
    eval_command,
    filter_command,
    rl_command,
    rl_curve,
    rl_trained_tokens,
    sft_losses,
    sft_overrides,
)
from e2c.rl.launch import latest_hf_checkpoint
from e2c.rl.passrate.config import PassRateFiles
from e2c.study.spec import BASE, EQUAL_TOKEN_KINDS, Study
from e2c.study.units import (
    CONFIRM,
    SCREEN,
    Unit,
    eval_key,
    read_json,
    sampling_seed,
    seeded,
    shuffle_seed,
    train_key,
    validation_settings,
)

# SFT trains on the assistant turn: the chain plus its four tags and the EOS (as the quickstart's control
# counts a chain's trained tokens).
CHAIN_EXTRA_TOKENS = 5
MAX_GENERATE = 200_000  # screening problems generated at most while looking for enough new ones
TOOL = "study"


@dataclass(frozen=True)
class StudyContext:
    """A study and its (absolute) output folder."""

    study: Study
    out: Path

    @property
    def data(self) -> Context:
        """The quickstart's view of the study folder: ``data/`` and ``data/eval/`` are where its data stage
        writes them."""
        return Context(self.study.base, self.out)

    @property
    def validation_dir(self) -> Path:
        return self.out / "validation"


# ------------------------------------------------------------------------------------------------ models
def expected_model(sc: StudyContext, arm: str, seed: int) -> Path:
    """Where an arm's model lands: ``final/`` of an SFT run, the last step's HF folder of an RL run."""
    a = sc.study.arms[arm]
    folder = sc.out / train_key(arm, seed)
    if a.kind == "rl":
        return folder / f"global_step_{a.cfg.rl_steps}" / "actor" / "huggingface"
    return folder / "final"


def trained_model(sc: StudyContext, arm: str, seed: int) -> Path:
    """An arm's model: what its DONE.json names (an RL run may end early), else where it will be."""
    done = read_json(sc.out / train_key(arm, seed) / "DONE.json")
    if done is not None and done.get("model"):
        return sc.out / str(done["model"])
    return expected_model(sc, arm, seed)


def start_model(sc: StudyContext, arm: str, seed: int) -> str:
    """The model an arm's seed starts from: the base model's name, or the start arm's model folder."""
    ss = sc.study.start_seed(arm, seed)
    if ss is None:
        return sc.study.base.model
    return str(trained_model(sc, sc.study.arms[arm].start, ss))


def model_folder(model: str) -> str:
    """A model reference as a folder (the base model's name resolved)."""
    if Path(model).is_dir():
        return model

    return resolve_model(model).path


# ------------------------------------------------------------------------------------------------ commands
def set_flag(cmd: list[str], flag: str, value: str) -> list[str]:
    """``cmd`` with the value after ``flag`` replaced (every occurrence before a ``--``).

    >>> set_flag(["run", "--model", "a", "--", "--model", "x"], "--model", "b")
    ['run', '--model', 'b', '--', '--model', 'x']
    """
    end = cmd.index("--") if "--" in cmd else len(cmd)
    hits = [i for i in range(end - 1) if cmd[i] == flag]
    if not hits:
        raise ValueError(f"{flag} is not in the command {cmd[:3]}...")
    out = list(cmd)
    for i in hits:
        out[i + 1] = value
    return out


def sft_command(sc: StudyContext, arm: str, seed: int, steps: int | None) -> tuple[list[str], dict[str, str]]:
    """``scripts/e2c_sft.sh`` (verl's SFT trainer) from the arm's start on the SFT split into the unit's
    folder; ``steps`` None (a continuation before its RL arm ran) shows a placeholder."""
    cfg = seeded(sc.study.arms[arm].cfg, seed)
    n = steps if steps is not None else SFT_SAVE_EVERY
    env = {
        "MODEL_PATH": start_model(sc, arm, seed),
        "TRAIN_DATA": str(sc.data.data_dir / "sft.parquet"),
        "VAL_DATA": "none",
        "OUTPUT_DIR": str(sc.out / train_key(arm, seed)),
        "TOTAL_TRAINING_STEPS": str(steps) if steps is not None else "<equal-token steps>",
    }
    overrides = sft_overrides(cfg, steps=n, seed=shuffle_seed(sc.study, arm, seed))
    return ["bash", str(project_root() / "scripts" / "e2c_sft.sh"), *overrides], env


def filter_cmd(sc: StudyContext, unit: Unit) -> list[str]:
    """``python -m e2c.rl.passrate`` on the unit's RL prompt pool with the RL arm's start model, sampling
    as its rollout will (the quickstart's filter command, the arm's seed as its sampling seed), until it has
    kept the unit's ``keep``: the largest need among the RL arms that read it."""
    arm, seed = unit.arm or "", unit.seed or 0
    cfg = seeded(sc.study.arms[arm].cfg, seed)
    cmd = filter_command(Context(cfg, sc.out))
    cmd = set_flag(cmd, "--model", start_model(sc, arm, seed))
    cmd = set_flag(cmd, "--input", str(unit.folder(sc.out) / "pool.parquet"))
    if unit.keep is not None:
        cmd = set_flag(cmd, "--keep", str(unit.keep))
    return set_flag(cmd, "--output", str(unit.folder(sc.out) / "rl.parquet"))


def rl_cmd(sc: StudyContext, unit: Unit) -> list[str]:
    """``scripts/e2c_rl.sh --stage 2`` with the arm's RL settings from its start model on its filter's
    prompts; the rollout seed of seed k as the claims' arms draw it."""
    arm, seed = unit.arm or "", unit.seed or 0
    cfg = seeded(sc.study.arms[arm].cfg, seed)
    data = str(sc.out / (unit.filter_key or "") / "rl.parquet")
    cmd = rl_command(
        Context(cfg, sc.out),
        unit.folder(sc.out),
        cfg,
        [f"actor_rollout_ref.rollout.seed={ROLLOUT_SEED + SEED_STRIDE * seed}"],
    )
    cmd = set_flag(cmd, "--model", start_model(sc, arm, seed))
    return set_flag(set_flag(cmd, "--train-data", data), "--val-data", data)


def eval_cmd(sc: StudyContext, unit: Unit) -> list[str]:
    """``python -m e2c.eval.run`` as the quickstart's evaluations run it (greedy, or avg@k at the eval
    temperature), with the phase's sampling seed; screening reads the validation split."""
    arm, seed, phase = unit.arm or "", unit.seed or 0, unit.phase or SCREEN
    cfg = replace(sc.study.base, seed=sampling_seed(sc.study, phase, seed))
    model = str(trained_model(sc, arm, seed))
    cmd = eval_command(Context(cfg, sc.out), model, unit.folder(sc.out), ["synthetic"], sampled=unit.sampled)
    if phase == SCREEN:
        cmd = set_flag(cmd, "--data-dir", str(sc.validation_dir))
    return cmd


def unit_commands(sc: StudyContext, unit: Unit) -> list[str]:
    """The unit's commands as shell lines (what ``--dry-run`` prints and DONE.json records)."""
    s, b = sc.study, sc.study.base
    if unit.kind == "data":
        return [
            f"e2c.quickstart.data.stage_data: synthetic problems of {','.join(b.families)} at levels <= "
            f"{b.max_level}, seed {b.seed}, split by a hash of the text; {b.eval_problems} held out"
        ]
    if unit.kind == "validation":
        v = validation_settings(s)
        return [
            f"e2c.study.work.run_validation: {v['problems']} synthetic problems, seed {v['seed']}, none in "
            "data/ (SFT, RL or held-out)"
        ]
    if unit.kind == "filter":
        return [shell_line(filter_cmd(sc, unit))]
    if unit.kind == "rl":
        return [shell_line(rl_cmd(sc, unit))]
    if unit.kind in ("sft", *EQUAL_TOKEN_KINDS):
        a = s.arms[unit.arm or ""]
        steps = a.cfg.sft_steps if a.kind == "sft" else continuation_steps(sc, unit.arm or "", unit.seed or 0)
        cmd, env = sft_command(sc, unit.arm or "", unit.seed or 0, steps)
        return [shell_line(cmd, env)]
    return [shell_line(eval_cmd(sc, unit))]


# ------------------------------------------------------------------------------------------------ work
def run_data(sc: StudyContext, rep: Reporter, unit: Unit) -> dict[str, Any]:
    """The quickstart's data stage into ``data/``, with enough SFT rows for the largest arm's batch."""
    sft_batch = max(a.cfg.sft_batch for a in sc.study.arms.values())
    return stage_data(Context(replace(sc.study.base, sft_batch=sft_batch), sc.out), rep)


def data_ids(data: Context) -> set[str]:
    """The ids (a hash of the problem text) of every problem in the data stage's SFT, RL and held-out files."""
    import pandas as pd

    ids = {plain_id(x) for x in pd.read_parquet(data.eval_dir / "synthetic.parquet", columns=["id"])["id"]}
    for name in ("sft.parquet", "rl.parquet"):
        info = pd.read_parquet(data.data_dir / name, columns=["extra_info"])["extra_info"]
        ids |= {plain_id(x.get("id")) for x in info if isinstance(x, dict)}
    return ids


def plain_id(pid: Any) -> str:
    """A problem's id without the evaluation set's prefix: the same problem has one id everywhere.

    >>> plain_id("synthetic-0f5c37d88f4d"), plain_id("0f5c37d88f4d")
    ('0f5c37d88f4d', '0f5c37d88f4d')
    """
    return str(pid).removeprefix("synthetic-")


def new_problems(
    samples: Iterable[Any],
    taken: set[str],
    n: int,
    keep: Callable[[Any], bool],
    split: Callable[[Any], str],
) -> tuple[list[Any], dict[str, int]]:
    """The first ``n`` plain problems of ``samples`` that no training run can see and that are not held out:
    ``split`` (the data seed's hash split of the text) puts them in the eval split, whose texts neither SFT
    nor the RL prompt pools ever draw, however many they draw; their id is not ``taken`` (the held-out
    problems, and every problem of the data stage's files); and ``keep`` keeps them (the data stage's
    filters). Also how many were dropped for each reason."""
    out: list[Any] = []
    dropped = {"training_split": 0, "in_data": 0, "filters": 0}
    for s in samples:
        if len(out) >= n:
            break
        if getattr(s, "variant", "solve") != "solve":
            continue
        if split(s) != "eval":
            dropped["training_split"] += 1
        elif plain_id(s.uid) in taken:
            dropped["in_data"] += 1
        elif not keep(s):
            dropped["filters"] += 1
        else:
            out.append(s)
    return out, dropped


def run_validation(sc: StudyContext, rep: Reporter, unit: Unit) -> dict[str, Any]:
    """The screening split: synthetic problems drawn with the study's data settings and another seed, kept
    when the data seed's hash split puts their text among the evaluation problems (so no SFT set or RL pool
    of this data seed holds it) and the held-out set does not, and when the data stage's filters (family,
    level, chain length) keep them; written as the eval runner reads a dataset, with each problem's family
    and level beside."""
    from transformers import AutoTokenizer

    cfg, v = sc.study.base, validation_settings(sc.study)
    want, seed = int(v["problems"]), int(v["seed"])
    count = token_counter(AutoTokenizer.from_pretrained(resolve_model(cfg.model).path))

    def keep(s: Any) -> bool:
        return keep_sample(s, cfg.families, cfg.max_level, cfg.max_chain_tokens, count)

    def split(s: Any) -> str:
        return split_of(s.problem, cfg.seed, SPLIT_FRACTIONS)

    taken = data_ids(sc.data)
    # a fifth of the texts hash into the eval split, of which the length filter keeps most
    n = int(want / (SPLIT_FRACTIONS[2] * 0.8) * 1.25) + 50
    while True:
        rep.say(f"generating {n} synthetic problems (seed {seed}) for {want} new ones")
        samples, report = generate(
            n, seed=seed, trace_frac=0.0, fractions=SPLIT_FRACTIONS, workers=2,
            families=cfg.families, levels=levels_upto(cfg.max_level),
        )  # fmt: skip
        kept, dropped = new_problems(samples, taken, want, keep, split)
        if len(kept) >= want:
            break
        if n >= MAX_GENERATE:
            raise UserError(
                f"only {len(kept)} of {want} screening problems are new and pass the filters in {n} generated "
                f"(families {','.join(cfg.families)}, level <= {cfg.max_level}); lower validation_problems"
            )
        n = min(MAX_GENERATE, int(n * 1.6) + 100)
    d = unit.folder(sc.out)
    rows = [eval_row(s) for s in kept]
    # the rule above, verified on what is written
    if {plain_id(r["id"]) for r in rows} & taken or any(split(s) != "eval" for s in kept):
        raise RuntimeError("screening problems leaked from the training or held-out problems")
    write_parquet(rows, d / "synthetic.parquet")
    families = {eval_row(s)["id"]: f"{s.family}/L{s.level}" for s in kept}
    atomic_write_json(d / "families.json", families, indent=1)
    rep.say(f"wrote {len(rows)} problems ({dropped['in_data']} dropped as held out or in data/)", 1.0)
    return {
        "problems": len(rows),
        "generated": n,
        "dropped": dropped,
        "mix": mix_counts(kept),
        "generator": report.line(),
        "outputs": {
            "synthetic": rel(d / "synthetic.parquet", sc.out),
            "families": rel(d / "families.json", sc.out),
        },
        "commands": unit_commands(sc, unit),
    }


def run_filter(sc: StudyContext, rep: Reporter, unit: Unit) -> dict[str, Any]:
    """The quickstart's RL prompt pool (drawn with the data seed: the RL split of its hash, so no SFT or
    held-out text), then the pass-rate filter on it with the arm's start model. Run again with a larger
    ``keep`` (``extend``), the filter resumes from its samples file: only prompts it has not sampled yet are
    sampled."""
    cfg = sc.study.arms[unit.arm or ""].cfg
    d = unit.folder(sc.out)
    pool = write_rl_pool(Context(replace(cfg, seed=sc.study.base.seed), sc.out), d / "pool.parquet", rep)
    cmd = filter_cmd(sc, unit)
    rep.say(
        f"{cfg.filter_k} samples per RL prompt of {pool['prompts']}, band {cfg.filter_band}, until "
        f"{unit.keep} are kept"
    )
    run_logged(cmd, d / "log.txt", rep, None, child_env())
    report = json.loads(PassRateFiles.of(d / "rl.parquet").report.read_text())
    rep.say(f"kept {report['kept']} of {report['prompts']} prompts", 1.0)
    return {
        "kept": report["kept"],
        "prompts": report["prompts"],
        "histogram": [b["prompts"] for b in report["histogram"]],
        "pool": pool,
        "start_model": start_model(sc, unit.arm or "", unit.seed or 0),
        "commands": [shell_line(cmd)],
    }


def continuation_steps(sc: StudyContext, arm: str, seed: int) -> int | None:
    """SFT steps of an equal-token arm: as many trained tokens as its RL arm's run of the same seed trained on
    (the quickstart's control rule), plus, for ``sft_matched``, the steps of the SFT arm that run started
    from; None before that run is complete."""
    a = sc.study.arms[arm]
    rl_dir = sc.out / train_key(a.of or "", seed)
    if read_json(rl_dir / "DONE.json") is None:
        return None
    rl = sc.study.arms[a.of or ""]
    tokens = rl_trained_tokens(rl_dir, rl.cfg.rl_batch * rl.cfg.rl_n)
    before = sc.study.arms[rl.start].cfg.sft_steps if a.kind == "sft_matched" else 0
    return before + control_steps(tokens, chain_tokens(sc), a.cfg.sft_batch)


def chain_tokens(sc: StudyContext) -> float:
    """Trained tokens of a median SFT row: the data stage's median chain plus its tags and EOS."""
    counts = json.loads((sc.data.data_dir / "counts.json").read_text())
    return float(counts["chain_tokens"]["median"]) + CHAIN_EXTRA_TOKENS


def run_train(sc: StudyContext, rep: Reporter, unit: Unit) -> dict[str, Any]:
    """An arm's training run for one seed, then how far its weights moved from its start."""
    arm, seed = unit.arm or "", unit.seed or 0
    a = sc.study.arms[arm]
    d = unit.folder(sc.out)
    extra: dict[str, Any] = {}
    if a.kind == "rl":
        cmd, env = rl_cmd(sc, unit), None
        rep.say(
            f"GRPO stage 2 from {_from(sc, arm, seed)}: {a.cfg.rl_steps} steps x {a.cfg.rl_batch} prompts x {a.cfg.rl_n} samples"
        )
        run_logged(cmd, d / "log.txt", rep, step_parser(a.cfg.rl_steps), child_env())
        model = latest_hf_checkpoint(d)
        curve = rl_curve(d)
        if curve:
            rep.say(
                f"reward {curve[0]['reward']:.3f} -> {curve[-1]['reward']:.3f} over {len(curve)} steps", 0.95
            )
    else:
        steps = a.cfg.sft_steps if a.kind == "sft" else continuation_steps(sc, arm, seed)
        if steps is None:
            raise UserError(f"{unit.key}: rl arm {a.of} seed {seed} is not complete; it runs first")
        if a.kind in EQUAL_TOKEN_KINDS:
            rl_cfg = sc.study.arms[a.of or ""].cfg
            extra = {
                "rl_trained_tokens": rl_trained_tokens(
                    sc.out / train_key(a.of or "", seed), rl_cfg.rl_batch * rl_cfg.rl_n
                ),
                "sft_trained_tokens": round(steps * a.cfg.sft_batch * chain_tokens(sc)),
            }
        cmd, env = sft_command(sc, arm, seed, steps)
        rep.say(
            f"SFT from {_from(sc, arm, seed)}: {steps} steps x {a.cfg.sft_batch} chains, lr {a.cfg.sft_lr:g}"
        )
        run_logged(cmd, d / "log.txt", rep, step_parser(steps), child_env(env))
        model = d / "final"
        if not (model / "config.json").is_file():
            raise UserError(f"{unit.key}: SFT finished but {model} holds no model; see {d / 'log.txt'}")
        losses = sft_losses(d)
        if losses:
            rep.say(
                f"loss {losses[min(losses)]:.3f} -> {losses[max(losses)]:.3f} over {len(losses)} steps", 0.95
            )
        extra["steps"] = steps
    start = start_model(sc, arm, seed)
    return {
        "model": rel(model, sc.out),
        "start_model": start,
        "movement": movement(start, model),
        **extra,
        "commands": [shell_line(cmd, env)],
    }


def _from(sc: StudyContext, arm: str, seed: int) -> str:
    ss = sc.study.start_seed(arm, seed)
    return f"the base model {sc.study.base.model}" if ss is None else f"{sc.study.arms[arm].start} seed {ss}"


def movement(start: str, model: Path) -> dict[str, Any]:
    """:func:`e2c.launch.weights.checkpoint_movement` of the trained model against its start (the numbers, or why
    there are none)."""
    try:
        m = checkpoint_movement(model_folder(start), model)
    except (OSError, UserError, ValueError) as e:
        return {"error": f"{type(e).__name__}: {e}"}
    m["weight_tensors_skipped"] = len(m["weight_tensors_skipped"])
    return m


def run_eval(sc: StudyContext, rep: Reporter, unit: Unit) -> dict[str, Any]:
    """One evaluation of an arm's model: greedy or avg@k, on the screening split or the held-out set."""
    b = sc.study.base
    cmd = eval_cmd(sc, unit)
    n = sc.study.validation_problems if unit.phase == SCREEN else eval_count(sc)
    how = f"{b.eval_samples} samples at T {b.eval_temperature:g}" if unit.sampled else "greedy"
    where = "screening split" if unit.phase == SCREEN else "held-out set"
    rep.say(f"{unit.arm} seed {unit.seed}: {how} on the {where} ({n} problems)")
    d = unit.folder(sc.out)
    run_logged(cmd, d / "log.txt", rep, eval_parser({"synthetic": n}), child_env())
    m = json.loads((d / "results.json").read_text())["datasets"]["synthetic"]
    rep.say(
        f"{'avg@' + str(b.eval_samples) if unit.sampled else 'greedy'} {100 * m['pass@1']:.1f}%, well-formed {100 * m['format_rate']:.0f}%",
        1.0,
    )
    return {
        "model": rel(trained_model(sc, unit.arm or "", unit.seed or 0), sc.out),
        "pass@1": m["pass@1"],
        "format_rate": m["format_rate"],
        "predictions": rel(d / "predictions" / "synthetic.jsonl", sc.out),
        "commands": [shell_line(cmd)],
    }


def eval_count(sc: StudyContext) -> int:
    counts = read_json(sc.data.data_dir / "counts.json") or {}
    return int((counts.get("splits") or {}).get("eval") or sc.study.base.eval_problems)


WORK: dict[str, Callable[[StudyContext, Reporter, Unit], dict[str, Any]]] = {
    "data": run_data,
    "validation": run_validation,
    "filter": run_filter,
    "sft": run_train,
    "rl": run_train,
    "sft_continue": run_train,
    "sft_matched": run_train,
    "eval": run_eval,
}


# ------------------------------------------------------------------------------------------------ bookkeeping
def execute(
    sc: StudyContext, unit: Unit, action: str, index: int, total: int, estimate: float
) -> dict[str, Any]:
    """Run one unit (fresh, resumed or redone as ``action`` says) and write its DONE.json."""
    d = unit.folder(sc.out)
    if action == "redo" and d.exists():
        shutil.rmtree(d)
    if action == "resume":
        print(f"[{TOOL} {index}/{total} {unit.key}] resuming the interrupted run in {d}", flush=True)
    if action == "extend":
        kept_for = (read_json(d / "DONE.json") or {}).get("keep")
        print(
            f"[{TOOL} {index}/{total} {unit.key}] kept prompts for {kept_for}; an arm now draws {unit.keep}: "
            "sampling on from its samples file",
            flush=True,
        )
    d.mkdir(parents=True, exist_ok=True)
    atomic_write_json(d / "STARTED.json", dict(unit.settings), default=str)
    earlier = attempt_seconds(d)
    rep = Reporter(unit.key, index, total, estimate, tool=TOOL)
    rep.say("starting")
    try:
        result = WORK[unit.kind](sc, rep, unit)
    except KeyboardInterrupt:
        add_attempt(d, rep.elapsed)  # its time counts towards the resumed unit's
        raise
    done = {
        "unit": unit.key,
        "kind": unit.kind,
        "arm": unit.arm,
        "seed": unit.seed,
        "settings": dict(unit.settings),
        # a filter's keep is not a setting: a later run that needs more extends it (units.unit_action)
        **({"keep": unit.keep} if unit.keep is not None else {}),
        "seconds": round(earlier + rep.elapsed, 1),
        "finished_at": time.strftime("%Y-%m-%d %H:%M:%S"),
        **result,
    }
    atomic_write_json(d / "DONE.json", done, default=str)
    rep.say(f"done in {fmt_seconds(done['seconds'])}", 1.0)
    return done


# ------------------------------------------------------------------------------------------------ ETA
def unit_estimate(study: Study, unit: Unit) -> float:
    """A first estimate of a unit's seconds, from the quickstart's stage estimates scaled by the unit's size
    (steps, problems, samples)."""
    fast = study.base.fast
    e = ETA_SECONDS[fast]
    ref = Config()
    ref_sft, ref_rl = (FAST["sft_steps"], FAST["rl_steps"]) if fast else (ref.sft_steps, ref.rl_steps)
    ref_problems = FAST["eval_problems"] if fast else ref.eval_problems
    if unit.kind in ("data", "validation"):
        return float(e["data"])
    if unit.kind == "filter":  # the quickstart's filter keeps one RL run's prompts; this one its keep
        need = (FAST["rl_steps"] * FAST["rl_batch"]) if fast else ref.rl_steps * ref.rl_batch
        return e["filter"] * (unit.keep or need) / max(need, 1)
    cfg = study.arms[unit.arm or ""].cfg
    if unit.kind == "sft":
        return e["sft"] * cfg.sft_steps / max(ref_sft, 1)
    if unit.kind == "sft_continue":
        return float(e["control"])
    if unit.kind == "sft_matched":  # its RL arm's SFT start again, then a continuation's steps
        rl = study.arms[study.arms[unit.arm or ""].of or ""]
        return e["sft"] * study.arms[rl.start].cfg.sft_steps / max(ref_sft, 1) + float(e["control"])
    if unit.kind == "rl":
        return e["rl"] * cfg.rl_steps / max(ref_rl, 1)
    # the quickstart's evaluation stage: greedy plus 2 samples, each about a third
    n = study.validation_problems if unit.phase == SCREEN else study.base.eval_problems
    share = study.base.eval_samples / 3 if unit.sampled else 1 / 3
    return e["eval_sft"] * share * n / max(ref_problems, 1)


def study_eta(left: Iterable[float], measured: Iterable[tuple[float, float]]) -> float:
    """Seconds left for units estimated at ``left``, the estimates scaled by how the units run so far in
    this invocation compared with theirs (``(estimate, seconds)`` pairs).

    >>> study_eta([100, 100], [(50, 100)])
    400.0
    >>> study_eta([30], [])
    30.0
    """
    pairs = list(measured)
    est, took = sum(p[0] for p in pairs), sum(p[1] for p in pairs)
    scale = took / est if est > 0 and took > 0 else 1.0
    return float(sum(left)) * scale


def confirm_set(study: Study, chosen: Iterable[str], within: Iterable[str] | None = None) -> list[str]:
    """The arms a confirmation evaluates: the chosen ones, the arms they start from and the equal-token
    continuations of the chosen RL arms; in the study's order. ``within`` (``--arms`` and what they need):
    only those arms."""
    want: set[str] = set()
    for arm in chosen:
        a = study.arms[arm]
        want.add(arm)
        if a.start != BASE:
            want.add(a.start)
        want.update(study.continuations(arm))
    if within is not None:
        want &= set(within)
    return [a for a in study.arms if a in want]


def best_by_screening(scores: Mapping[str, float | None]) -> str | None:
    """The arm with the highest screening score (the first in the study's order on a tie); None when none
    was measured.

    >>> best_by_screening({"a": 0.2, "b": 0.3, "c": 0.3, "d": None})
    'b'
    """
    best = None
    for arm, s in scores.items():
        if s is not None and (best is None or s > scores[best]):  # type: ignore[operator]
            best = arm
    return best


def screen_scores(sc: StudyContext) -> dict[str, float | None]:
    """Each arm's screening score: its avg@k (greedy accuracy without samples) on the screening split,
    averaged over its seeds, from the evaluations' DONE.json; None when any seed's is missing."""
    sampled = sc.study.base.eval_samples > 0
    out: dict[str, float | None] = {}
    for arm, a in sc.study.arms.items():
        vals = []
        for seed in a.seeds:
            done = read_json(sc.out / eval_key(arm, seed, SCREEN, sampled) / "DONE.json")
            vals.append(None if done is None else done.get("pass@1"))
        out[arm] = statistics.fmean(vals) if vals and None not in vals else None  # type: ignore[arg-type]
    return out


__all__ = ["CONFIRM", "SCREEN", "StudyContext", "execute", "unit_commands", "unit_estimate"]
