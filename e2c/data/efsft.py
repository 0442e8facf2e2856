"""EF-SFT data: exploration-only examples mixed with a regularisation fraction of full E2C chains.

Exploration-focused SFT adapts a model to a new domain by training only on plans. Each output row is a
chat (the SFT schema) plus ``loss_scope``: ``exploration`` rows are trained on the assistant text up to
and including the closing exploration tag; ``full`` rows on the whole chain, so the model keeps the
ability to execute. The paper reports ~3.5% of the tokens of full SFT; :func:`build` measures that share
on the data at hand with a given tokenizer.

Inputs: SFT-schema rows (``messages`` whose assistant turn is a chain) or plain rows with ``question``
plus ``exploration`` (and optionally ``execution`` / a tagged ``solution``). A row without an execution
can only be an exploration example.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from e2c.chain import E2C, ChainFormat
from e2c.data.paper import first_user, question_of, strip_suffix, unit_hash


@dataclass
class Example:
    question: str
    exploration: str
    execution: str | None
    data_source: str
    info: dict[str, Any]


@dataclass
class EFStats:
    """Token accounting of an EF-SFT build."""

    exploration_rows: int
    full_rows: int
    trained_tokens: int
    full_sft_tokens: int

    @property
    def share(self) -> float:
        """Trained tokens relative to full SFT on the same examples."""
        return self.trained_tokens / self.full_sft_tokens if self.full_sft_tokens else 0.0

    def line(self) -> str:
        return (
            f"ef_sft: {self.exploration_rows} exploration-only + {self.full_rows} full rows; trained tokens "
            f"{self.trained_tokens} of {self.full_sft_tokens} for full SFT on the same data ({100 * self.share:.1f}%)"
        )


def examples(
    rows: Iterable[Mapping[str, Any]], fmt: ChainFormat = E2C, source: str = "domain"
) -> list[Example]:
    """Normalise input rows; rows without a question or an exploration are skipped."""
    out = []
    for i, row in enumerate(rows):
        if row.get("messages"):
            q = strip_suffix(first_user(row), fmt)
            parsed = fmt.parse(row["messages"][-1].get("content", ""), prefilled=False)
        else:
            q = strip_suffix(question_of(row), fmt)
            text = row.get("solution")
            if isinstance(text, str) and fmt.explore_open in text:
                parsed = fmt.parse(text, prefilled=False)
            else:
                explo, exe = row.get("exploration"), row.get("execution")
                if not explo:
                    continue
                parsed = fmt.parse(fmt.format_response(str(explo), str(exe or "")), prefilled=False)
                if not exe:
                    parsed = fmt.parse(f"{fmt.explore_open}{explo}{fmt.explore_close}", prefilled=False)
        if not q.strip() or not parsed.explore_closed or not parsed.exploration.strip():
            continue
        execution = parsed.execution if parsed.well_formed else None
        info = dict(row.get("extra_info") or {})
        info.setdefault("index", i)
        out.append(Example(q, parsed.exploration, execution, str(row.get("data_source") or source), info))
    return out


def _rank(question: str, seed: int) -> float:
    return unit_hash(f"ef{seed}\x00{question}")


def build(
    rows: Iterable[Mapping[str, Any]],
    count_tokens: Callable[[str], int],
    reg_frac: float = 0.05,
    seed: int = 0,
    fmt: ChainFormat = E2C,
    reg_rows: Iterable[Mapping[str, Any]] | None = None,
) -> tuple[list[dict[str, Any]], EFStats]:
    """EF-SFT rows and their token accounting.

    Without ``reg_rows``, each input example with a full chain is kept whole with probability
    ``reg_frac`` (decided by a hash of its question) and cut to its exploration otherwise. With
    ``reg_rows`` (full chains from elsewhere), every input example becomes exploration-only and enough
    full chains are added for them to make up ``reg_frac`` of the rows.
    """
    if not 0.0 <= reg_frac < 1.0:
        raise ValueError(f"reg_frac must be in [0, 1), got {reg_frac}")
    exs = examples(rows, fmt)
    explore: list[Example] = []
    full: list[Example] = []
    if reg_rows is None:
        for e in exs:
            (full if e.execution is not None and _rank(e.question, seed) < reg_frac else explore).append(e)
    else:
        explore = exs
        pool = sorted(
            (e for e in examples(reg_rows, fmt, "e2c") if e.execution is not None),
            key=lambda e: _rank(e.question, seed),
        )
        want = round(reg_frac / (1.0 - reg_frac) * len(explore))
        full = pool[:want]
    out: list[dict[str, Any]] = []
    trained = full_tokens = 0
    for scope, group in (("exploration", explore), ("full", full)):
        for e in group:
            explore_text = f"{fmt.explore_open}{e.exploration}{fmt.explore_close}"
            whole = (
                fmt.format_response(e.exploration, e.execution) if e.execution is not None else explore_text
            )
            n_explore, n_whole = count_tokens(explore_text), count_tokens(whole)
            full_tokens += n_whole
            trained += n_explore if scope == "exploration" else n_whole
            # Tokens after the exploration do not change its gradient (causal attention): leave them out.
            content = whole if scope == "full" else explore_text
            out.append(
                {
                    "messages": [*fmt.messages(e.question), {"role": "assistant", "content": content}],
                    "data_source": e.data_source,
                    "extra_info": {**e.info, "loss_scope": scope},
                    "loss_scope": scope,
                }
            )
    stats = EFStats(len(explore), len(full), trained, full_tokens)
    return out, stats


def tokenizer_counter(tokenizer: Any) -> Callable[[str], int]:
    """``count_tokens`` for a HF tokenizer (no special tokens added)."""

    def count(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    return count
