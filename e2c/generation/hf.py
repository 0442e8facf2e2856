"""The transformers backend (CPU, or a single GPU without vLLM).

Every (prompt, sample) pair is one row; at most ``batch_size`` rows decode at once in our own loop rather than
``model.generate``: a row that stops leaves the batch with its cache and the next queued prompts take its place
(continuous batching), and a prompt is encoded once with its KV cache repeated for its n samples. Sampling:
temperature, then top-p, then a multinomial draw; ``temperature == 0`` is greedy and gives
``model.generate``'s tokens (a test checks it). With a ``seed`` the same call on the same machine gives the
same output. :func:`e2c.generation.base.finish` cuts each row at its stop and reports it as vLLM would.
More: docs/generation-and-evaluation.md, "Backends".
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from e2c.core.models import model_context
from e2c.generation.base import (
    DEFAULT_SAMPLING,
    Completion,
    ContextTooLong,
    Sampling,
    Usage,
    eos_ids,
    finish,
    split_stops,
)
from e2c.launch.devices import cpu_has_bf16


def resolve_cpu_dtype(dtype: str) -> str:
    """``auto`` -> bfloat16 on CPUs with native bf16 (:func:`cpu_has_bf16`), float32 otherwise; anything else
    unchanged."""
    if dtype != "auto":
        return dtype
    return "bfloat16" if cpu_has_bf16() else "float32"


def sample_next(logits: Any, temperature: float, top_p: float) -> Any:
    """One next token per row from ``logits`` (rows x vocab): greedy at temperature 0, else
    temperature-scaled nucleus sampling (the smallest set of tokens whose probability reaches ``top_p``)."""
    import torch

    if temperature <= 0:
        return logits.argmax(-1)
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    if top_p < 1.0:
        sorted_p, idx = probs.sort(dim=-1, descending=True)
        # Drop a token when the mass before it already reaches top_p (the first token always stays).
        drop = (sorted_p.cumsum(-1) - sorted_p) >= top_p
        sorted_p = sorted_p.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, idx, sorted_p)
    return torch.multinomial(probs, 1).squeeze(-1)


class HFGenerator:
    """:class:`e2c.generation.base.Generator` over a transformers causal LM."""

    name = "hf"

    def __init__(self, model: Any, tokenizer: Any, batch_size: int = 16) -> None:
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.batch_size = max(1, int(batch_size))
        # The loaded model's generation-config EOS ids too, as vLLM and the RL rollouts stop on them.
        self.eos_ids = eos_ids(tokenizer, getattr(model, "generation_config", None))
        # Positions past this were never trained: generation stops there, as vLLM's max_model_len does.
        self.max_context = model_context(getattr(model, "config", None))
        self.usage = Usage()

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    def generate(
        self, prompts: Sequence[str], sampling: Sampling = DEFAULT_SAMPLING
    ) -> list[list[Completion]]:
        import torch

        n, max_tokens = sampling.n, sampling.max_tokens
        tok = self.tokenizer
        stops = split_stops(tok, sampling.stop, sorted(self.eos_ids))
        encoded = [tok.encode(p, add_special_tokens=False) for p in prompts]
        longest = max((len(e) for e in encoded), default=0)
        if self.max_context is not None and longest >= self.max_context:
            raise ContextTooLong(
                f"a prompt of {longest} tokens leaves no room in the model's context of {self.max_context} tokens"
            )
        # Longest first: rows that join mid-decode are then no wider than the rows already there.
        order = sorted(range(len(prompts)), key=lambda i: -len(encoded[i]))
        if sampling.seed is not None:
            torch.manual_seed(sampling.seed)
        window = max((len(s) for s in stops.strings), default=0) + 2

        def stop_string_hit(row: list[int]) -> bool:
            return any(s in self._decode(row[-window:]) for s in stops.strings)

        rows, _ = decode_rows(
            self.model,
            tok.pad_token_id,
            [encoded[i] for i in order],
            n=n,
            max_tokens=[self._room(len(encoded[i]), max_tokens) for i in order],
            temperature=sampling.temperature,
            top_p=sampling.top_p,
            stop_ids=stops.eos_ids | set(stops.token_ids),
            stop_check=stop_string_hit if stops.strings else None,
            batch_size=self.batch_size,
        )
        out: list[list[Completion]] = [[] for _ in prompts]
        drop = {tok.pad_token_id, *self.eos_ids}
        for r, i in enumerate(order):
            out[i] = [finish(rows[r * n + j], self._decode, stops, max_tokens, drop) for j in range(n)]
        self.usage.add([len(e) for e in encoded], out)
        return out

    def _room(self, prompt_tokens: int, max_tokens: int) -> int:
        """``max_tokens``, capped where the prompt and its continuation reach the model's context."""
        if self.max_context is None:
            return max_tokens
        return max(0, min(max_tokens, self.max_context - prompt_tokens))


