"""What a run cost, read from its records: generated and prompt tokens, generation calls, sequences, seconds.

A cost is a property of the run, not of the process that last touched its folder: a finished run rerun and a
killed run resumed report the cost of one uninterrupted run. So every record a resumable run appends carries
its generation batch's figures (:func:`batch_call`), and :func:`total_cost` sums the records the results rest
on, never the generator's meter::

    "call": {"batch": 3, "calls": 2, "records": 8, "sequences": 16, "prompt_tokens": 1234, "seconds": 4.2}

Generated tokens are each record's own; calls count once per distinct ``batch``; sequences, prompt tokens and
seconds are each record's share of its batch. Records without these figures still load; the cost then says
``partial``. More: docs/generation-and-evaluation.md, "Evaluation".
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
