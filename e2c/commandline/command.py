"""The ``e2c`` command: one front door to every stage of the pipeline.

``e2c <command> [flags]`` runs the same ``main`` as ``python -m e2c.<module>`` with the same parser, the
same one-line errors and exit codes (:mod:`e2c.commandline.entry`); only the name in ``--help`` and in error lines
reads ``e2c <command>``. The bash scripts (``scripts/*.sh``, the paper's interface) and the ``python -m``
forms keep working: they are other doors to the same code.

``e2c --help`` lists the commands; ``e2c completion bash`` prints a bash completion script (commands, then
each command's flags, read from its own parser when asked).
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from e2c.commandline import parsing
from e2c.commandline.argtypes import Choice
from e2c.commandline.entry import guarded
from e2c.core.errors import UserError

__all__ = ["COMMANDS", "Command", "command_flags", "completion_script", "main"]

PROG = "e2c"


@dataclass(frozen=True)
class Command:
    """A subcommand: its name, the module whose ``main(argv)`` it runs, a line for ``e2c --help``."""

    name: str
    module: str
    summary: str
    group: str


# In pipeline order: the --help listing is grouped by these stages.
COMMANDS: tuple[Command, ...] = (
    Command(
        "quickstart",
        "e2c.quickstart.cli",
        "the whole life cycle on one machine: data, SFT, RL, eval, TTS",
        "runs",
    ),
    Command(
        "claims", "e2c.claims.cli", "the paper's claims, each against its control, with intervals", "runs"
    ),
    Command("study", "e2c.study.cli", "ablation arms x seeds: screened, confirmed, one table", "runs"),
    Command(
        "reproduce",
        "e2c.study.reproduce",
        "the method's result: SFT 120 steps, GRPO stage 2, both on held-out problems, paired",
        "runs",
    ),
    Command("data", "e2c.data.prepare", "prepare SFT, RL, EF-SFT and evaluation data", "data"),
    Command(
        "download", "e2c.data.download", "download the paper's released data (resumable, verified)", "data"
    ),
    Command("sft", "e2c.sft.run", "SFT on E2C chains with verl (EF-SFT with --mode ef-sft)", "training"),
    Command(
        "rl", "e2c.rl.launch", "two-stage GRPO / DAPO with exploration-token weighting, on verl", "training"
    ),
    Command(
        "curriculum",
        "e2c.rl.curriculum",
        "e3 curriculum: RL stages, each a difficulty band at a response budget",
        "training",
    ),
    Command(
        "health",
        "e2c.rl.health.cli",
        "an RL run's health: did it have signal, did the weights move",
        "training",
    ),
    Command(
        "eval",
        "e2c.eval.run",
        "evaluate a model on math and medical benchmarks (avg@k, greedy)",
        "evaluation",
    ),
    Command(
        "passrate",
        "e2c.rl.passrate.cli",
        "sample prompts k times; keep those in a learnable band",
        "evaluation",
    ),
    Command(
        "score",
        "e2c.eval.score",
        "grade any JSONL or parquet of responses with the toolkit's grader",
        "evaluation",
    ),
    Command(
        "compare",
        "e2c.eval.compare",
        "evaluation runs side by side: accuracy with intervals, format, lengths",
        "evaluation",
    ),
    Command("tts", "e2c.tts.cli", "test-time scaling: search over short explorations", "test-time"),
    Command(
        "view",
        "e2c.view.cli",
        "one run's chains (or two side by side) as a page for the browser",
        "inspect",
    ),
    Command(
        "sandbox",
        "e2c.sandbox.cli",
        "check the sandbox that runs programs (e2c sandbox check)",
        "set-up",
    ),
    Command(
        "cluster",
        "e2c.launch.cluster",
        "wait for a ray cluster to have its nodes (the Slurm script's step)",
        "set-up",
    ),
    Command(
        "recipe-check",
        "e2c.recipe_check",
        "check the GPU recipe's configs at a cluster size, and time each stage",
        "set-up",
    ),
)
BY_NAME = {c.name: c for c in COMMANDS}
COMMAND = Choice(tuple(BY_NAME), "command")


def usage() -> str:
    """``e2c --help``: the commands by stage, one line each."""
    lines = [
        f"usage: {PROG} <command> [flags]    ({PROG} <command> --help for a command's flags)",
        "",
        "Explore-Execute Chain toolkit: every stage of the pipeline, one command each.",
    ]
    width = max(len(c.name) for c in COMMANDS)
    group = None
    for c in COMMANDS:
        if c.group != group:
            group = c.group
            lines += ["", f"{group}:"]
        lines.append(f"  {c.name:<{width}}  {c.summary}")
    lines += [
        "",
        "other:",
        f'  {"completion":<{width}}  print a shell completion script: eval "$({PROG} completion bash)"',
        "",
        "The scripts in scripts/ (the paper's interface) and `python -m e2c.<module>` run the same code.",
    ]
    return "\n".join(lines)


class _Parsed(Exception):
    """Raised from inside a command's parser to hand the parser out without running the command."""

    def __init__(self, parser: parsing.ArgumentParser) -> None:
        super().__init__()
        self.parser = parser


