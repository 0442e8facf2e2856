"""The study file: one TOML (or JSON) file declaring a base and named arms, read and checked once.

``[study]`` holds the study's own settings (:class:`StudyOptions`), ``[base]`` quickstart settings, and each
``[arms.NAME]`` a ``kind`` (``sft``, ``rl``, ``sft_continue``, ``sft_matched``), its link (``start`` or
``of``) and its own settings. Every setting is a quickstart :class:`~e2c.quickstart.config.Config` field,
checked with the quickstart's own declaration of it: an arm's settings are the base's with its own on top, as
one ``Config``. What the file gets wrong (an unknown key, a wrong type, a value out of range, an unknown start,
a cycle of starts) is one :class:`UserError` line naming the table, the key and the valid choices, before
anything is written.
More: docs/study.md, "Declaring a study".
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from e2c.commandline.argtypes import MODEL, ValueType, probability, whole
from e2c.commandline.flags import setting
from e2c.core.errors import UserError
from e2c.quickstart.cli import validate
from e2c.quickstart.config import FAST, Config

ARM_KINDS = ("sft", "rl", "sft_continue", "sft_matched")
# The equal-token SFT arms of an RL arm (``of``): continued from its start, or from its start's own start in
# one schedule for the start's steps plus as many tokens as the RL run trained on.
EQUAL_TOKEN_KINDS = ("sft_continue", "sft_matched")
BASE = "base"  # the start named by this word is the base model (the base table's ``model``)
ARM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")  # a folder name on every file system

# Config fields a study file does not set: the output folder and preset are the command line's, and the
# study evaluates on synthetic problems only (no GSM8K, no TTS, its own equal-token arms instead of the
# quickstart's control).
NOT_STUDY_KEYS = frozenset(
    {"out", "fast", "extra", "with_control", "gsm8k_problems", "bench_dir"}
    | {f for f in Config.field_names() if f.startswith("tts_")}
)
FIXED = {"gsm8k_problems": 0, "tts_problems": 0, "with_control": False}
BASE_KEYS = tuple(f for f in Config.field_names() if f not in NOT_STUDY_KEYS)
# What each kind of arm may set (every quickstart field of its stage: a new one is an arm setting at once).
SFT_KEYS = tuple(f for f in BASE_KEYS if f.startswith("sft_"))
RL_KEYS = tuple(f for f in BASE_KEYS if f.startswith(("rl_", "filter_")))
# The continuation's steps follow from its RL arm's trained tokens.
CONTINUE_KEYS = tuple(k for k in SFT_KEYS if k != "sft_steps")
KIND_KEYS: dict[str, tuple[str, ...]] = {
    "sft": SFT_KEYS,
    "rl": RL_KEYS,
    "sft_continue": CONTINUE_KEYS,
    "sft_matched": CONTINUE_KEYS,
}
# The keys of an arm's table that are not settings.
ARM_FIELDS: dict[str, tuple[str, ...]] = {
    "sft": ("kind", "start", "seeds", "note"),
    "rl": ("kind", "start", "seeds", "note"),
    "sft_continue": ("kind", "of", "seeds", "note"),
    "sft_matched": ("kind", "of", "seeds", "note"),
}
TABLES = ("study", "base", "arms")


@dataclass(frozen=True)
class StudyOptions:
    """The ``[study]`` table: settings of the study itself (every field optional)."""

    name: str = field(default="", metadata=setting("the study's name in the report (default: the file's)"))
    seeds: tuple[int, ...] = field(
        default=(0,),
        metadata=setting(
            "training seeds of every arm that names none (its data order and sampling)", value=whole(0)
        ),
    )
    delta: float = field(
        default=0.02,
        metadata=setting(
            "smallest accuracy difference that matters, as a fraction: an interval below it rules a gain out",
            value=probability(open_zero=True),
        ),
    )
    validation_problems: int = field(
        default=0,
        metadata=setting(
            "problems of the screening split (0: as many as the base's eval_problems)", value=whole(0)
        ),
    )


@dataclass(frozen=True)
class Arm:
    """One arm, checked: its kind, where it starts (an arm's name or :data:`BASE`), the RL arm it matches
    (``sft_continue``, ``sft_matched``), its seeds, the settings its table set and its whole quickstart
    Config."""

    name: str
    kind: str
    start: str
    seeds: tuple[int, ...]
    given: Mapping[str, Any]
    cfg: Config
    of: str | None = None
    note: str = ""


@dataclass(frozen=True)
class Study:
    """A checked study: its file, options, base settings and arms (each after the arms it starts from)."""

    source: str
    options: StudyOptions
    base: Config
    base_given: Mapping[str, Any]
    arms: Mapping[str, Arm]
    fast: bool = False

    @property
    def name(self) -> str:
        return self.options.name or Path(self.source).stem

    @property
    def validation_problems(self) -> int:
        return self.options.validation_problems or self.base.eval_problems

    def start_seed(self, arm: str, seed: int) -> int | None:
        """The seed of the start arm's model that ``arm``'s seed ``seed`` starts from (None: the base model).
        The same seed when the start ran it, else the start's only seed (one start shared by every seed)."""
        a = self.arms[arm]
        if a.start == BASE:
            return None
        if a.kind == "sft_continue":  # from where its RL arm started, for the same seed
            return self.start_seed(a.of or "", seed)
        if a.kind == "sft_matched":  # from where its RL arm's SFT start started
            ss = self.start_seed(a.of or "", seed)
            return None if ss is None else self.start_seed(self.arms[a.of or ""].start, ss)
        starts = self.arms[a.start].seeds
        return seed if seed in starts else starts[0]

    def with_needs(self, names: Sequence[str]) -> list[str]:
        """``names`` and every arm they need, in the study's order: each one's start and, for a continuation,
        its RL arm (and so that arm's start), transitively."""
        want: set[str] = set()
        todo = list(names)
        while todo:
            name = todo.pop()
            if name in want or name == BASE:
                continue
            want.add(name)
            a = self.arms[name]
            todo += [n for n in (a.start, a.of) if n]
        return [n for n in self.arms if n in want]

    def continuations(self, arm: str) -> list[str]:
        """The equal-token SFT arms (``sft_continue``, ``sft_matched``) that match RL arm ``arm``."""
        return [a.name for a in self.arms.values() if a.kind in EQUAL_TOKEN_KINDS and a.of == arm]

    def sft_depth(self, arm: str) -> int:
        """How many SFT runs (``sft`` and the equal-token kinds) trained the model ``arm`` starts from."""
        a = self.arms[arm]
        if a.start == BASE:
            return 0
        s = self.arms[a.start]
        return self.sft_depth(s.name) + (1 if s.kind in ("sft", *EQUAL_TOKEN_KINDS) else 0)


# ------------------------------------------------------------------------------------------------ reading
def read_study_file(path: Path) -> dict[str, Any]:
    """The file's tables: TOML, or JSON for a ``.json`` file. UserError (one line) for what cannot be read."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise UserError(f"{path}: cannot read the study file ({e.strerror or e})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{path}: the study file is not UTF-8 text") from None
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except ValueError as e:
            raise UserError(f"{path}: not valid JSON ({e})") from None
    else:
        toml = toml_module()
        try:
            data = toml.loads(text)
        except toml.TOMLDecodeError as e:
            raise UserError(f"{path}: not valid TOML ({e})") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: a study file holds tables ({', '.join(TABLES)}), got {type(data).__name__}")
    return data


def toml_module() -> Any:
    """Python's TOML reader (3.11 and later); on 3.10 a TOML study file is one line asking for JSON (the
    project pins no TOML package for 3.10, so none is imported here)."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        raise UserError("reading a TOML study file needs Python 3.11; write it as JSON instead") from None
    return tomllib


