"""One set of value types for every flag, setting and override: a value's check is declared once.

A type here is what argparse calls with the flag's text (``type=whole(1)``) and what a settings dataclass
declares in its field metadata (``setting(..., value=probability())``), so a Hydra override is checked by the
flag's rule. Numbers: :func:`finite`, :func:`positive`, :func:`at_least`, :func:`probability`, :func:`whole`
(``nan`` and ``inf`` refused everywhere); paths: :data:`EXISTING_FILE`, :data:`EXISTING_DIR`,
:data:`OUTPUT_DIR`, :data:`OUTPUT_FILE` (checked before any work, writing nothing that stays); :data:`MODEL`;
:data:`TEXT` / :data:`ANY_TEXT`; :class:`NameList` and :class:`Choice`. Every check is a pure function of the
text (and of the file system, for paths); errors are one line. The bad-input test derives each type's bad
values from the type (``tests/bad_values.py``), so a new flag with a type is covered by construction.
More: docs/bad-input.md, "The contract, and how it is kept".
"""

from __future__ import annotations

import argparse
import difflib
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2c.core.errors import UserError

__all__ = [
    "ANY_TEXT",
    "EXISTING_DIR",
    "EXISTING_FILE",
    "MODEL",
    "OUTPUT_DIR",
    "OUTPUT_FILE",
    "TEXT",
    "Choice",
    "NameList",
    "Number",
    "ValueType",
    "at_least",
    "check_value",
    "finite",
    "positive",
    "probability",
    "whole",
]

INT_MAX = 2**31 - 1  # seeds, counts and sizes go to C ints (numpy, torch, vLLM) somewhere


class ValueType:
    """A flag's value type: argparse's ``type=``, and a setting's check."""

    name = "a value"  # how an error line says what is wanted

    def parse(self, text: str) -> Any:  # pragma: no cover - every type overrides it
        raise NotImplementedError

    def __call__(self, text: str) -> Any:
        """argparse's entry (the toolkit's parser calls :meth:`parse` itself, to name the flag first:
        ``--limit must be >= 1, got 0``)."""
        try:
            return self.parse(text)
        except UserError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    def check(self, value: Any, what: str) -> Any:
        """A value that did not come from text (a Hydra override, a config file), named ``what``."""
        try:
            return self.parse(value if isinstance(value, str) else repr(value))
        except UserError as e:
            raise UserError(f"{what} {e}") from None

    def __repr__(self) -> str:
        return self.name


def _shown(text: object) -> str:
    """A value as an error line shows it: bare when it reads unambiguously, quoted otherwise."""
    s = str(text)
    return s if s and s == s.strip() and s.isprintable() and len(s) <= 80 else repr(s[:80])


def _wanted(t: ValueType, text: object) -> UserError:
    return UserError(f"must be {t.name}, got {_shown(text)}")


