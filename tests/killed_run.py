"""A kill, as the code under test sees it, for the tests of resumable runs (eval, TTS, the pass-rate
filter): an exception nothing catches, raised from a generator after a number of calls."""

from __future__ import annotations

from typing import Any


class Killed(KeyboardInterrupt):
    """What a kill looks like to the code under test: nothing after it runs."""


class DiesAfter:
    """A generator that makes ``calls`` calls through ``gen``, then is killed (its tally is ``gen``'s)."""

    def __init__(self, gen: Any, calls: int) -> None:
        self.gen, self.left = gen, calls
        self.name, self.tokenizer, self.usage = gen.name, gen.tokenizer, gen.usage

    def generate(self, prompts, sampling):
        if self.left <= 0:
            raise Killed
        self.left -= 1
        return self.gen.generate(prompts, sampling)
