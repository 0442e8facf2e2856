"""A command's sandbox is built once (building probes the machine; bwrap's starts bubblewrap): the readiness
check runs on the same backend the command then passes where programs run, and the setting reaches the
workers it starts through ``$E2C_SANDBOX`` (:func:`e2c.sandbox.from_env`)."""

from __future__ import annotations

import os

import e2c.sandbox as sandbox
from e2c.sandbox import SandboxSpec


def test_use_builds_the_backend_once_and_returns_it_cpu(monkeypatch):
    built = []
    real_make = sandbox.make

    def counting_make(spec=None):
        sbx = real_make(spec)
        built.append(sbx)
        return sbx

    monkeypatch.setattr(sandbox, "make", counting_make)
    monkeypatch.setattr(sandbox, "_from_env", None)
    monkeypatch.delenv(sandbox.SANDBOX_ENV, raising=False)
    lines = []
    sbx = sandbox.use(None, lines.append, "test")
    assert len(built) == 1 and sbx is built[0]
    assert lines[0].startswith("[test] sandbox local: ") and "ran in" in lines[0]
    assert str(SandboxSpec("local")) in lines[0]
    # Exported for workers started later; this process's own default is untouched until one asks for it.
    assert os.environ[sandbox.SANDBOX_ENV] == "local" and sandbox._from_env is None


def test_from_env_builds_what_the_environment_names_once_cpu(monkeypatch):
    built = []
    monkeypatch.setattr(sandbox, "make", lambda spec=None: built.append(str(spec)) or object())
    monkeypatch.setattr(sandbox, "_from_env", None)
    monkeypatch.setenv(sandbox.SANDBOX_ENV, "fusion:http://127.0.0.1:9")
    first = sandbox.from_env()
    assert sandbox.from_env() is first and built == ["fusion:http://127.0.0.1:9"]
