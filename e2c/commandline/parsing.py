"""Helpers shared by the command-line entry points: one-line errors, a non-zero exit, flag aliases, and
what every resumable run (eval, TTS) does on Ctrl-C or SIGTERM.

Every knob has one spelling, the same in every entry point (``--model``, ``--temperature``,
``--explore-budget``, ``--steps``, ...). Other spellings people bring from the paper's scripts or from
verl are accepted as aliases, all listed in :data:`FLAG_ALIASES`; :class:`ArgumentParser` adds them to a
flag when it is defined, so ``--help`` shows them and no entry point lists them itself.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shlex
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NoReturn

from e2c.commandline.argtypes import ValueType
from e2c.core.env import env_switch
from e2c.core.errors import Interrupted, UserError, fail
from e2c.core.paths import BASE_DIR_ENV

# canonical flag -> the other spellings it also accepts (the paper's scripts use underscores).
FLAG_ALIASES: dict[str, tuple[str, ...]] = {
    "--model": ("--model_path", "--model-path"),
    "--temperature": ("--temp",),
    "--top-p": ("--top_p",),
    "--max-tokens": ("--max_tokens",),
    "--explore-budget": ("--explore_budget",),
    "--execute-budget": ("--execute_budget",),
    "--explore-adv-coef": ("--explore-coef",),
    "--rl-explore-adv-coef": ("--rl-explore-coef",),
    "--steps": ("--total-steps", "--total_steps", "--total_training_steps", "--steps-per-stage"),
    "--output-dir": ("--output_dir", "--save-path", "--save_path"),
    "--trust-remote-code": ("--trust_remote_code",),
    "--local-dir": ("--local_dir",),
    "--target-dir": ("--target_dir",),
    "--data-dir": ("--data_dir",),
    "--results-path": ("--results_path",),  # cf_elo_calc.py's spelling
    "--pass-n": ("--pass_n",),
    "--train-data": ("--train_data", "--train_files"),
    "--val-data": ("--val_data", "--val_files"),
    "--tts-explore-budget": ("--tts-explore-tokens",),
    "--tts-execute-budget": ("--tts-execute-tokens",),
}


def canonical_flag(flag: str) -> str:
    """The one spelling of ``flag`` (itself when it is not an alias).

    >>> canonical_flag("--model_path"), canonical_flag("--temp"), canonical_flag("--seed")
    ('--model', '--temperature', '--seed')
    """
    for canonical, aliases in FLAG_ALIASES.items():
        if flag in aliases:
            return canonical
    return flag


def _aliases(names: tuple[str, ...]) -> list[str]:
    return [a for n in names for a in FLAG_ALIASES.get(n, ()) if a not in names]


def _with_aliases(group):  # an argparse group: its flags get their aliases too
    plain = group.add_argument
    group.add_argument = lambda *names, **kwargs: plain(*names, *_aliases(names), **kwargs)
    return group


# Set while the ``e2c`` command runs one of its subcommands (e2c.commandline.command): the name parsers show, and a
# function that sees each parser before it parses (how ``e2c completion`` reads a command's flags).
_COMMAND_PROG: str | None = None
_COMMAND_WORDS: tuple[str, ...] = ()
_PARSE_HOOK: Callable[[argparse.ArgumentParser], None] | None = None


@contextlib.contextmanager
def command_prog(prog: str, words: Sequence[str]) -> Iterator[None]:
    """Inside this block parsers call themselves ``prog`` (``e2c eval``), whatever their module says, and
    :func:`resume_command` reruns the run with ``words`` (the launcher and the subcommand)."""
    global _COMMAND_PROG, _COMMAND_WORDS
    saved = _COMMAND_PROG, _COMMAND_WORDS
    _COMMAND_PROG, _COMMAND_WORDS = prog, tuple(words)
    try:
        yield
    finally:
        _COMMAND_PROG, _COMMAND_WORDS = saved


@contextlib.contextmanager
def parse_hook(hook: Callable[[argparse.ArgumentParser], None]) -> Iterator[None]:
    """``hook(parser)`` runs as each parser starts parsing, inside this block (it may raise to stop there)."""
    global _PARSE_HOOK
    saved, _PARSE_HOOK = _PARSE_HOOK, hook
    try:
        yield
    finally:
        _PARSE_HOOK = saved


class ArgumentParser(argparse.ArgumentParser):
    """argparse with a one-line error (no usage dump), exit code 2, and the aliases of
    :data:`FLAG_ALIASES` added to every canonical flag an entry point defines."""

    def __init__(self, *args, **kwargs) -> None:
        # A subparser's prog already starts with its parent's (``e2c sandbox check``): left as it is.
        if _COMMAND_PROG and not str(kwargs.get("prog") or "").startswith(_COMMAND_PROG):
            kwargs["prog"] = _COMMAND_PROG
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args=None, namespace=None):  # type: ignore[override]
        if _PARSE_HOOK is not None:
            _PARSE_HOOK(self)
        return super().parse_known_args(args, namespace)

    def add_argument(self, *names: str, **kwargs):  # type: ignore[override]
        return super().add_argument(*names, *_aliases(names), **kwargs)

    def add_argument_group(self, *args, **kwargs):  # type: ignore[override]
        return _with_aliases(super().add_argument_group(*args, **kwargs))

    def add_mutually_exclusive_group(self, **kwargs):  # type: ignore[override]
        return _with_aliases(super().add_mutually_exclusive_group(**kwargs))

    def _get_value(self, action: argparse.Action, arg_string: str):  # type: ignore[override]
        """A value of a declared type (:mod:`e2c.commandline.argtypes`) is refused as ``--flag must be ..., got ...``."""
        if isinstance(action.type, ValueType):
            try:
                return action.type.parse(arg_string)
            except UserError as e:
                name = action.option_strings[0] if action.option_strings else action.dest
                self.error(f"{name} {e}")
        return super()._get_value(action, arg_string)

    def error(self, message: str) -> NoReturn:
        fail(f"{message} (see {self.prog} --help)")


VERBOSE_ENV = "E2C_VERBOSE"
_QUIET = False


def verbose_env() -> bool:
    """``E2C_VERBOSE=1``: the libraries' own log lines on the terminal (as ``--verbose`` does)."""
    return env_switch(VERBOSE_ENV) is True