def command_flags(name: str) -> list[str]:
    """Every flag (and positional choice) of a command, read from the parser its ``main`` builds.

    The command runs up to its first ``parse_args`` and stops there: nothing is checked or written.
    """
    target = importlib.import_module(BY_NAME[name].module)
    caught: list[parsing.ArgumentParser] = []

    def hand_out(parser: parsing.ArgumentParser) -> None:
        caught.append(parser)
        raise _Parsed(parser)

    with parsing.parse_hook(hand_out), contextlib.suppress(_Parsed, SystemExit):
        target.main([])
    if not caught:
        return []
    words: list[str] = []
    for action in caught[0]._actions:
        words += action.option_strings or [str(c) for c in action.choices or ()]
    return sorted(set(words))


def completion_script(shell: str) -> str:
    """A completion script for ``shell`` (bash; zsh reads it through ``bashcompinit``)."""
    if shell != "bash":
        raise UserError(
            f"{PROG} completion: unknown shell {shell!r}; valid: bash (zsh: autoload bashcompinit)"
        )
    names = " ".join([*BY_NAME, "completion"])
    return f"""# {PROG} completion for bash: eval "$({PROG} completion bash)"
_{PROG}_complete() {{
  local cur="${{COMP_WORDS[COMP_CWORD]}}"
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W "{names}" -- "$cur"))
  elif [ "${{COMP_WORDS[1]}}" = completion ]; then
    COMPREPLY=($(compgen -W "bash" -- "$cur"))
  else
    COMPREPLY=($(compgen -W "$({PROG} completion flags "${{COMP_WORDS[1]}}" 2>/dev/null)" -- "$cur"))
  fi
}}
complete -o default -o bashdefault -F _{PROG}_complete {PROG}
"""


def _completion(args: Sequence[str]) -> int:
    if len(args) == 2 and args[0] == "flags":
        try:
            name = COMMAND.parse(args[1])
        except UserError as e:
            raise UserError(f"{PROG} completion flags {e}") from None
        print("\n".join(command_flags(name)))
        return 0
    if len(args) != 1:
        raise UserError(f'usage: {PROG} completion bash (then: eval "$({PROG} completion bash)")')
    print(completion_script(args[0]), end="")
    return 0


def launcher() -> list[str]:
    """The words that start this command again: the installed script's path, else ``python -m e2c``."""
    first = sys.argv[0] if sys.argv else ""
    if not first or first.endswith("__main__.py") or first == "-m":
        return [sys.executable, "-m", "e2c"]
    return [first]


def _run(name: str, args: list[str]) -> int:
    """Run a command's ``main`` under the entry guard, with ``e2c <name>`` as its name everywhere: in
    usage and error lines, in the command an interrupted run prints to resume, in the failure log."""
    prog = f"{PROG} {name}"
    words = [*launcher(), name]
    target = importlib.import_module(BY_NAME[name].module)
    saved = sys.argv[:]
    sys.argv[:] = [prog, *args]
    try:
        with parsing.command_prog(prog, words):
            rerun = parsing.resume_command((), args)
            return guarded(lambda: target.main(args), prog, rerun)
    finally:
        sys.argv[:] = saved


def main(argv: Sequence[str] | None = None) -> int:
    """``e2c <command> [flags]``; returns the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    name, rest = args[0], args[1:]
    if name == "completion":
        return guarded(lambda: _completion(rest), f"{PROG} completion")
    if name.startswith("-"):
        return guarded(lambda: _refuse(f"{PROG}: {name} is not a command; run {PROG} --help"), PROG)
    try:
        COMMAND.parse(name)
    except UserError as e:
        message = f"{PROG} {e}"
        return guarded(lambda: _refuse(message), PROG)
    return _run(name, rest)


def _refuse(message: str) -> int:
    raise UserError(message)


def console() -> None:
    """The installed ``e2c`` script (pyproject's [project.scripts])."""
    raise SystemExit(main())