@dataclass(frozen=True, repr=False)
class Number(ValueType):
    """A finite int or float in ``[low, high]`` (``low_open``: ``(low, high]``), or one of ``special``, or one
    of the texts ``words`` (which ``meaning`` names)."""

    kind: type = float
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    special: tuple[float, ...] = ()
    meaning: str = ""  # what the special values mean, for the error line ("-1: never")

    label: str = ""  # a name for the whole range ("a positive number"), instead of its bounds
    words: tuple[str, ...] = ()  # texts taken as they are besides the numbers (``after_each_epoch``)

    def _bounds(self, cap: bool = False) -> str:
        """The range in comparisons: ``>= 1``, ``> 0``, ``in [0, 1]``, ``>= 2 and <= 8``. The C-int cap of a
        count is named only to a value above it (``cap``); whole-number bounds print whole (1000000)."""
        show = (lambda v: str(int(v))) if self.kind is int else (lambda v: f"{v:g}")
        high = None if self.high is None or (self.high == INT_MAX and not cap) else show(self.high)
        low = None if self.low is None else show(self.low)
        if low is not None and high is not None and not self.low_open:
            return f"in [{low}, {high}]"
        parts = []
        if low is not None:
            parts.append(f"{'>' if self.low_open else '>='} {low}")
        if high is not None:
            parts.append(f"<= {high}")
        return " and ".join(parts)

    @property
    def name(self) -> str:  # type: ignore[override]
        noun = "a whole number" if self.kind is int else "a finite number"
        text = self.label or " ".join(filter(None, (noun, self._bounds())))
        return text + (f" (or {self.meaning})" if self.meaning else "")

    def _in_range(self, v: float) -> bool:
        if v in self.special:
            return True
        if self.low is not None and (v <= self.low if self.low_open else v < self.low):
            return False
        return self.high is None or v <= self.high

    def parse(self, text: str) -> int | float | str:
        s = str(text).strip()
        if s in self.words:
            return s
        try:
            v: int | float = int(s) if self.kind is int else float(s)
        except (ValueError, OverflowError):
            raise _wanted(self, text) from None
        if isinstance(v, float) and not math.isfinite(v):
            raise _wanted(self, text)
        if not self._in_range(v):
            # a number out of range is told its bounds only: "--limit must be >= 1, got 0"
            wanted = self.label or self._bounds(cap=self.high is not None and v > self.high)
            raise UserError(
                f"must be {wanted}{f' (or {self.meaning})' if self.meaning else ''}, got {_shown(text)}"
            )
        return v

    def check(self, value: Any, what: str) -> Any:
        integral = isinstance(value, float) and value.is_integer()
        if isinstance(value, bool) or (self.kind is int and isinstance(value, float) and not integral):
            raise UserError(f"{what} must be {self.name}, got {value!r}")
        try:
            return self.parse(str(int(value) if self.kind is int and integral else value))
        except UserError as e:
            raise UserError(f"{what} {e}") from None


def finite() -> Number:
    """Any finite number (``nan`` and ``inf`` refused)."""
    return Number(float)


def positive() -> Number:
    """A finite number > 0 (learning rates, timeouts)."""
    return Number(float, low=0.0, low_open=True, label="a positive number")


def at_least(low: float, high: float | None = None) -> Number:
    """A finite number >= ``low`` (and <= ``high``)."""
    return Number(float, low=low, high=high)


def probability(open_zero: bool = False) -> Number:
    """A number in [0, 1] (``open_zero``: (0, 1], as top-p)."""
    return Number(float, low=0.0, high=1.0, low_open=open_zero)


def whole(
    low: int = 0,
    high: int | None = INT_MAX,
    special: Sequence[int] = (),
    meaning: str = "",
    words: Sequence[str] = (),
) -> Number:
    """A whole number in ``[low, high]`` or one of ``special`` or of the texts ``words`` (``meaning`` says what
    they mean)."""
    return Number(int, low=low, high=high, special=tuple(special), meaning=meaning, words=tuple(words))


@dataclass(frozen=True, repr=False)
class Text(ValueType):
    """A non-empty string (names, labels)."""

    name = "a non-empty text"

    def parse(self, text: str) -> str:
        s = str(text)
        if not s.strip():
            raise _wanted(self, text)
        return _utf8(s)


_PATH_NAMES = {
    "file": "an existing file",
    "dir": "an existing folder",
    "out_dir": "a folder this process can write",
    "out_file": "a file path this process can write",
}


