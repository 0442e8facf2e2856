"""Judge a program against a problem's tests in the sandbox: the check of the ``code`` answer kind.

:func:`judge` runs the program as the tests' mode says (``stdin``: one sandbox run per test; ``call`` and
``assert``: one run of :data:`DRIVER`, which forks a process per test) and compares the outputs here, in the
caller. Guaranteed: the program cannot touch a test's time limit (the clock is the driver's), write another
test's result or the results channel, see later tests' arguments, or leave a process computing for a later
test (where the run has a PID namespace of its own); ``call`` outputs never enter the sandbox. Not guaranteed:
an ``assert`` test runs in the program's process with its expected values, so a program can read or forge it.
Each test is ``pass``, ``wrong``, ``timeout``, ``runtime_error``, ``memory``, ``output_limit`` or ``not_run``;
reading an output never raises; the verdict is correct when every test passes, and a sandbox failure is
``error``, never a wrong answer.
More: docs/code.md, "The answer and its reference".
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from e2c.rewards.code_tests import MAX_PROGRAM_CHARS, CodeTests, outputs_equal, values_equal
from e2c.sandbox import Limits, RunResult, Sandbox, slots

# Startup allowance of a driver run beyond the tests' own time (the interpreter, forks).
DRIVER_OVERHEAD_S = 2.0
MAX_VALUE_CHARS = 1_000_000
"""Longest result line of one test (a returned value as JSON); a longer one is ``wrong``."""

DRIVER = r"""
import json, os, select, signal, sys, time

MAX_LINE = {max_line}


def read_exact(n):
    # Unbuffered: nothing of a later test is read ahead into this process (and so into a test's fork).
    out = bytearray()
    while len(out) < n:
        b = os.read(0, n - len(out))
        if not b:
            raise EOFError
        out += b
    return bytes(out)


def read_line():
    out = bytearray()
    while True:
        b = os.read(0, 1)
        if not b or b == b"\n":
            return bytes(out)
        out += b


def plain(v, depth=0):
    # A returned value as JSON: tuples and sets as lists, anything else by its repr.
    if depth > 100:
        return repr(v)
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        return [plain(x, depth + 1) for x in v]
    if isinstance(v, (set, frozenset)):
        return sorted((plain(x, depth + 1) for x in v), key=repr)
    if isinstance(v, dict):
        return {str(k): plain(x, depth + 1) for k, x in v.items()}
    return repr(v)


def test(job, i, item, w):
    # A test's own process: it holds its pipe, not the results channel; the program's prints go nowhere.
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    out = os.fdopen(w, "w", encoding="utf-8")
    sys.stdin, sys.stdout = open(os.devnull), open(os.devnull, "w")

    def say(text):
        out.write(text + "\n")
        out.flush()

    ns = {"__name__": "solution", "__builtins__": __builtins__}
    try:
        with open("solution.py", encoding="utf-8") as f:
            src = f.read()
        exec(compile(src, "solution.py", "exec"), ns)
    except BaseException as e:
        say("load " + type(e).__name__)
        return
    try:
        if job["mode"] == "call":
            fn = job["fn"]
            target = ns.get(fn)
            if not callable(target) and isinstance(ns.get("Solution"), type):
                target = getattr(ns["Solution"](), fn, None)
            if not callable(target):
                say("load no function " + fn)
                return
            value = target(*json.loads(item))
            say("v " + json.dumps(plain(value)))
        else:
            exec(compile(item, "test_%d.py" % i, "exec"), ns)
            say("ok")
    except MemoryError:
        say("e memory")
    except BaseException as e:
        say("e " + type(e).__name__)


def wait_line(r, deadline):
    buf = bytearray()
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return b"timeout"
        try:
            ready = select.select([r], [], [], left)[0]
        except InterruptedError:
            continue
        if not ready:
            return b"timeout"
        chunk = os.read(r, 65536)
        k = chunk.find(b"\n")
        if k >= 0:
            buf += chunk[:k]
            # The driver's clock, read when the result arrives: a result written late is late.
            return bytes(buf) if time.monotonic() <= deadline else b"timeout"
        if not chunk:
            return b"crash"
        buf += chunk
        if len(buf) > MAX_LINE:
            return b"big"


