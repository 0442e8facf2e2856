"""The transformers backend (CPU, or a single GPU without vLLM).

Every (prompt, sample) pair becomes one row; prompts are sorted by length and generated in left-padded
batches of about ``batch_size`` rows (a prompt's samples always share a batch, and its prompt is encoded
once for all of them), so short prompts do not pay for long ones. Rows that end early are padded
by ``generate``; :func:`e2c.generation.base.finish` cuts each row at its first stop and reports the finish
reason as vLLM would. With a ``seed`` the global torch RNG is seeded once per call: the same call on the
same machine gives the same completions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from transformers import StoppingCriteria

from e2c.generation.base import Completion, Usage, check_args, finish, split_stops


class _StopOnText(StoppingCriteria):
    """Per-row stop on text found in the *generated* tokens only.

    transformers' own ``stop_strings`` also matches across the prompt's tail (a prompt ending in "re"
    stops "re" + "re" at a "rere" stop), which vLLM never does. Only the last few tokens are decoded
    each step: a stop string of c characters spans at most c tokens.
    """

    def __init__(self, tokenizer: Any, strings: Sequence[str], start: int) -> None:
        self.tokenizer = tokenizer
        self.strings = list(strings)
        self.window = max(len(s) for s in strings) + 2
        self.start = start

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        tail = input_ids[:, max(self.start, input_ids.shape[1] - self.window) :].tolist()
        hit = [
            any(s in self.tokenizer.decode(row, skip_special_tokens=False) for s in self.strings)
            for row in tail
        ]
        return torch.tensor(hit, dtype=torch.bool, device=input_ids.device)


class HFGenerator:
    """:class:`e2c.generation.base.Generator` over a transformers causal LM."""

    name = "hf"

    def __init__(self, model: Any, tokenizer: Any, batch_size: int = 16) -> None:
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.batch_size = max(1, int(batch_size))
        self.usage = Usage()

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    def generate(
        self,
        prompts: Sequence[str],
        n: int = 1,
        max_tokens: int = 256,
        temperature: float = 1.0,
        top_p: float = 1.0,
        stop: Sequence[str] | None = None,
        seed: int | None = None,
    ) -> list[list[Completion]]:
        import torch

        check_args(n, max_tokens, temperature, top_p)
        tok = self.tokenizer
        stops = split_stops(tok, stop, [tok.eos_token_id])
        encoded = [tok.encode(p, add_special_tokens=False) for p in prompts]
        # A prompt's n samples share a batch, so its prompt is encoded once (see _shared_prefill).
        order = sorted(range(len(prompts)), key=lambda i: -len(encoded[i]))
        per_batch = max(1, self.batch_size // n)
        out: list[list[Completion]] = [[] for _ in prompts]
        kwargs: dict[str, Any] = {
            "max_new_tokens": max_tokens,
            "do_sample": temperature > 0,
            "eos_token_id": sorted(stops.eos_ids | set(stops.token_ids)) or None,
            "pad_token_id": tok.pad_token_id,
        }
        if temperature > 0:
            kwargs.update(temperature=temperature, top_p=top_p, top_k=0)
        if seed is not None:
            torch.manual_seed(seed)
        drop = {tok.pad_token_id, tok.eos_token_id}
        device = self.model.device
        for start in range(0, len(order), per_batch):
            batch = order[start : start + per_batch]
            width = max(len(encoded[i]) for i in batch)
            ids = torch.full((len(batch), width), tok.pad_token_id, dtype=torch.long)
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for r, i in enumerate(batch):
                e = encoded[i]
                ids[r, width - len(e) :] = torch.tensor(e, dtype=torch.long)
                mask[r, width - len(e) :] = 1
            ids, mask = ids.to(device), mask.to(device)
            extra: dict[str, Any] = {}
            if stops.strings:
                extra["stopping_criteria"] = [_StopOnText(tok, stops.strings, width)]
            with torch.no_grad():
                if n > 1 and width > 1:
                    extra["past_key_values"] = self._shared_prefill(ids, mask, n)
                gen = self.model.generate(
                    input_ids=ids.repeat_interleave(n, 0),
                    attention_mask=mask.repeat_interleave(n, 0),
                    **kwargs,
                    **extra,
                )
            for r, i in enumerate(batch):
                out[i] = [
                    finish(gen[r * n + j, width:].tolist(), self._decode, stops, max_tokens, drop)
                    for j in range(n)
                ]
        self.usage.add([len(e) for e in encoded], out)
        return out

    def _shared_prefill(self, ids: Any, mask: Any, n: int) -> Any:
        """The KV cache of every prompt but its last token, computed once and repeated for the n samples.

        ``generate`` then only runs the last prompt token per row, instead of encoding each prompt n
        times (``num_return_sequences`` expands before the prefill). Positions follow ``generate``'s own
        rule for left padding, so the result equals the unshared path.
        """
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        out = self.model(
            input_ids=ids[:, :-1], attention_mask=mask[:, :-1], position_ids=pos[:, :-1], use_cache=True
        )
        cache = out.past_key_values
        cache.batch_repeat_interleave(n)
        return cache
