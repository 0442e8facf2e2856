"""A study's units of work, the settings each depends on, and what a run does with each: pure functions over
what the unit folders recorded.

Units, each in its own folder: ``data/``, ``validation/``, ``filters/<start>-seed<k>-<id>/`` (shared by the RL
arms with the same start, seed and sampling and grading settings), ``arms/<arm>/seed<k>/`` and its
``screen/`` and ``confirm/`` evaluations. A unit folder holds ``STARTED.json`` and, once complete,
``DONE.json``. A unit's settings name everything its result depends on, the settings of the units it reads
included, so a change anywhere upstream changes every unit downstream of it.
More: docs/study.md, "What runs".
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from e2c.core.errors import UserError
from e2c.quickstart.config import Config
from e2c.quickstart.plan import settings_diff
from e2c.quickstart.stages import rl_prompts_needed
from e2c.study.spec import BASE, EQUAL_TOKEN_KINDS, KIND_KEYS, Study

SCREEN, CONFIRM = "screen", "confirm"
PHASES = (SCREEN, CONFIRM)
# Sampling seeds of the evaluations: seed k of every arm draws with base seed + SCREEN_SEED + k when
# screening and base seed + CONFIRM_SEED + k when confirming, so no confirmation draw repeats a screening
# one, and every arm draws with the same seeds within a phase.
SAMPLING_SEED = {SCREEN: 1000, CONFIRM: 2000}
# The screening split's generator seed, from the data seed: other problems than the data stage drew.
VALIDATION_SEED = 7919
ACTIONS = ("skip", "run", "resume", "extend", "redo")
# What an RL run draws from its filter (steps x batch prompts) and not how the filter samples or grades: a
# filter unit's settings leave them out, and it keeps as many prompts as the largest need among the arms that
# share it (the filter reads the pool in order and stops once it has kept that many, so a smaller need's
# prompts are a prefix of the same decision; verl draws each run's steps x batch from the kept rows).
FILTER_NEED_KEYS = ("rl_steps", "rl_batch")


@dataclass(frozen=True)
class Unit:
    """One unit of work: its folder (``key``, relative to the output folder), kind, settings and place."""

    key: str
    kind: str  # data | validation | filter | sft | rl | sft_continue | eval
    settings: Mapping[str, Any]
    arm: str | None = None
    seed: int | None = None
    phase: str | None = None  # eval units: screen | confirm
    sampled: bool = False  # eval units: the avg@k run (else greedy)
    filter_key: str | None = None  # rl units: the filter unit they read
    keep: int | None = None  # filter units: the prompts to keep (the largest need of the arms reading it)

    def folder(self, out: Path) -> Path:
        return out / self.key


def _json(d: Mapping[str, Any]) -> dict[str, Any]:
    """As it reads back from DONE.json (tuples as lists)."""
    return json.loads(json.dumps(dict(d), default=str))


# ------------------------------------------------------------------------------------------------ settings
def data_settings(study: Study) -> dict[str, Any]:
    return _json(study.base.stage_settings("data"))


# How the screening split is drawn (recorded with it: a split drawn by another rule is not reused).
VALIDATION_RULE = "eval split of the data seed's hash, not held out"


def validation_settings(study: Study) -> dict[str, Any]:
    return {
        "rule": VALIDATION_RULE,
        "data": data_settings(study),
        "problems": study.validation_problems,
        "seed": study.base.seed + VALIDATION_SEED,
    }


def seeded(cfg: Config, seed: int) -> Config:
    """An arm's Config for one of its seeds (data order, RL sampling, the filter's sampling)."""
    return replace(cfg, seed=seed)


def start_settings(study: Study, arm: str, seed: int) -> dict[str, Any]:
    """What arm ``arm``'s seed ``seed`` starts from: the base model, or the start arm's run."""
    ss = study.start_seed(arm, seed)
    if ss is None:
        return {"model": study.base.model}
    start = study.arms[arm].start
    return {"arm": start, **train_settings(study, start, ss)}


def train_settings(study: Study, arm: str, seed: int) -> dict[str, Any]:
    """Everything the training run of ``arm``'s seed ``seed`` depends on."""
    a = study.arms[arm]
    cfg = a.cfg.to_dict()
    s: dict[str, Any] = {
        "kind": a.kind,
        "seed": seed,
        "settings": {k: cfg[k] for k in KIND_KEYS[a.kind]},
        "data": data_settings(study),
        "start": start_settings(study, arm, seed),
    }
    if a.kind == "rl":
        s["filter"] = filter_settings(study, arm, seed)
    else:
        s["shuffle_seed"] = shuffle_seed(study, arm, seed)
    if a.kind in EQUAL_TOKEN_KINDS:
        s["of"] = train_settings(study, a.of or "", seed)
    return _json(s)


