"""Containment: each hostile program is contained by every backend this machine has, or is the documented
limit of that backend (e2c/sandbox/local.py, bwrap.py; docs/code.md), and no process outlives its run,
nor the caller when the caller is killed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import uuid

import pytest

from e2c.rewards.code_judge import judge
from e2c.rewards.code_tests import parse_tests
from e2c.sandbox import Limits, make
from e2c.sandbox.local import UID_BASE, UID_MAX, probe_isolation, uid_range

BACKENDS = ["local"] + (["bwrap"] if shutil.which("bwrap") else [])
ISO = probe_isolation()


@pytest.fixture(scope="module", params=BACKENDS)
def sbx(request):
    return make(request.param)


def run(sbx, code: str, stdin: str = "", **lim):
    return sbx.run({"main.py": textwrap.dedent(code)}, "main.py", stdin, Limits(**{"wall_s": 5.0, **lim}))


def sandbox_processes(lo: int = UID_BASE, hi: int = UID_MAX) -> list[int]:
    """Pids of live (not zombie) processes owned by a sandbox user."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/status") as f:
                st = f.read()
        except OSError:
            continue
        uid = int(st.split("\nUid:")[1].split()[0])
        state = st.split("\nState:")[1].split()[0]
        if lo <= uid < hi and state != "Z":
            out.append(int(d))
    return out


def wait_none_left(timeout: float = 5.0) -> list[int]:
    """This process's sandbox programs still alive after ``timeout``: the users of its own uid range only
    (each caller has one), so another test worker's runs at the same moment are not counted."""
    mine = uid_range(os.getpid())
    end = time.monotonic() + timeout
    while True:
        left = sandbox_processes(mine[0], mine[-1] + 1)
        if not left or time.monotonic() > end:
            return left
        time.sleep(0.1)


needs_root = pytest.mark.skipif(
    ISO.mode != "root", reason="the per-run users need root (the sandbox's root mode)"
)


def test_infinite_loop_is_killed_within_its_limit_plus_half_a_second_cpu(sbx):
    t = time.monotonic()
    r = run(sbx, "while True: pass", wall_s=1.0)
    took = time.monotonic() - t
    assert r.status == "timeout"
    assert took < 1.5, took
    assert not wait_none_left()


def test_sleeping_program_is_killed_at_the_wall_limit_cpu(sbx):
    t = time.monotonic()
    r = run(sbx, "import time; time.sleep(60)", wall_s=1.0)
    assert r.status == "timeout" and time.monotonic() - t < 1.5


def test_memory_bomb_is_stopped_by_the_address_space_limit_cpu(sbx):
    r = run(sbx, "x = []\nwhile True: x.append(bytearray(50 * 1024 * 1024))", memory_mb=512)
    assert r.status == "memory", r
    assert r.seconds < 5


def test_fork_bomb_is_bounded_and_leaves_nothing_cpu(sbx):
    r = run(sbx, "import os\nwhile True:\n    os.fork()", wall_s=2.0, nproc=16)
    assert r.status in ("exit", "timeout")
    assert not wait_none_left()


def test_gigabyte_print_stops_at_the_output_limit_cpu(sbx):
    r = run(
        sbx, "import sys\nchunk = 'x' * 65536\nfor _ in range(16384):\n    sys.stdout.write(chunk)", file_mb=4
    )
    assert r.status == "output_limit", r.status
    assert len(r.stdout) <= 4 * 1024 * 1024


def test_file_over_the_size_limit_is_refused_cpu(sbx):
    r = run(sbx, "open('big', 'wb').write(b'x' * (8 << 20))\nprint('wrote')", file_mb=2)
    assert r.status != "ok" and "wrote" not in r.stdout


