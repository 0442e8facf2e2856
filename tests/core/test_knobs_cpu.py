"""One spelling per knob: the alias table in e2c/commandline/parsing.py, how parsers apply it, and its copy in the docs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from e2c.commandline.parsing import FLAG_ALIASES, ArgumentParser, canonical_flag

ROOT = Path(__file__).resolve().parents[2]
ENTRY_DIRS = ("e2c", "tts", "bench")
ENTRY_FILES = ("example_inference.py", "example_interactive.py")


def parser() -> ArgumentParser:
    p = ArgumentParser(prog="knobs")
    p.add_argument("--model", default="tiny")
    group = p.add_argument_group("sampling")
    group.add_argument("--temperature", type=float, default=1.0)
    exclusive = p.add_mutually_exclusive_group()
    exclusive.add_argument("--steps", type=int, default=1)
    return p


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--model_path", "m"], {"model": "m"}),
        (["--model-path=m"], {"model": "m"}),
        (["--temp", "0.5"], {"temperature": 0.5}),
        (["--total-steps", "3"], {"steps": 3}),
        (["--total_training_steps=4"], {"steps": 4}),
        (
            ["--model", "x", "--temperature", "0", "--steps", "2"],
            {"model": "x", "temperature": 0.0, "steps": 2},
        ),
    ],
)
def test_aliases_land_on_the_canonical_knob(argv: list[str], expected: dict) -> None:
    args = vars(parser().parse_args(argv))
    assert {k: args[k] for k in expected} == expected
    assert set(args) == {"model", "temperature", "steps"}  # no second destination per spelling


def test_help_lists_each_alias_next_to_its_flag() -> None:
    text = parser().format_help()
    assert "--model MODEL, --model_path MODEL, --model-path MODEL" in text
    assert "--temperature TEMPERATURE, --temp TEMPERATURE" in text


def test_unknown_spelling_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        parser().parse_args(["--modle", "x"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: unrecognized arguments: --modle")


def test_alias_table_is_consistent() -> None:
    seen: dict[str, str] = {}
    for canonical, aliases in FLAG_ALIASES.items():
        assert canonical.startswith("--") and "_" not in canonical, canonical
        for a in aliases:
            assert a not in FLAG_ALIASES, f"{a} is both an alias and a canonical flag"
            assert a not in seen, f"{a} is an alias of {seen.get(a)} and {canonical}"
            seen[a] = canonical
            assert canonical_flag(a) == canonical


PARSER = "e2c/commandline/parsing.py"  # the aliasing parser itself


def entry_modules() -> list[str]:
    """Module names of every file that builds a parser and has a ``main``."""
    files = [p for d in ENTRY_DIRS for p in (ROOT / d).rglob("*.py")] + [ROOT / f for f in ENTRY_FILES]
    out = []
    for path in files:
        text = path.read_text()
        if (
            "ArgumentParser(" in text
            and "def main(" in text
            and path.name != "cli.py"
            and path.relative_to(ROOT).as_posix() != PARSER
        ):
            out.append(str(path.relative_to(ROOT).with_suffix("")).replace("/", "."))
    return sorted(out)


def test_entry_points_define_canonical_spellings_only(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every entry point's ``--help``, built for real: each flag's first name is its canonical spelling."""
    import importlib
    import sys

    defined: list[tuple[str, str]] = []
    plain = ArgumentParser.add_argument

    def recording(self, *names, **kwargs):
        defined.extend((self.prog, n) for n in names if n.startswith("--"))
        return plain(self, *names, **kwargs)

    monkeypatch.setattr(ArgumentParser, "add_argument", recording)
    monkeypatch.syspath_prepend(str(ROOT))
    modules = entry_modules()
    assert len(modules) >= 10, modules
    for name in modules:
        module = importlib.import_module(name)
        monkeypatch.setattr(sys, "argv", [name, "--help"])
        with pytest.raises(SystemExit) as e:
            module.main()
        assert e.value.code in (0, None), name
        # Forget the module for the next entry point, and put it back afterwards: classes imported from it
        # elsewhere (dataclass type hints) are resolved through sys.modules.
        monkeypatch.delitem(sys.modules, name, raising=False)
    capsys.readouterr()
    assert len(defined) > 100  # every entry point's flags were seen
    aliased = [(prog, flag) for prog, flag in defined if canonical_flag(flag) != flag]
    assert not aliased, (
        f"define the canonical flag (its aliases come from e2c.commandline.parsing.FLAG_ALIASES): {aliased}"
    )


def test_entry_points_use_the_aliasing_parser() -> None:
    plain = []
    for d in ENTRY_DIRS:
        for path in (ROOT / d).rglob("*.py"):
            if (
                path.name != "cli.py"
                and path.relative_to(ROOT).as_posix() != PARSER
                and "argparse.ArgumentParser(" in path.read_text()
            ):
                plain.append(str(path.relative_to(ROOT)))
    assert not plain, f"use e2c.commandline.parsing.ArgumentParser (one-line errors, flag aliases): {plain}"


def test_docs_alias_table_matches_the_code() -> None:
    doc = (ROOT / "docs" / "configuration.md").read_text()
    section = doc.split("<!-- flag-aliases -->")[1]
    rows = re.findall(r"^\| `(--[^`]+)` \| (.+) \|$", section, flags=re.M)
    table = {flag: tuple(re.findall(r"`(--[^`]+)`", rest)) for flag, rest in rows}
    assert table == FLAG_ALIASES