class _Rows:
    """The rows being decoded: their KV cache, next-token logits, attention mask and next positions."""

    def __init__(self, cache: Any, logits: Any, mask: Any, next_pos: Any, alive: list[int]) -> None:
        self.cache, self.logits, self.mask, self.next_pos, self.alive = cache, logits, mask, next_pos, alive
        # Whether rows may join or leave mid-decode: a property of the cache's layer types, fixed at prefill.
        self.mergeable = mergeable(cache)

    def select(self, keep: list[int]) -> None:
        """Keep rows ``keep`` (indices into ``alive``), then drop mask columns no row attends to any more."""
        import torch

        if len(keep) < len(self.alive):
            sel = torch.tensor(keep, device=self.mask.device)
            self.cache.batch_select_indices(sel)
            self.logits, self.mask, self.next_pos = self.logits[sel], self.mask[sel], self.next_pos[sel]
            self.alive = [self.alive[a] for a in keep]
            if self.mergeable:
                # Rows that left may have been the only long ones: the others' left padding is dead weight
                # that every later step would attend over. Positions are explicit, so cutting it is exact.
                lead = int(self.mask.any(0).int().argmax())
                if lead > 0:
                    self.mask = self.mask[:, lead:]
                    for layer in self.cache.layers:
                        layer.keys, layer.values = layer.keys[..., lead:, :], layer.values[..., lead:, :]

    def step(self, model: Any, chosen: Any) -> None:
        """Feed each row its sampled token; the logits become the next ones."""
        self.mask = torch_cat_ones(self.mask)
        out = model(
            input_ids=chosen[:, None],
            attention_mask=self.mask,
            position_ids=self.next_pos,
            past_key_values=self.cache,
            use_cache=True,
        )
        self.cache, self.logits = out.past_key_values, out.logits[:, -1, :]
        self.next_pos = self.next_pos + 1

    def merge(self, other: _Rows) -> None:
        """Append ``other``'s rows: the narrower side is left-padded (masked) to the wider one's width."""
        import torch

        width = max(self.mask.shape[1], other.mask.shape[1])
        for a, b in zip(self.cache.layers, other.cache.layers, strict=True):
            a.keys = torch.cat([left_pad(a.keys, width, -2), left_pad(b.keys, width, -2)], 0)
            a.values = torch.cat([left_pad(a.values, width, -2), left_pad(b.values, width, -2)], 0)
        self.mask = torch.cat([left_pad(self.mask, width, -1), left_pad(other.mask, width, -1)], 0)
        self.logits = torch.cat([self.logits, other.logits], 0)
        self.next_pos = torch.cat([self.next_pos, other.next_pos], 0)
        self.alive = self.alive + other.alive


def torch_cat_ones(mask: Any) -> Any:
    """``mask`` with one more attended column on the right (the token fed this step)."""
    import torch

    return torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=-1)


def left_pad(t: Any, width: int, dim: int) -> Any:
    """``t`` zero-padded on the left of ``dim`` to ``width`` (unchanged when already that wide)."""
    import torch

    missing = width - t.shape[dim]
    if missing <= 0:
        return t
    shape = list(t.shape)
    shape[dim] = missing
    return torch.cat([t.new_zeros(shape), t], dim=dim)


def mergeable(cache: Any) -> bool:
    """Whether rows can join or leave ``cache`` mid-decode: every layer a plain full-attention
    ``DynamicLayer`` (sliding-window and recurrent layers keep offsets that padding would corrupt)."""
    from transformers.cache_utils import DynamicLayer

    layers = getattr(cache, "layers", None)
    return bool(layers) and all(type(layer) is DynamicLayer for layer in layers)


