"""Benchmark rows in the project's schema: :class:`Record`, and the mapping from any copy's fields to it.

Field names differ between copies of the same set; each :class:`~e2c.data.registry.DatasetSpec` names its
hub fields and :func:`to_record` falls back to the common alternatives below. For the release's evaluation
files the question may be a chat list, the medical answer a mapping with an ``answer_idx`` letter (or a JSON
string of one), and the options only in the question text, where :func:`options_in_text` finds them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from e2c.chain import strip_prompt_suffix
from e2c.rewards.kinds import ANSWER_KINDS, MATH, MCQ, AnswerKind, Kind, find_kind
from e2c.rewards.mcq import LETTERS

# Fallback field names, tried after a spec's own, so other copies of a set load too. A reference's fields
# depend on its kind: each kind's entry of the table of kinds names them (these two are its values).
PROBLEM_KEYS = ("problem", "question", "Problem", "Question", "prompt", "input")
ANSWER_KEYS = MATH.answer_keys
MCQ_ANSWER_KEYS = MCQ.answer_keys
# Keys of an answer given as a mapping (the release's medical files: ``gt['answer_idx']``), in order.
MCQ_GOLD_KEYS = MCQ.gold_keys
ID_KEYS = ("id", "unique_id", "realidx", "idx", "ID")


class SpecFields(Protocol):
    """What :func:`to_record` reads of a :class:`~e2c.data.registry.DatasetSpec` (a protocol, so that this
    module, which the registry imports, needs no import of the registry)."""

    @property
    def name(self) -> str: ...
    @property
    def group(self) -> str: ...
    @property
    def kind(self) -> Kind: ...
    @property
    def problem_keys(self) -> tuple[str, ...]: ...
    @property
    def answer_keys(self) -> tuple[str, ...]: ...


@dataclass
class Record:
    """One evaluation problem in the project's schema.

    ``extra`` holds facts a set keeps beside the problem (a Codeforces ``rating``, a LiveCodeBench
    ``contest_date``): :meth:`to_dict` writes it as JSON text, and only when there is something in it, so the
    rows of the other sets keep their columns (and parquet gets one text column, never a struct whose fields
    differ from row to row); :func:`extra_of` reads it back.
    """

    id: str
    problem: str
    answer: str
    kind: Kind
    choices: list[str] = field(default_factory=list)
    data_source: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        extra = d.pop("extra")
        if extra:
            d["extra"] = json.dumps(extra, ensure_ascii=False, sort_keys=True)
        return d


def extra_of(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row's ``extra`` (JSON text, as :meth:`Record.to_dict` writes it, or a mapping); ValueError for any
    other value."""
    v = row.get("extra")
    if v is None or v == "" or v == {}:
        return {}
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except (ValueError, RecursionError):
            raise ValueError("extra is not JSON text") from None
    if not isinstance(v, Mapping):
        raise ValueError(f"extra must be a JSON object, not {type(v).__name__}")
    return dict(v)


# ------------------------------------------------------------------------------------------- mapping
def _first(row: Mapping[str, Any], keys: Iterable[str]) -> tuple[str | None, Any]:
    for k in keys:
        v = row.get(k)
        if v is not None and not (isinstance(v, str) and not v.strip()) and v != []:
            return k, v
    return None, None


def row_choices(row: Mapping[str, Any]) -> list[str]:
    """Option texts in letter order from the common MCQ layouts.

    ``options`` as a dict ``{"A": ...}`` or a list (either possibly a JSON string, as some parquet exports
    store them), ``choices`` as a list (MMLU), or the MedMCQA columns ``opa``..``opd``.
    """
    opts = row.get("options")
    if opts is None:
        opts = row.get("choices")
    if isinstance(opts, str) and opts.strip()[:1] in ("{", "["):
        try:
            opts = json.loads(opts)
        except ValueError:
            opts = None
    if isinstance(opts, Mapping):
        keys = sorted(k for k in opts if isinstance(k, str) and len(k) == 1 and k.upper() in LETTERS)
        return [str(opts[k]) for k in keys if opts[k] is not None]
    if isinstance(opts, (list, tuple)) and opts:
        return [str(o) for o in opts]
    cols = [c for c in ("opa", "opb", "opc", "opd", "ope") if row.get(c) is not None]
    return [str(row[c]) for c in cols]


def _text(value: Any) -> str | None:
    """A question field as text: a string, or the last user turn of a chat list (a ``prompt`` column)."""
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        users = [m.get("content") for m in value if isinstance(m, Mapping) and m.get("role") == "user"]
        return users[-1] if users and isinstance(users[-1], str) else None
    return None if value is None else str(value)


def _as_mapping(value: Any) -> Mapping[str, Any] | None:
    """An answer given as a mapping, or as a JSON string of one; else None."""
    if isinstance(value, str) and value.strip().startswith("{"):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, Mapping) else None


def _gold_of(value: Any, keys: tuple[str, ...] = MCQ_GOLD_KEYS) -> Any:
    """The reference inside an answer mapping (the first of ``keys`` set: ``answer_idx`` first by
    default), or the value itself; with no ``keys`` (a kind whose reference is never such a mapping) the
    value as it is."""
    m = _as_mapping(value) if keys else None
    if m is None:
        return value
    return next((m[k] for k in keys if m.get(k) not in (None, "")), None)


_OPTION_LINE = re.compile(r"^\s*\(?([A-J])\s*[).:]\s*(\S.*?)\s*$")
_OPTION_MARK = re.compile(r"(?:^|(?<=\s))\(?([A-J])[).:]\s+")


