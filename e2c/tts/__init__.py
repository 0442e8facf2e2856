"""Test-time scaling: ten search methods over one metered generator (see :mod:`e2c.tts.methods`)."""

from e2c.tts import methods as _methods  # noqa: F401  (registers the methods)
from e2c.tts.base import METHODS, Context, Meter, MethodResult, TTSSettings, run_method

__all__ = ["METHODS", "Context", "Meter", "MethodResult", "TTSSettings", "run_method"]
