"""The batch arithmetic verl asserts only inside its workers, checked at a cluster's shape before anything
starts: the SFT and RL launchers call it at their run's ranks and nodes, and the GPU recipe's check
(:mod:`e2c.recipe_check`) at the recipe's. A split that cannot work is one :class:`~e2c.core.errors.UserError`
line naming the setting, the numbers and values that would work.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from e2c.core.errors import UserError

ALGO_NAMES = {"grpo": "GRPO", "dapo": "DAPO"}


@dataclass(frozen=True)
class Cluster:
    """``nnodes`` nodes of ``gpus_per_node`` GPUs."""

    gpus_per_node: int
    nnodes: int

    @property
    def world(self) -> int:
        return self.gpus_per_node * self.nnodes

    def __str__(self) -> str:
        return f"{self.nnodes}x{self.gpus_per_node} GPUs"


@dataclass(frozen=True)
class SftShape:
    """What one SFT step is, read from the composed config."""

    batch: int
    max_length: int
    epochs: int
    total_steps: int | None
    dp: int


@dataclass(frozen=True)
class RlShape:
    """What one RL step is, read from the composed config."""

    batch: int
    n: int
    prompt_length: int
    response_length: int
    epochs: int
    total_steps: int | None
    ppo_epochs: int
    reference: bool
    dp: int
    padded: int  # samples per step after verl pads the batch with no-op samples (== batch * n when none)


def divisors(n: int) -> list[int]:
    """The positive divisors of ``n``, ascending.

    >>> divisors(12)
    [1, 2, 3, 4, 6, 12]
    """
    return [d for d in range(1, n + 1) if n % d == 0]


def or_list(values: Sequence[int]) -> str:
    """``1, 2 or 4``.

    >>> or_list([1, 2, 4]), or_list([8])
    ('1, 2 or 4', '8')
    """
    items = [str(v) for v in values]
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


def world_fix(total: int, cluster: Cluster, unit: int = 1) -> str:
    """How to pick a cluster whose data-parallel size (the world divided by ``unit``, e.g. the Ulysses size)
    divides ``total``: other node counts at this many GPUs per node, else other GPU counts per node.

    >>> world_fix(1024, Cluster(8, 3))
    'use NNODES=1, 2, 4 or 8 at 8 GPUs per node'
    >>> world_fix(160, Cluster(7, 1))
    'use N_GPUS=8, 5, 4 or 2 on 1 node(s)'
    """

    def fits(world: int) -> bool:
        return world % unit == 0 and total % (world // unit) == 0

    nodes = [k for k in range(1, 65) if fits(k * cluster.gpus_per_node)][:4]
    if nodes:
        return f"use NNODES={or_list(nodes)} at {cluster.gpus_per_node} GPUs per node"
    per_node = [g for g in range(8, 0, -1) if fits(g * cluster.nnodes)][:4]
    if per_node:
        return f"use N_GPUS={or_list(per_node)} on {cluster.nnodes} node(s)"
    return f"use a world size that divides {total}"


def cfg_value(cfg: Any, key: str) -> Any:
    from omegaconf import OmegaConf

    return OmegaConf.select(cfg, key, default=None)


def cfg_int(cfg: Any, key: str, default: int | None = None) -> int | None:
    value = cfg_value(cfg, key)
    return default if value is None else int(value)


def check_sft(cfg: Any, label: str, cluster: Cluster) -> SftShape:
    """The batch arithmetic of verl's SFT trainer (``verl.trainer.sft_trainer``) on ``cfg``, a config
    :func:`e2c.launch.checks.compose_checked` returned (every size and count a whole number >= 1, checked
    there); raises UserError naming the setting."""
    world = int(cfg.trainer.n_gpus_per_node) * int(cfg.trainer.nnodes)
    sp = cfg_int(cfg, "engine.ulysses_sequence_parallel_size", 1) or 1
    if world % sp:
        raise UserError(
            f"{label}: engine.ulysses_sequence_parallel_size={sp} does not divide the {world} GPUs; "
            f"set it to one of {or_list([d for d in divisors(world) if d <= 8])}"
        )
    _check_fsdp_size(cfg, "engine.fsdp_size", label, world)
    dp = world // sp
    batch = int(cfg.data.train_batch_size)
    if batch % dp:
        per = batch // dp
        fit = -(-batch // dp) * dp
        raise UserError(
            f"{label}: data.train_batch_size={batch} does not split over {dp} data-parallel ranks (verl's SFT "
            f"trainer would train {per} rows per rank = {per * dp} a step, not {batch}); "
            f"{world_fix(batch, cluster, sp)} or set data.train_batch_size to a multiple of {dp}, e.g. {fit}"
        )
    max_length = int(cfg.data.max_length)
    if bool(cfg.data.use_dynamic_bsz):
        cap = int(cfg.data.max_token_len_per_gpu) * sp
        if cap < max_length:
            raise UserError(
                f"{label}: data.max_token_len_per_gpu={cfg.data.max_token_len_per_gpu} x Ulysses {sp} = {cap} "
                f"tokens is below data.max_length={max_length} (verl asserts one whole row fits a micro-batch); "
                f"set data.max_token_len_per_gpu to at least {-(-max_length // sp)}"
            )
    else:
        micro = int(cfg.data.micro_batch_size_per_gpu)
        per = batch // dp
        if micro < 1 or per % micro:
            ok = [d for d in divisors(per) if d <= max(micro, 1)][-1]
            raise UserError(
                f"{label}: data.micro_batch_size_per_gpu={micro} does not divide the {per} rows each rank gets a "
                f"step ({batch} / {dp} ranks; verl's engine asserts it); set it to a divisor of {per}, e.g. {ok}"
            )
    return SftShape(
        batch=batch,
        max_length=max_length,
        epochs=int(cfg.trainer.total_epochs),
        total_steps=cfg_int(cfg, "trainer.total_training_steps"),
        dp=dp,
    )


def _check_fsdp_size(cfg: Any, key: str, label: str, world: int) -> None:
    """An FSDP group size between 1 and the world must divide it (``init_device_mesh``'s 2-D mesh)."""
    size = cfg_int(cfg, key, -1)
    if size is not None and 0 < size < world and world % size:
        raise UserError(
            f"{label}: {key}={size} does not divide the {world} GPUs; set it to -1 (all of them) or one of "
            f"{or_list(divisors(world)[:-1][-4:] or [1])}"
        )


def longest_sequence(cfg: Any) -> int:
    """Prompt plus response tokens of the longest RL sequence (the e2c agent loop's prompt room included)."""
    prompt = max(
        int(cfg.data.max_prompt_length), cfg_int(cfg, "actor_rollout_ref.rollout.prompt_length", 0) or 0
    )
    response = max(
        int(cfg.data.max_response_length), cfg_int(cfg, "actor_rollout_ref.rollout.response_length", 0) or 0
    )
    return prompt + response


def check_rollout_world(cfg: Any, label: str, world: int, gpus_per_node: int) -> None:
    """vLLM runs one replica per ``tp x dp x pp`` GPUs: that must divide the world
    (``verl.workers.engine_workers`` asserts it) and, across nodes, split into whole nodes
    (``verl.workers.rollout.replica``)."""
    r = cfg.actor_rollout_ref.rollout
    tp = int(r.tensor_model_parallel_size)
    dp = int(r.get("data_parallel_size", 1) or 1)
    pp = int(r.get("pipeline_model_parallel_size", 1) or 1)
    size = tp * dp * pp
    what = "actor_rollout_ref.rollout.tensor_model_parallel_size"
    shown = f"{what}={tp}"
    if dp > 1 or pp > 1:
        shown += f" x data_parallel_size={dp} x pipeline_model_parallel_size={pp}"
    if size < 1 or world % size:
        ok = [d for d in divisors(world) if d <= gpus_per_node]
        raise UserError(
            f"{label}: {shown} ({size} GPUs per vLLM replica) does not divide the {world} GPUs (verl builds "
            f"one replica per {size} GPUs and asserts they fill the world); set {what} to {or_list(ok)}"
        )
    if size % min(gpus_per_node, size):
        raise UserError(
            f"{label}: {shown} ({size} GPUs per vLLM replica) spans nodes of {gpus_per_node} GPUs unevenly "
            f"(verl asserts a replica fills whole nodes); use a multiple of {gpus_per_node} or a divisor of it"
        )


def padded_samples(samples: int, dp: int, mini_samples: int) -> int:
    """A step's samples after verl pads them with no-op ones to a multiple of lcm(data-parallel ranks,
    mini-batch samples): what the log-prob passes split over the ranks.

    >>> padded_samples(16, 4, 16), padded_samples(1024, 24, 1024)
    (16, 3072)
    """
    multiple = math.lcm(dp, mini_samples)
    return -(-samples // multiple) * multiple


def check_rl(cfg: Any, label: str, cluster: Cluster) -> RlShape:
    """The batch arithmetic verl's RL workers assert at run time, on ``cfg``, a config
    :func:`e2c.launch.checks.compose_checked` returned (every size and count a whole number >= 1, checked
    there); raises UserError naming the setting."""
    world = int(cfg.trainer.n_gpus_per_node) * int(cfg.trainer.nnodes)
    gpus_per_node = int(cfg.trainer.n_gpus_per_node)
    actor = cfg.actor_rollout_ref.actor
    rollout = cfg.actor_rollout_ref.rollout
    check_rollout_world(cfg, label, world, gpus_per_node)
    sp = cfg_int(cfg, "actor_rollout_ref.actor.ulysses_sequence_parallel_size", 1) or 1
    sp = max(sp, cfg_int(cfg, "actor_rollout_ref.actor.fsdp_config.ulysses_sequence_parallel_size", 1) or 1)
    if world % sp:
        raise UserError(
            f"{label}: actor_rollout_ref.actor.ulysses_sequence_parallel_size={sp} does not divide the {world} "
            f"GPUs; set it to one of {or_list([d for d in divisors(world) if d <= 8])}"
        )
    _check_fsdp_size(cfg, "actor_rollout_ref.actor.fsdp_config.fsdp_size", label, world)
    dp = world // sp
    n = int(rollout.n)
    batch = int(cfg.data.train_batch_size)
    mini = int(actor.ppo_mini_batch_size)
    mini_samples = mini * n
    if mini_samples % dp:
        need = dp // math.gcd(n, dp)
        raise UserError(
            f"{label}: actor_rollout_ref.actor.ppo_mini_batch_size={mini} x rollout.n={n} = {mini_samples} "
            f"samples do not split over {dp} data-parallel ranks (verl's worker asserts it); "
            f"{world_fix(mini_samples, cluster, sp)} or set actor_rollout_ref.actor.ppo_mini_batch_size to a "
            f"multiple of {need}"
        )
    sync = int(cfg_value(cfg, "trainer.v1.sync.parameter_sync_step") or 1)
    if batch % sync:
        raise UserError(
            f"{label}: data.train_batch_size={batch} is not a multiple of trainer.v1.sync.parameter_sync_step="
            f"{sync} (verl's trainer asserts it); set data.train_batch_size to a multiple of {sync}"
        )
    padded = padded_samples(batch * n, dp, mini_samples)
    dynamic = bool(actor.use_dynamic_bsz)
    if dynamic != bool(rollout.log_prob_use_dynamic_bsz):
        raise UserError(
            f"{label}: actor_rollout_ref.actor.use_dynamic_bsz={dynamic} but "
            f"actor_rollout_ref.rollout.log_prob_use_dynamic_bsz={bool(rollout.log_prob_use_dynamic_bsz)} "
            "(verl's worker asserts they are equal); set both the same"
        )
    if dynamic:
        longest = longest_sequence(cfg)
        for key in (
            "actor_rollout_ref.actor.ppo_max_token_len_per_gpu",
            "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu",
            "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu",
        ):
            cap = cfg_int(cfg, key)
            if cap is not None and cap * sp < longest:
                raise UserError(
                    f"{label}: {key}={cap} x Ulysses {sp} = {cap * sp} tokens is below the longest sequence, "
                    f"{longest} tokens (prompt + response; verl asserts one sequence fits a micro-batch); set "
                    f"it to at least {-(-longest // sp)}"
                )
    else:
        per_rank = mini_samples // dp
        for key, micro, per, what in (
            (
                "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
                cfg_int(cfg, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"),
                per_rank,
                f"each rank's share of a mini-batch ({mini_samples} / {dp})",
            ),
            (
                "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
                cfg_int(cfg, "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu"),
                padded // dp,
                f"each rank's share of a step ({padded} / {dp})",
            ),
        ):
            if micro is not None and (micro < 1 or per % micro):
                ok = [d for d in divisors(per) if d <= max(micro, 1)][-1]
                raise UserError(
                    f"{label}: {key}={micro} does not divide the {per} samples of {what} (verl's engine "
                    f"asserts it); set it to a divisor of {per}, e.g. {ok}"
                )
    reference = bool(cfg_value(cfg, "algorithm.use_kl_in_reward")) or bool(actor.use_kl_loss)
    return RlShape(
        batch=batch,
        n=n,
        prompt_length=int(cfg.data.max_prompt_length),
        response_length=int(cfg.data.max_response_length),
        epochs=int(cfg.trainer.total_epochs),
        total_steps=cfg_int(cfg, "trainer.total_training_steps"),
        ppo_epochs=int(actor.ppo_epochs),
        reference=reference,
        dp=dp,
        padded=padded,
    )


def stage_label(key: str, algo: str, cluster: Cluster) -> str:
    """``GRPO stage 1 at 3x8 GPUs``."""
    name = {"sft": "SFT", "rl1": f"{ALGO_NAMES[algo]} stage 1", "rl2": f"{ALGO_NAMES[algo]} stage 2"}[key]
    return f"{name} at {cluster}"