def load_study(path: str | Path, fast: bool = False) -> Study:
    """Read and check a study file (:func:`parse_study`)."""
    p = Path(path)
    return parse_study(read_study_file(p), str(p), fast)


def parse_study(data: Mapping[str, Any], source: str, fast: bool = False) -> Study:
    """Check a study's tables and build it. ``fast``: the quickstart's ``--fast`` preset (the tiny model at
    tiny sizes) replaces every setting it names, in the base and in every arm, and the screening split is as
    large as its held-out set."""
    where = f"{source}:"
    unknown = [k for k in data if k not in TABLES]
    if unknown:
        raise UserError(
            f"{where} unknown table {unknown[0]!r}{_close(unknown[0], TABLES)}; valid: {', '.join(TABLES)}"
        )
    options = parse_options(_table(data, "study", where), f"{where} [study]")
    if fast:  # the screening split as small as the preset's held-out set
        options = replace(options, validation_problems=0)
    base_given = check_keys(_table(data, "base", where), BASE_KEYS, f"{where} [base]")
    preset = {k: v for k, v in FAST.items() if k in BASE_KEYS} if fast else {}
    base = replace(Config(), **{**base_given, **preset, **FIXED}, fast=fast)
    check_config(base, f"{where} [base]")
    arms_raw = _table(data, "arms", where)
    if not arms_raw:
        raise UserError(
            f"{where} no arms; declare at least one [arms.NAME] table with kind = {' | '.join(ARM_KINDS)}"
        )
    arms = {name: parse_arm(name, table, base, options, preset, where) for name, table in arms_raw.items()}
    check_links(arms, where)
    order = arm_order(arms, where)
    return Study(source, options, base, base_given, {n: arms[n] for n in order}, fast)


