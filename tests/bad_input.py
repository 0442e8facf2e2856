"""Helpers of the bad-input tests: run an entry point as a user would, snapshot files, and check
that a refusal is exactly one line on stderr with the right exit status.

A Python entry point (``-m module`` or ``file.py``) runs in this process (:func:`run_in_process`): its
``main`` under the same guard ``run_main`` puts around it, with the interpreter's output streams captured
at the file-descriptor level (so what libraries and child processes print is seen too) and the environment,
working folder, ``sys.argv`` and signal handlers put back afterwards. What only a new interpreter shows
(import-time output, the exit path itself) is checked by one real process per entry point in
``refusals/test_generated_cases_cpu.py``; ``real=True`` (and every shell script) runs a real process here.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MB = 1 << 20
GOOD = {"response": "plan</EXPLORATION><EXECUTION>\\boxed{2}</EXECUTION>", "answer": "2"}
# A place no process can create files in, whatever its user (root ignores permission bits).
UNWRITABLE = Path("/sys/kernel")


def skip_without_unwritable(case: str) -> None:
    if "unwritable" in case and not UNWRITABLE.is_dir():
        pytest.skip(f"{UNWRITABLE} is not here")


# The training scripts' env -> flag mapping, as scripts/<name> writes it: (module, [(variable, flag)], the
# variables its bash checks as whole numbers (low, high)). A script whose checks pass runs this module's main;
# test_train_flags_cpu.py::test_the_script_mirror_matches_the_scripts checks each against the real script.
TRAIN_SCRIPTS: dict[str, tuple[str, list[tuple[str, str]], dict[str, tuple[int, int | None]]]] = {
    "e2c_rl.sh": (
        "e2c.rl.launch",
        [("MODEL_PATH", "--model"), ("TRAIN_DATA", "--train-data"), ("VAL_DATA", "--val-data"),
         ("OUTPUT_DIR", "--root-dir"), ("TOTAL_TRAINING_STEPS", "--steps")],
        {"TOTAL_TRAINING_STEPS": (1, None), "NNODES": (1, 4096), "N_GPUS": (0, None)},
    ),
    "e2c_sft.sh": (
        "e2c.sft.run",
        [("MODEL_PATH", "--model"), ("TRAIN_DATA", "--train-data"), ("VAL_DATA", "--val-data"),
         ("OUTPUT_DIR", "--output-dir"), ("TOTAL_TRAINING_STEPS", "--steps")],
        {"TOTAL_TRAINING_STEPS": (1, None), "NNODES": (1, 4096), "NODE_RANK": (0, None), "N_GPUS": (0, None)},
    ),
    "e2c_curriculum.sh": (
        "e2c.rl.curriculum",
        [("CURRICULUM", "--config"), ("MODEL_PATH", "--model"), ("TRAIN_DATA", "--train-data"),
         ("VAL_DATA", "--val-data"), ("OUTPUT_DIR", "--output-dir")],
        {},
    ),
}  # fmt: skip
# Scripts that set up the environment, then run one module with their own arguments (the module whose main
# the package's __main__ runs).
PASS_THROUGH = {
    "eval.sh": "e2c.eval.run",
    "quickstart.sh": "e2c.quickstart.cli",
    "claims.sh": "e2c.claims.cli",
}
SCRIPT_ALIASES = {
    "e2c_dapo.sh": ("e2c_rl.sh", "E2C_ALGO", "dapo"),
    "ef-sft.sh": ("e2c_sft.sh", "E2C_SFT_MODE", "ef-sft"),
}
# The flag each alias fixes, as its e2c_fixed_flag call in scripts/_launch_checks.sh: (flag, the shortest
# abbreviation taken for it, the script's value). Another value is refused by the script's bash.
FIXED_FLAGS = {"e2c_dapo.sh": ("--algo", "--a", "dapo"), "ef-sft.sh": ("--mode", "--mode", "ef-sft")}


def fixed_flag_refused(name: str, args: list[str]) -> bool:
    """Whether scripts/<name>'s e2c_fixed_flag refuses ``args`` (its flag with another value before ``--``)."""
    if name not in FIXED_FLAGS:
        return False
    flag, shortest, value = FIXED_FLAGS[name]
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg == "--":
            return False
        key = arg.split("=", 1)[0]
        if len(key) >= len(shortest) and flag.startswith(key):
            if key != arg:
                given = arg.split("=", 1)[1]
            elif rest:
                given = rest.pop(0)
            else:
                return False
            if given != value:
                return True
    return False


