"""Which stages a quickstart invocation runs: pure functions over what each stage folder recorded.

From a stage folder's ``STARTED.json`` and ``DONE.json``, the requested settings and the flags, each stage
gets one action: ``skip`` (done with the same settings, nothing it reads runs again), ``run`` (not done;
resumes when started with the same settings), ``redo`` (``--force``, at or after ``--from``, or something it
reads runs again) or ``missing`` (before ``--from`` and never completed). A finished stage asked to run with
other settings is refused, and so is a half-run one (resuming would mix settings), naming the stage, the
changed settings and the flag that redoes it.
More: docs/quickstart.md.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from e2c.core.errors import UserError
from e2c.core.run_folder import identity_diff
from e2c.quickstart.config import DEPENDS, REQUIRES, STAGES

ACTIONS = ("skip", "run", "redo", "missing")


@dataclass(frozen=True)
class StageState:
    """What a stage folder recorded: the ``DONE.json`` and ``STARTED.json`` contents (None when absent)."""

    done: Mapping[str, Any] | None = None
    started: Mapping[str, Any] | None = None


def check_stage_name(name: str, flag: str = "--from", stages: Sequence[str] = STAGES) -> str:
    """``name`` if it is a stage, else UserError with the valid names and the closest match."""
    if name in stages:
        return name
    close = difflib.get_close_matches(name, stages, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    raise UserError(f"{flag} {name!r} is not a stage{hint}; valid: {', '.join(stages)}")


def settings_diff(before: Mapping[str, Any], now: Mapping[str, Any]) -> str:
    """``key old -> new`` for every setting that differs (:func:`e2c.core.run_folder.identity_diff`, the one
    definition of the same run), joined with commas; '' for the same settings."""
    return ", ".join(identity_diff(dict(before), dict(now)))


def select_stages(
    states: Mapping[str, StageState],
    wanted: Mapping[str, Mapping[str, Any]],
    from_stage: str | None = None,
    force: bool = False,
    stages: Sequence[str] = STAGES,
    depends: Mapping[str, Sequence[str]] = DEPENDS,
) -> dict[str, str]:
    """The action of every stage (see the module docstring), in stage order.

    Args:
        states: what each stage folder recorded (a missing key means an empty folder).
        wanted: the settings each stage would run with now.
        from_stage: ``--from``: this stage and every later one are redone; earlier ones are not run.
        force: ``--force``: every stage is redone.
    Raises:
        UserError: a finished (or half-run) stage whose settings differ from ``wanted``, one line.
    """
    start = stages[0] if force else from_stage
    if start is not None:
        check_stage_name(start, stages=stages)
    actions: dict[str, str] = {}
    for i, stage in enumerate(stages):
        state = states.get(stage, StageState())
        now = dict(wanted.get(stage, {}))
        if start is not None and i >= stages.index(start):
            actions[stage] = "redo"
            continue
        if any(actions.get(d) in ("run", "redo") for d in depends.get(stage, ())):
            actions[stage] = "redo"
            continue
        if state.done is not None:
            before = dict(state.done.get("settings") or {})
            if settings_diff(before, now):
                raise UserError(
                    f"stage {stage} finished with other settings ({settings_diff(before, now)}); add "
                    f"--from {stage} to redo it and the stages after it, or --force to redo everything"
                )
            actions[stage] = "skip"
        elif start is not None:
            actions[stage] = "missing"
        elif state.started is not None and settings_diff(dict(state.started), now):
            raise UserError(
                f"stage {stage} was started with other settings ({settings_diff(dict(state.started), now)}); "
                f"rerun with the earlier flags to resume it, or add --from {stage} to start it over"
            )
        else:
            actions[stage] = "run"
    return actions


def startable(
    states: Mapping[str, StageState],
    stages: Sequence[str] = STAGES,
    requires: Mapping[str, Sequence[str]] = REQUIRES,
) -> list[str]:
    """Stages whose inputs are all complete, i.e. the valid ``--from`` choices for this output folder."""
    return [s for s in stages if all(states.get(r, StageState()).done is not None for r in requires[s])]


def check_inputs(
    actions: Mapping[str, str],
    states: Mapping[str, StageState],
    stages: Sequence[str] = STAGES,
    requires: Mapping[str, Sequence[str]] = REQUIRES,
) -> None:
    """UserError (one line) when a stage that will run needs a stage that is neither complete nor run before it."""
    for stage in stages:
        if actions.get(stage) not in ("run", "redo"):
            continue
        missing = [
            need
            for need in requires.get(stage, ())
            if actions.get(need) not in ("run", "redo", "skip")
            and states.get(need, StageState()).done is None
        ]
        if missing:
            what = "stage " + missing[0] if len(missing) == 1 else "stages " + ", ".join(missing)
            raise UserError(
                f"stage {stage} needs the output of {what}, not complete in this output folder; "
                f"valid --from stages here: {', '.join(startable(states, stages, requires))}"
            )
