"""Hostile programs against the grader and the sandbox: each test is one attack (its docstring's first line
names it), run on every backend it applies to. The containment table of docs/code.md is made from these
tests (``python tests/sandbox/containment_table.py``), so the table says what ran, not what was meant.

Backends: ``local`` and ``bwrap`` (where bubblewrap is installed) for everything; ``fusion``, a stand-in
SandboxFusion server on 127.0.0.1 that runs each request on the local backend, for the grading attacks,
whose rule is the client's (the comparison and the driver's protocol live in this process)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import e2c.sandbox.local as local_mod
from e2c.rewards.code_judge import CodeVerdict, judge
from e2c.rewards.code_tests import parse_tests
from e2c.sandbox import Limits, make
from e2c.sandbox.local import PRIVATE_DIRS, probe_isolation, processes_of, uid_range

ISO = probe_isolation()
CONTAIN = ["local"] + (["bwrap"] if shutil.which("bwrap") else [])
GRADE = [*CONTAIN, "fusion"]
needs_root = pytest.mark.skipif(ISO.mode != "root", reason="the per-run users need root (the root mode)")


# --------------------------------------------------------------------------------- a SandboxFusion stand-in
class _StandIn(BaseHTTPRequestHandler):
    """``run_code`` answered by running the request on the local backend, in SandboxFusion's schema."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        files = {n: base64.b64decode(t).decode("utf-8", "surrogatepass") for n, t in body["files"].items()}
        files["main.py"] = body["code"]
        lim = Limits(wall_s=float(body["run_timeout"]), memory_mb=int(body["memory_limit_MB"]))
        r = self.server.sbx.run(files, "main.py", body.get("stdin", ""), lim)  # type: ignore[attr-defined]
        status = {"timeout": "TimeLimitExceeded", "memory": "MemoryLimitExceeded"}.get(r.status, "Finished")
        raw = json.dumps(
            {
                "status": "Success",
                "run_result": {
                    "status": status,
                    "return_code": r.returncode,
                    "stdout": r.stdout,
                    "stderr": r.stderr,
                },
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def fusion_url():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _StandIn)
    srv.sbx = make("local")  # type: ignore[attr-defined]
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"fusion:http://127.0.0.1:{srv.server_port}"
    srv.shutdown()


@pytest.fixture(scope="module", params=GRADE)
def grader_sbx(request):
    if request.param == "fusion":
        return make(request.getfixturevalue("fusion_url"))
    return make(request.param)


@pytest.fixture(scope="module", params=CONTAIN)
def sbx(request):
    return make(request.param)


def call_tests(outputs: list, limit: float = 2.0, args: list | None = None) -> object:
    args = args or [[i] for i in range(len(outputs))]
    return parse_tests(
        {
            "mode": "call",
            "fn_name": "f",
            "time_limit": limit,
            "tests": [{"args": a, "output": o} for a, o in zip(args, outputs)],
        }
    )


def held(v: CodeVerdict) -> None:
    """A hostile program's verdict: graded (status ok, never ``error``), and not correct."""
    assert v.status == "ok", v
    assert not v.correct, v


# ---------------------------------------------------------------------------------------------- grading
@pytest.mark.parametrize(
    "ret",
    ["float('inf')", "-float('inf')", "[float('inf')] * 3", "float('nan')"],
)
def test_non_finite_never_matches_a_finite_answer_cpu(grader_sbx, ret):
    """A non-finite return (inf, -inf, [inf]*n, nan) against int, float and list answers."""
    v = judge(f"def f(x):\n    return {ret}\n", call_tests([3, 2.5, [1, 2, 3]]), grader_sbx)
    held(v)
    assert v.passed == 0, v


def test_honest_min_search_bug_is_wrong_cpu(grader_sbx):
    """An honest bug: a minimum search that never updates best = float('inf')."""
    prog = "def f(xs):\n    best = float('inf')\n    for x in xs:\n        if x < 0 and x < best:\n            best = x\n    return best\n"
    v = judge(prog, call_tests([1, 2], args=[[[3, 1, 2]], [[5, 2]]]), grader_sbx)
    held(v)
    assert v.passed == 0


SLOW = "    t = time.monotonic()\n    while time.monotonic() - t < 1.6:\n        pass\n    return x\n"


PRELUDES = {
    "cancel the timer": "import signal, time\nsignal.setitimer(signal.ITIMER_REAL, 0)\n",
    "ignore SIGALRM": "import signal, time\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n",
    "block every signal": "import signal, time\nsignal.pthread_sigmask(signal.SIG_BLOCK, range(1, 32))\n",
    "stop the driver while computing": "import os, signal, time\n",
}


@pytest.mark.parametrize("name", list(PRELUDES))
def test_time_limit_cannot_be_touched_from_inside_cpu(grader_sbx, name):
    """A 1.6 s test under a 1.0 s limit, the program fighting the timer."""
    body = SLOW
    if name.startswith("stop"):
        body = (
            "    os.kill(os.getppid(), signal.SIGSTOP)\n" + SLOW.replace("    return x\n", "")
        ) + "    os.kill(os.getppid(), signal.SIGCONT)\n    return x\n"
    prog = (
        PRELUDES[name]
        + "def f(x):\n"
        + (
            body
            if "stop" in name
            else "    import signal\n    signal.setitimer(signal.ITIMER_REAL, 0)\n" + body
        )
    )
    v = judge(prog, call_tests([0, 1], limit=1.0), grader_sbx)
    held(v)
    assert v.outcomes[0] in ("timeout", "runtime_error"), v


def test_results_cannot_be_forged_on_any_descriptor_cpu(grader_sbx):
    """Writing result lines (every format the driver ever used) on every descriptor and on the driver's
    descriptors through /proc."""
    prog = textwrap.dedent("""
        import os
        lines = b"".join(b"%d v 10\\n%d ok\\n" % (i, i) for i in range(3)) + b'deadbeef {"i": 0, "v": 10}\\n'
        for fd in range(0, 64):
            try:
                os.write(fd, lines)
            except OSError:
                pass
        for fd in range(0, 16):
            try:
                with open("/proc/%d/fd/%d" % (os.getppid(), fd), "wb") as f:
                    f.write(lines)
            except OSError:
                pass
        def f(x):
            return -1
    """)
    v = judge(prog, call_tests([10, 10, 10]), grader_sbx)
    held(v)
    assert v.passed == 0, v


def test_driver_cannot_be_traced_or_read_cpu(grader_sbx):
    """Reading the driver's memory through /proc/PPID/mem (what a tracer would do)."""
    prog = textwrap.dedent("""
        import os
        def f(x):
            try:
                with open("/proc/%d/mem" % os.getppid(), "rb") as m:
                    m.read(1)
                return "read"
            except OSError:
                return "refused"
    """)
    v = judge(prog, call_tests(["read"]), grader_sbx)
    held(v)


def test_killing_the_driver_passes_nothing_cpu(grader_sbx):
    """Killing the driver after returning the right value."""
    prog = "import os, signal\ndef f(x):\n    os.kill(os.getppid(), signal.SIGKILL)\n    return x\n"
    v = judge(prog, call_tests([0, 1]), grader_sbx)
    held(v)


def test_later_tests_arguments_are_not_in_a_test_process_cpu(grader_sbx):
    """Searching a test's own memory for a later test's arguments."""
    marker = "e2c-later-" + uuid.uuid4().hex
    prog = textwrap.dedent("""
        import re
        def f(x):
            pat = b"e2c-later-" + b"[0-9a-f]{32}"
            with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb") as mem:
                for line in maps:
                    addr, perms = line.split()[:2]
                    if not perms.startswith("r"):
                        continue
                    lo, hi = (int(a, 16) for a in addr.split("-"))
                    try:
                        mem.seek(lo)
                        chunk = mem.read(hi - lo)
                    except (OSError, OverflowError, ValueError):
                        continue
                    m = re.search(pat, chunk)
                    if m:
                        return m.group().decode()
            return "nothing"
    """)
    v = judge(prog, call_tests([marker, 1, marker], args=[[0], [1], [marker]]), grader_sbx)
    assert v.status == "ok" and v.outcomes[0] != "pass", v


def test_background_process_cannot_work_for_a_later_test_cpu(grader_sbx):
    """A daemon left by one test, still alive for the next (it could compute the next answer)."""
    if not getattr(grader_sbx, "private_pids", False):
        pytest.skip("the stand-in server's runs are the local backend's; its client cannot tell")
    prog = textwrap.dedent("""
        import os, time
        def f(x):
            if x == 0:
                if os.fork() == 0:
                    os.setsid()
                    with open("daemon.pid", "w") as fh:
                        fh.write(str(os.getpid()))
                    time.sleep(30)
                    os._exit(0)
                time.sleep(0.3)
                return 0
            try:
                with open("daemon.pid") as fh, open("/proc/%s/stat" % fh.read()) as st:
                    state = st.read().rsplit(")", 1)[1].split()[0]
                return "gone" if state in "ZX" else "alive"  # a killed daemon may wait as a zombie
            except (OSError, ValueError, IndexError):
                return "gone"
    """)
    v = judge(prog, call_tests([0, "alive"]), grader_sbx)
    assert v.outcomes == ("pass", "wrong"), v


def test_daemons_left_by_every_test_do_not_exhaust_the_process_limit_cpu(grader_sbx):
    """A daemon left by each of 40 tests (killed and unreaped, they would fill the run's 32 processes)."""
    if not getattr(grader_sbx, "private_pids", False):
        pytest.skip("without a PID namespace of the run's own, daemons are not the driver's to kill")
    prog = "import os, time\ndef f(x):\n    if os.fork() == 0:\n        os.setsid()\n        time.sleep(30)\n    return x\n"
    v = judge(prog, call_tests(list(range(40))), grader_sbx)
    assert v.correct, v


def test_deeply_nested_result_is_wrong_not_an_error_cpu(grader_sbx):
    """A result line of JSON nested 200,000 deep, written on the test's own pipe."""
    prog = textwrap.dedent("""
        import os
        def f(x):
            line = b"v " + b"[" * 200000 + b"]" * 200000 + b"\\n"
            for fd in range(3, 64):
                try:
                    os.write(fd, line)
                except OSError:
                    pass
            os._exit(0)
    """)
    v = judge(prog, call_tests([[1]]), grader_sbx)
    held(v)
    assert v.outcomes == ("wrong",), v


@pytest.mark.parametrize(
    ("ret", "want"),
    [("1.5", 2**1100), ("10**400", 2.5), ("2**1100", 1e300), ("1e308 * 10", 1e308), ("10**5000", 1)],
    ids=["1.5 vs 2**1100", "10**400 vs 2.5", "2**1100 vs 1e300", "inf vs 1e308", "10**5000 vs 1"],
)
def test_huge_numbers_are_a_mismatch_not_an_exception_cpu(grader_sbx, ret, want):
    """Numbers no float holds (a float against 2**1100, 10**400 against 2.5, an int over the JSON limit)."""
    v = judge(f"def f(x):\n    return {ret}\n", call_tests([want]), grader_sbx)
    held(v)


@pytest.mark.parametrize(
    "printed",
    ["1e1000000", "1e-1000000", "-1e999999999", "inf", "nan", "9" * 99],
    ids=["1e1000000", "1e-1000000", "-1e999999999", "inf", "nan", "99 nines"],
)
def test_stdin_output_that_overflows_decimal_is_wrong_cpu(grader_sbx, printed):
    """A stdin test's output that overflows Decimal arithmetic (1e1000000 against 2.5)."""
    tests = parse_tests({"mode": "stdin", "tests": [{"input": "", "output": "2.5"}]})
    v = judge(f"print({printed!r})\n", tests, grader_sbx)
    held(v)
    assert v.outcomes == ("wrong",), v


# ------------------------------------------------------------------------------------------ containment
SURVIVOR = textwrap.dedent("""
    import ctypes, os, time
    libc = ctypes.CDLL(None)
    if os.fork() == 0:
        libc.prctl(1, 0, 0, 0, 0)  # PR_SET_PDEATHSIG 0
        os.setsid()
        time.sleep(60)
        os._exit(0)
    libc.prctl(1, 0, 0, 0, 0)
    os.setsid()
    print("started", flush=True)
    time.sleep(60)
""")


@needs_root
def test_no_process_survives_the_wall_kill_cpu(sbx):
    """Clearing the parent-death signal and calling setsid(), then outliving the wall limit."""
    before = set(processes_of(set(uid_range(os.getpid()))))
    r = sbx.run({"main.py": SURVIVOR}, "main.py", "", Limits(wall_s=1.0))
    assert r.status == "timeout"
    assert set(processes_of(set(uid_range(os.getpid())))) <= before == set()


@needs_root
def test_no_process_survives_a_killed_caller_cpu(sbx):
    """The same program while its caller is SIGKILLed."""
    code = (
        "from e2c.sandbox import make, Limits\n"
        f"sbx = make({sbx.name!r})\nprint('ready', flush=True)\n"
        f"sbx.run({{'main.py': {SURVIVOR!r}}}, 'main.py', '', Limits(wall_s=60))\n"
    )
    caller = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert caller.stdout is not None and caller.stdout.readline().strip() == "ready"
    uids = set(uid_range(caller.pid))
    end = time.monotonic() + 10
    while len(processes_of(uids)) < 2 and time.monotonic() < end:
        time.sleep(0.05)
    assert processes_of(uids), "the program never started"
    caller.send_signal(signal.SIGKILL)
    caller.wait()
    end = time.monotonic() + 5
    while processes_of(uids) and time.monotonic() < end:
        time.sleep(0.05)
    assert not processes_of(uids), "processes outlived the caller"


@needs_root
def test_nothing_is_left_in_the_world_writable_folders_cpu(sbx):
    """Files, folders and sockets left in /tmp, /var/tmp, /dev/shm and /run/lock."""
    name = "e2c-left-" + uuid.uuid4().hex
    prog = textwrap.dedent(f"""
        import os, socket
        for d in {PRIVATE_DIRS!r}:
            for kind in ("file", "dir", "sock"):
                p = os.path.join(d, "{name}-" + kind)
                try:
                    if kind == "file":
                        open(p, "w").write("x")
                    elif kind == "dir":
                        os.mkdir(p)
                    else:
                        socket.socket(socket.AF_UNIX).bind(p)
                except OSError:
                    pass
    """)
    sbx.run({"main.py": prog}, "main.py", "", Limits(wall_s=5.0))
    left = [os.path.join(d, n) for d in PRIVATE_DIRS if os.path.isdir(d) for n in os.listdir(d) if name in n]
    assert left == []


@needs_root
def test_root_folder_open_to_all_cannot_be_written_cpu(sbx, tmp_path_factory):
    """A root-owned 0777 folder without the sticky bit, holding root's file and root's listening socket:
    replacing either, or leaving a file there."""
    base = f"/var/lib/e2c-ww-{uuid.uuid4().hex[:8]}"
    os.makedirs(base)
    os.chmod(base, 0o777)  # no sticky bit: anyone may replace anything in it
    try:
        target = os.path.join(base, "roots.txt")
        with open(target, "w") as f:
            f.write("root's")
        os.chmod(target, 0o644)
        srv = socket.socket(socket.AF_UNIX)
        srv.bind(os.path.join(base, "trainer.sock"))
        os.chmod(
            os.path.join(base, "trainer.sock"), 0o755
        )  # root's to connect to; the folder lets anyone unlink it
        srv.listen(1)
        srv.settimeout(0.2)
        prog = textwrap.dedent(f"""
            import os, socket
            base = {base!r}
            for step in ("replace", "new", "sock", "connect"):
                try:
                    if step == "replace":
                        os.replace(os.path.join(base, "mine"), os.path.join(base, "roots.txt")) if open(os.path.join(base, "mine"), "w").write("x") else None
                    elif step == "new":
                        open(os.path.join(base, "left.txt"), "w").write("x")
                    elif step == "sock":
                        os.unlink(os.path.join(base, "trainer.sock"))
                    else:
                        c = socket.socket(socket.AF_UNIX)
                        c.connect(os.path.join(base, "trainer.sock"))
                        c.sendall(b"hello")
                    print(step, "done")
                except OSError as e:
                    print(step, "refused", type(e).__name__)
        """)
        r = sbx.run({"main.py": prog}, "main.py", "", Limits(wall_s=5.0))
        try:
            conn, _ = srv.accept()
            got = conn.recv(16)
        except OSError:
            got = b""
        srv.close()
        with open(target) as f:
            assert f.read() == "root's"
        assert sorted(os.listdir(base)) == ["roots.txt", "trainer.sock"], (os.listdir(base), r.stdout)
        assert stat.S_ISSOCK(os.stat(os.path.join(base, "trainer.sock")).st_mode)
        assert got == b"", r.stdout
    finally:
        shutil.rmtree(base, ignore_errors=True)


@needs_root
def test_a_uid_is_never_reused_while_a_process_of_it_lives_cpu(sbx):
    """A process of a run's uid left by a caller that died (its pid, and so its uid range, reused)."""
    uid = uid_range(os.getpid())[0]
    # What a dead caller could have left: a daemon of the uid that ignores every signal it can.
    daemon = subprocess.Popen(
        [
            "setpriv",
            f"--reuid={uid}",
            f"--regid={uid}",
            "--clear-groups",
            "--",
            "/usr/bin/python3",
            "-c",
            "import signal, time\nfor s in (1, 2, 15):\n    signal.signal(s, signal.SIG_IGN)\ntime.sleep(60)",
        ],
        start_new_session=True,
    )
    try:
        end = time.monotonic() + 5
        while not processes_of({uid}) and time.monotonic() < end:
            time.sleep(0.02)
        assert processes_of({uid}), "the stand-in daemon never started"
        local_mod._pool = None  # as in a new process that got this pid: its uid pool is made on first use
        fresh = make(sbx.name)
        # The pool's first hand-out (this run's, or bwrap's start-up probe's) is after a pass over /proc that
        # kills what is left under any of its uids.
        r = fresh.run({"main.py": "import os\nprint(os.getuid())"}, "main.py", "", Limits(wall_s=5.0))
        assert r.status == "ok" and int(r.stdout) in uid_range(os.getpid()), r
        assert daemon.wait(timeout=5) == -signal.SIGKILL
        assert not processes_of({uid})
    finally:
        daemon.kill()
        daemon.wait()