def shuffle_seed(study: Study, arm: str, seed: int) -> int:
    """The SFT data order of an SFT run: its seed plus the SFT runs before it on its start chain, so a run
    that continues an SFT model does not replay the chains that model was trained on first (the
    quickstart's control does the same: its seed + 1)."""
    return seed + study.sft_depth(arm)


def filter_settings(study: Study, arm: str, seed: int) -> dict[str, Any]:
    """The pass-rate filter an RL arm's seed reads: its start and the quickstart's filter settings (the pool,
    k, band, the rollout's sampling and reward, backend and dtype), without how many prompts the run draws
    (:data:`FILTER_NEED_KEYS`: the unit's ``keep``)."""
    cfg = seeded(study.arms[arm].cfg, seed)
    own = {k: v for k, v in cfg.stage_settings("filter").items() if k not in FILTER_NEED_KEYS}
    return _json({"start": start_settings(study, arm, seed), "data": data_settings(study), **own})


def prompts_needed(study: Study, arm: str) -> int:
    """The RL prompts arm ``arm``'s run draws from its filter (the quickstart's rule: one batch per step)."""
    return rl_prompts_needed(study.arms[arm].cfg)


def filter_key(study: Study, arm: str, seed: int) -> str:
    """The filter's folder: ``filters/<start>-seed<k>-<8 hex of its settings>`` (RL arms with the same
    start, seed and filter settings share it, whatever their steps and batch)."""
    s = filter_settings(study, arm, seed)
    digest = hashlib.sha1(json.dumps(s, sort_keys=True).encode()).hexdigest()[:8]
    ss = study.start_seed(arm, seed)
    start = BASE if ss is None else f"{study.arms[arm].start}-seed{ss}"
    return f"filters/{start}-{digest}"


def sampling_seed(study: Study, phase: str, seed: int) -> int:
    return study.base.seed + SAMPLING_SEED[phase] + seed


def eval_settings(study: Study, arm: str, seed: int, phase: str, sampled: bool) -> dict[str, Any]:
    """An evaluation's settings: the model's run, the problems, the quickstart's eval settings with the
    phase's sampling seed (a greedy run does not depend on the sample count and temperature)."""
    ev = replace(study.base, seed=sampling_seed(study, phase, seed)).stage_settings("eval_sft")
    if not sampled:
        ev = {k: v for k, v in ev.items() if k not in ("eval_samples", "eval_temperature")}
    return _json(
        {
            "model": train_settings(study, arm, seed),
            "phase": phase,
            "problems": validation_settings(study) if phase == SCREEN else data_settings(study),
            "sampled": sampled,
            **ev,
        }
    )


# ------------------------------------------------------------------------------------------------ units
def train_key(arm: str, seed: int) -> str:
    return f"arms/{arm}/seed{seed}"


def eval_key(arm: str, seed: int, phase: str, sampled: bool) -> str:
    return f"{train_key(arm, seed)}/{phase}/{'sampled' if sampled else 'greedy'}"


