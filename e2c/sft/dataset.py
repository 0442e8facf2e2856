"""verl multi-turn SFT dataset with E2C loss scopes (``data.custom_cls.path=pkg://e2c.sft.dataset``).

:class:`E2CSFTDataset` subclasses :class:`verl.utils.dataset.multiturn_sft_dataset.MultiTurnSFTDataset`
and changes three things:

1. **Loss scope per row.** The ``loss_scope`` column (or ``extra_info.loss_scope``; else
   ``data.default_loss_scope``) picks the mask: ``full`` trains the whole assistant chain (verl's mask),
   ``exploration`` trains assistant tokens up to and including the first ``</EXPLORATION>`` token
   (:func:`e2c.sft.masks.exploration_loss_mask`; the tag's id comes from the tokenizer).
2. **Over-long rows are decided up front**, not by a crash in the middle of training: ``data.overlong``
   is ``skip`` (drop rows longer than ``data.max_length``, counted in the statistics), ``error`` (stop at
   start naming the first such row) or ``truncate`` (verl's truncation; with ``pad_mode=no_padding``
   verl always keeps the *first* ``max_length`` tokens, so a cut execution loses its end and an
   exploration row cut before its closing tag trains nothing).
3. **Trained-token share.** At start every row is tokenized once; the trained tokens, all assistant
   tokens and their ratio are printed (rank 0) and, if ``data.stats_path`` is set, written to that JSON
   file under a key naming the data files.

Extra ``data.*`` keys (all optional): ``chain_format`` (default ``e2c``), ``loss_scope_key``
(``loss_scope``), ``default_loss_scope`` (``full``; :class:`EFSFTDataset`: ``exploration``), ``overlong``
(``skip``), ``stats_path`` (none).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

from e2c.chain import get_format
from e2c.sft.masks import SCOPES, boundary_token_id, scope_loss_mask

OVERLONG = ("skip", "error", "truncate")


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
    fd, tmp = tempfile.mkstemp(prefix=path.name, dir=path.parent)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=2)
    os.replace(tmp, path)


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
        if self.overlong == "truncate" and self.truncation == "error":
            self.truncation = "right"
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

    # ------------------------------------------------------------------------------------------ scan
    @contextmanager
    def _untruncated(self) -> Iterator[None]:
        """Let the parent's ``__getitem__`` return whole rows: no padding, no length limit.

        The scan needs each row's true length and mask; reusing the parent's tokenization (instead of a
        copy of it) keeps the statistics identical to what training sees. Only used in ``__init__``.
        """
        saved = self.pad_mode, self.max_length, self.truncation
        self.pad_mode, self.max_length, self.truncation = "no_padding", sys.maxsize, "right"
        try:
            yield
        finally:
            self.pad_mode, self.max_length, self.truncation = saved

    def _scan(self) -> SFTDataStats:
        n = len(self.messages)
        lengths: list[int] = []
        keep: list[int] = []
        truncated = skipped = assistant = trained = no_boundary = 0
        by_scope: dict[str, int] = {}
        limit = int(self.max_length)
        # verl keeps the last max_length tokens only for right padding with left truncation; otherwise the first.
        keep_tail = self.pad_mode == "right" and self.truncation == "left"
        with self._untruncated():
            for i in range(n):
                row = super().__getitem__(i)
                ids, mask = row["input_ids"], row["loss_mask"]
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
        res = super().__getitem__(item)
        res["loss_mask"] = scope_loss_mask(
            res["input_ids"], res["loss_mask"], self.loss_scopes[item], self.boundary_id
        )
        return res


class EFSFTDataset(E2CSFTDataset):
    """EF-SFT: rows without a ``loss_scope`` are exploration-only (rows that name a scope keep it)."""

    default_loss_scope = "exploration"
