"""Running a pipeline of resumable stages (the quickstart's, the claims run's): plan what each stage does
(:mod:`e2c.quickstart.plan`), refuse bad input before anything changes, then run the stages in order, each in
its own folder with ``STARTED.json`` / ``DONE.json``, and its time across interrupted attempts."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2c.commandline.argtypes import TEXT
from e2c.commandline.entry import checks_done
from e2c.commandline.flags import add_setting_flags, from_flags, setting
from e2c.commandline.parsing import interrupt_on_sigterm
from e2c.core.errors import UserError, fail
from e2c.core.files import atomic_write_json, check_output_dir
from e2c.core.run_folder import RunFolder
from e2c.quickstart.context import read_done, read_started
from e2c.quickstart.plan import StageState, check_inputs, check_stage_name, select_stages
from e2c.quickstart.progress import Reporter, StageFailed, fmt_seconds

REPORT_FILES = ("report.md", "report.json")


@dataclass(frozen=True)
class Pipeline:
    """A tool's stages: their order, what each reads, how each runs and which settings its result depends on.

    ``runners[stage](ctx, reporter)`` returns what goes into the stage's ``DONE.json`` (a ``seconds`` key in
    it replaces the measured time). ``ctx`` has ``cfg``, ``out`` and ``dir(stage)``.
    """

    tool: str
    stages: tuple[str, ...]
    requires: Mapping[str, Sequence[str]]
    depends: Mapping[str, Sequence[str]]
    runners: Mapping[str, Callable[[Any, Reporter], dict[str, Any]]]
    settings: Callable[[Any, str], dict[str, Any]]
    eta: Mapping[str, float]


# Old setting names -> current names: a finished stage that recorded an old name is recognised as the same
# settings.
RENAMED_SETTINGS = {"rl_explore_coef": "rl_explore_adv_coef"}


def renamed(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Recorded settings under today's names.

    >>> renamed({"rl_explore_coef": 2.0, "seed": 0})
    {'rl_explore_adv_coef': 2.0, 'seed': 0}
    """
    return {RENAMED_SETTINGS.get(k, k): v for k, v in settings.items()}


def stage_states(p: Pipeline, ctx: Any) -> dict[str, StageState]:
    states = {}
    for s in p.stages:
        done, started = read_done(ctx.dir(s)), read_started(ctx.dir(s))
        if done is not None and isinstance(done.get("settings"), Mapping):
            done = {**done, "settings": renamed(done["settings"])}
        states[s] = StageState(done, renamed(started) if started is not None else None)
    return states


def wipe_stage(ctx: Any, stage: str) -> None:
    """Remove a stage's folder (and, for the report, the report files), to start it from scratch."""
    d = ctx.dir(stage)
    if d.exists():
        shutil.rmtree(d)
    if stage == "report":
        for name in REPORT_FILES:
            (ctx.out / name).unlink(missing_ok=True)


def check_foreign(p: Pipeline, ctx: Any, actions: Mapping[str, str]) -> None:
    """UserError when a stage would clear a folder (or report file) that this tool did not make: an --out
    pointing at a folder with other content must never lose it."""
    for stage in p.stages:
        if actions[stage] not in ("run", "redo"):
            continue
        d = ctx.dir(stage)
        ours = (d / "STARTED.json").is_file() or (d / "DONE.json").is_file()
        theirs = [d] if d.is_dir() and any(d.iterdir()) and not ours else []
        if stage == "report" and not ours:
            theirs += [ctx.out / n for n in REPORT_FILES if (ctx.out / n).exists()]
        if d.exists() and not d.is_dir():
            theirs.append(d)
        if theirs:
            raise UserError(
                f"{theirs[0]} exists and was not made by the {p.tool}; pick another --out (nothing was changed)"
            )


def attempt_seconds(d: Path) -> float:
    """Seconds that interrupted attempts in folder ``d`` spent (``attempts.json``)."""
    try:
        return float(sum(json.loads((d / "attempts.json").read_text())))
    except (OSError, ValueError, TypeError):
        return 0.0


