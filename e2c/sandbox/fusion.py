"""The SandboxFusion backend: programs run on a SandboxFusion server (one per node on a cluster).

A run is one ``POST {url}/run_code`` with the main file as ``code``, the other files base64-encoded in
``files``, the standard input, ``run_timeout`` (the wall limit) and ``memory_limit_MB``. The server's own
isolation applies (containers; see its documentation); this client adds a request timeout of the wall
limit plus :data:`REQUEST_SLACK_S`. A server that does not answer, answers with an error status or with a
body that is not its schema is ``sandbox_error``: callers count it as an error, never as a wrong answer.

Start one per node with ``docker run -d --rm -p 8080:8080 volcengine/sandbox-fusion:server-20250609`` (the
Slurm launcher does this when ``E2C_SANDBOX=fusion:http://127.0.0.1:8080``, scripts/slurm_e2c.sbatch), and
check it with ``python -m e2c.sandbox check --sandbox fusion:http://127.0.0.1:8080``.
"""

from __future__ import annotations

import base64
import json
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

from e2c.sandbox.base import Limits, RunResult

REQUEST_SLACK_S = 10.0
_STATUS = {"TimeLimitExceeded": "timeout", "MemoryLimitExceeded": "memory"}


class FusionSandbox:
    """A client of one SandboxFusion server. Thread-safe (one HTTP request per run)."""

    name = "fusion"

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def describe(self) -> str:
        return f"fusion: a SandboxFusion server at {self.url} (its containers isolate; see its documentation)"

    def request(self, files: Mapping[str, str], main: str, stdin: str, limits: Limits) -> dict[str, Any]:
        """The ``run_code`` request body for a run."""
        return {
            "code": files[main],
            "language": "python",
            "stdin": stdin,
            "run_timeout": limits.wall_s,
            "memory_limit_MB": limits.memory_mb,
            "files": {
                name: base64.b64encode(text.encode("utf-8", "surrogatepass")).decode("ascii")
                for name, text in files.items()
                if name != main
            },
        }

    def run(self, files: Mapping[str, str], main: str, stdin: str, limits: Limits) -> RunResult:
        body = json.dumps(self.request(files, main, stdin, limits)).encode()
        req = urllib.request.Request(
            f"{self.url}/run_code", data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        start = time.monotonic()
        try:
            with urllib.request.urlopen(req, timeout=limits.wall_s + REQUEST_SLACK_S) as resp:
                raw = resp.read(limits.file_mb * 1024 * 1024 * 2 + 65536)
        except (urllib.error.URLError, OSError, ValueError) as e:
            return RunResult(
                "sandbox_error", None, "", f"SandboxFusion at {self.url}: {e}", time.monotonic() - start
            )
        return parse_response(raw, time.monotonic() - start)


def parse_response(raw: bytes, seconds: float) -> RunResult:
    """A ``run_code`` answer as a :class:`RunResult` (anything off its schema is ``sandbox_error``).

    >>> parse_response(b'{"status": "Success", "run_result": {"status": "Finished", "return_code": 0, '
    ...                b'"stdout": "3\\\\n", "stderr": "", "execution_time": 0.01}}', 0.1).stdout
    '3\\n'
    >>> parse_response(b'{"status": "SandboxError", "message": "boom"}', 0.1).status
    'sandbox_error'
    """
    try:
        obj = json.loads(raw)
        status = obj["status"]
        run = obj.get("run_result") or {}
    except (ValueError, KeyError, TypeError, AttributeError):
        return RunResult(
            "sandbox_error", None, "", f"SandboxFusion answered off its schema: {raw[:200]!r}", seconds
        )
    if status == "SandboxError" or not isinstance(run, dict) or not run:
        return RunResult(
            "sandbox_error", None, "", f"SandboxFusion: {str(obj.get('message', status))[:300]}", seconds
        )
    rc = run.get("return_code")
    stdout, stderr = str(run.get("stdout") or ""), str(run.get("stderr") or "")[-4096:]
    rstatus = run.get("status")
    if rstatus in _STATUS:
        kind = _STATUS[rstatus]
    elif rstatus == "Finished":
        kind = "ok" if rc == 0 else ("memory" if "MemoryError" in stderr[-400:] else "exit")
    else:
        kind = "exit"
    return RunResult(kind, rc if isinstance(rc, int) else None, stdout, stderr, seconds)