def quiet_libraries(verbose: bool = False, generation: bool = True) -> None:
    """Keep the libraries' own log lines (vLLM's INFO and WARNING: KV-cache layout, thread binding, chat
    template; transformers' loading bars and advisories) off the terminal, so it shows the toolkit's progress
    and results; errors still print. vLLM's engine processes inherit the setting. ``verbose`` (``--verbose``
    where an entry point has it, or ``E2C_VERBOSE=1``): leave them as they are; a ``VLLM_LOGGING_LEVEL`` or
    ``VLLM_LOGGING_CONFIG_PATH`` of the user's own stands too. ``generation=False`` (the SFT launcher):
    transformers only.

    Call before vLLM is imported: vLLM reads its logging settings once, at import."""
    global _QUIET
    if verbose or verbose_env():
        return
    import logging
    import warnings

    from transformers.utils import logging as hf_logging

    _QUIET = True
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    if not generation:  # a trainer's torch warnings (NCCL, distributed) are the user's to see
        return
    if "VLLM_LOGGING_CONFIG_PATH" not in os.environ:
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
        # vLLM warns through Python's last-resort handler before its own logging is set up (Triton's check)
        logging.getLogger("vllm").setLevel(os.environ["VLLM_LOGGING_LEVEL"])
    # torch's C++ warnings (NUMA binding in vLLM's CPU worker) in processes started from here on
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    # deprecations raised inside vLLM: not the user's to act on
    warnings.filterwarnings("ignore", module=r"vllm(\.|$)")


def libraries_quiet() -> bool:
    """Whether :func:`quiet_libraries` quieted them in this process (vLLM's loading bar follows it)."""
    return _QUIET


# ------------------------------------------------------------------------- runs shared by eval and TTS
DTYPES = ("auto", "float32", "bfloat16", "float16")  # --dtype choices of the generation entry points


def slug(text: str) -> str:
    """``text`` as one folder name: runs of other characters become ``_``.

    >>> slug("TingheOliver/Explore-Execute-Chain-Qwen")
    'TingheOliver_Explore-Execute-Chain-Qwen'
    """
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "x"


def interrupt_on_sigterm() -> None:
    """Turn SIGTERM into :class:`Interrupted` (the default action kills the process without a word)."""

    def handler(signum: int, frame: object) -> None:
        raise Interrupted

    signal.signal(signal.SIGTERM, handler)


def resume_command(entry: Sequence[str], argv: Sequence[str]) -> str:
    """The shell command that reruns this one from this working directory, with ``E2C_BASE_DIR`` when it is
    set (runs resume by rerunning).
    ``entry``: what follows the interpreter (``-m e2c.eval.run``); under the ``e2c`` command, its words."""
    words = list(_COMMAND_WORDS) if _COMMAND_WORDS else [sys.executable, *entry]
    # The runs' base folder decides where a default output folder is: the rerun needs it to find the run.
    base = os.environ.get(BASE_DIR_ENV, "").strip()
    env = f"{BASE_DIR_ENV}={shlex.quote(base)} " if base else ""
    return f"cd {shlex.quote(os.getcwd())} && {env}{shlex.join([*words, *argv])}"


def exit_interrupted(exc: KeyboardInterrupt, saved: str, command: str) -> NoReturn:
    """One line (what was saved, the command that resumes) and exit 130 (Ctrl-C) or 143 (SIGTERM)."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)  # a second Ctrl-C must not cut this short into a traceback
    name, code = ("SIGTERM", 143) if isinstance(exc, Interrupted) else ("Ctrl-C", 130)
    print(f"interrupted ({name}): {saved}; resume with: {command}", file=sys.stderr, flush=True)
    raise SystemExit(code)


def count_lines(path: Path) -> int:
    """Complete lines of a results file (a line cut by the interrupt is dropped on resume)."""
    try:
        return path.read_bytes().count(b"\n")
    except OSError:
        return 0


def plural(n: int, word: str) -> str:
    """``3 results``, ``1 result``."""
    return f"{n} {word}{'' if n == 1 else 's'}"