def add_attempt(d: Path, seconds: float) -> None:
    """Remember the time an interrupted attempt spent, so a resumed stage reports its whole duration."""
    try:
        before = json.loads((d / "attempts.json").read_text())
    except (OSError, ValueError):
        before = []
    atomic_write_json(d / "attempts.json", [*before, round(seconds, 1)], default=str)


def run_stage(
    p: Pipeline, ctx: Any, stage: str, action: str, state: StageState, index: int
) -> dict[str, Any]:
    """Run one stage (fresh, or resuming its half-run folder), then write its DONE.json."""
    settings = p.settings(ctx.cfg, stage)
    d = ctx.dir(stage)
    total = len(p.stages)
    if action == "redo" or state.started is None:
        wipe_stage(ctx, stage)
    elif action == "run":
        print(f"[{p.tool} {index}/{total} {stage}] resuming the interrupted run in {d}", flush=True)
    d.mkdir(parents=True, exist_ok=True)
    atomic_write_json(d / "STARTED.json", settings, default=str)
    earlier = attempt_seconds(d)
    rep = Reporter(stage, index, total, p.eta.get(stage, 60), tool=p.tool)
    rep.say("starting")
    try:
        result = p.runners[stage](ctx, rep)
    except KeyboardInterrupt:
        add_attempt(d, rep.elapsed)  # interrupted: its time counts towards the resumed stage's duration
        raise
    seconds = round(earlier + rep.elapsed, 1)
    done = {
        "stage": stage,
        "settings": settings,
        "seconds": seconds,
        "finished_at": time.strftime("%Y-%m-%d %H:%M:%S"),
        **result,
    }
    atomic_write_json(d / "DONE.json", done, default=str)
    rep.say(f"done in {fmt_seconds(done['seconds'])}", 1.0)
    return done


def run_pipeline(
    p: Pipeline,
    ctx: Any,
    from_stage: str | None,
    force: bool,
    header: str,
    before: Callable[[], None] | None = None,
) -> float:
    """Plan (refusing bad input before anything is changed), then run the stages in order; returns the
    seconds this invocation took. ``before`` runs after every check (and ``checks_done``: with
    ``E2C_CHECK_ONLY=1`` the run stops there) and before anything is written."""
    check_out(ctx.out)
    if from_stage is not None:
        check_stage_name(from_stage, stages=p.stages)
    states = stage_states(p, ctx)
    wanted = {s: p.settings(ctx.cfg, s) for s in p.stages}
    actions = select_stages(states, wanted, from_stage, force, stages=p.stages, depends=p.depends)
    check_inputs(actions, states, stages=p.stages, requires=p.requires)
    check_foreign(p, ctx, actions)
    # The stages record their own settings (DONE.json, STARTED.json); the folder's lock keeps a second
    # run of the tool out while this one runs.
    run = RunFolder(ctx.out, p.tool, {}, flag="--out")
    run.check()
    checks_done()
    with run.claim():
        return _run_stages(p, ctx, actions, states, header, before, from_stage)


def _run_stages(
    p: Pipeline,
    ctx: Any,
    actions: dict[str, str],
    states: dict[str, StageState],
    header: str,
    before: Callable[[], None] | None,
    from_stage: str | None,
) -> float:
    if before is not None:
        before()
    ctx.out.mkdir(parents=True, exist_ok=True)
    for s in p.stages:  # a stage to be redone is no longer complete, whatever happens next
        if actions[s] == "redo":
            (ctx.dir(s) / "DONE.json").unlink(missing_ok=True)
    fresh = {s for s in p.stages if states[s].done is None and states[s].started is None}
    plan = ", ".join(f"{s} {'run' if s in fresh and actions[s] == 'redo' else actions[s]}" for s in p.stages)
    print(f"[{p.tool}] {ctx.out}: {header}; {plan}", flush=True)
    t0 = time.monotonic()
    n = len(p.stages)
    for i, stage in enumerate(p.stages, 1):
        act = actions[stage]
        if act == "skip":
            secs = (states[stage].done or {}).get("seconds")
            print(f"[{p.tool} {i}/{n} {stage}] complete from an earlier run ({fmt_seconds(secs)}), skipped")
            continue
        if act == "missing":
            print(f"[{p.tool} {i}/{n} {stage}] not run (before --from {from_stage}, never completed)")
            continue
        run_stage(p, ctx, stage, act, states[stage], i)
    elapsed = time.monotonic() - t0
    print(f"[{p.tool}] finished in {fmt_seconds(elapsed)}; report: {ctx.out / 'report.md'}", flush=True)
    return elapsed


