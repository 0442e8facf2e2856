"""The process's on/off environment switches (``E2C_DEBUG``, ``E2C_VERBOSE``, ``E2C_MEMORY_CHECK``,
``HF_HUB_OFFLINE``, ...), read by one function so that every switch takes the same words. It imports
nothing of the toolkit: anything may read a switch."""

from __future__ import annotations

import os
from collections.abc import Mapping

SWITCH_ON = ("1", "true", "yes", "on")
SWITCH_OFF = ("0", "false", "no", "off")


def env_switch(name: str, env: Mapping[str, str] | None = None) -> bool | None:
    """An on/off environment variable (``E2C_DEBUG=1``, ``E2C_MEMORY_CHECK=off``): True for 1, true, yes or
    on, False for 0, false, no or off (any case, spaces around), None when unset or anything else. Every
    switch the toolkit reads goes through here, so they all take the same words.

    >>> env_switch("X", {"X": " Yes "}), env_switch("X", {"X": "off"}), env_switch("X", {}), env_switch("X", {"X": "2"})
    (True, False, None, None)
    """
    value = (os.environ if env is None else env).get(name, "").strip().lower()
    return True if value in SWITCH_ON else False if value in SWITCH_OFF else None