def _table(data: Mapping[str, Any], name: str, where: str) -> dict[str, Any]:
    t = data.get(name, {})
    if not isinstance(t, dict):
        raise UserError(f"{where} [{name}] must be a table, got {_shown(t)}")
    return t


def parse_options(table: Mapping[str, Any], where: str) -> StudyOptions:
    names = [f.name for f in fields(StudyOptions)]
    given = check_keys(table, names, where, defaults=StudyOptions())
    opts = StudyOptions(**given)
    for f in fields(StudyOptions):  # each value with its declared type (a list's items one by one)
        kind, v = f.metadata.get("value"), getattr(opts, f.name)
        for item in v if isinstance(v, tuple) else (v,):
            if kind is not None:
                kind.check(item, f"{where} {f.name}")
    if len(set(opts.seeds)) != len(opts.seeds) or not opts.seeds:
        raise UserError(f"{where} seeds must be distinct whole numbers, at least one, got {list(opts.seeds)}")
    return opts


def parse_arm(
    name: str,
    table: Any,
    base: Config,
    options: StudyOptions,
    preset: Mapping[str, Any],
    where: str,
) -> Arm:
    """One ``[arms.NAME]`` table, checked against its kind's keys; its Config is the base's with its own
    settings (and the ``--fast`` preset's) on top."""
    at = f"{where} [arms.{name}]"
    if not ARM_NAME.match(str(name)) or name == BASE:
        raise UserError(
            f"{at} the arm's name must be letters, digits, '_', '.' or '-' (at most 64, not {BASE!r}), "
            f"got {name!r}"
        )
    if not isinstance(table, dict):
        raise UserError(f"{at} must be a table, got {_shown(table)}")
    kind = table.get("kind")
    if kind not in ARM_KINDS:
        got = "no kind" if kind is None else f"kind {_shown(kind)}"
        raise UserError(f"{at} {got}; valid kinds: {', '.join(ARM_KINDS)}")
    keys = (*ARM_FIELDS[kind], *KIND_KEYS[kind])
    for k in table:
        if k not in keys:
            moved = [o for o in ARM_KINDS if k in (*ARM_FIELDS[o], *KIND_KEYS[o])]
            why = f" (a setting of kind {' or '.join(moved)} arms)" if moved else _close(k, keys)
            raise UserError(f"{at} unknown key {k!r} for a {kind} arm{why}; valid: {', '.join(keys)}")
    settings = {k: v for k, v in table.items() if k in KIND_KEYS[kind]}
    given = check_keys(settings, KIND_KEYS[kind], at)
    note = table.get("note", "")
    if not isinstance(note, str):
        raise UserError(f"{at} note must be text, got {_shown(note)}")
    seeds = options.seeds
    if "seeds" in table:
        seeds = _coerce(table["seeds"], (0,), f"{at} seeds")
        for s in seeds:
            whole(0).check(s, f"{at} seeds")
        if not seeds or len(set(seeds)) != len(seeds):
            raise UserError(f"{at} seeds must be distinct whole numbers, at least one, got {list(seeds)}")
    link = "of" if kind in EQUAL_TOKEN_KINDS else "start"
    target = table.get(link, BASE if kind == "sft" else None)
    if target is None:
        raise UserError(
            f"{at} a {kind} arm needs {link} = NAME ({'an rl arm' if link == 'of' else 'an arm, or base'})"
        )
    if not isinstance(target, str):
        raise UserError(f"{at} {link} must be an arm's name, got {_shown(target)}")
    cfg = replace(base, **{**given, **{k: v for k, v in preset.items() if k in KIND_KEYS[kind]}})
    check_config(cfg, at)
    if kind == "rl" and cfg.rl_steps < 1:  # the quickstart's 0 skips RL; an RL arm is its RL run
        raise UserError(f"{at} an rl arm needs rl_steps >= 1, got {cfg.rl_steps}")
    return Arm(
        name=name,
        kind=kind,
        start=target if link == "start" else "",
        seeds=tuple(seeds),
        given=given,
        cfg=cfg,
        of=target if link == "of" else None,
        note=note,
    )


