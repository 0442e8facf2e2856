"""Value types the generation entry points (eval, TTS, the demos) share that :mod:`e2c.argtypes` lacks.

They follow argtypes' contract (a pure check of the text, a one-line error the toolkit's parser names by
flag, the values the generated bad-input test must see refused), so a flag typed with one of them is
covered by construction like any other:

- :data:`ANY_TEXT`: any UTF-8 text, the empty one included. An opener, ``--answer ''`` (do not grade) and
  ``--subfolder ''`` (no subfolder, not the release's 8B) mean something when empty, so
  :data:`e2c.argtypes.TEXT`, which refuses empty text, does not fit them.
- :data:`RESULT_TRACKERS`: eval's and TTS's ``--logger``, comma-separated trackers (empty: none).
"""

from __future__ import annotations

from typing import Any

from e2c.argtypes import NON_UTF8, BadValueContext, ValueType
from e2c.errors import UserError

__all__ = ["ANY_TEXT", "RESULT_TRACKERS", "AnyText", "ResultTrackers"]


def _utf8(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise UserError(f"must be UTF-8 text, got {text!r}") from None
    return text


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

    def bad_values(self, ctx: BadValueContext) -> list[str]:
        return [NON_UTF8]


class ResultTrackers(ValueType):
    """Comma-separated trackers a finished eval or TTS run sends its results to (:mod:`e2c.tracking`);
    the text is kept as given (``e2c.tracking.result_trackers`` reads it)."""

    @property
    def name(self) -> str:  # type: ignore[override]
        from e2c.tracking import TRACKERS

        return f"comma-separated trackers of {', '.join(TRACKERS)}"

    def parse(self, text: str) -> str:
        from e2c.tracking import result_trackers

        s = _utf8(str(text))
        try:
            result_trackers(s)
        except UserError as e:  # "--logger 'x': unknown tracker; valid: ..."; the parser names the flag
            raise UserError(str(e).removeprefix("--logger ")) from None
        return s

    def bad_values(self, ctx: BadValueContext) -> list[str]:
        return [NON_UTF8, "no-such-tracker", "tensorboard,no-such-tracker"]


ANY_TEXT = AnyText()
RESULT_TRACKERS = ResultTrackers()