def main():
    try:
        import ctypes
        libc = ctypes.CDLL(None)
        # PR_SET_DUMPABLE 0: a process of this user can neither trace this one nor open its descriptors.
        libc.prctl(4, 0, 0, 0, 0)
        # PR_SET_CHILD_SUBREAPER: a test's orphans are this process's to reap (PID 1 of a local run does
        # not reap them, and zombies would count against the run's process limit).
        libc.prctl(36, 1, 0, 0, 0)
    except Exception:
        pass
    job = json.loads(read_line())
    chan = 1
    for i in range(job["n"]):
        item = read_exact(int(read_line())).decode("utf-8", "surrogatepass")
        r, w = os.pipe()
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            os.setpgid(0, 0)
            try:
                test(job, i, item, w)
            finally:
                os._exit(0)
        os.close(w)
        try:
            os.setpgid(pid, pid)
        except OSError:
            pass
        line = wait_line(r, start + job["limit"])
        os.close(r)
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
        if job["sweep"]:
            # Alone in its PID namespace with a user of its own: every other process of the run is the
            # program's (a daemon left by this test), and none may go on computing for a later test.
            try:
                os.kill(-1, signal.SIGKILL)
            except OSError:
                pass
        _, status = os.waitpid(pid, 0)
        if line == b"crash" and os.WIFSIGNALED(status):
            line = b"crash %d" % os.WTERMSIG(status)
        # Reap what the test left. After the sweep, wait for every one of them (each is this process's
        # child: it is the subreaper): a killed process is still there, runnable with its SIGKILL pending,
        # until the kernel has ended it, and the next test must not start beside it.
        while True:
            try:
                if os.waitpid(-1, 0 if job["sweep"] else os.WNOHANG)[0] == 0:
                    break
            except ChildProcessError:
                break
            except InterruptedError:
                continue
        os.write(chan, b"%d %s\n" % (i, line))
        if line.startswith(b"load "):
            break