@pytest.mark.skipif(
    ISO.mode == "plain", reason="no network namespace on this machine (local's documented limit)"
)
def test_no_connection_to_a_listener_on_localhost_cpu(sbx):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    srv.settimeout(0.5)
    port = srv.getsockname()[1]
    code = f"""
        import socket
        try:
            socket.create_connection(("127.0.0.1", {port}), timeout=2).sendall(b"leak")
            print("connected")
        except OSError as e:
            print("refused", type(e).__name__)
    """
    r = run(sbx, code)
    with pytest.raises(socket.timeout):
        srv.accept()
    srv.close()
    assert r.stdout.startswith("refused"), r


@needs_root
def test_writes_outside_the_run_folder_are_refused_or_removed_cpu(sbx, tmp_path):
    tmp_path.chmod(0o755)  # a folder of the caller's, readable by all, writable by the caller only
    target = tmp_path / "pwned"
    name = f"/tmp/e2c-escape-{uuid.uuid4().hex}"
    code = f"""
        for p in ({str(target)!r}, {name!r}):
            try:
                open(p, "w").write("x")
                print("wrote", p)
            except OSError as e:
                print("refused", p, type(e).__name__)
    """
    r = run(sbx, code)
    assert f"refused {target}" in r.stdout
    assert not target.exists()
    # /tmp is world-writable: local removes what the run's user left there; bwrap gives the run its own /tmp.
    assert not os.path.exists(name)


def test_killing_the_parent_does_not_reach_the_caller_cpu(sbx):
    code = f"""
        import os, signal
        for pid in (os.getppid(), {os.getpid()}, 1):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError as e:
                print(pid, type(e).__name__)
        print("survived")
    """
    r = run(sbx, code)
    # The test process is alive to assert this; the program's own namespace may end with it.
    assert r.status in ("ok", "exit")


def test_double_forked_daemon_is_not_left_behind_cpu(sbx):
    code = """
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(60)
            os._exit(0)
        print("parent done")
    """
    r = run(sbx, code)
    assert r.status == "ok" and "parent done" in r.stdout
    assert not wait_none_left()


def test_early_exit_passes_no_test_cpu(sbx):
    tests = parse_tests({"mode": "call", "fn_name": "f", "tests": [{"args": [1], "output": 2}]})
    for prog in ("import sys; sys.exit(0)\ndef f(x): return 2", "import os; os._exit(0)\ndef f(x): return 2"):
        v = judge(prog, tests, sbx)
        assert v.status == "ok" and not v.correct and v.passed == 0


def test_program_searching_memory_for_the_expected_outputs_finds_nothing_cpu(sbx):
    secret = "e2c-secret-" + uuid.uuid4().hex
    prog = textwrap.dedent(f"""
        import gc, os, sys

        def hunt():
            found = []
            for o in gc.get_objects():
                for v in (o.values() if isinstance(o, dict) else o if isinstance(o, (list, tuple)) else ()):
                    if isinstance(v, str) and v.startswith("e2c-secret-"):
                        found.append(v)
            for root, _, files in os.walk("."):
                for n in files:
                    try:
                        t = open(os.path.join(root, n), errors="replace").read()
                    except OSError:
                        continue
                    if "e2c-secret-" in t:
                        found.append(t[t.index("e2c-secret-"):][:43])
            for pid in os.listdir("/proc"):
                if pid.isdigit():
                    for part in ("environ", "cmdline"):
                        try:
                            t = open(f"/proc/{{pid}}/{{part}}", "rb").read().decode(errors="replace")
                        except OSError:
                            continue
                        if "e2c-secret-" in t:
                            found.append(t[t.index("e2c-secret-"):][:43])
            try:
                open(f"/proc/{os.getpid()}/mem", "rb").read(1)
                found.append("read the caller's memory")
            except OSError:
                pass
            return found

        def f(x):
            found = hunt()
            return found[0] if found else "nothing"
    """)
    tests = parse_tests({"mode": "call", "fn_name": "f", "tests": [{"args": [1], "output": secret}]})
    v = judge(prog, tests, sbx)
    assert v.status == "ok" and not v.correct


