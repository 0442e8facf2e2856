"""Judge a program against a problem's tests in the sandbox: the check of the ``code`` answer kind.

:func:`judge` runs the program the way the tests' mode says (:mod:`e2c.rewards.code_tests`) and compares
the outputs here, in the caller:

- ``stdin``: one run per test, the test's input on standard input;
- ``call``: one run of a driver that defines the program in a fresh namespace, then calls the function
  with each test's arguments and writes each returned value as a JSON line on a channel of its own;
- ``assert``: one run of the same driver, which executes each test's code after the program.

Each test's outcome is ``pass``, ``wrong``, ``timeout``, ``runtime_error``, ``memory``, ``output_limit`` or
``not_run`` (after a failure, with ``stop_on_fail``). The verdict is correct when every test passes (as
LiveCodeBench, DeepCoder and EvalPlus count); ``passed / total`` is the second figure. A sandbox failure
makes the verdict's status ``error``: the grader reports it as an error, never as a wrong answer.

The driver never sees an expected output of a ``call`` test; the arguments are not secret. A program that
exits early (``sys.exit(0)`` while being defined, ``os._exit``) writes no results: its tests fail.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import dataclass, field
from typing import Any

from e2c.rewards.code_tests import MAX_PROGRAM_CHARS, CodeTests, outputs_equal, values_equal
from e2c.sandbox import Limits, RunResult, Sandbox, current, slots

# Startup allowance of a driver run beyond the tests' own time (the interpreter, the program's definition).
DRIVER_OVERHEAD_S = 2.0
MAX_VALUE_CHARS = 1_000_000

_DRIVER = r"""
import json, os, signal, sys

def _plain(v, depth=0):
    # A returned value as JSON: tuples and sets as lists, anything else by its repr.
    if depth > 100:
        return repr(v)
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        return [_plain(x, depth + 1) for x in v]
    if isinstance(v, (set, frozenset)):
        return sorted((_plain(x, depth + 1) for x in v), key=repr)
    if isinstance(v, dict):
        return {str(k): _plain(x, depth + 1) for k, x in v.items()}
    return repr(v)

class _Late(BaseException):
    pass

def _alarm(signum, frame):
    raise _Late()

def main():
    job = json.loads(sys.stdin.read())
    sys.stdin = open(os.devnull)
    chan = os.fdopen(os.dup(1), "w", encoding="utf-8")
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)  # the program's own prints go nowhere; results go on the channel
    sys.stdout = open(os.devnull, "w")
    token = job["token"]

    def say(obj):
        chan.write(token + " " + json.dumps(obj) + "\n")
        chan.flush()

    ns = {"__name__": "solution", "__builtins__": __builtins__}
    try:
        with open("solution.py", encoding="utf-8") as f:
            src = f.read()
        exec(compile(src, "solution.py", "exec"), ns)
    except BaseException as e:
        say({"load": type(e).__name__})
        return
    target = None
    if job["mode"] == "call":
        fn = job["fn"]
        target = ns.get(fn)
        if not callable(target) and isinstance(ns.get("Solution"), type):
            target = getattr(ns["Solution"](), fn, None)
        if not callable(target):
            say({"load": "no function " + fn})
            return
    signal.signal(signal.SIGALRM, _alarm)
    for i, item in enumerate(job["tests"]):
        try:
            signal.setitimer(signal.ITIMER_REAL, job["limit"])
            if job["mode"] == "call":
                value = target(*json.loads(item))
                signal.setitimer(signal.ITIMER_REAL, 0)
                say({"i": i, "v": _plain(value)})
            else:
                exec(compile(item, "test_%d.py" % i, "exec"), ns)
                signal.setitimer(signal.ITIMER_REAL, 0)
                say({"i": i, "ok": True})
        except _Late:
            say({"i": i, "e": "timeout"})
        except MemoryError:
            signal.setitimer(signal.ITIMER_REAL, 0)
            say({"i": i, "e": "memory"})
        except BaseException as e:
            signal.setitimer(signal.ITIMER_REAL, 0)
            say({"i": i, "e": type(e).__name__})

