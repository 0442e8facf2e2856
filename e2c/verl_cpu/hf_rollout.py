"""A transformers rollout for verl: the CPU (and single-device debugging) path of RL.

verl's agent loop calls an inference server per replica once per sample, ``generate(prompt_ids,
sampling_params)`` -> :class:`TokenOutput`. Registered as the rollout ``hf``: :class:`HFRolloutServer`, a ray
actor that batches the requests arriving together (``E2C_ROLLOUT_BATCH_WAIT_S``) and decodes them with an
engine of :mod:`e2c.verl_cpu.rollout_engine`; the replica and trainer adapter in :mod:`e2c.verl_cpu.hf_verl`,
whose every weight sync gathers the trainer's full tensors and pushes them to the server, so each step samples
from the current policy. Every sync is a line of ``rollout_sync.jsonl`` (:func:`record_sync`): the weights'
movement from the first ones the server was sent (``E2C_ROLLOUT_WEIGHT_MOVEMENT=0`` turns it off), the sync's
seconds and what the server decoded since the previous line (``gen_*``).
More: docs/training.md, "RL on verl: GRPO, DAPO, the e3 curriculum".
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from e2c.core.files import RecordFile
from e2c.generation.base import eos_ids
from e2c.launch.devices import cpu_has_bf16
from e2c.launch.lora import AdapterSync
from e2c.launch.weights import BF16_CHANGED, REL_L2, weight_movement
from e2c.verl_cpu.rollout_engine import build_engine, rollout_engine
from e2c.verl_cpu.shared_weights import Manifest, SharedWeightsReader

logger = logging.getLogger(__name__)

ROLLOUT_NAME = "hf"
SYNC_LOG_ENV = "E2C_ROLLOUT_SYNC_LOG"
SYNC_LOG = "rollout_sync.jsonl"
MOVEMENT_ENV = "E2C_ROLLOUT_WEIGHT_MOVEMENT"


@dataclass
class _Request:
    prompt_ids: list[int]
    max_tokens: int
    key: tuple[float, float, int, bool, tuple[int, ...]]
    future: asyncio.Future = field(repr=False)


def sampling_key(params: dict[str, Any]) -> tuple[float, float, int, bool, tuple[int, ...]]:
    """(temperature, top_p, top_k, logprobs, stop token ids) of a verl sampling-params dict; requests that
    share it are decoded in one batch."""
    temperature = float(params.get("temperature", 1.0) or 0.0)
    top_p = float(params.get("top_p", 1.0) if params.get("top_p") is not None else 1.0)
    top_k = params.get("top_k", -1)
    top_k = -1 if top_k is None else int(top_k)
    stops = tuple(sorted(int(t) for t in (params.get("stop_token_ids") or [])))
    return temperature, top_p, top_k, bool(params.get("logprobs", False)), stops


def max_new_tokens(params: dict[str, Any], prompt_len: int, response_length: int, max_model_len: int) -> int:
    """The token budget of one request, as verl's vLLM server computes it: the request's ``max_tokens``
    (or ``max_new_tokens``) if given, else the configured response length, within the context window."""
    if params.get("max_tokens") is not None:
        budget = int(params["max_tokens"])
    elif params.get("max_new_tokens") is not None:
        budget = int(params["max_new_tokens"])
    else:
        budget = response_length
    return max(0, min(budget, max_model_len - prompt_len))


class HFRolloutServer:
    """Ray actor: a transformers policy that batches concurrent ``generate`` calls."""

    def __init__(self, config: Any, model_config: Any, replica_rank: int = 0) -> None:
        import torch
        from transformers import AutoTokenizer
        from verl.utils.config import omega_conf_to_dataclass
        from verl.workers.config import HFModelConfig

        self.config = omega_conf_to_dataclass(config)
        if not isinstance(model_config, HFModelConfig):
            model_config = omega_conf_to_dataclass(model_config, dataclass_type=HFModelConfig)
        path = model_config.local_path
        self.replica_rank = replica_rank
        self.lora = AdapterSync(path)
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.pad_id = self.tokenizer.pad_token_id
        if self.pad_id is None:
            self.pad_id = self.tokenizer.eos_token_id
        self.response_length = int(self.config.response_length)
        self.max_model_len = int(
            self.config.max_model_len or (self.config.prompt_length + self.config.response_length)
        )
        self.seed = int(getattr(self.config, "seed", 0) or 0)
        threads = max(1, int(os.environ.get("E2C_ROLLOUT_THREADS", str(torch.get_num_threads()))))

        def build() -> Any:
            torch.set_num_threads(threads)
            return build_engine(
                rollout_engine(), path, rollout_dtype(), self.pad_id, self.max_model_len, self.seed
            )

        # The engine is built, and every call into it made, on one thread of its own: OpenMP's thread count
        # is a per-thread setting, and vLLM's CPU attention checks that a batch runs with the thread count
        # its metadata was built with. Calls spread over asyncio's default pool can fail that check
        # ("thread_num (1 vs. 2)") on a thread where ray's OMP_NUM_THREADS=1 still holds.
        self._engine_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="e2c-rollout-engine")
        self.engine = self._engine_thread.submit(build).result()
        # The same ids the hf generator, the agent loop and vLLM stop on (tokenizer + generation config).
        self.stop_ids = eos_ids(self.tokenizer, self.engine.generation_config)
        self.batch_wait_s = float(os.environ.get("E2C_ROLLOUT_BATCH_WAIT_S", "0.05"))
        self.max_batch = int(os.environ.get("E2C_ROLLOUT_MAX_BATCH", "64"))
        self.global_steps: int | None = None
        self.shared = SharedWeightsReader()
        self.movement = WeightMovementLog() if os.environ.get(MOVEMENT_ENV, "1").strip() != "0" else None
        self._moved: dict[str, Any] = {}  # the last sync's movement fields
        self._logged = {"batches": 0, "requests": 0, "tokens": 0, "seconds": 0.0}  # stats at the last sync
        self._pending: list[_Request] = []
        self._worker: asyncio.Task | None = None
        self.stats = {
            "requests": 0,
            "batches": 0,
            "tokens": 0,
            "seconds": 0.0,
            "weight_updates": 0,
            "weight_updates_unchanged": 0,
            "engine": self.engine.name,
        }

    # -- generation -------------------------------------------------------------------------------------
    async def generate(
        self,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        request_id: str = "",
        image_data: Any = None,
        video_data: Any = None,
        **_: Any,
    ) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        if image_data is not None or video_data is not None:
            raise ValueError("the hf rollout is text-only; use rollout.name=vllm for multimodal data")
        prompt_ids = [int(t) for t in prompt_ids]
        budget = max_new_tokens(sampling_params, len(prompt_ids), self.response_length, self.max_model_len)
        loop = asyncio.get_running_loop()
        req = _Request(prompt_ids, budget, sampling_key(sampling_params), loop.create_future())
        self._pending.append(req)
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._serve())
        token_ids, log_probs, finished = await req.future
        return TokenOutput(
            token_ids=token_ids,
            log_probs=log_probs,
            stop_reason="completed" if finished else None,
            extra_fields={"global_steps": self.global_steps},
        )

    async def _serve(self) -> None:
        """Batch loop: wait briefly for concurrent requests, decode them together, repeat while any wait."""
        while self._pending:
            await asyncio.sleep(self.batch_wait_s)
            batch, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch :]
            groups: dict[tuple, list[_Request]] = defaultdict(list)
            # In prompt order, not arrival order: the same requests are then the same batch, row for row,
            # however the agent loops' tasks interleaved (a seeded run samples the same tokens at 1 or 4
            # trainer ranks). The n requests of a GRPO group share a prompt and are interchangeable.
            for r in sorted(batch, key=lambda r: (r.prompt_ids, r.max_tokens)):
                groups[r.key].append(r)
            for key, reqs in groups.items():
                try:
                    results = await self._on_engine_thread(self._decode, key, reqs)
                except Exception as e:  # surface the error in every waiting agent loop
                    for r in reqs:
                        if not r.future.done():
                            r.future.set_exception(e)
                    continue
                for r, res in zip(reqs, results, strict=True):
                    if not r.future.done():
                        r.future.set_result(res)

    async def _on_engine_thread(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` on the engine's own thread (see ``__init__``), awaited."""
        return await asyncio.get_running_loop().run_in_executor(self._engine_thread, fn, *args)

    def _decode(self, key: tuple, reqs: list[_Request]) -> list[tuple[list[int], list[float] | None, bool]]:
        temperature, top_p, top_k, want_lp, extra_stops = key
        stop_ids = frozenset(self.stop_ids) | frozenset(extra_stops)
        t0 = time.perf_counter()
        rows, lps = self.engine.decode(
            [r.prompt_ids for r in reqs],
            [r.max_tokens for r in reqs],
            temperature,
            top_p,
            top_k,
            stop_ids,
            want_lp,
            (self.seed + self.stats["batches"]) if self.seed else None,
        )
        self.stats["seconds"] += time.perf_counter() - t0
        self.stats["requests"] += len(reqs)
        self.stats["batches"] += 1
        self.stats["tokens"] += sum(len(r) for r in rows)
        return [
            (row, (lps[i] if lps is not None else None), bool(row) and row[-1] in stop_ids)
            for i, row in enumerate(rows)
        ]

    # -- weights and lifecycle ----------------------------------------------------------------------------
    async def update_weights(
        self,
        state_dict: dict[str, Any],
        global_steps: int | None = None,
        peft_config: dict[str, Any] | None = None,
        base_sync_done: bool = True,
        timing: dict[str, float] | None = None,
        via: str = "ray",
    ) -> int:
        """Load the trainer's tensors; returns how many were loaded. Unknown names are an error.

        Without ``peft_config`` these are full weights. With it (LoRA, verl's adapter sync) they are the base
        weights under PEFT's names (``base_sync_done=False``) or the adapter, merged here into the base
        (:class:`e2c.launch.lora.AdapterSync`), so the engine always serves plain weights. ``timing`` (from the
        trainer's adapter): ``gather_s``, its seconds collecting the tensors, and ``sent_at``, when it sent
        them; the sync line then says where the sync's seconds went (:func:`sync_seconds`) and, in
        ``sync_via``, how the tensors came (``ray``, or ``shm``: :meth:`update_weights_shared`).
        """
        arrived = time.time()
        kind, shift = "full", None
        if peft_config is not None:
            if base_sync_done:
                kind = "lora_adapter"
                state_dict = await asyncio.to_thread(self.lora.merged, state_dict, peft_config)
                shift = await asyncio.to_thread(self.lora.shift, state_dict)
            else:
                kind = "lora_base"
                state_dict = self.lora.base_weights(state_dict)
        moved = {}
        measured = time.time()
        if self.movement is not None:  # before the engine reads the tensors (vLLM may repack them)
            moved = await asyncio.to_thread(self.movement.update, state_dict, global_steps)
        loading = time.time()
        count = await self._on_engine_thread(self.engine.load_weights, state_dict)
        record_sync(
            {
                "global_steps": global_steps,
                "kind": kind,
                "tensors": count,
                "shift_from_base": shift,
                **moved,
                **self._generated(),
                **sync_seconds(timing or {}, arrived, measured, loading, time.time()),
                "sync_via": via,
            }
        )
        self._moved = moved
        if global_steps is not None:
            self.global_steps = global_steps
        self.stats["weight_updates"] += 1
        return count

    async def update_weights_shared(
        self, manifest: Manifest, global_steps: int | None = None, timing: dict[str, float] | None = None
    ) -> int:
        """:meth:`update_weights` with full weights read from the trainer's shared file
        (:mod:`e2c.verl_cpu.shared_weights`) instead of passed through ray's object store."""
        return await self.update_weights(self.shared.read(manifest), global_steps, timing=timing, via="shm")

    async def node_id(self) -> str:
        """The ray node this server runs on (the trainer's adapter syncs through a shared file when it is
        its own)."""
        import ray

        return ray.get_runtime_context().get_node_id()

    async def weights_unchanged(self, global_steps: int) -> None:
        """Step ``global_steps`` skipped its update (:meth:`e2c.rl.trainer.E2CTrainer.on_step_end`), so the
        trainer sends no weights: the ones held are that step's. Logged like a sync (kind ``unchanged``, the
        last sync's movement again), so every step has its line in ``rollout_sync.jsonl``."""
        record_sync(
            {
                "global_steps": global_steps,
                "kind": "unchanged",
                "tensors": 0,
                **self._moved,
                **self._generated(),
            }
        )
        self.global_steps = global_steps
        self.stats["weight_updates_unchanged"] += 1

    def _generated(self) -> dict[str, Any]:
        """What the server decoded since the last sync line (the step's rollout): ``gen_batches`` (engine calls;
        1 when the agent loops' requests all arrived together), ``gen_requests``, ``gen_tokens`` and
        ``gen_decode_s`` (seconds inside the engine)."""
        now = {k: self.stats.get(k, 0) for k in self._logged}
        out = {f"gen_{k}": now[k] - self._logged[k] for k in ("batches", "requests", "tokens")}
        out["gen_decode_s"] = round(now["seconds"] - self._logged["seconds"], 3)
        self._logged = now
        return out

    async def get_stats(self) -> dict[str, Any]:
        return dict(self.stats)

    async def set_global_steps(self, global_steps: int) -> None:
        self.global_steps = global_steps

    # The engine keeps no KV cache between requests and never leaves the CPU: these are no-ops.
    async def wake_up(self, tags: list[str] | None = None) -> None:
        return None

    async def sleep(self) -> None:
        return None

    async def clear_kv_cache(self) -> None:
        return None

    async def release_kv_cache(self) -> None:
        return None

    async def resume_kv_cache(self) -> None:
        return None

    async def abort_all_requests(self, reject_request: bool = False) -> None:
        return None

    async def resume_generation(self) -> None:
        return None

    async def start_profile(self, **_: Any) -> None:
        return None

    async def stop_profile(self) -> None:
        return None


