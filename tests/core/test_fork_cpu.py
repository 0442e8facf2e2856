"""``e2c.launch.fork.run_module``: a module run as ``python -m`` would run it, in a child forked from this process
where that is safe (it then has the parent's imports), else in a new interpreter. Each case runs in a fresh
driver process: the test runner's own threads (pytest-xdist) would make every fork fall back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# The module the child runs: what it sees, in a JSON file named by its first argument; then its exit.
CHILD = """
import atexit, json, os, sys
import marker_parent
out = {"name": __name__, "argv": sys.argv[1:], "cwd": os.getcwd(),
       "forked": getattr(marker_parent, "SET_IN_PARENT", False), "env": os.environ.get("FORK_TEST_ENV")}
atexit.register(lambda: open(sys.argv[1] + ".atexit", "w").write("child"))
with open(sys.argv[1], "w") as f:
    json.dump(out, f)
how = sys.argv[2]
if how == "raise":
    raise ValueError("boom in the child")
if how == "message":
    sys.exit("a message")
if how != "return":
    sys.exit(int(how))
"""


def _drive(tmp_path: Path, how: str, prelude: str = "", env: str = "same") -> dict:
    """A fresh driver: imports the marker, registers an atexit handler of its own, then runs the child
    module through ``run_module`` inside a ``try/finally``; returns what both sides saw."""
    (tmp_path / "child_mod.py").write_text(CHILD)
    (tmp_path / "marker_parent.py").write_text("SET_IN_PARENT = False\n")
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    seen = tmp_path / "seen.json"
    driver = textwrap.dedent(
        f"""
        import atexit, json, os, sys
        sys.path.insert(0, {str(tmp_path)!r})
        import marker_parent
        marker_parent.SET_IN_PARENT = True
        atexit.register(lambda: open({str(tmp_path / "parent.atexit")!r}, "a").write("x"))
        {prelude}
        from e2c.launch.fork import run_module
        env = dict(os.environ)
        if {env!r} == "other":
            env["FORK_TEST_ENV"] = "given"
        try:
            cleanup = lambda: open({str(tmp_path / "cleanup")!r}, "a").write(str(os.getpid()))
            rc = run_module("child_mod", [{str(seen)!r}, {how!r}], {str(work)!r}, env, cleanups=[cleanup])
        finally:
            open({str(tmp_path / "finally")!r}, "a").write("x")
        print("RC", rc)
        print("PARENT", os.getpid())
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", driver],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    rc = [line for line in proc.stdout.splitlines() if line.startswith("RC ")]
    assert rc, proc.stdout + proc.stderr
    return {
        "rc": int(rc[0].split()[1]),
        "stderr": proc.stderr,
        "child": json.loads(seen.read_text()),
        "child_atexit": (tmp_path / "seen.json.atexit").is_file(),
        "parent_atexit": (tmp_path / "parent.atexit").read_text(),
        "finally": (tmp_path / "finally").read_text(),
        "cleanup_pid": (tmp_path / "cleanup").read_text() if (tmp_path / "cleanup").is_file() else None,
        "parent_pid": proc.stdout.split("PARENT ")[1].split()[0],
    }


@pytest.mark.parametrize(("how", "rc"), [("return", 0), ("3", 3), ("0", 0), ("raise", 1), ("message", 1)])
def test_the_child_is_the_module_run_as_main_and_its_exit_status_comes_back_cpu(
    tmp_path: Path, how: str, rc: int
) -> None:
    got = _drive(tmp_path, how)
    assert got["rc"] == rc
    child = got["child"]
    assert child["forked"] is True  # it has the parent's imports: it was forked
    assert child["name"] == "__main__" and child["argv"] == [str(tmp_path / "seen.json"), how]
    assert child["cwd"] == str(tmp_path / "work")
    assert got["child_atexit"]  # the atexit handlers it registered ran
    # The cleanups the caller named ran in the child, once, after the module.
    assert got["cleanup_pid"] and got["cleanup_pid"] != got["parent_pid"]
    # The parent's atexit handler and its `finally` ran once, in the parent only.
    assert got["parent_atexit"] == "x" and got["finally"] == "x"
    if how == "raise":
        assert "ValueError: boom in the child" in got["stderr"]
    if how == "message":
        assert "a message" in got["stderr"]


