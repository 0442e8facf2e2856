"""verl plugin entry point (``[project.entry-points."verl.plugins"] e2c = "e2c.rl.plugin"``).

verl imports every ``verl.plugins`` entry point at the end of ``import verl``, in the driver and every ray
worker, and swallows import errors at debug level. So this module registers everything the recipe adds
(``platform:cpu`` only without CUDA, ``rollout:hf``, ``attention:sdpa_varlen``, ``trainer:e2c_sync``,
``agent_loop:e2c``, ``reward_manager:e2c``), records what it registered in :data:`REGISTERED`, keeps the last
failure in :data:`ERROR` (logged as a WARNING), and offers :func:`require` for code that must not go on
without it. Import order does not matter, and :func:`register` may be called any number of times: finished
steps are skipped, a failed one is tried again. ``python -m e2c.rl.plugin`` checks an install in one line.
More: docs/training.md, "RL on verl: GRPO, DAPO, the e3 curriculum".
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable

from e2c import verl_cpu
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.parsing import ArgumentParser
from e2c.rl import registry

logger = logging.getLogger(__name__)

REGISTERED: list[str] = []  # what is registered so far, e.g. "rollout:hf", "trainer:e2c_sync"
ERROR: str | None = None  # the last attempt's failures; None when it had none

_done: set[str] = set()  # finished steps
_busy = False  # register() is running (a provider finishing inside it calls it again)


def _recipe() -> list[str] | None:

    return registry.register_all()


# Step name -> function returning the entries it registered, or None when it has to wait (see the docstring).
STEPS: dict[str, Callable[[], list[str] | None]] = {
    "platform": verl_cpu.install_platform,
    "rollout": verl_cpu.register_rollout,
    "attention": verl_cpu.register_attention,
    "recipe": _recipe,
}


def pending() -> list[str]:
    """Steps not done yet (failed, waiting for a half-imported module, or never run)."""
    return [name for name in STEPS if name not in _done]


def register() -> list[str]:
    """Run every registration step that is not done yet; returns :data:`REGISTERED`.

    Safe to call at any time and any number of times: a finished step is skipped, a failed one is tried again
    (its error goes to :data:`ERROR` and a WARNING), a waiting one runs when its module completes.
    """
    global ERROR, _busy
    if _busy or not pending():
        return REGISTERED
    _busy = True
    errors = []
    try:
        for name in pending():
            try:
                entries = STEPS[name]()
            except Exception as e:  # verl would hide this at debug level: keep it visible
                errors.append(f"{name}: {type(e).__name__}: {e}")
                continue
            if entries is None:  # a provider is half imported; its last line calls register() again
                continue
            REGISTERED.extend(entries)
            _done.add(name)
    finally:
        _busy = False
    ERROR = "; ".join(errors) or None
    if ERROR:
        logger.warning("e2c verl plugin failed to register (register() tries again): %s", ERROR)
    return REGISTERED


def require() -> list[str]:
    """:func:`register`, then raise ``RuntimeError`` naming what is missing and why; returns
    :data:`REGISTERED`. For entry points and tests that must not go on without the E2C registrations."""
    register()
    missing = pending()
    if missing:
        why = ERROR or "still being imported (a provider module did not finish its import)"
        raise RuntimeError(f"e2c verl plugin: {', '.join(missing)} not registered: {why}")
    return REGISTERED


def build_parser() -> argparse.ArgumentParser:
    """``python -m e2c.rl.plugin``: no flags, only ``--help``."""
    return ArgumentParser(
        prog="python -m e2c.rl.plugin",
        description="Check this machine's install: import verl (which loads its plugins, this one among "
        "them, as every trainer process does) and say what the E2C plugin registered.",
    )


def main(argv: list[str] | None = None) -> int:
    """Load verl (and with it this plugin, as every process does) and say what is registered; one line and
    exit status 1 when something is not (a broken install, not a bad input)."""
    import sys

    build_parser().parse_args(argv)
    checks_done()
    import verl  # noqa: F401  (loads the verl.plugins entry points)

    import e2c.rl.plugin as plugin  # the instance verl loaded, not this __main__ copy

    try:
        names = plugin.require()
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print("e2c verl plugin registered: " + ", ".join(names))
    return 0


if __name__ == "__main__":
    run_main(main)
else:  # imported, by verl's entry points or directly: register now
    register()
