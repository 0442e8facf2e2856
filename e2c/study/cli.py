"""``python -m e2c.study``: ablations of SFT length and RL recipes, declared in one study file.

    python -m e2c.study --study configs/study/rl_recipe.toml --dry-run   # the plan: units and commands
    python -m e2c.study --study configs/study/sft_length.toml --fast     # the tiny model at tiny sizes

Every arm and seed trains in its own folder and is screened on a validation split (none trained on, not the
held-out set); the best arm (or ``--confirm ARM,...``) is then evaluated with its start and its equal-token
control on the held-out set with fresh sampling seeds. A rerun skips finished units and resumes an interrupted
one; a unit whose settings changed is refused (``--force`` redoes it). The last line printed is one JSON
object: the report's paths, the chosen arms and their verdicts.
More: docs/study.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from e2c.commandline.argtypes import EXISTING_FILE, OUTPUT_DIR, TEXT, whole
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.flags import add_setting_flags, flag_values, setting
from e2c.commandline.parsing import ArgumentParser
from e2c.core.errors import UserError
from e2c.core.paths import default_run_folder
from e2c.core.run_folder import RunFolder
from e2c.generation import pick_backend
from e2c.quickstart.progress import fmt_seconds
from e2c.quickstart.runner import check_out, out_folder, run_resumable
from e2c.quickstart.stages import rl_memory_check
from e2c.study.report import write_report
from e2c.study.spec import Study, load_study
from e2c.study.units import (
    ACTIONS,
    CONFIRM,
    Unit,
    plan_actions,
    seed_pairs,
    select_seeds,
    select_units,
    study_units,
    without_screening,
)
from e2c.study.work import (
    TOOL,
    StudyContext,
    best_by_screening,
    confirm_set,
    execute,
    screen_scores,
    study_eta,
    unit_commands,
    unit_estimate,
)


@dataclass(frozen=True)
class StudySettings:
    """The command line: each field is one flag (``python -m e2c.study --help``)."""

    study: str | None = field(
        default=None,
        metadata=setting(
            "the study file (TOML, or JSON): [study], [base] and [arms.NAME] tables (docs/study.md); required",
            flag="--study",
            value=EXISTING_FILE,
        ),
    )
    out: str | None = field(
        default=None,
        metadata=setting(
            "output folder (default: outputs/study/<the file's name>, or $E2C_BASE_DIR/study/<the file's name> "
            "when it is set; -fast after it under --fast)",
            flag="--out",
            value=OUTPUT_DIR,
        ),
    )
    fast: bool = field(
        default=False,
        metadata=setting(
            "the quickstart's --fast preset (the tiny test model at tiny sizes) over the base and every arm: "
            "a smoke run of the whole study (default: off)",
            flag="--fast",
        ),
    )
    arms: str | None = field(
        default=None,
        metadata=setting(
            "run only these arms, comma-separated, and the arms they need (their starts; a continuation's RL "
            "arm), leaving the others' folders as they are; the report still covers every arm with results "
            "(default: every arm)",
            flag="--arms",
            value=TEXT,
        ),
    )
    seeds: tuple[int, ...] = field(
        default=(),
        metadata=setting(
            "run only these seeds of the arms run (space-separated), and the runs they start from: add a seed to "
            "an arm, or split an arm's seeds across machines (default: every seed each arm declares)",
            flag="--seeds",
            value=whole(0),
        ),
    )
    confirm: str | None = field(
        default=None,
        metadata=setting(
            "arms to confirm on the held-out set, comma-separated (default: the best arm by screening)",
            flag="--confirm",
            value=TEXT,
        ),
    )
    screen_only: bool = field(
        default=False,
        metadata=setting("train and screen every arm, confirm none (default: off)", flag="--screen-only"),
    )
    skip_screening: bool = field(
        default=False,
        metadata=setting(
            "with --confirm: train and confirm those arms without screening any (the choice was made on "
            "screening already; default: off)",
            flag="--skip-screening",
        ),
    )
    force: bool = field(
        default=False,
        metadata=setting(
            "redo the units whose settings changed and those downstream of them (default: refuse them)",
            flag="--force",
        ),
    )
    dry_run: bool = field(
        default=False,
        metadata=setting(
            "print the plan (every unit, what this run does with it, its command) and run nothing (default: off)",
            flag="--dry-run",
        ),
    )


def build_parser() -> ArgumentParser:
    p = ArgumentParser(
        prog="python -m e2c.study",
        description="Ablations of SFT length and RL recipes: arms declared in one study file, each trained per "
        "seed, screened on a validation split, the best confirmed on the held-out set against its start and "
        "its equal-token SFT continuation.",
        epilog="Outputs: <out>/arms/<arm>/seed<k>/ (training, screen/, confirm/), <out>/study.md, <out>/study.json.",
    )
    add_setting_flags(p, StudySettings)
    return p


def settings_from_args(argv: list[str] | None) -> StudySettings:
    args = build_parser().parse_args(argv)
    values = flag_values(args, StudySettings)
    return StudySettings(**{k: str(v) if isinstance(v, Path) else v for k, v in values.items()})


def with_backend(study: Study) -> Study:
    """The study with ``auto`` backends resolved, so every unit records the backend it used."""
    base = replace(study.base, backend=pick_backend(study.base.backend))
    arms = {
        n: replace(a, cfg=replace(a.cfg, backend=pick_backend(a.cfg.backend))) for n, a in study.arms.items()
    }
    return replace(study, base=base, arms=arms)


def arm_names(flag: str, text: str, study: Study) -> list[str]:
    """A comma-separated list of the study's arms (UserError naming the valid ones)."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in names if n not in study.arms]
    if bad or not names:
        what = f"unknown arm {bad[0]!r}" if bad else "no arm"
        raise UserError(f"{flag}: {what}; valid: {', '.join(study.arms)}")
    return names