def eval_units(study: Study, arm: str, seed: int, phase: str) -> list[Unit]:
    """Greedy, then (with ``eval_samples`` > 0) the paper's avg@k at ``eval_temperature``."""
    kinds = [False, True] if study.base.eval_samples > 0 else [False]
    return [
        Unit(
            eval_key(arm, seed, phase, s),
            "eval",
            eval_settings(study, arm, seed, phase, s),
            arm=arm,
            seed=seed,
            phase=phase,
            sampled=s,
        )
        for s in kinds
    ]


def study_units(study: Study) -> list[Unit]:
    """Every unit of the study in run order: the data, the screening split, then per arm (each after its
    start) and seed its filter (RL), its training and its screening, then every confirmation evaluation
    (only the chosen arms' run; which those are is known after screening)."""
    units = [
        Unit("data", "data", data_settings(study)),
        Unit("validation", "validation", validation_settings(study)),
    ]
    keep: dict[str, int] = {}  # each filter's keep: the largest need among the RL arms that read it
    for arm, a in study.arms.items():
        if a.kind == "rl":
            for seed in a.seeds:
                fkey = filter_key(study, arm, seed)
                keep[fkey] = max(keep.get(fkey, 0), prompts_needed(study, arm))
    filters: set[str] = set()
    for arm, a in study.arms.items():
        for seed in a.seeds:
            fkey = None
            if a.kind == "rl":
                fkey = filter_key(study, arm, seed)
                if fkey not in filters:
                    filters.add(fkey)
                    units.append(
                        Unit(
                            fkey,
                            "filter",
                            filter_settings(study, arm, seed),
                            arm=arm,
                            seed=seed,
                            keep=keep[fkey],
                        )
                    )
            units.append(
                Unit(
                    train_key(arm, seed), a.kind, train_settings(study, arm, seed), arm, seed, filter_key=fkey
                )
            )
            units += eval_units(study, arm, seed, SCREEN)
    for arm, a in study.arms.items():
        for seed in a.seeds:
            units += eval_units(study, arm, seed, CONFIRM)
    return units


def select_units(units: list[Unit], arms: Sequence[str]) -> list[Unit]:
    """The units of ``arms`` (``--arms`` with the arms they need): the data, the screening split, those arms'
    training and evaluations and the filters their RL runs read; the other arms' units are left out."""
    mine = [u for u in units if u.arm in arms and u.kind != "filter"]
    keys = {u.key for u in mine} | {u.filter_key for u in mine if u.filter_key}
    return [u for u in units if u.kind in ("data", "validation") or u.key in keys]


def seed_pairs(study: Study, arms: Sequence[str], seeds: Sequence[int]) -> set[tuple[str, int]]:
    """The (arm, seed) runs that ``--seeds`` asks of ``arms`` (the arms named, before what they need is
    added): each arm's seeds among ``seeds``, and every run those start from or continue (the start's seed
    from :meth:`Study.start_seed`, a continuation's RL run of the same seed), transitively.

    Raises:
        UserError: no arm of ``arms`` declares any of ``seeds`` (naming the seeds each declares).
    """
    todo = [(a, k) for a in arms for k in study.arms[a].seeds if k in seeds]
    if not todo:
        declared = "; ".join(f"{a}: {list(study.arms[a].seeds)}" for a in arms)
        raise UserError(
            f"--seeds: no arm run here declares seed {', '.join(map(str, seeds))}; declared: {declared}"
        )
    pairs: set[tuple[str, int]] = set()
    while todo:
        arm, seed = todo.pop()
        if (arm, seed) in pairs:
            continue
        pairs.add((arm, seed))
        a = study.arms[arm]
        if a.kind in EQUAL_TOKEN_KINDS:
            todo.append((a.of or "", seed))
        ss = study.start_seed(arm, seed)
        if ss is not None and a.kind != "sft_continue":
            todo.append((a.start, ss))
    return pairs


