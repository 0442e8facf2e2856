"""How many GPUs this process may use: one rule for SFT, RL, eval and generation."""

from __future__ import annotations

import os
from collections.abc import Mapping

from e2c.commandline.argtypes import Number
from e2c.core.errors import UserError

# Nodes of one run: more than any cluster this recipe runs on, so a larger count is a typo (and a shell
# or a C int would overflow on it before any clean message).
MAX_NODES = 4096


def env_count(name: str, kind: Number, default: int, env: Mapping[str, str] | None = None) -> int:
    """A whole number from the environment variable ``name`` (``NNODES``, ``NODE_RANK``) checked by ``kind``
    (:mod:`e2c.commandline.argtypes`), or ``default`` when it is unset or empty; a bad value is one line naming the
    variable: ``NNODES must be in [1, 4096], got 0``.

    >>> from e2c.commandline.argtypes import whole
    >>> env_count("NNODES", whole(1, MAX_NODES), 1, {"NNODES": "2"}), env_count("NNODES", whole(1), 1, {})
    (2, 1)
    """
    raw = (os.environ if env is None else env).get(name, "").strip()
    return default if not raw else int(kind.check(raw, name))


def gpu_count(env: Mapping[str, str] | None = None) -> int:
    """GPUs visible to this process.

    ``E2C_FORCE_CPU=1`` forces 0. Otherwise ``CUDA_VISIBLE_DEVICES`` decides when it is set (empty, or a
    list starting with ``-1``, means none; ``0,1,3`` means three); else torch's CUDA count (0 when torch
    has no CUDA). ``env`` replaces ``os.environ`` (tests).

    >>> gpu_count({"CUDA_VISIBLE_DEVICES": "0,1,3"})
    3
    >>> gpu_count({"CUDA_VISIBLE_DEVICES": "-1"})
    0
    >>> gpu_count({"E2C_FORCE_CPU": "1", "CUDA_VISIBLE_DEVICES": "0"})
    0
    """
    env = os.environ if env is None else env
    if env.get("E2C_FORCE_CPU") == "1":
        return 0
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = [d.strip() for d in visible.split(",") if d.strip()]
        return 0 if not ids or ids[0] == "-1" else len(ids)
    try:
        import torch

        return torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # a broken CUDA install reads as none
        return 0


def requested_gpus(visible: int, env: Mapping[str, str] | None = None) -> int:
    """GPUs per node for a GPU run: the paper's ``N_GPUS`` when set (at most the visible ones), else every
    visible GPU."""
    raw = (os.environ if env is None else env).get("N_GPUS", "").strip()
    if not raw:
        return visible
    try:
        n = int(raw)
    except ValueError:
        raise UserError(f"N_GPUS must be a whole number of GPUs per node, got {raw!r}") from None
    if not 1 <= n <= visible:
        raise UserError(
            f"N_GPUS={n} but {visible} GPU(s) are visible (CUDA_VISIBLE_DEVICES); set N_GPUS between 1 and "
            f"{visible}"
        )
    return n


# Each CPU rank is a full process with its own copy of the model and a gloo peer: more than this on one
# machine is a typo, not a plan.
MAX_CPU_RANKS = 64


def cpu_ranks(env: Mapping[str, str] | None = None, given: int | None = None) -> int:
    """Processes per node of a run on a machine with no GPU: ``given`` (a launcher's ``--ranks``) when not
    None, else the paper's ``N_GPUS`` when set (each "GPU" becomes one CPU rank, so a 4-GPU command runs at
    its real shape: 4 FSDP ranks on gloo), else 1. Either is 1 to :data:`MAX_CPU_RANKS`.

    >>> cpu_ranks({"N_GPUS": "4"}), cpu_ranks({}), cpu_ranks({"N_GPUS": "4"}, given=2)
    (4, 1, 2)
    """
    if given is not None:
        n, name = given, "--ranks"
    else:
        raw = (os.environ if env is None else env).get("N_GPUS", "").strip()
        if not raw:
            return 1
        try:
            n, name = int(raw), "N_GPUS"
        except ValueError:
            raise UserError(
                f"N_GPUS must be a whole number of GPUs (CPU ranks here) per node, got {raw!r}"
            ) from None
    if not 1 <= n <= MAX_CPU_RANKS:
        raise UserError(
            f"{name}={n}: with no GPU visible it is the number of CPU ranks (processes) per node, 1 to "
            f"{MAX_CPU_RANKS}"
        )
    return n


def cpu_note(setup: str, env: Mapping[str, str] | None = None) -> str | None:
    """The one line a CPU run prints when the paper's ``N_GPUS`` is set (it names GPUs, none is visible,
    so it becomes the number of CPU ranks); None otherwise. ``setup``: the CPU preset that runs instead."""
    env = os.environ if env is None else env
    raw = env.get("N_GPUS", "").strip()
    if not raw or gpu_count(env):
        return None
    n = cpu_ranks(env)
    return f"N_GPUS={raw} and no GPU is visible: {n} CPU rank(s) per node run the CPU set-up ({setup})"


def cpu_has_bf16() -> bool:
    """Whether this CPU multiplies bf16 natively (AVX512-BF16 or AMX): then bf16 is the fast dtype.

    Measured on a 2-core AMD EPYC with AVX512-BF16: SmolLM2-135M decoding 32 rows x 60 tokens took 14.8 s in
    bf16 against 27.1 s in fp32. Without those units bf16 is emulated: on a 2-core Xeon without them
    (2026-12-07) a bf16 GEMM of SmolLM2-135M's MLP shape ran at 60 GFLOP/s against 280 in fp32.
    """
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return bool(flags & {"avx512_bf16", "amx_bf16"})
    except OSError:
        pass
    return False


TRAIN_DTYPE_ENV = "E2C_TRAIN_DTYPE"
TRAIN_DTYPES = ("auto", "bf16", "fp32")


def cpu_train_dtype(env: Mapping[str, str] | None = None) -> str:
    """The dtype a CPU run of verl's trainers computes in (verl's FSDP ``mixed_precision.param_dtype``; the
    master weights and optimizer states stay fp32 either way): ``E2C_TRAIN_DTYPE`` (auto | bf16 | fp32),
    ``auto`` being bf16 where the CPU multiplies it natively (:func:`cpu_has_bf16`) and fp32 elsewhere, the
    rule the CPU rollout's ``E2C_ROLLOUT_DTYPE=auto`` follows, so trainer and rollout compute alike. A bad
    value is one line naming the choices.

    >>> cpu_train_dtype({"E2C_TRAIN_DTYPE": "fp32"}), cpu_train_dtype({"E2C_TRAIN_DTYPE": " BF16 "})
    ('fp32', 'bf16')
    """
    raw = (os.environ if env is None else env).get(TRAIN_DTYPE_ENV, "").strip().lower() or "auto"
    if raw not in TRAIN_DTYPES:
        raise UserError(f"{TRAIN_DTYPE_ENV}={raw!r} is not one of {', '.join(TRAIN_DTYPES)}")
    if raw == "auto":
        return "bf16" if cpu_has_bf16() else "fp32"
    return raw