def test_a_forked_child_has_the_environment_it_is_given_cpu(tmp_path: Path) -> None:
    got = _drive(tmp_path, "0", env="other")
    assert got["rc"] == 0 and got["child"]["forked"] is True and got["child"]["env"] == "given"


def test_a_child_that_cannot_be_forked_starts_a_new_interpreter_cpu(tmp_path: Path) -> None:
    thread = "import threading, time; threading.Thread(target=time.sleep, args=(30,), daemon=True).start()"
    got = _drive(tmp_path, "5", prelude=thread, env="other")
    assert got["rc"] == 5 and got["child"]["forked"] is False and got["child"]["name"] == "__main__"
    assert got["child"]["env"] == "given"
    assert got["cleanup_pid"] is None  # a new interpreter has its own exit handlers (ray's shutdown)
    assert got["parent_atexit"] == "x" and got["finally"] == "x"


def test_the_child_waits_for_its_threads_before_it_leaves_cpu(tmp_path: Path) -> None:
    """A thread the module started that is not a daemon finishes its work, as at an interpreter's end."""
    (tmp_path / "threaded.py").write_text(
        "import sys, threading, time\n"
        "def work():\n"
        "    time.sleep(0.5)\n"
        "    open(sys.argv[1], 'w').write('done')\n"
        "threading.Thread(target=work).start()\n"
    )
    flag = tmp_path / "thread_done"
    code = (
        f"import os, sys; sys.path.insert(0, {str(tmp_path)!r})\n"
        "from e2c.launch.fork import run_module\n"
        f"print('RC', run_module('threaded', [{str(flag)!r}], {str(tmp_path)!r}, dict(os.environ)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert "RC 0" in out.stdout, out.stderr
    assert flag.read_text() == "done"


def test_fork_refusal_names_what_makes_a_fork_unsafe_cpu() -> None:
    code = (
        "import threading, time\n"
        "from e2c.launch.fork import fork_refusal\n"
        "print(fork_refusal())\n"
        "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
        "print(fork_refusal())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.stdout.splitlines() == ["None", "2 Python threads run"], out.stderr


SLEEPER = """
import os, sys, time
try:
    with open(sys.argv[1] + ".pid.tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(sys.argv[1] + ".pid.tmp", sys.argv[1] + ".pid")  # its finally is armed from here on
    time.sleep(120)
finally:
    open(sys.argv[1] + ".finally", "w").write("child")
"""


@pytest.mark.parametrize("fork", [True, False])
def test_a_sigterm_to_the_parent_stops_the_child_through_its_finally_cpu(tmp_path: Path, fork: bool) -> None:
    """The RL launcher's case: SIGTERM to the parent alone (raised as an interrupt there). The child is
    stopped as Ctrl-C stops it, so its ``finally`` and the cleanups run (ray's shutdown, in the launcher), and
    it is gone when the parent's interrupt goes on."""
    (tmp_path / "sleeper.py").write_text(SLEEPER)
    mark = tmp_path / "m"
    driver = textwrap.dedent(
        f"""
        import os, signal, sys
        from e2c.commandline.parsing import interrupt_on_sigterm
        from e2c.core.errors import Interrupted
        from e2c.launch.fork import run_module
        interrupt_on_sigterm()
        def ready(*_):  # the SIGTERM once the child runs its try (a slow start under load is waited for)
            if os.path.exists({str(mark)!r} + ".pid"):
                signal.setitimer(signal.ITIMER_REAL, 0)
                os.kill(os.getpid(), signal.SIGTERM)
        signal.signal(signal.SIGALRM, ready)
        signal.setitimer(signal.ITIMER_REAL, 0.5, 0.2)
        cleanup = lambda: open({str(mark)!r} + ".cleanup", "w").write("x")
        try:
            run_module("sleeper", [{str(mark)!r}], {str(tmp_path)!r}, dict(os.environ), fork={fork!r},
                       cleanups=[cleanup])
        except Interrupted:
            pid = int(open({str(mark)!r} + ".pid").read())
            try:
                os.kill(pid, 0)
                print("CHILD ALIVE")
            except ProcessLookupError:
                print("CHILD GONE")
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", driver],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert "CHILD GONE" in proc.stdout, proc.stdout + proc.stderr
    assert (tmp_path / "m.finally").read_text() == "child"
    # The cleanups are a forked child's (a new interpreter runs its own atexit handlers instead).
    assert (tmp_path / "m.cleanup").is_file() == fork