def check_links(arms: dict[str, Arm], where: str) -> None:
    """Every start is an arm or the base, every ``of`` an rl arm, and each arm's seeds have a start model.
    Fills in a continuation's start (its RL arm's)."""
    names = list(arms)
    rl = [n for n, a in arms.items() if a.kind == "rl"]
    for a in list(arms.values()):
        at = f"{where} [arms.{a.name}]"
        if a.kind in EQUAL_TOKEN_KINDS:
            if a.of not in rl:
                what = "is not an rl arm" if a.of in arms else "is not an arm"
                raise UserError(
                    f"{at} of = {a.of!r} {what}; valid: {', '.join(rl) or '(no rl arm declared)'}"
                )
            start = arms[a.of].start
            if a.kind == "sft_matched":
                if start == BASE or arms[start].kind != "sft":
                    raise UserError(
                        f"{at} rl arm {a.of} starts from {start!r}, not an sft arm: an sft_matched arm trains "
                        "that SFT arm's steps plus the RL run's tokens from the SFT arm's own start"
                    )
                start = arms[start].start
            arms[a.name] = replace(a, start=start)
            missing = [s for s in a.seeds if s not in arms[a.of].seeds]
            if missing:
                raise UserError(
                    f"{at} seed {missing[0]}: rl arm {a.of} has no such seed (its seeds: "
                    f"{', '.join(map(str, arms[a.of].seeds))}); a continuation matches the RL run of its seed"
                )
            continue
        if a.start != BASE and a.start not in arms:
            raise UserError(
                f"{at} start = {a.start!r} is not an arm{_close(a.start, names)}; valid: {BASE}, {', '.join(names)}"
            )
        if a.start == a.name:
            raise UserError(f"{at} start = {a.start!r}: an arm cannot start from itself")
        if a.start != BASE:
            starts = arms[a.start].seeds
            missing = [s for s in a.seeds if s not in starts]
            if missing and len(starts) > 1:
                raise UserError(
                    f"{at} seed {missing[0]} has no model in start arm {a.start} (its seeds: "
                    f"{', '.join(map(str, starts))}); give the start that seed or a single seed that every seed shares"
                )


