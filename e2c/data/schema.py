"""The schemas of the processed files (eval, sft, ef_sft, rl), and their validation.

Columns are those of the table in docs/data.md; eval's ``choices`` holds at least two options for a kind
whose answers are options (mcq), and the answer is then one of their letters; ``extra`` is JSON text of an
object. The sft and rl layouts are verl 0.9.1's (``data.messages_key=messages`` for its multi-turn SFT
dataset; ``prompt`` / ``reward_model.ground_truth`` for RL). A bad row raises :class:`SchemaError` naming the
file, the row and the field.
More: docs/data.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from e2c.chain import E2C, ChainFormat
from e2c.core.errors import UserError
from e2c.data.io import read_rows
from e2c.rewards.kinds import find_kind, kind_names, option_letters

SCHEMAS = ("eval", "sft", "ef_sft", "rl")
LOSS_SCOPES = ("exploration", "full")


class SchemaError(UserError):
    """A processed file does not match its schema."""


def _nonempty_str(v: Any) -> str | None:
    if not isinstance(v, str):
        return f"expected a string, got {type(v).__name__}"
    return None if v.strip() else "expected a non-empty string, got an empty one"


def _chat(v: Any, last_role: str) -> tuple[str, str] | None:
    """(field suffix, problem) for a malformed chat list, else None."""
    if not isinstance(v, (list, tuple)) or not v:
        return "", f"expected a non-empty list of messages, got {type(v).__name__}"
    for i, m in enumerate(v):
        if not isinstance(m, Mapping):
            return f"[{i}]", f"expected a message dict, got {type(m).__name__}"
        if m.get("role") not in ("system", "user", "assistant"):
            return f"[{i}].role", f"expected system|user|assistant, got {m.get('role')!r}"
        err = _nonempty_str(m.get("content"))
        if err:
            return f"[{i}].content", err
    if v[-1]["role"] != last_role:
        return f"[{len(v) - 1}].role", f"the last message must be the {last_role}'s, got {v[-1]['role']!r}"
    return None


def _check_eval(row: Mapping[str, Any], fmt: ChainFormat) -> tuple[str, str] | None:
    for f in ("id", "problem", "answer", "data_source"):
        err = _nonempty_str(row.get(f))
        if err:
            return f, err
    kind = find_kind(row.get("kind"))
    if kind is None:
        return "kind", _bad_kind(row.get("kind"))
    choices = row.get("choices")
    if not isinstance(choices, (list, tuple)):
        return "choices", f"expected a list, got {type(choices).__name__}"
    if kind.options:
        if len(choices) < 2:
            return "choices", f"a multiple-choice row needs at least 2 options, got {len(choices)}"
        letters = option_letters(len(choices))
        if row["answer"] not in letters:
            return "answer", f"expected one of the option letters {', '.join(letters)}, got {row['answer']!r}"
    return None


def _bad_kind(got: Any) -> str:
    """The problem with a kind that is not in the table of answer kinds, naming the valid ones."""
    return f"expected {' or '.join(kind_names())}, got {got!r}"


def _check_sft(row: Mapping[str, Any], fmt: ChainFormat, scope: str = "full") -> tuple[str, str] | None:
    bad = _chat(row.get("messages"), "assistant")
    if bad:
        return "messages" + bad[0], bad[1]
    err = _nonempty_str(row.get("data_source"))
    if err:
        return "data_source", err
    if not isinstance(row.get("extra_info"), Mapping):
        return "extra_info", f"expected a dict, got {type(row.get('extra_info')).__name__}"
    msgs = row["messages"]
    parsed = fmt.parse(msgs[-1]["content"], prefilled=False)
    field = f"messages[{len(msgs) - 1}].content"
    if scope == "exploration":
        if not (parsed.explore_closed and parsed.exploration.strip()):
            return (
                field,
                f"an exploration-only example needs a closed, non-empty exploration ({parsed.status})",
            )
    elif not parsed.well_formed:
        return field, f"the assistant turn is not a well-formed {fmt.name} chain ({parsed.status})"
    return None


def _check_ef_sft(row: Mapping[str, Any], fmt: ChainFormat) -> tuple[str, str] | None:
    scope = row.get("loss_scope")
    if scope not in LOSS_SCOPES:
        return "loss_scope", f"expected {' or '.join(LOSS_SCOPES)}, got {scope!r}"
    return _check_sft(row, fmt, scope)


def _check_rl(row: Mapping[str, Any], fmt: ChainFormat) -> tuple[str, str] | None:
    bad = _chat(row.get("prompt"), "user")
    if bad:
        return "prompt" + bad[0], bad[1]
    for f in ("data_source", "ability"):
        err = _nonempty_str(row.get(f))
        if err:
            return f, err
    rm = row.get("reward_model")
    if not isinstance(rm, Mapping):
        return "reward_model", f"expected a dict, got {type(rm).__name__}"
    err = _nonempty_str(rm.get("ground_truth"))
    if err:
        return "reward_model.ground_truth", err
    info = row.get("extra_info")
    if not isinstance(info, Mapping):
        return "extra_info", f"expected a dict, got {type(info).__name__}"
    if not isinstance(info.get("index"), int):
        return "extra_info.index", f"expected an integer, got {type(info.get('index')).__name__}"
    if find_kind(info.get("kind")) is None:
        return "extra_info.kind", _bad_kind(info.get("kind"))
    return None


_CHECKS: dict[str, Callable[[Mapping[str, Any], ChainFormat], tuple[str, str] | None]] = {
    "eval": _check_eval,
    "sft": _check_sft,
    "ef_sft": _check_ef_sft,
    "rl": _check_rl,
}


def check_row(row: Mapping[str, Any], schema: str, fmt: ChainFormat = E2C) -> tuple[str, str] | None:
    """``(field, problem)`` for the first problem of a row, or None if it fits the schema."""
    if schema not in _CHECKS:
        raise UserError(f"unknown schema {schema!r}; valid: {', '.join(SCHEMAS)}")
    if not isinstance(row, Mapping):
        return "<row>", f"expected a dict, got {type(row).__name__}"
    return _CHECKS[schema](row, fmt)


def validate_rows(rows: Iterable[Mapping[str, Any]], schema: str, source: str, fmt: ChainFormat = E2C) -> int:
    """Check every row; raise :class:`SchemaError` at the first bad one. Returns the row count."""
    n = 0
    for i, row in enumerate(rows):
        bad = check_row(row, schema, fmt)
        if bad:
            raise SchemaError(f"{source} row {i} field '{bad[0]}': {bad[1]}")
        n += 1
    if n == 0:
        raise SchemaError(f"{source}: no rows")
    return n


def validate_file(path: str | Path, schema: str, fmt: ChainFormat = E2C) -> int:
    """Validate one processed file (parquet or JSONL) against a schema; returns its row count."""
    return validate_rows(read_rows(path), schema, str(path), fmt)