def prefill(model: Any, pad_id: int, prompts: Sequence[Sequence[int]], row_ids: list[int], n: int) -> _Rows:
    """Encode ``prompts`` (left-padded) once and repeat each one's cache for its ``n`` samples (the samples
    share the prompt's forward pass)."""
    import torch

    width = max(len(e) for e in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for r, e in enumerate(prompts):
        ids[r, width - len(e) :] = torch.tensor(list(e), dtype=torch.long)
        mask[r, width - len(e) :] = 1
    ids, mask = ids.to(model.device), mask.to(model.device)
    # Positions skip the left padding, as generate() numbers them.
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    # Only the last position's logits are needed: the full (rows x length x vocab) tensor would be ~1 GB for
    # 16 prompts of 300 tokens with a 49k vocabulary.
    out = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, logits_to_keep=1)
    cache, logits = out.past_key_values, out.logits[:, -1, :]
    if n > 1:
        cache.batch_repeat_interleave(n)
        logits, mask, pos = (t.repeat_interleave(n, 0) for t in (logits, mask, pos))
    return _Rows(cache, logits, mask, pos[:, -1:] + 1, list(row_ids))


def decode_rows(
    model: Any,
    pad_id: int,
    encoded: Sequence[Sequence[int]],
    *,
    n: int = 1,
    max_tokens: int | Sequence[int] = 256,
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int = -1,
    stop_ids: set[int] | frozenset[int] = frozenset(),
    stop_check: Callable[[list[int]], bool] | None = None,
    logprobs: bool = False,
    batch_size: int | None = None,
) -> tuple[list[list[int]], list[list[float]] | None]:
    """Batched sampling from token-id prompts; the decode loop shared by the hf backend and the CPU RL rollout.

    Row ``r * n + j`` is sample ``j`` of prompt ``r``. A row ends at a token in ``stop_ids`` (kept), when
    ``stop_check(row)`` says so, or at its budget: ``max_tokens`` is one int or one per prompt. Ended rows
    leave the batch with their cache. With ``logprobs`` the log-probability of every sampled token under the
    temperature-scaled distribution (what verl's actor computes) is returned too.

    ``batch_size`` caps the rows decoded at once (None: every row from the start). Prompts join in the given
    order whenever a whole prompt's ``n`` rows are free (continuous batching): a late batch does not run on
    with a few long rows while the rest of the queue waits. Caches that cannot take rows mid-decode
    (:func:`mergeable`) are filled one full batch at a time instead.
    """
    import torch

    limits = [int(max_tokens)] * len(encoded) if isinstance(max_tokens, int) else [int(m) for m in max_tokens]
    if len(limits) != len(encoded):
        raise ValueError(f"max_tokens has {len(limits)} entries for {len(encoded)} prompts")
    row_limit = [limits[r // n] for r in range(len(encoded) * n)]
    rows: list[list[int]] = [[] for _ in range(len(encoded) * n)]
    lps: list[list[float]] = [[] for _ in rows]
    capacity = max(n, int(batch_size)) if batch_size else max(n, len(rows))
    queue = deque(r for r in range(len(encoded)) if limits[r] > 0)
    active: _Rows | None = None
    with torch.no_grad():
        while True:
            free = capacity - (len(active.alive) if active is not None else 0)
            take: list[int] = []
            if active is None or active.mergeable:
                while queue and free >= n:
                    take.append(queue.popleft())
                    free -= n
            if take:
                joined = prefill(
                    model, pad_id, [encoded[r] for r in take], [r * n + j for r in take for j in range(n)], n
                )
                if active is None:
                    active = joined
                else:
                    active.merge(joined)
            if active is None:
                break
            logits = active.logits
            if top_k and top_k > 0:
                kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            chosen = sample_next(logits, temperature, top_p)
            if logprobs:
                scaled = logits.float() / (temperature if temperature > 0 else 1.0)
                picked = torch.log_softmax(scaled, -1).gather(-1, chosen[:, None]).squeeze(-1).tolist()
            keep = []
            for a, (row, t) in enumerate(zip(active.alive, chosen.tolist(), strict=True)):
                rows[row].append(t)
                if logprobs:
                    lps[row].append(float(picked[a]))
                ended = (
                    t in stop_ids
                    or len(rows[row]) >= row_limit[row]
                    or (stop_check is not None and stop_check(rows[row]))
                )
                if not ended:
                    keep.append(a)
            if not keep:
                active = None
                continue
            active.select(keep)
            active.step(model, chosen[keep] if len(keep) < len(chosen) else chosen)
    return rows, (lps if logprobs else None)