def options_in_text(text: str) -> dict[str, str]:
    """Lettered options written in a question's text, ``{"A": ..., "B": ...}``; empty when there are none.

    One option per line (``A. x`` / ``A) x`` / ``(A) x`` / ``A: x``), the last such run starting at A; else
    inline (``... A) x B) y``) from the last ``A`` marker, letters in order. At least two options.
    """
    best: dict[str, str] = {}
    run: dict[str, str] = {}
    for line in [*text.splitlines(), ""]:
        m = _OPTION_LINE.match(line)
        if m and len(run) < len(LETTERS) and m.group(1) == LETTERS[len(run)]:
            run[m.group(1)] = m.group(2)
            continue
        if len(run) >= 2:
            best = run
        run = {m.group(1): m.group(2)} if m and m.group(1) == "A" else {}
    if best:
        return best
    marks = list(_OPTION_MARK.finditer(text))
    starts = [i for i, m in enumerate(marks) if m.group(1) == "A"]
    if not starts:
        return {}
    picked = [marks[starts[-1]]]
    for m in marks[starts[-1] + 1 :]:
        if len(picked) < len(LETTERS) and m.group(1) == LETTERS[len(picked)]:
            picked.append(m)
    if len(picked) < 2:
        return {}
    ends = [m.start() for m in picked[1:]] + [len(text)]
    return {m.group(1): text[m.end() : e].strip() for m, e in zip(picked, ends, strict=True)}


def record_kind(row: Mapping[str, Any], spec: SpecFields) -> AnswerKind:
    """The answer kind of a row: the spec's, except that a synthetic set's row may name its own."""
    own = find_kind(row.get("kind")) if spec.group == "synthetic" else None
    if own is not None:
        return own
    kind = find_kind(spec.kind)
    if kind is None:
        raise ValueError(
            f"dataset {spec.name!r} has an unknown answer kind {spec.kind!r}; valid: {', '.join(ANSWER_KINDS)}"
        )
    return kind


def record_options(row: Mapping[str, Any], raw_gold: Any, problem: str) -> list[str]:
    """The option texts of a multiple-choice row: its columns, else the answer mapping's, else the lettered
    options in the question text (the release sends only the question; they stay there)."""
    choices = row_choices(row) or row_choices(_as_mapping(raw_gold) or {})
    if len(choices) < 2:
        choices = list(options_in_text(problem).values())
    if len(choices) < 2:
        raise ValueError(
            "multiple-choice row without options (looked for options, choices, opa..opd, and "
            "lettered options in the question text)"
        )
    return choices


def to_record(row: Mapping[str, Any], spec: SpecFields, index: int) -> Record:
    """Map one source row to a :class:`Record`; raises ValueError naming the missing or bad field.

    The reference is read as the row's answer kind reads it (:mod:`e2c.rewards.kinds`): from the spec's
    answer fields, then the kind's; unwrapped from an answer mapping by the kind's ``gold_keys``; for an
    option kind, a letter of the row's options.
    """
    _, raw_problem = _first(row, (*spec.problem_keys, *PROBLEM_KEYS))
    problem = _text(raw_problem)
    if problem is None or not problem.strip():
        raise ValueError(
            f"no problem text (looked for {', '.join(dict.fromkeys((*spec.problem_keys, *PROBLEM_KEYS)))})"
        )
    _, rid = _first(row, ID_KEYS)
    rid = str(rid) if rid is not None else str(index)
    rid = rid if rid.startswith(f"{spec.name}-") else f"{spec.name}-{rid}"
    # A suffix the file already carries would be sent twice (or next to another one): the format adds it.
    problem = strip_prompt_suffix(problem)
    kind = record_kind(row, spec)
    keys = tuple(dict.fromkeys((*spec.answer_keys, *kind.answer_keys)))
    akey, raw_gold = _first(row, keys)
    choices = record_options(row, raw_gold, problem) if kind.options else []
    options = letter_options(choices) if kind.options else None
    gold = _gold_of(raw_gold, kind.gold_keys)
    answer = kind.reference(gold, options) if gold is not None else None
    if options is not None and (answer is None or answer not in options):
        raise ValueError(f"answer {gold!r} (field {akey}) is not one of the options {', '.join(options)}")
    if not answer:
        raise ValueError(f"no reference answer (looked for {', '.join(keys)})")
    try:
        extra = extra_of(row)
    except ValueError:  # a source's own column of that name, not ours: not a fact of the record
        extra = {}
    return Record(rid, problem, answer, kind.name, choices, spec.name, extra)


def letter_options(choices: Sequence[str]) -> dict[str, str]:
    """``{"A": first choice, "B": ...}``: how the grader and the prompt name the options."""
    return {LETTERS[i]: c for i, c in enumerate(choices)}


def options_of(record: Record) -> dict[str, str] | None:
    """The lettered options of a record with choices (an option kind's), ``None`` for any other."""
    return letter_options(record.choices) if record.choices else None


def question_text(record: Record | Mapping[str, Any]) -> str:
    """The text a model is asked: the problem, plus ``A. ...`` option lines for an option kind (unless
    the problem text already lists exactly these options, as the release's medical files do)."""
    r = record.to_dict() if isinstance(record, Record) else record
    choices = r.get("choices") or []
    kind = find_kind(r.get("kind"))
    if kind is None or not kind.options or not choices:
        return str(r["problem"])
    if options_in_text(str(r["problem"])) == {k: str(c).strip() for k, c in letter_options(choices).items()}:
        return str(r["problem"])
    lines = [f"{k}. {c}" for k, c in letter_options(choices).items()]
    return str(r["problem"]) + "\n" + "\n".join(lines)
