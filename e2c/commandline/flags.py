"""A settings dataclass is its own command line: each field's metadata declares its flag.

TRL's ``GRPOConfig`` is the model: one dataclass that is the config, the command line and the docs. A field
says what it is once, with :func:`setting` (its help line, its valid values and, when the command line
offers it, the flag's spelling, ``--help`` line and default); :func:`add_setting_flags` adds those flags
to a parser and :func:`flag_values` reads the parsed values back as field values. A new setting is then
one field: the RL launcher's E2C flags (:class:`e2c.rl.settings.E2CSettings`) and eval's
(:class:`e2c.eval.runner.EvalConfig`) are both built this way. A flag's other spellings come from the one
alias table, :data:`e2c.commandline.parsing.FLAG_ALIASES`, which the toolkit's parser adds to every flag.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any, TypeVar

from e2c.commandline.argtypes import ValueType

__all__ = [
    "FIELD_DEFAULT",
    "SettingFlag",
    "add_setting_flags",
    "check_settings",
    "flag_field",
    "flag_fields",
    "flag_values",
    "from_flags",
    "setting",
    "setting_choices",
]


T = TypeVar("T")


class _FieldDefault:
    def __repr__(self) -> str:
        return "FIELD_DEFAULT"


FIELD_DEFAULT: Any = _FieldDefault()
"""``flag_default`` of a flag whose value when not given is the field's own default."""


def setting(
    help: str | Callable[[], str],
    *,
    flag: str | bool | None = None,
    flag_help: str | Callable[[], str] | None = None,
    flag_default: Any = FIELD_DEFAULT,
    choices: Sequence[str] | Callable[[], Sequence[str]] | None = None,
    choices_label: str = "valid",
    nargs: str | None = None,
    negate: bool = False,
    repeat: bool = False,
    metavar: str | None = None,
    hidden: bool = False,
    required: bool = False,
    value: ValueType | None = None,
    section: str = "",
) -> dict[str, Any]:
    """A setting's field metadata: everything said about it, in one place.

    Args:
        help: what the setting does, or a function returning it when the flags are built (a line that names
            a registry's entries now: a method registered after import shows up).
        flag: the command-line flag that sets it (``--explore-budget``); True: ``--`` and the field's name
            with dashes (``eval_batch``: ``--eval-batch``); None: no flag.
        flag_help: the flag's ``--help`` line when it differs from ``help``.
        flag_default: the flag's value when it is not given (default: the field's default), or a function of
            no arguments returning it, called when the flags are built (a value read from a config file). The
            RL launcher adds a Hydra override only for a value that differs from it, so the config's stands.
        choices: the valid values, or a function returning them when they can grow at run time (a registry).
        choices_label: how a one-line error names the valid values ("registered rules").
        nargs: argparse's ``nargs`` for a list field (``"+"``).
        negate: a boolean field set to False by its flag (``--no-prefill`` sets ``prefill``).
        repeat: a tuple field whose flag is given once per item (``--set a=1 --set b=2``), each item parsed
            by ``value``; not given, the field's default.
        metavar: the flag's value as ``--help`` names it (``KEY=VALUE``).
        hidden: a flag for the toolkit's own use (a worker's shard, set by its parent): left out of ``--help``.
        required: the command refuses to run without it (argparse's ``required``; the field's default is
            then never used by the command line). A ``flag`` without dashes is a positional argument, which
            is always required (unless ``nargs`` says otherwise).
        value: the values it takes, as one of :mod:`e2c.commandline.argtypes`' types (``whole(1)``): the flag parses
            with it and a value from elsewhere (a Hydra override, a config) is checked with it
            (:func:`check_settings`). A list or tuple field's items are each checked with it. A boolean
            field with a ``value`` type takes its value as text (Elastic's ``--e1-mode True``) instead of
            being a switch.
        section: the ``--help`` group its flag is listed in (a key of ``add_setting_flags``'s ``sections``).
    """
    meta: dict[str, Any] = {"help": help, "value": value, "section": section}
    if flag is not None:
        meta.update(
            flag=flag,
            flag_help=flag_help or help,
            flag_default=flag_default,
            nargs=nargs,
            negate=negate,
            repeat=repeat,
            metavar=metavar,
            hidden=hidden,
            required=required,
        )
    if choices is not None:
        meta.update(choices=choices, choices_label=choices_label)
    return meta


