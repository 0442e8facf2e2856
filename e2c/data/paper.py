"""Convert the paper's released training data into the processed verl schemas.

SFT (``e2c-sft.parquet``): columns ``question`` and ``solution`` (the whole tagged response); when
``solution`` is not a tagged chain, ``exploration`` + ``execution`` are used instead. Each row becomes a
chat whose assistant turn is the chain; rows whose chain is malformed are dropped and counted.

RL (``e2c-rl.parquet`` / ``ef-rl.parquet``, ``*-valid``): either verl-style rows (``prompt`` chat list,
``reward_model.ground_truth``) or plain ``question``/``problem`` + ``answer`` rows. The question is
re-rendered with the chain format (so the prompt suffix is the release's), the ground truth is
normalised, and difficulty is carried over when present.

Train/validation splits are made by hashing the normalised question, so a question (and its duplicates)
never lands on both sides, and the split does not depend on row order.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from e2c.chain import E2C, ChainFormat, strip_prompt_suffix
from e2c.rewards.extract import reference_answer
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


def rl_rows(
    rows: Iterable[Mapping[str, Any]], fmt: ChainFormat = E2C, source: str = "e2c_rl"
) -> tuple[list[dict], Counter]:
    """verl RL rows from the paper's RL prompts, and the count of dropped rows by reason."""
    out: list[dict] = []
    dropped: Counter = Counter()
    for row in rows:
        q = question_of(row)
        if not q.strip():
            dropped["no_question"] += 1
            continue
        rm = row.get("reward_model") if isinstance(row.get("reward_model"), Mapping) else {}
        gold = reference_answer(rm.get("ground_truth") if rm else None) or reference_answer(row.get("answer"))
        if not gold:
            dropped["no_answer"] += 1
            continue
        data_source = str(row.get("data_source") or source)
        info_in = dict(row.get("extra_info") or {})
        info = {
            "index": len(out),
            "kind": kind_for_source(data_source, info_in),
            **{
                k: v
                for k, v in info_in.items()
                if k in ("difficulty", "level", "split", "id") and v is not None
            },
        }
        if "difficulty" not in info and row.get("difficulty") is not None:
            info["difficulty"] = row["difficulty"]
        out.append(
            {
                "prompt": fmt.messages(strip_suffix(q, fmt)),
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