def _utf8(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise UserError(f"must be UTF-8 text, got {text!r}") from None
    return text


@dataclass(frozen=True, repr=False)
class AnyText(ValueType):
    """Text, empty or not, that can be written to a UTF-8 file (a prompt, a results file) as it is."""

    name = "UTF-8 text"

    def parse(self, text: str) -> str:
        return _utf8(str(text))

    def check(self, value: Any, what: str) -> str:
        # A config file's number or list is not text: stringifying it would hide a typo in the file.
        if not isinstance(value, str):
            raise UserError(f"{what} must be text, got {value!r}")
        return super().check(value, what)


@dataclass(frozen=True, repr=False)
class NameList(ValueType):
    """Comma-separated names from a set, kept in order (at least one): ``--arms sft,grpo``."""

    choices: tuple[str, ...]
    noun: str = "name"

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"comma-separated {self.noun}s from {', '.join(self.choices)}"

    def parse(self, text: str) -> list[str]:
        names = [n.strip() for n in str(text).split(",") if n.strip()]
        bad = [n for n in names if n not in self.choices]
        if bad:
            raise UserError(f"has an unknown {self.noun} {bad[0]!r}; valid: {', '.join(self.choices)}")
        if not names:
            raise UserError(f"names no {self.noun}; valid: {', '.join(self.choices)}")
        return names


@dataclass(frozen=True, repr=False)
class Choice(ValueType):
    """One name from a set: a tuple, or a function returning the names of a registry now (``families``)."""

    choices: tuple[str, ...] | Callable[[], Sequence[str]]
    noun: str = "name"

    def names(self) -> tuple[str, ...]:
        return tuple(self.choices() if callable(self.choices) else self.choices)

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"a {self.noun} from {', '.join(self.names())}"

    def parse(self, text: str) -> str:
        s, valid = str(text), self.names()
        if s not in valid:
            close = difflib.get_close_matches(s, valid, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise UserError(f"names an unknown {self.noun} {s[:80]!r}{hint}; valid: {', '.join(valid)}")
        return s


@dataclass(frozen=True, repr=False)
class PathType(ValueType):
    """A path. ``mode``: ``file`` / ``dir`` (must exist), ``out_dir`` / ``out_file`` (must be creatable and
    writable; nothing stays behind from the check)."""

    mode: str = "file"

    @property
    def name(self) -> str:  # type: ignore[override]
        return _PATH_NAMES[self.mode]

    def parse(self, text: str) -> Path:

        s = str(text)
        if not s.strip():
            raise UserError(f"must be {self.name}, got an empty path")
        if "\0" in s:
            raise UserError(f"must be {self.name}, got a path with a NUL byte")
        path = Path(s).expanduser()
        if self.mode == "file":
            if path.is_dir():
                raise UserError(f"{s} is a folder; give a file")
            if not path.is_file():
                raise UserError(f"{s} does not exist" if not path.exists() else f"{s} is not a plain file")
        elif self.mode == "dir":
            if not path.is_dir():
                raise UserError(f"{s} is not a folder" if path.exists() else f"{s} does not exist")
        elif self.mode == "out_dir":
            # start-up: the e2c command's --help and tab completion import this module, not the file helpers
            from e2c.core.files import check_output_dir

            if os.path.lexists(path) and not path.is_dir():
                raise UserError(f"{s} exists and is not a folder")
            check_output_dir(path, "folder")
        else:
            from e2c.core.files import check_output_file  # start-up, as above

            check_output_file(path, "file")
        return path


@dataclass(frozen=True, repr=False)
class ModelRef(ValueType):
    """A model reference: ``tiny``, ``embedded``, an HF id ``owner/name``, or a local model folder (its
    config, weight headers and tokenizer are checked now: :func:`e2c.core.models.check_model_folder`). A
    folder with no ``config.json`` may hold the model in a ``--subfolder``: it is checked at resolution."""

    name = "a model: 'tiny', 'embedded', a local model folder or an HF id 'owner/name'"
    extra: tuple[str, ...] = ()  # more names this entry point resolves itself ("auto")

    def parse(self, text: str) -> str:
        # start-up: model names bring the chain format and progress; the e2c command's --help needs neither
        from e2c.core.models import SPEC_FORMS, check_model_folder, is_hub_id

        s = str(text)
        if not s.strip():
            raise UserError(f"empty model; use {SPEC_FORMS}")
        if "\0" in s:
            raise UserError("a model path with a NUL byte")
        if s in ("tiny", "embedded", *self.extra):
            return s
        p = Path(s).expanduser()
        if p.is_file():
            raise UserError(f"model {s} is a file; give a model folder (config.json, weights, tokenizer)")
        if p.is_dir():
            if (p / "config.json").exists():
                check_model_folder(p)
            return s
        if is_hub_id(s):
            return s
        raise UserError(f"unknown model {s!r}: not a folder and not an HF id; use {SPEC_FORMS}")


EXISTING_FILE = PathType("file")
EXISTING_DIR = PathType("dir")
OUTPUT_DIR = PathType("out_dir")
OUTPUT_FILE = PathType("out_file")
MODEL = ModelRef()
TEXT = Text()
ANY_TEXT = AnyText()


def check_value(value: Any, kind: ValueType | None, what: str) -> Any:
    """``kind.check(value, what)``; a value with no declared type passes as it is."""
    return value if kind is None else kind.check(value, what)
