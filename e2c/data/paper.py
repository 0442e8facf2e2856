"""Convert the paper's released training data into the processed verl schemas.

SFT (``e2c-sft.parquet``: ``question`` + ``solution``, or ``exploration`` + ``execution``): each row becomes a
chat whose assistant turn is the chain; malformed chains are dropped and counted. RL (``e2c-rl.parquet``,
``ef-rl.parquet``, ``*-valid``; verl-style or plain question + answer rows): the question is re-rendered with
the chain format, the ground truth normalised, difficulty kept, and multiple-choice rows read as the
benchmark registry reads them. Train/validation splits hash the normalised question, so duplicates never
straddle the split and row order does not matter.
More: docs/data.md, "Paper data".
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from e2c.chain import E2C, ChainFormat, strip_prompt_suffix
from e2c.data.records import (
    MCQ_ANSWER_KEYS,
    _as_mapping,
    _first,
    _gold_of,
    letter_options,
    options_in_text,
    question_text,
    row_choices,
)
from e2c.rewards.extract import reference_answer
from e2c.rewards.mcq import reference_choice
from e2c.rewards.verl_score import kind_for_source


def norm_question(q: str) -> str:
    """Whitespace- and case-folded question text, the key for splitting and de-duplication."""
    return re.sub(r"\s+", " ", q).strip().lower()


def unit_hash(key: str) -> float:
    """A stable number in [0, 1) for a key (sha256): the basis of every order-free split and pick."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2**64


def is_validation(question: str, val_frac: float, seed: int = 0) -> bool:
    """Deterministic membership of the validation side, by a hash of the normalised question."""
    return unit_hash(f"{seed}\x00{norm_question(question)}") < val_frac


def strip_suffix(question: str, fmt: ChainFormat = E2C) -> str:
    """The question without a trailing prompt suffix: the format's own or any of the release's, in any
    whitespace spelling (released prompts already carry one, with or without the space after
    ``boxed{}.``), so the format's suffix is then added exactly once."""
    q = strip_prompt_suffix(question, fmt.prompt_suffix) if fmt.prompt_suffix else question.strip()
    return strip_prompt_suffix(q)


def _user_text(prompt: Any) -> str | None:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, Sequence):
        users = [m.get("content") for m in prompt if isinstance(m, Mapping) and m.get("role") == "user"]
        return users[-1] if users else None
    return None


def question_of(row: Mapping[str, Any]) -> str:
    """The question of a raw row: ``question``, ``problem``, or the user turn of a ``prompt`` chat."""
    q = row.get("question") or row.get("problem") or _user_text(row.get("prompt"))
    return q if isinstance(q, str) else ""


def sft_rows(
    rows: Iterable[Mapping[str, Any]], fmt: ChainFormat = E2C, source: str = "e2c_sft"
) -> tuple[list[dict], Counter]:
    """Chat rows from the paper's SFT pairs, and the count of dropped rows by reason."""
    out: list[dict] = []
    dropped: Counter = Counter()
    for i, row in enumerate(rows):
        q = question_of(row)
        if not q.strip():
            dropped["no_question"] += 1
            continue
        response = row.get("solution") or row.get("response") or ""
        parsed = fmt.parse(response, prefilled=False) if isinstance(response, str) else None
        if (parsed is None or not parsed.well_formed) and row.get("exploration") and row.get("execution"):
            response = fmt.format_response(str(row["exploration"]), str(row["execution"]))
            parsed = fmt.parse(response, prefilled=False)
        if parsed is None or not parsed.well_formed:
            dropped[parsed.status if parsed is not None else "no_response"] += 1
            continue
        question = strip_suffix(q, fmt)
        info = {"index": i, "answer": reference_answer(row.get("answer")) or ""}
        for k in ("type1", "type2"):
            if row.get(k) is not None:
                info[k] = str(row[k])
        out.append(
            {
                "messages": [*fmt.messages(question), {"role": "assistant", "content": response.strip()}],
                "data_source": str(row.get("data_source") or source),
                "extra_info": info,
            }
        )
    return out, dropped


def _raw_gold(row: Mapping[str, Any], keys: Sequence[str]) -> Any:
    """The reference as the row gives it: ``reward_model.ground_truth`` first, then the first of ``keys``."""
    rm = row.get("reward_model")
    gt = rm.get("ground_truth") if isinstance(rm, Mapping) else None
    if gt is not None and not (isinstance(gt, str) and not gt.strip()):
        return gt
    return _first(row, keys)[1]