def parse_confirm(text: str | None, study: Study, selected: list[str] | None = None) -> list[str] | None:
    """``--confirm``'s arms, each one of the study's (UserError naming the valid ones) and, with ``--arms``,
    one this run trains; None: not given."""
    if text is None:
        return None
    names = arm_names("--confirm", text, study)
    outside = [n for n in names if selected is not None and n not in selected]
    if outside:
        raise UserError(
            f"--confirm: arm {outside[0]!r} is not run by --arms; valid with it: {', '.join(selected or [])}"
        )
    return names


def check_confirm_seeds(units: list[Unit], confirm: list[str] | None) -> None:
    """With ``--seeds``: each ``--confirm`` arm has a run among the chosen seeds (else it would be reported
    as confirmed with nothing evaluated)."""
    have = {u.arm for u in units if u.phase == CONFIRM}
    lacking = [a for a in confirm or [] if a not in have]
    if lacking:
        raise UserError(
            f"--confirm: arm {lacking[0]!r} has no run among --seeds; valid with them: {', '.join(sorted(have))}"
        )


def check_memory(study: Study, units: list[Unit], actions: dict[str, str]) -> None:
    """The quickstart's RL memory check (:func:`e2c.quickstart.stages.rl_memory_check`: one line when a run
    cannot fit in this machine's free memory) for every RL arm with a unit still to run, each distinct
    recipe once, before anything starts."""
    seen: list[Any] = []  # Configs (not hashable: their extra is a dict)
    for u in units:
        if u.kind != "rl" or actions[u.key] == "skip":
            continue
        cfg = study.arms[u.arm or ""].cfg
        if cfg in seen:
            continue
        seen.append(cfg)
        try:
            rl_memory_check(cfg)
        except UserError as e:
            raise UserError(f"arm {u.arm}: {e}") from None


def default_out(study: Study) -> str:
    return default_run_folder(f"study/{Path(study.source).stem}{'-fast' if study.fast else ''}")


# ------------------------------------------------------------------------------------------------ run
def arms_line(study: Study, selected: list[str] | None) -> str:
    """``3 arms``, or with ``--arms`` ``2 of 3 arms (a, b)``."""
    if selected is None:
        return f"{len(study.arms)} arms"
    return f"{len(selected)} of {len(study.arms)} arms ({', '.join(selected)})"


