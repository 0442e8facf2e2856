"""The ``e2c`` command: every subcommand runs its module's ``main`` with the same parser and the same
bad-input contract (one ``error:`` line, exit 2, nothing written), named ``e2c <command>``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from entry_fuzz import (
    ROOT,
    bad_values,
    call_main,
    contract_broken,
    fill,
    load,
    make_context,
    snapshot,
    valued_flags,
)
from fuzz_entries import ENTRIES

from e2c.commandline import command, parsing
from e2c.commandline.command import BY_NAME, COMMANDS, command_flags, completion_script

# Which registered entry point each command runs (the generated bad-input cases of that entry point).
ENTRY_OF = {
    c.name: next(
        n
        for n, e in ENTRIES.items()
        if e.target.removesuffix(".__main__") == c.module.removesuffix(".__main__")
    )
    for c in COMMANDS
}


def run(argv: list[str], env: dict[str, str] | None = None):
    return call_main(command.main, argv, {"HF_HUB_OFFLINE": "1", **(env or {})}, prog="e2c")


def test_help_lists_every_command_once(capsys: pytest.CaptureFixture[str]) -> None:
    assert command.main(["--help"]) == 0
    out = capsys.readouterr().out
    listed = [line.split()[0] for line in out.splitlines() if line.startswith("  ")]
    assert listed == [*BY_NAME, "completion"]
    assert len(BY_NAME) == len(COMMANDS) >= 18
    for name in ("quickstart", "eval", "tts", "view", "sft", "rl", "data", "claims", "sandbox"):
        assert name in BY_NAME


def test_no_command_prints_the_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert command.main([]) == 0
    assert "usage: e2c <command>" in capsys.readouterr().out


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_each_command_has_help_under_its_own_name(name: str) -> None:
    o = run([name, "--help"])
    assert o.code == 0, o.stderr[-2000:]
    assert o.stdout.startswith(f"usage: e2c {name} "), o.stdout[:300]


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["evl"], "e2c names an unknown command 'evl' (did you mean 'eval'?); valid: quickstart,"),
        (["--model", "x"], "e2c: --model is not a command; run e2c --help"),
        (["completion", "fish"], "unknown shell 'fish'; valid: bash"),
        (["completion"], "usage: e2c completion bash"),
        (
            ["completion", "flags", "tss"],
            "e2c completion flags names an unknown command 'tss' (did you mean 'tts'?)",
        ),
    ],
)
def test_bad_commands_are_one_line(argv: list[str], words: str) -> None:
    o = run(argv)
    assert contract_broken(o) is None, (o.code, o.stderr)
    assert words in o.stderr


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_bad_flag_values_keep_the_contract_through_the_command(name: str, tmp_path: Path) -> None:
    """The generated bad-input cases of the command's entry point (the first bad value of every valued
    flag), run through ``e2c <name>``: each refused in one line, exit 2, earlier files unchanged; a refusal
    the parser makes names ``e2c <name>``."""
    entry = ENTRIES[ENTRY_OF[name]]
    parser = load(entry.target).build_parser()
    ctx = make_context(tmp_path / "ctx")
    good = fill(entry.good, ctx, tmp_path)
    env = {"E2C_CHECK_ONLY": "1", **entry.env}
    ok = run([name, *good], env)
    assert ok.code == 0 and "checks passed" in ok.stderr, (good, ok.code, ok.stderr[-2000:])
    before = snapshot(ctx.file, ctx.folder)
    failures, named, cases = [], 0, 0
    for flag, action in valued_flags(parser):
        values = [] if flag in entry.skip else bad_values(action, ctx)
        if not values:
            continue
        cases += 1
        o = run([name, *good, flag, values[0]], env)
        why = contract_broken(o)
        if why:
            failures.append(f"{flag} {values[0][:40]!r}: {why}")
        named += f"(see e2c {name} --help)" in o.stderr
    assert not failures, "\n".join(failures)
    assert snapshot(ctx.file, ctx.folder) == before
    if cases:
        assert named, f"no refusal named e2c {name}"


def test_resume_command_names_the_e2c_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("E2C_BASE_DIR", raising=False)
    with parsing.command_prog("e2c tts", ["/venv/bin/e2c", "tts"]):
        line = parsing.resume_command(["-m", "e2c.tts"], ["--config", "a b.yaml"])
    assert line.endswith("&& /venv/bin/e2c tts --config 'a b.yaml'")
    assert parsing.resume_command(["-m", "e2c.tts"], []).endswith(f"&& {sys.executable} -m e2c.tts")
    # the base folder that decided where the run's folder is goes with it
    monkeypatch.setenv("E2C_BASE_DIR", "/runs/my base")
    line = parsing.resume_command(["-m", "e2c.study.reproduce"], [])
    assert line.endswith(f"&& E2C_BASE_DIR='/runs/my base' {sys.executable} -m e2c.study.reproduce")


def test_completion_flags_come_from_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    flags = command_flags("eval")
    assert {"--model", "--temperature", "--temp", "--help"} <= set(flags)
    assert "check" in command_flags("sandbox")  # a positional's choices
    assert command.main(["completion", "flags", "eval"]) == 0
    assert capsys.readouterr().out.split() == flags


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completion_completes_commands_and_flags(tmp_path: Path) -> None:
    """The script as bash runs it: a command from its prefix, then a flag from the command's parser (the
    ``e2c`` on PATH is a stand-in that runs this checkout's ``python -m e2c``)."""
    shim = tmp_path / "bin" / "e2c"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m e2c "$@"\n')
    shim.chmod(0o755)
    script = completion_script("bash")
    probe = (
        f"{script}\n"
        'COMP_WORDS=(e2c qui); COMP_CWORD=1; _e2c_complete; echo "1:${COMPREPLY[*]}"\n'
        'COMP_WORDS=(e2c eval --tem); COMP_CWORD=2; _e2c_complete; echo "2:${COMPREPLY[*]}"\n'
    )
    env = {**os.environ, "PATH": f"{shim.parent}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT)}
    r = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "1:quickstart" in r.stdout
    assert "2:--temp --temperature" in r.stdout


def test_the_installed_script_runs_a_command() -> None:
    """The README's set-up installs ``e2c`` beside the interpreter; it is the same door (a real process)."""
    script = Path(sys.executable).parent / "e2c"
    assert script.exists(), f"{script} is missing: reinstall the package (pip install -e .)"
    r = subprocess.run([str(script), "evl"], capture_output=True, text=True, timeout=120)
    assert (
        r.returncode == 2
        and r.stderr.strip().splitlines() == [r.stderr.strip()]
        and "did you mean 'eval'" in r.stderr
    )
    r = subprocess.run([str(script), "sandbox", "--help"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("usage: e2c sandbox")
