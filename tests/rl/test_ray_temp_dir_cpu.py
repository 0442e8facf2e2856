"""Ray's temp folder is private to the run: ray's default, ``/tmp/ray``, ends up ``drwxrwxrwx`` (ray chmods
every folder it makes to 0777, the one it is given included), so a program a code reward runs could reach the
trainer's sockets there. The toolkit gives ray ``<tmp>/e2c-ray-XXXXXXXX/ray`` instead, the parent made with
mode 0700 (:func:`e2c.launch.cluster.private_ray_dir`): the RL launcher for the ray verl starts, and
``scripts/slurm_e2c.sbatch`` on every node.

Ray itself is not started here (seconds of start-up): the folder is made as the launcher makes it and ray's
own doings are copied (its 0777 folders and a listening socket in ``sockets/``). A real ``ray.init`` with
that folder was checked by hand: its temp, session and ``sockets`` folders were 0777 and the parent stayed
0700, and nothing was made in ``/tmp/ray``."""

from __future__ import annotations

import argparse
import os
import socket
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2c.launch.cluster import RAY_TEMP_MAX, private_ray_dir, remove_private_ray_dir
from e2c.sandbox import Limits, make

# The longest socket path ray makes under its temp folder (a session is named by date, time, microseconds
# and pid), and the unix socket limit it must fit.
RAY_SOCKET = "/session_2026-11-28_23-58-31_948321_4194304/sockets/dash_MetricsHead"
UNIX_PATH_MAX = 107


@pytest.fixture
def ray_folder() -> Iterator[tuple[Path, Path]]:
    """The folder as the launcher makes it, then as ray leaves it: (ray's temp folder, its socket)."""
    temp = private_ray_dir()
    sockets = temp / "session_x" / "sockets"
    sockets.mkdir(parents=True)
    for d in (temp, temp / "session_x", sockets):
        os.chmod(d, 0o777)  # ray's try_to_create_directory makes each of its folders world-writable
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(sockets / "raylet"))
    server.listen(1)
    os.chmod(sockets / "raylet", 0o777)
    try:
        yield temp, sockets / "raylet"
    finally:
        server.close()
        remove_private_ray_dir(temp)


PROBE = """
import os, socket, sys
parent, temp, sock = sys.argv[1:4] if len(sys.argv) > 3 else ({args})
seen = []
for p in (parent, temp, os.path.dirname(sock)):
    try:
        seen.append(('list', p, sorted(os.listdir(p))))
    except OSError as e:
        seen.append(('list', p, type(e).__name__))
for p in (os.path.join(parent, 'x'), os.path.join(temp, 'x'), os.path.join(os.path.dirname(sock), 'x')):
    try:
        open(p, 'w').close()
        seen.append(('write', p, 'ok'))
    except OSError as e:
        seen.append(('write', p, type(e).__name__))
try:
    c = socket.socket(socket.AF_UNIX)
    c.connect(sock)
    seen.append(('connect', sock, 'ok'))
except OSError as e:
    seen.append(('connect', sock, type(e).__name__))
print(repr(seen))
"""


def probe_lines(out: str) -> list[tuple[str, str, object]]:
    import ast

    return ast.literal_eval(out.strip().splitlines()[-1])


def test_the_folder_is_fresh_private_and_short() -> None:
    a, b = private_ray_dir(), private_ray_dir()
    try:
        assert a != b and a.name == b.name == "ray" and not a.exists()
        st = a.parent.stat()
        assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.getuid()
        assert len(str(a)) <= RAY_TEMP_MAX and len(str(a)) + len(RAY_SOCKET) <= UNIX_PATH_MAX
    finally:
        remove_private_ray_dir(a)
        remove_private_ray_dir(b)
    assert not a.parent.exists() and not b.parent.exists()


def test_a_long_temp_dir_falls_back_to_tmp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    long = tmp_path / ("x" * 60)
    long.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(long))
    d = private_ray_dir()
    try:
        assert d.parent.parent == Path("/tmp") and len(str(d)) <= RAY_TEMP_MAX
    finally:
        remove_private_ray_dir(d)


def test_the_umask_does_not_matter() -> None:
    old = os.umask(0)
    try:
        d = private_ray_dir()
    finally:
        os.umask(old)
    try:
        assert stat.S_IMODE(d.parent.stat().st_mode) == 0o700
    finally:
        remove_private_ray_dir(d)


ROOT_ONLY = pytest.mark.skipif(
    os.geteuid() != 0,
    reason="without root the local sandbox runs programs as this user (a user namespace): a 0700 folder "
    "keeps other users out, not this one",
)


