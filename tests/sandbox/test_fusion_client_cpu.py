"""The SandboxFusion client against a stand-in server on 127.0.0.1 (no container here): the request it
sends (``run_code``: code, stdin, files in base64, limits) and how each answer maps to a run's status. What
runs the program on a real server is the server's business; docs/code.md says what was verified where."""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from e2c.rewards.code_judge import judge
from e2c.rewards.code_tests import parse_tests
from e2c.sandbox import Limits, make

SEEN: list[dict] = []
ANSWERS: list[object] = []


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        SEEN.append({"path": self.path, **body})
        answer = ANSWERS.pop(0)
        raw = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def url():
    srv = HTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_port}"
    srv.shutdown()


def finished(stdout: str, rc: int = 0, status: str = "Finished") -> dict:
    return {
        "status": "Success",
        "run_result": {"status": status, "return_code": rc, "stdout": stdout, "stderr": ""},
    }


def test_request_carries_the_program_its_files_and_limits_cpu(url: str) -> None:
    SEEN.clear()
    ANSWERS[:] = [finished("3\n")]
    sbx = make(f"fusion:{url}")
    r = sbx.run(
        {"main.py": "print(1)", "solution.py": "x = 1"}, "main.py", "1 2\n", Limits(wall_s=4, memory_mb=256)
    )
    assert (r.status, r.stdout) == ("ok", "3\n")
    req = SEEN[0]
    assert req["path"] == "/run_code" and req["code"] == "print(1)" and req["language"] == "python"
    assert req["stdin"] == "1 2\n" and req["run_timeout"] == 4 and req["memory_limit_MB"] == 256
    assert base64.b64decode(req["files"]["solution.py"]).decode() == "x = 1"


@pytest.mark.parametrize(
    ("answer", "status"),
    [
        (finished("", 1), "exit"),
        (finished("", 0, "TimeLimitExceeded"), "timeout"),
        ({"status": "SandboxError", "message": "no worker"}, "sandbox_error"),
        (b"<html>502</html>", "sandbox_error"),
        ({"status": "Success"}, "sandbox_error"),
    ],
)
def test_answers_map_to_statuses_cpu(url: str, answer: object, status: str) -> None:
    ANSWERS[:] = [answer]
    assert make(url).run({"main.py": "x"}, "main.py", "", Limits()).status == status


def test_judge_through_the_server_compares_here_cpu(url: str) -> None:
    """The server runs the driver; the expected outputs stay in this process (the request never holds them)."""
    SEEN.clear()
    tests = parse_tests({"mode": "stdin", "tests": [{"input": "2\n", "output": "secret-4"}]})
    ANSWERS[:] = [finished("secret-4\n")]
    v = judge("print('secret-' + str(int(input()) * 2))", tests, make(url))
    assert v.correct
    assert "secret-4" not in json.dumps(SEEN[0])


def test_a_server_that_errs_is_an_error_not_a_wrong_answer_cpu(url: str) -> None:
    ANSWERS[:] = [{"status": "SandboxError", "message": "down"}]
    tests = parse_tests({"mode": "call", "fn_name": "f", "tests": [{"args": [1], "output": 1}]})
    assert judge("def f(x): return x", tests, make(url)).status == "error"
