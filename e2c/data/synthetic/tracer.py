"""Run reference programs under a line tracer, in a subprocess with time and memory limits.

Each program is Python source defining ``solve()``. The worker (``python -m e2c.data.synthetic.tracer``)
reads a JSON list of programs on stdin, sets its own address-space and CPU-time limits, and for each
program records, line by line, the local variables that the line changed, then the return value. It
writes one JSON list of results on stdout.

A program that runs too many line events or too long is stopped and reported with an ``error``; a
worker that dies (memory, CPU limit) is retried one program at a time in fresh workers so only the
offender is lost. The programs are the toolkit's own generated code, never model output; they still run
out of process with a restricted set of builtins.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

MAX_EVENTS = 5000
PROGRAM_SECONDS = 2.0
MEMORY_MB = 1024

_SAFE_BUILTINS = (
    "abs",
    "all",
    "any",
    "bool",
    "divmod",
    "enumerate",
    "int",
    "len",
    "list",
    "max",
    "min",
    "range",
    "reversed",
    "sorted",
    "str",
    "sum",
    "tuple",
    "zip",
    "set",
    "dict",
    "ValueError",
)


@dataclass
class TraceResult:
    """What one program did: line events ``(lineno, changes)``, its return value, or an error."""

    events: list[tuple[int, dict[str, Any]]]
    value: Any = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class _Abort(Exception):
    pass


def _jsonable(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, (bool, int, str)) or v is None:
        return v
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    return repr(v)


def trace_program(
    source: str, max_events: int = MAX_EVENTS, seconds: float = PROGRAM_SECONDS
) -> dict[str, Any]:
    """Run ``solve()`` from ``source`` under ``sys.settrace`` (in the current process: the worker's job).

    Returns ``{"events": [[lineno, {name: value}], ...], "value": ..., "error": None | str}``: each event
    is a line of ``solve`` and the locals it changed (assigned after the line ran).
    """
    import builtins

    safe = {name: getattr(builtins, name) for name in _SAFE_BUILTINS}
    namespace: dict[str, Any] = {"__builtins__": safe}
    events: list[list[Any]] = []
    state: dict[str, Any] = {}
    pending: list[int | None] = [None]
    deadline = time.monotonic() + seconds

    def flush(frame_locals: dict[str, Any]) -> None:
        line = pending[0]
        if line is None:
            return
        changes = {k: copy.deepcopy(v) for k, v in frame_locals.items() if k not in state or state[k] != v}
        state.update(changes)
        events.append([line, {k: _jsonable(v) for k, v in changes.items()}])

    def local_trace(frame: Any, event: str, arg: Any) -> Any:
        if event in ("line", "return"):
            flush(frame.f_locals)
            pending[0] = frame.f_lineno if event == "line" else None
            if len(events) > max_events:
                raise _Abort(f"more than {max_events} line events")
            if time.monotonic() > deadline:
                raise _Abort(f"ran longer than {seconds} s")
        return local_trace

    def global_trace(frame: Any, event: str, arg: Any) -> Any:
        if event == "call" and frame.f_code.co_name == "solve":
            return local_trace
        return None

    try:
        exec(compile(source, "<program>", "exec"), namespace)
        solve = namespace["solve"]
        sys.settrace(global_trace)
        try:
            value = solve()
        finally:
            sys.settrace(None)
    except _Abort as e:
        return {"events": events, "value": None, "error": str(e)}
    except Exception as e:
        return {"events": events, "value": None, "error": f"{type(e).__name__}: {e}"}
    return {"events": events, "value": _jsonable(value), "error": None}


def _limit_resources(memory_mb: int, cpu_seconds: int) -> None:
    try:
        import resource

        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    except (ImportError, ValueError, OSError):  # not on this platform: the wall-clock bound still holds
        pass


def _worker_main() -> None:
    spec = json.loads(sys.stdin.read())
    _limit_resources(int(spec["memory_mb"]), int(spec["cpu_seconds"]))
    out = [trace_program(src, int(spec["max_events"]), float(spec["seconds"])) for src in spec["programs"]]
    sys.stdout.write(json.dumps(out))


def _run_worker(
    programs: Sequence[str], max_events: int, seconds: float, memory_mb: int
) -> list[dict] | None:
    budget = seconds * len(programs) + 10
    payload = json.dumps(
        {
            "programs": list(programs),
            "max_events": max_events,
            "seconds": seconds,
            "memory_mb": memory_mb,
            "cpu_seconds": int(budget) + 1,
        }
    )
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "e2c.data.synthetic.tracer"],
            input=payload,
            capture_output=True,
            text=True,
            timeout=budget,
        )
    except subprocess.TimeoutExpired:
        return None
    if proc.returncode != 0:
        return None
    try:
        out = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return None
    return out if isinstance(out, list) and len(out) == len(programs) else None


def run_traced(
    programs: Sequence[str],
    max_events: int = MAX_EVENTS,
    seconds: float = PROGRAM_SECONDS,
    memory_mb: int = MEMORY_MB,
) -> list[TraceResult]:
    """Trace a batch of programs in one limited worker; on a worker failure, retry one by one."""
    if not programs:
        return []
    raw = _run_worker(programs, max_events, seconds, memory_mb)
    if raw is None:
        raw = []
        for src in programs:
            one = _run_worker([src], max_events, seconds, memory_mb)
            raw.append(
                one[0]
                if one
                else {"events": [], "value": None, "error": "worker died (time or memory limit)"}
            )
    return [TraceResult([(int(ln), ch) for ln, ch in r["events"]], r["value"], r["error"]) for r in raw]


if __name__ == "__main__":
    _worker_main()