def is_mcq_row(row: Mapping[str, Any], data_source: str) -> bool:
    """Whether an RL row is multiple choice: by ``extra_info.kind`` or data source (as the reward decides),
    or by an answer mapping with an ``answer_idx`` letter (the release's medical layout)."""
    if kind_for_source(data_source, row.get("extra_info") or {}) == "mcq":
        return True
    mapping = _as_mapping(_raw_gold(row, MCQ_ANSWER_KEYS))
    return mapping is not None and mapping.get("answer_idx") not in (None, "")


def mcq_reference(row: Mapping[str, Any], question: str) -> tuple[str | None, dict[str, str], str]:
    """``(letter, options, why)`` of a multiple-choice row, read as the benchmark registry reads it.

    The options come from the row's columns (``options`` / ``choices`` / ``opa``..), its ``extra_info``,
    the answer mapping, or else the lettered options in ``question`` (suffix already removed); ``options``
    is ``{letter: text}`` (empty when none were found). The gold is the mapping's ``answer_idx`` (or
    ``answer`` / ``label``), a letter, a 0-based index or an option's text. ``letter`` is None when there
    is no gold (``why`` = ``no_answer``) or it names no option (``why`` = ``bad_mcq_answer``).
    """
    raw = _raw_gold(row, MCQ_ANSWER_KEYS)
    choices = (
        row_choices(row) or row_choices(row.get("extra_info") or {}) or row_choices(_as_mapping(raw) or {})
    )
    if len(choices) < 2:
        choices = list(options_in_text(question).values())
    options = letter_options(choices) if len(choices) >= 2 else {}
    gold = _gold_of(raw)
    if gold is None or (isinstance(gold, str) and not gold.strip()):
        return None, options, "no_answer"
    letter = reference_choice(gold, options or None)
    if letter is None or (options and letter not in options):
        return None, options, "bad_mcq_answer"
    return letter, options, ""


def rl_rows(
    rows: Iterable[Mapping[str, Any]], fmt: ChainFormat = E2C, source: str = "e2c_rl"
) -> tuple[list[dict], Counter]:
    """verl RL rows from the paper's RL prompts, and the count of dropped rows by reason.

    Multiple-choice rows get a letter ``ground_truth``, ``extra_info.kind = "mcq"`` and
    ``extra_info.options`` (:func:`mcq_reference`); a math row's gold is :func:`reference_answer`'s.
    """
    out: list[dict] = []
    dropped: Counter = Counter()
    for row in rows:
        q = question_of(row)
        if not q.strip():
            dropped["no_question"] += 1
            continue
        data_source = str(row.get("data_source") or source)
        question = strip_suffix(q, fmt)
        options: dict[str, str] = {}
        if is_mcq_row(row, data_source):
            gold, options, why = mcq_reference(row, question)
            if gold is None:
                dropped[why] += 1
                continue
            # Options given only in a column must reach the model; a text that lists them stays as it is.
            question = question_text({"problem": question, "kind": "mcq", "choices": list(options.values())})
            kind = "mcq"
        else:
            rm = row.get("reward_model") if isinstance(row.get("reward_model"), Mapping) else {}
            gold = reference_answer(rm.get("ground_truth") if rm else None) or reference_answer(
                row.get("answer")
            )
            if not gold:
                dropped["no_answer"] += 1
                continue
            kind = kind_for_source(data_source, row.get("extra_info") or {})
        info_in = dict(row.get("extra_info") or {})
        info: dict[str, Any] = {
            "index": len(out),
            "kind": kind,
            **{
                k: v
                for k, v in info_in.items()
                if k in ("difficulty", "level", "split", "id") and v is not None
            },
        }
        if "difficulty" not in info and row.get("difficulty") is not None:
            info["difficulty"] = row["difficulty"]
        if options:
            # A {letter: text} struct in parquet; rows without some letter read back None there, which
            # the grader's `as_options` drops.
            info["options"] = options
        out.append(
            {
                "prompt": fmt.messages(question),
                "data_source": data_source,
                "ability": str(row.get("ability") or "math"),
                "reward_model": {"style": "rule", "ground_truth": gold},
                "extra_info": info,
            }
        )
    return out, dropped


def split_train_val(
    rows: Sequence[dict], question_of: Any, val_frac: float, seed: int = 0
) -> tuple[list[dict], list[dict]]:
    """Split rows by question hash; ``question_of(row)`` gives the question text."""
    train, val = [], []
    for r in rows:
        (val if is_validation(question_of(r), val_frac, seed) else train).append(r)
    return train, val


def first_user(row: Mapping[str, Any]) -> str:
    """The user's text of an SFT (``messages``) or RL (``prompt``) row."""
    return _user_text(row.get("messages") or row.get("prompt")) or ""