def flag_field(
    default: Any, help: str, value: ValueType | None = None, *, flag: str | bool = True, **more: Any
) -> Any:
    """A dataclass field that is one flag, declared in one line: its default (or a function making it,
    called for each new object), its help line, its value type; ``flag``: its spelling (default ``--`` and
    the field's name); ``more``: the rest of :func:`setting`'s options."""
    meta = setting(help, flag=flag, value=value, **more)
    if callable(default):
        return field(default_factory=default, metadata=meta)
    return field(default=default, metadata=meta)


def setting_choices(metadata: Mapping[str, Any]) -> tuple[str, ...] | None:
    """A field's valid values now (a registry's names are read when asked), or None for any value."""
    choices = metadata.get("choices")
    if choices is None:
        return None
    return tuple(choices() if callable(choices) else choices)


@dataclass(frozen=True)
class SettingFlag:
    """A command-line flag, as a field's metadata declares it (:func:`setting`)."""

    key: str  # the field's dotted path: rollout.explore_budget
    flag: str  # --explore-budget
    help: str  # its --help line
    type: type  # the value's type: int, float, str or bool (a list field: its items')
    default: Any  # its value when not given
    value: ValueType | None  # the values it takes (e2c.commandline.argtypes); None: any value of its type
    choices: tuple[str, ...] | None
    nargs: str | None = None
    negate: bool = False
    repeat: bool = False  # given once per item (argparse's "append")
    metavar: str | None = None
    hidden: bool = False  # left out of --help
    required: bool = False  # refused when not given
    group: str = ""  # the config group the key lives in (RL: "e2c"); part of hydra_key
    section: str = ""  # the --help group it is listed in

    @property
    def dest(self) -> str:
        """The argparse attribute: ``explore_budget`` (the flag's name, as argparse derives it)."""
        return self.flag.lstrip("-").replace("-", "_")

    @property
    def hydra_key(self) -> str:
        """The key with its group: ``e2c.rollout.explore_budget``."""
        return f"{self.group}.{self.key}" if self.group else self.key


def _value_type(hint: Any) -> tuple[type, bool]:
    """``int | None`` -> (int, False); ``list[int] | None`` and ``tuple[int, ...]`` -> (int, True)."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 1:
        hint = args[0]
    if typing.get_origin(hint) in (list, tuple):
        return typing.get_args(hint)[0], True
    return hint, False


def _field_default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _field_type(cls: type, f: dataclasses.Field) -> tuple[type, bool]:
    """A field's value type: its default's, else (a None or list default) its resolved annotation's."""
    default = _field_default(f)
    if default is not None and default is not dataclasses.MISSING and not isinstance(default, list | tuple):
        return type(default), False
    return _value_type(typing.get_type_hints(cls)[f.name])


def flag_of(f: dataclasses.Field) -> str | None:
    """The flag a field's metadata declares (:func:`setting`'s ``flag``), or None."""
    flag = f.metadata.get("flag")
    return f"--{f.name.replace('_', '-')}" if flag is True else flag


def setting_flags(cls: type, prefix: str = "", group: str = "") -> Iterator[SettingFlag]:
    """The fields of ``cls`` (nested settings dataclasses included) that declare a flag, in declaration
    order."""
    for f in dataclasses.fields(cls):
        kind, is_list = _field_type(cls, f)
        if dataclasses.is_dataclass(kind):
            yield from setting_flags(kind, f"{prefix}{f.name}.", group)
        elif "flag" in f.metadata:
            meta = f.metadata
            default = _field_default(f) if meta["flag_default"] is FIELD_DEFAULT else meta["flag_default"]
            if callable(default):
                default = default()
            if default is dataclasses.MISSING:
                raise TypeError(f"{cls.__name__}.{f.name}: a required field's flag needs a flag_default")
            yield SettingFlag(
                key=prefix + f.name,
                flag=flag_of(f),
                help=meta["flag_help"]() if callable(meta["flag_help"]) else meta["flag_help"],
                type=kind,
                default=default,
                value=meta.get("value"),
                choices=setting_choices(meta),
                nargs=meta["nargs"] or ("+" if is_list and not meta.get("repeat") else None),
                negate=meta["negate"],
                repeat=meta.get("repeat", False),
                metavar=meta.get("metavar"),
                hidden=meta.get("hidden", False),
                required=meta.get("required", False),
                group=group,
                section=meta.get("section", ""),
            )