def select_seeds(units: list[Unit], pairs: set[tuple[str, int]]) -> list[Unit]:
    """The units of the (arm, seed) runs in ``pairs`` (:func:`seed_pairs`): the data, the screening split,
    those runs' training and evaluations and the filters their RL runs read."""
    mine = [u for u in units if (u.arm, u.seed) in pairs and u.kind != "filter"]
    keys = {u.key for u in mine} | {u.filter_key for u in mine if u.filter_key}
    return [u for u in units if u.kind in ("data", "validation") or u.key in keys]


def without_screening(units: list[Unit]) -> list[Unit]:
    """The units less the screening evaluations (``--skip-screening``: the arms to confirm are already
    chosen)."""
    return [u for u in units if u.phase != SCREEN]


# ------------------------------------------------------------------------------------------------ actions
def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object file's content, or None (absent, unreadable, cut by a kill, not an object)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def unit_action(
    unit: Unit,
    done: Mapping[str, Any] | None,
    started: Mapping[str, Any] | None,
    foreign: bool,
    force: bool,
) -> str:
    """What a run does with ``unit`` (one of :data:`ACTIONS`), from what its folder recorded:

    - ``skip``: complete with the same settings;
    - ``resume``: started with the same settings and not complete (verl resumes from its checkpoints, the
      evaluation from its records);
    - ``run``: nothing there yet;
    - ``extend``: a filter complete with the same settings that kept fewer prompts than ``unit.keep`` (an arm
      that draws more joined the study): rerun in its folder with the larger keep, sampling only the prompts
      its samples file does not hold;
    - ``redo``: complete or started with other settings, and ``force``: its folder is cleared first.

    Raises:
        UserError: other settings without ``force`` (naming the unit, what changed and ``--force``), or a
            folder with files the study did not write (``foreign``), which is never cleared.
    """
    if foreign:
        raise UserError(
            f"{unit.key} holds files the study did not write (no STARTED.json or DONE.json); move them away or "
            "pick another --out (nothing was changed)"
        )
    recorded = done.get("settings") if done is not None else started
    if recorded is None:
        return "run"
    diff = settings_diff(dict(recorded), dict(unit.settings))
    if not diff:
        if done is None:
            return "resume"
        kept_for = done.get("keep")
        if unit.keep is not None and not (isinstance(kept_for, int) and kept_for >= unit.keep):
            return "extend"
        return "skip"
    if force:
        return "redo"
    how = "finished" if done is not None else "was started"
    raise UserError(
        f"{unit.key} {how} with other settings ({_short(diff)}); add --force to redo the units whose settings "
        "changed, or use another --out"
    )


def _short(diff: str, limit: int = 300) -> str:
    return diff if len(diff) <= limit else diff[: limit - 3] + "..."


def folder_state(folder: Path) -> tuple[dict | None, dict | None, bool]:
    """(DONE.json, STARTED.json, foreign): foreign when the folder holds files but neither marker."""
    done, started = read_json(folder / "DONE.json"), read_json(folder / "STARTED.json")
    foreign = (
        done is None
        and started is None
        and folder.is_dir()
        and any(p.name not in ("attempts.json",) for p in folder.iterdir())
    )
    return done, started, foreign


def plan_actions(units: list[Unit], out: Path, force: bool) -> dict[str, str]:
    """Every unit's action (:func:`unit_action`), checked before anything is written. A unit inside a
    training folder that will be redone (or run fresh) is redone too: clearing the folder removes it."""
    actions: dict[str, str] = {}
    for u in units:
        parent = next((actions[k] for k in actions if u.key.startswith(k + "/")), None)
        if parent in ("redo",):
            actions[u.key] = "redo"
            continue
        done, started, foreign = folder_state(u.folder(out))
        if u.kind != "eval" and u.kind in KIND_KEYS and foreign:
            # a training folder holds its evaluations' folders: those alone are not foreign
            foreign = any(p.name not in (*PHASES, "attempts.json") for p in u.folder(out).iterdir())
        actions[u.key] = unit_action(u, done, started, foreign, force)
    return actions
