"""verl 0.9.1 without an accelerator: a ``cpu`` platform and an ``hf`` rollout, added through verl's registries.

Nothing here is specific to E2C: it runs any verl PPO/GRPO recipe on a machine without CUDA (tests, CPU demos)
and on one device for debugging. The E2C recipe uses it through its verl plugin (:mod:`e2c.rl.plugin`), which
calls :func:`install_platform` and :func:`register_rollout` in every process. Modules: :mod:`.platform` (the
platform, the gloo fix, torch on every core), :mod:`.hf_rollout` (the rollout server), :mod:`.rollout_engine`
(its engines), :mod:`.hf_verl` (verl's replica and trainer adapter), :mod:`.attention` (``sdpa_varlen``).
The launcher's matching overrides are in ``configs/cpu/rl.yaml``.
More: docs/training.md, "On GPUs and on a CPU".
"""

from __future__ import annotations

import json
from pathlib import Path

from e2c.core.files import atomic_write_json


def install_platform() -> list[str]:
    """Register and select the ``cpu`` platform when no accelerator is present; returns the registry entries
    (none on a machine with CUDA, where verl's own platforms apply)."""
    from e2c.verl_cpu import platform  # start-up: SFT's export imports this package, not the platform

    return [f"platform:{platform.PLATFORM_NAME}"] if platform.install() else []


def register_rollout() -> list[str]:
    """Register the ``hf`` rollout (replica and trainer adapter) in verl's rollout registries."""
    from verl.workers.rollout import base as rollout_base
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    from e2c.verl_cpu.hf_rollout import ROLLOUT_NAME  # start-up, as in install_platform

    def load_hf_replica() -> type:
        from e2c.verl_cpu.hf_verl import HFReplica  # imports ray, torch and verl: only when verl builds it

        return HFReplica

    RolloutReplicaRegistry.register(ROLLOUT_NAME, load_hf_replica)
    # verl's table of rollout adapters (name, mode) -> class path; there is no register function for it.
    rollout_base._ROLLOUT_REGISTRY[(ROLLOUT_NAME, "async")] = "e2c.verl_cpu.hf_verl.HFServerAdapter"
    return [f"rollout:{ROLLOUT_NAME}"]


def plain_attention_config(folder: Path) -> bool:
    """Drop the training-only attention from the ``config.json`` of a saved model; True if it was there.

    verl writes the config it trained with, ``attn_implementation`` included, into every checkpoint's HF
    folder. transformers refuses a name missing from its registry, so a checkpoint that keeps
    :data:`e2c.verl_cpu.attention.NAME` loads only in a process that registered it; without the key a loader
    takes its own default. Other attentions (``flash_attention_2`` on a GPU) are left as verl wrote them.
    """
    from e2c.verl_cpu.attention import NAME  # imports torch and transformers

    path = Path(folder) / "config.json"
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(config, dict) or config.get("attn_implementation") != NAME:
        return False
    del config["attn_implementation"]
    atomic_write_json(path, config)
    return True


def register_attention() -> list[str]:
    """Register the ``sdpa_varlen`` attention in transformers' registries (:mod:`e2c.verl_cpu.attention`)."""
    from e2c.verl_cpu import attention  # imports torch and transformers

    return attention.register()
