"""The one generator interface every caller (eval, TTS, demos) counts tokens through.

``gen.generate(prompts, Sampling(n=4, max_tokens=512, stop=("</EXPLORATION>",), seed=0))`` turns rendered
prompt strings into ``[[Completion, ...n], ...per prompt]``, with vLLM's semantics on every backend: ``text``
keeps the chain tags and drops EOS, padding and a matched stop string; ``token_ids`` holds every generated
token, the EOS or stop token included (``num_tokens`` is their count, so budgets agree across backends);
``finish_reason`` is ``"stop"`` or ``"length"``; ``stop_reason`` names the stop string, or ``None``. A stop
string that is one special token (the E2C tags) is matched as a token id. Each generator keeps a
:class:`Usage` tally (calls, sequences, prompt and generated tokens).
More: docs/generation-and-evaluation.md, "The generator interface".
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

from e2c.core.errors import UserError


@dataclass(frozen=True)
class Sampling:
    """The sampling settings of one ``generate`` call, checked when made (one line naming the bad one).

    ``n`` completions per prompt, each of at most ``max_tokens`` new tokens; ``temperature`` 0 is greedy;
    ``top_p`` is the nucleus mass; ``stop`` strings end a completion (EOS always does); ``seed`` makes the
    call repeatable on one machine and backend (None: unseeded).

    >>> Sampling(n=4, stop=["</EXPLORATION>"]).replace(temperature=0.0)
    Sampling(n=4, max_tokens=256, temperature=0.0, top_p=1.0, stop=('</EXPLORATION>',), seed=None)
    >>> Sampling(top_p=0)
    Traceback (most recent call last):
    ...
    ValueError: top_p must be in (0, 1], got 0
    """

    n: int = 1
    max_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    stop: Sequence[str] = ()
    seed: int | None = None

    def __post_init__(self) -> None:
        # Any sequence (a list from a chain format) is kept as a tuple: the settings stay hashable and frozen.
        object.__setattr__(self, "stop", tuple(self.stop or ()))
        if self.n < 1:
            raise ValueError(f"n must be >= 1, got {self.n}")
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if self.temperature < 0 or math.isnan(self.temperature):
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")

    def replace(self, **changes: Any) -> Sampling:
        """A copy with some settings changed (checked again)."""
        return dataclasses.replace(self, **changes)


DEFAULT_SAMPLING = Sampling()  # one call's default: 1 sample of <= 256 tokens at temperature 1, unseeded


@dataclass(frozen=True)
class Completion:
    """One generated continuation of one prompt."""

    text: str
    token_ids: list[int]
    finish_reason: str  # "stop" | "length"
    stop_reason: str | None = None

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)

    @property
    def text_with_stop(self) -> str:
        """The text with its stop string put back (the chain parser needs the closing tag)."""
        return self.text + (self.stop_reason or "")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "num_tokens": self.num_tokens}


@dataclass
class Usage:
    """Running totals of one generator; prompt tokens are counted once per generated sequence."""

    calls: int = 0
    sequences: int = 0
    prompt_tokens: int = 0
    generated_tokens: int = 0

    def add(self, prompt_lens: Sequence[int], outputs: Sequence[Sequence[Completion]]) -> None:
        self.calls += 1
        for plen, outs in zip(prompt_lens, outputs, strict=True):
            self.sequences += len(outs)
            self.prompt_tokens += plen * len(outs)
            self.generated_tokens += sum(c.num_tokens for c in outs)

    def snapshot(self) -> dict[str, int]:
        return asdict(self)


@runtime_checkable
class Generator(Protocol):
    """What eval, TTS and the demos need from a backend."""

    name: str
    tokenizer: Any
    usage: Usage

    def generate(
        self, prompts: Sequence[str], sampling: Sampling = DEFAULT_SAMPLING
    ) -> list[list[Completion]]:
        """Per prompt, ``sampling.n`` completions (see the module docstring for their semantics)."""
        ...


@dataclass
class StopSpec:
    """Stops of one call, split by how a backend matches them."""

    token_ids: dict[int, str] = field(default_factory=dict)  # single special tokens -> their string
    strings: list[str] = field(default_factory=list)
    eos_ids: set[int] = field(default_factory=set)


def eos_ids(tokenizer: Any, generation_config: Any = None) -> frozenset[int]:
    """Token ids that end a generation: the tokenizer's EOS and the model's generation-config EOS ids.

    Qwen3's generation config lists ``<|endoftext|>`` next to the tokenizer's ``<|im_end|>``; vLLM stops on
    both, so every backend and rollout that stops by id asks this one function (the hf generator, the RL
    agent loop and hf rollout, the reward manager's decode), and a sample ends on the same ids everywhere.
    Either argument may be None or have no ``eos_token_id``; a list of ids is accepted for both.
    """
    ids: set[int] = set()
    for source in (tokenizer, generation_config):
        value = getattr(source, "eos_token_id", None) if source is not None else None
        for i in value if isinstance(value, (list, tuple)) else [value]:
            if i is not None:
                ids.add(int(i))
    return frozenset(ids)


def split_stops(tokenizer: Any, stop: Sequence[str] | None, eos_ids: Sequence[int | None] = ()) -> StopSpec:
    """Match a stop string by token id when it is one added special token, else as text.

    Token-id matching is exact for the E2C tags, which text matching can miss when a backend drops
    special tokens while detokenizing.
    """
    spec = StopSpec(eos_ids={i for i in eos_ids if i is not None})
    specials = set(getattr(tokenizer, "all_special_tokens", ()) or ()) | set(
        getattr(tokenizer, "added_tokens_encoder", {}) or {}
    )
    for s in stop or ():
        if not s:
            continue
        ids = tokenizer.encode(s, add_special_tokens=False)
        if len(ids) == 1 and s in specials:
            spec.token_ids[ids[0]] = s
        elif s not in spec.strings:
            spec.strings.append(s)
    return spec


def finish(
    ids: Sequence[int],
    decode: Callable[[list[int]], str],
    stops: StopSpec,
    max_tokens: int,
    drop_ids: set[int] | None = None,
) -> Completion:
    """Cut raw generated ids at the first stop and build the :class:`Completion` vLLM would return.

    ``ids`` may run past the real end (batch padding after a row finished, or a stop string found only
    after the fact); ``decode`` maps ids to text with special tokens kept; ``drop_ids`` (EOS, padding)
    never appear in the text.
    """
    ids = list(ids)[:max_tokens]
    drop = set(drop_ids or ()) | stops.eos_ids
    reason: str | None = None
    finish_reason = "length"
    for k, t in enumerate(ids):
        if t in stops.eos_ids or t in stops.token_ids:
            ids = ids[: k + 1]
            reason = stops.token_ids.get(t)
            finish_reason = "stop"
            break
    visible = [t for t in ids if t not in drop and t not in stops.token_ids]
    text = decode(visible)
    hits = [(text.find(s), -len(s), s) for s in stops.strings if s in text]
    if hits:
        pos, _, s = min(hits)
        text, reason, finish_reason = text[:pos], s, "stop"
        k = tokens_until(ids, decode, s, drop=drop | set(stops.token_ids))
        ids = ids[: len(ids) if k is None else k]
    return Completion(text, ids, finish_reason, reason)


def tokens_until(
    ids: Sequence[int],
    decode: Callable[[list[int]], str],
    s: str,
    *,
    written: str = "",
    drop: set[int] | frozenset[int] = frozenset(),
) -> int | None:
    """The fewest leading generated ``ids`` whose text, after the ``written`` text, contains ``s``.

    ``written`` is text that precedes the generated tokens but was not generated (an opener, a prefilled
    tag): it can hold ``s`` or part of it, yet never counts, so the answer is 0 when it already holds ``s``.
    ``drop`` ids (EOS, padding) are left out of the text. Returns ``None`` when even all of ``ids`` do not
    reach ``s``. Decoding the sampled ids (not re-encoding the text) keeps the count exact when the model
    sampled a tokenization the tokenizer would not produce. Binary search: containment grows with k.
    """
    ids = list(ids)

    def holds(k: int) -> bool:
        return s in written + decode([t for t in ids[:k] if t not in drop])

    if not holds(len(ids)):
        return None
    lo, hi = 0, len(ids)
    while lo < hi:
        mid = (lo + hi) // 2
        if holds(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def derive_seed(seed: int | None, *keys: Any) -> int | None:
    """A stable 31-bit seed for a sub-task (a chunk, a request) of a seeded run; ``None`` stays ``None``."""
    if seed is None:
        return None
    h = hashlib.sha256(repr((seed, *keys)).encode()).digest()
    return int.from_bytes(h[:4], "little") & 0x7FFFFFFF


class ContextTooLong(UserError):
    """A prompt and its generation budget do not fit in the model's context (one line for the user)."""


def context_length(gen: Any) -> int | None:
    """The model's context in tokens as its backend enforces it (``max_context``), or None when unknown."""
    value = getattr(gen, "max_context", None)
    return int(value) if isinstance(value, int) and value > 0 else None


def check_fits(prompt_tokens: int, budget: int, context: int | None, what: str, budget_name: str) -> None:
    """Refuse ``what`` (a prompt of ``prompt_tokens``) when it and ``budget`` new tokens exceed ``context``.

    Checked before generating: a prompt past the context makes the transformers backend crawl through
    positions the model never saw (a 240 KB line ran for minutes), and vLLM refuses it mid-run.
    """
    if context is None or prompt_tokens + budget <= context:
        return
    fixes = []
    if context - budget > 0:
        fixes.append(f"shorten it to at most {context - budget} tokens")
    if prompt_tokens < context:
        fixes.append(f"lower {budget_name} to at most {context - prompt_tokens}")
    raise ContextTooLong(
        f"{what} is {prompt_tokens} tokens and {budget_name} is {budget}: together more than the model's "
        f"context of {context} tokens; {' or '.join(fixes) or f'shorten it and lower {budget_name}'}"
    )
