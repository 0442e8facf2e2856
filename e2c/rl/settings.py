"""The ``e2c`` config group: every setting of the E2C recipe, its default and what it does, in one place.

:func:`e2c_settings` turns the Hydra config's ``e2c`` group into the :class:`E2CSettings` that the trainer,
agent loop and launcher read (missing keys take the defaults; an unknown key or bad value is one line). Each
field's metadata (:func:`setting`) is the one source of its help, valid values and flag (:func:`setting_flags`):
a new setting is one field here and its line in ``configs/e2c_common.yaml``, which a test holds equal.
More: docs/extending.md, "Settings and flags".

>>> from omegaconf import OmegaConf
>>> s = e2c_settings(OmegaConf.create({"e2c": {"explore_adv_coef": 2, "rollout": {"explore_budget": 512}}}))
>>> s.explore_adv_coef, s.rollout.explore_budget, s.rollout.execute_budget
(2.0, 512, 0)
"""

from __future__ import annotations

import dataclasses
import difflib
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from e2c.chain import FORMATS
from e2c.chain.budget import RL_NAMES, PhaseBudget, from_config
from e2c.commandline import flags
from e2c.commandline.argtypes import INT_MAX, TEXT, Number, finite, whole
from e2c.commandline.flags import SettingFlag, check_settings, setting, setting_choices
from e2c.core.errors import UserError
from e2c.rl.advantage import DEFAULT_RULE, explore_adv_rule_names

# verl policy loss registered by e2c.rl.trainer: vanilla PPO with the old log-probs taken as the update's own,
# detached (exact with one mini-batch and one PPO epoch); the trainer then skips the old-log-prob pass.
ON_POLICY_LOSS = "e2c_on_policy"

GROUP = "e2c"  # the config key of the group
ALGOS = ("grpo", "dapo")
# A rollout budget: 0 is off (the agent loop's reading), else tokens.
TOKEN_BUDGET = Number(int, low=0, high=INT_MAX, label="0 (off) or a positive number of tokens")


def format_names() -> tuple[str, ...]:
    """The chain formats a rollout can use (:data:`e2c.chain.FORMATS`)."""
    return tuple(FORMATS)


@dataclass(frozen=True)
class RolloutSettings:
    """``e2c.rollout``: how the E2C agent loop samples a chain."""

    format: str = field(
        default="e2c",
        metadata=setting(
            "Chain format (e2c.chain.get_format): its tags and prefilled opener.",
            choices=format_names,
            choices_label="chain formats",
        ),
    )
    explore_budget: int = field(
        default=0,
        metadata=setting(
            "Elastic exploration budget in tokens; > 0 turns on the two-phase rollout (the exploration is cut "
            "here, its closing tag forced and masked out of the loss); 0: one call for the whole chain.",
            flag="--explore-budget",
            flag_help="elastic exploration budget (0: single call)",
            flag_default=0,
            value=TOKEN_BUDGET,
        ),
    )
    execute_budget: int = field(
        default=0,
        metadata=setting(
            "Elastic execution budget in tokens; 0: what is left of the response length.",
            flag="--execute-budget",
            flag_help="elastic execution budget (0: the rest)",
            flag_default=0,
            value=TOKEN_BUDGET,
        ),
    )


@dataclass(frozen=True)
class E2CSettings:
    """The ``e2c`` config group (see the module docstring)."""

    algo: str = field(
        default="grpo",
        metadata=setting(
            "grpo | dapo: names the run (experiment name, default output folder); set by the config.",
            choices=ALGOS,
            choices_label="algorithms",
        ),
    )
    stage: int = field(
        default=1,
        metadata=setting(
            "1 (warm-up) | 2 (weighted): names the run; set by e2c_stage/stage<N>.yaml.", value=whole(1, 2)
        ),
    )
    explore_adv_coef: float = field(
        default=1.0,
        metadata=setting(
            "Advantage multiplier on exploration tokens (up to and including the first boundary).",
            flag="--explore-adv-coef",
            flag_help="exploration advantage weight (default: stage)",
            flag_default=None,  # no override unless given: each stage's config sets its own
            value=finite(),
        ),
    )
    execute_adv_coef: float = field(
        default=1.0,
        metadata=setting(
            "Advantage multiplier on every token after the exploration boundary.", value=finite()
        ),
    )
    explore_adv_rule: str = field(
        default=DEFAULT_RULE,
        metadata=setting(
            "How the two multipliers weight the advantages: a rule registered in e2c.rl.advantage "
            "(register_explore_adv_rule); paper: exploration tokens x explore_adv_coef, the rest x "
            "execute_adv_coef.",
            choices=explore_adv_rule_names,
            choices_label="registered rules",
        ),
    )
    boundary_token: str = field(
        default="</EXPLORATION>",
        metadata=setting(
            "The tag that ends the exploration; must be one token of the policy's tokenizer.", value=TEXT
        ),
    )
    close_token: str = field(
        default="</EXECUTION>",
        metadata=setting(
            "The tag that ends the execution, for the well-formed-chain metric; empty: no such metric."
        ),
    )
    only_train_on_positive: bool = field(
        default=False,
        metadata=setting("e3: drop every token of a negative-advantage response from the loss."),
    )
    max_num_gen_batches: int = field(
        default=0,
        metadata=setting(
            "DAPO dynamic sampling: after this many generation batches' worth of refill prompts in one step, "
            "groups are no longer filtered; 0: no bound (verl's behaviour).",
            value=whole(0),
        ),
    )
    health_stop_after: int = field(
        default=0,
        metadata=setting(
            "Stop a run that is not learning (e2c.rl.health.stop_reason): from this step on, when the last "
            "this-many steps all had nothing to learn (update skipped or >= 90% equal-reward groups) or the "
            "sampled chains' well-formed share fell below half of the first steps', the next step is the "
            "run's last (saved, final/ linked) and a line says why; 0: never.",
            flag="--health-stop-after",
            flag_help="end a run that is not learning after this many steps of evidence (0: never)",
            flag_default=0,
            value=whole(0),
        ),
    )
    hold_freed_pages: bool = field(
        default=True,
        metadata=setting(
            "Where jemalloc is the actor workers' allocator (CPU runs), keep the pages an update frees for the "
            "update's next tensors and give them all back after it (e2c.rl.memory.hold_freed_pages): less "
            "kernel time, 2.5-3.5 GiB more at the update's peak for the embedded model; false: jemalloc's own "
            "decay."
        ),
    )
    rollout: RolloutSettings = field(
        default_factory=RolloutSettings, metadata=setting("The agent loop's settings (e2c.rollout.*).")
    )