main()
"""


@dataclass(frozen=True)
class CodeVerdict:
    """The outcome of running a program on its tests.

    ``status`` is ``ok`` (the tests ran; ``outcomes`` say how each did), ``too_long`` (not run) or
    ``error`` (the sandbox failed: ``note`` says how). ``behaviour`` has one key per test that ran: equal
    keys mean equal outputs (test-time search groups programs by them). ``seconds`` is sandbox wall time."""

    passed: int
    total: int
    status: str
    outcomes: tuple[str, ...] = ()
    behaviour: tuple[str, ...] = ()
    seconds: float = 0.0
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def correct(self) -> bool:
        return self.status == "ok" and self.total > 0 and self.passed == self.total

    @property
    def fraction(self) -> float:
        return self.passed / self.total if self.total and self.status == "ok" else 0.0


def _key(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _run(sbx: Sandbox, files: dict[str, str], stdin: str, limits: Limits) -> RunResult:
    with slots():
        return sbx.run(files, "main.py", stdin, limits)


_FAIL_OF_STATUS = {"timeout": "timeout", "memory": "memory", "output_limit": "output_limit"}


def judge(
    program: str,
    tests: CodeTests,
    sandbox: Sandbox | None = None,
    *,
    stop_on_fail: bool = False,
    limits: Limits | None = None,
) -> CodeVerdict:
    """Run ``program`` on ``tests`` (all of them; pass ``tests.only(tests.public)`` for the public ones).

    ``stop_on_fail``: stop at the first failing ``stdin`` test (the rest are ``not_run``); RL's all-or-nothing
    reward needs no more. ``limits``: memory and file limits (the wall limit comes from the tests).
    """
    n = len(tests.tests)
    if len(program) > MAX_PROGRAM_CHARS:
        return CodeVerdict(0, n, "too_long", ("not_run",) * n)
    sbx = sandbox or current()
    base = limits or Limits()
    if tests.mode == "stdin":
        return _judge_stdin(program, tests, sbx, base, stop_on_fail)
    return _judge_driver(program, tests, sbx, base)


def _judge_stdin(program: str, tests: CodeTests, sbx: Sandbox, base: Limits, stop: bool) -> CodeVerdict:
    source = f"{tests.setup}\n{program}" if tests.setup else program
    lim = base.with_wall(tests.time_limit)
    outcomes: list[str] = []
    behaviour: list[str] = []
    seconds = 0.0
    for t in tests.tests:
        if stop and outcomes and outcomes[-1] != "pass":
            outcomes.append("not_run")
            continue
        r = _run(sbx, {"main.py": source}, t.input, lim)
        seconds += r.seconds
        if r.status == "sandbox_error":
            return CodeVerdict(0, len(tests.tests), "error", seconds=seconds, note=r.stderr[-300:])
        if r.status == "ok":
            same = outputs_equal(r.stdout, str(t.output), tests.compare, tests.float_tol)
            outcomes.append("pass" if same else "wrong")
            behaviour.append(_key("\n".join(line.strip() for line in r.stdout.strip().splitlines())))
        else:
            outcomes.append(_FAIL_OF_STATUS.get(r.status, "runtime_error"))
            behaviour.append("!" + outcomes[-1])
    passed = outcomes.count("pass")
    return CodeVerdict(passed, len(tests.tests), "ok", tuple(outcomes), tuple(behaviour), seconds)


def _judge_driver(program: str, tests: CodeTests, sbx: Sandbox, base: Limits) -> CodeVerdict:
    source = f"{tests.setup}\n{program}" if tests.setup else program
    token = secrets.token_hex(8)
    if tests.mode == "call":
        items = [json.dumps(list(t.args)) for t in tests.tests]
    else:
        items = [t.code for t in tests.tests]
    job = {"token": token, "mode": tests.mode, "fn": tests.fn_name, "tests": items, "limit": tests.time_limit}
    n = len(items)
    lim = base.with_wall(tests.time_limit * n + DRIVER_OVERHEAD_S)
    r = _run(sbx, {"main.py": _DRIVER, "solution.py": source}, json.dumps(job), lim)
    if r.status == "sandbox_error":
        return CodeVerdict(0, n, "error", seconds=r.seconds, note=r.stderr[-300:])
    results: dict[int, dict[str, Any]] = {}
    load_error = ""
    for line in r.stdout.splitlines():
        head, _, body = line.partition(" ")
        if head != token or len(body) > MAX_VALUE_CHARS:
            continue
        try:
            obj = json.loads(body)
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        if "load" in obj:
            load_error = str(obj["load"])[:100]
        elif isinstance(obj.get("i"), int) and 0 <= obj["i"] < n and obj["i"] not in results:
            results[obj["i"]] = obj
    # A test with no result line: the run ended (or was killed) before it; say how the run ended.
    missing = _FAIL_OF_STATUS.get(r.status, "runtime_error")
    outcomes: list[str] = []
    behaviour: list[str] = []
    for i, t in enumerate(tests.tests):
        res = results.get(i)
        if res is None:
            outcomes.append(missing)
            behaviour.append("!" + missing)
        elif "e" in res:
            err = str(res["e"])
            outcomes.append(err if err in ("timeout", "memory") else "runtime_error")
            behaviour.append("!" + err[:40])
        elif tests.mode == "call":
            ok = values_equal(res.get("v"), t.output, tests.float_tol)
            outcomes.append("pass" if ok else "wrong")
            behaviour.append(_key(json.dumps(res.get("v"), sort_keys=True)))
        else:
            outcomes.append("pass")
            behaviour.append("pass")
    passed = outcomes.count("pass")
    extra = {"load_error": load_error} if load_error else {}
    return CodeVerdict(passed, n, "ok", tuple(outcomes), tuple(behaviour), r.seconds, extra=extra)