def print_plan(
    sc: StudyContext,
    units: list[Unit],
    actions: dict[str, str],
    confirm: list[str] | None,
    screen_only: bool,
    selected: list[str] | None = None,
) -> None:
    """The units, what this run does with each and their commands (``--dry-run``); with ``--arms``
    (``selected``) only those arms' units."""
    s = sc.study
    print(f"[{TOOL}] plan of {s.name} ({s.source}) in {sc.out}: {arms_line(s, selected)}, base model "
          f"{s.base.model}{' (--fast)' if s.fast else ''}, backend {s.base.backend}")  # fmt: skip
    first = [u for u in units if u.phase != CONFIRM]
    later = [u for u in units if u.phase == CONFIRM]
    for u in first:
        _plan_line(sc, u, actions[u.key])
    left = sum(unit_estimate(s, u) for u in first if actions[u.key] != "skip")
    print(
        f"[{TOOL}] training and screening: ~{fmt_seconds(left)} (first estimates from the quickstart's stage times)"
    )
    if screen_only:
        print(f"[{TOOL}] no confirmation (--screen-only)")
        return
    if confirm is None:
        among = "" if selected is None else " of --arms"
        print(
            f"[{TOOL}] confirmation: the best arm{among} by screening, its start and its continuations, on the "
            "held-out set (decided after screening); each arm's confirmation units are:"
        )
        for u in later:
            _plan_line(sc, u, actions[u.key])
        return
    arms = confirm_set(s, confirm, selected)
    print(f"[{TOOL}] confirmation (--confirm {','.join(confirm)}): {', '.join(arms)} on the held-out set")
    for u in later:
        if u.arm in arms:
            _plan_line(sc, u, actions[u.key])


def _plan_line(sc: StudyContext, u: Unit, action: str) -> None:
    cmds = unit_commands(sc, u) if action != "skip" else ["(complete, reused)"]
    print(f"  {action:6} {u.key} ({u.kind}, ~{fmt_seconds(unit_estimate(sc.study, u))})")
    for c in cmds:
        print(f"         {c}")


