"""verl plugin entry point (``[project.entry-points."verl.plugins"] e2c = "e2c.rl.plugin"``).

verl imports every ``verl.plugins`` entry point at the end of ``import verl``, in the driver and in every ray
worker, and swallows import errors at debug level. This module therefore registers everything the E2C
recipe adds, records what it registered in :data:`REGISTERED`, and keeps the error (if any) in
:data:`ERROR` so that ``python -m e2c.rl.check`` and the tests can assert registration inside workers.

Registered:
- CPU only (no CUDA device): the ``cpu`` platform and the gloo fix (:mod:`e2c.rl.cpu`).
- Always: the ``hf`` rollout (replica + server adapter), the E2C advantage estimator and trainer, the E2C
  agent loop (prefilled exploration opener, optional elastic per-phase budgets).
"""

from __future__ import annotations

import logging

REGISTERED: list[str] = []
ERROR: str | None = None


def register() -> list[str]:
    """Do every registration once; returns the names registered (idempotent)."""
    if REGISTERED:
        return REGISTERED
    from e2c.rl import cpu

    if cpu.install():
        REGISTERED.append("platform:cpu")

    from verl.workers.rollout import base as rollout_base
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    from e2c.rl.hf_rollout import ROLLOUT_NAME

    def load_hf_replica() -> type:
        from e2c.rl.hf_verl import HFReplica

        return HFReplica

    RolloutReplicaRegistry.register(ROLLOUT_NAME, load_hf_replica)
    # verl's table of rollout adapters (name, mode) -> class path; there is no register function for it.
    rollout_base._ROLLOUT_REGISTRY[(ROLLOUT_NAME, "async")] = "e2c.rl.hf_verl.HFServerAdapter"
    REGISTERED.append(f"rollout:{ROLLOUT_NAME}")

    from e2c.rl import registry

    REGISTERED.extend(registry.register_all())
    return REGISTERED


try:
    register()
except Exception as e:  # verl would hide this at debug level: keep it visible
    ERROR = f"{type(e).__name__}: {e}"
    logging.getLogger("e2c").warning("e2c verl plugin failed to register: %s", ERROR)