@ROOT_ONLY
def test_a_sandboxed_program_cannot_list_write_or_connect(ray_folder: tuple[Path, Path]) -> None:
    temp, sock = ray_folder
    args = ", ".join(repr(str(p)) for p in (temp.parent, temp, sock))
    r = make("local").run({"main.py": PROBE.format(args=args)}, "main.py", "", Limits())
    assert r.status == "ok", r.stderr
    seen = probe_lines(r.stdout)
    assert len(seen) == 7
    # Refused: by the 0700 parent (PermissionError), or not even there (a private /tmp in the sandbox).
    assert all(what in ("PermissionError", "FileNotFoundError") for _, _, what in seen), seen
    assert not any(p.name == "x" for p in temp.parent.rglob("x"))


@ROOT_ONLY
def test_another_user_is_kept_out_by_the_folder_alone(ray_folder: tuple[Path, Path]) -> None:
    """No sandbox, no namespace: a process of another user (what the local sandbox runs a program as) sees
    /tmp as it is, and still cannot list, enter or write the folder, nor reach ray's socket."""
    temp, sock = ray_folder
    cmd = ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"]
    cmd += [sys.executable, "-I", "-c", PROBE.format(args="None"), str(temp.parent), str(temp), str(sock)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd="/")
    assert r.returncode == 0, r.stderr[-2000:]
    seen = probe_lines(r.stdout)
    assert [what for _, _, what in seen] == ["PermissionError"] * 7, seen
    # ...while ray's world-writable folder inside would have let it in: the parent is what keeps it out.
    assert stat.S_IMODE(temp.stat().st_mode) == 0o777
    control = Path(tempfile.mkdtemp(prefix="e2c-control-", dir="/tmp"))
    try:
        os.chmod(control, 0o777)
        look = [*cmd[:6], sys.executable, "-I", "-c", f"import os; open({str(control / 'x')!r}, 'w')"]
        assert subprocess.run(look, capture_output=True, timeout=60, cwd="/").returncode == 0
        assert (control / "x").is_file()  # the same user, in a folder like ray's without the parent
    finally:
        subprocess.run(["rm", "-rf", str(control)], check=False)


# ------------------------------------------------------------------------------------------- the launcher
def test_the_launcher_gives_verl_a_private_folder_and_removes_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from e2c.rl import launch

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    seen: list[tuple[str, int]] = []

    def call(module: str, cmd: list[str], *_: object, **__: object) -> int:
        (override,) = [c for c in cmd if c.startswith(f"+{launch.RAY_TEMP_KEY}=")]
        temp = Path(override.partition("=")[2])
        seen.append((str(temp), stat.S_IMODE(temp.parent.stat().st_mode)))
        return rc

    monkeypatch.setattr(launch, "run_module", call)
    args = argparse.Namespace(algo="grpo", stage=1, output_dir=tmp_path, overrides=[], gpus=0)
    for rc in (0, 1):
        assert launch._run_stage(args, ["python", "-m", "verl", "trainer.x=1"]) == rc
    (ok, ok_mode), (failed, failed_mode) = seen
    assert ok != failed and ok_mode == failed_mode == 0o700
    assert ok.startswith(tempfile.gettempdir()) or ok.startswith("/tmp/")
    assert not Path(ok).parent.exists()  # removed after a stage that succeeded
    assert Path(failed).parent.is_dir()  # kept, with ray's logs, after one that failed
    remove_private_ray_dir(Path(failed))


def test_the_launcher_leaves_a_clusters_or_the_users_folder_alone() -> None:
    from e2c.rl import launch

    assert launch.ray_temp_dir([], {"RAY_ADDRESS": "10.0.0.1:6379"}) is None
    assert launch.ray_temp_dir([f"+{launch.RAY_TEMP_KEY}=/scratch/ray"], {}) is None
    d = launch.ray_temp_dir(["trainer.x=1"], {})
    assert d is not None and d.parent.is_dir()
    remove_private_ray_dir(d)


def test_the_cluster_script_starts_every_ray_node_in_a_private_folder() -> None:
    from bad_input import run

    r = run("scripts/slurm_e2c.sbatch", "--dry-run", "--nodes", "3", "grpo", "--stage", "1")
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stdout.splitlines() if line.startswith("+ ")]
    made = [line for line in lines if " mkdir -m 700 /tmp/e2c-ray-" in line]
    assert sorted(line.split(" -w ")[1].split()[0] for line in made) == ["node0", "node1", "node2"]
    folder = made[0].rsplit(" ", 1)[1]
    starts = [line for line in lines if "ray start" in line]
    assert len(starts) == 3 and all(f"--temp-dir={folder}/ray" in line for line in starts)
    assert max(lines.index(m) for m in made) < min(lines.index(s) for s in starts)
    assert len(f"{folder}/ray") + len(RAY_SOCKET) <= UNIX_PATH_MAX
