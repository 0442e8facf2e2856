"""The generated bad-input cases of verl's own fields: for each training launcher (``e2c.sft.run``,
``e2c.rl.launch``), every field of :data:`e2c.launch.checks.VERL_FIELDS` in the config the launcher composes,
every bad value of the field's type (``tests/bad_values.py``), given as the Hydra override ``KEY=BAD``, is
refused by the contract: exit 2, exactly one ``error:`` line, no traceback.

Composing costs the RL launcher about a second, so each bad value is checked against the config the launcher
composed (captured once from its good command line, ``tests/fuzz_entries_train.py``): the override parsed as
compose_checked parses it (:func:`e2c.launch.checks.parse_overrides`), its value put in place of the key's,
then :func:`e2c.launch.checks.check_fields`, the check compose_checked runs, about a millisecond. Per table
row and launcher, one case runs through the launcher itself in process (:func:`entry_fuzz.run_in_process`,
check-only; the whole file takes about 70 s on 2 cores): the rows of one type take its bad values in turn,
so that the launcher sees text, non-finite numbers and values out of range alike, each refused by whichever
check comes first (Hydra's parser, the config's type, verl's dataclass, the table).

Before this file the generated test had no case of a Hydra field (0); ``E2C_HYDRA_FIELDS_REPORT=path`` writes
the counts per launcher as JSON (they are also printed at the end of the module's tests, ``pytest -s``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from bad_values import bad_values_of
from entry_fuzz import contract_broken, fill, load, make_context, run_in_process
from fuzz_entries_train import ENTRIES

from e2c.commandline.argtypes import Number
from e2c.core.errors import UserError
from e2c.launch import checks as launch_checks
from e2c.launch.checks import (
    TRAINERS,
    VERL_FIELDS,
    check_fields,
    field_pattern,
    field_type,
    glob_regex,
    parse_overrides,
    trainer_of,
)
from e2c.rl import launch as rl_launch
from e2c.sft import launch as sft_launch

# The launchers whose Hydra overrides reach verl, and the trainer whose config each composes.
LAUNCHERS = {"e2c.sft.run": "sft", "e2c.rl.launch": "ppo"}


def _rows(trainer: str) -> list[str]:
    """The table's patterns that apply to ``trainer``'s config, in table order."""
    return [p for p in VERL_FIELDS if field_pattern(p)[0] in (None, trainer)]


CASES = [(name, pattern) for name, trainer in LAUNCHERS.items() for pattern in _rows(trainer)]


def _leaves(node: Any, prefix: str = "") -> list[tuple[str, Any]]:
    out = []
    for k, v in node.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        out.append((key, v))
        if isinstance(v, dict):
            out.extend(_leaves(v, key))
    return out


def _keys_of(values: dict[str, Any], pattern: str) -> list[str]:
    """The keys of a composed config whose type comes from ``pattern`` (the first row that matches)."""
    trainer = trainer_of(values)
    kind = VERL_FIELDS[pattern]
    return [
        k
        for k, _ in _leaves(values)
        if field_type(k, trainer) is kind and glob_regex(field_pattern(pattern)[1]).fullmatch(k)
    ]


LAUNCHER_MODULES = (rl_launch, sft_launch)


class Composed:
    """What a launcher composed for its good command line, and how to run that command."""

    def __init__(self, name: str, tmp: Path) -> None:
        self.name = name
        self.entry = ENTRIES[name]
        self.main = load(self.entry.target).main
        self.ctx = make_context(tmp / "ctx")
        self.good = fill(self.entry.good, self.ctx, tmp)
        seen: list[Any] = []
        real = launch_checks.compose_checked

        def capture(*args: Any, **kwargs: Any) -> Any:
            cfg = real(*args, **kwargs)
            seen.append((cfg, args))
            return cfg

        # the launchers hold their own name for it (imported at their top)
        holders = [launch_checks, *(m for m in LAUNCHER_MODULES if hasattr(m, "compose_checked"))]
        for holder in holders:
            holder.compose_checked = capture
        try:
            ok = run_in_process(self.main, self.good, self.entry.env)
        finally:
            for holder in holders:
                holder.compose_checked = real
        assert ok.code == 0 and "checks passed" in ok.stderr, (name, ok.stderr[-2000:])
        assert len(seen) == 1, f"{name} composed {len(seen)} configs for one stage"
        from omegaconf import OmegaConf

        cfg, (config_dir, config_name, *_) = seen[0]
        self.values = OmegaConf.to_container(cfg, resolve=True)
        self.source = f"{Path(config_dir).resolve() / config_name}.yaml as composed"

    def entry_case(self, line: str):
        return run_in_process(self.main, [*self.good, "--", line], self.entry.env)


@pytest.fixture(scope="module")
def composed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Composed]:
    return {name: Composed(name, tmp_path_factory.mktemp(name)) for name in LAUNCHERS}


@pytest.fixture(scope="module")
def report():
    counts: dict[str, dict[str, int]] = {
        n: {"fields": 0, "cases": 0, "through_launcher": 0} for n in LAUNCHERS
    }
    yield counts
    total = {k: sum(c[k] for c in counts.values()) for k in ("fields", "cases", "through_launcher")}
    print(f"\nHydra-field bad-input cases (before: 0): {json.dumps({'launchers': counts, 'total': total})}")
    path = os.environ.get("E2C_HYDRA_FIELDS_REPORT")
    if path:
        Path(path).write_text(json.dumps({"launchers": counts, "total": total}, indent=1) + "\n")


def _set(values: dict[str, Any], key: str, value: Any) -> Any:
    """Put ``value`` at the dotted ``key``; returns what was there."""
    *parents, last = key.split(".")
    node = values
    for part in parents:
        node = node[part]
    old, node[last] = node[last], value
    return old


def direct_case(c: Composed, key: str, bad: str) -> str | None:
    """Why ``key=bad`` is not refused as compose_checked refuses it (None: refused in one line naming the
    key): parsed as compose_checked parses it, then the composed config with that value, checked."""
    line = f"{key}={bad}"
    try:
        [override] = parse_overrides([line])
    except UserError as e:
        return None if "\n" not in str(e) else f"a refusal of {len(str(e).splitlines())} lines"
    old = _set(c.values, key, override.value())
    try:
        check_fields(c.values, {key: line}, c.source)
    except UserError as e:
        msg = str(e)
        if "\n" in msg or key not in msg or not msg.startswith("override "):
            return f"refused, but not in one line naming the override: {msg[:300]}"
        return None
    finally:
        _set(c.values, key, old)
    return "accepted"


@pytest.mark.parametrize(("name", "pattern"), CASES, ids=[f"{n}:{p}" for n, p in CASES])
def test_bad_values_of_verl_fields_are_refused_cpu(
    name: str, pattern: str, composed: dict[str, Composed], report
) -> None:
    """Every key of the launcher's config that the row types, every bad value of the row's type: refused
    in one line naming the override; one of them through the launcher itself, by the contract."""
    c = composed[name]
    keys = _keys_of(c.values, pattern)
    assert keys, f"{pattern}: no key of {name}'s composed config (a renamed verl key?)"
    bads = bad_values_of(VERL_FIELDS[pattern], c.ctx)
    failures = []
    for key in keys:
        for bad in bads:
            why = direct_case(c, key, bad)
            if why:
                failures.append(f"{key}={bad[:40]!r}: {why}")
    # Through the launcher: the rows of one type take its bad values in turn.
    rows = _rows(LAUNCHERS[name])
    turn = sum(VERL_FIELDS[p] is VERL_FIELDS[pattern] for p in rows[: rows.index(pattern)])
    key, bad = keys[0], bads[turn % len(bads)]
    outcome = c.entry_case(f"{key}={bad}")
    why = contract_broken(outcome)
    if why:
        failures.append(f"{name} -- {key}={bad[:40]!r}: {why}")
    counts = report[name]
    counts["fields"] += len(keys)
    counts["cases"] += len(keys) * len(bads) + 1
    counts["through_launcher"] += 1
    assert not failures, f"{len(failures)} cases break the contract:\n" + "\n".join(failures)


# ------------------------------------------------------------------------------------------------ the table
def test_every_row_names_keys_of_its_trainers_configs_cpu(composed: dict[str, Composed]) -> None:
    """Each row matches a key of the composed config of every trainer it applies to (so a key verl renames
    cannot silently drop a check), no key is typed by two rows, and each row's type has bad values of its
    own (a Number: the generated cases above)."""
    by_trainer = {LAUNCHERS[n]: c.values for n, c in composed.items()}
    assert set(by_trainer) == set(TRAINERS)
    problems = []
    for pattern, kind in VERL_FIELDS.items():
        owner, glob = field_pattern(pattern)
        if owner is not None and owner not in TRAINERS:
            problems.append(f"{pattern}: unknown trainer {owner!r}")
            continue
        if not isinstance(kind, Number):
            problems.append(f"{pattern}: {kind!r} is not a Number (tests/bad_values.py has no family for it)")
        rx = glob_regex(glob)
        for trainer in [owner] if owner else TRAINERS:
            if not any(rx.fullmatch(k) for k, _ in _leaves(by_trainer[trainer])):
                problems.append(f"{pattern}: no key of the {trainer} config matches")
    for trainer, values in by_trainer.items():
        rows = [(p, glob_regex(field_pattern(p)[1])) for p in _rows(trainer)]
        for key, _ in _leaves(values):
            hits = [p for p, rx in rows if rx.fullmatch(key)]
            if len(hits) > 1:
                problems.append(f"{trainer}: {key} is typed by {hits}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("glob", "key", "hit"),
    [
        ("**.optim.lr", "optim.lr", True),
        ("**.optim.lr", "actor_rollout_ref.actor.optim.lr", True),
        ("**.optim.lr", "critic.optim.lr_warmup_steps", False),
        ("**.optim.lr", "actor.xoptim.lr", False),
        ("data.max_length", "x.data.max_length", False),
        ("**.log_prob_*", "actor_rollout_ref.ref.log_prob_micro_batch_size", True),
        ("**.log_prob_*", "ref.log_prob.micro", False),
    ],
)
def test_patterns_are_globs_over_dotted_keys_cpu(glob: str, key: str, hit: bool) -> None:
    assert bool(glob_regex(glob).fullmatch(key)) is hit


@pytest.mark.parametrize(
    ("values", "message"),
    [
        # verl's SFT trainer takes after_each_epoch and -1; 0 is a division by zero there, "never" in PPO's.
        ({"trainer": {"save_freq": "after_each_epoch", "test_freq": -1}}, None),
        ({"trainer": {"save_freq": 0}}, "trainer.save_freq must be >= 1 (or -1: at the last step only"),
        ({"actor_rollout_ref": {}, "trainer": {"save_freq": 0, "test_freq": -1}}, None),
        (
            {"actor_rollout_ref": {}, "trainer": {"save_freq": "after_each_epoch"}},
            "trainer.save_freq must be",
        ),
        # nan and inf in any float, typed or not; a null is verl's "unset".
        ({"trainer": {"total_training_steps": None}, "data": {"x": 1.0}}, None),
        ({"model": {"override_config": {"rope_theta": float("inf")}}}, "rope_theta must be a finite number"),
        ({"optim": {"lr": float("nan")}}, "SRC: optim.lr must be a positive number, got nan"),
        ({"data": {"train_batch_size": 2.5}}, "data.train_batch_size must be a whole number >= 1, got 2.5"),
    ],
)
def test_check_fields_by_trainer_cpu(values: dict, message: str | None) -> None:
    if message is None:
        check_fields(values, {}, "SRC")
        return
    with pytest.raises(UserError) as err:
        check_fields(values, {}, "SRC")
    assert message in str(err.value) and "\n" not in str(err.value)


def test_the_users_override_is_named_first_cpu() -> None:
    """A bad value the user gave is named by the override, before a bad value elsewhere in the config and
    before the keys that take it by interpolation."""
    values = {
        "actor_rollout_ref": {"rollout": {"response_length": 0, "top_p": 0}},
        "data": {"max_response_length": 0},
    }
    with pytest.raises(UserError, match=r"^override 'data.max_response_length=0': data.max_response_length"):
        check_fields(values, {"data.max_response_length": "data.max_response_length=0"}, "SRC")
    with pytest.raises(UserError, match=r"^SRC: actor_rollout_ref.rollout.response_length must be >= 1"):
        check_fields(values, {}, "SRC")
