"""Registrations of the E2C recipe in verl's registries (called from :mod:`e2c.rl.plugin`)."""

from __future__ import annotations


def register_all() -> list[str]:
    """Register trainer, advantage estimator and agent loop; returns their names."""
    return []