def check_out(out: Path) -> None:
    """UserError when ``--out`` cannot hold the run: a file there or on its way, or a place this process
    cannot create anything in (``/proc``, a read-only mount). Creates nothing."""
    if os.path.lexists(out) and not out.is_dir():
        raise UserError(f"--out {out} exists and is not a folder")
    check_output_dir(out, "--out")


def out_folder(out: str) -> Path:
    """The ``--out`` folder as an absolute path (a relative one is taken from the working directory)."""
    p = Path(out).expanduser()
    return (p if p.is_absolute() else Path.cwd() / p).resolve()


def summary(ctx: Any, key: str, field: str) -> dict[str, Any]:
    """What a pipeline tool prints last: its report's paths and, as ``key``, ``field`` of the report stage's
    result (the headline accuracies, the verdicts)."""
    report = read_done(ctx.dir("report")) or {}
    return {
        "report": str(ctx.out / "report.md"),
        "json": str(ctx.out / "report.json"),
        key: report.get(field, {}),
    }


def report_stage(module: str) -> Callable[[Any, Any], dict[str, Any]]:
    """A pipeline tool's last stage: ``module``'s ``write_report(ctx)`` (imported when the stage runs: it
    draws plots) writes report.md, report.json and the plots."""

    def stage(ctx: Any, rep: Any) -> dict[str, Any]:
        import importlib

        res = importlib.import_module(module).write_report(ctx)
        rep.say(f"wrote {ctx.out / 'report.md'}", 1.0)
        return res

    return stage


@dataclass(frozen=True)
class RunFlags:
    """A pipeline tool's flags that say what to run rather than how (the quickstart's and the claims'):
    its ``--fast`` preset, ``--from STAGE`` and ``--force``."""

    fast: bool = field(
        default=False,
        metadata=setting(
            "the same stages on the tiny test model at tiny sizes: a smoke run of minutes (default: off)",
            flag="--fast",
        ),
    )
    from_stage: str | None = field(
        default=None,
        metadata=setting(
            "redo this stage and every later one; earlier ones are reused (one of the stages listed below; "
            "default: none)",
            flag="--from",
            value=TEXT,
            metavar="STAGE",
        ),
    )
    force: bool = field(
        default=False,
        metadata=setting("redo every stage, discarding earlier results (default: off)", flag="--force"),
    )


def add_run_flags(parser: Any) -> None:
    """:class:`RunFlags` on a pipeline tool's parser."""
    add_setting_flags(parser, RunFlags)


def main_of(
    argv: list[str] | None,
    parser: Any,
    config_from_args: Callable[[Any], Any],
    run: Callable[[Any, str | None, bool], dict[str, Any]],
) -> int:
    """A pipeline tool's ``main``: parse, run, print the summary as the last line (one JSON object); bad
    input (raised to the entry guard, :func:`e2c.commandline.entry.run_main`), a failed stage and an interrupt each end
    with one line and their exit status (2, 1, 130)."""
    args = parser.parse_args(argv)
    flags = from_flags(args, RunFlags)
    cfg = config_from_args(args)
    print(json.dumps(run_resumable(lambda: run(cfg, flags.from_stage, flags.force))))
    return 0


def run_resumable(work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``work()``'s summary; a failed stage ends the process with one line saying the same command resumes
    (exit 1). Shared by the pipeline tools (quickstart, claims, study). A SIGTERM is an interrupt here as
    Ctrl-C is: the stage's child is stopped, and the entry guard (:func:`e2c.commandline.entry.guarded`) prints the
    command that resumes (exit 130, or 143 for SIGTERM)."""
    interrupt_on_sigterm()
    try:
        return work()
    except StageFailed as e:
        fail(f"{e}; fix it and rerun the same command to resume", 1)