def script_command(
    name: str, env: dict[str, str], args: list[str]
) -> tuple[str, list[str], dict[str, str]] | None:
    """What ``bash scripts/<name> args`` runs with ``env``: (module, argv, env), or None when the script's own
    bash checks refuse first (a count that is not a whole number in range, a flag the script fixes given
    another value), or it is not a training script."""
    if name in PASS_THROUGH:
        return PASS_THROUGH[name], list(args), env
    if fixed_flag_refused(name, args):
        return None
    if name in SCRIPT_ALIASES:
        name, var, value = SCRIPT_ALIASES[name]
        env = {**env, var: value}
    if name not in TRAIN_SCRIPTS:
        return None
    module, flags, wholes = TRAIN_SCRIPTS[name]
    for var, (low, high) in wholes.items():
        val = env.get(var, "")
        # e2c_check_whole in scripts/_launch_checks.sh: digits with an optional minus, at most 15 of them
        if val and not (
            re.fullmatch(r"-?[0-9]+", val)
            and len(val) <= 15
            and low <= int(val)
            and (high is None or int(val) <= high)
        ):
            return None
    argv = {
        "e2c.rl.launch": ["--algo", env.get("E2C_ALGO") or "grpo"],
        "e2c.sft.run": ["--mode", env.get("E2C_SFT_MODE") or "sft", "--nnodes", env.get("NNODES") or "1",
                        "--node-rank", env.get("NODE_RANK") or "0"],
    }.get(module, [])  # fmt: skip
    for var, flag in flags:
        if env.get(var):
            argv += [flag, env[var]]
    return module, [*argv, *args], env


def run(
    *args: str,
    env: dict[str, str] | None = None,
    timeout: int = 120,
    real: bool = False,
    input: str | None = None,
    replace_env: bool = False,
) -> subprocess.CompletedProcess:
    """A command line as a user types it, from the repository root: a Python entry point in this process
    (``timeout`` applies to real processes only), a training script as the Python launcher it runs
    (:func:`script_command`), in this process too; another shell script or ``real=True`` as a real process.
    ``input``: its standard input; ``replace_env``: ``env`` is the whole environment, not additions."""
    full_env = {"HF_HUB_OFFLINE": "1", **(env or {})}
    if replace_env:
        full_env = dict(env or {})
    script = Path(args[0]).name if args[0].endswith(".sh") else None
    command = (
        None
        if script is None or real
        else script_command(script, full_env if replace_env else {**os.environ, **full_env}, list(args[1:]))
    )
    if command is not None:
        module, argv, script_env = command
        return run_in_process(module, argv, script_env, input, replace_env=True)
    if args[0] == "-m" and not real:
        return run_in_process(args[1], list(args[2:]), full_env, input)
    if args[0].endswith(".py") and not real:
        return run_in_process(args[0], list(args[1:]), full_env, input)
    cmd = ["bash", *args] if args[0].endswith((".sh", ".sbatch")) else [sys.executable, *args]
    return subprocess.run(
        cmd,
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=full_env if replace_env else {**os.environ, **full_env},
        timeout=timeout,
        input=input,
    )


def run_in_process(
    target: str, argv: list[str], env: dict[str, str], stdin: str | None = None, replace_env: bool = False
) -> subprocess.CompletedProcess:
    """``python -m target argv`` (or ``python target argv`` for a file) as :func:`e2c.commandline.entry.run_main` runs it,
    in this process (:func:`entry_fuzz.call_main`); the exit status, stdout and stderr as a finished process
    gives them."""
    from entry_fuzz import call_main, load

    from e2c.commandline.parsing import resume_command

    mod = load(target)
    if not hasattr(mod, "main"):  # a package run with -m: its command, cli.py
        mod = load(f"{target}.cli")
    prog = target if not target.endswith(".py") else Path(target).name
    entry = [target] if target.endswith(".py") else ["-m", target]
    o = call_main(
        mod.main,
        argv,
        env,
        prog=prog,
        rerun=resume_command(entry, argv),
        argv0=target if target.endswith(".py") else str(mod.__file__),
        stdin=stdin or "",
        replace_env=replace_env,
    )
    return subprocess.CompletedProcess([sys.executable, *entry, *argv], int(o.code or 0), o.stdout, o.stderr)


def score(*args: str | Path, timeout: int = 120) -> subprocess.CompletedProcess:
    return run("-m", "e2c.eval.score", *map(str, args), timeout=timeout)


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (or ``root`` itself) with its bytes; links are not followed."""
    files = (
        [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink())
    )
    return {str(p): p.read_bytes() for p in files}


def assert_one_line_error(r: subprocess.CompletedProcess, *needles: str, code: int = 2) -> str:
    assert "Traceback" not in r.stdout + r.stderr, r.stderr[-3000:]
    lines = r.stderr.strip().splitlines()
    assert r.returncode == code, (r.returncode, r.stderr[-2000:])
    assert len(lines) == 1, r.stderr[-2000:]
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def write_jsonl(path: Path, *rows: object) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def make_dir(p: Path) -> Path:
    """A folder holding an earlier result (which a refused command must leave as it was)."""
    p.mkdir()
    (p / "earlier.jsonl").write_text('{"row": 0}\n')
    return p


def touch(p: Path) -> Path:
    """A plain file with content (which a refused command must leave as it was)."""
    p.write_text("keep me\n")
    return p
