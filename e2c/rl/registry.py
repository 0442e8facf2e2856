"""Registrations of the E2C recipe in verl's registries (called from :mod:`e2c.rl.plugin`).

The trainer, agent loop and reward manager register themselves with verl's decorators when their modules
(the *providers*) are imported. Each provider imports verl, and ``import verl`` loads the plugin, so the plugin
can run while a provider is only half imported (``import e2c.rl.reward`` first: reward.py stops at its verl
import, verl loads the plugin, the plugin would import reward.py again and find it empty). So a provider's last
statement is :func:`provided`: until then the plugin leaves the providers alone, and :func:`provided` resumes a
registration the plugin had to defer.

This module imports nothing at import time: every provider imports it.
"""

from __future__ import annotations

import importlib
import sys

# In registration order; each ends with ``registry.provided(__name__, "<kind>:<name>")``.
PROVIDERS = ("e2c.rl.trainer", "e2c.rl.agent_loop", "e2c.rl.reward")

_COMPLETE: dict[str, str] = {}  # provider module -> its registry entry, once the module is complete


def provided(module: str, entry: str) -> None:
    """Mark ``module`` complete (its registrations ran) and resume a plugin registration deferred for it.

    Resuming only happens when the plugin is loaded (verl loads it unless ``VERL_USE_EXTERNAL_PLUGINS`` says
    otherwise): importing a provider never turns the plugin on by itself.
    """
    _COMPLETE[module] = entry
    plugin = sys.modules.get("e2c.rl.plugin")
    register = getattr(plugin, "register", None)
    if register is not None:
        register()


def importing() -> list[str]:
    """Providers that are being imported right now (in ``sys.modules`` but not complete)."""
    return [m for m in PROVIDERS if m in sys.modules and m not in _COMPLETE]


def register_all() -> list[str] | None:
    """Import the providers (their decorators register them in verl); returns their entries, e.g.
    ``"trainer:e2c_sync"``, or None while one of them is half imported (see the module docstring)."""
    if importing():
        return None
    for module in PROVIDERS:
        importlib.import_module(module)
    return [_COMPLETE[m] for m in PROVIDERS]