def setting_keys(cls: type = E2CSettings, prefix: str = "") -> Iterator[str]:
    """Every key of the group in dotted form (``rollout.explore_budget``), in declaration order."""
    default = cls()
    for f in dataclasses.fields(cls):
        base = getattr(default, f.name)
        if dataclasses.is_dataclass(base):
            yield from setting_keys(type(base), f"{prefix}{f.name}.")
        else:
            yield prefix + f.name


def setting_flags(cls: type = E2CSettings) -> Iterator[SettingFlag]:
    """The settings of ``cls`` (nested groups included) that declare a launcher flag, in declaration order.

    >>> [(f.flag, f.hydra_key) for f in setting_flags()][0]
    ('--explore-adv-coef', 'e2c.explore_adv_coef')
    """
    return flags.setting_flags(cls, group=GROUP)


def _convert(key: str, value: Any, default: Any) -> Any:
    """``value`` as the type of ``default``; None reads as 0 / empty (YAML's ``~``), bools stay bools."""
    want = type(default)
    if value is None and want in (int, str):
        return want()
    ok = (
        isinstance(value, bool)
        if want is bool
        else isinstance(value, str)
        if want is str
        else isinstance(value, int | float) and not isinstance(value, bool)
    )
    if not ok or (want is int and value != int(value)):
        raise UserError(f"{GROUP}.{key} must be {want.__name__}, got {value!r}")
    return want(value)


def _check_choice(key: str, value: Any, metadata: Mapping[str, Any]) -> None:
    """One line naming the valid values (and the nearest one) when ``value`` is not among them."""
    valid = setting_choices(metadata)
    if valid is None or value in valid:
        return
    close = difflib.get_close_matches(str(value), list(valid), n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise UserError(
        f"unknown {GROUP}.{key} {value!r}{hint}; {metadata['choices_label']}: {', '.join(map(str, valid))}"
    )


def _build(cls: type, group: Mapping[str, Any], prefix: str, root: type) -> Any:
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = [k for k in group if k not in fields]
    if unknown:
        raise UserError(
            f"unknown key {GROUP}.{prefix}{unknown[0]} in the {GROUP} config group; valid keys: "
            + ", ".join(f"{GROUP}.{k}" for k in setting_keys(root))
        )
    default = cls()
    values = {}
    for name, f in fields.items():
        if name not in group:
            continue
        value, base = group[name], getattr(default, name)
        if dataclasses.is_dataclass(base):
            if value is not None and not isinstance(value, Mapping):
                raise UserError(f"{GROUP}.{prefix}{name} must be a group of settings, got {value!r}")
            values[name] = _build(type(base), value or {}, f"{prefix}{name}.", root)
        else:
            values[name] = _convert(prefix + name, value, base)
            _check_choice(prefix + name, values[name], f.metadata)
    return cls(**values)


def e2c_settings(config: Any, cls: type[E2CSettings] = E2CSettings) -> E2CSettings:
    """The ``e2c`` group of a composed config (an OmegaConf node or a dict) as :class:`E2CSettings` (or
    ``cls``, a subclass with more settings).

    Raises :class:`~e2c.core.errors.UserError` (one line) for an unknown key, naming every valid one, for a value
    of the wrong type, and for a value outside a setting's choices (an unregistered
    ``e2c.explore_adv_rule``), naming the valid ones.
    """
    group = config.get(GROUP, None) if config is not None else None
    if group is None:
        return cls()
    if not isinstance(group, Mapping):
        raise UserError(f"{GROUP} must be a group of settings, got {group!r}")
    if not isinstance(group, dict):  # an OmegaConf node: plain values, interpolations resolved
        from omegaconf import OmegaConf

        group = OmegaConf.to_container(group, resolve=True)
    settings = _build(cls, group, "", cls)
    # Each value by its declared type (nan, inf, a budget below 0, a stage 3), however it arrived: a flag,
    # a Hydra override or a config file.
    check_settings(settings, f"{GROUP}.")
    check_rollout_budgets(settings.rollout)
    return settings


def check_rollout_budgets(rollout: RolloutSettings) -> None:
    """The elastic budgets through the one budget rule (:class:`e2c.chain.budget.PhaseBudget`), read as the agent
    loop reads them: 0 is off, an execution budget needs an exploration budget. One line, before verl starts
    (the agent loop would raise inside a rollout worker)."""
    for name, value in (
        ("explore_budget", rollout.explore_budget),
        ("execute_budget", rollout.execute_budget),
    ):
        if value < 0:
            raise UserError(
                f"{GROUP}.rollout.{name} must be 0 (off) or a positive number of tokens, got {value}"
            )
    # The response length is not known here; the agent loop caps each row's phases by it.
    PhaseBudget(
        sys.maxsize,
        from_config(rollout.explore_budget),
        from_config(rollout.execute_budget),
        names=RL_NAMES,
        capped=True,
    )