class WeightMovementLog:
    """The first weights a rollout is sent (kept once, in their own dtype) and, for each later sync, how far
    the weights are from them (:func:`e2c.launch.weights.weight_movement`: ``weight_rel_l2``,
    ``weight_bf16_changed_share``; ``start_global_steps`` names the start)."""

    def __init__(self) -> None:
        self.start: dict[str, Any] | None = None
        self.start_step: int | None = None

    def update(self, state_dict: dict[str, Any], global_steps: int | None) -> dict[str, Any]:
        """The movement fields of this sync's log line; empty (and a warning) when they cannot be computed."""
        try:
            if self.start is None:
                self.start = {k: v.detach().clone() for k, v in state_dict.items()}
                self.start_step = global_steps
                return {REL_L2: 0.0, BF16_CHANGED: 0.0, "start_global_steps": global_steps}
            m = weight_movement(self.start, state_dict)
            return {
                REL_L2: m[REL_L2],
                BF16_CHANGED: m[BF16_CHANGED],
                "start_global_steps": self.start_step,
                "weight_tensors_skipped": len(m["weight_tensors_skipped"]),
            }
        except Exception as e:  # a log line, never a reason to fail the sync
            logger.warning("weight movement not logged: %s", e)
            return {}


def sync_seconds(
    timing: dict[str, float], arrived: float, measured: float, loading: float, done: float
) -> dict[str, float]:
    """Where a weight sync's seconds went, for its log line: ``sync_gather_s`` (the trainer collecting the
    full tensors, and writing them to the shared file when it is used), ``sync_transfer_s`` (from the
    trainer's send to the server's start: ray's serialization and object store), ``sync_merge_s`` (LoRA's
    merge), ``sync_movement_s`` (the movement diagnostic) and ``sync_load_s`` (the engine taking the
    weights). Parts the trainer did not report are left out.

    >>> sync_seconds({"gather_s": 0.5, "sent_at": 10.0}, 11.0, 11.25, 12.0, 12.5)
    {'sync_gather_s': 0.5, 'sync_transfer_s': 1.0, 'sync_merge_s': 0.25, 'sync_movement_s': 0.75, 'sync_load_s': 0.5}
    """
    out: dict[str, float] = {}
    if "gather_s" in timing:
        out["sync_gather_s"] = round(timing["gather_s"], 3)
    if "sent_at" in timing:
        out["sync_transfer_s"] = round(max(0.0, arrived - timing["sent_at"]), 3)
    out["sync_merge_s"] = round(measured - arrived, 3)
    out["sync_movement_s"] = round(loading - measured, 3)
    out["sync_load_s"] = round(done - loading, 3)
    return out


