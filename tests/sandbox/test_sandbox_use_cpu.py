"""A command's sandbox is built once (building probes the machine; bwrap's starts bubblewrap): the readiness
check runs on the same backend the command then uses."""

from __future__ import annotations

import e2c.sandbox as sandbox
from e2c.sandbox import SandboxSpec


def test_use_builds_the_backend_once_and_keeps_it_cpu(monkeypatch):
    built = []
    real_make = sandbox.make

    def counting_make(spec=None):
        sbx = real_make(spec)
        built.append(sbx)
        return sbx

    monkeypatch.setattr(sandbox, "make", counting_make)
    monkeypatch.setattr(sandbox, "_current", None)
    monkeypatch.delenv(sandbox.SANDBOX_ENV, raising=False)
    lines = []
    sbx = sandbox.use(None, lines.append, "test")
    assert len(built) == 1 and sbx is built[0] and sandbox.current() is sbx
    assert lines[0].startswith("[test] sandbox local: ") and "ran in" in lines[0]
    assert str(SandboxSpec("local")) in lines[0]
