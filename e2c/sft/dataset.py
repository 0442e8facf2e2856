"""verl multi-turn SFT dataset with E2C loss scopes (``data.custom_cls.path=pkg://e2c.sft.dataset``).

:class:`E2CSFTDataset` subclasses verl's ``MultiTurnSFTDataset``: the trained text is the inference text for
any chat template (the prompt rendered with the generation prompt and the prefilled opener, as
:meth:`e2c.chain.ChainFormat.render_chat` does, then the chain, then :func:`end_of_turn`; the loss covers the
chain and the end of turn); each row's ``loss_scope`` picks ``full`` or ``exploration``
(:func:`e2c.sft.masks.exploration_loss_mask`); over-long rows are decided up front by ``data.overlong``
(``skip``, ``error``, ``truncate``); and the trained-token share is printed at start (and written to
``data.stats_path``). :class:`EFSFTDataset` defaults to ``exploration``.
More: docs/training.md, "SFT and EF-SFT".
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

from e2c.chain import ChainFormat, get_format
from e2c.core.files import atomic_write_json
from e2c.sft.masks import SCOPES, boundary_token_id, scope_loss_mask

OVERLONG = ("skip", "error", "truncate")
# Stands in for an assistant answer when reading what the template writes after one; plain letters, so
# no template escapes, trims or splits it.
_PROBE = "E2CProbeAssistantAnswer"


def end_of_turn(tokenizer: Any, **template_kwargs: Any) -> str:
    """The text a chat template writes after an assistant message's content (``<|im_end|>\n`` for
    ChatML and Qwen3), read from the template by rendering a probe conversation.

    Falls back to the EOS token when the template does not show the content verbatim.
    """
    msgs = [{"role": "user", "content": "q"}, {"role": "assistant", "content": _PROBE}]
    try:
        text = tokenizer.apply_chat_template(
            msgs, tokenize=False, add_generation_prompt=False, **template_kwargs
        )
    except Exception:  # a template that refuses the probe: the EOS token is the usual end of a turn
        text = ""
    at = text.rfind(_PROBE) if isinstance(text, str) else -1
    if at < 0:
        return tokenizer.eos_token or ""
    return text[at + len(_PROBE) :]


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def encode_chain_row(
    tokenizer: Any,
    messages: Sequence[Mapping[str, Any]],
    fmt: ChainFormat,
    eot: str,
    **template_kwargs: Any,
) -> tuple[list[int], list[int]]:
    """Token ids and loss mask (1 = a label) of one SFT row, tokenized as inference sees it.

    The prompt is ``fmt.render_chat`` of the turns before the last (the assistant's chain): the chat
    template with its generation prompt, then the prefilled opening tag when the chain starts with it. The
    rest of the chain and ``eot`` follow. Every token from the end of the generation prompt on is a label
    (the prefilled tag too: the model learns to write it, as an un-prefilled prompt requires).
    """
    if (
        not messages
        or messages[-1].get("role") != "assistant"
        or not isinstance(messages[-1].get("content"), str)
    ):
        raise ValueError("the last message must be the assistant's chain (a string)")
    context, chain = list(messages[:-1]), str(messages[-1]["content"])
    bare = fmt.replace(prefill_assistant=False)
    gen_prompt = bare.render_chat(tokenizer, context, **template_kwargs)
    prefilled = fmt.assistant_prefix("full")
    if prefilled and chain.startswith(prefilled):
        prompt, rest = gen_prompt + prefilled, chain[len(prefilled) :]
    else:
        prompt, rest = gen_prompt, chain
    prompt_ids = tokenizer.encode(prompt, add_special_tokens=False)
    ids = prompt_ids + tokenizer.encode(rest + eot, add_special_tokens=False)
    # Labels start where the generation prompt ends (normally its own token count; a merge across the
    # boundary with the prefilled tag moves it to the first token that differs).
    start = _common_prefix(tokenizer.encode(gen_prompt, add_special_tokens=False), prompt_ids)
    return ids, [0] * start + [1] * (len(ids) - start)


@dataclass
class SFTDataStats:
    """Token accounting of one SFT dataset (after over-long rows were handled).

    ``trained_share`` is trained tokens / all assistant tokens of the kept rows: 1.0 for full-chain SFT,
    the exploration's share for EF-SFT.
    """

    files: list[str]
    rows: int
    rows_by_scope: dict[str, int]
    skipped_overlong: int
    truncated: int
    max_length: int
    assistant_tokens: int
    trained_tokens: int
    exploration_rows_without_boundary: int
    seq_len_p50: float
    seq_len_p95: float
    seq_len_max: int
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def trained_share(self) -> float:
        return self.trained_tokens / self.assistant_tokens if self.assistant_tokens else 0.0

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "trained_share": self.trained_share}

    def line(self) -> str:
        """One human-readable summary line."""
        scopes = ", ".join(f"{n} {s}" for s, n in sorted(self.rows_by_scope.items()))
        msg = (
            f"e2c sft data: {self.rows} rows ({scopes}); trained tokens {self.trained_tokens} of "
            f"{self.assistant_tokens} assistant tokens ({100 * self.trained_share:.1f}%); sequence length "
            f"p50 {self.seq_len_p50:.0f} p95 {self.seq_len_p95:.0f} max {self.seq_len_max} "
            f"(max_length {self.max_length})"
        )
        if self.skipped_overlong:
            msg += f"; skipped {self.skipped_overlong} rows longer than max_length"
        if self.truncated:
            msg += f"; truncated {self.truncated} rows to max_length"
        if self.exploration_rows_without_boundary:
            msg += f"; {self.exploration_rows_without_boundary} exploration rows have no closing tag (train nothing)"
        return msg


def _is_rank0() -> bool:
    try:
        import torch.distributed as dist

        return not dist.is_initialized() or dist.get_rank() == 0
    except Exception:  # pragma: no cover - torch is a hard dependency
        return True


def write_stats(path: str | Path, stats: SFTDataStats) -> None:
    """Merge ``stats`` into the JSON object at ``path`` under the key of its data files; atomic write."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data: dict[str, Any] = {}
    if path.is_file():
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            data = {}  # a damaged stats file is rewritten, it holds nothing that cannot be recomputed
    data[",".join(stats.files)] = stats.to_json()
    atomic_write_json(path, data)


class E2CSFTDataset(MultiTurnSFTDataset):
    """verl's multi-turn SFT dataset with per-row E2C loss scopes (see the module docstring)."""

    default_loss_scope = "full"

    def __init__(
        self,
        parquet_files: str | list[str],
        tokenizer: Any,
        config: Any,
        processor: Any = None,
        max_samples: int = -1,
    ) -> None:
        config = config or {}
        self.chain_format = get_format(config.get("chain_format", None) or "e2c")
        self.loss_scope_key = config.get("loss_scope_key", None) or "loss_scope"
        self.fallback_scope = config.get("default_loss_scope", None) or self.default_loss_scope
        self.overlong = config.get("overlong", None) or "skip"
        self.stats_path = config.get("stats_path", None)
        if self.fallback_scope not in SCOPES:
            raise ValueError(f"data.default_loss_scope={self.fallback_scope!r}; valid: {', '.join(SCOPES)}")
        if self.overlong not in OVERLONG:
            raise ValueError(f"data.overlong={self.overlong!r}; valid: {', '.join(OVERLONG)}")
        super().__init__(parquet_files, tokenizer, config, processor=processor, max_samples=max_samples)
        media = [k for k in (self.image_key, self.video_key) if k in self.dataframe.columns]
        if media:
            # Rows are tokenized as text (the prompt inference renders); images would be dropped silently.
            raise ValueError(
                f"{','.join(map(str, self.parquet_files))}: column {media[0]!r}; E2C SFT rows are text only, "
                "use verl's MultiTurnSFTDataset for images or videos"
            )
        if self.overlong == "truncate" and self.truncation == "error":
            self.truncation = "right"
        self._eot = end_of_turn(self.tokenizer)
        self.boundary_id = boundary_token_id(self.tokenizer, self.chain_format.explore_boundary)
        self.loss_scopes = self._read_scopes()
        self.stats = self._scan()
        if _is_rank0():
            print(self.stats.line(), flush=True)
            if self.stats_path:
                write_stats(self.stats_path, self.stats)

    # ------------------------------------------------------------------------------------------ scopes
    def _read_scopes(self) -> list[str]:
        df = self.dataframe
        n = len(df)
        if self.loss_scope_key in df.columns:
            raw = [None if pd.isna(v) else str(v) for v in df[self.loss_scope_key].tolist()]
        else:
            raw = [None] * n
        if "extra_info" in df.columns:
            infos = df["extra_info"].tolist()
            raw = [
                r if r is not None else (i.get(self.loss_scope_key) if isinstance(i, dict) else None)
                for r, i in zip(raw, infos)
            ]
        scopes = [r if r is not None else self.fallback_scope for r in raw]
        for i, s in enumerate(scopes):
            if s not in SCOPES:
                raise ValueError(
                    f"{','.join(map(str, self.parquet_files))} row {i}: {self.loss_scope_key}={s!r}; "
                    f"valid: {', '.join(SCOPES)}"
                )
        return scopes

    # ------------------------------------------------------------------------------------------ encode
    def _template_kwargs(self, item: int) -> dict[str, Any]:
        """verl's chat-template settings for a row (``apply_chat_template_kwargs``, ``enable_thinking``)."""
        kwargs = dict(self.apply_chat_template_kwargs or {})
        thinking = (
            self.enable_thinking[item] if self.enable_thinking is not None else self.enable_thinking_default
        )
        if thinking is not None and not pd.isna(thinking):
            kwargs["enable_thinking"] = bool(thinking)
        if self.tools is not None and self.tools[item] is not None:
            kwargs["tools"] = self.tools[item]
        return kwargs

    def _encode(self, item: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Whole (untruncated, unpadded) token ids and loss mask of row ``item``; see :func:`encode_chain_row`."""
        kwargs = self._template_kwargs(item)
        eot = self._eot if not kwargs else end_of_turn(self.tokenizer, **kwargs)
        try:
            ids, mask = encode_chain_row(
                self.tokenizer, self.messages[item], self.chain_format, eot, **kwargs
            )
        except ValueError as e:
            raise ValueError(f"{','.join(map(str, self.parquet_files))} row {item}: {e}") from None
        return torch.tensor(ids, dtype=torch.long), torch.tensor(mask, dtype=torch.long)

    def _finish(self, input_ids: torch.Tensor, loss_mask: torch.Tensor) -> dict[str, Any]:
        """Pad or truncate one row as verl's multi-turn dataset does, with the same output keys."""
        n, limit = int(input_ids.shape[0]), int(self.max_length)
        position_ids = torch.arange(n, dtype=torch.long)
        if self.pad_mode == "no_padding":
            if n > limit and self.truncation == "error":
                raise ValueError(f"sequence_length={n} is larger than self.max_length={limit}")
            # verl keeps the first max_length tokens here, whatever the truncation side.
            return {
                "input_ids": input_ids[:limit],
                "position_ids": position_ids[:limit],
                "loss_mask": loss_mask[:limit],
            }
        attention_mask = torch.ones_like(input_ids)
        if n < limit:
            pad = limit - n
            pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
            input_ids = torch.cat((input_ids, torch.full((pad,), pad_id, dtype=input_ids.dtype)))
            attention_mask = torch.cat((attention_mask, torch.zeros(pad, dtype=attention_mask.dtype)))
            loss_mask = torch.cat((loss_mask, torch.zeros(pad, dtype=loss_mask.dtype)))
            position_ids = torch.cat((position_ids, torch.zeros(pad, dtype=position_ids.dtype)))
        elif n > limit:
            if self.truncation == "error":
                raise ValueError(f"sequence_length={n} is larger than self.max_length={limit}")
            cut = slice(-limit, None) if self.truncation == "left" else slice(None, limit)
            input_ids, attention_mask = input_ids[cut], attention_mask[cut]
            loss_mask, position_ids = loss_mask[cut], position_ids[cut]
        return {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "position_ids": position_ids,
            "loss_mask": loss_mask,
        }

    # ------------------------------------------------------------------------------------------ scan
    def _scan(self) -> SFTDataStats:
        n = len(self.messages)
        lengths: list[int] = []
        keep: list[int] = []
        truncated = skipped = assistant = trained = no_boundary = 0
        by_scope: dict[str, int] = {}
        limit = int(self.max_length)
        # verl keeps the last max_length tokens only for right padding with left truncation; otherwise the first.
        keep_tail = self.pad_mode == "right" and self.truncation == "left"
        # Each row whole, as _encode gives it (no padding, no length limit): its true length and mask.
        for i in range(n):
            ids, mask = self._encode(i)
            length = int(ids.shape[-1])
            lengths.append(length)
            if length > limit:
                if self.overlong == "skip":
                    skipped += 1
                    continue
                if self.overlong == "error":
                    raise ValueError(
                        f"{','.join(map(str, self.parquet_files))} row {i} has {length} tokens > "
                        f"data.max_length={limit}; raise max_length or set data.overlong=skip|truncate"
                    )
                truncated += 1
                ids, mask = (ids[-limit:], mask[-limit:]) if keep_tail else (ids[:limit], mask[:limit])
            keep.append(i)
            scope = self.loss_scopes[i]
            by_scope[scope] = by_scope.get(scope, 0) + 1
            scoped = scope_loss_mask(ids, mask, scope, self.boundary_id)
            assistant += int(mask.sum())
            trained += int(scoped.sum())
            if scope == "exploration" and int(scoped.sum()) == 0:
                no_boundary += 1
        if skipped:
            self._keep_rows(keep)
        if not keep:
            raise ValueError(
                f"{','.join(map(str, self.parquet_files))}: every row is longer than data.max_length="
                f"{self.max_length}; raise it"
            )
        arr = np.asarray(lengths)
        return SFTDataStats(
            files=[str(p) for p in self.parquet_files],
            rows=len(keep),
            rows_by_scope=by_scope,
            skipped_overlong=skipped,
            truncated=truncated,
            max_length=int(self.max_length),
            assistant_tokens=assistant,
            trained_tokens=trained,
            exploration_rows_without_boundary=no_boundary,
            seq_len_p50=float(np.percentile(arr, 50)),
            seq_len_p95=float(np.percentile(arr, 95)),
            seq_len_max=int(arr.max()),
            extra={"chain_format": self.chain_format.name, "boundary_token_id": self.boundary_id},
        )

    def _keep_rows(self, keep: list[int]) -> None:
        """Drop rows from every per-row list the parent's ``__getitem__`` reads."""
        self.dataframe = self.dataframe.iloc[keep]
        self.messages = [self.messages[i] for i in keep]
        if self.tools is not None:
            self.tools = [self.tools[i] for i in keep]
        if self.enable_thinking is not None:
            self.enable_thinking = [self.enable_thinking[i] for i in keep]
        self.loss_scopes = [self.loss_scopes[i] for i in keep]

    # ------------------------------------------------------------------------------------------ items
    def __getitem__(self, item: int) -> dict[str, Any]:
        res = self._finish(*self._encode(item))
        res["loss_mask"] = scope_loss_mask(
            res["input_ids"], res["loss_mask"], self.loss_scopes[item], self.boundary_id
        )
        return res


class EFSFTDataset(E2CSFTDataset):
    """EF-SFT: rows without a ``loss_scope`` are exploration-only (rows that name a scope keep it)."""

    default_loss_scope = "exploration"
