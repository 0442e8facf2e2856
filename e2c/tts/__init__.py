"""Test-time scaling: ten search methods over one metered generator (see :mod:`e2c.tts.methods`).

A method registers with its traits (:func:`register`, :class:`MethodTraits`); ``python -m e2c.tts`` runs
them over a benchmark and budgets (:mod:`e2c.tts.cli`).
"""

from e2c.tts import methods as _methods  # noqa: F401  (registers the methods)
from e2c.tts.base import (
    METHODS,
    Context,
    Meter,
    MethodResult,
    MethodTraits,
    TTSSettings,
    methods_with,
    register,
    run_method,
    traits,
)

__all__ = [
    "METHODS",
    "Context",
    "Meter",
    "MethodResult",
    "MethodTraits",
    "TTSSettings",
    "methods_with",
    "register",
    "run_method",
    "traits",
]