main()
""".replace("{max_line}", str(MAX_VALUE_CHARS))
"""The driver of ``call`` and ``assert`` tests (the sandbox's ``main.py``; the program is ``solution.py``).

Its standard input: a JSON header line (``mode``, ``fn``, ``limit``, ``n``, ``sweep``), then each test as
a line with its length in bytes and that many bytes (call arguments as JSON, or assert code). Its
standard output: one line per test, ``i RESULT``, where RESULT is ``v JSON`` (the returned value), ``ok``
(the assert ran), ``e NAME`` (an exception), ``load NAME`` (the program failed to define, or has no such
function: no further test runs), ``timeout``, ``crash [SIGNAL]`` (the test's process died without a
result) or ``big`` (a result over :data:`MAX_VALUE_CHARS`)."""


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


def with_setup(program: str, tests: CodeTests) -> str:
    """The source that runs: the tests' setup code (imports, helpers the problem gives), then the program."""
    return f"{tests.setup}\n{program}" if tests.setup else program


def run_on_test(program: str, tests: CodeTests, i: int, sandbox: Sandbox) -> RunResult:
    """``program`` (after the tests' setup) run once on ``stdin`` test ``i``'s input, under that test's time
    limit, returning what the run printed: for a caller that shows a program its own output on a *public*
    test (test-time search's feedback). The judge's verdicts never return outputs; this does, so it must
    not be called on a hidden test."""
    source = with_setup(program, tests)
    return _run(sandbox, {"main.py": source}, tests.tests[i].input, Limits().with_wall(tests.time_limit))


_FAIL_OF_STATUS = {"timeout": "timeout", "memory": "memory", "output_limit": "output_limit"}


def judge(
    program: str,
    tests: CodeTests,
    sandbox: Sandbox,
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
    base = limits or Limits()
    if tests.mode == "stdin":
        return _judge_stdin(program, tests, sandbox, base, stop_on_fail)
    return _judge_driver(program, tests, sandbox, base)


def _judge_stdin(program: str, tests: CodeTests, sbx: Sandbox, base: Limits, stop: bool) -> CodeVerdict:
    source = with_setup(program, tests)
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


def driver_input(tests: CodeTests, sweep: bool) -> str:
    """The driver's standard input for ``tests`` (see :data:`DRIVER`)."""
    items = (
        [json.dumps(list(t.args)) for t in tests.tests]
        if tests.mode == "call"
        else [t.code for t in tests.tests]
    )
    head = {
        "mode": tests.mode,
        "fn": tests.fn_name,
        "limit": tests.time_limit,
        "n": len(items),
        "sweep": sweep,
    }
    parts = [json.dumps(head), "\n"]
    for it in items:
        parts += [str(len(it.encode("utf-8", "surrogatepass"))), "\n", it]
    return "".join(parts)


def _driver_results(stdout: str, n: int) -> dict[int, str]:
    """Each test's result text from the driver's output (the first line per test; others ignored)."""
    results: dict[int, str] = {}
    for line in stdout.splitlines():
        head, _, body = line.partition(" ")
        if head.isdigit() and len(head) < 9 and int(head) < n and int(head) not in results:
            results[int(head)] = body
    return results


def _judge_driver(program: str, tests: CodeTests, sbx: Sandbox, base: Limits) -> CodeVerdict:
    source = with_setup(program, tests)
    n = len(tests.tests)
    sweep = bool(getattr(sbx, "private_pids", False))
    lim = base.with_wall(tests.time_limit * n + DRIVER_OVERHEAD_S)
    r = _run(sbx, {"main.py": DRIVER, "solution.py": source}, driver_input(tests, sweep), lim)
    if r.status == "sandbox_error":
        return CodeVerdict(0, n, "error", seconds=r.seconds, note=r.stderr[-300:])
    results = _driver_results(r.stdout, n)
    # A test with no result line: the run ended (or was killed) before it; say how the run ended.
    missing = _FAIL_OF_STATUS.get(r.status, "runtime_error")
    load_error = ""
    outcomes: list[str] = []
    behaviour: list[str] = []
    reasons: dict[str, str] = {}
    for i, t in enumerate(tests.tests):
        res = results.get(i)
        if res is None and load_error:  # the driver stops at a program that does not load
            outcome, key = "runtime_error", "!load"
        elif res is None:
            outcome, key = missing, "!" + missing
        elif res.startswith("load "):
            load_error = res[5:][:100]
            outcome, key = "runtime_error", "!load"
        elif res.startswith("e "):
            err = res[2:][:40]
            outcome = err if err in ("timeout", "memory") else "runtime_error"
            key = "!" + err
        elif res in ("timeout", "big") or res.startswith("crash"):
            outcome = {"timeout": "timeout", "big": "wrong"}.get(res, "runtime_error")
            key = "!" + res
            if res == "big":
                reasons[str(i)] = f"result over {MAX_VALUE_CHARS} characters"
        elif tests.mode == "call" and res.startswith("v "):
            try:
                value = json.loads(res[2:])
            except (ValueError, RecursionError) as e:  # too deep, an int over Python's digit limit
                outcome, key = "wrong", "!unreadable"
                reasons[str(i)] = f"unreadable result: {type(e).__name__}"
            else:
                outcome = "pass" if values_equal(value, t.output, tests.float_tol) else "wrong"
                key = _key(json.dumps(value, sort_keys=True))  # equal values, equal keys
        elif tests.mode == "assert" and res == "ok":
            outcome, key = "pass", "pass"
        else:
            outcome, key = "wrong", "!malformed"
            reasons[str(i)] = "malformed result line"
        outcomes.append(outcome)
        behaviour.append(key)
    passed = outcomes.count("pass")
    extra: dict[str, Any] = {"load_error": load_error} if load_error else {}
    if reasons:
        extra["reasons"] = reasons
    return CodeVerdict(passed, n, "ok", tuple(outcomes), tuple(behaviour), r.seconds, extra=extra)
