"""scripts/gpu_recipe.sh: with DRY_RUN=1 it prints one command per step, and every printed command's flags
parse with the entry point it names (each entry point's own parser, run up to its parse and no further)."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import recipe_dry_run

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "scripts" / "gpu_recipe.sh"

# Runs each command's entry point with argparse stopped right after parsing: PARSED when every flag was
# accepted, else argparse's own error (exit 2) or the unknown flags left over by parse_known_args.
# A dry run names models and files that earlier steps make (the SFT model, stage 2's checkpoint, the
# prepared data): the flag types' check that they exist is the real run's, at each step; here every other
# check of a value (numbers, choices, text, output paths) still applies.
CHECK = r"""
import argparse, json, runpy, sys
from e2c.commandline import argtypes

def made_by_an_earlier_step(original):
    def parse(self, text):
        if str(text).strip() and getattr(self, "mode", "file") in ("file", "dir"):
            return text
        return original(self, text)
    return parse

argtypes.PathType.parse = made_by_an_earlier_step(argtypes.PathType.parse)
argtypes.ModelRef.parse = made_by_an_earlier_step(argtypes.ModelRef.parse)

class Parsed(BaseException):  # not an Exception: no entry point's handler may swallow it
    pass

original = argparse.ArgumentParser.parse_known_args

def parse_known_args(self, args=None, namespace=None):
    ns, rest = original(self, args, namespace)
    flags = [a for a in rest if a.startswith("-")]
    if flags:
        self.error("unrecognized arguments: " + " ".join(flags))
    raise Parsed()

argparse.ArgumentParser.parse_known_args = parse_known_args
results = []
for argv in json.loads(sys.argv[1]):
    sys.argv = argv[1:] if argv[1] != "-m" else [argv[2], *argv[3:]]
    try:
        if argv[1] == "-m":
            runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(argv[1], run_name="__main__")
        results.append("ran past its parser")
    except Parsed:
        results.append("PARSED")
    except SystemExit as e:
        results.append(f"exit {e.code}")
print(json.dumps(results))
"""


def _dry_run(**env: str) -> list[list[str]]:
    code, out, err = recipe_dry_run(**env)  # one dry run per environment for the session
    assert code == 0, err
    return [shlex.split(line[2:]) for line in out.splitlines() if line.startswith("+ ")]


def _entry(argv: list[str]) -> str:
    return argv[2] if argv[1] == "-m" else argv[1]


def _parse_all(commands: list[list[str]]) -> list[str]:
    r = subprocess.run(
        [sys.executable, "-c", CHECK, json.dumps(commands)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # a launcher or script as real processes, verl imported in each: ~10-50 s on 2 cores
def test_dry_run_prints_every_step_in_order() -> None:
    commands = _dry_run()
    assert [_entry(c) for c in commands] == [
        "e2c.data.prepare",
        "e2c.sft.run",
        "e2c.rl.launch",
        "e2c.rl.launch",
        "e2c.eval.run",
        "e2c.tts",
    ]
    rl1, rl2 = commands[2], commands[3]
    assert rl1[rl1.index("--stage") + 1] == "1" and rl2[rl2.index("--stage") + 1] == "2"
    # stage 2 starts from stage 1's run; stage 1 from the SFT model
    assert rl2[rl2.index("--stage1-dir") + 1] == rl1[rl1.index("--output-dir") + 1]
    sft = commands[1]
    assert rl1[rl1.index("--model") + 1] == sft[sft.index("--output-dir") + 1] + "/final"


@pytest.mark.slow  # a launcher or script as real processes, verl imported in each: ~10-50 s on 2 cores
def test_from_and_knobs_reach_the_commands() -> None:
    commands = _dry_run(FROM="rl2", RL2_STEPS="5", EVAL_MAX_TOKENS="1024", TTS_METHODS="")
    assert [_entry(c) for c in commands] == ["e2c.rl.launch", "e2c.eval.run", "e2c.tts"]
    assert commands[0][commands[0].index("--steps") + 1] == "5"
    assert commands[1][commands[1].index("--max-tokens") + 1] == "1024"
    assert "--methods" not in commands[2]


def test_bad_from_is_refused() -> None:
    r = subprocess.run(
        ["bash", str(RECIPE)],
        env={**os.environ, "DRY_RUN": "1", "FROM": "nope"},
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "FROM must be one of" in r.stderr


@pytest.mark.parametrize(
    "knobs", [{}, {"SFT_STEPS": "3", "RL1_STEPS": "2", "DATA_MIRROR": "1", "EVAL_MAX_TOKENS": "64"}]
)
@pytest.mark.slow  # a launcher or script as real processes, verl imported in each: ~10-50 s on 2 cores
def test_every_printed_command_parses(knobs: dict[str, str]) -> None:
    commands = _dry_run(**knobs)
    results = _parse_all(commands)
    assert results == ["PARSED"] * len(commands), list(
        zip([_entry(c) for c in commands], results, strict=True)
    )


def test_the_checker_catches_a_bad_flag() -> None:
    """The parse check fails on a flag an entry point does not have (so the test above can fail)."""
    commands = _dry_run(FROM="eval")
    commands[0] = [*commands[0], "--no-such-flag", "1"]
    commands[1] = [*commands[1], "--bogus"]
    assert _parse_all(commands) == ["exit 2", "exit 2"]
