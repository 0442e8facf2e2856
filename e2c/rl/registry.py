"""Registrations of the E2C recipe in verl's registries (called from :mod:`e2c.rl.plugin`)."""

from __future__ import annotations


def register_all() -> list[str]:
    """Import the modules whose decorators register the E2C trainer and agent loop; returns their names."""
    from e2c.rl import agent_loop, reward, trainer

    return [
        f"trainer:{trainer.TRAINER_NAME}",
        f"agent_loop:{agent_loop.AGENT_LOOP_NAME}",
        f"reward_manager:{reward.REWARD_MANAGER_NAME}",
    ]
