"""What the quickstart's and the claims run's settings share: one frozen dataclass whose fields are its flags,
a ``--fast`` preset over the defaults, and the settings each stage's result depends on.

A stage runner's settings class (:class:`e2c.quickstart.config.Config`, :class:`e2c.claims.config.ClaimsConfig`)
declares each setting once, as a field with :func:`e2c.commandline.flags.setting` metadata (its help line, its value
type, its ``--help`` section); the command line, the check of a whole config (a preset's values, a study
file's) and the ``--help`` text all come from that one declaration.
"""

from __future__ import annotations

import argparse
from collections.abc import Collection, Mapping
from dataclasses import asdict, fields, replace
from typing import Any

from e2c.commandline.argtypes import ValueType
from e2c.commandline.flags import SettingFlag, add_setting_flags, check_settings, flag_field, flag_fields


def shown(value: Any) -> str:
    """A setting's value as ``--help`` shows it (a tuple as its items)."""
    return " ".join(map(str, value)) if isinstance(value, tuple | list) else str(value)


def knob(default: Any, help: str, value: ValueType | None = None, section: str = "") -> Any:
    """A setting that is the flag ``--<its name>``, declared once (:func:`e2c.commandline.flags.setting`): its default
    (or a function making it when a config is made), its help line, its value type, its ``--help`` section."""
    return flag_field(default, help, value, section=section)


class StageSettings:
    """Mixed into a frozen settings dataclass: ``class Config(StageSettings, preset=FAST, stage_keys=KEYS)``.

    ``preset``: the ``--fast`` values by field; ``stage_keys``: the fields each stage's result depends on
    (a finished stage is reused only while they are unchanged); ``checked_where_used``: path fields, which
    are checked by the stage that uses them, before any work, rather than with the rest."""

    PRESET: Mapping[str, Any] = {}
    STAGE_KEYS: Mapping[str, tuple[str, ...]] = {}
    CHECKED_WHERE_USED: tuple[str, ...] = ()

    def __init_subclass__(
        cls,
        preset: Mapping[str, Any] | None = None,
        stage_keys: Mapping[str, tuple[str, ...]] | None = None,
        checked_where_used: tuple[str, ...] = (),
        **kwargs: Any,
    ) -> None:
        super().__init_subclass__(**kwargs)
        cls.PRESET = dict(preset or {})
        cls.STAGE_KEYS = dict(stage_keys or {})
        cls.CHECKED_WHERE_USED = checked_where_used

    def to_dict(self) -> dict[str, Any]:
        """The settings as JSON-ready values (tuples become lists)."""
        d = asdict(self)  # type: ignore[call-overload]
        return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}

    def stage_settings(self, stage: str) -> dict[str, Any]:
        """The settings ``stage``'s result depends on, as JSON-ready values."""
        d = self.to_dict()
        return {k: d[k] for k in self.STAGE_KEYS[stage]}

    def with_fast(self, explicit: Collection[str] = ()) -> Any:
        """These settings with the ``--fast`` preset applied to every field not in ``explicit`` (the ones the
        user set)."""
        preset = {k: self.preset_value(k) for k in self.PRESET if k not in explicit}
        return replace(self, fast=True, **preset)  # type: ignore[type-var]

    @classmethod
    def preset_value(cls, key: str) -> Any:
        """The ``--fast`` value of ``key`` (a preset value may be a function making it, called when asked:
        the output folder follows ``E2C_BASE_DIR``)."""
        value = cls.PRESET[key]
        return value() if callable(value) else value

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]  # type: ignore[arg-type]

    @classmethod
    def describe_default(cls, flag: SettingFlag) -> str:
        """A flag's defaults for its ``--help`` line: `` (default: 2; --fast: 1)`` (its own words when its help
        line names its default)."""
        fast = f"--fast: {shown(cls.preset_value(flag.key))}" if flag.key in cls.PRESET else ""
        if "(default:" in flag.help:
            return f" ({fast})" if fast else ""
        return f" (default: {shown(flag.default)}{'; ' + fast if fast else ''})"

    @classmethod
    def add_flags(cls, parser: argparse.ArgumentParser, sections: Mapping[str, str]) -> None:
        """Every field's flag, in ``sections``' ``--help`` groups; a flag not given leaves its field as the
        defaults or the preset have it."""
        add_setting_flags(parser, cls, override=True, describe=cls.describe_default, sections=sections)

    @classmethod
    def from_flags(cls, args: argparse.Namespace) -> Any:
        """The defaults, then the ``--fast`` preset when ``args.fast``, then every flag given explicitly
        (paths as text, lists as tuples)."""
        given = {k: v for k, v in flag_fields(args, cls).items() if v is not None}
        base = cls()
        return replace(base.with_fast(set(given)) if args.fast else base, **given)  # type: ignore[type-var]

    def check_values(self) -> None:
        """Each setting's value by its declared type, named by its flag: one UserError line (the preset's
        values and a study file's go through the same rule as a flag's)."""
        check_settings(self, by_flag=True, skip=self.CHECKED_WHERE_USED)