def run_study(
    sc: StudyContext,
    units: list[Unit],
    actions: dict[str, str],
    confirm: list[str] | None,
    screen_only: bool,
    selected: list[str] | None = None,
) -> dict[str, Any]:
    """Run the units in order (screening first), choose, confirm, and write the report. With ``--arms``
    (``selected``; ``units`` are theirs) the choice and the confirmation stay among those arms; the report
    reads every arm's files."""
    import time

    s = sc.study
    t0 = time.monotonic()
    measured: list[tuple[float, float]] = []
    first = [u for u in units if u.phase != CONFIRM]

    def confirm_units(arms: list[str]) -> list[Unit]:
        return [u for u in units if u.phase == CONFIRM and u.arm in arms]

    candidates = list(s.arms) if selected is None else selected
    # Before screening decides, the confirmation is counted as the largest one it may be.
    guess = (
        []
        if screen_only
        else confirm_set(s, confirm, selected)
        if confirm
        else max((confirm_set(s, [a], selected) for a in candidates), key=len)
    )
    queue = [*first, *confirm_units(guess)]
    counts = {a: sum(1 for u in first if actions[u.key] == a) for a in ACTIONS}
    print(
        f"[{TOOL}] {sc.out}: {s.name}, {arms_line(s, selected)}, base model {s.base.model}"
        f"{' (--fast)' if s.fast else ''}, backend {s.base.backend}; screening units: "
        + ", ".join(f"{n} {a}" for a, n in counts.items() if n),
        flush=True,
    )

    def process(i: int, u: Unit, total: int) -> None:
        act = actions[u.key]
        if act == "skip":
            done = json.loads((u.folder(sc.out) / "DONE.json").read_text())
            print(
                f"[{TOOL} {i}/{total} {u.key}] complete from an earlier run ({fmt_seconds(done.get('seconds'))}), skipped"
            )
            return
        left = [unit_estimate(s, x) for x in queue[i - 1 :] if actions[x.key] != "skip"]
        eta = study_eta(left, measured)
        print(
            f"[{TOOL} {i}/{total}] next: {u.key} ({u.kind}); study {fmt_seconds(time.monotonic() - t0)} elapsed, "
            f"ETA {fmt_seconds(eta)}",
            flush=True,
        )
        est = unit_estimate(s, u)
        t = time.monotonic()
        execute(sc, u, act, i, total, est)
        measured.append((est, time.monotonic() - t))

    for i, u in enumerate(first, 1):
        process(i, u, len(queue))
    if screen_only:
        chosen, how, confirmed = [], "--screen-only: no confirmation", []
    else:
        if confirm:
            chosen, how = confirm, "--confirm"
        else:
            scores = screen_scores(sc)
            best = best_by_screening({a: scores[a] for a in candidates})
            chosen = [best] if best else []
            how = (
                "the best avg@k on the screening split"
                if s.base.eval_samples > 0
                else "the best greedy accuracy on the screening split"
            )
        confirmed = confirm_set(s, chosen, selected)
        queue = [*first, *confirm_units(confirmed)]
        print(
            f"[{TOOL}] confirming {', '.join(chosen) or 'nothing'} ({how}): {', '.join(confirmed)} on the held-out set",
            flush=True,
        )
        for i, u in enumerate(queue[len(first) :], len(first) + 1):
            process(i, u, len(queue))
    rep = write_report(s, sc.out, chosen, how, confirmed)
    print(
        f"[{TOOL}] finished in {fmt_seconds(time.monotonic() - t0)}; report: {sc.out / 'study.md'}",
        flush=True,
    )
    verdicts = {
        f"{c['arm']} vs {c['against']} ({c['metric']})": c["word"] for c in rep["comparisons"][CONFIRM]
    }
    return {
        "report": str(sc.out / "study.md"),
        "json": str(sc.out / "study.json"),
        "chosen": chosen,
        "verdicts": verdicts,
    }


def main(argv: list[str] | None = None) -> int:

    s = settings_from_args(argv)
    if s.study is None:
        raise UserError(
            "--study FILE is required: a study file such as configs/study/sft_length.toml or "
            "configs/study/rl_recipe.toml (docs/study.md)"
        )
    study = with_backend(load_study(s.study, s.fast))
    named = arm_names("--arms", s.arms, study) if s.arms is not None else None
    # --arms' arms with every arm they need (their starts, a continuation's RL arm), in the study's order
    selected = study.with_needs(named) if named is not None else None
    confirm = parse_confirm(s.confirm, study, selected)
    out = out_folder(s.out or default_out(study))
    check_out(out)
    sc = StudyContext(study, out)
    if s.skip_screening and (confirm is None or s.screen_only):
        raise UserError("--skip-screening needs --confirm ARM,... (the arms to confirm) and no --screen-only")
    if s.seeds and confirm is None and not s.screen_only:
        # The choice compares arms over every seed each declares: with some seeds not run, it would not.
        raise UserError(
            "--seeds needs --confirm ARM,... (the arms to confirm) or --screen-only: the best arm by screening "
            "is chosen over all its declared seeds"
        )
    units = study_units(study)
    if selected is not None:
        units = select_units(units, selected)
    if s.seeds:
        units = select_seeds(units, seed_pairs(study, named or list(study.arms), s.seeds))
        check_confirm_seeds(units, confirm)
    if s.skip_screening:
        units = without_screening(units)
    actions = plan_actions(units, out, s.force)
    if s.dry_run:
        print_plan(sc, units, actions, confirm, s.screen_only, selected)
        return 0
    check_memory(study, units, actions)
    run = RunFolder(out, TOOL, {}, flag="--out")
    run.check()
    checks_done()
    with run.claim():
        summary = run_resumable(lambda: run_study(sc, units, actions, confirm, s.screen_only, selected))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":  # pragma: no cover
    run_main(main)
