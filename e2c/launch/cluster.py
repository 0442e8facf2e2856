"""Wait for a ray cluster to have its nodes (``scripts/slurm_e2c.sbatch`` starts a head and workers, then
waits here before the stage's driver joins).

    python -m e2c.launch.cluster --address HEAD_IP:6379 --nodes 4 [--timeout 120]

Exits 0 once ``--nodes`` live nodes have joined, printing each change in the count; exits 1 with one line
naming the count it reached when ``--timeout`` seconds pass first.

Ray's temp folder (its sockets, logs and spilled objects) is private to the run wherever the toolkit starts
ray (:func:`private_ray_dir`: the RL launcher's own ray, and every node of ``scripts/slurm_e2c.sbatch``):
ray's default, ``/tmp/ray``, is made world-writable by ray itself, and a program a code reward runs (as
another user, in the local sandbox) could reach the trainer's sockets through it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from e2c.commandline.argtypes import TEXT, Number, whole
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.flags import add_setting_flags, from_flags, setting
from e2c.commandline.parsing import ArgumentParser
from e2c.core.errors import UserError, fail
from e2c.launch.devices import MAX_NODES

# Long enough for any cluster to come up; a longer wait is a typo (and time.sleep's limit is near).
MAX_TIMEOUT_S = 7 * 24 * 3600

RAY_TEMP_MAX = 39
"""Longest ray temp folder path: ray puts its sockets at ``<temp>/session_<date>_<time>_<us>_<pid>/sockets/
<name>`` (up to 68 characters after ``<temp>``: a 7-digit pid, ``dash_MetricsHead``), and a unix socket's
path must fit in 107 bytes."""
RAY_TEMP_PREFIX = "e2c-ray-"


def private_ray_dir(base: str | os.PathLike[str] | None = None) -> Path:
    """A fresh folder for ray's temp folder: ``<base>/e2c-ray-XXXXXXXX/ray``, its parent made here with
    mode 0700 and owned by this user (:func:`tempfile.mkdtemp`, which never reuses a name). Returns the
    ``ray`` path inside, for ``ray.init(_temp_dir=...)`` / ``ray start --temp-dir``; remove it with
    :func:`remove_private_ray_dir`.

    Ray makes every folder it creates world-writable (``chmod 0777``: its own temp folder, the session's,
    ``sockets/``), so the folder ray is given cannot be the private one: the 0700 parent above it is what
    keeps other users (a sandboxed program runs as one) from listing, entering or writing any of it.
    ``base``: the system's temp folder when the path is short enough for ray's sockets
    (:data:`RAY_TEMP_MAX`), else ``/tmp``."""
    if base is None:
        base = tempfile.gettempdir()
        if len(os.path.join(base, RAY_TEMP_PREFIX + "x" * 8, "ray")) > RAY_TEMP_MAX:
            base = "/tmp"
    parent = Path(tempfile.mkdtemp(prefix=RAY_TEMP_PREFIX, dir=base))
    os.chmod(parent, 0o700)  # mkdtemp's mode already, whatever the umask; said here, not assumed
    return parent / "ray"


def remove_private_ray_dir(temp_dir: Path) -> None:
    """Remove a folder :func:`private_ray_dir` made (ray's leftovers included), after ray stopped."""
    parent = temp_dir.parent
    if parent.name.startswith(RAY_TEMP_PREFIX):
        shutil.rmtree(parent, ignore_errors=True)


def live_nodes(address: str) -> int:
    """Live nodes of the ray cluster at ``address`` (0 while its head is not reachable yet)."""
    import socket

    import ray

    host, _, port = address.rpartition(":")
    try:  # ray.init retries an absent head for a minute; a closed port is answered at once
        socket.create_connection((host, int(port)), timeout=2).close()
    except (OSError, ValueError):
        return 0
    try:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False)
        return sum(1 for n in ray.nodes() if n.get("Alive"))
    except Exception:  # the head is still starting: connection refused, GCS not ready, ...
        return 0
    finally:
        if ray.is_initialized():
            ray.shutdown()


def wait_for_nodes(
    count: Callable[[], int],
    want: int,
    timeout_s: float,
    every_s: float = 2.0,
    say: Callable[[str], None] = print,
) -> int:
    """Poll ``count()`` until it reaches ``want`` or ``timeout_s`` passes; returns the last count."""
    deadline = time.monotonic() + timeout_s
    last = -1
    while True:
        have = count()
        if have != last:
            say(f"[e2c-cluster] {have} of {want} node(s) up")
            last = have
        if have >= want or time.monotonic() >= deadline:
            return have
        time.sleep(every_s)


@dataclass(frozen=True)
class ClusterSettings:
    """The command line: each field is one flag (``python -m e2c.launch.cluster --help``)."""

    address: str = field(
        default="",
        metadata=setting("the ray head, HOST:PORT", flag="--address", value=TEXT, required=True),
    )
    nodes: int = field(
        default=1,
        metadata=setting("live nodes to wait for (default: 1)", flag="--nodes", value=whole(1, MAX_NODES)),
    )
    # bounded: nan or inf would never compare as passed
    timeout: float = field(
        default=120.0,
        metadata=setting(
            "seconds before giving up; 0 counts the nodes once, now (default: 120)",
            flag="--timeout",
            value=Number(float, low=0.0, high=MAX_TIMEOUT_S),
        ),
    )


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog="python -m e2c.launch.cluster", description=__doc__.split("\n\n")[0])
    add_setting_flags(p, ClusterSettings)
    return p


def check_address(address: str) -> None:
    """``HOST:PORT`` with a port ray can listen on (a bad one would read as a head that never comes up)."""
    host, sep, port = address.rpartition(":")
    if not sep or not host.strip() or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise UserError(f"--address must be the ray head as HOST:PORT (port 1-65535), got {address!r}")


def main(argv: list[str] | None = None) -> int:
    args = from_flags(build_parser().parse_args(argv), ClusterSettings)
    check_address(args.address)
    checks_done()
    have = wait_for_nodes(lambda: live_nodes(args.address), args.nodes, args.timeout)
    if have < args.nodes:
        fail(
            f"the ray cluster at {args.address} has {have} of {args.nodes} node(s) after {args.timeout:g}s", 1
        )
    return 0


if __name__ == "__main__":
    run_main(main)
