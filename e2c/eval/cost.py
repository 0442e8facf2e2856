"""What a run cost, read from its records: generated and prompt tokens, generation calls, sequences, seconds.

Tokens are the currency of a test-time-scaling claim, so a cost is a property of the run, not of the process
that last touched its folder: a finished run rerun (which generates nothing) and a killed run resumed (which
generates only what was missing) report the same cost as one uninterrupted run. Every record a resumable
run appends therefore carries what its generation cost, and the totals are summed from the records the
results rest on, never read off the generator's meter (:class:`~e2c.generation.base.Usage`) of the process
that wrote the results.

Records are written by generation **batches**: evaluation's chunk of problems (its resume unit,
:func:`e2c.eval.runner.chunk_problems`) and the pass-rate filter's batch of prompts. A batch is one
generation call per phase for many records at once, so a record cannot own a call; each record carries its
batch's figures instead, under ``"call"`` (:func:`batch_call`)::

    "call": {"batch": 3, "calls": 2, "records": 8, "sequences": 16, "prompt_tokens": 1234, "seconds": 4.2}

- ``batch``: the batch's id, fixed by the data order, so a batch sampled again after a kill has the same id
  (the filter, whose batch size may change between launches, adds ``batch_size`` to it);
- ``calls``: the ``generate`` calls the batch made (1; 2 for two-phase chains: explore, then execute);
- ``records``: the records the batch wrote (eval: its samples; the filter: its prompts);
- ``sequences``, ``prompt_tokens``, ``seconds``: what those calls generated, billed (prompt tokens once per
  sequence, as :class:`~e2c.generation.base.Usage` counts them; None when the generator keeps no tally) and
  took (wall seconds of the generation calls; grading is not in them).

:func:`total_cost` sums them: generated tokens are each record's own, exactly; **calls** are counted once per
distinct batch among the records (a batch sampled again after a kill counts once, as in one uninterrupted
run), and sequences, prompt tokens and seconds are each record's share of its batch (the batch's figure /
``records``), summed. Tokens, calls and sequences therefore equal an uninterrupted run's exactly, and so do
prompt tokens whenever each batch's records came from one call (always for eval, which samples a cut chunk
again whole); seconds are the seconds recorded: the generation a kill threw away is in none of them.

Records written before these figures existed still load: what they can tell (their tokens; a caller may
derive the rest, e.g. eval's batch from the data order) is counted, and the cost says it is ``partial``,
naming the figures that leave records out.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

# The figures of a cost, in the order results files show them.
FIGURES = ("records", "generated_tokens", "calls", "sequences", "prompt_tokens", "seconds")
# Figures read from each record's batch share (the rest are counted).
SHARED = ("sequences", "prompt_tokens", "seconds")


def batch_call(
    batch: int,
    calls: int,
    records: int,
    sequences: int,
    prompt_tokens: int | None,
    seconds: float,
    **key: Any,
) -> dict[str, Any]:
    """The ``"call"`` figures every record of one generation batch carries (see the module docstring);
    ``key`` adds what else names the batch (the filter's ``batch_size``).

    >>> batch_call(3, 2, 8, 16, 1234, 4.21234)
    {'batch': 3, 'calls': 2, 'records': 8, 'sequences': 16, 'prompt_tokens': 1234, 'seconds': 4.2123}
    """
    return {
        "batch": batch,
        **key,
        "calls": int(calls),
        "records": int(records),
        "sequences": int(sequences),
        "prompt_tokens": None if prompt_tokens is None else int(prompt_tokens),
        "seconds": round(float(seconds), 4),
    }


def usage_mark(gen: Any) -> tuple[int, int, int] | None:
    """``(calls, sequences, prompt tokens)`` of ``gen``'s tally now (None: it keeps none), to take the
    difference across a batch's calls (:func:`usage_since`)."""
    usage = getattr(gen, "usage", None)
    try:
        return int(usage.calls), int(usage.sequences), int(usage.prompt_tokens)
    except (AttributeError, TypeError, ValueError):
        return None


def usage_since(gen: Any, mark: tuple[int, int, int] | None) -> tuple[int, int, int] | None:
    """What ``gen``'s tally grew by since ``mark`` (:func:`usage_mark`): (calls, sequences, prompt tokens)."""
    now = usage_mark(gen)
    if now is None or mark is None:
        return None
    return now[0] - mark[0], now[1] - mark[1], now[2] - mark[2]


def _batch_key(call: Mapping[str, Any]) -> tuple[Any, ...] | None:
    """What tells two records' batches apart: their ``batch`` and any other key (``batch_size``)."""
    if "batch" not in call:
        return None
    extra = tuple(sorted((k, v) for k, v in call.items() if k not in (*FIGURES, "batch")))
    return (str(call["batch"]), *extra)


def total_cost(
    records: Iterable[Mapping[str, Any]],
    tokens: Callable[[Mapping[str, Any]], int],
    derive: Callable[[Mapping[str, Any]], Mapping[str, Any] | None] | None = None,
) -> dict[str, Any]:
    """The cost of ``records`` (see the module docstring): ``records``, ``generated_tokens`` (``tokens`` of
    each), ``calls``, ``sequences``, ``prompt_tokens`` and ``seconds``.

    A record without a ``"call"`` (written before records carried one) is given ``derive(record)``'s
    figures when a caller can derive some (its batch and calls from the data order, its sequences from its
    samples); any figure that some record cannot give is summed over the others, named in ``partial``, and
    ``unmetered_records`` counts the records without a ``"call"``.

    >>> call = batch_call(0, 1, 2, 4, 30, 1.0)
    >>> total_cost([{"n": 5, "call": call}, {"n": 7, "call": call}], lambda r: r["n"])
    {'records': 2, 'generated_tokens': 12, 'calls': 1, 'sequences': 4, 'prompt_tokens': 30, 'seconds': 1.0}
    >>> total_cost([{"n": 5, "call": call}, {"n": 3}], lambda r: r["n"])["partial"]
    ['calls', 'prompt_tokens', 'seconds', 'sequences']
    """
    n = generated = unmetered = 0
    batches: dict[tuple[Any, ...], int] = {}
    shares: dict[str, list[float]] = {f: [] for f in SHARED}
    missing: set[str] = set()
    for rec in records:
        n += 1
        generated += int(tokens(rec))
        call = rec.get("call")
        if not isinstance(call, Mapping):
            unmetered += 1
            call = (derive(rec) if derive is not None else None) or {}
        key = _batch_key(call)
        if key is None or call.get("calls") is None:
            missing.add("calls")
        else:
            batches[key] = int(call["calls"])
        per = call.get("records") or 1
        for fig in SHARED:
            value = call.get(fig)
            if value is None:
                missing.add(fig)
            else:
                shares[fig].append(float(value) / per)
    out: dict[str, Any] = {
        "records": n,
        "generated_tokens": generated,
        "calls": sum(batches.values()),
        "sequences": round(math.fsum(shares["sequences"])),
        "prompt_tokens": round(math.fsum(shares["prompt_tokens"])),
        "seconds": round(math.fsum(shares["seconds"]), 3),
    }
    return _with_partial(out, missing, unmetered)


def _with_partial(out: dict[str, Any], missing: set[str], unmetered: int) -> dict[str, Any]:
    if missing:
        out["partial"] = sorted(missing)
    if unmetered:
        out["unmetered_records"] = unmetered
    return out


def add_costs(costs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The sum of several costs (e.g. an evaluation's datasets, whose batches are their own).

    >>> add_costs([{"records": 1, "calls": 1, "seconds": 0.25}, {"records": 2, "calls": 2, "seconds": 0.5,
    ...            "partial": ["seconds"], "unmetered_records": 1}])
    {'records': 3, 'generated_tokens': 0, 'calls': 3, 'sequences': 0, 'prompt_tokens': 0, 'seconds': 0.75, 'partial': ['seconds'], 'unmetered_records': 1}
    """
    out: dict[str, Any] = {f: sum(int(c.get(f, 0)) for c in costs) for f in FIGURES if f != "seconds"}
    out["seconds"] = round(math.fsum(float(c.get("seconds", 0.0)) for c in costs), 3)
    missing = {f for c in costs for f in c.get("partial", ())}
    return _with_partial(out, missing, sum(int(c.get("unmetered_records", 0)) for c in costs))