@needs_root
def test_no_process_outlives_a_killed_caller_cpu(tmp_path):
    for backend in BACKENDS:
        code = (
            "import sys\nfrom e2c.sandbox import make, Limits\n"
            f"sbx = make({backend!r})\nprint('ready', flush=True)\n"
            "sbx.run({'main.py': 'import time, os\\nos.fork()\\ntime.sleep(60)'}, 'main.py', '', Limits(wall_s=60))\n"
        )
        caller = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        assert caller.stdout.readline().strip() == "ready"
        uids = uid_range(caller.pid)
        base = uids[0]
        end = time.monotonic() + 10
        while not sandbox_processes(base, uids[-1] + 1) and time.monotonic() < end:
            time.sleep(0.05)
        assert sandbox_processes(base, uids[-1] + 1), f"{backend}: the program never started"
        caller.send_signal(signal.SIGKILL)
        caller.wait()
        end = time.monotonic() + 5
        while sandbox_processes(base, uids[-1] + 1) and time.monotonic() < end:
            time.sleep(0.1)
        assert not sandbox_processes(base, uids[-1] + 1), f"{backend}: processes outlived the caller"


def test_backend_describes_what_it_does_not_isolate_cpu(sbx):
    text = sbx.describe()
    assert "not isolated" in text.lower() or "NOT" in text
    assert json.dumps(text)


NOBODY = 65534
USERNS_CHECK = textwrap.dedent("""
    import json, os, time
    from e2c.rewards.code_judge import judge
    from e2c.rewards.code_tests import parse_tests
    from e2c.sandbox import Limits, make
    from e2c.sandbox.local import processes_of
    sbx = make("local")
    t = parse_tests({"mode": "call", "fn_name": "f", "time_limit": 1.0, "tests": [{"args": [0], "output": 0}]})
    slow = judge("import signal, time\\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\\ndef f(x):\\n"
                 "    t = time.monotonic()\\n    while time.monotonic() - t < 1.6:\\n        pass\\n    return x\\n", t, sbx)
    survivor = ("import ctypes, os, time\\nctypes.CDLL(None).prctl(1, 0, 0, 0, 0)\\nos.setsid()\\n"
                "print(os.getpid(), flush=True)\\ntime.sleep(60)\\n")
    r = sbx.run({"main.py": survivor}, "main.py", "", Limits(wall_s=1.0))
    time.sleep(0.3)
    left = [p for p in processes_of({os.getuid()}) if p != os.getpid()]
    print(json.dumps({"mode": sbx.iso.mode, "slow": slow.outcomes, "run": r.status, "left": left}))
""")


@needs_root
def test_user_namespace_mode_holds_the_timer_and_leaves_no_process_cpu():
    """The local backend without root (a user namespace), run here as nobody: a program that ignores
    SIGALRM still times out, and a program that clears its parent-death signal and calls setsid() leaves
    no process of the caller's user behind."""
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if not os.path.exists("/usr/bin/python3"):
        pytest.skip("no system python3 for nobody to run")
    # A copy of the package nobody can read (a checkout often sits below a private folder).
    src = tempfile.mkdtemp(prefix="e2c-userns-")
    try:
        os.chmod(src, 0o755)
        shutil.copytree(
            os.path.join(repo, "e2c"), os.path.join(src, "e2c"), ignore=shutil.ignore_patterns("__pycache__")
        )
        cmd = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
        cmd += [
            "env",
            "-i",
            f"HOME={src}",
            f"PYTHONPATH={src}",
            "PATH=/usr/bin:/bin",
            "/usr/bin/python3",
            "-B",
            "-c",
        ]
        p = subprocess.run([*cmd, USERNS_CHECK], capture_output=True, text=True, timeout=120, cwd=src)
    finally:
        shutil.rmtree(src, ignore_errors=True)
    if p.returncode != 0 and "ModuleNotFoundError" in p.stderr:
        pytest.skip("the system python3 lacks what e2c.sandbox imports: " + p.stderr.strip().splitlines()[-1])
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    if out["mode"] != "userns":
        pytest.skip(f"user namespaces are not allowed here (mode {out['mode']})")
    assert out["slow"] == ["timeout"] and out["run"] == "timeout" and out["left"] == [], out