ROLLOUT_DTYPES = ("auto", "bfloat16", "float32")
SYNC_VIA_ENV = "E2C_ROLLOUT_SYNC_VIA"
SYNC_VIAS = ("shm", "ray")


def sync_via(name: str | None = None) -> str:
    """How the trainer sends full weights to a server on its own machine: ``E2C_ROLLOUT_SYNC_VIA`` = ``shm``
    (default: one shared-memory file, :mod:`e2c.verl_cpu.shared_weights`) or ``ray`` (a call argument,
    through ray's object store). A server on another node, and LoRA's syncs, always go through ray.

    >>> sync_via("RAY"), sync_via(" shm ")
    ('ray', 'shm')
    """
    name = (name or os.environ.get(SYNC_VIA_ENV, "shm")).strip().lower()
    if name not in SYNC_VIAS:
        raise ValueError(f"{SYNC_VIA_ENV}={name!r} is not one of {', '.join(SYNC_VIAS)}")
    return name


def record_sync(record: dict[str, Any]) -> None:
    """One JSON line per weight sync in ``E2C_ROLLOUT_SYNC_LOG`` (the RL launcher sets it to
    ``<output-dir>/rollout_sync.jsonl``): which weights the rollout took, and for LoRA how far the merged
    weights are from the base, so a run shows that its rollout samples from the trained adapter."""
    path = os.environ.get(SYNC_LOG_ENV)
    if path:
        with RecordFile(path) as f:
            f.write([{"time": round(time.time(), 3), **record}])


def rollout_dtype(name: str | None = None) -> Any:
    """The rollout model's dtype: ``E2C_ROLLOUT_DTYPE`` (auto | bfloat16 | float32; default auto = bf16 on a
    CPU with native bf16 units, else fp32, which is also what a GPU-less machine without them runs fastest)."""
    import torch

    name = (name or os.environ.get("E2C_ROLLOUT_DTYPE", "auto")).strip().lower()
    if name not in ROLLOUT_DTYPES:
        raise ValueError(f"E2C_ROLLOUT_DTYPE={name!r} is not one of {', '.join(ROLLOUT_DTYPES)}")
    if name == "auto":
        name = "bfloat16" if (torch.cuda.is_available() or cpu_has_bf16()) else "float32"
    return getattr(torch, name)


def server_actor_name(replica_rank: int, node_rank: int = 0) -> str:
    """The ray actor name of a replica's server (the adapter finds it by this name)."""
    return f"{ROLLOUT_NAME}_server_{replica_rank}_{node_rank}"
