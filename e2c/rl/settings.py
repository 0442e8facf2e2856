"""The ``e2c`` config group: every setting of the E2C recipe, its default and what it does, in one place.

verl hands the whole composed Hydra config to the trainer, the agent loop and the reward manager; the recipe's
own settings live under its top-level ``e2c`` key (defaults in ``configs/e2c_common.yaml``, per algorithm in
``configs/e2c_<algo>.yaml``, per stage in ``configs/e2c_stage/``). :func:`e2c_settings` turns that group into
an :class:`E2CSettings`: missing keys take the defaults below (a config without the group is plain GRPO), an
unknown key or a value of the wrong type is refused in one line that names the valid keys. The trainer
(:mod:`e2c.rl.trainer`), the agent loop (:mod:`e2c.rl.agent_loop`) and the launcher (:mod:`e2c.rl.launch`,
before verl starts) all read it through here.

>>> from omegaconf import OmegaConf
>>> s = e2c_settings(OmegaConf.create({"e2c": {"explore_adv_coef": 2, "rollout": {"explore_budget": 512}}}))
>>> s.explore_adv_coef, s.rollout.explore_budget, s.rollout.execute_budget
(2.0, 512, 0)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from e2c.errors import UserError

GROUP = "e2c"  # the config key of the group


def _help(text: str) -> dict[str, str]:
    return {"help": text}


@dataclass(frozen=True)
class RolloutSettings:
    """``e2c.rollout``: how the E2C agent loop samples a chain."""

    format: str = field(
        default="e2c", metadata=_help("Chain format (e2c.chain.get_format): its tags and prefilled opener.")
    )
    explore_budget: int = field(
        default=0,
        metadata=_help(
            "Elastic exploration budget in tokens; > 0 turns on the two-phase rollout (the exploration is cut "
            "here, its closing tag forced and masked out of the loss); 0: one call for the whole chain."
        ),
    )
    execute_budget: int = field(
        default=0,
        metadata=_help("Elastic execution budget in tokens; 0: what is left of the response length."),
    )


@dataclass(frozen=True)
class E2CSettings:
    """The ``e2c`` config group (see the module docstring)."""

    algo: str = field(
        default="grpo",
        metadata=_help(
            "grpo | dapo: names the run (experiment name, default output folder); set by the config."
        ),
    )
    stage: int = field(
        default=1,
        metadata=_help("1 (warm-up) | 2 (weighted): names the run; set by e2c_stage/stage<N>.yaml."),
    )
    explore_adv_coef: float = field(
        default=1.0,
        metadata=_help(
            "Advantage multiplier on exploration tokens (up to and including the first boundary)."
        ),
    )
    execute_adv_coef: float = field(
        default=1.0, metadata=_help("Advantage multiplier on every token after the exploration boundary.")
    )
    boundary_token: str = field(
        default="</EXPLORATION>",
        metadata=_help("The tag that ends the exploration; must be one token of the policy's tokenizer."),
    )
    close_token: str = field(
        default="</EXECUTION>",
        metadata=_help(
            "The tag that ends the execution, for the well-formed-chain metric; empty: no such metric."
        ),
    )
    only_train_on_positive: bool = field(
        default=False,
        metadata=_help("e3: drop every token of a negative-advantage response from the loss."),
    )
    max_num_gen_batches: int = field(
        default=0,
        metadata=_help(
            "DAPO dynamic sampling: after this many generation batches' worth of refill prompts in one step, "
            "groups are no longer filtered; 0: no bound (verl's behaviour)."
        ),
    )
    rollout: RolloutSettings = field(
        default_factory=RolloutSettings, metadata=_help("The agent loop's settings (e2c.rollout.*).")
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


def _build(cls: type, group: Mapping[str, Any], prefix: str) -> Any:
    names = [f.name for f in dataclasses.fields(cls)]
    unknown = [k for k in group if k not in names]
    if unknown:
        raise UserError(
            f"unknown key {GROUP}.{prefix}{unknown[0]} in the {GROUP} config group; valid keys: "
            + ", ".join(f"{GROUP}.{k}" for k in setting_keys())
        )
    default = cls()
    values = {}
    for name in names:
        if name not in group:
            continue
        value, base = group[name], getattr(default, name)
        if dataclasses.is_dataclass(base):
            if value is not None and not isinstance(value, Mapping):
                raise UserError(f"{GROUP}.{prefix}{name} must be a group of settings, got {value!r}")
            values[name] = _build(type(base), value or {}, f"{prefix}{name}.")
        else:
            values[name] = _convert(prefix + name, value, base)
    return cls(**values)


def e2c_settings(config: Any) -> E2CSettings:
    """The ``e2c`` group of a composed config (an OmegaConf node or a dict) as :class:`E2CSettings`.

    Raises :class:`~e2c.errors.UserError` (one line) for an unknown key, naming every valid one, and for a value
    of the wrong type.
    """
    group = config.get(GROUP, None) if config is not None else None
    if group is None:
        return E2CSettings()
    if not isinstance(group, Mapping):
        raise UserError(f"{GROUP} must be a group of settings, got {group!r}")
    if not isinstance(group, dict):  # an OmegaConf node: plain values, interpolations resolved
        from omegaconf import OmegaConf

        group = OmegaConf.to_container(group, resolve=True)
    return _build(E2CSettings, group, "")