def arm_order(arms: Mapping[str, Arm], where: str) -> list[str]:
    """The arms, each after what it starts from (and a continuation after its RL arm), otherwise in file
    order; UserError naming a cycle of starts."""
    order: list[str] = []
    state: dict[str, int] = {}  # 1: being visited, 2: placed

    def needs(a: Arm) -> list[str]:
        return [n for n in (a.start, a.of) if n and n != BASE]

    def visit(name: str, path: list[str]) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            loop = [*path[path.index(name) :], name]
            raise UserError(
                f"{where} the arms' starts form a cycle: {' -> '.join(loop)}; one of them must start elsewhere"
            )
        state[name] = 1
        for n in needs(arms[name]):
            visit(n, [*path, name])
        state[name] = 2
        order.append(name)

    for name in arms:
        visit(name, [])
    return order


# ------------------------------------------------------------------------------------------------ values
def check_keys(
    table: Mapping[str, Any], keys: Sequence[str], where: str, defaults: Any = None
) -> dict[str, Any]:
    """The table's values as ``defaults``' fields hold them (a list as a tuple, a whole number for a float),
    each checked with its declared type; UserError for an unknown key or a wrong value."""
    defaults = Config() if defaults is None else defaults
    out = {}
    for k, v in table.items():
        if k not in keys:
            raise UserError(f"{where} unknown setting {k!r}{_close(k, keys)}; valid: {', '.join(keys)}")
        value = _coerce(v, getattr(defaults, k), f"{where} {k}")
        if isinstance(defaults, Config):
            check_flag_value(k, value, f"{where} {k}")
        out[k] = value
    return out


def _coerce(value: Any, default: Any, what: str) -> Any:
    """``value`` in the type of ``default`` (bool, int, float, str, or a tuple of them); UserError else."""
    if isinstance(default, tuple):
        if not isinstance(value, list):
            raise UserError(f"{what} must be a list, got {_shown(value)}")
        item = default[0] if default else ""
        return tuple(_coerce(v, item, what) for v in value)
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise UserError(f"{what} must be true or false, got {_shown(value)}")
        return value
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise UserError(f"{what} must be a whole number, got {_shown(value)}")
        return value
    if isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise UserError(f"{what} must be a number, got {_shown(value)}")
        return float(value)
    if isinstance(default, str):
        if not isinstance(value, str):
            raise UserError(f"{what} must be text, got {_shown(value)}")
        return value
    return value


# Each Config field's value type, declared once with its quickstart flag (e2c.commandline.flags.setting).
CONFIG_TYPES: dict[str, ValueType | None] = {f.name: f.metadata.get("value") for f in fields(Config)}


def check_flag_value(key: str, value: Any, what: str) -> None:
    """``value`` of Config field ``key`` checked as the quickstart checks its flag: with the value type its
    field declares (an item at a time for a list)."""
    kind = CONFIG_TYPES.get(key)
    if kind is None:
        return
    for v in value if isinstance(value, tuple) else (value,):
        kind.check(v, what)


def check_config(cfg: Config, where: str) -> None:
    """The quickstart's own check of a whole Config (what one value cannot say alone: families, bands).
    Its RL memory check is left to the run (:func:`e2c.study.cli.check_memory`): whether an arm fits depends
    on the machine and on which units still run, not on the file (``rl_steps`` 0 skips it here; an RL
    arm's steps are checked by :func:`parse_arm`)."""
    try:
        MODEL.check(cfg.model, "model")
        validate(replace(cfg, rl_steps=0))
    except UserError as e:
        raise UserError(f"{where} {e}") from None


def _close(name: str, valid: Sequence[str]) -> str:
    m = difflib.get_close_matches(str(name), list(valid), n=1)
    return f" (did you mean {m[0]}?)" if m else ""


def _shown(v: Any) -> str:
    s = json.dumps(v, default=str) if not isinstance(v, str) else repr(v)
    return s if len(s) <= 60 else s[:57] + "..."


def settings_of(obj: Any) -> dict[str, Any]:
    """A dataclass's fields as JSON values (tuples as lists)."""
    return json.loads(json.dumps(dataclasses.asdict(obj), default=str))


__all__ = [
    "ARM_KINDS",
    "BASE",
    "KIND_KEYS",
    "Arm",
    "Study",
    "StudyOptions",
    "load_study",
    "parse_study",
    "read_study_file",
]
