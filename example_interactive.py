#!/usr/bin/env python3
"""Interactive E2C demo: pick one of eight built-in problems (math, medical, code) or type your own.

    python example_interactive.py                         # the released 8B (GPU + hub), else embedded
    printf '1\n9\nWhat is 12*13?\n10\n' | python example_interactive.py --model tiny

The paper's menu: 1-8 the built-in problems, 9 your own problem (typed on the next line), 10 exit. Typing
a problem directly, or ``q``, also works.

Each answer shows the EXPLORATION PHASE and EXECUTION PHASE, the extracted answer (graded for built-in
problems) and per-phase token counts. Reads from a terminal or from piped stdin; ``q`` or end of input quits.
A line that is not UTF-8 text is skipped with one ``error:`` line on stderr, and the session goes on.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from e2c.commandline.argtypes import EXISTING_FILE
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.parsing import ArgumentParser
from e2c.core.errors import UserError
from e2c.data.registry import question_text
from e2c.demo import Demo, add_generation_flags, load, prepare, solve_and_show
from e2c.rewards.kinds import find_kind, kind_names

PROBLEMS = Path(__file__).resolve().with_name("example_problems.json")
QUIT = {"q", "quit", "exit"}
ECHO_CHARS = 200  # a piped line longer than this is echoed cut, with its length


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(description="Interactive E2C inference.")
    p.add_argument(
        "--problems",
        type=EXISTING_FILE,
        default=PROBLEMS,
        help="JSON list of problems (default: example_problems.json)",
    )
    add_generation_flags(p)
    return p


def load_problems(path: Path) -> list[dict[str, Any]]:
    """The built-in problems; a UserError line when the file is not readable or malformed."""
    try:
        items = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise UserError(f"--problems {path}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise UserError(f"--problems {path}: not UTF-8 text") from None
    except ValueError as e:
        raise UserError(f"--problems {path}: not valid JSON ({e})") from None
    if not isinstance(items, list) or not all(isinstance(i, dict) and i.get("problem") for i in items):
        raise UserError(f"--problems {path}: expected a JSON list of objects with a 'problem' field")
    for n, it in enumerate(items, 1):
        # Each field as the menu and the grader use it, so that a bad item is named now, not mid-session.
        why = problem_error(it)
        if why:
            raise UserError(f"--problems {path}: problem {n} {why}")
    return items


def problem_error(item: dict[str, Any]) -> str | None:
    """What is wrong with one built-in problem (text, options, answer, kind), or None."""
    if not isinstance(item["problem"], str) or not item["problem"].strip():
        return "has no problem text"
    opts = item.get("options")
    if opts is not None and not (
        isinstance(opts, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in opts.items())
    ):
        return "has options that are not a mapping of letters to texts"
    if item.get("answer") is not None and not isinstance(item["answer"], str):
        return f"has an answer that is not text ({item['answer']!r})"
    if "kind" in item and find_kind(item["kind"]) is None:
        return f"has an unknown kind {item['kind']!r}; valid: {', '.join(kind_names())}"
    return None


def menu(items: list[dict[str, Any]]) -> str:
    lines = ["", "Problems:"]
    for n, it in enumerate(items, 1):
        first = " ".join(str(it["problem"]).split())
        lines.append(
            f"  {n}. [{it.get('category', 'custom')}] {first[:72]}{'...' if len(first) > 72 else ''}"
        )
    lines.append(f"  {len(items) + 1}. Enter your own problem")
    lines.append(f"  {len(items) + 2}. Exit")
    return "\n".join(lines)


def read_line(prompt: str, tty: bool) -> str | None:
    """One input line (None at the end of input); piped lines are echoed after the prompt. Bytes that are
    not UTF-8 come back as surrogates (:func:`session` reads stdin with ``surrogateescape``): see
    :func:`is_text`."""
    try:
        line = input(prompt if tty else "")
    except EOFError:
        return None
    if not tty:
        print(prompt + echo(shown(line)))
    return line


def is_text(line: str) -> bool:
    """Whether an input line was UTF-8 text (no byte of it was read as a surrogate)."""
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown(line: str) -> str:
    """A line as it can be printed: bytes that were not UTF-8 as U+FFFD."""
    return line.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def skip_line(line: str) -> None:
    """The one line a non-UTF-8 input line gets; the session goes on."""
    bad = line.encode("utf-8", "surrogateescape")
    print(
        f"error: that input line is not UTF-8 text ({bad[:16]!r}); skipped, type it again",
        file=sys.stderr,
        flush=True,
    )


def question(item: dict[str, Any]) -> str:
    """The problem with its lettered options, rendered as the benchmarks' questions are."""
    opts = item.get("options") or {}
    return question_text(
        {"problem": item["problem"], "kind": "mcq" if opts else "math", "choices": list(opts.values())}
    )


def echo(line: str) -> str:
    """A piped input line as shown back: whole when short, else its start and its length."""
    if len(line) <= ECHO_CHARS:
        return line
    return f"{line[:ECHO_CHARS]}... ({len(line):,} characters)"


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    items = load_problems(args.problems)
    demo = prepare(args)
    checks_done()
    gen = load(demo)
    session(gen, demo, items)
    print("bye")
    return 0


def session(gen: Any, demo: Demo, items: list[dict[str, Any]]) -> None:
    """The menu loop, until q or the end of input; a problem that cannot run is one line, then the menu."""
    tty = sys.stdin.isatty()
    reconfigure = getattr(sys.stdin, "reconfigure", None)
    if reconfigure is not None:  # a line that is not UTF-8 is read (and refused), not a decoding error
        reconfigure(errors="surrogateescape")
    print(menu(items))
    own, leave = len(items) + 1, len(items) + 2
    while True:
        line = read_line(
            f"Pick 1-{len(items)}, {own} for your own problem, {leave} to exit (or type a problem): ", tty
        )
        if line is None:
            break
        if not is_text(line):
            skip_line(line)
            continue
        choice = line.strip()
        if not choice:
            print(menu(items))
            continue
        if choice.lower() in QUIT or choice == str(leave):
            break
        if choice == str(own):
            typed = read_line("Your problem: ", tty)
            if typed is None:
                break
            if not is_text(typed):
                skip_line(typed)
                continue
            if not typed.strip():
                print("no problem typed; back to the menu")
                continue
            problem, answer, kind, options = typed.strip(), None, "math", None
        elif choice.isdigit():
            k = int(choice)
            if not 1 <= k <= len(items):
                print(f"no problem {k}; pick 1-{leave}")
                continue
            it = items[k - 1]
            problem, answer = question(it), it.get("answer")
            kind, options = it.get("kind", "math"), it.get("options")
        else:
            problem, answer, kind, options = choice, None, "math", None
        try:
            solve_and_show(gen, demo, problem, answer, kind, options)
        except UserError as e:
            print(f"error: {e}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    run_main(main)