def add_setting_flags(
    parser: argparse.ArgumentParser,
    cls: type,
    group: str = "",
    *,
    override: bool = False,
    describe: Callable[[SettingFlag], str] | None = None,
    sections: Mapping[str, str] | None = None,
) -> list[SettingFlag]:
    """Add the flags ``cls``'s fields declare to ``parser`` (spelling, ``--help`` line, type, choices and
    default from the field); returns them.

    ``override``: every flag's default is None, so only a flag given on the command line sets its field and
    the rest keep the config's values (a preset's, such as ``--fast``). ``describe``: text added to a flag's
    ``--help`` line (its defaults). ``sections``: ``--help`` group titles by a field's ``section``; the
    groups are made in the order their first flag comes."""
    flags = list(setting_flags(cls, group=group))
    groups: dict[str, Any] = {}
    for f in flags:
        kwargs: dict[str, Any] = {"default": None if override else f.default, "help": f.help}
        if describe is not None:
            kwargs["help"] = f"{f.help}{describe(f)}"
        if f.repeat:  # a list default: argparse's "append" copies it before adding (a tuple it cannot)
            kwargs.update(action="append", type=f.value or f.type)
            kwargs["default"] = None if override else list(f.default)
        elif f.type is bool and f.value is None:
            kwargs["action"] = "store_true" if f.negate else argparse.BooleanOptionalAction
            if f.negate:
                kwargs["default"] = None if override else False
        else:
            kwargs["type"] = f.value or f.type
        if f.nargs is not None:
            kwargs["nargs"] = f.nargs
        if f.choices is not None:
            kwargs["choices"] = list(f.choices)
        if f.metavar is not None:
            kwargs["metavar"] = f.metavar
        if f.hidden:
            kwargs["help"] = argparse.SUPPRESS
        if f.required:
            kwargs["required"] = True
        where: Any = parser
        if f.section and sections is not None:
            if f.section not in groups:
                groups[f.section] = parser.add_argument_group(sections[f.section])
            where = groups[f.section]
        where.add_argument(f.flag, **kwargs)
    return flags


def flag_values(args: argparse.Namespace, cls: type, group: str = "") -> dict[str, Any]:
    """The parsed flags of ``cls`` as field values by dotted key (a negated flag given: its field False; a
    flag not given under ``override``: None)."""
    values = {}
    for f in setting_flags(cls, group=group):
        v = getattr(args, f.dest)
        values[f.key] = (not v if v is not None else None) if f.negate else v
    return values


def flag_fields(args: argparse.Namespace, cls: type) -> dict[str, Any]:
    """:func:`flag_values` as a frozen settings dataclass keeps them: paths as text, lists as tuples."""

    def text(v: Any) -> Any:
        return str(v) if isinstance(v, PurePath) else v

    return {
        k: tuple(text(x) for x in v) if isinstance(v, list) else text(v)
        for k, v in flag_values(args, cls).items()
    }


def from_flags(args: argparse.Namespace, cls: type[T]) -> T:
    """The settings dataclass ``cls`` built from its parsed flags (:func:`flag_fields`)."""
    return cls(**flag_fields(args, cls))


def check_settings(obj: Any, prefix: str = "", *, by_flag: bool = False, skip: Collection[str] = ()) -> None:
    """Check every field of a settings dataclass (nested ones too) that declares its values (``value=``)
    with that type: one :class:`e2c.core.errors.UserError` line naming the key (``prefix`` + the dotted
    field path; with ``by_flag``, a field's flag where it has one), however the value arrived (a flag, a
    Hydra override, a config file, a preset). A list or tuple's items are checked one by one; the fields
    named in ``skip`` are not (paths, checked where they are used, before any work)."""
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            check_settings(v, f"{prefix}{f.name}.", by_flag=by_flag, skip=skip)
            continue
        kind = f.metadata.get("value")
        if kind is None or v is None or f.name in skip:
            continue
        what = (by_flag and flag_of(f)) or f"{prefix}{f.name}"
        for item in v if isinstance(v, list | tuple) else [v]:
            kind.check(item, what)
