"""Several threads sharing one generator, their waiting calls sent to the backend as one.

Test-time-scaling methods work one problem at a time and make small calls (4 explorations, 4 executions).
On a batching engine such calls leave it mostly idle: measured on a 2-core CPU with vLLM, 5 problems x 6
(method, budget) runs took 6 min, about 10 s per run of ~700 tokens. Running problems in threads, each with
its own :class:`SharedHandle`, and merging every call that is waiting at the same moment into one backend
call keeps the engine's batch full without changing any method's code.

A merge happens when every worker still running is waiting in ``generate`` (workers that finished leave),
so no call waits for a worker that is busy grading. Each call keeps its own sampling settings and seeds:
a backend with ``generate_calls`` (vLLM) runs them in one engine call with per-prompt settings, giving each
prompt the seed it would have had alone; other backends run the merged calls one after the other.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from e2c.generation.base import DEFAULT_SAMPLING, Completion, Sampling, Usage


@dataclass(frozen=True)
class Call:
    """The arguments of one ``Generator.generate`` call."""

    prompts: tuple[str, ...]
    sampling: Sampling = DEFAULT_SAMPLING

    @classmethod
    def of(cls, prompts: Sequence[str], sampling: Sampling = DEFAULT_SAMPLING) -> Call:
        """The call of ``generate(prompts, sampling)``."""
        return cls(tuple(prompts), sampling)


CallResult = tuple[list[list[Completion]], int]  # completions, prompt tokens billed (once per sequence)


def run_calls(gen: Any, calls: Sequence[Call]) -> list[CallResult]:
    """Run ``calls`` on ``gen``: in one backend call when it has ``generate_calls``, else one by one."""
    if hasattr(gen, "generate_calls"):
        return gen.generate_calls(list(calls))
    out = []
    for c in calls:
        before = gen.usage.prompt_tokens
        outs = gen.generate(list(c.prompts), c.sampling)
        out.append((outs, gen.usage.prompt_tokens - before))
    return out


class _Slot:
    def __init__(self, call: Call) -> None:
        self.call = call
        self.result: CallResult | None = None
        self.error: BaseException | None = None


class SharedGenerator:
    """One generator shared by ``workers`` threads; each thread uses its own :meth:`handle`, and calls
    :meth:`leave` (or uses the handle as a context manager) when it has no more work."""

    def __init__(self, gen: Any, workers: int) -> None:
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        self.gen = gen
        self._cond = threading.Condition()
        self._waiting: list[_Slot] = []
        self._active = workers
        self.merged_calls = 0  # backend rounds, for tests and logs
        self.calls = 0

    def handle(self) -> SharedHandle:
        return SharedHandle(self)

    def submit(self, call: Call) -> CallResult:
        slot = _Slot(call)
        with self._cond:
            self._waiting.append(slot)
            self._flush_if_all_wait()
            while slot.result is None and slot.error is None:
                self._cond.wait()
        if slot.error is not None:
            raise slot.error
        assert slot.result is not None
        return slot.result

    def leave(self) -> None:
        with self._cond:
            self._active -= 1
            self._flush_if_all_wait()

    def _flush_if_all_wait(self) -> None:
        # Runs with the lock held: every other live worker is blocked in submit, so nothing is lost by it.
        if not self._waiting or len(self._waiting) < self._active:
            return
        batch, self._waiting = self._waiting, []
        self.merged_calls += 1
        self.calls += len(batch)
        try:
            results = run_calls(self.gen, [s.call for s in batch])
        except BaseException as e:  # every caller in the round sees the backend's error
            for s in batch:
                s.error = e
        else:
            for s, r in zip(batch, results, strict=True):
                s.result = r
        self._cond.notify_all()


class SharedHandle:
    """One worker's :class:`e2c.generation.base.Generator` view of a :class:`SharedGenerator`, with its own
    ``usage`` tally."""

    def __init__(self, shared: SharedGenerator) -> None:
        self.shared = shared
        self.name = shared.gen.name
        self.tokenizer = shared.gen.tokenizer
        self.max_context = getattr(shared.gen, "max_context", None)
        self.usage = Usage()
        self._left = False

    def generate(
        self, prompts: Sequence[str], sampling: Sampling = DEFAULT_SAMPLING
    ) -> list[list[Completion]]:
        outs, prompt_tokens = self.shared.submit(Call.of(prompts, sampling))
        self.usage.add([0] * len(outs), outs)
        self.usage.prompt_tokens += prompt_tokens
        return outs

    def leave(self) -> None:
        if not self._left:
            self._left = True
            self.shared.leave()

    def __enter__(self) -> SharedHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.leave()
